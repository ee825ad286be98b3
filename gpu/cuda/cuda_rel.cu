// DeBERTa's c2p and p2c products of one layer, for every head at once: out (n, heads, R) =
// x_h (n, d) . rel_h (R, d)^T, x rows of Q (c2p, against the relative keys) or K (p2c,
// against the relative queries). The attention kernel gathers one element of each at every
// pair's relative row, so the products are computed once per token and relative row, on the
// tensor cores, instead of once per pair. One batched cuBLASLt matmul over the heads, fp32
// accumulation, on the caller's workspace (the arena's): cuBLASLt allocates nothing of its
// own, where cuBLAS grew a workspace per new shape. Algorithms are chosen per token bucket
// (cuda_gemm_bucket) on first use, which the backend's warm-up sweep makes at init.
#include <stdint.h>
#include <string.h>

#include "gpu/cuda/cuda_common.cuh"
#include "gpu/cuda/cuda_gemm.cuh"

int cuda_rel_init(cuda_rel_gemm_t *r, int bf16, void *workspace, size_t workspace_bytes) {
    memset(r, 0, sizeof(*r));
    r->dt = bf16 ? CUDA_R_16BF : CUDA_R_16F;
    r->workspace = workspace, r->workspace_bytes = workspace_bytes;
    const cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
    if (cublasLtCreate(&r->lt) != CUBLAS_STATUS_SUCCESS ||
        cublasLtMatmulDescCreate(&r->desc, CUBLAS_COMPUTE_32F, CUDA_R_32F) !=
            CUBLAS_STATUS_SUCCESS ||
        cublasLtMatmulDescSetAttribute(r->desc, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof(ta)) !=
            CUBLAS_STATUS_SUCCESS ||
        cublasLtMatmulDescSetAttribute(r->desc, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof(tb)) !=
            CUBLAS_STATUS_SUCCESS) {
        cuda_rel_free(r);
        return -1;
    }
    return 0;
}

void cuda_rel_free(cuda_rel_gemm_t *r) {
    if (r->desc) cublasLtMatmulDescDestroy(r->desc);
    if (r->lt) cublasLtDestroy(r->lt);
    memset(r, 0, sizeof(*r));
}

typedef struct {
    cublasLtMatrixLayout_t a, b, c;
} rel_layouts_t;

static void rel_layouts_free(rel_layouts_t *l) {
    if (l->a) cublasLtMatrixLayoutDestroy(l->a);
    if (l->b) cublasLtMatrixLayoutDestroy(l->b);
    if (l->c) cublasLtMatrixLayoutDestroy(l->c);
}

// One layout of `heads` matrices (rows, cols) column-major, ld apart per column, the next
// matrix stride elements on.
static int rel_layout(cublasLtMatrixLayout_t *l, cudaDataType_t dt, int rows, int cols, int ld,
                      int heads, long long stride) {
    const int32_t batch = heads;
    const int64_t off = stride;
    return cublasLtMatrixLayoutCreate(l, dt, rows, cols, ld) == CUBLAS_STATUS_SUCCESS &&
                   cublasLtMatrixLayoutSetAttribute(*l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &batch,
                                                    sizeof(batch)) == CUBLAS_STATUS_SUCCESS &&
                   cublasLtMatrixLayoutSetAttribute(*l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET,
                                                    &off, sizeof(off)) == CUBLAS_STATUS_SUCCESS
               ? 0
               : -1;
}

// Column-major: out_h^T (R, n), ld heads * R, = rel_h (d x R, ld heads * d)^T times x_h^T
// (d x n, ld ldx); head h at h * d (inputs) and h * R (output).
static int rel_layouts(const cuda_rel_gemm_t *r, rel_layouts_t *l, int n, int ldx, int R, int heads,
                       int d) {
    memset(l, 0, sizeof(*l));
    if (rel_layout(&l->a, r->dt, d, R, heads * d, heads, d) != 0 ||
        rel_layout(&l->b, r->dt, d, n, ldx, heads, d) != 0 ||
        rel_layout(&l->c, r->dt, R, n, heads * R, heads, R) != 0) {
        rel_layouts_free(l);
        return -1;
    }
    return 0;
}

// The alignment in bytes (a power of two, at most 256) every matrix of a call starts on:
// the heads' matrices start d (inputs) and R (output) elements apart, so the pointers and
// those strides decide it, and the heuristic must only offer algorithms that take it.
static uint32_t rel_align(const void *x, int ldx, const void *rel, int R, int heads, int d,
                          const void *out) {
    uintptr_t v = (uintptr_t)x | (uintptr_t)rel | (uintptr_t)out | 256u;
    v |= (uintptr_t)ldx * 2 | (uintptr_t)d * 2 | (uintptr_t)heads * d * 2 | (uintptr_t)R * 2 |
         (uintptr_t)heads * R * 2;
    return (uint32_t)(v & (~v + 1)); // the lowest set bit
}

