// Test entry points for single kernels (tests/lib/cuda_test_api.h), linked by the GPU tests
// and gpu_bench only. These allocate per call: they are never on the backend's path, whose
// memory is one arena.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu/cuda/cuda_backend.h"
#include "gpu/cuda/cuda_backend_int.cuh"
#include "gpu/cuda/cuda_common.cuh"
#include "gpu/cuda/cuda_gemm.cuh"
#include "gpu/cuda/cuda_graph.cuh"
#include "tests/lib/cuda_test_api.h"
#include "tests/lib/cuda_test_util.cuh"

#define GPU_WS_TEST (32u << 20) /* cuBLASLt workspace of the test calls */

// The current device's SM count (sizes the LayerNorm grid, as the backend's init asks it).
static int ta_sms(void) {
    int dev = 0, sms = 0;
    if (cudaGetDevice(&dev) != cudaSuccess ||
        cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess)
        return 1;
    return sms;
}

extern "C" int gpu_cuda_test_has_wgmma(void) {
    int dev = 0;
    return cudaGetDevice(&dev) == cudaSuccess && cuda_attention_has_wgmma(dev);
}

// GPU_CUDA_TEST_ATT_* to cuda_attention's wgmma flag; -1 when the kernel cannot run here.
static int ta_wgmma(int kernel) {
    int have = gpu_cuda_test_has_wgmma();
    if (kernel == GPU_CUDA_TEST_ATT_MMA) return 0;
    if (kernel == GPU_CUDA_TEST_ATT_WGMMA) return have ? 1 : -1;
    return have;
}

extern "C" void gpu_cuda_test_round(const char *precision, float *x, size_t n) {
    for (size_t i = 0; i < n; i++)
        x[i] = is_bf16(precision) ? __bfloat162float(__float2bfloat16_rn(x[i]))
                                  : __half2float(__float2half_rn(x[i]));
}

template <typename T>
static int ta_embed_ln(const gpu_model_t *m, const int32_t *ids, const int32_t *cu, int n_seqs,
                       float *out) {
    int H = m->cfg.emb_size, n = cu[n_seqs], rc = 0; // rows of E, as gpu_ref_embed_ln
    int32_t *pos = (int32_t *)malloc((size_t)n * 4);
    for (int s = 0; s < n_seqs; s++)
        for (int t = cu[s]; t < cu[s + 1]; t++)
            pos[t] = t - cu[s];
    T *word = ta_upload<T>(m->w.word_emb, (size_t)m->cfg.vocab_size * H);
    T *pe = ta_upload<T>(m->w.pos_emb, (size_t)m->cfg.max_pos * H);
    T *te = ta_upload<T>(m->w.type_emb, (size_t)H);
    float *g = (float *)ta_dup(m->w.emb_ln_g, H * 4), *b = (float *)ta_dup(m->w.emb_ln_b, H * 4);
    int32_t *d_ids = (int32_t *)ta_dup(ids, (size_t)n * 4), *d_pos = (int32_t *)ta_dup(pos, n * 4);
    T *o = ta_poisoned<T>((size_t)n * H);
    if (!word || !pe || !te || !g || !b || !d_ids || !d_pos || !o) {
        rc = -1;
        goto done;
    }
    TA_CHECK((cuda_embed_ln<T, T>(d_ids, d_pos, n, word, pe, te, g, b, H, m->cfg.ln_eps, (T *)NULL,
                                  o, 0)));
    TA_CHECK(cudaDeviceSynchronize());
    rc = ta_download<T>(o, (size_t)n * H, out);
done:
    free(pos);
    cudaFree(word), cudaFree(pe), cudaFree(te), cudaFree(g), cudaFree(b), cudaFree(d_ids),
        cudaFree(d_pos), cudaFree(o);
    return rc;
}
extern "C" int gpu_cuda_test_embed_ln(const gpu_model_t *m, const char *precision,
                                      const int32_t *ids, const int32_t *cu, int n_seqs,
                                      float *out) {
    return is_bf16(precision) ? ta_embed_ln<__nv_bfloat16>(m, ids, cu, n_seqs, out)
                              : ta_embed_ln<__half>(m, ids, cu, n_seqs, out);
}

