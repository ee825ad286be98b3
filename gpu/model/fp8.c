#include "gpu/model/fp8.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* Mirrors the E4M3 rules of __nv_cvt_double_to_fp8 on a float's bits: below 2^-10 (half the
 * smallest subnormal) 0, above 448 + half an ulp (464) the saturated 0x7E, a tie rounds to
 * the even code. */
uint8_t gpu_fp8_e4m3(float x) {
    uint32_t b;
    memcpy(&b, &x, sizeof b);
    const uint8_t sign = (uint8_t)((b >> 24) & 0x80u);
    const uint32_t a = b & 0x7FFFFFFFu;
    if (a > 0x7F800000u) return 0x7F;         /* NaN (canonical, positive) */
    if (a > 0x43E80000u) return sign | 0x7Eu; /* > 464: saturate (inf too) */
    if (a <= 0x3A800000u) return sign;        /* <= 2^-10: zero */
    const uint32_t e = a >> 23;               /* float exponent, biased by 127 */
    const uint32_t m = (a & 0x7FFFFFu) | 0x800000u;
    uint32_t res, rem, half;
    if (a >= 0x3C800000u) { /* >= 2^-6: normal; keep 3 of 23 mantissa bits */
        res = ((e - 127u + 7u) << 3) | ((a >> 20) & 7u);
        rem = a & 0xFFFFFu;
        half = 0x80000u;
    } else {                             /* subnormal: units of 2^-9, value = m * 2^(e - 150) */
        const uint32_t shift = 141u - e; /* 21..24 */
        res = m >> shift;
        rem = m & ((1u << shift) - 1u);
        half = 1u << (shift - 1u);
    }
    if (rem > half || (rem == half && (res & 1u))) res++;
    return (uint8_t)(sign | res);
}

float gpu_fp8_e4m3_float(uint8_t q) {
    const int e = (q >> 3) & 0xF, m = q & 7;
    float v;
    if ((q & 0x7F) == 0x7F)
        v = NAN;
    else if (e == 0)
        v = ldexpf((float)m, -9);
    else
        v = ldexpf(1.0f + (float)m / 8.0f, e - 7);
    return (q & 0x80) ? -v : v;
}

float gpu_fp8_scale(float amax) {
    return amax > 0.0f ? amax / GPU_FP8_E4M3_MAX : 1.0f;
}

float gpu_fp8_inv_scale(float amax) {
    return amax > 0.0f ? GPU_FP8_E4M3_MAX / amax : 1.0f;
}

static float row_amax(const float *x, int n) {
    float a = 0.0f;
    for (int i = 0; i < n; i++)
        a = fmaxf(a, fabsf(x[i]));
    return a;
}

float gpu_fp8_quantize_row(const float *x, int n, uint8_t *q) {
    const float amax = row_amax(x, n), inv = gpu_fp8_inv_scale(amax);
    for (int i = 0; i < n; i++)
        q[i] = gpu_fp8_e4m3(x[i] * inv);
    return gpu_fp8_scale(amax);
}

void gpu_fp8_fake_row(const float *x, int n, float *y) {
    const float amax = row_amax(x, n), inv = gpu_fp8_inv_scale(amax), s = gpu_fp8_scale(amax);
    for (int i = 0; i < n; i++)
        y[i] = gpu_fp8_e4m3_float(gpu_fp8_e4m3(x[i] * inv)) * s;
}

float gpu_fp8_act_bound_scale(const float *gamma, const float *beta, int H, const float *w,
                              const float *b, int n) {
    double gmax = 0, bsq = 0, zmax = 0.17; /* |GELU(z)| <= 0.17 for z < 0 */
    for (int i = 0; i < H; i++) {
        gmax = fmax(gmax, fabs((double)gamma[i]));
        bsq += (double)beta[i] * beta[i];
    }
    const double ynorm = gmax * sqrt((double)H) + sqrt(bsq);
    for (int r = 0; r < n; r++) {
        double wsq = 0;
        for (int i = 0; i < H; i++)
            wsq += (double)w[(size_t)r * H + i] * w[(size_t)r * H + i];
        zmax = fmax(zmax, ynorm * sqrt(wsq) + (b ? fabs((double)b[r]) : 0.0));
    }
    int e;
    (void)frexp(1.25 * zmax / GPU_FP8_E4M3_MAX, &e); /* x = f 2^e, 0.5 <= f < 1: x <= 2^e */
    return ldexpf(1.0f, e);
}

