// The cuBLASLt FP8 GEMMs (cuda_fp8.cuh): descriptors, algorithm choice and cache, 16-bit or E4M3
// outputs. The codes of their operands: cuda_fp8_quant.cu.
#include "gpu/cuda/cuda_fp8.cuh"

#include <cuda_fp8.h>
#include <stdio.h>
#include <string.h>

#include "gpu/cuda/cuda_common.cuh"
#include "gpu/cuda/cuda_gemm.cuh"
#include "gpu/model/fp8.h"

static const cublasLtEpilogue_t fp8_epi[CUDA_GEMM_EPIS] = {
    CUBLASLT_EPILOGUE_DEFAULT, CUBLASLT_EPILOGUE_BIAS, CUBLASLT_EPILOGUE_GELU_BIAS,
    CUBLASLT_EPILOGUE_RELU_BIAS};

#define LT_OK(call) ((call) == CUBLAS_STATUS_SUCCESS)

// One descriptor of epilogue e: TN, fp32 compute, outer-vector scales, 16-bit bias.
static int fp8_desc(cublasLtMatmulDesc_t *d, int e, const cudaDataType_t *dt) {
    const cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
    const cublasLtMatmulMatrixScale_t vec = CUBLASLT_MATMUL_MATRIX_SCALE_OUTER_VEC_32F;
    return LT_OK(cublasLtMatmulDescCreate(d, CUBLAS_COMPUTE_32F, CUDA_R_32F)) &&
           LT_OK(cublasLtMatmulDescSetAttribute(*d, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta)) &&
           LT_OK(cublasLtMatmulDescSetAttribute(*d, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb)) &&
           LT_OK(cublasLtMatmulDescSetAttribute(*d, CUBLASLT_MATMUL_DESC_EPILOGUE, &fp8_epi[e],
                                                sizeof fp8_epi[e])) &&
           LT_OK(cublasLtMatmulDescSetAttribute(*d, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, dt,
                                                sizeof *dt)) &&
           LT_OK(cublasLtMatmulDescSetAttribute(*d, CUBLASLT_MATMUL_DESC_A_SCALE_MODE, &vec,
                                                sizeof vec)) &&
           LT_OK(cublasLtMatmulDescSetAttribute(*d, CUBLASLT_MATMUL_DESC_B_SCALE_MODE, &vec,
                                                sizeof vec));
}

// The column-major view of cuda_gemm.cu: D (n, m) = op(A) (n, k) x B (k, m), A = Wq stored
// (k, n) and transposed (FP8 on Hopper takes only this "TN" form), B = Xq (k, m). One
// descriptor per epilogue and output type, made once; the bias and scale pointers are set per
// call.
common_status_t cuda_fp8_gemm_init(cuda_fp8_gemm_t *g, int type, void *workspace,
                                   size_t workspace_bytes, common_err_t *err) {
    memset(g, 0, sizeof(*g));
    g->dt = type == CUDA_GEMM_BF16 ? CUDA_R_16BF : CUDA_R_16F;
    g->workspace = workspace;
    g->workspace_bytes = workspace_bytes;
    int ok = LT_OK(cublasLtCreate(&g->lt)) && cudaEventCreate(&g->ev0) == cudaSuccess &&
             cudaEventCreate(&g->ev1) == cudaSuccess;
    for (int e = 0; ok && e < CUDA_GEMM_EPIS; e++)
        ok = fp8_desc(&g->desc[e], e, &g->dt) && fp8_desc(&g->desc_q[e], e, &g->dt);
    if (!ok) {
        common_err_set(err, COMMON_FATAL,
                       "cuBLASLt could not be initialised for FP8 (outer-vector scales)");
        cuda_fp8_gemm_free(g);
        return COMMON_FATAL;
    }
    return COMMON_OK;
}

void cuda_fp8_gemm_free(cuda_fp8_gemm_t *g) {
    for (int e = 0; e < CUDA_GEMM_EPIS; e++) {
        if (g->desc[e]) cublasLtMatmulDescDestroy(g->desc[e]);
        if (g->desc_q[e]) cublasLtMatmulDescDestroy(g->desc_q[e]);
    }
    if (g->ev0) cudaEventDestroy(g->ev0);
    if (g->ev1) cudaEventDestroy(g->ev1);
    if (g->lt) cublasLtDestroy(g->lt);
    memset(g, 0, sizeof(*g));
}

typedef struct {
    cublasLtMatrixLayout_t a, b, c, d;
} fp8_layouts_t;