template <typename T>
static int ta_linear(int bf16, const float *x, const float *w, const float *b, const float *res,
                     int n, int in, int out, int gelu, float *y) {
    int rc = 0;
    cuda_gemm_t g;
    memset(&g, 0, sizeof(g));
    common_err_t err;
    void *ws = NULL;
    T *dx = ta_upload<T>(x, (size_t)n * in), *dw = ta_upload<T>(w, (size_t)out * in);
    T *db = b ? ta_upload<T>(b, (size_t)out) : NULL;
    T *dy = ta_poisoned<T>((size_t)n * out);
    // The residual is added in place, as the backend does (y starts as the residual).
    if (res && dy) {
        T *dr = ta_upload<T>(res, (size_t)n * out);
        if (dr) cudaMemcpy(dy, dr, (size_t)n * out * sizeof(T), cudaMemcpyDeviceToDevice);
        cudaFree(dr);
    }
    if (!dx || !dw || (b && !db) || !dy || cudaMalloc(&ws, GPU_WS_TEST) != cudaSuccess ||
        cuda_gemm_init(&g, bf16 ? CUDA_GEMM_BF16 : CUDA_GEMM_FP16, ws, GPU_WS_TEST, &err) != 0) {
        rc = -1;
        goto done;
    }
    {
        int epi = gelu ? CUDA_GEMM_GELU_BIAS : (db ? CUDA_GEMM_BIAS : CUDA_GEMM_PLAIN);
        if (cuda_gemm_run(&g, dw, dx, dy, db, res ? dy : NULL, n, out, in, epi, 0, &err) != 0) {
            fprintf(stderr, "%s\n", err.message);
            rc = -1;
            goto done;
        }
    }
    TA_CHECK(cudaDeviceSynchronize());
    rc = ta_download<T>(dy, (size_t)n * out, y);
done:
    if (g.lt) cuda_gemm_free(&g);
    cudaFree(ws), cudaFree(dx), cudaFree(dw), cudaFree(db), cudaFree(dy);
    return rc;
}
extern "C" int gpu_cuda_test_linear(const char *precision, const float *x, const float *w,
                                    const float *b, const float *res, int n, int in, int out,
                                    int gelu, float *y) {
    return is_bf16(precision) ? ta_linear<__nv_bfloat16>(1, x, w, b, res, n, in, out, gelu, y)
                              : ta_linear<__half>(0, x, w, b, res, n, in, out, gelu, y);
}

// R as the backend uses it: fp16 rows for fp16, an fp32 residual for bf16.
template <typename T, typename R>
static int ta_add_ln(const float *x, const float *res, const float *g, const float *b, int n, int H,
                     float eps, float *out) {
    int rc = 0;
    T *dx = ta_upload<T>(x, (size_t)n * H);
    R *dr = sizeof(R) == 4 ? (R *)ta_dup(res, (size_t)n * H * 4)
                           : (R *)(void *)ta_upload<T>(res, (size_t)n * H);
    float *dg = (float *)ta_dup(g, H * 4), *dbb = (float *)ta_dup(b, H * 4);
    T *o = ta_poisoned<T>((size_t)n * H);
    if (!dx || !dr || !dg || !dbb || !o) {
        rc = -1;
        goto done;
    }
    TA_CHECK((cuda_add_ln<T, R>(dx, dr, dg, dbb, n, H, eps, (R *)NULL, o, ta_sms(), 0)));
    TA_CHECK(cudaDeviceSynchronize());
    rc = ta_download<T>(o, (size_t)n * H, out);
done:
    cudaFree(dx), cudaFree(dr), cudaFree(dg), cudaFree(dbb), cudaFree(o);
    return rc;
}
extern "C" int gpu_cuda_test_add_ln(const char *precision, const float *x, const float *res,
                                    const float *g, const float *b, int n, int H, float eps,
                                    float *out) {
    return is_bf16(precision) ? ta_add_ln<__nv_bfloat16, float>(x, res, g, b, n, H, eps, out)
                              : ta_add_ln<__half, __half>(x, res, g, b, n, H, eps, out);
}

