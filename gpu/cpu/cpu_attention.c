/* The attention op on the CPU backend, one sequence at a time (gpu/graph.h GPU_OP_ATTENTION):
 * softmax attention over the whole sequence or a sliding window of keys, RoPE on Q and K
 * first, or DeBERTa's disentangled scores. Queries are every token of the sequence or only
 * its first (nq 1: the last layer of a cls-pooled model). */
#include <cblas.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "gpu/cpu/cpu_attention.h"
#include "gpu/cpu/cpu_gemm.h"
#include "gpu/cpu/cpu_kernels.h"

/* Sequences up to this long run full attention as one GEMM-shaped pass (its scratch is
 * len x len); longer ones query in blocks of BLOCK_ROWS rows, each block's scores a GEMM
 * against the head's packed K and its output one against packed V, so 8,192-token inputs
 * need BLOCK_ROWS rows of scores, not 256 MiB. */
#define FULL_LEN   512
#define BLOCK_ROWS 64

static size_t up16(size_t n) {
    return (n + 15) / 16 * 16;
}

size_t gpu_cpu_attn_scratch_floats(const gpu_op_t *op, int max_len) {
    const int hd = op->head_dim, full = max_len < FULL_LEN ? max_len : FULL_LEN;
    if (op->w[0] >= 0 || op->w[1] >= 0) {
        const size_t R = 2 * (size_t)op->rel_span, T = (size_t)max_len;
        return 2 * up16(T * R) + up16(T) + up16(2 * T); /* QPk, KPq, a score row, rel rows */
    }
    size_t blocked = up16(gpu_cpu_gemm_packed_floats(max_len, hd)) +
                     up16(gpu_cpu_gemm_packed_floats(hd, max_len)) +
                     (size_t)BLOCK_ROWS * up16((size_t)max_len);
    size_t small = gpu_cpu_attention_scratch_floats(full, hd) + up16((size_t)max_len);
    return blocked > small ? blocked : small;
}

/* Full attention of one long sequence, head by head: K and V packed once, then per block of
 * query rows S = Q K^T, row softmax of S / sqrt(d), O = S V. */
