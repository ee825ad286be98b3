/* Plain C entry points of the CUDA backend beyond the backend table (gpu/backend.h).
 * Safe to include anywhere: no CUDA types. Only defined when RECLASS_HAVE_CUDA, but for
 * gpu_cuda_graph_plan (every build). */
#ifndef RECLASS_GPU_CUDA_BACKEND_H
#define RECLASS_GPU_CUDA_BACKEND_H

#include <stddef.h>

#include "gpu/backend.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Number of usable CUDA devices (0 when no driver/GPU: tests then skip). */
int gpu_cuda_device_count(void);

/* The device's PCI bus id ("0000:3B:00.0") into buf (gpu_nvml_init finds the same board by
 * it); 0, or -1 when there is no such device. */
int gpu_cuda_pci_bus_id(int device, char *buf, int len);

/* Measures the dense GEMM ceiling in TFLOP/s with cuBLAS on random data:
 * (m, n, k) = (tokens, hidden-ish) shapes given; precision "fp16" or "bf16". -1 with err on
 * error. */
double gpu_cuda_gemm_tflops(int device, int m, int n, int k, const char *precision,
                            common_err_t *err);

/* The layer-GEMM ceiling: gpu_cuda_gemm_tflops on a BERT layer's four projections (QKV,
 * attention-out, FF1, FF2 for hidden H and intermediate I) at M = m, weighted by their FLOPs.
 * shape_tflops (may be NULL) gets the four rates in that order. -1 with err on error. */
double gpu_cuda_layer_gemm_ceiling(int device, int m, int hidden, int intermediate,
                                   const char *precision, double shape_tflops[4],
                                   common_err_t *err);

/* The backend's device memory for a model of config cfg, without a device or weights: the
 * graph built, every op checked against the CUDA launchers (err names the first one
 * missing), the one allocation laid out (gpu/cuda/layout.c, defined in every build). max_len
 * 0: cfg's max_pos. COMMON_OK, or err's code. */
common_status_t gpu_cuda_graph_plan(const gpu_model_config_t *cfg, const char *precision,
                                    int token_budget, int max_seqs, int max_len,
                                    size_t *weights_bytes, size_t *total_bytes, common_err_t *err);

/* The phases of a forward that tests time apart (tests/lib/cuda_test_api.h), summed from the
 * table's per-op times (profile_ops). */
enum {
    GPU_CUDA_PROF_EMBED,     /* embedding LayerNorm */
    GPU_CUDA_PROF_GEMM,      /* cuBLASLt projections (bias/GELU epilogues included) */
    GPU_CUDA_PROF_ATTENTION, /* fused attention (RoPE's pass included) */
    GPU_CUDA_PROF_NORM,      /* residual + LayerNorm, [CLS] gathers, pooling */
    GPU_CUDA_PROF_HEAD,      /* pooler + classifier */
    GPU_CUDA_PROF_N
};

#ifdef __cplusplus
}
#endif
#endif