template <typename T>
static int ta_attention(int wgmma, const float *q, const float *k, const float *v, int ld,
                        const int32_t *cu, int n_seqs, int heads, float *out) {
    int n = cu[n_seqs], rc = 0, maxlen = 0;
    for (int s = 0; s < n_seqs; s++)
        if (cu[s + 1] - cu[s] > maxlen) maxlen = cu[s + 1] - cu[s];
    // q, k, v may be views into one (n, ld) buffer (k = q + H, ...): each spans only
    // (n - 1) * ld + heads * 64 elements from its own start, never more.
    size_t span = (size_t)(n - 1) * ld + (size_t)heads * 64;
    T *dq = ta_upload<T>(q, span), *dk = ta_upload<T>(k, span), *dv = ta_upload<T>(v, span);
    int32_t *dcu = (int32_t *)ta_dup(cu, (size_t)(n_seqs + 1) * 4);
    T *o = ta_poisoned<T>((size_t)n * heads * 64);
    if (!dq || !dk || !dv || !dcu || !o) {
        rc = -1;
        goto done;
    }
    TA_CHECK(cuda_attention<T>(dq, dk, dv, ld, dcu, n_seqs, heads, (maxlen + 63) / 64, o,
                               heads * 64, wgmma, 0));
    TA_CHECK(cudaDeviceSynchronize());
    rc = ta_download<T>(o, (size_t)n * heads * 64, out);
done:
    cudaFree(dq), cudaFree(dk), cudaFree(dv), cudaFree(dcu), cudaFree(o);
    return rc;
}
extern "C" int gpu_cuda_test_attention(const char *precision, int kernel, const float *q,
                                       const float *k, const float *v, int ld, const int32_t *cu,
                                       int n_seqs, int heads, int head_dim, float *out) {
    int wgmma = ta_wgmma(kernel);
    if (head_dim != 64 || ld % 8 != 0 || wgmma < 0) {
        fprintf(stderr, "attention kernel needs head_dim 64, ld %% 8 == 0 and (wgmma) a "
                        "compute capability 9.0 device\n");
        return -1;
    }
    return is_bf16(precision)
               ? ta_attention<__nv_bfloat16>(wgmma, q, k, v, ld, cu, n_seqs, heads, out)
               : ta_attention<__half>(wgmma, q, k, v, ld, cu, n_seqs, heads, out);
}

// The first-query kernel on q's [CLS] rows (gathered here, as the backend gathers them),
// written in place over them as the backend does.
template <typename T>
static int ta_attention_first(const float *q, const float *k, const float *v, int ld,
                              const int32_t *cu, int n_seqs, int heads, float *out) {
    int n = cu[n_seqs], H = heads * 64, rc = 0;
    size_t span = (size_t)(n - 1) * ld + (size_t)H;
    float *qc = (float *)malloc((size_t)n_seqs * H * sizeof(float));
    for (int s = 0; qc && s < n_seqs; s++)
        memcpy(qc + (size_t)s * H, q + (size_t)cu[s] * ld, (size_t)H * sizeof(float));
    T *dq = qc ? ta_upload<T>(qc, (size_t)n_seqs * H) : NULL;
    T *dk = ta_upload<T>(k, span), *dv = ta_upload<T>(v, span);
    int32_t *dcu = (int32_t *)ta_dup(cu, (size_t)(n_seqs + 1) * 4);
    if (!dq || !dk || !dv || !dcu) {
        rc = -1;
        goto done;
    }
    TA_CHECK(cuda_attention_first<T>(dq, H, dk, dv, ld, dcu, n_seqs, heads, dq, H, 0));
    TA_CHECK(cudaDeviceSynchronize());
    rc = ta_download<T>(dq, (size_t)n_seqs * H, out);
done:
    free(qc);
    cudaFree(dq), cudaFree(dk), cudaFree(dv), cudaFree(dcu);
    return rc;
}
extern "C" int gpu_cuda_test_attention_first(const char *precision, const float *q, const float *k,
                                             const float *v, int ld, const int32_t *cu, int n_seqs,
                                             int heads, float *out) {
    if (ld % 8 != 0) {
        fprintf(stderr, "attention kernel needs ld %% 8 == 0\n");
        return -1;
    }
    return is_bf16(precision)
               ? ta_attention_first<__nv_bfloat16>(q, k, v, ld, cu, n_seqs, heads, out)
               : ta_attention_first<__half>(q, k, v, ld, cu, n_seqs, heads, out);
}