static void attend_blocked(const gpu_op_t *op, const float *q, int ldq, const float *k,
                           const float *v, int ldkv, int len, float *out, int ldo, float *scratch) {
    const int hd = op->head_dim, ls = (int)up16((size_t)len);
    const float scale = 1.0f / sqrtf((float)hd);
    float *kp = scratch;                                        /* K_h: N = len, K = hd */
    float *vp = kp + up16(gpu_cpu_gemm_packed_floats(len, hd)); /* V_h: N = hd, K = len */
    float *S = vp + up16(gpu_cpu_gemm_packed_floats(hd, len));  /* (BLOCK_ROWS, ls) */
    for (int h = 0; h < op->heads; h++) {
        const int c0 = h * hd;
        gpu_cpu_gemm_pack_strided(k + c0, ldkv, len, hd, kp);
        gpu_cpu_gemm_pack_kn(v + c0, ldkv, len, hd, vp);
        for (int i0 = 0; i0 < len; i0 += BLOCK_ROWS) {
            const int nq = len - i0 < BLOCK_ROWS ? len - i0 : BLOCK_ROWS;
            gpu_cpu_gemm(q + (size_t)i0 * ldq + c0, ldq, nq, kp, len, hd, NULL, GPU_CPU_EPI_STORE,
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
            gpu_cpu_gemm(S, ls, nq, vp, hd, len, NULL, GPU_CPU_EPI_STORE,
                         out + (size_t)i0 * ldo + c0, ldo);
        }
    }
}

/* RoPE as HF's ModernBertRotaryEmbedding: inv_freq_j = 1 / theta^(2j / d) and angle
 * t inv_freq_j in fp32; x'[j] = x[j] cos - x[j + d/2] sin, x'[j + d/2] = x[j + d/2] cos +
 * x[j] sin. On every head of q rows (nq) and k rows (len) of one sequence, positions from 0. */
static void rope(float *q, int ldq, int nq, float *k, int ldk, int len, int heads, int hd,
                 float theta) {
    const int half = hd / 2;
    float inv[512]; /* half <= 512: head sizes up to 1024 */
    for (int j = 0; j < half; j++)
        inv[j] = 1.0f / powf(theta, (float)(2 * j) / (float)hd);
    for (int t = 0; t < len; t++) {
        float *rows[2] = {q + (size_t)t * ldq, k + (size_t)t * ldk};
        for (int j = 0; j < half; j++) {
            float sn, cs;
            sincosf((float)t * inv[j], &sn, &cs);
            for (int h = t < nq ? 0 : heads; h < 2 * heads; h++) { /* Q's heads, then K's */
                float *x = rows[h / heads] + (size_t)(h % heads) * hd;
                const float a = x[j], b = x[j + half];
                x[j] = a * cs - b * sn;
                x[j + half] = b * cs + a * sn;
            }
        }
    }
}

/* DeBERTa: per head, c2p and p2c are two products against the relative embeddings' keys pk
 * / queries pq (2 span, H), Q pk^T (nq, 2 span) and K pq^T (len, 2 span); a score row then
 * gathers them at each pair's relative row. No (len, len) matrix is ever stored. */
static void attend_rel(const gpu_op_t *op, const float *q, int ldq, int nq, const float *k,
                       const float *v, int ldkv, int len, const float *pk, const float *pq,
                       float *out, int ldo, float *scratch) {
    const int hd = op->head_dim, H = op->heads * hd, R = 2 * op->rel_span;
    float *qpk = scratch;                               /* (len, R) */
    float *kpq = qpk + up16((size_t)len * R);           /* (len, R) */
    float *p = kpq + up16((size_t)len * R);             /* (len) one score row */
    int32_t *rrow = (int32_t *)(p + up16((size_t)len)); /* (2 len - 1) row of i - j */
    for (int d = -(len - 1); d <= len - 1; d++)
        rrow[d + len - 1] = gpu_op_rel_row(op, d);
    /* HF: sqrt(head_dim * factor) in fp32; q . (k / scale), c2p / scale, p2c / scale. */
    const float scale = sqrtf((float)hd * (float)op->scale_factor), inv = 1.0f / scale;
    for (int h = 0; h < op->heads; h++) {
        const int c0 = h * hd;
        const float *qh = q + c0, *kh = k + c0, *vh = v + c0;
        if (pk)
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, nq, R, hd, 1.0f, qh, ldq, pk + c0,
                        H, 0.0f, qpk, R);
        if (pq)
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, len, R, hd, 1.0f, kh, ldkv,
                        pq + c0, H, 0.0f, kpq, R);
        for (int i = 0; i < nq; i++) {
            cblas_sgemv(CblasRowMajor, CblasNoTrans, len, hd, inv, kh, ldkv, qh + (size_t)i * ldq,
                        1, 0.0f, p, 1);
            const int32_t *ri = rrow + i + len - 1; /* ri[-j] is the row of i - j */
            float mx = -INFINITY;
            for (int j = 0; j < len; j++) {
                const int r = ri[-j];
                float s = p[j];
                if (pk) s += qpk[(size_t)i * R + r] * inv;
                if (pq) s += kpq[(size_t)j * R + r] * inv;
                p[j] = s;
                mx = s > mx ? s : mx;
            }
            float sum = 0.0f;
            for (int j = 0; j < len; j++) {
                p[j] = expf(p[j] - mx);
                sum += p[j];
            }
            cblas_sgemv(CblasRowMajor, CblasTrans, len, hd, 1.0f / sum, vh, ldkv, p, 1, 0.0f,
                        out + (size_t)i * ldo + c0, 1);
        }
    }
}

void gpu_cpu_attn_seq(const gpu_op_t *op, float *q, int ldq, int nq, float *k, const float *v,
                      int ldkv, int len, const float *pk, const float *pq, float *out, int ldo,
                      float *scratch) {
    const int heads = op->heads, hd = op->head_dim;
    if (pk || pq) {
        attend_rel(op, q, ldq, nq, k, v, ldkv, len, pk, pq, out, ldo, scratch);
        return;
    }
    if (op->rope_theta > 0) rope(q, ldq, nq, k, ldkv, len, heads, hd, op->rope_theta);
    if (op->window <= 0 || op->window >= len - 1) {
        if (len <= FULL_LEN || nq < len) {
            gpu_cpu_attention_seq(q, ldq, nq, k, v, ldkv, len, heads, hd, out, ldo, scratch);
            return;
        }
        if (gpu_cpu_gemm_available()) {
            attend_blocked(op, q, ldq, k, v, ldkv, len, out, ldo, scratch);
            return;
        }
        for (int i = 0; i < len; i += BLOCK_ROWS) {
            const int n = len - i < BLOCK_ROWS ? len - i : BLOCK_ROWS; /* < len: the row path */
            gpu_cpu_attention_seq(q + (size_t)i * ldq, ldq, n, k, v, ldkv, len, heads, hd,
                                  out + (size_t)i * ldo, ldo, scratch);
        }
        return;
    }
    const int w = op->window;
    for (int i = 0; i < nq; i++) {
        const int lo = i - w > 0 ? i - w : 0, hi = i + w + 1 < len ? i + w + 1 : len;
        gpu_cpu_attention_seq(q + (size_t)i * ldq, ldq, 1, k + (size_t)lo * ldkv,
                              v + (size_t)lo * ldkv, ldkv, hi - lo, heads, hd,
                              out + (size_t)i * ldo, ldo, scratch);
    }
}
