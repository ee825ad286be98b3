#include "gpu/cpu/cpu_kernels.h"

#include "gpu/cpu/cpu_gemm.h"

#include <math.h>
#include <string.h>

static size_t round_up(size_t n, size_t m) {
    return (n + m - 1) / m * m;
}

#define LANES 16 /* one AVX-512 or two AVX2 registers of partial sums */

static inline float lane_sum(const float *acc) {
    float s = 0;
    for (int l = 0; l < LANES; l++)
        s += acc[l];
    return s;
}

/* LayerNorm of v (H) into out; v may equal out. */
static inline void ln_row(const float *v, const float *g, const float *b, int H, float eps,
                          float *out) {
    float acc[LANES] = {0};
    int i = 0, Hv = H / LANES * LANES;
    for (; i < Hv; i += LANES)
        for (int l = 0; l < LANES; l++)
            acc[l] += v[i + l];
    float sum = lane_sum(acc);
    for (; i < H; i++)
        sum += v[i];
    float mean = sum / (float)H;
    float acc2[LANES] = {0};
    for (i = 0; i < Hv; i += LANES)
        for (int l = 0; l < LANES; l++) {
            float d = v[i + l] - mean;
            acc2[l] += d * d;
        }
    float var = lane_sum(acc2);
    for (; i < H; i++)
        var += (v[i] - mean) * (v[i] - mean);
    var /= (float)H;
    float rstd = 1.0f / sqrtf(var + eps);
    for (i = 0; i < H; i++)
        out[i] = (v[i] - mean) * rstd * g[i] + b[i];
}

void gpu_cpu_embed_rows(const float *word, const float *pos, const float *type, const float *g,
                        const float *b, int E, float eps, const int32_t *ids, int len, float *out,
                        int ldo) {
    for (int t = 0; t < len; t++) {
        float *o = out + (size_t)t * ldo;
        const float *we = word + (size_t)ids[t] * E, *pe = pos ? pos + (size_t)t * E : NULL;
        if (pe && type)
            for (int i = 0; i < E; i++)
                o[i] = we[i] + pe[i] + type[i];
        else
            for (int i = 0; i < E; i++)
                o[i] = we[i] + (pe ? pe[i] : 0.0f) + (type ? type[i] : 0.0f);
        ln_row(o, g, b, E, eps, o);
    }
}

void gpu_cpu_embed_ln(const gpu_model_t *m, const int32_t *ids, int len, float *out) {
    const gpu_model_weights_t *w = &m->w;
    gpu_cpu_embed_rows(w->word_emb, w->pos_emb, w->type_emb, w->emb_ln_g, w->emb_ln_b,
                       m->cfg.emb_size, m->cfg.ln_eps, ids, len, out, m->cfg.emb_size);
}

void gpu_cpu_ln(float *x, const float *g, const float *b, int n, int H, float eps) {
    for (int r = 0; r < n; r++) {
        float *xr = x + (size_t)r * H;
        ln_row(xr, g, b, H, eps, xr);
    }
}

void gpu_cpu_bias(float *y, int ld, const float *bias, int n, int cols) {
    for (int r = 0; r < n; r++) {
        float *yr = y + (size_t)r * ld;
        for (int i = 0; i < cols; i++)
            yr[i] += bias[i];
    }
}

/* erf(x) as x P(x^2) / Q(x^2) on [-4, 4] (erf is +-1 in float beyond): max error 7e-8.
 * The same coefficients in three widths: scalar, AVX2 and AVX-512, picked at run time. */
#define ERF_P13 -2.72614225801306e-10f
#define ERF_P11 2.77068142495902e-08f
#define ERF_P9  -2.10102402082508e-06f
#define ERF_P7  -5.69250639462346e-05f
#define ERF_P5  -7.34990630326855e-04f
#define ERF_P3  -2.95459980854025e-03f
#define ERF_P1  -1.60960333262415e-02f
#define ERF_Q8  -1.45660718464996e-05f
#define ERF_Q6  -2.13374055278905e-04f
#define ERF_Q4  -1.68282697438203e-03f
#define ERF_Q2  -7.37332916720468e-03f
#define ERF_Q0  -1.42647390514189e-02f