template <typename T>
static int ta_pool(const gpu_model_t *m, const float *hidden, const int32_t *cu, int n_seqs,
                   float *logits) {
    int H = m->cfg.hidden, L = m->cfg.num_labels, n = cu[n_seqs], rc = 0;
    common_err_t err;
    cuda_gemm_t g;
    memset(&g, 0, sizeof(g));
    void *ws = NULL;
    T *dh = ta_upload<T>(hidden, (size_t)n * H);
    float *pw = (float *)ta_dup(m->w.pool_w, (size_t)H * H * 4);
    float *cw = (float *)ta_dup(m->w.cls_w, (size_t)L * H * 4);
    float *pb = (float *)ta_dup(m->w.pool_b, H * 4), *cb = (float *)ta_dup(m->w.cls_b, L * 4);
    int32_t *dcu = (int32_t *)ta_dup(cu, (size_t)(n_seqs + 1) * 4);
    T *rows = ta_poisoned<T>((size_t)n_seqs * H);
    float *rows32 = NULL, *pooled = NULL, *dl = NULL;
    if (!dh || !pw || !cw || !pb || !cb || !dcu || !rows ||
        cudaMalloc(&rows32, (size_t)n_seqs * H * 4) != cudaSuccess ||
        cudaMalloc(&pooled, (size_t)n_seqs * H * 4) != cudaSuccess ||
        cudaMalloc(&dl, (size_t)n_seqs * L * 4) != cudaSuccess ||
        cudaMalloc(&ws, GPU_WS_TEST) != cudaSuccess ||
        cuda_gemm_init(&g, CUDA_GEMM_FP32, ws, GPU_WS_TEST, &err) != 0) {
        rc = -1;
        goto done;
    }
    cudaMemset(dl, 0xFF, (size_t)n_seqs * L * 4);
    TA_CHECK(cuda_gather_rows<T>(dh, dcu, n_seqs, H, rows, 0));
    TA_CHECK(cuda_to_float<T>(rows, (size_t)n_seqs * H, rows32, 0));
    if (cuda_head_run(&g, rows32, n_seqs, pw, pb, cw, cb, H, L, (int)m->cfg.head_act, pooled, dl, 0,
                      &err) != 0) {
        fprintf(stderr, "%s\n", err.message);
        rc = -1;
        goto done;
    }
    TA_CHECK(cudaDeviceSynchronize());
    TA_CHECK(cudaMemcpy(logits, dl, (size_t)n_seqs * L * 4, cudaMemcpyDeviceToHost));
done:
    if (g.lt) cuda_gemm_free(&g);
    cudaFree(ws), cudaFree(dh), cudaFree(pw), cudaFree(cw), cudaFree(pb), cudaFree(cb),
        cudaFree(dcu), cudaFree(rows), cudaFree(rows32), cudaFree(pooled), cudaFree(dl);
    return rc;
}
extern "C" int gpu_cuda_test_pool_classify(const gpu_model_t *m, const char *precision,
                                           const float *hidden, const int32_t *cu, int n_seqs,
                                           float *logits) {
    return is_bf16(precision) ? ta_pool<__nv_bfloat16>(m, hidden, cu, n_seqs, logits)
                              : ta_pool<__half>(m, hidden, cu, n_seqs, logits);
}

// Uniform [-1, 1) from a counter hash: bench inputs on random data, never zeros.
template <typename T> __global__ void ta_fill_kernel(T *p, size_t n, uint32_t seed) {
    size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    if (i >= n) return;
    uint32_t h = (uint32_t)i * 2654435761u ^ seed;
    h ^= h >> 16, h *= 0x7feb352du, h ^= h >> 15, h *= 0x846ca68bu, h ^= h >> 16;
    p[i] = st<T>::from_f((float)(h >> 8) * (2.f / 16777216.f) - 1.f);
}

