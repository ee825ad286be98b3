/* The CPU backend's state, shared by its thread pool (cpu_backend.c), its setup
 * (cpu_weights.c, cpu_fp8.c) and its graph executor (cpu_graph.c, cpu_attention.c). */
#ifndef RECLASS_GPU_CPU_BACKEND_INT_H
#define RECLASS_GPU_CPU_BACKEND_INT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "gpu/backend.h"
#include "gpu/graph.h"
#include "gpu/cpu/cpu_gemm.h"
#include "gpu/model/fp8.h"

/* One linear op's projection y = x W^T + b, run by gpu_cpu_gemm_bf16 (precision bf16),
 * gpu_cpu_gemm on packed weights or else by OpenBLAS. */
typedef struct {
    const float *w;           /* (N, K) nn.Linear layout, for OpenBLAS */
    const float *b;           /* (N) */
    const float *packed;      /* gpu_cpu_gemm panels of w, or NULL */
    const uint16_t *packed16; /* gpu_cpu_bf16_pack panels of w (precision bf16), or NULL */
    int N, K;
    float x_scale; /* fp8: the input's static scale (gpu_graph_fp8_static_scale), 0: per token */
} cpu_proj_t;

typedef struct {
    gpu_backend_t *be;
    int id;
    pthread_t th;
    float *scratch; /* the attention ops' scratch (gpu_cpu_attn_scratch_floats) */
    float *xq;      /* precision fp8: (rows, K) an FP8 projection's input rounded to E4M3 */
    double *op_s;   /* (n_ops) seconds this thread spent in each batch op while be->prof */
    long *op_runs;  /* (n_ops) its runs of each */
} cpu_worker_t;

struct gpu_backend {
    const gpu_model_t *m; /* borrowed; outlives the backend */
    gpu_backend_opts_t opts;
    gpu_precision_t prec;
    gpu_graph_t *g; /* the model's forward pass (gpu/graph.h) */
    int max_len, max_seqs;
    int chunk;        /* tokens run through all layers at a time (cache blocking) */
    int blas_only;    /* projections through OpenBLAS even where gpu_cpu_gemm runs */
    float **tp;       /* (n_tensors) each tensor's fp32 rows: the model's weights, else the arena */
    cpu_proj_t *proj; /* (n_prelude + n_ops) the linear ops' projections, prelude first */
    float *fp8_w;     /* the FP8 projections' weights, rounded to E4M3 x scale */
    size_t fp8_w_floats;
    float *packed; /* the projections' weights in gpu_cpu_gemm panels, or NULL (OpenBLAS) */
    size_t packed_floats;
    uint16_t *packed16; /* the bf16 projections' weights in bf16 panels, or NULL */
    size_t packed16_elems;
    /* The graph's consts and activations (gpu_graph_plan of the token budget, fp32); a
     * chunk uses only the rows of its own tokens and sequences. */
    float *arena;
    size_t arena_bytes;
    size_t scratch_floats, xq_floats; /* per thread */
    /* submit runs a batch at once (the cores are the device) and keeps its logits here until
     * collect: two slots, as many batches as the interface lets be in flight. */
    float *flight_logits[2]; /* (max_seqs, L) each */
    gpu_flight_t flight;
    /* Thread pool: worker 0 is the caller of forward. */
    int n_threads;
    int started;     /* worker threads running, joined by free */
    cpu_worker_t *w; /* (n_threads) */
    pthread_mutex_t mu;
    pthread_cond_t cv_go, cv_done;
    unsigned gen;
    int pending, stop;
    const gpu_batch_t *batch;
    int *chunk_at; /* (max_seqs + 1) first sequence of each chunk of the batch, then n_seqs */
    int n_chunks;
    atomic_int next_chunk; /* the next chunk a thread may take */
    int prof;              /* profile_ops: the workers time each op (set between forwards) */
};

/* The graph over sequences [s0, s1) of the batch (cpu_graph.c), on the worker's scratch;
 * the logits tensor points at the batch's output. */
void gpu_cpu_encode_range(gpu_backend_t *be, const gpu_batch_t *bt, int s0, int s1,
                          cpu_worker_t *wk);
/* Op i of the projections' numbering (prelude first) on sequences [s0, s1) of bt; bt NULL: a
 * prelude op on its whole fixed rows. */
void gpu_cpu_run_op(const gpu_backend_t *be, int i, const gpu_op_t *op, const gpu_batch_t *bt,
                    int s0, int s1, cpu_worker_t *wk);

/* y (n, N), rows ldy apart, = epilogue(x (n, K) W^T + b) on p (cpu_graph.c). */
void gpu_cpu_project(const cpu_proj_t *p, const float *x, int ldx, int n, gpu_cpu_epi_t epi,
                     float *y, int ldy);

/* Builds the graph of be->m at be->prec (unless be->g is given), checks the backend runs every op,
 * lays out the arena, prepares every projection's weights (fp8 rounding, packing) and runs the
 * prelude (cpu_weights.c). COMMON_OK, or err's code. */
common_status_t gpu_cpu_graph_setup(gpu_backend_t *be, common_err_t *err);
void gpu_cpu_graph_free(gpu_backend_t *be);
/* The table's supports_op: every op at fp32 and bf16, the linear op at fp8 too. */
int gpu_cpu_supports_op(const gpu_graph_t *g, const gpu_op_t *op);

/* precision fp8 (cpu_fp8.c): rounds the weights of every FP8 linear op into be->fp8_w and
 * points its projection at them; before packing. 0, or -1 out of memory. */
int gpu_cpu_fp8_weights(gpu_backend_t *be);
/* y (n, K = p->K) = x's rows (ldx apart) rounded to E4M3 per token, or under p->x_scale;
 * returns y. */
const float *gpu_cpu_fp8_input(const cpu_proj_t *p, const float *x, int ldx, int n, float *y);

/* The "cpu" backend's init; blas_only: every projection through OpenBLAS, as CPUs without
 * AVX2 run it (tests compare the two GEMM paths on one machine with it). */
common_status_t gpu_cpu_init_as(const gpu_model_t *m, const gpu_backend_opts_t *opts, int blas_only,
                                gpu_backend_t **out, common_err_t *err);
/* The same on graph g (owned from the call on), or on m's family's graph when g is NULL. */
common_status_t gpu_cpu_init_graph_as(const gpu_model_t *m, gpu_graph_t *g,
                                      const gpu_backend_opts_t *opts, int blas_only,
                                      gpu_backend_t **out, common_err_t *err);

#endif
