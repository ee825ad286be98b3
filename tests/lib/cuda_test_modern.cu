// Test entry points of the ModernBERT and DeBERTa kernels (tests/lib/cuda_test_modern.h).
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu/cuda/cuda_gemm.cuh"
#include "tests/lib/cuda_test_api.h"
#include "tests/lib/cuda_test_modern.h"
#include "tests/lib/cuda_test_util.cuh"

// The device table of cuda_rope for theta, rows past every pos[t] (t < n); NULL on failure.
static float *tm_rope_table(float theta, int hd, const int32_t *pos, int n) {
    int rows = 1;
    for (int t = 0; t < n; t++)
        if (pos[t] + 1 > rows) rows = pos[t] + 1;
    float *tab = (float *)malloc(sizeof(float) * (size_t)rows * hd), *dtab = NULL;
    if (!tab) return NULL;
    cuda_rope_table(theta, hd, rows, tab); // the table the backend makes at setup
    dtab = (float *)ta_dup(tab, sizeof(float) * (size_t)rows * hd);
    free(tab);
    return dtab;
}

template <typename T>
static int tm_rope(float *x, int ld, int k_off, const int32_t *pos, int n, int heads, int hd,
                   float theta) {
    int rc = 0;
    float *dtab = tm_rope_table(theta, hd, pos, n);
    T *dx = ta_upload<T>(x, (size_t)n * ld);
    int32_t *dpos = (int32_t *)ta_dup(pos, (size_t)n * 4);
    if (!dx || !dpos || !dtab) {
        rc = -1;
        goto done;
    }
    TA_CHECK(cuda_rope<T>(dx, ld, dx + k_off, ld, dpos, n, heads, hd, dtab, 0));
    TA_CHECK(cudaDeviceSynchronize());
    rc = ta_download<T>(dx, (size_t)n * ld, x);
done:
    cudaFree(dx), cudaFree(dpos), cudaFree(dtab);
    return rc;
}
extern "C" int gpu_cuda_test_rope(const char *precision, float *x, int ld, int k_off,
                                  const int32_t *pos, int n, int heads, int head_dim, float theta) {
    return is_bf16(precision) ? tm_rope<__nv_bfloat16>(x, ld, k_off, pos, n, heads, head_dim, theta)
                              : tm_rope<__half>(x, ld, k_off, pos, n, heads, head_dim, theta);
}