static int rel_query(cuda_rel_gemm_t *r, int n, int ldx, int R, int heads, int d, uint32_t align,
                     cublasLtMatmulAlgo_t *algo) {
    rel_layouts_t l;
    cublasLtMatmulPreference_t pref = NULL;
    cublasLtMatmulHeuristicResult_t res;
    int found = 0;
    r->queries++;
    if (rel_layouts(r, &l, n, ldx, R, heads, d) != 0) return -1;
    const cublasLtMatmulPreferenceAttributes_t al[4] = {
        CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
        CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES};
    int ok = cublasLtMatmulPreferenceCreate(&pref) == CUBLAS_STATUS_SUCCESS &&
             cublasLtMatmulPreferenceSetAttribute(
                 pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &r->workspace_bytes,
                 sizeof(r->workspace_bytes)) == CUBLAS_STATUS_SUCCESS;
    for (int i = 0; ok && i < 4; i++)
        ok = cublasLtMatmulPreferenceSetAttribute(pref, al[i], &align, sizeof(align)) ==
             CUBLAS_STATUS_SUCCESS;
    if (!ok || cublasLtMatmulAlgoGetHeuristic(r->lt, r->desc, l.a, l.b, l.c, l.c, pref, 1, &res,
                                              &found) != CUBLAS_STATUS_SUCCESS)
        found = 0;
    if (pref) cublasLtMatmulPreferenceDestroy(pref);
    rel_layouts_free(&l);
    if (found < 1) return -1;
    *algo = res.algo;
    return 0;
}

static int rel_exec(cuda_rel_gemm_t *r, const cublasLtMatmulAlgo_t *algo, const void *x, int ldx,
                    int n, const void *rel, int R, int heads, int d, void *out, cudaStream_t st) {
    rel_layouts_t l;
    const float one = 1.f, zero = 0.f;
    if (rel_layouts(r, &l, n, ldx, R, heads, d) != 0) return -1;
    const cublasStatus_t s = cublasLtMatmul(r->lt, r->desc, &one, rel, l.a, x, l.b, &zero, out, l.c,
                                            out, l.c, algo, r->workspace, r->workspace_bytes, st);
    rel_layouts_free(&l);
    return s == CUBLAS_STATUS_SUCCESS ? 0 : -1;
}

template <typename T>
int cuda_rel_scores(cuda_rel_gemm_t *r, const T *x, int ldx, int n, const T *rel, int R, int heads,
                    int head_dim, T *out, cudaStream_t st) {
    if (n <= 0) return 0;
    const int mb = cuda_gemm_bucket(n);
    const uint32_t align = rel_align(x, ldx, rel, R, heads, head_dim, out);
    cuda_rel_entry_t *hit = NULL;
    for (int i = 0; i < r->n_cache && !hit; i++) {
        cuda_rel_entry_t *c = &r->cache[i];
        if (c->mb == mb && c->R == R && c->heads == heads && c->d == head_dim && c->ldx == ldx &&
            c->align == align)
            hit = c;
    }
    if (!hit) { // chosen for the bucket's top, so valid (workspace, split) for every n below
        cublasLtMatmulAlgo_t algo;
        if (rel_query(r, mb, ldx, R, heads, head_dim, align, &algo) != 0) return -1;
        const int slot =
            r->n_cache < CUDA_REL_CACHE ? r->n_cache++ : (int)(r->queries % CUDA_REL_CACHE);
        hit = &r->cache[slot];
        hit->mb = mb, hit->R = R, hit->heads = heads, hit->d = head_dim, hit->ldx = ldx;
        hit->align = align, hit->algo = algo;
    }
    if (rel_exec(r, &hit->algo, x, ldx, n, rel, R, heads, head_dim, out, st) == 0) return 0;
    cublasLtMatmulAlgo_t exact; // the bucket's algorithm does not suit this n: ask for it
    if (rel_query(r, n, ldx, R, heads, head_dim, align, &exact) == 0 &&
        rel_exec(r, &exact, x, ldx, n, rel, R, heads, head_dim, out, st) == 0)
        return 0;
    return -1;
}

template int cuda_rel_scores<__half>(cuda_rel_gemm_t *, const __half *, int, int, const __half *,
                                     int, int, int, __half *, cudaStream_t);
template int cuda_rel_scores<__nv_bfloat16>(cuda_rel_gemm_t *, const __nv_bfloat16 *, int, int,
                                            const __nv_bfloat16 *, int, int, int, __nv_bfloat16 *,
                                            cudaStream_t);
