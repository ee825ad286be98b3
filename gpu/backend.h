/* The encoder behind a table of function pointers (ggml style): worker/ sees this header
 * only, never a CUDA header. A batch is packed, padding-free: the tokens of all sequences
 * back to back, with prefix offsets like flash-attention's cu_seqlens. */
#ifndef RECLASS_GPU_BACKEND_H
#define RECLASS_GPU_BACKEND_H

#include <stddef.h>
#include <stdint.h>

#include "common/err.h"
#include "gpu/graph.h"
#include "gpu/model/model.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    const int32_t *ids;        /* (n_tokens) token ids, sequence after sequence */
    const int32_t *cu_seqlens; /* (n_seqs + 1) cu_seqlens[0] = 0, cu_seqlens[n_seqs] = n_tokens */
    int n_seqs;
    int n_tokens;
    int max_len; /* longest sequence in the batch, <= opts.max_len */
} gpu_batch_t;

typedef struct {
    int token_budget;      /* tokens per batch the backend must hold (its arena is sized by it) */
    int max_len;           /* longest sequence, <= cfg.max_pos; 0 = cfg.max_pos */
    int max_seqs;          /* sequences per batch; 0 = gpu_backend_max_seqs(token_budget) */
    int threads;           /* CPU threads; 0 = one per core */
    const char *precision; /* one of the backend's precisions; NULL = its first (default) */
    int device;            /* CUDA device ordinal */
} gpu_backend_opts_t;

typedef struct {
    size_t weights_bytes;        /* device bytes of weights */
    size_t arena_bytes;          /* device bytes of activations + workspace */
    size_t device_used;          /* cudaMemGetInfo total - free, 0 on cpu */
    size_t device_total;         /* cudaMemGetInfo total, 0 on cpu */
    long allocations_after_init; /* must stay 0 */
} gpu_mem_stats_t;

/* What an instance actually runs, as it settled its options at init: callers size their
 * batches and report telemetry from this, never from what they asked for. */
typedef struct {
    const char *precision; /* "fp32", "fp16", "bf16", ...: valid while the instance lives */
    int token_budget;      /* tokens per batch it holds */
    int max_seqs;          /* sequences per batch it holds */
    int max_len;           /* longest sequence it takes */
    int padded;            /* 1: a batch costs n_seqs * its longest; 0: its real tokens */
    int synchronous;       /* 1: submit runs the batch before it returns (collect hands over
                            * its logits), so the caller waits out the whole batch; 0: submit
                            * queues it and a device runs it while the caller goes on (ggml's
                            * caps.async, negated) */
} gpu_backend_props_t;

typedef struct gpu_backend gpu_backend_t; /* one backend instance; opaque */

/* Time per op over a stretch of forwards (`reclass bench --profile-ops`): the ops that are
 * alike in every layer summed in one row, named as gpu_op_describe names them without the
 * layer ("qkv: linear (2304 x 768) fp16"), longest first. */
#define GPU_OP_TIMES_ROWS 64
typedef struct {
    char what[96];
    long runs; /* op runs timed */
    double ms; /* summed; 0 with runs > 0: the op ran fused into the row's op before it */
} gpu_op_time_t;
typedef struct {
    const char *clock; /* what the milliseconds are, in words */
    int n;
    gpu_op_time_t row[GPU_OP_TIMES_ROWS];
    double total_ms;
} gpu_op_times_t;

