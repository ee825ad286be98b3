// The CUDA backend's executor of the encoder graph (gpu/graph.h): every tensor of the graph
// gets a storage type and a place in the one device allocation, the prelude runs once at
// init, and a batch runs the op list, one launcher per op kind (cuda_graph_ops.cu). The
// layout is computed from the graph's tensor table and the scratch its ops need
// (gpu/cuda/layout.c), once: nothing is allocated after init.
#ifndef RECLASS_GPU_CUDA_GRAPH_CUH
#define RECLASS_GPU_CUDA_GRAPH_CUH

#include <cuda_runtime.h>
#include <stddef.h>
#include <stdint.h>

#include "gpu/cuda/cuda_fp8.cuh"
#include "gpu/cuda/cuda_gemm.cuh"
#include "gpu/cuda/layout.h"
#include "gpu/graph.h"

// The executor's state: the layout (gpu/cuda/layout.h, computed without a device) and what
// lives on the device.
typedef struct cuda_graph : cg_layout_t {
    int x16_of; // the tensor whose rows x16 holds rounded (written by a conversion or a fused
                // residual + LayerNorm; -1 none): the linears that read it skip converting
    char *dev;  // the backend's allocation (total_bytes)
    cudaStream_t st;
    int sms;
    int att_wgmma;            // full attention on wgmma where the device runs it
    cuda_gemm_t gemm, gemm32; // 16-bit and fp32 projections
    cuda_fp8_gemm_t gemm8;    // FP8 projections (has_fp8)
    int has_fp8;
    const gpu_op_t *xq_for; // the FP8 linear whose input codes the op before it wrote, at xq_at
    uint8_t *xq_at;         // o_xq (the LayerNorm's), or the producer's output rows (a static
                            // input: cuda_fp8_gemm_run_q writes its codes into its own tensor)
    cuda_rel_gemm_t rel;    // the c2p / p2c batched matmuls (has_rel)
    int has_rel;
} cuda_graph_t;

// Uploads the weights (converted, FP8 weights quantized as gpu/model/fp8.h does), the zero
// row and the relative-row table into dev (total_bytes), sets up the GEMM handles on the
// workspace slice and runs the prelude. COMMON_OK, or err's code.
common_status_t cuda_graph_setup(cuda_graph_t *cg, char *dev, cudaStream_t st, int sms,
                                 common_err_t *err);
// Runs batch op i (and the op after it where the two run fused: a bf16 residual projection
// and the LayerNorm of its sum) for the inputs at o_in (n_tokens, n_seqs), queued on cg->st.
// Set x16_of to -1 before a batch's first op. The next op's index, or -1 with err.
int cuda_graph_step(cuda_graph_t *cg, int i, int n_tokens, int n_seqs, int max_len,
                    common_err_t *err);
// Runs one op (cuda_graph_ops.cu) with rows by its tensors' kinds.
common_status_t cuda_graph_op(cuda_graph_t *cg, const gpu_op_t *op, int n_tokens, int n_seqs,
                              int max_len, common_err_t *err);
void cuda_graph_free(cuda_graph_t *cg);

static inline char *cg_ptr(const cuda_graph_t *cg, int t) {
    return cg->dev + cg->t[t].off;
}

#endif
