#include "gpu/cuda/cuda_fp8.cuh"

#include <cuda_fp8.h>
#include <stdio.h>
#include <string.h>

#include "gpu/cuda/cuda_common.cuh"
#include "gpu/cuda/cuda_gemm.cuh"
#include "gpu/model/fp8.h"

// gpu_fp8_inv_scale / gpu_fp8_scale with IEEE division (fast math would approximate '/').
__device__ __forceinline__ float fp8_inv(float amax) {
    return amax > 0.f ? __fdiv_rn(GPU_FP8_E4M3_MAX, amax) : 1.f;
}
__device__ __forceinline__ float fp8_scale(float amax) {
    return amax > 0.f ? __fdiv_rn(amax, GPU_FP8_E4M3_MAX) : 1.f;
}
__device__ __forceinline__ uint8_t fp8_code(float v) {
    return (uint8_t)__nv_cvt_float_to_fp8(v, __NV_SATFINITE, __NV_E4M3);
}
__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1)
        v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

template <typename E> __device__ __forceinline__ float elem_f(const E *p, size_t i) {
    return st<E>::to_f(p[i]);
}
template <> __device__ __forceinline__ float elem_f<float>(const float *p, size_t i) {
    return p[i];
}

// One block of 256 threads per row: its amax, then its codes.
template <typename E>
__global__ void quantize_rows_kernel(const E *__restrict__ w, int k, uint8_t *__restrict__ q,
                                     float *__restrict__ scale) {
    __shared__ float part[8];
    const size_t off = (size_t)blockIdx.x * k;
    float a = 0.f;
    for (int i = threadIdx.x; i < k; i += blockDim.x)
        a = fmaxf(a, fabsf(elem_f(w, off + i)));
    a = warp_max(a);
    if ((threadIdx.x & 31) == 0) part[threadIdx.x >> 5] = a;
    __syncthreads();
    a = part[0];
    for (int i = 1; i < 8; i++)
        a = fmaxf(a, part[i]);
    const float inv = fp8_inv(a);
    for (int i = threadIdx.x; i < k; i += blockDim.x)
        q[off + i] = fp8_code(elem_f(w, off + i) * inv);
    if (threadIdx.x == 0) scale[blockIdx.x] = fp8_scale(a);
}

// Eight E4M3 codes of f (already scaled), packed for one 8-byte store.
__device__ __forceinline__ uint2 codes8(const float *f, float inv) {
    uint32_t lo = 0, hi = 0;
#pragma unroll
    for (int i = 0; i < 4; i++) {
        lo |= (uint32_t)fp8_code(__fmul_rn(f[i], inv)) << (8 * i);
        hi |= (uint32_t)fp8_code(__fmul_rn(f[i + 4], inv)) << (8 * i);
    }
    return make_uint2(lo, hi);
}

// 16-bit activation rows (k % 8 == 0, k <= 256 CH): one warp per row, each lane holding its CH
// 16-byte chunks in registers, so the row is read once (amax, then codes from the registers)
// with 16-byte loads and written with 8-byte stores. The codes and scales are the block
// kernel's (the same fp32 products, the same rounding).
template <typename T, int CH>
__global__ void __launch_bounds__(256)
    fp8_quantize_act_kernel(const T *__restrict__ x, int n, int k, uint8_t *__restrict__ q,
                            float *__restrict__ scale) {
    const int row = (int)((blockIdx.x * (size_t)blockDim.x + threadIdx.x) >> 5);
    const int lane = threadIdx.x & 31, nch = k >> 3;
    if (row >= n) return;
    const size_t off = (size_t)row * k;
    uint4 raw[CH];
    float amax = 0.f;
#pragma unroll
    for (int c = 0; c < CH; c++) {
        const int ch = lane + 32 * c;
        raw[c] = make_uint4(0, 0, 0, 0);
        if (ch < nch) raw[c] = *reinterpret_cast<const uint4 *>(x + off + ch * 8);
        const uint32_t w[4] = {raw[c].x, raw[c].y, raw[c].z, raw[c].w};
#pragma unroll
        for (int i = 0; i < 4; i++) {
            const float2 f = st<T>::to_f2(w[i]);
            amax = fmaxf(amax, fmaxf(fabsf(f.x), fabsf(f.y)));
        }
    }
    amax = warp_max(amax);
    const float inv = fp8_inv(amax);
#pragma unroll
    for (int c = 0; c < CH; c++) {
        const int ch = lane + 32 * c;
        if (ch >= nch) continue;
        const uint32_t w[4] = {raw[c].x, raw[c].y, raw[c].z, raw[c].w};
        float f[8];
#pragma unroll
        for (int i = 0; i < 4; i++) {
            const float2 v = st<T>::to_f2(w[i]);
            f[2 * i] = v.x, f[2 * i + 1] = v.y;
        }
        *reinterpret_cast<uint2 *>(q + off + ch * 8) = codes8(f, inv);
    }
    if (lane == 0) scale[row] = fp8_scale(amax);
}