typedef struct {
    const char *name;
    /* The model stays owned by the caller and must outlive the instance. COMMON_OK, or with
     * err set: COMMON_USAGE options it refuses (a precision, a capacity, an op it lacks),
     * COMMON_FATAL the device or memory failed (out of device memory: the hint says what to
     * lower). */
    common_status_t (*init)(const gpu_model_t *model, const gpu_backend_opts_t *opts,
                            gpu_backend_t **out, common_err_t *err);
    /* logits: (n_seqs, num_labels) fp32, host memory. forward, submit and collect answer
     * COMMON_OK, or with err set: COMMON_USAGE a batch over capacity (refused before any
     * work), COMMON_BUG a call out of turn (below), COMMON_FATAL the device failed. */
    common_status_t (*forward)(gpu_backend_t *be, const gpu_batch_t *batch, float *logits,
                               common_err_t *err);
    int (*mem_stats)(gpu_backend_t *be, gpu_mem_stats_t *stats); /* may be NULL */
    void (*free)(gpu_backend_t *be);
    /* Seconds of device time the forwards took since init, timed with events recorded on the
     * device before each forward's input copy and after its logits copy (so host work between
     * forwards is left out). NULL where there is no device clock (cpu). */
    double (*device_seconds)(gpu_backend_t *be);
    /* Forward in two halves, so the host can prepare and score batches while the device
     * works: submit checks the batch and queues its work (inputs copied: the caller may reuse
     * its arrays at once); collect waits for the oldest batch submitted and copies its logits
     * (n_seqs, num_labels) out. At most two batches are in flight (a third submit, or collect
     * or forward out of turn, is refused with COMMON_BUG). forward = submit + collect and needs
     * none in flight. */
    common_status_t (*submit)(gpu_backend_t *be, const gpu_batch_t *batch, common_err_t *err);
    common_status_t (*collect)(gpu_backend_t *be, float *logits, common_err_t *err);
    /* What the instance runs (see gpu_backend_props_t). */
    void (*get_props)(const gpu_backend_t *be, gpu_backend_props_t *props);
    /* The precisions it runs, its default first, NULL-ended ({"fp16", "bf16", NULL}): init
     * refuses any other. */
    const char *const *precisions;
    /* The board's energy over a stretch of work (NVML): energy_start opens a window (0, or -1
     * where there is no meter); energy_stop closes it and returns its joules (-1 unknown),
     * with *seconds of wall time and *sm_mhz the median SM clock (-1 unknown). NULL where
     * there is no device (cpu). */
    int (*energy_start)(gpu_backend_t *be);
    double (*energy_stop)(gpu_backend_t *be, double *seconds, int *sm_mhz);
    /* The matrix unit's ceiling for the model's four layer GEMMs at M = tokens in precision,
     * FLOP-weighted, measured with the vendor's library on random data: TFLOP/s, or -1 with
     * why in err. NULL where there is no such measure (cpu). */
    double (*gemm_ceiling)(gpu_backend_t *be, int tokens, const char *precision, common_err_t *err);
    /* Which kernels run precision (NULL: the default) on this machine, in words for start-up
     * lines and plan-memory (the cpu backend picks them by CPU features, and says why not the
     * fastest), written to buf. Needs no instance. NULL where there is nothing to add. */
    void (*kernels)(const char *precision, char *buf, size_t n);
    /* 1 when the backend runs op (of graph g) at op->prec, 0 when it lacks it: init refuses a
     * model whose graph has such an op, naming it (gpu_graph_check). NULL: runs every op. */
    int (*supports_op)(const gpu_graph_t *g, const gpu_op_t *op);
    /* init on a graph given whole instead of the one m's family builds (ggml's graph
     * compute): the instance owns g from the call on, freed with it or on failure; m gives
     * the config and outlives the instance. The parity test (tests/test_graph_ops.c) runs
     * one op at a time this way. NULL: the backend runs only its families' graphs. */
    common_status_t (*init_graph)(const gpu_model_t *m, gpu_graph_t *g,
                                  const gpu_backend_opts_t *opts, gpu_backend_t **out,
                                  common_err_t *err);
    /* After a forward, the first rows of tensor t (of the instance's graph) to host fp32 out
     * (rows, cols). COMMON_OK, or err's code. NULL where init_graph is. */
    common_status_t (*read_tensor)(gpu_backend_t *be, int t, size_t rows, float *out,
                                   common_err_t *err);
    /* Per-op timing, asked with no batch in flight: on 1 clears the totals and times every op
     * of the forwards that follow; on 0 stops and writes the totals into *out (may be NULL),
     * gpu_op_times_group's rows. Timing costs a little: an event after each op (cuda), two
     * clock reads per op and thread (cpu). COMMON_OK, or err's code. NULL where a backend cannot.
     */
    common_status_t (*profile_ops)(gpu_backend_t *be, int on, gpu_op_times_t *out,
                                   common_err_t *err);
    /* The devices an instance may be opened on (opts.device 0 .. count - 1; 0: none usable),
     * for `reclass run --devices all`. NULL: one device, the host (cpu). */
    int (*device_count)(void);
} gpu_backend_ops_t;

