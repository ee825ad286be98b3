/* FP8 (E4M3) numerics shared by every backend: the conversion, the scales and the per-layer
 * plan of which projections run in FP8. One definition, so the CPU reference
 * (`--precision fp8` on the cpu backend) and the CUDA path quantize the same values at the
 * same places with the same scales.
 *
 * The recipe (chosen by measurement, tests/bench/fp8_recipes.py; gpu/NOTES-cuda.md "FP8"):
 * weights per output channel, activations per token (each row's amax, computed by the kernel
 * that writes the row), both mapped so the amax lands on E4M3's 448; products accumulated in
 * fp32 and scaled back by s_x[row] * s_w[col]. E4M3's error is relative (3 mantissa bits)
 * whatever the scale, so finer scale blocks gain little; per-token scales are chosen because
 * they never saturate, need no calibration data and keep a ticket's logits independent of
 * the batch it rides in. The one exception, FFN-out's input (the GELU rows, written by a GEMM
 * that never holds a token's whole row), takes a static scale bounded from the weights
 * (gpu_fp8_act_bound_scale), as batch-independent. Which projections stay 16-bit is
 * gpu_fp8_runs. */
#ifndef RECLASS_GPU_MODEL_FP8_H
#define RECLASS_GPU_MODEL_FP8_H

#include <stddef.h>
#include <stdint.h>

#include "gpu/model/model.h"