template <typename T>
static cudaError_t quantize_act(const T *x, int n, int k, uint8_t *q, float *scale,
                                cudaStream_t s) {
    const int blocks = (n + 7) / 8, ch = (k / 8 + 31) / 32;
#define QA(C) fp8_quantize_act_kernel<T, C><<<blocks, 256, 0, s>>>(x, n, k, q, scale)
    if (ch <= 1)
        QA(1);
    else if (ch <= 2)
        QA(2);
    else if (ch <= 3)
        QA(3);
    else if (ch <= 4)
        QA(4);
    else if (ch <= 6)
        QA(6);
    else if (ch <= 8)
        QA(8);
    else if (ch <= 12)
        QA(12);
    else
        QA(16);
#undef QA
    return cudaGetLastError();
}

cudaError_t cuda_fp8_quantize_rows(const void *w, int type, int n, int k, uint8_t *q, float *scale,
                                   cudaStream_t s) {
    if (n <= 0) return cudaSuccess;
    if (type != CUDA_GEMM_FP32 && k % 8 == 0 && k <= CUDA_FP8_ACT_MAX_K &&
        ((uintptr_t)w & 15) == 0 && ((uintptr_t)q & 7) == 0)
        return type == CUDA_GEMM_BF16 ? quantize_act((const __nv_bfloat16 *)w, n, k, q, scale, s)
                                      : quantize_act((const __half *)w, n, k, q, scale, s);
    if (type == CUDA_GEMM_FP32)
        quantize_rows_kernel<float><<<n, 256, 0, s>>>((const float *)w, k, q, scale);
    else if (type == CUDA_GEMM_BF16)
        quantize_rows_kernel<__nv_bfloat16>
            <<<n, 256, 0, s>>>((const __nv_bfloat16 *)w, k, q, scale);
    else
        quantize_rows_kernel<__half><<<n, 256, 0, s>>>((const __half *)w, k, q, scale);
    return cudaGetLastError();
}

