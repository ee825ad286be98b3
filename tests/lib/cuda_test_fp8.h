/* The FP8 kernels (gpu/cuda/cuda_fp8.cuh) behind plain C calls, for test_gpu_fp8: fp32 host
 * arrays in, each call allocating its own device memory (tests only). 0, or -1 on a CUDA or
 * cuBLASLt error (message on stderr). */
#ifndef RECLASS_TESTS_CUDA_TEST_FP8_H
#define RECLASS_TESTS_CUDA_TEST_FP8_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* q (n, k) E4M3 and scale (n) of the fp32 rows w (n, k), as the weights are quantized at load. */
int gpu_cuda_test_fp8_quantize(const float *w, int n, int k, uint8_t *q, float *scale);

/* q (n, k) and scale (n) of the rows of x rounded to precision ("fp16" / "bf16"): the 16-bit
 * activation path of cuda_fp8_quantize_rows (one warp per row). 0 or -1. */
int gpu_cuda_test_fp8_quantize_act(const char *precision, const float *x, int n, int k, uint8_t *q,
                                   float *scale);

/* out (n, H) = LayerNorm(x + res) in precision ("fp16" / "bf16"; x and res rounded to it
 * first), with its E4M3 codes q (n, H) and per-row scale (n). */
int gpu_cuda_test_fp8_add_ln(const char *precision, const float *x, const float *res,
                             const float *g, const float *b, int n, int H, float eps, float *out,
                             uint8_t *q, float *scale);

/* y (n, out) = the FP8 GEMM of x (n, in) and w (out, in), both quantized per row on the
 * device, + b (rounded to precision), epi 1 bias / 2 GELU (tanh form) / 3 ReLU, + res (n,
 * out) when not NULL, output in precision. */
int gpu_cuda_test_fp8_linear(const char *precision, const float *x, const float *w, const float *b,
                             const float *res, int n, int in, int out, int epi, float *y);

/* q (n) = e4m3(x * inv) of x rounded to precision ("fp16" / "bf16"): cuda_fp8_quantize_static
 * (n % 8 == 0, inv a power of two). */
int gpu_cuda_test_fp8_quantize_static(const char *precision, const float *x, size_t n, float inv,
                                      uint8_t *q);

/* q (n, out) E4M3 = e4m3(inv * act(the FP8 GEMM of x (n, in) and w (out, in), each quantized
 * per row, + b rounded to fp16)): cuda_fp8_gemm_run_q, epi as cuda_gemm.cuh's (2 GELU tanh
 * form), inv a power of two. 0, 1 when cuBLASLt has no algorithm for it, -1 on error. */
int gpu_cuda_test_fp8_linear_q(const float *x, const float *w, const float *b, int n, int in,
                               int out, int epi, float inv, uint8_t *q);

/* TFLOP/s of the FP8 GEMM Y (m, n) = Xq Wq^T s_x s_w + bias on random codes, epi 1 bias, 2 bias +
 * GELU, 3 bias + residual in place, 4 bias + GELU written as E4M3 (-2: cuBLASLt has no algorithm
 * for it); 20 timed runs after 3 (the first tuned among 8 of
 * cuBLASLt's candidates, as the backend's warm-up picks them). -1 on error (bench only). */
double gpu_cuda_test_fp8_gemm_bench(int m, int n, int k, int epi);

/* Microseconds of one activation quantize pass over (m, k) fp16 rows (20 timed after 3): what
 * an FP8 projection whose input no LayerNorm writes pays on top of its GEMM. -1 on error. */
double gpu_cuda_test_fp8_quantize_bench(int m, int k);

#ifdef __cplusplus
}
#endif
#endif