static inline float gelu_scalar(float v) {
    float x = v * 0.70710678118654752f;
    x = x < -4.0f ? -4.0f : x;
    x = x > 4.0f ? 4.0f : x;
    float x2 = x * x;
    float p = ERF_P13;
    p = p * x2 + ERF_P11;
    p = p * x2 + ERF_P9;
    p = p * x2 + ERF_P7;
    p = p * x2 + ERF_P5;
    p = p * x2 + ERF_P3;
    p = p * x2 + ERF_P1;
    float q = ERF_Q8;
    q = q * x2 + ERF_Q6;
    q = q * x2 + ERF_Q4;
    q = q * x2 + ERF_Q2;
    q = q * x2 + ERF_Q0;
    return 0.5f * v * (1.0f + x * p / q);
}

static void gelu_generic(float *y, const float *bias, int n, int cols) {
    for (int row = 0; row < n; row++)
        for (int i = 0; i < cols; i++)
            y[(size_t)row * cols + i] = gelu_scalar(y[(size_t)row * cols + i] + bias[i]);
}

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

#define GELU_BODY(V, SET1, MUL, FMADD, MIN, MAX, DIV, ADD, v)                                      \
    V x = MUL(v, SET1(0.70710678118654752f));                                                      \
    x = MIN(MAX(x, SET1(-4.0f)), SET1(4.0f));                                                      \
    V x2 = MUL(x, x);                                                                              \
    V p = FMADD(SET1(ERF_P13), x2, SET1(ERF_P11));                                                 \
    p = FMADD(p, x2, SET1(ERF_P9));                                                                \
    p = FMADD(p, x2, SET1(ERF_P7));                                                                \
    p = FMADD(p, x2, SET1(ERF_P5));                                                                \
    p = FMADD(p, x2, SET1(ERF_P3));                                                                \
    p = FMADD(p, x2, SET1(ERF_P1));                                                                \
    V q = FMADD(SET1(ERF_Q8), x2, SET1(ERF_Q6));                                                   \
    q = FMADD(q, x2, SET1(ERF_Q4));                                                                \
    q = FMADD(q, x2, SET1(ERF_Q2));                                                                \
    q = FMADD(q, x2, SET1(ERF_Q0));                                                                \
    V e = DIV(MUL(x, p), q);                                                                       \
    V r = MUL(MUL(SET1(0.5f), v), ADD(SET1(1.0f), e));

/* a / b through a 14-bit reciprocal and one Newton step (relative error ~1e-7): the
 * divider would otherwise bound the GELU loop. */
__attribute__((target("avx512f"))) static inline __m512 div_nr512(__m512 a, __m512 b) {
    __m512 r = _mm512_rcp14_ps(b);
    r = _mm512_mul_ps(r, _mm512_fnmadd_ps(b, r, _mm512_set1_ps(2.0f)));
    return _mm512_mul_ps(a, r);
}

__attribute__((target("avx512f"))) static void gelu_avx512(float *y, const float *bias, int n,
                                                           int cols) {
    for (int row = 0; row < n; row++) {
        float *yr = y + (size_t)row * cols;
        int i = 0;
        for (; i + 16 <= cols; i += 16) {
            __m512 v = _mm512_add_ps(_mm512_loadu_ps(yr + i), _mm512_loadu_ps(bias + i));
            GELU_BODY(__m512, _mm512_set1_ps, _mm512_mul_ps, _mm512_fmadd_ps, _mm512_min_ps,
                      _mm512_max_ps, div_nr512, _mm512_add_ps, v)
            _mm512_storeu_ps(yr + i, r);
        }
        for (; i < cols; i++)
            yr[i] = gelu_scalar(yr[i] + bias[i]);
    }
}