#ifdef __cplusplus
extern "C" {
#endif

#define GPU_FP8_E4M3_MAX 448.0f

/* float -> E4M3 bits: round to nearest even, saturated to +-448 (infinities too), NaN ->
 * 0x7F; bit for bit what CUDA's __nv_cvt_float_to_fp8(x, __NV_SATFINITE, __NV_E4M3) and the
 * cvt.rn.satfinite.e4m3x2.f32 instruction give. */
uint8_t gpu_fp8_e4m3(float x);
/* E4M3 bits -> float (0x7F / 0xFF: NaN). */
float gpu_fp8_e4m3_float(uint8_t q);

/* The scale of a row (or weight channel) whose largest |value| is amax: amax / 448 (1 for
 * an all-zero row); the values are quantized as e4m3(v * (448 / amax)), in these two fp32
 * operations, which the CUDA kernels repeat with the same rounding (__fdiv_rn). */
float gpu_fp8_scale(float amax);
float gpu_fp8_inv_scale(float amax);

/* q (n) = E4M3 of x (n) under its own amax; returns the scale. */
float gpu_fp8_quantize_row(const float *x, int n, uint8_t *q);
/* y (n) = the values gpu_fp8_quantize_row represents (q * scale), in fp32; y may be x. */
void gpu_fp8_fake_row(const float *x, int n, float *y);

/* The LayerNorm that writes an FP8 linear's input (CUDA: cuda_fp8_add_ln, one warp of 32 lanes
 * per row), as one exact sequence of fp32 operations, so that the CPU reference and the kernel
 * give the same bits (test_gpu_fp8). y (H) from x (H) and res (H, or NULL), H % 8 == 0:
 *   1. v[i] = x[i] + res[i] (without res: v[i] = x[i]);
 *   2. lane l (0..31) owns the 8-element chunks l, l + 32, l + 64, ... and sums its v from +0,
 *      chunk after chunk, element after element: part[l];
 *   3. butterfly over the lanes: for o = 16, 8, 4, 2, 1: part[l] = part[l] + part[l ^ o]; the
 *      sum is part[0] (every lane holds it); mean = sum / H;
 *   4. steps 2-3 again over d = v[i] - mean, each lane accumulating fma(d, d, acc): var = that
 *      sum / H; rstd = 1 / sqrt(var + eps);
 *   5. y[i] = fma((v[i] - mean) * rstd, gamma[i], beta[i]).
 * Every operation is one IEEE fp32 operation rounded to nearest (the kernel spells them as
 * __fadd_rn, __fdiv_rn, __fsqrt_rn, __fmaf_rn...: fast math must not approximate or contract
 * them; here fmaf is written where the kernel fuses and nowhere else a product meets a sum).
 * Then the kernel stores y in its 16-bit type (round to nearest even), and the FP8 input is
 * gpu_fp8_quantize_row of the stored values: the same codes as the activation quantizer gives
 * reading that row back, so fused or not, a linear reads the same codes. y may be x. */
void gpu_fp8_norm_row(const float *x, const float *res, const float *gamma, const float *beta,
                      int H, float eps, float *y);

/* The static input scale of an FP8 projection whose input is act(LN(x) W^T + b) (BERT's FFN-out:
 * GELU or ReLU of FFN-in over LayerNorm 1), for a producer that never holds a token's whole row
 * (cuBLASLt's FFN-in GEMM writes the E4M3 codes itself) and so cannot take its amax. A bound
 * from the weights alone, so no calibration data and no dependence on the batch: a LayerNorm row
 * has ||y||_2 <= max|gamma| sqrt(H) + ||beta||_2 (its normalised values have a sum of squares
 * <= H), so |z_n| <= that * ||W_n||_2 + |b_n| (Cauchy-Schwarz), and |act(z)| <= max(|z|, 0.17).
 * The bound, with 1.25 for the FP8 rounding of the FFN-in operands, is mapped onto 448 and the
 * scale rounded up to a power of two: v * (1 / s) is then exact, so the codes are
 * gpu_fp8_e4m3(v * gpu_fp8_pow2_inv(s)) on every backend, and the scale folds exactly into the
 * next GEMM's per-channel weight scales. E4M3's error is relative (3 mantissa bits) down to 2^-6
 * of the scale unit: a bound 10-50x above a row's amax moves only values under ~1e-3 of it into
 * the subnormals, whose absolute error (<= s 2^-10) is far below the large values' (2^-4 v).
 * gamma, beta (H); w (n, H); b (n) or NULL. */
float gpu_fp8_act_bound_scale(const float *gamma, const float *beta, int H, const float *w,
                              const float *b, int n);
/* 1 / s of a power-of-two scale s (exact). */
float gpu_fp8_pow2_inv(float s);
/* y (n) = the values of x (n) under the static scale s: e4m3(x * (1 / s)) * s; y may be x. */
void gpu_fp8_fake_row_static(const float *x, int n, float s, float *y);

/* The projections whose inputs can be quantized, in layer order. */
typedef enum {
    GPU_FP8_QKV, /* input: the previous LayerNorm (embedding LayerNorm for layer 0) */
    GPU_FP8_AO,  /* input: the attention context */
    GPU_FP8_FF1, /* input: LayerNorm 1 */
    GPU_FP8_FF2, /* input: the FFN activation (the FF1 epilogue) */
    GPU_FP8_POINTS
} gpu_fp8_point_t;

/* Depth from which a model runs the deep plan (gpu_fp8_runs: QKV, FFN-in and FFN-out of its
 * inner layers); shallower ones only their inner attention-out projections. */
#define GPU_FP8_DEEP 6

/* 1 when projection p of layer l runs in FP8 (E4M3 inputs and weights), 0 when it stays in
 * the backend's 16-bit type. The one place the recipe's per-layer choice is made: from
 * GPU_FP8_DEEP layers on, the points whose inputs are written as E4M3 at no extra pass (QKV,
 * FFN-in, FFN-out) in the layers of its table (fp8.c); below, the attention-out ones of every
 * layer but the first and the last. */
int gpu_fp8_runs(const gpu_model_config_t *cfg, int layer, gpu_fp8_point_t p);
/* Projections in FP8 and their share of the encoder's projection FLOPs (0..1). */
int gpu_fp8_count(const gpu_model_config_t *cfg, double *flop_share);

/* The plan as one line, for start-up logs and `reclass plan-memory`: e.g. "fp8 plan: E4M3,
 * per-token activations, per-channel weights, fp32 accumulate; layers 0-11: qkv ao ff1 ff2
 * fp8; head fp32 (24 of 48 projections, 50% of their FLOPs)". Returns buf. */
const char *gpu_fp8_plan_text(const gpu_model_config_t *cfg, char *buf, size_t len);

#ifdef __cplusplus
}
#endif
#endif
