// The GEMM timing probe: cuBLASLt projections timed on random data, for `reclass bench`'s
// GEMM ceiling (gpu_cuda_layer_gemm_ceiling, gpu/cuda/cuda_backend.h) and the bench tools.
// It allocates per call: never on the backend's path, whose memory is one arena.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <stdio.h>
#include <string.h>

#include "gpu/cuda/cuda_backend.h"
#include "gpu/cuda/cuda_common.cuh"
#include "gpu/cuda/cuda_gemm.cuh"

#define GPU_WS_PROBE (32u << 20) /* cuBLASLt workspace of the probe */

// Uniform [-1, 1) from a counter hash: GEMM timing on random data, never zeros.
template <typename T> __global__ void probe_fill_kernel(T *p, size_t n, uint32_t seed) {
    size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    if (i >= n) return;
    uint32_t h = (uint32_t)i * 2654435761u ^ seed;
    h ^= h >> 16, h *= 0x7feb352du, h ^= h >> 15, h *= 0x846ca68bu, h ^= h >> 16;
    p[i] = st<T>::from_f((float)(h >> 8) * (2.f / 16777216.f) - 1.f);
}

// The cached algorithm's configuration in words (cuBLASLt's ids: algo, tile, stages,
// cluster shape, split-K, CTA swizzle).
static void probe_algo_describe(const cublasLtMatmulAlgo_t *a, char *out, size_t len) {
    static const cublasLtMatmulAlgoConfigAttributes_t at[6] = {
        CUBLASLT_ALGO_CONFIG_ID,         CUBLASLT_ALGO_CONFIG_TILE_ID,
        CUBLASLT_ALGO_CONFIG_STAGES_ID,  CUBLASLT_ALGO_CONFIG_CLUSTER_SHAPE_ID,
        CUBLASLT_ALGO_CONFIG_SPLITK_NUM, CUBLASLT_ALGO_CONFIG_CTA_SWIZZLING};
    uint32_t v[6] = {0};
    for (int i = 0; i < 6; i++) {
        size_t got = 0;
        cublasLtMatmulAlgoConfigGetAttribute(a, at[i], &v[i], sizeof(v[i]), &got);
    }
    snprintf(out, len, "algo %u tile %u stages %u cluster %u splitk %u swizzle %u", v[0], v[1],
             v[2], v[3], v[4], v[5]);
}

