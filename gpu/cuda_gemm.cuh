// Row-major linear layers on cuBLASLt: Y (M, N) = X (M, K) W^T (+ bias, + GELU) with W as
// nn.Linear stores it (N, K); fp16/bf16 in and out, fp32 accumulation. Algorithms come from
// cuBLASLt's heuristic once per (N, K, epilogue, M bucket) and are cached, so a stream of
// batches with ever-changing token counts costs a handful of heuristic queries.
#ifndef RECLASS_GPU_CUDA_GEMM_CUH
#define RECLASS_GPU_CUDA_GEMM_CUH

#include <cublasLt.h>
#include <cuda_runtime.h>

enum { CUDA_GEMM_PLAIN = 0, CUDA_GEMM_BIAS = 1, CUDA_GEMM_GELU_BIAS = 2, CUDA_GEMM_EPIS = 3 };

#define CUDA_GEMM_CACHE 256

typedef struct {
    int n, k, epi, mb; // key: output features, input features, epilogue, M bucket
    cublasLtMatmulAlgo_t algo;
} cuda_gemm_entry_t;

typedef struct {
    cublasLtHandle_t lt;
    cublasLtMatmulDesc_t desc[CUDA_GEMM_EPIS];
    cudaDataType_t dt; // CUDA_R_16F or CUDA_R_16BF
    void *workspace;   // device, owned by the caller (an arena slice)
    size_t workspace_bytes;
    int gelu_epilogue; // 0 when cuBLASLt refused GELU_BIAS: bias + own exact-GELU kernel
    cuda_gemm_entry_t cache[CUDA_GEMM_CACHE];
    int n_cache;
    long heuristic_queries;
} cuda_gemm_t;

// bf16: 0 = fp16, 1 = bf16. Returns 0 or -1 (err set).
int cuda_gemm_init(cuda_gemm_t *g, int bf16, void *workspace, size_t workspace_bytes, char *err,
                   size_t errlen);
void cuda_gemm_free(cuda_gemm_t *g);
// Y (M, N) = X (M, K) W (N, K)^T [+ bias (N)] [then GELU]. Returns 0 or -1 (err set).
int cuda_gemm_run(cuda_gemm_t *g, const void *w, const void *x, void *y, const void *bias, int m,
                  int n, int k, int epi, cudaStream_t st, char *err, size_t errlen);

#endif