// warp_sum spelled out in IEEE additions: lane l adds lane l ^ o's value, o = 16, 8, ..., 1.
__device__ __forceinline__ float warp_sum_rn(float v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1)
        v = __fadd_rn(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

// The LayerNorm that feeds an FP8 linear, one warp per row, CH 8-element chunks per lane
// (H <= 256 CH): exactly the sequence of gpu_fp8_norm_row (gpu/model/fp8.h), every step an
// explicit IEEE operation (this file is built with --use_fast_math: '/' and sqrt would be
// approximate, and a * b + c contracted where the compiler likes), then the row stored in T
// and the codes of the stored values (gpu_fp8_quantize_row's).
template <typename T, int CH>
__global__ void __launch_bounds__(256)
    fp8_add_ln_kernel(const T *a, const T *res, const float *__restrict__ gamma,
                      const float *__restrict__ beta, int n, int H, float eps, T *out_t,
                      uint8_t *__restrict__ q, float *__restrict__ scale) {
    const int row = (int)((blockIdx.x * (size_t)blockDim.x + threadIdx.x) >> 5);
    const int lane = threadIdx.x & 31, nch = H >> 3;
    if (row >= n) return;
    const size_t off = (size_t)row * H;
    float v[CH][8], sum = 0.f;
#pragma unroll
    for (int c = 0; c < CH; c++) {
        const int ch = lane + 32 * c;
#pragma unroll
        for (int i = 0; i < 8; i++)
            v[c][i] = 0.f;
        if (ch < nch) {
            load8(a + off + ch * 8, v[c]);
            if (res) {
                float r[8];
                load8(res + off + ch * 8, r);
#pragma unroll
                for (int i = 0; i < 8; i++)
                    v[c][i] = __fadd_rn(v[c][i], r[i]);
            }
#pragma unroll
            for (int i = 0; i < 8; i++)
                sum = __fadd_rn(sum, v[c][i]);
        }
    }
    const float mean = __fdiv_rn(warp_sum_rn(sum), (float)H);
    float sq = 0.f;
#pragma unroll
    for (int c = 0; c < CH; c++)
        if (lane + 32 * c < nch)
#pragma unroll
            for (int i = 0; i < 8; i++) {
                const float d = __fsub_rn(v[c][i], mean);
                sq = __fmaf_rn(d, d, sq);
            }
    const float var = __fdiv_rn(warp_sum_rn(sq), (float)H);
    const float rstd = __fdiv_rn(1.f, __fsqrt_rn(__fadd_rn(var, eps)));
    float amax = 0.f;
#pragma unroll
    for (int c = 0; c < CH; c++) {
        const int ch = lane + 32 * c;
        if (ch < nch) {
            float g[8], b[8];
            load8(gamma + ch * 8, g);
            load8(beta + ch * 8, b);
#pragma unroll
            for (int i = 0; i < 8; i++) {
                const float y = __fmaf_rn(__fmul_rn(__fsub_rn(v[c][i], mean), rstd), g[i], b[i]);
                v[c][i] = st<T>::to_f(st<T>::from_f(y)); // the value the row stores
                amax = fmaxf(amax, fabsf(v[c][i]));
            }
            store8(out_t + off + ch * 8, v[c]); // every lane has read its part: may alias a
        }
    }
    amax = warp_max(amax);
    const float inv = fp8_inv(amax);
#pragma unroll
    for (int c = 0; c < CH; c++) {
        const int ch = lane + 32 * c;
        if (ch < nch) *reinterpret_cast<uint2 *>(q + off + ch * 8) = codes8(v[c], inv);
    }
    if (lane == 0) scale[row] = fp8_scale(amax);
}

template <typename T>
cudaError_t cuda_fp8_add_ln(const T *a, const T *res, const float *gamma, const float *beta, int n,
                            int H, float eps, T *out_t, uint8_t *q, float *scale, cudaStream_t s) {
    const int blocks = (n + 7) / 8;
    if (H <= 256)
        fp8_add_ln_kernel<T, 1>
            <<<blocks, 256, 0, s>>>(a, res, gamma, beta, n, H, eps, out_t, q, scale);
    else if (H <= 512)
        fp8_add_ln_kernel<T, 2>
            <<<blocks, 256, 0, s>>>(a, res, gamma, beta, n, H, eps, out_t, q, scale);
    else if (H <= 768)
        fp8_add_ln_kernel<T, 3>
            <<<blocks, 256, 0, s>>>(a, res, gamma, beta, n, H, eps, out_t, q, scale);
    else if (H <= 1024)
        fp8_add_ln_kernel<T, 4>
            <<<blocks, 256, 0, s>>>(a, res, gamma, beta, n, H, eps, out_t, q, scale);
    else
        return cudaErrorInvalidValue;
    return cudaGetLastError();
}

template cudaError_t cuda_fp8_add_ln<__half>(const __half *, const __half *, const float *,
                                             const float *, int, int, float, __half *, uint8_t *,
                                             float *, cudaStream_t);
template cudaError_t cuda_fp8_add_ln<__nv_bfloat16>(const __nv_bfloat16 *, const __nv_bfloat16 *,
                                                    const float *, const float *, int, int, float,
                                                    __nv_bfloat16 *, uint8_t *, float *,
                                                    cudaStream_t);

static const cublasLtEpilogue_t fp8_epi[CUDA_GEMM_EPIS] = {
    CUBLASLT_EPILOGUE_DEFAULT, CUBLASLT_EPILOGUE_BIAS, CUBLASLT_EPILOGUE_GELU_BIAS,
    CUBLASLT_EPILOGUE_RELU_BIAS};

#define LT_OK(call) ((call) == CUBLAS_STATUS_SUCCESS)

// The column-major view of cuda_gemm.cu: D (n, m) = op(A) (n, k) x B (k, m), A = Wq stored
// (k, n) and transposed (FP8 on Hopper takes only this "TN" form), B = Xq (k, m). One
// descriptor per epilogue, made once; the bias and scale pointers are set per call.
int cuda_fp8_gemm_init(cuda_fp8_gemm_t *g, int type, void *workspace, size_t workspace_bytes,
                       char *err, size_t errlen) {
    memset(g, 0, sizeof(*g));
    g->dt = type == CUDA_GEMM_BF16 ? CUDA_R_16BF : CUDA_R_16F;
    g->workspace = workspace;
    g->workspace_bytes = workspace_bytes;
    const cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
    const cublasLtMatmulMatrixScale_t vec = CUBLASLT_MATMUL_MATRIX_SCALE_OUTER_VEC_32F;
    int ok = LT_OK(cublasLtCreate(&g->lt)) && cudaEventCreate(&g->ev0) == cudaSuccess &&
             cudaEventCreate(&g->ev1) == cudaSuccess;
    for (int e = 0; ok && e < CUDA_GEMM_EPIS; e++) {
        cublasLtMatmulDesc_t *d = &g->desc[e];
        ok = LT_OK(cublasLtMatmulDescCreate(d, CUBLAS_COMPUTE_32F, CUDA_R_32F)) &&
             LT_OK(
                 cublasLtMatmulDescSetAttribute(*d, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta)) &&
             LT_OK(
                 cublasLtMatmulDescSetAttribute(*d, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb)) &&
             LT_OK(cublasLtMatmulDescSetAttribute(*d, CUBLASLT_MATMUL_DESC_EPILOGUE, &fp8_epi[e],
                                                  sizeof fp8_epi[e])) &&
             LT_OK(cublasLtMatmulDescSetAttribute(*d, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &g->dt,
                                                  sizeof g->dt)) &&
             LT_OK(cublasLtMatmulDescSetAttribute(*d, CUBLASLT_MATMUL_DESC_A_SCALE_MODE, &vec,
                                                  sizeof vec)) &&
             LT_OK(cublasLtMatmulDescSetAttribute(*d, CUBLASLT_MATMUL_DESC_B_SCALE_MODE, &vec,
                                                  sizeof vec));
    }
    if (!ok) {
        snprintf(err, errlen, "cuBLASLt could not be initialised for FP8 (outer-vector scales)");
        cuda_fp8_gemm_free(g);
        return -1;
    }
    return 0;
}

void cuda_fp8_gemm_free(cuda_fp8_gemm_t *g) {
    for (int e = 0; e < CUDA_GEMM_EPIS; e++)
        if (g->desc[e]) cublasLtMatmulDescDestroy(g->desc[e]);
    if (g->ev0) cudaEventDestroy(g->ev0);
    if (g->ev1) cudaEventDestroy(g->ev1);
    if (g->lt) cublasLtDestroy(g->lt);
    memset(g, 0, sizeof(*g));
}

typedef struct {
    cublasLtMatrixLayout_t a, b, c;
} fp8_layouts_t;

static int fp8_layouts(const cuda_fp8_gemm_t *g, fp8_layouts_t *l, int m, int n, int k, int ldy) {
    memset(l, 0, sizeof(*l));
    return LT_OK(cublasLtMatrixLayoutCreate(&l->a, CUDA_R_8F_E4M3, k, n, k)) &&
                   LT_OK(cublasLtMatrixLayoutCreate(&l->b, CUDA_R_8F_E4M3, k, m, k)) &&
                   LT_OK(cublasLtMatrixLayoutCreate(&l->c, g->dt, n, m, ldy))
               ? 0
               : -1;
}
static void fp8_layouts_free(fp8_layouts_t *l) {
    if (l->a) cublasLtMatrixLayoutDestroy(l->a);
    if (l->b) cublasLtMatrixLayoutDestroy(l->b);
    if (l->c) cublasLtMatrixLayoutDestroy(l->c);
}

typedef struct { // one call's operands
    const uint8_t *wq, *xq;
    const float *w_scale, *x_scale;
    void *y;
    const void *bias, *res;
    int m, n, k, ldy, epi;
} fp8_call_t;

// The call's bias and scale pointers on its epilogue's descriptor. Every heuristic query and
// every matmul binds first, so cuBLASLt is asked about the descriptor exactly as the matmul
// runs it (outer-vector scale modes with their pointers): a query made with the scale pointers
// still NULL offered no algorithm that ran on an H100, which a call then reported as "no
// algorithm with outer-vector scales ran".
static int fp8_bind(cuda_fp8_gemm_t *g, const fp8_call_t *c) {
    cublasLtMatmulDesc_t d = g->desc[c->epi];
    return (c->epi == CUDA_GEMM_PLAIN ||
            LT_OK(cublasLtMatmulDescSetAttribute(d, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &c->bias,
                                                 sizeof c->bias))) &&
                   LT_OK(cublasLtMatmulDescSetAttribute(d, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER,
                                                        &c->w_scale, sizeof c->w_scale)) &&
                   LT_OK(cublasLtMatmulDescSetAttribute(d, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER,
                                                        &c->x_scale, sizeof c->x_scale))
               ? 0
               : -1;
}

// Up to max candidates for the call's shape at M = m, best first by cuBLASLt's heuristic;
// how many (0: none).
static int fp8_query(cuda_fp8_gemm_t *g, const fp8_call_t *c, int m,
                     cublasLtMatmulHeuristicResult_t *res, int max) {
    fp8_layouts_t l;
    int found = 0;
    cublasLtMatmulPreference_t pref = NULL;
    g->heuristic_queries++;
    if (fp8_bind(g, c) != 0 || fp8_layouts(g, &l, m, c->n, c->k, c->ldy) != 0 ||
        !LT_OK(cublasLtMatmulPreferenceCreate(&pref)) ||
        !LT_OK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                    &g->workspace_bytes,
                                                    sizeof g->workspace_bytes)) ||
        !LT_OK(cublasLtMatmulAlgoGetHeuristic(g->lt, g->desc[c->epi], l.a, l.b, l.c, l.c, pref, max,
                                              res, &found)))
        found = 0;
    if (pref) cublasLtMatmulPreferenceDestroy(pref);
    fp8_layouts_free(&l);
    return found;
}

