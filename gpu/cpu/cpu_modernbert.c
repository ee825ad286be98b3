/* ModernBERT on the CPU backend, over one chunk of whole sequences: embeddings (no
 * positions), pre-norm layers with RoPE on Q and K (the global or the local theta), global
 * attention or a sliding window of |i - j| <= local_window keys (only those keys are read),
 * GeGLU, the final norm, then the head on the first token or the tokens' mean: dense, act,
 * norm, classifier. Every token runs every layer: mean pooling reads them all. */
#include <math.h>
#include <string.h>

#include "gpu/cpu/cpu_backend_int.h"
#include "gpu/cpu/cpu_gemm.h"
#include "gpu/cpu/cpu_kernels.h"

/* Sequences up to this long run global attention as one GEMM-shaped pass (its scratch is
 * len x len); longer ones query in blocks of MB_ROWS rows, each block's scores a GEMM against
 * the head's packed K and its output one against packed V, so 8,192-token inputs need
 * MB_ROWS rows of scores, not 256 MiB. */
#define MB_FULL_LEN 512
#define MB_ROWS     64

static size_t up16(size_t n) {
    return (n + 15) / 16 * 16;
}

size_t gpu_cpu_modernbert_scratch_floats(const gpu_model_config_t *c, int max_len) {
    const int full = max_len < MB_FULL_LEN ? max_len : MB_FULL_LEN, hd = c->hidden / c->heads;
    size_t blocked = up16(gpu_cpu_gemm_packed_floats(max_len, hd)) +
                     up16(gpu_cpu_gemm_packed_floats(hd, max_len)) +
                     (size_t)MB_ROWS * up16((size_t)max_len);
    size_t small = gpu_cpu_attention_scratch_floats(full, hd) + up16((size_t)max_len);
    return blocked > small ? blocked : small;
}

/* Global attention of one long sequence, head by head: K and V packed once, then per block
 * of query rows S = Q K^T, row softmax of S / sqrt(d), O = S V (the GEMM path of
 * gpu_cpu_attention_seq, a block of rows at a time). */
static void attend_blocked(const gpu_model_config_t *c, const float *qkv, int len, float *ctx,
                           float *scratch) {
    const int H = c->hidden, hd = H / c->heads, ld = 3 * H, ls = (int)up16((size_t)len);
    const float scale = 1.0f / sqrtf((float)hd);
    float *kp = scratch;                                        /* K_h: N = len, K = hd */
    float *vp = kp + up16(gpu_cpu_gemm_packed_floats(len, hd)); /* V_h: N = hd, K = len */
    float *S = vp + up16(gpu_cpu_gemm_packed_floats(hd, len));  /* (MB_ROWS, ls) */
    for (int h = 0; h < c->heads; h++) {
        const int c0 = h * hd;
        gpu_cpu_gemm_pack_strided(qkv + H + c0, ld, len, hd, kp);
        gpu_cpu_gemm_pack_kn(qkv + 2 * H + c0, ld, len, hd, vp);
        for (int i0 = 0; i0 < len; i0 += MB_ROWS) {
            const int nq = len - i0 < MB_ROWS ? len - i0 : MB_ROWS;
            gpu_cpu_gemm(qkv + (size_t)i0 * ld + c0, ld, nq, kp, len, hd, NULL, GPU_CPU_EPI_STORE,
                         S, ls);
            for (int i = 0; i < nq; i++) {
                float *row = S + (size_t)i * ls, mx = -INFINITY, sum = 0.0f;
                for (int j = 0; j < len; j++) {
                    row[j] *= scale;
                    mx = row[j] > mx ? row[j] : mx;
                }
                for (int j = 0; j < len; j++)
                    sum += row[j] = expf(row[j] - mx);
                const float inv = 1.0f / sum;
                for (int j = 0; j < len; j++)
                    row[j] *= inv;
            }
            gpu_cpu_gemm(S, ls, nq, vp, hd, len, NULL, GPU_CPU_EPI_STORE, ctx + (size_t)i0 * H + c0,
                         H);
        }
    }
}

/* RoPE as HF's ModernBertRotaryEmbedding: inv_freq_j = 1 / theta^(2j / d) and angle
 * t inv_freq_j in fp32; q'[j] = q[j] cos - q[j + d/2] sin, q'[j + d/2] = q[j + d/2] cos +
 * q[j] sin. On Q and K of every head of rows (len, 3H) of one sequence, positions from 0. */
static void rope(float *qkv, int len, int H, int heads, float theta) {
    const int hd = H / heads, half = hd / 2;
    float inv[512]; /* half <= 512: head sizes up to 1024 */
    for (int j = 0; j < half; j++)
        inv[j] = 1.0f / powf(theta, (float)(2 * j) / (float)hd);
    for (int t = 0; t < len; t++) {
        float *row = qkv + (size_t)t * 3 * H;
        for (int j = 0; j < half; j++) {
            float sn, cs;
            sincosf((float)t * inv[j], &sn, &cs);
            for (int h = 0; h < 2 * heads; h++) { /* Q's heads, then K's */
                float *x = row + (size_t)h * hd;
                const float a = x[j], b = x[j + half];
                x[j] = a * cs - b * sn;
                x[j + half] = b * cs + a * sn;
            }
        }
    }
}

/* ctx rows (len, H) of one sequence from its qkv rows (len, 3H): global attention, or each
 * query against the keys of its window only. */