__attribute__((target("avx2,fma"))) static void gelu_avx2(float *y, const float *bias, int n,
                                                          int cols) {
    for (int row = 0; row < n; row++) {
        float *yr = y + (size_t)row * cols;
        int i = 0;
        for (; i + 8 <= cols; i += 8) {
            __m256 v = _mm256_add_ps(_mm256_loadu_ps(yr + i), _mm256_loadu_ps(bias + i));
            GELU_BODY(__m256, _mm256_set1_ps, _mm256_mul_ps, _mm256_fmadd_ps, _mm256_min_ps,
                      _mm256_max_ps, _mm256_div_ps, _mm256_add_ps, v)
            _mm256_storeu_ps(yr + i, r);
        }
        for (; i < cols; i++)
            yr[i] = gelu_scalar(yr[i] + bias[i]);
    }
}
#endif

typedef void (*gelu_fn)(float *, const float *, int, int);

static gelu_fn gelu_pick(void) {
#if defined(__x86_64__) && defined(__GNUC__)
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f")) return gelu_avx512;
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return gelu_avx2;
#endif
    return gelu_generic;
}

void gpu_cpu_bias_gelu(float *y, const float *bias, int n, int cols) {
    gelu_pick()(y, bias, n, cols); /* a few loads per call of many rows */
}

void gpu_cpu_act(float *y, int ld, int n, int cols, gpu_act_t act) {
    for (int r = 0; r < n; r++) {
        float *yr = y + (size_t)r * ld;
        switch (act) {
        case GPU_ACT_GELU:
            for (int i = 0; i < cols; i++)
                yr[i] = 0.5f * yr[i] * (1.0f + erff(yr[i] * 0.70710678118654752f));
            break;
        case GPU_ACT_GELU_TANH:
            for (int i = 0; i < cols; i++) {
                float v = yr[i];
                yr[i] =
                    0.5f * v * (1.0f + tanhf(0.79788456080286536f * (v + 0.044715f * v * v * v)));
            }
            break;
        case GPU_ACT_RELU:
            for (int i = 0; i < cols; i++)
                yr[i] = yr[i] > 0.0f ? yr[i] : 0.0f;
            break;
        case GPU_ACT_TANH:
            for (int i = 0; i < cols; i++)
                yr[i] = tanhf(yr[i]);
            break;
        }
    }
}

void gpu_cpu_tanh(float *x, size_t n) {
    for (size_t i = 0; i < n; i++)
        x[i] = tanhf(x[i]);
}

static inline float dot(const float *a, const float *b, int n) {
    float acc[LANES] = {0};
    int i = 0, nv = n / LANES * LANES;
    for (; i < nv; i += LANES)
        for (int l = 0; l < LANES; l++)
            acc[l] += a[i + l] * b[i + l];
    float s = lane_sum(acc);
    for (; i < n; i++)
        s += a[i] * b[i];
    return s;
}

static void attention_generic(const float *q, int ldq, int nq, const float *k, const float *v,
                              int ldkv, int len, int heads, int head_dim, float *out, int ldo,
                              float *p) {
    float scale = 1.0f / sqrtf((float)head_dim);
    for (int h = 0; h < heads; h++) {
        int c0 = h * head_dim;
        for (int i = 0; i < nq; i++) {
            const float *qi = q + (size_t)i * ldq + c0;
            float mx = -INFINITY;
            for (int j = 0; j < len; j++) {
                p[j] = dot(qi, k + (size_t)j * ldkv + c0, head_dim) * scale;
                mx = p[j] > mx ? p[j] : mx;
            }
            float sum = 0;
            for (int j = 0; j < len; j++) {
                p[j] = expf(p[j] - mx);
                sum += p[j];
            }
            float inv = 1.0f / sum;
            float *o = out + (size_t)i * ldo + c0;
            memset(o, 0, sizeof(float) * (size_t)head_dim);
            for (int j = 0; j < len; j++) {
                const float *vj = v + (size_t)j * ldkv + c0;
                float pj = p[j] * inv;
                for (int e = 0; e < head_dim; e++)
                    o[e] += pj * vj[e];
            }
        }
    }
}

