// Row-major linear layers on cuBLASLt: Y (M, N) = X (M, K) W^T (+ bias, + GELU) with W as
// nn.Linear stores it (N, K); fp16/bf16 in and out, fp32 accumulation. Algorithms are chosen
// once per (N, K, epilogue, M bucket) and cached, so a stream of batches with ever-changing
// token counts costs a handful of queries: cuBLASLt's heuristic top-1, or (tune > 0, the
// backend's warm-up sweep at init) the fastest of its top candidates, timed.
#ifndef RECLASS_GPU_CUDA_GEMM_CUH
#define RECLASS_GPU_CUDA_GEMM_CUH

#include <cublasLt.h>
#include <cuda_runtime.h>

#include "common/err.h"

// Epilogues. cuBLASLt's GELU is the tanh approximation (HF's "gelu_new"); HF's "gelu" (the
// erf form) runs on it too: the two differ by at most 4.7e-4, under fp16's and bf16's
// rounding at those magnitudes, and an exact pass of its own would read and write the
// (tokens, I) activations once more every layer.
enum {
    CUDA_GEMM_PLAIN = 0,
    CUDA_GEMM_BIAS = 1,
    CUDA_GEMM_GELU_BIAS = 2, // tanh-form GELU (cuBLASLt's)
    CUDA_GEMM_RELU_BIAS = 3,
    CUDA_GEMM_EPIS = 4 // descriptors
};

// The epilogue of an FFN's first projection for activation act (gpu_act_t).
int cuda_gemm_act_epi(int act);

#define CUDA_GEMM_CACHE 256

typedef struct {
    int n, k, epi, mb, beta, ldy, ldx; // key: out/in features, epilogue, M bucket, C used, lds
    cublasLtMatmulAlgo_t algo;
} cuda_gemm_entry_t;

typedef struct {
    cublasLtHandle_t lt;
    cublasLtMatmulDesc_t desc[CUDA_GEMM_EPIS];
    cudaDataType_t dt; // CUDA_R_16F or CUDA_R_16BF
    void *workspace;   // device, owned by the caller (an arena slice)
    size_t workspace_bytes;
    int gelu_epilogue; // 0 when cuBLASLt refused GELU_BIAS: bias + own tanh-GELU kernel
    int relu_epilogue; // 0 when cuBLASLt refused RELU_BIAS: bias + own ReLU kernel
    cuda_gemm_entry_t cache[CUDA_GEMM_CACHE];
    int n_cache;
    long heuristic_queries;
    // Autotuning: while tune > 0, a cache miss times up to tune of cuBLASLt's candidates on
    // the call's own operands (the output is written once per run: only the backend's
    // warm-up sweep, whose data is thrown away, turns it on) and keeps the fastest.
    int tune;
    int only; // bench: > 0 takes the heuristic's candidate number only (1-based), untimed
    cudaEvent_t ev0, ev1;
    long tuned, tuned_changed;           // entries tuned; of them, where top-1 was not the fastest
    double tuned_ms_top1, tuned_ms_best; // summed over tuned entries (one run each)
} cuda_gemm_t;

enum { CUDA_GEMM_FP16 = 0, CUDA_GEMM_BF16 = 1, CUDA_GEMM_FP32 = 2 };
// type: CUDA_GEMM_FP16 / BF16 / FP32 for A, B, C, D and the bias. COMMON_OK, or err's code.
common_status_t cuda_gemm_init(cuda_gemm_t *g, int type, void *workspace, size_t workspace_bytes,
                               common_err_t *err);
void cuda_gemm_free(cuda_gemm_t *g);
// The top of the M bucket m falls in (algorithms are chosen per bucket, for its top):
// 64 for m <= 64, then quarter octaves (80, 96, 112, 128, 160, ...).
int cuda_gemm_bucket(int m);
// Y (M, N) = X (M, K) W (N, K)^T [+ bias (N)] [then GELU] [+ R (M, N)]: with res non-NULL the
// residual is added in the epilogue (beta = 1; res may be y itself). COMMON_OK, or err's code.
common_status_t cuda_gemm_run(cuda_gemm_t *g, const void *w, const void *x, void *y,
                              const void *bias, const void *res, int m, int n, int k, int epi,
                              cudaStream_t st, common_err_t *err);

// As cuda_gemm_run with Y's rows ldy elements apart (ldy >= N).
common_status_t cuda_gemm_run_ld(cuda_gemm_t *g, const void *w, const void *x, void *y, int ldy,
                                 const void *bias, const void *res, int m, int n, int k, int epi,
                                 cudaStream_t st, common_err_t *err);

// As cuda_gemm_run_ld with X's rows ldx elements apart (ldx >= K): a view of the first K
// columns of a wider tensor (GeGLU's gated half of the (M, 2I) Wi output).
common_status_t cuda_gemm_run_ldx(cuda_gemm_t *g, const void *w, const void *x, int ldx, void *y,
                                  int ldy, const void *bias, const void *res, int m, int n, int k,
                                  int epi, cudaStream_t st, common_err_t *err);

// The classifier head in fp32: logits (S, L) = cls_w act(pool_w x + pool_b) + cls_b for the
// S compact rows x (S, H) fp32; act (gpu_act_t) the family's head activation (BERT's tanh,
// DistilBERT's ReLU, ELECTRA's GELU); pooled (S, H) fp32 scratch. g must be an FP32 instance.
common_status_t cuda_head_run(cuda_gemm_t *g, const float *x, int s, const float *pool_w,
                              const float *pool_b, const float *cls_w, const float *cls_b, int h,
                              int l, int act, float *pooled, float *logits, cudaStream_t st,
                              common_err_t *err);

// DeBERTa's relative scores (cuda_rel.cu): one batched matmul over the heads per call, on the
// caller's workspace; algorithms per (token bucket, R, heads, head_dim, ldx, alignment),
// cached.
#define CUDA_REL_CACHE 64

typedef struct {
    int mb, R, heads, d, ldx;
    unsigned align; // bytes every matrix of the call starts on (the heuristic's minimum)
    cublasLtMatmulAlgo_t algo;
} cuda_rel_entry_t;

typedef struct cuda_rel_gemm {
    cublasLtHandle_t lt;
    cublasLtMatmulDesc_t desc; // A^T B, fp32 compute
    cudaDataType_t dt;         // CUDA_R_16F or CUDA_R_16BF
    void *workspace;           // device, owned by the caller (an arena slice)
    size_t workspace_bytes;
    cuda_rel_entry_t cache[CUDA_REL_CACHE];
    int n_cache;
    long queries; // heuristic queries so far
} cuda_rel_gemm_t;

// 0, or -1 (no cuBLASLt handle or descriptor).
int cuda_rel_init(cuda_rel_gemm_t *r, int bf16, void *workspace, size_t workspace_bytes);
void cuda_rel_free(cuda_rel_gemm_t *r);

// Times Y (m, n) = X (m, k) W^T + bias through cuda_gemm_run on random data
// (cuda_gemm_probe.cu): epi 0 bias only, 1 bias + GELU, 2 bias + residual in place. cold: X
// never in L2; tune: candidates timed on the first call (0: the heuristic's first); only > 0:
// that candidate (1-based) instead. warm untimed runs, then reps timed. TFLOP/s, or -1 with
// why in err (may be NULL); desc (may be NULL) gets the algorithm used.
double cuda_gemm_time(int bf16, int m, int n, int k, int epi, int cold, int tune, int warm,
                      int reps, int only, char *desc, size_t desclen, common_err_t *err);

#endif