static void attend(const gpu_model_config_t *c, const float *qkv, int len, int local, float *ctx,
                   float *scratch) {
    const int H = c->hidden, hd = H / c->heads, ld = 3 * H;
    const float *q = qkv, *k = qkv + H, *v = qkv + 2 * H;
    if (!local || c->local_window >= len - 1) {
        if (len <= MB_FULL_LEN) {
            gpu_cpu_attention_seq(q, ld, len, k, v, ld, len, c->heads, hd, ctx, H, scratch);
            return;
        }
        if (gpu_cpu_gemm_available()) {
            attend_blocked(c, qkv, len, ctx, scratch);
            return;
        }
        for (int i = 0; i < len; i += MB_ROWS) {
            const int nq = len - i < MB_ROWS ? len - i : MB_ROWS; /* < len: the row path */
            gpu_cpu_attention_seq(q + (size_t)i * ld, ld, nq, k, v, ld, len, c->heads, hd,
                                  ctx + (size_t)i * H, H, scratch);
        }
        return;
    }
    const int w = c->local_window;
    for (int i = 0; i < len; i++) {
        const int lo = i - w > 0 ? i - w : 0, hi = i + w + 1 < len ? i + w + 1 : len;
        gpu_cpu_attention_seq(q + (size_t)i * ld, ld, 1, k + (size_t)lo * ld, v + (size_t)lo * ld,
                              ld, hi - lo, c->heads, hd, ctx + (size_t)i * H, H, scratch);
    }
}

/* y (n, H) = LayerNorm(x) without touching x. */
static void norm_copy(const float *x, float *y, const float *g, const float *b, int n, int H,
                      float eps) {
    memcpy(y, x, sizeof(float) * (size_t)n * H);
    gpu_cpu_ln(y, g, b, n, H, eps);
}

void gpu_cpu_modernbert_range(gpu_backend_t *be, const gpu_batch_t *bt, int s0, int s1,
                              float *logits, float *scratch) {
    const gpu_model_t *m = be->m;
    const gpu_model_config_t *c = &m->cfg;
    const int H = c->hidden, In = c->intermediate, L = c->num_labels, F = 2 * In;
    const int *cu = bt->cu_seqlens;
    const int t0 = cu[s0], n = cu[s1] - t0, ns = s1 - s0;
    float *x = be->x + (size_t)t0 * H;         /* (n, H) residual stream */
    float *qkv = be->qkv + (size_t)t0 * 3 * H; /* (n, 3H) */
    float *ctx = be->ctx + (size_t)t0 * H;     /* (n, H) attention output, later pooled rows */
    float *h = be->tmp + (size_t)t0 * H;       /* (n, H) normed input of a sublayer */
    float *ff = be->ff + (size_t)t0 * F;       /* (n, 2I) Wi output, GeGLU in its first I */
    for (int t = 0; t < n; t++)
        memcpy(x + (size_t)t * H, m->w.word_emb + (size_t)bt->ids[t0 + t] * H, sizeof(float) * H);
    gpu_cpu_ln(x, m->w.emb_ln_g, m->w.emb_ln_b, n, H, c->ln_eps);
    for (int l = 0; l < c->layers; l++) {
        const gpu_layer_weights_t *y = &m->w.layer[l];
        const cpu_layer_proj_t *p = &be->proj[l];
        const int local = l % c->global_every != 0;
        if (l == 0) /* layer 0's attn_norm is the identity */
            memcpy(h, x, sizeof(float) * (size_t)n * H);
        else
            norm_copy(x, h, y->ln1_g, y->ln1_b, n, H, c->ln_eps);
        gpu_cpu_project(&p->qkv, h, H, n, GPU_CPU_EPI_STORE, qkv, 3 * H);
        for (int s = s0; s < s1; s++) {
            const int len = cu[s + 1] - cu[s];
            float *sq = be->qkv + (size_t)cu[s] * 3 * H;
            rope(sq, len, H, c->heads, local ? c->rope_theta_local : c->rope_theta_global);
            attend(c, sq, len, local, be->ctx + (size_t)cu[s] * H, scratch);
        }
        gpu_cpu_project(&p->ao, ctx, H, n, GPU_CPU_EPI_ACCUM, x, H);
        norm_copy(x, h, y->ln2_g, y->ln2_b, n, H, c->ln_eps);
        gpu_cpu_project(&p->ff1, h, H, n, GPU_CPU_EPI_STORE, ff, F);
        gpu_cpu_act(ff, F, n, In, c->act);
        for (int t = 0; t < n; t++) {
            float *r = ff + (size_t)t * F;
            for (int i = 0; i < In; i++)
                r[i] *= r[In + i];
        }
        gpu_cpu_project(&p->ff2, ff, F, n, GPU_CPU_EPI_ACCUM, x, H);
    }
    gpu_cpu_ln(x, m->w.final_ln_g, m->w.final_ln_b, n, H, c->ln_eps);
    float *pooled = ctx; /* (ns, H) */
    for (int s = s0; s < s1; s++) {
        const float *sx = be->x + (size_t)cu[s] * H;
        float *o = pooled + (size_t)(s - s0) * H;
        const int len = cu[s + 1] - cu[s];
        if (!c->mean_pool) {
            memcpy(o, sx, sizeof(float) * H);
            continue;
        }
        for (int i = 0; i < H; i++) {
            float sum = 0.0f;
            for (int t = 0; t < len; t++)
                sum += sx[(size_t)t * H + i];
            o[i] = sum / (float)len;
        }
    }
    gpu_cpu_project_act(&be->pool, pooled, H, ns, c->head_act, h, H);
    gpu_cpu_ln(h, m->w.head_ln_g, m->w.head_ln_b, ns, H, c->ln_eps);
    gpu_cpu_project(&be->cls, h, H, ns, GPU_CPU_EPI_STORE, logits + (size_t)s0 * L, L);
}