// theta > 0: the keys turned in place first (cuda_rope, keys only), the queries by the kernel
// into out; then the queries turned in place too and the kernel run without RoPE into
// out_inplace (the path the kernel's turn replaces, for a bit-for-bit comparison).
template <typename T>
static int tm_attention(const float *q, const float *k, const float *v, int ld, const int32_t *cu,
                        int n_seqs, int heads, float scale, int window, const float *c2p,
                        const float *p2c, const int32_t *rrow, int rrow_mid, int R, int wgmma,
                        const int32_t *pos, float theta, float *out, float *out_inplace) {
    int n = cu[n_seqs], rc = 0, maxlen = 0;
    for (int s = 0; s < n_seqs; s++)
        if (cu[s + 1] - cu[s] > maxlen) maxlen = cu[s + 1] - cu[s];
    size_t span = (size_t)(n - 1) * ld + (size_t)heads * 64, nb = (size_t)n * heads * R;
    const int rope = theta > 0.f, q_tiles = (maxlen + 63) / 64;
    T *dq = ta_upload<T>(q, span), *dk = ta_upload<T>(k, span), *dv = ta_upload<T>(v, span);
    int32_t *dcu = (int32_t *)ta_dup(cu, (size_t)(n_seqs + 1) * 4);
    T *o = ta_poisoned<T>((size_t)n * heads * 64);
    T *o2 = rope ? ta_poisoned<T>((size_t)n * heads * 64) : NULL;
    T *dc = c2p ? ta_upload<T>(c2p, nb) : NULL, *dp = p2c ? ta_upload<T>(p2c, nb) : NULL;
    int32_t *dr = rrow ? (int32_t *)ta_dup(rrow, (size_t)(2 * rrow_mid + 1) * 4) : NULL;
    int32_t *dpos = rope ? (int32_t *)ta_dup(pos, (size_t)n * 4) : NULL;
    float *dtab = rope ? tm_rope_table(theta, 64, pos, n) : NULL;
    cuda_att_opts_t<T> opt = {};
    opt.scale = scale, opt.window = window, opt.c2p = dc, opt.p2c = dp, opt.rrow = dr;
    opt.rrow_mid = rrow_mid, opt.R = R, opt.heads = heads, opt.wgmma = wgmma;
    opt.rope = dtab, opt.pos = dpos, opt.rope_dim = 64;
    if (!dq || !dk || !dv || !dcu || !o || (c2p && !dc) || (p2c && !dp) || (rrow && !dr) ||
        (rope && (!o2 || !dpos || !dtab))) {
        rc = -1;
        goto done;
    }
    if (rope) TA_CHECK(cuda_rope<T>((T *)NULL, 0, dk, ld, dpos, n, heads, 64, dtab, 0));
    TA_CHECK(cuda_attention_opts<T>(dq, dk, dv, ld, dcu, n_seqs, heads, q_tiles, o, heads * 64,
                                    &opt, 0));
    if (rope) {
        TA_CHECK(cuda_rope<T>((T *)NULL, 0, dq, ld, dpos, n, heads, 64, dtab, 0));
        opt.rope = NULL, opt.pos = NULL;
        TA_CHECK(cuda_attention_opts<T>(dq, dk, dv, ld, dcu, n_seqs, heads, q_tiles, o2, heads * 64,
                                        &opt, 0));
    }
    TA_CHECK(cudaDeviceSynchronize());
    rc = ta_download<T>(o, (size_t)n * heads * 64, out);
    if (rc == 0 && rope) rc = ta_download<T>(o2, (size_t)n * heads * 64, out_inplace);
done:
    cudaFree(dq), cudaFree(dk), cudaFree(dv), cudaFree(dcu), cudaFree(o), cudaFree(o2);
    cudaFree(dc), cudaFree(dp), cudaFree(dr), cudaFree(dpos), cudaFree(dtab);
    return rc;
}
// The kernel the test asks for: 1 wgmma, 0 mma.sync, -1 none (wgmma on a device without it).
static int tm_wgmma(int kernel) {
    const int have = gpu_cuda_test_has_wgmma();
    if (kernel == GPU_CUDA_TEST_ATT_WGMMA && !have) return -1;
    return kernel == GPU_CUDA_TEST_ATT_MMA ? 0 : have;
}
extern "C" int gpu_cuda_test_attention_opts(const char *precision, int kernel, const float *q,
                                            const float *k, const float *v, int ld,
                                            const int32_t *cu, int n_seqs, int heads, float scale,
                                            int window, const float *c2p, const float *p2c,
                                            const int32_t *rrow, int rrow_mid, int R, float *out) {
    const int wgmma = tm_wgmma(kernel);
    if (ld % 8 != 0 || wgmma < 0) return -1;
    return is_bf16(precision)
               ? tm_attention<__nv_bfloat16>(q, k, v, ld, cu, n_seqs, heads, scale, window, c2p,
                                             p2c, rrow, rrow_mid, R, wgmma, NULL, 0.f, out, NULL)
               : tm_attention<__half>(q, k, v, ld, cu, n_seqs, heads, scale, window, c2p, p2c, rrow,
                                      rrow_mid, R, wgmma, NULL, 0.f, out, NULL);
}
extern "C" int gpu_cuda_test_attention_rope(const char *precision, int kernel, const float *q,
                                            const float *k, const float *v, int ld,
                                            const int32_t *cu, int n_seqs, int heads, int window,
                                            const int32_t *pos, float theta, float *out,
                                            float *out_inplace) {
    const int wgmma = tm_wgmma(kernel);
    if (ld % 8 != 0 || wgmma < 0 || theta <= 0.f) return -1;
    return is_bf16(precision)
               ? tm_attention<__nv_bfloat16>(q, k, v, ld, cu, n_seqs, heads, 0.125f, window, NULL,
                                             NULL, NULL, 0, 0, wgmma, pos, theta, out, out_inplace)
               : tm_attention<__half>(q, k, v, ld, cu, n_seqs, heads, 0.125f, window, NULL, NULL,
                                      NULL, 0, 0, wgmma, pos, theta, out, out_inplace);
}

