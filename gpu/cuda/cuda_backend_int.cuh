// The CUDA backend's instance and the helpers its .cu files share (cuda_backend.cu: the
// table's glue; cuda_graph_backend.cu: the graph executor under it; cuda_backend_host.cu:
// device queries, the warm-up sweep, introspection).
// Included by those .cu files only.
#ifndef RECLASS_GPU_CUDA_BACKEND_INT_CUH
#define RECLASS_GPU_CUDA_BACKEND_INT_CUH

#include <cuda_runtime.h>

#include "gpu/backend.h"
#include "gpu/cuda/cuda_backend.h"
#include "gpu/cuda/cuda_gemm.cuh"
extern "C" {
#include "gpu/cuda/nvml.h" /* plain C, without its own extern "C" */
}

#define BE_TUNE_CANDIDATES 8 /* cuBLASLt candidates timed per GEMM shape bucket at init */

struct gpu_backend {
    const gpu_model_t *model; // borrowed, outlives the backend
    gpu_backend_opts_t opts;  // copy; opts.precision points at prec
    char prec[8];
    int bf16;
    int token_budget, max_len, max_seqs; // the batch capacity (gpu_backend_settle)
    int device;
    cudaStream_t stream; // every batch's work, in order
    int att_wgmma;       // attention on wgmma (compute capability 9.0), else mma.sync
    int sms;             // the device's SMs (sizes the LayerNorm grid)
    // Two batches may be in flight (submit, then collect the older): each slot has its own
    // pinned staging and events, so the host fills one while the device works on the other.
    cudaEvent_t t_first[2], t_last[2]; // around each batch's device work: device_s
    double device_s;                   // summed forward device time since init (device_seconds)
    gpu_flight_t flight;               // batches submitted, not collected, and their slots
    char *dev;                         // the one device allocation (the graph's layout)
    int32_t *h_inputs[2];              // pinned staging of the graph's inputs, per slot
    float *h_logits[2];                // pinned (max_seqs, L), per slot
    int init_done;                     // set once the arena exists: later allocations are refused
    long allocs_after_init;            // attempts refused after init (a test proves it stays 0)
    // Per-op timing (the table's profile_ops), per slot: an event before the batch's first op
    // and one after each step (an op, or two run fused), and the op each step began with.
    // Made by the first profile_ops(1): host-side objects, no device memory.
    int prof;
    int n_ev[2];
    cudaEvent_t *ev; // (2, n_ops + 1)
    int *ev_op;      // (2, n_ops + 1)
    double *op_ms;   // (n_ops) summed device milliseconds of each op since profile_ops(1)
    long *op_runs;   // (n_ops)
    // The board's energy meter (NVML), opened by the first energy_start; the window it has
    // open until energy_stop, or NULL.
    gpu_nvml_t *nv;
    gpu_nvml_window_t *win;
    // The model's op list and its executor (cuda_graph_backend.cu).
    gpu_graph_t *gg;
    struct cuda_graph *graph;
};

// The graph path (cuda_graph_backend.cu).
common_status_t cuda_be_graph_init(struct gpu_backend *be, common_err_t *err);
common_status_t cuda_be_graph_submit(struct gpu_backend *be, const gpu_batch_t *b, int slot,
                                     common_err_t *err);
void cuda_be_graph_free(struct gpu_backend *be);
// GEMM candidates timed per new shape (the warm-up sweep's autotuning), 0 off.
void cuda_be_graph_tune(struct gpu_backend *be, int candidates);
size_t cuda_be_graph_weights_bytes(const struct gpu_backend *be);
size_t cuda_be_graph_arena_bytes(const struct gpu_backend *be);
// The first rows of graph tensor t after a forward, as fp32 (the table's read_tensor).
extern "C" common_status_t cuda_be_read_tensor(gpu_backend_t *be, int t, size_t rows, float *out,
                                               common_err_t *err);
// The table's profile_ops and the per-op totals of a collected slot (cuda_graph_backend.cu).
common_status_t cuda_be_profile_ops(gpu_backend_t *be, int on, gpu_op_times_t *out,
                                    common_err_t *err);
void cuda_be_profile_collect(struct gpu_backend *be, int slot);
void cuda_be_profile_free(struct gpu_backend *be);
// The warm-up sweep at init (cuda_backend_host.cu), through forward.
common_status_t cuda_be_warmup(struct gpu_backend *be, common_err_t *err);

// The backend table's energy_start / energy_stop / gemm_ceiling (cuda_backend_host.cu).
int cuda_be_energy_start(gpu_backend_t *be);
double cuda_be_energy_stop(gpu_backend_t *be, double *seconds, int *sm_mhz);
double cuda_be_gemm_ceiling(gpu_backend_t *be, int tokens, const char *precision,
                            common_err_t *err);

// The only path to device memory. After init it refuses and counts the attempt.
static inline cudaError_t be_device_alloc(struct gpu_backend *be, void **p, size_t bytes) {
    if (be->init_done) {
        be->allocs_after_init++;
        return cudaErrorMemoryAllocation;
    }
    return cudaMalloc(p, bytes);
}

#endif
