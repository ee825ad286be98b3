#include "gpu/cuda/cuda_gemm.cuh"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu/cuda/cuda_common.cuh"
#include "gpu/model/model.h"

static const cublasLtEpilogue_t gemm_epi[CUDA_GEMM_EPIS] = {
    CUBLASLT_EPILOGUE_DEFAULT, CUBLASLT_EPILOGUE_BIAS, CUBLASLT_EPILOGUE_GELU_BIAS,
    CUBLASLT_EPILOGUE_RELU_BIAS};

int cuda_gemm_act_epi(int act) {
    return act == GPU_ACT_RELU ? CUDA_GEMM_RELU_BIAS : CUDA_GEMM_GELU_BIAS; // gelu: see the .cuh
}

common_status_t cuda_gemm_init(cuda_gemm_t *g, int type, void *workspace, size_t workspace_bytes,
                               common_err_t *err) {
    memset(g, 0, sizeof(*g));
    g->dt = type == CUDA_GEMM_BF16 ? CUDA_R_16BF : type == CUDA_GEMM_FP32 ? CUDA_R_32F : CUDA_R_16F;
    g->workspace = workspace;
    g->workspace_bytes = workspace_bytes;
    g->gelu_epilogue = 1;
    g->relu_epilogue = 1;
    if (cublasLtCreate(&g->lt) != CUBLAS_STATUS_SUCCESS) {
        return common_err_set(err, COMMON_FATAL, "cuBLASLt could not be initialised");
    }
    if (cudaEventCreate(&g->ev0) != cudaSuccess || cudaEventCreate(&g->ev1) != cudaSuccess) {
        common_err_set(err, COMMON_FATAL, "CUDA events for GEMM tuning could not be created");
        cuda_gemm_free(g);
        return COMMON_FATAL;
    }
    cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
    for (int e = 0; e < CUDA_GEMM_EPIS; e++) {
        if (cublasLtMatmulDescCreate(&g->desc[e], CUBLAS_COMPUTE_32F, CUDA_R_32F) !=
                CUBLAS_STATUS_SUCCESS ||
            cublasLtMatmulDescSetAttribute(g->desc[e], CUBLASLT_MATMUL_DESC_TRANSA, &ta,
                                           sizeof(ta)) != CUBLAS_STATUS_SUCCESS ||
            cublasLtMatmulDescSetAttribute(g->desc[e], CUBLASLT_MATMUL_DESC_TRANSB, &tb,
                                           sizeof(tb)) != CUBLAS_STATUS_SUCCESS ||
            cublasLtMatmulDescSetAttribute(g->desc[e], CUBLASLT_MATMUL_DESC_EPILOGUE, &gemm_epi[e],
                                           sizeof(gemm_epi[e])) != CUBLAS_STATUS_SUCCESS) {
            common_err_set(err, COMMON_FATAL, "cuBLASLt matmul descriptor setup failed");
            cuda_gemm_free(g);
            return COMMON_FATAL;
        }
    }
    return COMMON_OK;
}

void cuda_gemm_free(cuda_gemm_t *g) {
    for (int e = 0; e < CUDA_GEMM_EPIS; e++)
        if (g->desc[e]) cublasLtMatmulDescDestroy(g->desc[e]);
    if (g->lt) cublasLtDestroy(g->lt);
    if (g->ev0) cudaEventDestroy(g->ev0);
    if (g->ev1) cudaEventDestroy(g->ev1);
    memset(g, 0, sizeof(*g));
}

// Buckets of a quarter octave: at most ~4 entries per doubling of the token count.
int cuda_gemm_bucket(int m) {
    if (m <= 64) return 64;
    int p = 1;
    while (p * 2 <= m)
        p *= 2;
    int step = p / 4;
    return (m + step - 1) / step * step;
}

typedef struct {
    cublasLtMatrixLayout_t a, b, c;
} gemm_layouts_t;