template <typename T> static int tm_geglu(float *x, int n, int I, int act) {
    int rc = 0;
    T *dx = ta_upload<T>(x, (size_t)n * 2 * I);
    if (!dx) return -1;
    TA_CHECK(cuda_geglu<T>(dx, n, I, act, 0));
    TA_CHECK(cudaDeviceSynchronize());
    rc = ta_download<T>(dx, (size_t)n * 2 * I, x);
done:
    cudaFree(dx);
    return rc;
}
extern "C" int gpu_cuda_test_geglu(const char *precision, float *x, int n, int I, int act) {
    return is_bf16(precision) ? tm_geglu<__nv_bfloat16>(x, n, I, act)
                              : tm_geglu<__half>(x, n, I, act);
}

template <typename T>
static int tm_mean_pool(const float *x, const int32_t *cu, int n_seqs, int H, float *out) {
    int rc = 0, n = cu[n_seqs];
    T *dx = ta_upload<T>(x, (size_t)n * H);
    int32_t *dcu = (int32_t *)ta_dup(cu, (size_t)(n_seqs + 1) * 4);
    float *dout = NULL;
    if (!dx || !dcu || cudaMalloc(&dout, (size_t)n_seqs * H * 4) != cudaSuccess) {
        rc = -1;
        goto done;
    }
    TA_CHECK(cudaMemset(dout, 0xFF, (size_t)n_seqs * H * 4));
    TA_CHECK(cuda_mean_pool<T>(dx, H, dcu, n_seqs, H, dout, 0));
    TA_CHECK(cudaMemcpy(out, dout, (size_t)n_seqs * H * 4, cudaMemcpyDeviceToHost));
done:
    cudaFree(dx), cudaFree(dcu), cudaFree(dout);
    return rc;
}
extern "C" int gpu_cuda_test_mean_pool(const char *precision, const float *x, const int32_t *cu,
                                       int n_seqs, int H, float *out) {
    return is_bf16(precision) ? tm_mean_pool<__nv_bfloat16>(x, cu, n_seqs, H, out)
                              : tm_mean_pool<__half>(x, cu, n_seqs, H, out);
}

template <typename T>
static int tm_rel(int bf16, const float *x, int ldx, int n, const float *rel, int R, int heads,
                  int hd, float *out) {
    int rc = 0;
    const size_t nout = (size_t)n * heads * R;
    T *dx = ta_upload<T>(x, (size_t)(n - 1) * ldx + (size_t)heads * hd);
    T *drel = ta_upload<T>(rel, (size_t)R * heads * hd), *dout = ta_poisoned<T>(nout);
    const size_t ws_bytes = 4u << 20;
    void *ws = NULL;
    cuda_rel_gemm_t r;
    memset(&r, 0, sizeof r);
    if (!dx || !drel || !dout || cudaMalloc(&ws, ws_bytes) != cudaSuccess ||
        cuda_rel_init(&r, bf16, ws, ws_bytes) != 0) {
        rc = -1;
        goto done;
    }
    if (cuda_rel_scores<T>(&r, dx, ldx, n, drel, R, heads, hd, dout, 0) != 0) {
        fprintf(stderr, "cuda_rel_scores failed\n");
        rc = -1;
        goto done;
    }
    TA_CHECK(cudaDeviceSynchronize());
    rc = ta_download<T>(dout, nout, out);
done:
    cuda_rel_free(&r);
    cudaFree(ws);
    cudaFree(dx), cudaFree(drel), cudaFree(dout);
    return rc;
}
extern "C" int gpu_cuda_test_rel_scores(const char *precision, const float *x, int ldx, int n,
                                        const float *rel, int R, int heads, int head_dim,
                                        float *out) {
    return is_bf16(precision) ? tm_rel<__nv_bfloat16>(1, x, ldx, n, rel, R, heads, head_dim, out)
                              : tm_rel<__half>(0, x, ldx, n, rel, R, heads, head_dim, out);
}