/* The rows of *out from per-op totals of g's batch ops (ms, runs: n_ops each; ops never run
 * left out), clock as the backend words it (gpu_op_times_t). */
void gpu_op_times_group(const gpu_graph_t *g, const double *ms, const long *runs, const char *clock,
                        gpu_op_times_t *out);

/* The one rule for sequences per batch: max_seqs when positive, else token_budget / 2 (the
 * shortest sequence, [CLS] [SEP], is 2 tokens), at least 1. */
int gpu_backend_max_seqs(int token_budget, int max_seqs);

/* The batch capacity a device backend allocates for: opts' token budget (positive), max_len
 * (0: the model's positions; never past them) and max_seqs (gpu_backend_max_seqs), checked
 * against cfg's geometry. COMMON_OK, or COMMON_USAGE with err naming the bad value. */
common_status_t gpu_backend_settle(const gpu_model_config_t *cfg, const gpu_backend_opts_t *opts,
                                   int *token_budget, int *max_len, int *max_seqs,
                                   common_err_t *err);

/* precision (NULL: the default) as ops names it: its entry of ops->precisions, or NULL when
 * ops does not run it. */
const char *gpu_backend_precision(const gpu_backend_ops_t *ops, const char *precision);

/* The batches a backend holds between submit and collect (at most two, oldest first): each
 * backend keeps its staging per slot, this keeps the order. Zeroed = none in flight. */
typedef struct {
    int seqs[2]; /* n_seqs of the batch in each slot */
    int n, head; /* batches in flight; the oldest's slot */
} gpu_flight_t;

/* The slot a new batch goes to, or -1 with err set (COMMON_BUG) when two are in flight already. */
int gpu_flight_slot(const gpu_flight_t *f, common_err_t *err);
/* Records the batch just queued in slot. */
void gpu_flight_push(gpu_flight_t *f, int slot, int n_seqs);
/* Takes the oldest batch off: its slot (and *n_seqs), or -1 with err set when none is (COMMON_BUG).
 */
int gpu_flight_pop(gpu_flight_t *f, int *n_seqs, common_err_t *err);
/* forward's precondition: COMMON_OK, or COMMON_BUG with err set while batches are in flight. */
common_status_t gpu_flight_idle(const gpu_flight_t *f, common_err_t *err);

/* "cpu" or "cuda". NULL when unknown or not built into this binary (err says which). */
const gpu_backend_ops_t *gpu_backend_find(const char *name, common_err_t *err);

/* The CUDA libraries this binary runs with, for `reclass version`: e.g. "runtime 13.0,
 * cublas 13.0.2, driver 12.9" (driver "none" without an NVIDIA driver), or "none" when built
 * without CUDA. Needs no GPU. The text is the calling thread's, valid until its next call. */
const char *gpu_backend_cuda_versions(void);

/* A backend's device memory, planned without a device (`reclass plan-memory`). */
#define GPU_MEM_PLAN_SLICES 32
typedef struct {
    const char *name;  /* component, as printed */
    const char *shape; /* human shape, as printed */
    size_t bytes;
    int weights; /* 1: part of the weights, 0: of the activation arena */
} gpu_mem_slice_t;
typedef struct {
    const char *precision;
    int token_budget, max_len, max_seqs; /* as the backend would settle them */
    int n;                               /* slices, weights first */
    gpu_mem_slice_t slice[GPU_MEM_PLAN_SLICES];
    size_t weights_bytes, arena_bytes, total_bytes; /* total: the one allocation */
} gpu_mem_plan_t;

/* The memory plan of backend `name` for a model of config cfg with opts. COMMON_OK, or err's code
 * (a backend that plans no device memory, or options it refuses). */
common_status_t gpu_backend_plan_memory(const char *name, const gpu_model_config_t *cfg,
                                        const gpu_backend_opts_t *opts, gpu_mem_plan_t *plan,
                                        common_err_t *err);

/* Validates a batch against the opts it must fit; shared by every backend. COMMON_OK = fits,
 * else COMMON_USAGE with err. */
common_status_t gpu_batch_check(const gpu_batch_t *batch, const gpu_model_config_t *cfg,
                                const gpu_backend_opts_t *opts, common_err_t *err);

#ifdef __cplusplus
}
#endif
#endif