float gpu_fp8_pow2_inv(float s) {
    int e;
    (void)frexpf(s, &e); /* s = 0.5 * 2^e */
    return ldexpf(1.0f, 1 - e);
}

void gpu_fp8_fake_row_static(const float *x, int n, float s, float *y) {
    const float inv = gpu_fp8_pow2_inv(s);
    for (int i = 0; i < n; i++)
        y[i] = gpu_fp8_e4m3_float(gpu_fp8_e4m3(x[i] * inv)) * s;
}

/* The 32 lanes' partial sums of the butterfly, as the warp adds them (fp8.h, step 3). */
static float lanes_sum(float part[32]) {
    for (int o = 16; o > 0; o >>= 1) {
        float next[32];
        for (int l = 0; l < 32; l++)
            next[l] = part[l] + part[l ^ o];
        memcpy(part, next, sizeof next);
    }
    return part[0];
}

void gpu_fp8_norm_row(const float *x, const float *res, const float *gamma, const float *beta,
                      int H, float eps, float *y) {
    const int nch = H / 8;
    float part[32];
    for (int i = 0; i < H; i++)
        y[i] = res ? x[i] + res[i] : x[i];
    for (int l = 0; l < 32; l++) {
        float s = 0.0f;
        for (int ch = l; ch < nch; ch += 32)
            for (int i = 0; i < 8; i++)
                s += y[ch * 8 + i];
        part[l] = s;
    }
    const float mean = lanes_sum(part) / (float)H;
    for (int l = 0; l < 32; l++) {
        float s = 0.0f;
        for (int ch = l; ch < nch; ch += 32)
            for (int i = 0; i < 8; i++) {
                const float d = y[ch * 8 + i] - mean;
                s = fmaf(d, d, s);
            }
        part[l] = s;
    }
    const float var = lanes_sum(part) / (float)H;
    const float rstd = 1.0f / sqrtf(var + eps);
    for (int i = 0; i < H; i++)
        y[i] = fmaf((y[i] - mean) * rstd, gamma[i], beta[i]);
}

/* Measured with the C reference against HF fp32 (tests/bench/fp8_sensitivity.c,
 * fp8_recipes.py; the tables in gpu/NOTES-cuda.md "FP8"). The demo checkpoint (4 x 256, trained
 * from scratch, small margins): every projection in FP8 keeps 98.98% top-1 on CLINC150 and
 * 95.09% on long complaints, any whole layer falls under 99.0% on the complaints, and of its
 * inner layers only the attention-out projections hold both gates (99.64% / 99.24%; QKV + FFN-in
 * there: 99.33% / 96.41%). That is the plan below GPU_FP8_DEEP layers: 7% of bert-base's FLOPs,
 * too few to speed anything up. From GPU_FP8_DEEP layers on, deep_plan: the points whose input
 * is written as E4M3 at no pass of its own (QKV and FFN-in: by the LayerNorm, per token; FFN-out:
 * by the FFN-in GEMM under the static scale of gpu_fp8_act_bound_scale), in the layers it names
 * (the first reads the embeddings, the last feeds the head). Attention-out's input comes from
 * the attention kernel, which holds one head of a row: it would pay a quantize pass costing what
 * FP8 saves on its GEMM (`test_gpu_fp8 bench`). Whether a BERT-base classifier holds the gates
 * with it is measured on the device (tests/bench/device_run.sh fp8, parts recipes and agree, on
 * a BERT-base-geometry classifier trained there); the demo cannot say. */
