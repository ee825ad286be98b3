/* fp32 references of the ModernBERT and DeBERTa ops (tests/lib/ref_modern.h). */
#include "tests/lib/ref_modern.h"

#include <math.h>
#include <stdlib.h>

void gpu_ref_rope(float *x, int ld, int k_off, const int32_t *pos, int n, int heads, int head_dim,
                  float theta) {
    const int half = head_dim / 2;
    for (int t = 0; t < n; t++)
        for (int j = 0; j < half; j++) {
            const float inv = 1.0f / powf(theta, (float)(2 * j) / (float)head_dim);
            float sn, cs;
            sincosf((float)pos[t] * inv, &sn, &cs);
            for (int h = 0; h < 2 * heads; h++) {
                float *e = x + (size_t)t * ld +
                           (h < heads ? h * head_dim : k_off + (h - heads) * head_dim);
                const float a = e[j], b = e[j + half];
                e[j] = a * cs - b * sn;
                e[j + half] = b * cs + a * sn;
            }
        }
}

void gpu_ref_attention_opts(const float *q, const float *k, const float *v, int ld,
                            const int32_t *cu, int n_seqs, int heads, int hd, float scale,
                            int window, const float *c2p, const float *p2c, const int32_t *rrow,
                            int rrow_mid, int R, float *out) {
    int maxlen = 1;
    for (int s = 0; s < n_seqs; s++)
        if (cu[s + 1] - cu[s] > maxlen) maxlen = cu[s + 1] - cu[s];
    double *p = malloc(sizeof(double) * (size_t)maxlen);
    const size_t ldb = (size_t)heads * R;
    for (int s = 0; s < n_seqs; s++) {
        const int t0 = cu[s], len = cu[s + 1] - t0;
        for (int h = 0; h < heads; h++)
            for (int i = 0; i < len; i++) {
                const float *qi = q + (size_t)(t0 + i) * ld + h * hd;
                double mx = -INFINITY, sum = 0;
                for (int j = 0; j < len; j++) {
                    if (window >= 0 && abs(i - j) > window) {
                        p[j] = -INFINITY;
                        continue;
                    }
                    const float *kj = k + (size_t)(t0 + j) * ld + h * hd;
                    double d = 0;
                    for (int e = 0; e < hd; e++)
                        d += (double)qi[e] * kj[e];
                    if (c2p && p2c) {
                        const int r = rrow[i - j + rrow_mid];
                        d += c2p[(size_t)(t0 + i) * ldb + (size_t)h * R + r] +
                             p2c[(size_t)(t0 + j) * ldb + (size_t)h * R + r];
                    }
                    p[j] = d * scale;
                    if (p[j] > mx) mx = p[j];
                }
                for (int j = 0; j < len; j++)
                    sum += p[j] = p[j] == -INFINITY ? 0 : exp(p[j] - mx);
                float *o = out + (size_t)(t0 + i) * heads * hd + h * hd;
                for (int e = 0; e < hd; e++) {
                    double acc = 0;
                    for (int j = 0; j < len; j++)
                        if (p[j] != 0) acc += p[j] * v[(size_t)(t0 + j) * ld + h * hd + e];
                    o[e] = (float)(acc / sum);
                }
            }
    }
    free(p);
}

void gpu_ref_rel_scores(const float *x, int ldx, int n, const float *rel, int R, int heads, int hd,
                        float *out) {
    for (int t = 0; t < n; t++)
        for (int h = 0; h < heads; h++)
            for (int r = 0; r < R; r++) {
                double d = 0;
                for (int e = 0; e < hd; e++)
                    d += (double)x[(size_t)t * ldx + h * hd + e] *
                         rel[(size_t)r * heads * hd + h * hd + e];
                out[((size_t)t * heads + h) * R + r] = (float)d;
            }
}