extern "C" double gpu_cuda_test_gemm_bench(const char *precision, int m, int n, int k, int epi) {
    // as the backend's init tunes (8 candidates), X cold
    common_err_t err;
    double tf = cuda_gemm_time(is_bf16(precision), m, n, k, epi, 1, 8, 3, 20, 0, NULL, 0, &err);
    if (tf < 0)
        fprintf(stderr, "%s\n", err.message); // a test tool: prints where the library may not
    return tf;
}

extern "C" double gpu_cuda_test_gemm_candidate(const char *precision, int m, int n, int k, int epi,
                                               int cand, int reps, char *desc, size_t desclen) {
    common_err_t err;
    double tf =
        cuda_gemm_time(is_bf16(precision), m, n, k, epi, 1, 0, 2, reps, cand, desc, desclen, &err);
    if (tf < 0) fprintf(stderr, "%s\n", err.message);
    return tf;
}

// The fp16 path's in-place LayerNorm (residual already added by the GEMM epilogue).
template <typename T> static double ta_ln_bench(int n, int H, int iters) {
    const int sms = ta_sms();
    double out = -1;
    float ms = 0;
    T *x = NULL;
    float *gb = NULL;
    cudaEvent_t e0 = NULL, e1 = NULL;
    if (cudaMalloc(&x, (size_t)n * H * sizeof(T)) || cudaMalloc(&gb, 2 * (size_t)H * 4) ||
        cudaEventCreate(&e0) || cudaEventCreate(&e1))
        goto done;
    ta_fill_kernel<T><<<(unsigned)(((size_t)n * H + 255) / 256), 256>>>(x, (size_t)n * H, 6);
    {
        float *h = (float *)calloc(2 * (size_t)H, sizeof(float)); // gamma 1, beta 0
        for (int i = 0; h && i < H; i++)
            h[i] = 1.f;
        int ok = h && cudaMemcpy(gb, h, 2 * (size_t)H * 4, cudaMemcpyHostToDevice) == cudaSuccess;
        free(h);
        if (!ok) goto done;
    }
    for (int i = 0; i <= iters; i++) {
        if (i == 1) cudaEventRecord(e0, 0);
        if (cuda_add_ln<T, T>(x, (const T *)NULL, gb, gb + H, n, H, 1e-12f, (T *)NULL, x, sms, 0))
            goto done;
    }
    cudaEventRecord(e1, 0);
    if (cudaEventSynchronize(e1) == cudaSuccess && cudaEventElapsedTime(&ms, e0, e1) == cudaSuccess)
        out = ms / iters;
done:
    cudaFree(x), cudaFree(gb);
    if (e0) cudaEventDestroy(e0);
    if (e1) cudaEventDestroy(e1);
    cudaGetLastError();
    return out;
}

extern "C" double gpu_cuda_test_ln_bench(const char *precision, int n, int H, int iters) {
    if (n <= 0 || H <= 0 || iters <= 0) return -1;
    return is_bf16(precision) ? ta_ln_bench<__nv_bfloat16>(n, H, iters)
                              : ta_ln_bench<__half>(n, H, iters);
}