static int gemm_layouts(cuda_gemm_t *g, gemm_layouts_t *l, int m, int n, int k, int ldx, int ldy) {
    // Column-major view: C (n, m) = op(A) (n, k) x B (k, m) with A = W stored (k, n).
    memset(l, 0, sizeof(*l));
    if (cublasLtMatrixLayoutCreate(&l->a, g->dt, k, n, k) != CUBLAS_STATUS_SUCCESS ||
        cublasLtMatrixLayoutCreate(&l->b, g->dt, k, m, ldx) != CUBLAS_STATUS_SUCCESS ||
        cublasLtMatrixLayoutCreate(&l->c, g->dt, n, m, ldy) != CUBLAS_STATUS_SUCCESS)
        return -1;
    return 0;
}
static void gemm_layouts_free(gemm_layouts_t *l) {
    if (l->a) cublasLtMatrixLayoutDestroy(l->a);
    if (l->b) cublasLtMatrixLayoutDestroy(l->b);
    if (l->c) cublasLtMatrixLayoutDestroy(l->c);
}

// Up to max_algos candidates for the shape, best first by cuBLASLt's heuristic; returns how
// many (0 on failure).
// (beta, a run-time scalar, does not enter: the layouts and epilogue decide the candidates.)
static int gemm_query(cuda_gemm_t *g, int m, int n, int k, int ldx, int ldy, int epi,
                      cublasLtMatmulHeuristicResult_t *res, int max_algos) {
    gemm_layouts_t l;
    int found = 0;
    cublasLtMatmulPreference_t pref = NULL;
    g->heuristic_queries++;
    if (gemm_layouts(g, &l, m, n, k, ldx, ldy) == 0 &&
        cublasLtMatmulPreferenceCreate(&pref) == CUBLAS_STATUS_SUCCESS &&
        cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                             &g->workspace_bytes,
                                             sizeof(g->workspace_bytes)) == CUBLAS_STATUS_SUCCESS) {
        if (cublasLtMatmulAlgoGetHeuristic(g->lt, g->desc[epi], l.a, l.b, l.c, l.c, pref, max_algos,
                                           res, &found) != CUBLAS_STATUS_SUCCESS)
            found = 0;
    }
    if (pref) cublasLtMatmulPreferenceDestroy(pref);
    gemm_layouts_free(&l);
    return found;
}

static int gemm_exec(cuda_gemm_t *g, const cublasLtMatmulAlgo_t *algo, const void *w, const void *x,
                     void *y, const void *bias, const void *res, int m, int n, int k, int ldx,
                     int ldy, int epi, cudaStream_t st) {
    gemm_layouts_t l;
    const float one = 1.f, zero = 0.f;
    const void *c = res ? res : y;
    int rc = -1;
    if (epi != CUDA_GEMM_PLAIN &&
        cublasLtMatmulDescSetAttribute(g->desc[epi], CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias,
                                       sizeof(bias)) != CUBLAS_STATUS_SUCCESS)
        return -1;
    if (gemm_layouts(g, &l, m, n, k, ldx, ldy) == 0 &&
        cublasLtMatmul(g->lt, g->desc[epi], &one, w, l.a, x, l.b, res ? &one : &zero, c, l.c, y,
                       l.c, algo, g->workspace, g->workspace_bytes, st) == CUBLAS_STATUS_SUCCESS)
        rc = 0;
    gemm_layouts_free(&l);
    return rc;
}

#define GEMM_TUNE_MAX  32
#define GEMM_TUNE_RUNS 3