// q: D in E4M3 (C keeps the 16-bit type: cuBLASLt's FP8-output GEMMs take C and D unlike).
static int fp8_layouts(const cuda_fp8_gemm_t *g, fp8_layouts_t *l, int m, int n, int k, int ldy,
                       int q) {
    memset(l, 0, sizeof(*l));
    return LT_OK(cublasLtMatrixLayoutCreate(&l->a, CUDA_R_8F_E4M3, k, n, k)) &&
                   LT_OK(cublasLtMatrixLayoutCreate(&l->b, CUDA_R_8F_E4M3, k, m, k)) &&
                   LT_OK(cublasLtMatrixLayoutCreate(&l->c, g->dt, n, m, ldy)) &&
                   LT_OK(cublasLtMatrixLayoutCreate(&l->d, q ? CUDA_R_8F_E4M3 : g->dt, n, m, ldy))
               ? 0
               : -1;
}
static void fp8_layouts_free(fp8_layouts_t *l) {
    if (l->a) cublasLtMatrixLayoutDestroy(l->a);
    if (l->b) cublasLtMatrixLayoutDestroy(l->b);
    if (l->c) cublasLtMatrixLayoutDestroy(l->c);
    if (l->d) cublasLtMatrixLayoutDestroy(l->d);
}

typedef struct { // one call's operands
    const uint8_t *wq, *xq;
    const float *w_scale, *x_scale;
    void *y;
    const void *bias, *res;
    int m, n, k, ldy, epi;
    int q;                // y is E4M3: e4m3(d_scale[0] * the epilogue's value)
    const float *d_scale; // q: device, one float
    const void *c16;      // q: a 16-bit (m, n) buffer for C's layout (beta 0: never read)
} fp8_call_t;

static cublasLtMatmulDesc_t fp8_d(const cuda_fp8_gemm_t *g, const fp8_call_t *c) {
    return c->q ? g->desc_q[c->epi] : g->desc[c->epi];
}

