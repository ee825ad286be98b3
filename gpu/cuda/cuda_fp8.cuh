// The CUDA side of FP8 (gpu/model/fp8.h): E4M3 weights with per-output-channel scales,
// quantized at load from the checkpoint's values; activations quantized per token where their
// row is written: the LayerNorm that writes its 16-bit row writes the codes and scale of the
// stored row too (no separate pass; gpu_fp8_norm_row's exact sequence); FFN-out's input (the
// GELU rows) by the FFN-in GEMM itself, as E4M3 under a static scale (gpu_graph_fp8_static_scale;
// cuda_fp8_gemm_run_q); rows written elsewhere (a shallow model's attention context) by one
// read-once pass per row (the kernels: cuda_fp8_quant.cu); and
// the cuBLASLt FP8 GEMM Y = (Xq Wq^T) s_x s_w + b with fp32 accumulation, 16-bit C/D and both
// scales applied in its epilogue as cuBLASLt's outer vectors
// (CUBLASLT_MATMUL_MATRIX_SCALE_OUTER_VEC_32F: s_w along op(A)'s M = the output features, s_x
// along N = the tokens), bias / GELU / ReLU / residual fused. Its algorithms are chosen per
// (N, K, epilogue, M bucket) and cached: the heuristic's first that runs, or in the backend's
// warm-up the fastest of its candidates that run (cuda_gemm.cuh); one cuBLASLt refuses is
// dropped, and a miss with none running asks for the exact M. Every scale and code
// follows gpu_fp8_scale / gpu_fp8_e4m3 bit for bit (cvt.rn.satfinite, __fdiv_rn), so
// test_gpu_fp8 compares codes exactly.
#ifndef RECLASS_GPU_CUDA_FP8_CUH
#define RECLASS_GPU_CUDA_FP8_CUH

#include <cublasLt.h>
#include <cuda_runtime.h>
#include <stdint.h>

#include "gpu/cuda/cuda_gemm.cuh"

// The widest 16-bit row the one-warp-per-row activation quantizer holds in registers.
#define CUDA_FP8_ACT_MAX_K 4096

// q (n, k) E4M3 and scale (n) of the rows of w (n, k), w of cuda type CUDA_GEMM_FP16 / BF16 /
// FP32 (cuda_gemm.cuh). 16-bit rows (activations; k % 8 == 0, k <= CUDA_FP8_ACT_MAX_K, w
// 16-byte and q 8-byte aligned): one warp per row, read once; otherwise one block per row (the
// weights' one-time conversion at init).
cudaError_t cuda_fp8_quantize_rows(const void *w, int type, int n, int k, uint8_t *q, float *scale,
                                   cudaStream_t s);

// out_t (n, H) = LayerNorm(a + res) in storage type T (a and out_t may alias; res may be NULL)
// as gpu_fp8_norm_row computes it, bit for bit; q (n, H) and scale (n) the E4M3 codes of the
// stored row (gpu_fp8_quantize_row of out_t's values). H % 8 == 0, H <= 1024.
template <typename T>
cudaError_t cuda_fp8_add_ln(const T *a, const T *res, const float *gamma, const float *beta, int n,
                            int H, float eps, T *out_t, uint8_t *q, float *scale, cudaStream_t s);

typedef struct {
    cublasLtHandle_t lt;
    cublasLtMatmulDesc_t desc[CUDA_GEMM_EPIS];   // TN, fp32 compute, outer-vector scales
    cublasLtMatmulDesc_t desc_q[CUDA_GEMM_EPIS]; // the same with E4M3 D under a D scale
    cudaDataType_t dt;                           // C, D and the bias: CUDA_R_16F or CUDA_R_16BF
    void *workspace;
    size_t workspace_bytes;
    cuda_gemm_entry_t cache[CUDA_GEMM_CACHE]; // algorithms by (n, k, epi, M bucket, beta, ldy)
    int n_cache;
    long heuristic_queries;
    int tune;         // as cuda_gemm_t's: > 1 only in the backend's warm-up, a miss times that many
    int gelu_refused; // 1 once cuBLASLt had no FP8 algorithm with the GELU epilogue
    int q_refused;    // 1 once cuBLASLt had no algorithm with an E4M3 output
    cudaEvent_t ev0, ev1;
} cuda_fp8_gemm_t;

// q (elems) = e4m3(x * inv) of 16-bit rows x (type CUDA_GEMM_FP16 / BF16), inv a power of two
// (gpu_fp8_pow2_inv of gpu_graph_fp8_static_scale): elems % 8 == 0, x 16-byte, q 8-byte aligned.
cudaError_t cuda_fp8_quantize_static(const void *x, int type, size_t elems, float inv, uint8_t *q,
                                     cudaStream_t s);

// type: CUDA_GEMM_FP16 or CUDA_GEMM_BF16 (the 16-bit outputs). COMMON_OK, or err's code.
common_status_t cuda_fp8_gemm_init(cuda_fp8_gemm_t *g, int type, void *workspace,
                                   size_t workspace_bytes, common_err_t *err);
void cuda_fp8_gemm_free(cuda_fp8_gemm_t *g);

// Y (m, n), rows ldy apart, = (Xq (m, k) Wq (n, k)^T) * x_scale[row] * w_scale[col] + bias
// (n), through epi (CUDA_GEMM_BIAS / GELU_BIAS / RELU_BIAS), plus res (m, n, may be y) when
// not NULL. k % 16 == 0, pointers 16-byte aligned. COMMON_OK, or err's code (what cuBLASLt
// refused).
common_status_t cuda_fp8_gemm_run(cuda_fp8_gemm_t *g, const uint8_t *wq, const float *w_scale,
                                  const uint8_t *xq, const float *x_scale, void *y, int ldy,
                                  const void *bias, const void *res, int m, int n, int k, int epi,
                                  cudaStream_t st, common_err_t *err);

// Yq (m, n) E4M3 = e4m3(d_scale[0] * epi((Xq Wq^T) x_scale[row] w_scale[col] + bias)): the
// same GEMM writing the codes of its output under a static scale (d_scale: device, 1 / the
// scale), so the next FP8 projection reads them with no pass of its own. c16: any 16-bit (m, n)
// buffer (cuBLASLt's C layout; not read). 0, or -1 when cuBLASLt has no such algorithm
// (remembered: the caller writes 16-bit rows and quantizes them, cuda_fp8_quantize_static).
int cuda_fp8_gemm_run_q(cuda_fp8_gemm_t *g, const uint8_t *wq, const float *w_scale,
                        const uint8_t *xq, const float *x_scale, uint8_t *yq, const void *c16,
                        const float *d_scale, const void *bias, int m, int n, int k, int epi,
                        cudaStream_t st);

#endif