// Times each candidate GEMM_TUNE_RUNS times on the call's operands (writing y) and returns
// the index of the fastest, -1 if none ran.
static int gemm_tune(cuda_gemm_t *g, const cublasLtMatmulHeuristicResult_t *cand, int n_cand,
                     const void *w, const void *x, void *y, const void *bias, const void *res,
                     int m, int n, int k, int ldx, int ldy, int epi, cudaStream_t st) {
    int best = -1;
    float best_ms = 0, first_ms = -1;
    for (int i = 0; i < n_cand; i++) {
        float ms = 0;
        if (gemm_exec(g, &cand[i].algo, w, x, y, bias, res, m, n, k, ldx, ldy, epi, st) != 0)
            continue;
        cudaEventRecord(g->ev0, st);
        int ok = 1;
        for (int r = 0; r < GEMM_TUNE_RUNS && ok; r++)
            ok = gemm_exec(g, &cand[i].algo, w, x, y, bias, res, m, n, k, ldx, ldy, epi, st) == 0;
        cudaEventRecord(g->ev1, st);
        if (!ok || cudaEventSynchronize(g->ev1) != cudaSuccess ||
            cudaEventElapsedTime(&ms, g->ev0, g->ev1) != cudaSuccess)
            continue;
        if (i == 0) first_ms = ms;
        if (best < 0 || ms < best_ms) best = i, best_ms = ms;
    }
    cudaGetLastError(); // a candidate that failed to launch leaves nothing sticky behind
    if (best >= 0) {
        g->tuned++;
        g->tuned_changed += best != 0;
        if (first_ms >= 0) {
            g->tuned_ms_top1 += first_ms / GEMM_TUNE_RUNS;
            g->tuned_ms_best += best_ms / GEMM_TUNE_RUNS;
        }
    }
    return best;
}

common_status_t cuda_gemm_run(cuda_gemm_t *g, const void *w, const void *x, void *y,
                              const void *bias, const void *res, int m, int n, int k, int epi,
                              cudaStream_t st, common_err_t *err) {
    return cuda_gemm_run_ld(g, w, x, y, n, bias, res, m, n, k, epi, st, err);
}

common_status_t cuda_gemm_run_ld(cuda_gemm_t *g, const void *w, const void *x, void *y, int ldy,
                                 const void *bias, const void *res, int m, int n, int k, int epi,
                                 cudaStream_t st, common_err_t *err) {
    return cuda_gemm_run_ldx(g, w, x, k, y, ldy, bias, res, m, n, k, epi, st, err);
}

