/* The graph's attention op (gpu/graph.h GPU_OP_ATTENTION) the obvious way, for the parity
 * test: RoPE on copies of Q and K, every score in double, the window as a mask, DeBERTa's
 * c2p / p2c added at each pair's relative row. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "tests/lib/ref_ops.h"

static void rope_rows(float *x, int rows, int heads, int hd, float theta) {
    const int half = hd / 2;
    for (int t = 0; t < rows; t++)
        for (int h = 0; h < heads; h++) {
            float *r = x + ((size_t)t * heads + h) * hd;
            for (int j = 0; j < half; j++) {
                const float inv = 1.0f / powf(theta, (float)(2 * j) / (float)hd);
                const float ang = (float)t * inv, a = r[j], b = r[j + half];
                r[j] = a * cosf(ang) - b * sinf(ang);
                r[j + half] = b * cosf(ang) + a * sinf(ang);
            }
        }
}

static double dot(const float *a, const float *b, int n) {
    double d = 0;
    for (int e = 0; e < n; e++)
        d += (double)a[e] * b[e];
    return d;
}

void gpu_ref_attention_op(const gpu_ref_attn_t *a, const float *q, int ldq, int nq, const float *k,
                          const float *v, int ldkv, int len, float *out, int ldo) {
    const int hd = a->head_dim, H = a->heads * hd;
    float *qc = malloc(sizeof(float) * (size_t)nq * H),
          *kc = malloc(sizeof(float) * (size_t)len * H);
    double *p = malloc(sizeof(double) * (size_t)len);
    if (!qc || !kc || !p) abort();
    for (int i = 0; i < nq; i++)
        memcpy(qc + (size_t)i * H, q + (size_t)i * ldq, sizeof(float) * H);
    for (int j = 0; j < len; j++)
        memcpy(kc + (size_t)j * H, k + (size_t)j * ldkv, sizeof(float) * H);
    if (a->rope_theta > 0) {
        rope_rows(qc, nq, a->heads, hd, a->rope_theta);
        rope_rows(kc, len, a->heads, hd, a->rope_theta);
    }
    const double scale = sqrt((double)hd * (a->scale_factor > 0 ? a->scale_factor : 1));
    for (int h = 0; h < a->heads; h++) {
        const int c0 = h * hd;
        for (int i = 0; i < nq; i++) {
            double mx = -INFINITY, sum = 0;
            for (int j = 0; j < len; j++) {
                p[j] = -INFINITY;
                if (a->window > 0 && abs(i - j) > a->window) continue;
                double s = dot(qc + (size_t)i * H + c0, kc + (size_t)j * H + c0, hd);
                const int r = a->rel ? gpu_op_rel_row(a->rel, i - j) : 0;
                if (a->pk) s += dot(qc + (size_t)i * H + c0, a->pk + (size_t)r * H + c0, hd);
                if (a->pq) s += dot(kc + (size_t)j * H + c0, a->pq + (size_t)r * H + c0, hd);
                p[j] = s / scale;
                if (p[j] > mx) mx = p[j];
            }
            for (int j = 0; j < len; j++)
                sum += p[j] = p[j] == -INFINITY ? 0 : exp(p[j] - mx);
            for (int e = 0; e < hd; e++) {
                double o = 0;
                for (int j = 0; j < len; j++)
                    o += p[j] / sum * v[(size_t)j * ldkv + c0 + e];
                out[(size_t)i * ldo + c0 + e] = (float)o;
            }
        }
    }
    free(qc);
    free(kc);
    free(p);
}