// 0 when cuBLASLt ran the call with algo (y written once), -1 when it refused (nothing written).
static int fp8_exec(cuda_fp8_gemm_t *g, const cublasLtMatmulAlgo_t *algo, const fp8_call_t *c,
                    cudaStream_t st) {
    fp8_layouts_t l;
    const float one = 1.f, zero = 0.f;
    int rc = -1;
    if (fp8_bind(g, c) == 0 && fp8_layouts(g, &l, c->m, c->n, c->k, c->ldy) == 0 &&
        LT_OK(cublasLtMatmul(g->lt, g->desc[c->epi], &one, c->wq, l.a, c->xq, l.b,
                             c->res ? &one : &zero, c->res ? c->res : c->y, l.c, c->y, l.c, algo,
                             g->workspace, g->workspace_bytes, st)))
        rc = 0;
    fp8_layouts_free(&l);
    return rc;
}

#define FP8_TUNE_MAX  32
#define FP8_TUNE_RUNS 3
#define FP8_FIRST     8 // untuned: the heuristic's first of these that runs

// Runs the call with the candidates and returns the index of the one to keep, -1 when none
// ran. Untimed: the first that runs (the call is then done, y written once). Timed (the
// warm-up, whose outputs are thrown away): each that runs, FP8_TUNE_RUNS more times, the
// fastest kept. A candidate cuBLASLt refuses is dropped, never kept and never fatal.
static int fp8_pick(cuda_fp8_gemm_t *g, const cublasLtMatmulHeuristicResult_t *cand, int n,
                    const fp8_call_t *c, int timed, cudaStream_t st) {
    int best = -1;
    float best_ms = 0;
    for (int i = 0; i < n; i++) {
        if (fp8_exec(g, &cand[i].algo, c, st) != 0) continue;
        if (!timed) return i;
        float ms = 0;
        int ok = cudaEventRecord(g->ev0, st) == cudaSuccess;
        for (int r = 0; r < FP8_TUNE_RUNS && ok; r++)
            ok = fp8_exec(g, &cand[i].algo, c, st) == 0;
        if (ok && cudaEventRecord(g->ev1, st) == cudaSuccess &&
            cudaEventSynchronize(g->ev1) == cudaSuccess &&
            cudaEventElapsedTime(&ms, g->ev0, g->ev1) == cudaSuccess) {
            if (best < 0 || ms < best_ms) best = i, best_ms = ms;
        } else if (best < 0) {
            best = i; // it ran, only its timing failed
        }
    }
    cudaGetLastError(); // a candidate that failed to launch leaves nothing sticky behind
    return best;
}

