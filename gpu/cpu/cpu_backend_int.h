/* The CPU backend's state, shared by its setup and thread pool (cpu_backend.c) and its
 * forward pass (cpu_forward.c). */
#ifndef RECLASS_GPU_CPU_BACKEND_INT_H
#define RECLASS_GPU_CPU_BACKEND_INT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "gpu/backend.h"
#include "gpu/cpu/cpu_gemm.h"
#include "gpu/model/fp8.h"

/* One projection y = x W^T + b, run by gpu_cpu_gemm_bf16 (precision bf16), gpu_cpu_gemm on
 * packed weights or else by OpenBLAS. */
typedef struct {
    const float *w;           /* (N, K) nn.Linear layout, for OpenBLAS */
    const float *b;           /* (N) */
    const float *packed;      /* gpu_cpu_gemm panels of w, or NULL */
    const uint16_t *packed16; /* gpu_cpu_bf16_pack panels of w (precision bf16), or NULL */
    int N, K;
} cpu_proj_t;

typedef struct {
    cpu_proj_t qkv;   /* (3H, H) Q|K|V fused */
    cpu_proj_t q, kv; /* its first H and last 2H outputs (the last layer splits them) */
    cpu_proj_t ao;    /* (H, H) */
    cpu_proj_t ff1;   /* (I, H) */
    cpu_proj_t ff2;   /* (H, I) */
} cpu_layer_proj_t;

typedef struct {
    gpu_backend_t *be;
    int id;
    pthread_t th;
    float *scratch; /* gpu_cpu_attention_scratch_floats(max_len, head_dim) */
} cpu_worker_t;

struct gpu_backend {
    const gpu_model_t *m; /* borrowed; outlives the backend */
    gpu_backend_opts_t opts;
    int max_len, max_seqs;
    int chunk;        /* tokens run through all layers at a time (cache blocking) */
    int blas_only;    /* projections through OpenBLAS even where gpu_cpu_gemm runs */
    int fp8;          /* precision fp8: the FP8 reference (cpu_fp8.c) */
    unsigned *fp8_on; /* (layers) bit p set: point p runs in FP8 (gpu_fp8_runs) */
    float *fp8_w;     /* the FP8 projections' weights, rounded to E4M3 x scale */
    size_t fp8_w_floats;
    cpu_layer_proj_t *proj; /* (layers) */
    cpu_proj_t emb_proj;    /* (H, E) ELECTRA's embedding projection; N = 0 when E == H */
    cpu_proj_t pool, cls;
    float *own_qkv; /* (layers, 3H*H + 3H) Q|K|V copied together when the model's are not */
    float *packed;  /* the projections' weights in gpu_cpu_gemm panels, or NULL (OpenBLAS) */
    size_t packed_floats;
    int bf16;           /* precision bf16: projections on packed16 (gpu_cpu_gemm_bf16) */
    uint16_t *packed16; /* the projections' weights in bf16 panels, or NULL */
    size_t packed16_elems;
    /* Activations, (token_budget) rows each. In the last layer only the first token of each
     * sequence is carried past attention, in compact rows inside the chunk's own range. */
    float *x;      /* (B, H) hidden states */
    float *qkv;    /* (B, 3H) */
    float *ctx;    /* (B, H) attention output */
    float *tmp;    /* (B, H) last layer: first-token queries, then pooler outputs */
    float *ff;     /* (B, F) F = gpu_model_ff1_rows: I, or 2I for ModernBERT's GeGLU */
    float *rel_kq; /* DeBERTa: (layers, 2, 2 span, H) the relative embeddings (after their
                    * LayerNorm) through each layer's pos K, then pos Q projection; else NULL */
    /* submit runs a batch at once (the cores are the device) and keeps its logits here until
     * collect: two slots, as many batches as the interface lets be in flight. */
    float *flight_logits[2]; /* (max_seqs, L) each */
    gpu_flight_t flight;
    size_t arena_bytes;
    /* Thread pool: worker 0 is the caller of forward. */
    int n_threads;
    int started;     /* worker threads running, joined by free */
    cpu_worker_t *w; /* (n_threads) */
    pthread_mutex_t mu;
    pthread_cond_t cv_go, cv_done;
    unsigned gen;
    int pending, stop;
    const gpu_batch_t *batch;
    float *logits;
    int *chunk_at; /* (max_seqs + 1) first sequence of each chunk of the batch, then n_seqs */
    int n_chunks;
    atomic_int next_chunk; /* the next chunk a thread may take */
};

/* The encoder over sequences [s0, s1) of the batch (cpu_forward.c): logits (n_seqs, L) rows
 * s0..s1-1; scratch is the calling thread's attention scratch. */
void gpu_cpu_encode_range(gpu_backend_t *be, const gpu_batch_t *bt, int s0, int s1, float *logits,
                          float *scratch);

/* precision fp8 (cpu_fp8.c): rounds the weights of every FP8 projection into be->fp8_w and
 * points the projections at them; before packing. 0, or -1 out of memory. */
int gpu_cpu_fp8_weights(gpu_backend_t *be);
/* The input projection p of layer `layer` reads: x itself where it runs in 16/32 bits, else y
 * (n, K), rows ldy apart (may be x), holding x's rows rounded to E4M3 per token. */
const float *gpu_cpu_fp8_input(const gpu_backend_t *be, int layer, gpu_fp8_point_t p,
                               const float *x, int ldx, int n, int K, float *y, int ldy);

/* y (n, N), rows ldy apart, = epilogue(x (n, K) W^T + b) on p (cpu_forward.c). */
void gpu_cpu_project(const cpu_proj_t *p, const float *x, int ldx, int n, gpu_cpu_epi_t epi,
                     float *y, int ldy);
/* y = act(x W^T + b). */
void gpu_cpu_project_act(const cpu_proj_t *p, const float *x, int ldx, int n, gpu_act_t act,
                         float *y, int ldy);

/* The two families with their own layers (cpu_modernbert.c, cpu_deberta.c): the encoder over
 * sequences [s0, s1) as gpu_cpu_encode_range, and the attention scratch one thread needs
 * for sequences up to max_len. */
void gpu_cpu_modernbert_range(gpu_backend_t *be, const gpu_batch_t *bt, int s0, int s1,
                              float *logits, float *scratch);
size_t gpu_cpu_modernbert_scratch_floats(const gpu_model_config_t *c, int max_len);
void gpu_cpu_deberta_range(gpu_backend_t *be, const gpu_batch_t *bt, int s0, int s1, float *logits,
                           float *scratch);
size_t gpu_cpu_deberta_scratch_floats(const gpu_model_config_t *c, int max_len);
/* Fills be->rel_kq (allocated here); 0 or -1 (out of memory). */
int gpu_cpu_deberta_prepare(gpu_backend_t *be);

/* The "cpu" backend's init; blas_only: every projection through OpenBLAS, as CPUs without
 * AVX2 run it (tests compare the two GEMM paths on one machine with it). */
int gpu_cpu_init_as(const gpu_model_t *m, const gpu_backend_opts_t *opts, int blas_only,
                    gpu_backend_t **out, char *err, size_t errlen);

#endif
