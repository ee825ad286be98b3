/* fp32 references of the ops ModernBERT and DeBERTa-v3 add to BERT's (the obvious loops; the
 * CPU backend's gpu/cpu/cpu_modernbert.c and cpu_deberta.c compute the same), for the CUDA
 * kernels' parity tests. Row-major; batches packed with prefix offsets cu_seqlens. */
#ifndef RECLASS_TESTS_LIB_REF_MODERN_H
#define RECLASS_TESTS_LIB_REF_MODERN_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* RoPE in place on Q (columns 0..) and K (columns k_off..) of rows x (n, ld), token t at
 * position pos[t] (HF's ModernBertRotaryEmbedding, as gpu/cpu/cpu_modernbert.c). */
void gpu_ref_rope(float *x, int ld, int k_off, const int32_t *pos, int n, int heads, int head_dim,
                  float theta);

/* out (n_tokens, heads * head_dim) = softmax(scale (q . k + c2p[i, r] + p2c[j, r])) v within
 * each sequence, r = rrow[i - j + rrow_mid]; keys with |i - j| > window dropped when window
 * >= 0; c2p / p2c (n_tokens, heads, R) NULL for none. */
void gpu_ref_attention_opts(const float *q, const float *k, const float *v, int ld,
                            const int32_t *cu_seqlens, int n_seqs, int heads, int head_dim,
                            float scale, int window, const float *c2p, const float *p2c,
                            const int32_t *rrow, int rrow_mid, int R, float *out);

/* out (n, heads, R) = x_h (n, d; rows of stride ldx) . rel_h (R, d; rel (R, heads * d)). */
void gpu_ref_rel_scores(const float *x, int ldx, int n, const float *rel, int R, int heads,
                        int head_dim, float *out);

#ifdef __cplusplus
}
#endif
#endif