template <typename T>
static double ta_att_bench(int wgmma, int n_seqs, int len, int heads, int iters) {
    int H = heads * 64, n = n_seqs * len, ld = 3 * H;
    double tf = -1;
    float ms = 0;
    T *qkv = NULL, *o = NULL;
    int32_t *cu = (int32_t *)malloc((size_t)(n_seqs + 1) * 4), *dcu = NULL;
    cudaEvent_t e0 = NULL, e1 = NULL;
    for (int s = 0; s <= n_seqs; s++)
        cu[s] = s * len;
    if (cudaMalloc(&qkv, (size_t)n * ld * sizeof(T)) || cudaMalloc(&o, (size_t)n * H * sizeof(T)) ||
        !(dcu = (int32_t *)ta_dup(cu, (size_t)(n_seqs + 1) * 4)) || cudaEventCreate(&e0) ||
        cudaEventCreate(&e1))
        goto done;
    ta_fill_kernel<T><<<(unsigned)(((size_t)n * ld + 255) / 256), 256>>>(qkv, (size_t)n * ld, 5);
    for (int i = 0; i < 3; i++)
        cuda_attention<T>(qkv, qkv + H, qkv + 2 * H, ld, dcu, n_seqs, heads, (len + 63) / 64, o, H,
                          wgmma, 0);
    cudaEventRecord(e0, 0);
    for (int i = 0; i < iters; i++)
        cuda_attention<T>(qkv, qkv + H, qkv + 2 * H, ld, dcu, n_seqs, heads, (len + 63) / 64, o, H,
                          wgmma, 0);
    cudaEventRecord(e1, 0);
    if (cudaEventSynchronize(e1) == cudaSuccess && cudaEventElapsedTime(&ms, e0, e1) == cudaSuccess)
        tf = 4.0 * n_seqs * (double)len * len * H * iters / (ms * 1e-3) / 1e12;
done:
    free(cu);
    cudaFree(qkv), cudaFree(o), cudaFree(dcu);
    if (e0) cudaEventDestroy(e0);
    if (e1) cudaEventDestroy(e1);
    return tf;
}

extern "C" double gpu_cuda_test_attention_bench(const char *precision, int kernel, int n_seqs,
                                                int len, int heads, int iters) {
    int wgmma = ta_wgmma(kernel);
    if (wgmma < 0) return -1;
    return is_bf16(precision) ? ta_att_bench<__nv_bfloat16>(wgmma, n_seqs, len, heads, iters)
                              : ta_att_bench<__half>(wgmma, n_seqs, len, heads, iters);
}

// Introspection of one "cuda" backend instance (tests/lib/cuda_test_api.h).
extern "C" int gpu_cuda_backend_try_alloc(gpu_backend_t *be, size_t bytes) {
    void *p = NULL;
    cudaError_t e = be_device_alloc(be, &p, bytes);
    if (e == cudaSuccess) {
        cudaFree(p);
        return 0;
    }
    return -1;
}

// The phase of the bench's breakdown an op's time counts in.
static int prof_cat(const gpu_op_t *op) {
    switch (op->kind) {
    case GPU_OP_EMBED:
        return GPU_CUDA_PROF_EMBED;
    case GPU_OP_LINEAR:
        return op->layer < 0 && op->prec == GPU_PREC_FP32 ? GPU_CUDA_PROF_HEAD : GPU_CUDA_PROF_GEMM;
    case GPU_OP_ATTENTION:
        return GPU_CUDA_PROF_ATTENTION;
    default:
        return GPU_CUDA_PROF_NORM;
    }
}

// The per-phase totals from the table's per-op timing (profile_ops).
extern "C" int gpu_cuda_backend_profile(gpu_backend_t *be, int on, double *ms) {
    common_err_t err;
    if (ms) {
        for (int i = 0; i < GPU_CUDA_PROF_N; i++)
            ms[i] = 0;
        for (int i = 0; be->op_ms && i < be->graph->g->n_ops; i++)
            ms[prof_cat(&be->graph->g->op[i])] += be->op_ms[i];
    }
    if (on >= 0 && cuda_be_profile_ops(be, on, NULL, &err) != 0) return -1;
    return 0;
}

// Heuristic queries so far (stays small over a long run).
extern "C" long gpu_cuda_backend_heuristic_queries(gpu_backend_t *be) {
    return be->graph->gemm.heuristic_queries + be->graph->gemm32.heuristic_queries;
}

extern "C" void gpu_cuda_backend_tune_stats(gpu_backend_t *be, long *tuned, long *changed,
                                            double *ms_top1, double *ms_best) {
    const cuda_gemm_t *g = &be->graph->gemm;
    *tuned = g->tuned;
    *changed = g->tuned_changed;
    *ms_top1 = g->tuned_ms_top1;
    *ms_best = g->tuned_ms_best;
}