// The cache slot of the call's (n, k, epilogue, M bucket, residual, ldy), or NULL.
static cuda_gemm_entry_t *fp8_cached(cuda_fp8_gemm_t *g, const fp8_call_t *c, int mb) {
    for (int i = 0; i < g->n_cache; i++) {
        cuda_gemm_entry_t *e = &g->cache[i];
        if (e->n == c->n && e->k == c->k && e->epi == c->epi && e->mb == mb &&
            e->beta == (c->res != NULL) && e->ldy == c->ldy)
            return e;
    }
    return NULL;
}

static void fp8_keep(cuda_fp8_gemm_t *g, const fp8_call_t *c, int mb,
                     const cublasLtMatmulAlgo_t *algo) {
    const int slot =
        g->n_cache < CUDA_GEMM_CACHE ? g->n_cache++ : (int)(g->heuristic_queries % CUDA_GEMM_CACHE);
    cuda_gemm_entry_t *e = &g->cache[slot];
    e->n = c->n, e->k = c->k, e->epi = c->epi, e->mb = mb, e->beta = c->res != NULL;
    e->ldy = c->ldy, e->ldx = c->k;
    e->algo = *algo;
}

// No FP8 algorithm with the GELU epilogue (remembered, as cuda_gemm.cu does): the bias one,
// then a pass of its own.
static int fp8_gelu_pass(cuda_fp8_gemm_t *g, const fp8_call_t *c, cudaStream_t st, char *err,
                         size_t errlen) {
    g->gelu_refused = 1;
    if (cuda_fp8_gemm_run(g, c->wq, c->w_scale, c->xq, c->x_scale, c->y, c->ldy, c->bias, NULL,
                          c->m, c->n, c->k, CUDA_GEMM_BIAS, st, err, errlen) != 0)
        return -1;
    const cudaError_t e = g->dt == CUDA_R_16BF
                              ? cuda_bias_act((__nv_bfloat16 *)c->y, (const __nv_bfloat16 *)NULL,
                                              c->m, c->n, GPU_ACT_GELU_TANH, st)
                              : cuda_bias_act((__half *)c->y, (const __half *)NULL, c->m, c->n,
                                              GPU_ACT_GELU_TANH, st);
    if (e == cudaSuccess) return 0;
    snprintf(err, errlen, "FP8 GELU pass: %s", cudaGetErrorString(e));
    return -1;
}

