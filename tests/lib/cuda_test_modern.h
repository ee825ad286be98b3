/* The kernels ModernBERT and DeBERTa-v3 add, behind plain C calls for tests/test_gpu_kernels.c:
 * fp32 host arrays in and out, rounded through the storage type ("fp16" or "bf16"), outputs
 * NaN-poisoned before the kernel runs. Each call allocates its own device memory (tests
 * only). Every function returns 0, or -1 on a CUDA error (message on stderr). */
#ifndef RECLASS_TESTS_CUDA_TEST_MODERN_H
#define RECLASS_TESTS_CUDA_TEST_MODERN_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* x (n, ld) with RoPE applied to Q (columns 0..) and K (columns k_off..), token t at
 * position pos[t]; the other columns come back as they went in. */
int gpu_cuda_test_rope(const char *precision, float *x, int ld, int k_off, const int32_t *pos,
                       int n, int heads, int head_dim, float theta);

/* out (n_tokens, heads * 64) = softmax(scale (q . k + c2p[i, r] + p2c[j, r])) v per sequence,
 * keys with |i - j| > window masked when window >= 0; c2p, p2c (n_tokens, heads, R) and rrow
 * (r = rrow[i - j + rrow_mid]) all NULL for none. kernel (GPU_CUDA_TEST_ATT_*,
 * tests/lib/cuda_test_api.h): where the wgmma kernel may run (a window, scale 1/8), whether it
 * does; -1 for GPU_CUDA_TEST_ATT_WGMMA on a device without it. */
int gpu_cuda_test_attention_opts(const char *precision, int kernel, const float *q, const float *k,
                                 const float *v, int ld, const int32_t *cu_seqlens, int n_seqs,
                                 int heads, float scale, int window, const float *c2p,
                                 const float *p2c, const int32_t *rrow, int rrow_mid, int R,
                                 float *out);

/* out as gpu_cuda_test_attention_opts (scale 1/8, no c2p / p2c) with RoPE at theta, token t at
 * position pos[t]: the keys turned in place (cuda_rope, keys only), the queries by the kernel
 * as it loads them. out_inplace: the same attention with the queries turned in place as well
 * and the kernel's turn off, which out must equal bit for bit. */
int gpu_cuda_test_attention_rope(const char *precision, int kernel, const float *q, const float *k,
                                 const float *v, int ld, const int32_t *cu_seqlens, int n_seqs,
                                 int heads, int window, const int32_t *pos, float theta, float *out,
                                 float *out_inplace);

/* x (n, 2I): its first I columns become act(x[:, :I]) * x[:, I:] (act a gpu_act_t). */
int gpu_cuda_test_geglu(const char *precision, float *x, int n, int I, int act);

/* out (n_seqs, H) = each sequence's mean row of x (n_tokens, H). */
int gpu_cuda_test_mean_pool(const char *precision, const float *x, const int32_t *cu_seqlens,
                            int n_seqs, int H, float *out);

/* out (n, heads, R) = x_h (n, d; rows of stride ldx) . rel_h (R, d; rel (R, heads * d)). */
int gpu_cuda_test_rel_scores(const char *precision, const float *x, int ldx, int n,
                             const float *rel, int R, int heads, int head_dim, float *out);

#ifdef __cplusplus
}
#endif
#endif
