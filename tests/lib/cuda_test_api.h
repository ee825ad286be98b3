/* Single CUDA kernels behind plain C calls, for the parity tests (tests/test_gpu_*.c): fp32
 * host arrays in and out; inside, the inputs are rounded to the storage type ("fp16" or
 * "bf16"), the kernel runs on a NaN-poisoned output, and the result comes back as fp32.
 * Each call allocates and frees its own device memory (tests only; the backend never does).
 * Every function returns 0, or -1 on a CUDA error (message on stderr). */
#ifndef RECLASS_TESTS_CUDA_TEST_API_H
#define RECLASS_TESTS_CUDA_TEST_API_H

#include <stddef.h>
#include <stdint.h>

#include "gpu/backend.h"
#include "gpu/cuda/cuda_backend.h"
#include "gpu/model/model.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Introspection of one "cuda" backend instance (the bench and the GPU tests use them; the product
 * has none of them). */

/* An allocation attempt through the backend's allocator: 0 = it succeeded, -1 = refused (it
 * refuses every attempt after init). */
int gpu_cuda_backend_try_alloc(gpu_backend_t *be, size_t bytes);
/* cuBLASLt heuristic queries made so far (stays small over a long run). */
long gpu_cuda_backend_heuristic_queries(gpu_backend_t *be);
/* The init sweep's GEMM autotuning: shape buckets tuned, how many picked another algorithm
 * than the heuristic's first, and the summed single-run ms of the first and of the picks. */
void gpu_cuda_backend_tune_stats(gpu_backend_t *be, long *tuned, long *changed, double *ms_top1,
                                 double *ms_best);

/* Per-phase GPU time of forwards (bench breakdown): the backend table's per-op times
 * (profile_ops) summed by phase. on = 1 starts (resets) profiling, 0 stops, -1 leaves it
 * (with no batch in flight); ms (GPU_CUDA_PROF_N) gets the totals so far in milliseconds when
 * not NULL (phases: gpu/cuda/cuda_backend.h). Profiling adds an event per op: time apart. */
int gpu_cuda_backend_profile(gpu_backend_t *be, int on, double *ms);

/* out (n_tokens, H) as gpu_ref_embed_ln. */
int gpu_cuda_test_embed_ln(const gpu_model_t *m, const char *precision, const int32_t *ids,
                           const int32_t *cu_seqlens, int n_seqs, float *out);

/* y (n, out) = x W^T + b, then GELU when gelu != 0 (cuBLASLt epilogue), plus res (n, out)
 * when not NULL (added in the epilogue, in place, as the fp16 backend does). */
int gpu_cuda_test_linear(const char *precision, const float *x, const float *w, const float *b,
                         const float *res, int n, int in, int out, int gelu, float *y);

/* TFLOP/s of one projection Y (m, n) = X (m, k) W^T + bias, epi 0 bias only, 1 GELU, 2
 * residual in place, X cold in L2, cuBLASLt tuned among 8 candidates (bench only). */
double gpu_cuda_test_gemm_bench(const char *precision, int m, int n, int k, int epi);

/* The same with cuBLASLt's heuristic candidate number cand (1-based) alone, untimed at
 * choice, over reps runs; desc gets the algorithm's configuration. -1 when there is no such
 * candidate (bench only: the energy probe runs each for a second or so). */
double gpu_cuda_test_gemm_candidate(const char *precision, int m, int n, int k, int epi, int cand,
                                    int reps, char *desc, size_t desclen);

/* Milliseconds per launch of the LayerNorm the fp16 backend runs after each residual GEMM,
 * (n, H) in place, averaged over iters launches; -1 on error (bench only). */
double gpu_cuda_test_ln_bench(const char *precision, int n, int H, int iters);

/* out (n, H) = LayerNorm(x + res) as gpu_ref_add_ln. */
int gpu_cuda_test_add_ln(const char *precision, const float *x, const float *res, const float *g,
                         const float *b, int n, int H, float eps, float *out);

/* The attention kernels: GPU_CUDA_TEST_ATT_AUTO (the one the backend runs on this device),
 * _MMA (mma.sync, every device) or _WGMMA (compute capability 9.0 only; elsewhere the calls
 * fail). */
enum { GPU_CUDA_TEST_ATT_AUTO, GPU_CUDA_TEST_ATT_MMA, GPU_CUDA_TEST_ATT_WGMMA };
/* 1 when the current device runs the wgmma kernel. */
int gpu_cuda_test_has_wgmma(void);

/* out (n_tokens, heads * 64) as gpu_ref_attention (head_dim must be 64, ld % 8 == 0) from
 * kernel (GPU_CUDA_TEST_ATT_*). */
int gpu_cuda_test_attention(const char *precision, int kernel, const float *q, const float *k,
                            const float *v, int ld, const int32_t *cu_seqlens, int n_seqs,
                            int heads, int head_dim, float *out);

/* out (n_seqs, heads * 64): the rows cu[s] of gpu_ref_attention, from the first-query
 * kernel the last layer uses (head_dim 64). */
int gpu_cuda_test_attention_first(const char *precision, const float *q, const float *k,
                                  const float *v, int ld, const int32_t *cu_seqlens, int n_seqs,
                                  int heads, float *out);

/* logits (n_seqs, L) from hidden (n_tokens, H) as gpu_ref_pool_classify (gathers [CLS];
 * the fp32 head the backend runs, on storage-type hidden rows). */
int gpu_cuda_test_pool_classify(const gpu_model_t *m, const char *precision, const float *hidden,
                                const int32_t *cu_seqlens, int n_seqs, float *logits);

/* TFLOP/s of the attention kernel (GPU_CUDA_TEST_ATT_*) on n_seqs sequences of len tokens,
 * random data, timed over iters launches; -1 on error. Bench only. */
double gpu_cuda_test_attention_bench(const char *precision, int kernel, int n_seqs, int len,
                                     int heads, int iters);

/* Rounds x in place through the storage type (so references see the kernel's inputs). */
void gpu_cuda_test_round(const char *precision, float *x, size_t n);

#ifdef __cplusplus
}
#endif
#endif