common_status_t cuda_gemm_run_ldx(cuda_gemm_t *g, const void *w, const void *x, int ldx, void *y,
                                  int ldy, const void *bias, const void *res, int m, int n, int k,
                                  int epi, cudaStream_t st, common_err_t *err) {
    // An activation whose epilogue cuBLASLt refused: the bias epilogue, then an own pass over
    // the output. Never with a residual: activations feed the next GEMM, not the residual
    // stream.
    int act = epi == CUDA_GEMM_GELU_BIAS && !g->gelu_epilogue   ? GPU_ACT_GELU_TANH
              : epi == CUDA_GEMM_RELU_BIAS && !g->relu_epilogue ? GPU_ACT_RELU
                                                                : -1;
    if (act >= 0) {
        if (ldy != n || res) {
            return common_err_set(err, COMMON_FATAL,
                                  "an activation pass needs contiguous rows and no residual");
        }
        if (cuda_gemm_run_ldx(g, w, x, ldx, y, n, bias, NULL, m, n, k, CUDA_GEMM_BIAS, st, err) !=
            0)
            return err->code;
        cudaError_t e =
            g->dt == CUDA_R_16BF
                ? cuda_bias_act((__nv_bfloat16 *)y, (const __nv_bfloat16 *)NULL, m, n, act, st)
                : cuda_bias_act((__half *)y, (const __half *)NULL, m, n, act, st);
        if (e != cudaSuccess) {
            return common_err_set(err, COMMON_FATAL, "activation kernel launch failed: %s",
                                  cudaGetErrorString(e));
        }
        return COMMON_OK;
    }
    int mb = cuda_gemm_bucket(m);
    cuda_gemm_entry_t *hit = NULL;
    for (int i = 0; i < g->n_cache; i++) {
        cuda_gemm_entry_t *c = &g->cache[i];
        if (c->n == n && c->k == k && c->epi == epi && c->mb == mb && c->beta == (res != NULL) &&
            c->ldy == ldy && c->ldx == ldx) {
            hit = c;
            break;
        }
    }
    if (!hit) {
        // Chosen for the bucket's largest M, so it is valid (workspace, split) for all below.
        cublasLtMatmulHeuristicResult_t cand[GEMM_TUNE_MAX];
        int want = g->only > 0 ? g->only : g->tune > 1 ? g->tune : 1;
        int n_cand = gemm_query(g, mb, n, k, ldx, ldy, epi, cand,
                                want < GEMM_TUNE_MAX ? want : GEMM_TUNE_MAX);
        if (g->only > 0 && n_cand < g->only) {
            return common_err_set(err, COMMON_FATAL,
                                  "cuBLASLt has %d candidates for a %dx%dx%d GEMM, not %d", n_cand,
                                  m, n, k, g->only);
        }
        if (n_cand <= 0) {
            if (epi == CUDA_GEMM_GELU_BIAS || epi == CUDA_GEMM_RELU_BIAS) {
                if (epi == CUDA_GEMM_GELU_BIAS) g->gelu_epilogue = 0;
                if (epi == CUDA_GEMM_RELU_BIAS) g->relu_epilogue = 0;
                return cuda_gemm_run_ldx(g, w, x, ldx, y, ldy, bias, res, m, n, k, epi, st, err);
            }
            return common_err_set(err, COMMON_FATAL,
                                  "cuBLASLt found no algorithm for a %dx%dx%d GEMM", m, n, k);
        }
        int pick = g->only > 0 ? g->only - 1 : 0;
        if (n_cand > 1 && g->only <= 0) {
            pick = gemm_tune(g, cand, n_cand, w, x, y, bias, res, m, n, k, ldx, ldy, epi, st);
            if (pick < 0) pick = 0;
        }
        int slot = g->n_cache < CUDA_GEMM_CACHE ? g->n_cache++
                                                : (int)(g->heuristic_queries % CUDA_GEMM_CACHE);
        hit = &g->cache[slot];
        hit->n = n, hit->k = k, hit->epi = epi, hit->mb = mb, hit->beta = res != NULL;
        hit->ldy = ldy, hit->ldx = ldx;
        hit->algo = cand[pick].algo;
    }
    if (gemm_exec(g, &hit->algo, w, x, y, bias, res, m, n, k, ldx, ldy, epi, st) == 0)
        return COMMON_OK;
    // The cached algorithm does not suit this exact M: ask for this one alone.
    cublasLtMatmulHeuristicResult_t one;
    if (gemm_query(g, m, n, k, ldx, ldy, epi, &one, 1) == 1 &&
        gemm_exec(g, &one.algo, w, x, y, bias, res, m, n, k, ldx, ldy, epi, st) == 0)
        return COMMON_OK;
    return common_err_set(err, COMMON_FATAL, "cuBLASLt matmul failed (%dx%dx%d, epilogue %d)", m, n,
                          k, epi);
}

common_status_t cuda_head_run(cuda_gemm_t *g, const float *x, int s, const float *pool_w,
                              const float *pool_b, const float *cls_w, const float *cls_b, int h,
                              int l, int act, float *pooled, float *logits, cudaStream_t st,
                              common_err_t *err) {
    if (cuda_gemm_run(g, pool_w, x, pooled, pool_b, NULL, s, h, h, CUDA_GEMM_BIAS, st, err) != 0)
        return err->code;
    cudaError_t e = cuda_act_f32(pooled, (size_t)s * h, act, st);
    if (e != cudaSuccess) {
        return common_err_set(err, COMMON_FATAL, "head activation kernel launch failed: %s",
                              cudaGetErrorString(e));
    }
    return cuda_gemm_run(g, cls_w, pooled, logits, cls_b, NULL, s, l, h, CUDA_GEMM_BIAS, st, err);
}