// The call's bias and scale pointers on its epilogue's descriptor. Every heuristic query and
// every matmul binds first, so cuBLASLt is asked about the descriptor exactly as the matmul
// runs it (outer-vector scale modes with their pointers): a query made with the scale pointers
// still NULL offered no algorithm that ran on an H100, which a call then reported as "no
// algorithm with outer-vector scales ran".
static int fp8_bind(cuda_fp8_gemm_t *g, const fp8_call_t *c) {
    cublasLtMatmulDesc_t d = fp8_d(g, c);
    return (!c->q || LT_OK(cublasLtMatmulDescSetAttribute(d, CUBLASLT_MATMUL_DESC_D_SCALE_POINTER,
                                                          &c->d_scale, sizeof c->d_scale))) &&
                   (c->epi == CUDA_GEMM_PLAIN ||
                    LT_OK(cublasLtMatmulDescSetAttribute(d, CUBLASLT_MATMUL_DESC_BIAS_POINTER,
                                                         &c->bias, sizeof c->bias))) &&
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
    if (fp8_bind(g, c) != 0 || fp8_layouts(g, &l, m, c->n, c->k, c->ldy, c->q) != 0 ||
        !LT_OK(cublasLtMatmulPreferenceCreate(&pref)) ||
        !LT_OK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                    &g->workspace_bytes,
                                                    sizeof g->workspace_bytes)) ||
        !LT_OK(cublasLtMatmulAlgoGetHeuristic(g->lt, fp8_d(g, c), l.a, l.b, l.c, l.d, pref, max,
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
    const void *cm = c->q ? c->c16 : c->res ? c->res : c->y;
    if (fp8_bind(g, c) == 0 && fp8_layouts(g, &l, c->m, c->n, c->k, c->ldy, c->q) == 0 &&
        LT_OK(cublasLtMatmul(g->lt, fp8_d(g, c), &one, c->wq, l.a, c->xq, l.b,
                             c->res ? &one : &zero, cm, l.c, c->y, l.d, algo, g->workspace,
                             g->workspace_bytes, st)))
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

// The cache's epilogue key: the epilogue, apart for E4M3 outputs.
static int fp8_key(const fp8_call_t *c) {
    return c->epi + (c->q ? CUDA_GEMM_EPIS : 0);
}

// The cache slot of the call's (n, k, epilogue, M bucket, residual, ldy), or NULL.
static cuda_gemm_entry_t *fp8_cached(cuda_fp8_gemm_t *g, const fp8_call_t *c, int mb) {
    for (int i = 0; i < g->n_cache; i++) {
        cuda_gemm_entry_t *e = &g->cache[i];
        if (e->n == c->n && e->k == c->k && e->epi == fp8_key(c) && e->mb == mb &&
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
    e->n = c->n, e->k = c->k, e->epi = fp8_key(c), e->mb = mb, e->beta = c->res != NULL;
    e->ldy = c->ldy, e->ldx = c->k;
    e->algo = *algo;
}

// No FP8 algorithm with the GELU epilogue (remembered, as cuda_gemm.cu does): the bias one,
// then a pass of its own.
static common_status_t fp8_gelu_pass(cuda_fp8_gemm_t *g, const fp8_call_t *c, cudaStream_t st,
                                     common_err_t *err) {
    g->gelu_refused = 1;
    if (cuda_fp8_gemm_run(g, c->wq, c->w_scale, c->xq, c->x_scale, c->y, c->ldy, c->bias, NULL,
                          c->m, c->n, c->k, CUDA_GEMM_BIAS, st, err) != 0)
        return err->code;
    const cudaError_t e = g->dt == CUDA_R_16BF
                              ? cuda_bias_act((__nv_bfloat16 *)c->y, (const __nv_bfloat16 *)NULL,
                                              c->m, c->n, GPU_ACT_GELU_TANH, st)
                              : cuda_bias_act((__half *)c->y, (const __half *)NULL, c->m, c->n,
                                              GPU_ACT_GELU_TANH, st);
    if (e == cudaSuccess) return COMMON_OK;
    return common_err_set(err, COMMON_FATAL, "FP8 GELU pass: %s", cudaGetErrorString(e));
}

// Runs the call with a cached, queried or exact-M algorithm: 0, or -1 when none ran (nothing
// written).
static int fp8_run(cuda_fp8_gemm_t *g, const fp8_call_t *c, cudaStream_t st, int *n_tried) {
    const int mb = cuda_gemm_bucket(c->m);
    cublasLtMatmulHeuristicResult_t cand[FP8_TUNE_MAX];
    const cuda_gemm_entry_t *hit = fp8_cached(g, c, mb);
    if (hit && fp8_exec(g, &hit->algo, c, st) == 0) return 0;
    if (!hit) { // a miss: candidates chosen for the bucket's top M, valid for every M below
        const int timed = g->tune > 1;
        const int want = timed ? (g->tune < FP8_TUNE_MAX ? g->tune : FP8_TUNE_MAX) : FP8_FIRST;
        const int n_cand = fp8_query(g, c, mb, cand, want);
        const int pick = fp8_pick(g, cand, n_cand, c, timed, st);
        if (pick >= 0) {
            fp8_keep(g, c, mb, &cand[pick].algo);
            // untimed, the call is done; timed runs wrote y several times (the warm-up's)
            if (!timed || fp8_exec(g, &cand[pick].algo, c, st) == 0) return 0;
        }
    }
    // Nothing for the bucket ran, or the bucket's does not suit this exact M: this M alone.
    *n_tried = fp8_query(g, c, c->m, cand, FP8_FIRST);
    return fp8_pick(g, cand, *n_tried, c, 0, st) >= 0 ? 0 : -1;
}

common_status_t cuda_fp8_gemm_run(cuda_fp8_gemm_t *g, const uint8_t *wq, const float *w_scale,
                                  const uint8_t *xq, const float *x_scale, void *y, int ldy,
                                  const void *bias, const void *res, int m, int n, int k, int epi,
                                  cudaStream_t st, common_err_t *err) {
    const fp8_call_t c = {wq, xq, w_scale, x_scale, y, bias, res, m, n, k, ldy, epi, 0, NULL, NULL};
    const int gelu_pass_ok = epi == CUDA_GEMM_GELU_BIAS && ldy == n && !res;
    int n_cand = 0;
    if (m <= 0) return COMMON_OK;
    if (gelu_pass_ok && g->gelu_refused) return fp8_gelu_pass(g, &c, st, err);
    if (fp8_run(g, &c, st, &n_cand) == 0) return COMMON_OK;
    if (gelu_pass_ok) return fp8_gelu_pass(g, &c, st, err);
    return common_err_set(
        err, COMMON_FATAL,
        "cuBLASLt FP8 GEMM (%d x %d x %d, epilogue %d): none of its %d algorithms with "
        "outer-vector scales ran",
        m, n, k, epi, n_cand);
}

int cuda_fp8_gemm_run_q(cuda_fp8_gemm_t *g, const uint8_t *wq, const float *w_scale,
                        const uint8_t *xq, const float *x_scale, uint8_t *yq, const void *c16,
                        const float *d_scale, const void *bias, int m, int n, int k, int epi,
                        cudaStream_t st) {
    const fp8_call_t c = {wq, xq, w_scale, x_scale, yq, bias,    NULL, m,
                          n,  k,  n,       epi,     1,  d_scale, c16};
    int n_cand = 0;
    if (m <= 0) return 0;
    if (g->q_refused) return -1;
    if (fp8_run(g, &c, st, &n_cand) == 0) return 0;
    g->q_refused = 1;
    return -1;
}