static const struct {
    int on;          /* the point runs FP8 in deep models */
    int first, last; /* in layers first .. layers - 1 - last */
} deep_plan[GPU_FP8_POINTS] = {[GPU_FP8_QKV] = {1, 1, 1},
                               [GPU_FP8_AO] = {0, 0, 0},
                               [GPU_FP8_FF1] = {1, 1, 1},
                               [GPU_FP8_FF2] = {0, 1, 1}}; /* on: a candidate, off until
                                                            * the device run shows BERT-base
                                                            * holds the gates with it */

int gpu_fp8_runs(const gpu_model_config_t *cfg, int layer, gpu_fp8_point_t p) {
    /* a gated FFN's (GeGLU) FFN-out input is a product of two GEMM columns: no bound of
     * gpu_fp8_act_bound_scale's, no row a kernel holds whole */
    if (p == GPU_FP8_FF2 && gpu_model_glu(cfg)) return 0;
    if (cfg->layers >= GPU_FP8_DEEP)
        return deep_plan[p].on && layer >= deep_plan[p].first &&
               layer + deep_plan[p].last < cfg->layers;
    if (layer <= 0 || layer + 1 >= cfg->layers) return 0;
    return p == GPU_FP8_AO;
}

static const char *const point_names[GPU_FP8_POINTS] = {"qkv", "ao", "ff1", "ff2"};

/* Projection FLOPs per token of one point, in units of H^2 (I / H for the FFN). */
static double point_flops(const gpu_model_config_t *c, gpu_fp8_point_t p) {
    const double H = c->hidden, I = c->intermediate;
    return p == GPU_FP8_QKV ? 3 * H * H : p == GPU_FP8_AO ? H * H : I * H;
}

int gpu_fp8_count(const gpu_model_config_t *cfg, double *flop_share) {
    int n = 0;
    double on = 0, all = 0;
    for (int l = 0; l < cfg->layers; l++)
        for (int p = 0; p < GPU_FP8_POINTS; p++) {
            all += point_flops(cfg, (gpu_fp8_point_t)p);
            if (gpu_fp8_runs(cfg, l, (gpu_fp8_point_t)p)) {
                n++;
                on += point_flops(cfg, (gpu_fp8_point_t)p);
            }
        }
    if (flop_share) *flop_share = all > 0 ? on / all : 0;
    return n;
}

/* The points of layer l in FP8, as "qkv ao ff1 ff2" or "none". */
static void layer_points(const gpu_model_config_t *cfg, int l, char *buf, size_t len) {
    buf[0] = '\0';
    size_t at = 0;
    for (int p = 0; p < GPU_FP8_POINTS; p++)
        if (gpu_fp8_runs(cfg, l, (gpu_fp8_point_t)p) && at < len)
            at += (size_t)snprintf(buf + at, len - at, "%s%s", at ? " " : "", point_names[p]);
    if (!at) snprintf(buf, len, "none");
}

const char *gpu_fp8_plan_text(const gpu_model_config_t *cfg, char *buf, size_t len) {
    double share;
    const int n = gpu_fp8_count(cfg, &share);
    size_t at = (size_t)snprintf(buf, len,
                                 "fp8 plan: E4M3, per-token activation (FFN-out: a static bound) "
                                 "and per-channel weight scales, fp32 accumulation; in fp8:");
    /* Runs of layers with the same points, "layers 1-10: qkv ao ff1 ff2". */
    for (int l = 0; l < cfg->layers && at < len;) {
        char pts[64], next[64];
        layer_points(cfg, l, pts, sizeof pts);
        int e = l + 1;
        for (; e < cfg->layers; e++) {
            layer_points(cfg, e, next, sizeof next);
            if (strcmp(pts, next) != 0) break;
        }
        if (e - l == 1)
            at += (size_t)snprintf(buf + at, len - at, " layer %d: %s;", l, pts);
        else
            at += (size_t)snprintf(buf + at, len - at, " layers %d-%d: %s;", l, e - 1, pts);
        l = e;
    }
    if (at < len)
        snprintf(buf + at, len - at,
                 " the rest 16-bit, head fp32 (%d of %d projections, %.0f%% of their FLOPs)", n,
                 cfg->layers * GPU_FP8_POINTS, 100.0 * share);
    return buf;
}