// Times Y (m, n) = X (m, k) W^T + bias through cuda_gemm_run on random data: epi 0 bias only,
// 1 bias + GELU, 2 bias + residual in place (as the backend runs them). cold: X rotates over
// enough buffers to pass 200 MB, so it is never in L2; else one X. tune: cuBLASLt candidates
// timed on the first call (0: the heuristic's first); only > 0: that candidate (1-based)
// instead. warm untimed runs, then reps timed. TFLOP/s, or -1 with why in why (may be NULL);
// desc (may be NULL) gets the algorithm used.
template <typename T>
static double probe_gemm_time(int bf16, int m, int n, int k, int epi, int cold, int tune, int warm,
                              int reps, int only, char *desc, size_t desclen, common_err_t *why) {
    double tf = -1;
    common_err_t err;
    common_err_set(&err, COMMON_FATAL, "CUDA allocation or launch failed");
    cuda_gemm_t g;
    memset(&g, 0, sizeof(g));
    void *ws = NULL;
    const size_t xb = (size_t)m * k * sizeof(T);
    const int nx = !cold || xb >= (200u << 20) ? 1 : (int)((200u << 20) / xb) + 1;
    T *w = NULL, *y = NULL, *bias = NULL, *xs[64] = {NULL};
    cudaEvent_t e0 = NULL, e1 = NULL;
    cudaStream_t s = NULL;
    float ms = 0;
    if (nx > 64 || cudaStreamCreate(&s) != cudaSuccess ||
        cudaMalloc(&w, (size_t)n * k * sizeof(T)) || cudaMalloc(&y, (size_t)m * n * sizeof(T)) ||
        cudaMalloc(&bias, (size_t)n * sizeof(T)) || cudaMalloc(&ws, GPU_WS_PROBE) ||
        cudaEventCreate(&e0) || cudaEventCreate(&e1))
        goto done;
    for (int i = 0; i < nx; i++) {
        if (cudaMalloc(&xs[i], xb)) goto done;
        probe_fill_kernel<T><<<(unsigned)(((size_t)m * k + 255) / 256), 256, 0, s>>>(
            xs[i], (size_t)m * k, cold ? 10 + i : 2);
    }
    probe_fill_kernel<T>
        <<<(unsigned)(((size_t)n * k + 255) / 256), 256, 0, s>>>(w, (size_t)n * k, 1);
    probe_fill_kernel<T><<<(unsigned)((n + 255) / 256), 256, 0, s>>>(bias, (size_t)n, 3);
    probe_fill_kernel<T>
        <<<(unsigned)(((size_t)m * n + 255) / 256), 256, 0, s>>>(y, (size_t)m * n, 4);
    if (cuda_gemm_init(&g, bf16 ? CUDA_GEMM_BF16 : CUDA_GEMM_FP16, ws, GPU_WS_PROBE, &err) != 0)
        goto done;
    g.tune = tune;
    g.only = only;
    {
        int e = epi == 1 ? CUDA_GEMM_GELU_BIAS : CUDA_GEMM_BIAS;
        const T *res = epi == 2 ? y : NULL;
        for (int i = 0; i < warm; i++) // the first call tunes
            if (cuda_gemm_run(&g, w, xs[i % nx], y, bias, res, m, n, k, e, s, &err)) goto done;
        cudaEventRecord(e0, s);
        for (int i = 0; i < reps; i++)
            if (cuda_gemm_run(&g, w, xs[i % nx], y, bias, res, m, n, k, e, s, &err)) goto done;
        cudaEventRecord(e1, s);
    }
    if (cudaEventSynchronize(e1) != cudaSuccess || cudaEventElapsedTime(&ms, e0, e1) != cudaSuccess)
        goto done;
    tf = 2.0 * m * n * (double)k * reps / (ms * 1e-3) / 1e12;
    if (desc && g.n_cache > 0) probe_algo_describe(&g.cache[0].algo, desc, desclen);
done:
    if (tf < 0) common_err_set(why, COMMON_FATAL, "gemm timing %dx%dx%d: %s", m, n, k, err.message);
    if (g.lt) cuda_gemm_free(&g);
    for (int i = 0; i < nx && i < 64; i++)
        cudaFree(xs[i]);
    cudaFree(ws), cudaFree(w), cudaFree(y), cudaFree(bias);
    if (e0) cudaEventDestroy(e0);
    if (e1) cudaEventDestroy(e1);
    if (s) cudaStreamDestroy(s);
    cudaGetLastError();
    return tf;
}

// The ceiling probe: bias epilogue, X warm, the heuristic's first algorithm.
double cuda_gemm_time(int bf16, int m, int n, int k, int epi, int cold, int tune, int warm,
                      int reps, int only, char *desc, size_t desclen, common_err_t *err) {
    return bf16 ? probe_gemm_time<__nv_bfloat16>(1, m, n, k, epi, cold, tune, warm, reps, only,
                                                 desc, desclen, err)
                : probe_gemm_time<__half>(0, m, n, k, epi, cold, tune, warm, reps, only, desc,
                                          desclen, err);
}

extern "C" double gpu_cuda_gemm_tflops(int device, int m, int n, int k, const char *precision,
                                       common_err_t *err) {
    if (gpu_cuda_device_count() <= device || m <= 0 || n <= 0 || k <= 0 ||
        cudaSetDevice(device) != cudaSuccess) {
        common_err_set(err, COMMON_FATAL, "gemm timing %dx%dx%d: no CUDA device %d", m, n, k,
                       device);
        return -1;
    }
    int bf16 = precision && strcmp(precision, "bf16") == 0;
    return cuda_gemm_time(bf16, m, n, k, 0, 0, 0, 5, 30, 0, NULL, 0, err);
}

extern "C" double gpu_cuda_layer_gemm_ceiling(int device, int m, int hidden, int intermediate,
                                              const char *precision, double shape_tflops[4],
                                              common_err_t *err) {
    const int shapes[4][2] = {
        {3 * hidden, hidden}, {hidden, hidden}, {intermediate, hidden}, {hidden, intermediate}};
    double t_sum = 0, f_sum = 0;
    for (int g = 0; g < 4; g++) {
        double tf = gpu_cuda_gemm_tflops(device, m, shapes[g][0], shapes[g][1], precision, err);
        if (shape_tflops) shape_tflops[g] = tf;
        if (tf <= 0) return -1;
        double f = 2.0 * m * shapes[g][0] * (double)shapes[g][1];
        t_sum += f / tf, f_sum += f;
    }
    return f_sum / t_sum;
}
