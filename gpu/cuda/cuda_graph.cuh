// The CUDA backend's executor of the encoder graph (gpu/graph.h): every tensor of the graph
// gets a storage type and a place in the one device allocation, the prelude runs once at
// init, and a batch runs the op list, one launcher per op kind (cuda_graph_ops.cu). The
// layout is computed from the graph's tensor table and the scratch its ops need
// (cuda_graph_plan.cu), once: nothing is allocated after init.
#ifndef RECLASS_GPU_CUDA_GRAPH_CUH
#define RECLASS_GPU_CUDA_GRAPH_CUH

#include <cuda_runtime.h>
#include <stddef.h>
#include <stdint.h>

#include "gpu/cuda/cuda_fp8.cuh"
#include "gpu/cuda/cuda_gemm.cuh"
#include "gpu/graph.h"

// Storage types of the graph's tensors on the device.
enum { CG_F32, CG_F16, CG_BF16, CG_E4M3 };

typedef struct {
    int dt;          // CG_*: weights read by an FP8 linear are CG_E4M3 codes
    size_t off;      // bytes from the allocation's start
    size_t bytes;    // 0 for a tensor no op touches
    size_t scale_at; // CG_E4M3: offset of its per-row scales (rows floats)
} cg_tensor_t;

typedef struct cuda_graph {
    const gpu_graph_t *g; // borrowed from the backend, which owns it
    cg_tensor_t *t;       // (g->n_tensors)
    int t16;              // CG_F16 or CG_BF16: the 16-bit storage of this instance
    int token_budget, max_seqs, max_len;
    // The allocation: the weights first, then consts, activations, logits, then scratch.
    size_t weights_bytes, total_bytes;
    size_t o_in;     // int32 inputs: ids (ta), positions (ta), cu_seqlens (max_seqs + 1)
    size_t in_bytes; // of o_in; ta = token_budget rounded up to 4
    size_t o_rrow;   // int32 (2 max_len - 1): DeBERTa's relative row of i - j, at i - j + mid
    size_t o_zero;   // zero fp32/16-bit row (zero_bytes): absent biases and norm betas
    size_t zero_bytes;
    size_t o_f32; // fp32 (f32_floats): an fp32 op's 16-bit input, converted; mean rows
    size_t f32_floats;
    size_t o_f32o; // fp32 (f32o_floats): fp32 results bound for a 16-bit tensor
    size_t f32o_floats;
    size_t o_x16;     // 16-bit (x16_elems) + (y16_elems): a 16-bit linear's fp32 input rounded,
    size_t x16_elems; // and its output bound for fp32 rows (bf16's residual stream)
    size_t y16_elems;
    size_t o_att; // 16-bit (tokens, att_cols): first-token attention's full-kernel rows
    size_t att_cols;
    size_t o_rel;      // 16-bit 2 x (tokens, heads, R): c2p and p2c products of one layer
    size_t rel_elems;  // of each
    size_t o_xq, o_xs; // FP8 activations: E4M3 (tokens, xq_cols), per-row scales (tokens)
    size_t xq_cols;
    size_t o_ws, ws_bytes; // cuBLASLt / cuBLAS workspace
    int rrow_mid;
    char *dev; // the backend's allocation (total_bytes)
    cudaStream_t st;
    int sms;
    int att_wgmma;            // full attention on wgmma where the device runs it
    cuda_gemm_t gemm, gemm32; // 16-bit and fp32 projections
    cuda_fp8_gemm_t gemm8;    // FP8 projections (has_fp8)
    int has_fp8;
    const gpu_op_t *xq_for; // the FP8 linear whose input codes the LayerNorm before it wrote
    void *blas;             // cublasHandle_t: the c2p / p2c strided-batched GEMMs
} cuda_graph_t;

// 1 when the CUDA executor runs op of g (the backend table's supports_op).
extern "C" int cuda_graph_supports_op(const gpu_graph_t *g, const gpu_op_t *op);

// Storage types and offsets of every tensor and scratch slice for a batch capacity; no
// device work. t16: CG_F16 or CG_BF16. 0, or -1 with err.
int cuda_graph_layout(cuda_graph_t *cg, const gpu_graph_t *g, int t16, int token_budget,
                      int max_seqs, int max_len, char *err, size_t errlen);
// Uploads the weights (converted, FP8 weights quantized as gpu/model/fp8.h does), the zero
// row and the relative-row table into dev (total_bytes), sets up the GEMM handles on the
// workspace slice and runs the prelude. 0, or -1 with err.
int cuda_graph_setup(cuda_graph_t *cg, char *dev, cudaStream_t st, int sms, char *err,
                     size_t errlen);
// Runs the batch ops for the inputs already at o_in (n_tokens, n_seqs), logits left in the
// logits tensor. Queued on cg->st. 0, or -1 with err.
int cuda_graph_run(cuda_graph_t *cg, int n_tokens, int n_seqs, int max_len, char *err,
                   size_t errlen);
// Runs one op (cuda_graph_ops.cu) with rows by its tensors' kinds.
int cuda_graph_op(cuda_graph_t *cg, const gpu_op_t *op, int n_tokens, int n_seqs, int max_len,
                  char *err, size_t errlen);
void cuda_graph_free(cuda_graph_t *cg);

static inline char *cg_ptr(const cuda_graph_t *cg, int t) {
    return cg->dev + cg->t[t].off;
}
static inline size_t cg_dt_bytes(int dt) {
    return dt == CG_F32 ? 4 : dt == CG_E4M3 ? 1 : 2;
}

#endif