int cuda_fp8_gemm_run(cuda_fp8_gemm_t *g, const uint8_t *wq, const float *w_scale,
                      const uint8_t *xq, const float *x_scale, void *y, int ldy, const void *bias,
                      const void *res, int m, int n, int k, int epi, cudaStream_t st, char *err,
                      size_t errlen) {
    const fp8_call_t c = {wq, xq, w_scale, x_scale, y, bias, res, m, n, k, ldy, epi};
    const int gelu_pass_ok = epi == CUDA_GEMM_GELU_BIAS && ldy == n && !res;
    if (m <= 0) return 0;
    if (gelu_pass_ok && g->gelu_refused) return fp8_gelu_pass(g, &c, st, err, errlen);
    const int mb = cuda_gemm_bucket(m);
    cublasLtMatmulHeuristicResult_t cand[FP8_TUNE_MAX];
    const cuda_gemm_entry_t *hit = fp8_cached(g, &c, mb);
    if (hit && fp8_exec(g, &hit->algo, &c, st) == 0) return 0;
    if (!hit) { // a miss: candidates chosen for the bucket's top M, valid for every M below
        const int timed = g->tune > 1;
        const int want = timed ? (g->tune < FP8_TUNE_MAX ? g->tune : FP8_TUNE_MAX) : FP8_FIRST;
        const int n_cand = fp8_query(g, &c, mb, cand, want);
        const int pick = fp8_pick(g, cand, n_cand, &c, timed, st);
        if (pick >= 0) {
            fp8_keep(g, &c, mb, &cand[pick].algo);
            // untimed, the call is done; timed runs wrote y several times (the warm-up's)
            if (!timed || fp8_exec(g, &cand[pick].algo, &c, st) == 0) return 0;
        }
    }
    // Nothing for the bucket ran, or the bucket's does not suit this exact M: this M alone.
    const int n_cand = fp8_query(g, &c, m, cand, FP8_FIRST);
    if (fp8_pick(g, cand, n_cand, &c, 0, st) >= 0) return 0;
    if (gelu_pass_ok) return fp8_gelu_pass(g, &c, st, err, errlen);
    snprintf(err, errlen,
             "cuBLASLt FP8 GEMM (%d x %d x %d, epilogue %d): none of its %d algorithms with "
             "outer-vector scales ran",
             m, n, k, epi, n_cand);
    return -1;
}
