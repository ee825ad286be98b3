// Test entry points for the FP8 kernels (tests/lib/cuda_test_fp8.h). They allocate per call:
// never on the backend's path.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu/cuda/cuda_common.cuh"
#include "gpu/cuda/cuda_fp8.cuh"
#include "gpu/cuda/cuda_gemm.cuh"
#include "tests/lib/cuda_test_fp8.h"

#define FP8_WS (32u << 20)
#define CK(x)                                                                                      \
    do {                                                                                           \
        cudaError_t e_ = (x);                                                                      \
        if (e_ != cudaSuccess) {                                                                   \
            fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__, cudaGetErrorString(e_));            \
            rc = -1;                                                                               \
            goto done;                                                                             \
        }                                                                                          \
    } while (0)

template <typename T> static T *up(const float *h, size_t n) {
    T *tmp = (T *)malloc(n * sizeof(T)), *d = NULL;
    for (size_t i = 0; i < n; i++)
        tmp[i] = st<T>::from_f(h[i]);
    if (cudaMalloc(&d, n * sizeof(T) + 16) != cudaSuccess ||
        cudaMemcpy(d, tmp, n * sizeof(T), cudaMemcpyHostToDevice) != cudaSuccess)
        d = NULL;
    free(tmp);
    return d;
}
static void *dup(const void *h, size_t bytes) {
    void *d = NULL;
    if (cudaMalloc(&d, bytes + 16) != cudaSuccess ||
        (h && cudaMemcpy(d, h, bytes, cudaMemcpyHostToDevice) != cudaSuccess))
        return NULL;
    if (!h) cudaMemset(d, 0xFF, bytes + 16); /* poisoned: NaN codes / scales */
    return d;
}
template <typename T> static int down(const T *d, size_t n, float *h) {
    T *tmp = (T *)malloc(n * sizeof(T));
    int rc = cudaMemcpy(tmp, d, n * sizeof(T), cudaMemcpyDeviceToHost) == cudaSuccess ? 0 : -1;
    for (size_t i = 0; i < n; i++)
        h[i] = st<T>::to_f(tmp[i]);
    free(tmp);
    return rc;
}