void gpu_cpu_fill_rows(float *y, int ld, const float *bias, int n, int cols) {
    for (int r = 0; r < n; r++)
        memcpy(y + (size_t)r * ld, bias, sizeof(float) * (size_t)cols);
}

#if defined(__x86_64__) && defined(__GNUC__)
/* e^x for x <= 0 (softmax after subtracting the max): Cephes' expf polynomial on
 * x - n ln2, scaled by 2^n; within 2 ulp of expf, 0 below -87. */
__attribute__((target("avx512f"))) static inline __m512 exp512(__m512 x) {
    x = _mm512_max_ps(x, _mm512_set1_ps(-87.0f));
    __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                    _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);
    r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
    __m512 p = _mm512_set1_ps(1.9875691500e-4f);
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.3981999507e-3f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073e-3f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894e-2f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459e-1f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201e-1f));
    p = _mm512_fmadd_ps(_mm512_mul_ps(p, r), r, _mm512_add_ps(r, _mm512_set1_ps(1.0f)));
    return _mm512_scalef_ps(p, n);
}

/* p[0..len) = softmax(p) in place, len padded to 16 in p's storage; returns nothing. */
__attribute__((target("avx512f"))) static inline void softmax512(float *p, int len);

/* Rows of at least this many tokens take the GEMM path: scores and outputs as products on
 * packed K and V panels, which at long lengths are most of a layer's FLOPs. */
#define ATT_GEMM_MIN_LEN 32

/* Full self-attention of one sequence (every token queries), head by head:
 * S = Q K^T on K packed into panels, softmax rows of S * scale, O = S V on V packed. */
__attribute__((target("avx512f"))) static void
attention_gemm(const float *q, int ldq, const float *k, const float *v, int ldkv, int len,
               int heads, int head_dim, float *out, int ldo, float *scratch) {
    float scale = 1.0f / sqrtf((float)head_dim);
    int ls = (int)round_up((size_t)len, 16);
    float *S = scratch;                                         /* (len, ls) */
    float *kp = S + round_up((size_t)len * ls, 16);             /* packed K_h: N = len, K = hd */
    float *vp = kp + gpu_cpu_gemm_packed_floats(len, head_dim); /* packed V_h: N = hd, K = len */
    for (int h = 0; h < heads; h++) {
        int c0 = h * head_dim;
        gpu_cpu_gemm_pack_strided(k + c0, ldkv, len, head_dim, kp);
        gpu_cpu_gemm(q + c0, ldq, len, kp, len, head_dim, NULL, GPU_CPU_EPI_STORE, S, ls);
        for (int i = 0; i < len; i++) {
            float *row = S + (size_t)i * ls;
            for (int j = 0; j < len; j += 16)
                _mm512_storeu_ps(row + j,
                                 _mm512_mul_ps(_mm512_loadu_ps(row + j), _mm512_set1_ps(scale)));
            softmax512(row, len);
        }
        gpu_cpu_gemm_pack_kn(v + c0, ldkv, len, head_dim, vp);
        gpu_cpu_gemm(S, ls, len, vp, head_dim, len, NULL, GPU_CPU_EPI_STORE, out + c0, ldo);
    }
}