extern "C" int gpu_cuda_test_fp8_quantize(const float *w, int n, int k, uint8_t *q, float *scale) {
    int rc = 0;
    float *dw = (float *)dup(w, (size_t)n * k * 4), *ds = (float *)dup(NULL, (size_t)n * 4);
    uint8_t *dq = (uint8_t *)dup(NULL, (size_t)n * k);
    if (!dw || !ds || !dq) {
        rc = -1;
        goto done;
    }
    CK(cuda_fp8_quantize_rows(dw, CUDA_GEMM_FP32, n, k, dq, ds, 0));
    CK(cudaMemcpy(q, dq, (size_t)n * k, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(scale, ds, (size_t)n * 4, cudaMemcpyDeviceToHost));
done:
    cudaFree(dw), cudaFree(ds), cudaFree(dq);
    return rc;
}

template <typename T>
static int ta_act(int type, const float *x, int n, int k, uint8_t *q, float *scale) {
    int rc = 0;
    T *dx = up<T>(x, (size_t)n * k);
    float *ds = (float *)dup(NULL, (size_t)n * 4);
    uint8_t *dq = (uint8_t *)dup(NULL, (size_t)n * k);
    if (!dx || !ds || !dq) {
        rc = -1;
        goto done;
    }
    CK(cuda_fp8_quantize_rows(dx, type, n, k, dq, ds, 0));
    CK(cudaDeviceSynchronize());
    CK(cudaMemcpy(q, dq, (size_t)n * k, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(scale, ds, (size_t)n * 4, cudaMemcpyDeviceToHost));
done:
    cudaFree(dx), cudaFree(ds), cudaFree(dq);
    return rc;
}

extern "C" int gpu_cuda_test_fp8_quantize_act(const char *precision, const float *x, int n, int k,
                                              uint8_t *q, float *scale) {
    return precision && strcmp(precision, "bf16") == 0
               ? ta_act<__nv_bfloat16>(CUDA_GEMM_BF16, x, n, k, q, scale)
               : ta_act<__half>(CUDA_GEMM_FP16, x, n, k, q, scale);
}

template <typename T>
static int ta_ln(const float *x, const float *res, const float *g, const float *b, int n, int H,
                 float eps, float *out, uint8_t *q, float *scale) {
    int rc = 0;
    T *dx = up<T>(x, (size_t)n * H), *dr = res ? up<T>(res, (size_t)n * H) : NULL;
    float *dg = (float *)dup(g, (size_t)H * 4), *db = (float *)dup(b, (size_t)H * 4);
    float *ds = (float *)dup(NULL, (size_t)n * 4);
    uint8_t *dq = (uint8_t *)dup(NULL, (size_t)n * H);
    if (!dx || (res && !dr) || !dg || !db || !ds || !dq) {
        rc = -1;
        goto done;
    }
    CK(cuda_fp8_add_ln<T>(dx, dr, dg, db, n, H, eps, dx, dq, ds, 0));
    CK(cudaDeviceSynchronize());
    CK(cudaMemcpy(q, dq, (size_t)n * H, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(scale, ds, (size_t)n * 4, cudaMemcpyDeviceToHost));
    rc = down<T>(dx, (size_t)n * H, out);
done:
    cudaFree(dx), cudaFree(dr), cudaFree(dg), cudaFree(db), cudaFree(ds), cudaFree(dq);
    return rc;
}

extern "C" int gpu_cuda_test_fp8_add_ln(const char *precision, const float *x, const float *res,
                                        const float *g, const float *b, int n, int H, float eps,
                                        float *out, uint8_t *q, float *scale) {
    return precision && strcmp(precision, "bf16") == 0
               ? ta_ln<__nv_bfloat16>(x, res, g, b, n, H, eps, out, q, scale)
               : ta_ln<__half>(x, res, g, b, n, H, eps, out, q, scale);
}

template <typename T>
static int ta_static(int type, const float *x, size_t n, float inv, uint8_t *q) {
    int rc = 0;
    T *dx = up<T>(x, n);
    uint8_t *dq = (uint8_t *)dup(NULL, n);
    if (!dx || !dq) {
        rc = -1;
        goto done;
    }
    CK(cuda_fp8_quantize_static(dx, type, n, inv, dq, 0));
    CK(cudaDeviceSynchronize());
    CK(cudaMemcpy(q, dq, n, cudaMemcpyDeviceToHost));
done:
    cudaFree(dx), cudaFree(dq);
    return rc;
}

extern "C" int gpu_cuda_test_fp8_quantize_static(const char *precision, const float *x, size_t n,
                                                 float inv, uint8_t *q) {
    return precision && strcmp(precision, "bf16") == 0
               ? ta_static<__nv_bfloat16>(CUDA_GEMM_BF16, x, n, inv, q)
               : ta_static<__half>(CUDA_GEMM_FP16, x, n, inv, q);
}

extern "C" int gpu_cuda_test_fp8_linear_q(const float *x, const float *w, const float *b, int n,
                                          int in, int out, int epi, float inv, uint8_t *q) {
    int rc = 0;
    common_err_t err;
    cuda_fp8_gemm_t g;
    memset(&g, 0, sizeof g);
    float *dx = (float *)dup(x, (size_t)n * in * 4), *dw = (float *)dup(w, (size_t)out * in * 4);
    float *sx = (float *)dup(NULL, (size_t)n * 4), *sw = (float *)dup(NULL, (size_t)out * 4);
    float *dinv = (float *)dup(&inv, 4);
    uint8_t *qx = (uint8_t *)dup(NULL, (size_t)n * in),
            *qw = (uint8_t *)dup(NULL, (size_t)out * in),
            *dq = (uint8_t *)dup(NULL, (size_t)n * out);
    __half *db = up<__half>(b, (size_t)out);
    void *ws = dup(NULL, FP8_WS), *c16 = dup(NULL, (size_t)n * out * 2);
    if (!dx || !dw || !sx || !sw || !dinv || !qx || !qw || !dq || !db || !ws || !c16) {
        rc = -1;
        goto done;
    }
    CK(cuda_fp8_quantize_rows(dx, CUDA_GEMM_FP32, n, in, qx, sx, 0));
    CK(cuda_fp8_quantize_rows(dw, CUDA_GEMM_FP32, out, in, qw, sw, 0));
    if (cuda_fp8_gemm_init(&g, CUDA_GEMM_FP16, ws, FP8_WS, &err) != 0) {
        fprintf(stderr, "%s\n", err.message);
        rc = -1;
        goto done;
    }
    g.tune = 8; // the warm-up's tuned call, then the cached one
    if (cuda_fp8_gemm_run_q(&g, qw, sw, qx, sx, dq, c16, dinv, db, n, out, in, epi, 0) != 0) {
        rc = 1; // cuBLASLt has no such algorithm
        goto done;
    }
    g.tune = 0;
    CK(cudaMemset(dq, 0xFF, (size_t)n * out));
    if (cuda_fp8_gemm_run_q(&g, qw, sw, qx, sx, dq, c16, dinv, db, n, out, in, epi, 0) != 0) {
        rc = -1;
        goto done;
    }
    CK(cudaDeviceSynchronize());
    CK(cudaMemcpy(q, dq, (size_t)n * out, cudaMemcpyDeviceToHost));
done:
    cuda_fp8_gemm_free(&g);
    cudaFree(dx), cudaFree(dw), cudaFree(sx), cudaFree(sw), cudaFree(dinv), cudaFree(qx);
    cudaFree(qw), cudaFree(dq), cudaFree(db), cudaFree(ws), cudaFree(c16);
    return rc;
}

template <typename T>
static int ta_linear(int type, const float *x, const float *w, const float *b, const float *res,
                     int n, int in, int out, int epi, float *y) {
    int rc = 0;
    common_err_t err;
    cuda_fp8_gemm_t g;
    memset(&g, 0, sizeof g);
    float *dx = (float *)dup(x, (size_t)n * in * 4), *dw = (float *)dup(w, (size_t)out * in * 4);
    float *sx = (float *)dup(NULL, (size_t)n * 4), *sw = (float *)dup(NULL, (size_t)out * 4);
    uint8_t *qx = (uint8_t *)dup(NULL, (size_t)n * in),
            *qw = (uint8_t *)dup(NULL, (size_t)out * in);
    T *db = up<T>(b, (size_t)out);
    T *dy = res ? up<T>(res, (size_t)n * out) : (T *)dup(NULL, (size_t)n * out * sizeof(T));
    void *ws = dup(NULL, FP8_WS), *scratch = dup(NULL, (size_t)n * out * sizeof(T));
    if (!dx || !dw || !sx || !sw || !qx || !qw || !db || !dy || !ws || !scratch) {
        rc = -1;
        goto done;
    }
    CK(cuda_fp8_quantize_rows(dx, CUDA_GEMM_FP32, n, in, qx, sx, 0));
    CK(cuda_fp8_quantize_rows(dw, CUDA_GEMM_FP32, out, in, qw, sw, 0));
    // As the backend runs it: a warm-up call (tuning on, here n - 1 rows into scratch) picks
    // the algorithm of the M bucket, which the real call then takes from the cache.
    if (cuda_fp8_gemm_init(&g, type, ws, FP8_WS, &err) != 0) {
        fprintf(stderr, "%s\n", err.message);
        rc = -1;
        goto done;
    }
    g.tune = 8;
    if (n > 1 && cuda_fp8_gemm_run(&g, qw, sw, qx, sx, scratch, out, db, res ? scratch : NULL,
                                   n - 1, out, in, epi, 0, &err) != 0) {
        fprintf(stderr, "warm-up: %s\n", err.message);
        rc = -1;
        goto done;
    }
    g.tune = 0;
    if (cuda_fp8_gemm_run(&g, qw, sw, qx, sx, dy, out, db, res ? dy : NULL, n, out, in, epi, 0,
                          &err) != 0) {
        fprintf(stderr, "%s\n", err.message);
        rc = -1;
        goto done;
    }
    if (n > 1 && cuda_gemm_bucket(n - 1) == cuda_gemm_bucket(n) && g.n_cache != 1) {
        fprintf(stderr, "FP8 GEMM cache: %d entries for one M bucket\n", g.n_cache);
        rc = -1;
        goto done;
    }
    CK(cudaDeviceSynchronize());
    rc = down<T>(dy, (size_t)n * out, y);
done:
    cuda_fp8_gemm_free(&g);
    cudaFree(dx), cudaFree(dw), cudaFree(sx), cudaFree(sw), cudaFree(qx), cudaFree(qw);
    cudaFree(db), cudaFree(dy), cudaFree(ws), cudaFree(scratch);
    return rc;
}

extern "C" int gpu_cuda_test_fp8_linear(const char *precision, const float *x, const float *w,
                                        const float *b, const float *res, int n, int in, int out,
                                        int epi, float *y) {
    return precision && strcmp(precision, "bf16") == 0
               ? ta_linear<__nv_bfloat16>(CUDA_GEMM_BF16, x, w, b, res, n, in, out, epi, y)
               : ta_linear<__half>(CUDA_GEMM_FP16, x, w, b, res, n, in, out, epi, y);
}

__global__ void fill_codes_kernel(uint8_t *q, size_t n, uint32_t seed) {
    size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    if (i >= n) return;
    uint32_t h = (uint32_t)i * 2654435761u ^ seed;
    h ^= h >> 15, h *= 2246822519u, h ^= h >> 13;
    q[i] = (uint8_t)(h & 0xF7u); /* finite codes, both signs, exponents 0..14 */
}

extern "C" double gpu_cuda_test_fp8_gemm_bench(int m, int n, int k, int epi) {
    int rc = 0;
    common_err_t err;
    double tflops = -1;
    float ms = 0;
    cuda_fp8_gemm_t g;
    memset(&g, 0, sizeof g);
    cudaEvent_t e0 = NULL, e1 = NULL;
    uint8_t *qx = (uint8_t *)dup(NULL, (size_t)m * k), *qw = (uint8_t *)dup(NULL, (size_t)n * k);
    float *ones = (float *)malloc((size_t)(m > n ? m : n) * 4);
    for (int i = 0; i < (m > n ? m : n); i++)
        ones[i] = 1.f / 64;
    float *sx = (float *)dup(ones, (size_t)m * 4), *sw = (float *)dup(ones, (size_t)n * 4);
    __half *y = (__half *)dup(NULL, (size_t)m * n * 2), *b = (__half *)dup(NULL, (size_t)n * 2);
    void *ws = dup(NULL, FP8_WS);
    float *dinv = (float *)dup(ones, 4);
    if (!qx || !qw || !sx || !sw || !y || !b || !ws || !dinv) goto done;
    CK(cudaMemset(b, 0, (size_t)n * 2));
    fill_codes_kernel<<<(unsigned)(((size_t)m * k + 255) / 256), 256>>>(qx, (size_t)m * k, 1u);
    fill_codes_kernel<<<(unsigned)(((size_t)n * k + 255) / 256), 256>>>(qw, (size_t)n * k, 2u);
    CK(cudaGetLastError());
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    if (cuda_fp8_gemm_init(&g, CUDA_GEMM_FP16, ws, FP8_WS, &err) != 0) goto done;
    g.tune = 8; // the first call picks the bucket's algorithm as the backend's warm-up does
    for (int it = 0; it < 23; it++) {
        if (it == 1) g.tune = 0;
        if (it == 3) CK(cudaEventRecord(e0, 0));
        if (epi == 4) { // GELU, E4M3 out (the codes in y's first m n bytes, C past them)
            if (cuda_fp8_gemm_run_q(&g, qw, sw, qx, sx, (uint8_t *)y, (char *)y + (size_t)m * n,
                                    dinv, b, m, n, k, CUDA_GEMM_GELU_BIAS, 0) != 0) {
                tflops = -2;
                goto refused;
            }
        } else if (cuda_fp8_gemm_run(&g, qw, sw, qx, sx, y, n, b, epi == 3 ? y : NULL, m, n, k,
                                     epi == 2 ? CUDA_GEMM_GELU_BIAS : CUDA_GEMM_BIAS, 0,
                                     &err) != 0) {
            fprintf(stderr, "%s\n", err.message);
            goto done;
        }
    }
    CK(cudaEventRecord(e1, 0));
    CK(cudaEventSynchronize(e1));
    CK(cudaEventElapsedTime(&ms, e0, e1));
    tflops = 2.0 * m * n * k * 20 / (ms * 1e-3) / 1e12;
done:
    if (rc) tflops = -1;
refused:
    if (e0) cudaEventDestroy(e0);
    if (e1) cudaEventDestroy(e1);
    cuda_fp8_gemm_free(&g);
    cudaFree(qx), cudaFree(qw), cudaFree(sx), cudaFree(sw), cudaFree(y), cudaFree(b), cudaFree(ws);
    cudaFree(dinv);
    free(ones);
    return tflops;
}

extern "C" double gpu_cuda_test_fp8_quantize_bench(int m, int k) {
    int rc = 0;
    float ms = 0;
    double us = -1;
    cudaEvent_t e0 = NULL, e1 = NULL;
    __half *x = (__half *)dup(NULL, (size_t)m * k * 2);
    uint8_t *q = (uint8_t *)dup(NULL, (size_t)m * k);
    float *s = (float *)dup(NULL, (size_t)m * 4);
    if (!x || !q || !s) goto done;
    CK(cudaMemset(x, 0x3C, (size_t)m * k * 2)); /* finite fp16 values (~1.06) */
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    for (int it = 0; it < 23; it++) {
        if (it == 3) CK(cudaEventRecord(e0, 0));
        CK(cuda_fp8_quantize_rows(x, CUDA_GEMM_FP16, m, k, q, s, 0));
    }
    CK(cudaEventRecord(e1, 0));
    CK(cudaEventSynchronize(e1));
    CK(cudaEventElapsedTime(&ms, e0, e1));
    us = ms * 1e3 / 20;
done:
    if (rc) us = -1;
    if (e0) cudaEventDestroy(e0);
    if (e1) cudaEventDestroy(e1);
    cudaFree(x), cudaFree(q), cudaFree(s);
    return us;
}