__attribute__((target("avx512f"))) static inline void softmax512(float *p, int len) {
    __m512 mx = _mm512_set1_ps(-INFINITY);
    for (int j = 0; j < len; j += 16) {
        __mmask16 m = len - j >= 16 ? 0xffff : (__mmask16)((1u << (len - j)) - 1);
        mx = _mm512_mask_max_ps(mx, m, mx, _mm512_maskz_loadu_ps(m, p + j));
    }
    __m512 vmax = _mm512_set1_ps(_mm512_reduce_max_ps(mx));
    __m512 sum = _mm512_setzero_ps();
    for (int j = 0; j < len; j += 16) {
        __mmask16 m = len - j >= 16 ? 0xffff : (__mmask16)((1u << (len - j)) - 1);
        __m512 e = _mm512_maskz_mov_ps(m, exp512(_mm512_sub_ps(_mm512_loadu_ps(p + j), vmax)));
        _mm512_storeu_ps(p + j, e);
        sum = _mm512_add_ps(sum, e);
    }
    __m512 inv = _mm512_set1_ps(1.0f / _mm512_reduce_add_ps(sum));
    for (int j = 0; j < len; j += 16)
        _mm512_storeu_ps(p + j, _mm512_mul_ps(_mm512_loadu_ps(p + j), inv));
}

/* head_dim a multiple of 16: a score is a 16-wide dot product, the softmax one vector op
 * per 16 keys. (Transposing K to score 16 keys per FMA measured no faster at BERT's
 * short lengths.) */
__attribute__((target("avx512f"))) static void
attention_avx512(const float *q, int ldq, int nq, const float *k, const float *v, int ldkv, int len,
                 int heads, int head_dim, float *out, int ldo, float *p) {
    if (nq == len && len >= ATT_GEMM_MIN_LEN) {
        attention_gemm(q, ldq, k, v, ldkv, len, heads, head_dim, out, ldo, p);
        return;
    }
    float scale = 1.0f / sqrtf((float)head_dim);
    for (int h = 0; h < heads; h++) {
        int c0 = h * head_dim;
        for (int i = 0; i < nq; i++) {
            const float *qi = q + (size_t)i * ldq + c0;
            for (int j = 0; j < len; j++) {
                const float *kj = k + (size_t)j * ldkv + c0;
                __m512 acc = _mm512_mul_ps(_mm512_loadu_ps(qi), _mm512_loadu_ps(kj));
                for (int e = 16; e < head_dim; e += 16)
                    acc = _mm512_fmadd_ps(_mm512_loadu_ps(qi + e), _mm512_loadu_ps(kj + e), acc);
                p[j] = _mm512_reduce_add_ps(acc) * scale;
            }
            softmax512(p, len);
            float *o = out + (size_t)i * ldo + c0;
            for (int e = 0; e < head_dim; e += 16) {
                __m512 acc = _mm512_setzero_ps();
                for (int j = 0; j < len; j++)
                    acc = _mm512_fmadd_ps(_mm512_set1_ps(p[j]),
                                          _mm512_loadu_ps(v + (size_t)j * ldkv + c0 + e), acc);
                _mm512_storeu_ps(o + e, acc);
            }
        }
    }
}
#endif

size_t gpu_cpu_attention_scratch_floats(int max_len, int head_dim) {
    size_t ls = round_up((size_t)max_len, 16);
    return round_up((size_t)max_len * ls, 16) + gpu_cpu_gemm_packed_floats(max_len, head_dim) +
           gpu_cpu_gemm_packed_floats(head_dim, max_len);
}

void gpu_cpu_attention_seq(const float *q, int ldq, int nq, const float *k, const float *v,
                           int ldkv, int len, int heads, int head_dim, float *out, int ldo,
                           float *p) {
#if defined(__x86_64__) && defined(__GNUC__)
    __builtin_cpu_init(); /* idempotent; the CPU model is read once by the runtime */
    if (__builtin_cpu_supports("avx512f") && head_dim % 16 == 0) {
        attention_avx512(q, ldq, nq, k, v, ldkv, len, heads, head_dim, out, ldo, p);
        return;
    }
#endif
    attention_generic(q, ldq, nq, k, v, ldkv, len, heads, head_dim, out, ldo, p);
}
