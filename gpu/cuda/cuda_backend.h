/* Plain C entry points of the CUDA backend beyond the backend table (gpu/backend.h).
 * Safe to include anywhere: no CUDA types. Only defined when RECLASS_HAVE_CUDA. */
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
 * (m, n, k) = (tokens, hidden-ish) shapes given; precision "fp16" or "bf16". -1 on error. */
double gpu_cuda_gemm_tflops(int device, int m, int n, int k, const char *precision);

/* The layer-GEMM ceiling: gpu_cuda_gemm_tflops on a BERT layer's four projections (QKV,
 * attention-out, FF1, FF2 for hidden H and intermediate I) at M = m, weighted by their FLOPs.
 * shape_tflops (may be NULL) gets the four rates in that order. -1 on error. */
double gpu_cuda_layer_gemm_ceiling(int device, int m, int hidden, int intermediate,
                                   const char *precision, double shape_tflops[4]);

/* Introspection of one "cuda" backend instance (the bench and the GPU tests use them). */

/* An allocation attempt through the backend's allocator: 0 = it succeeded, -1 = refused (it
 * refuses every attempt after init). */
int gpu_cuda_backend_try_alloc(gpu_backend_t *be, size_t bytes);
/* cuBLASLt heuristic queries made so far (stays small over a long run). */
long gpu_cuda_backend_heuristic_queries(gpu_backend_t *be);
/* The init sweep's GEMM autotuning: shape buckets tuned, how many picked another algorithm
 * than the heuristic's first, and the summed single-run ms of the first and of the picks. */
void gpu_cuda_backend_tune_stats(gpu_backend_t *be, long *tuned, long *changed, double *ms_top1,
                                 double *ms_best);

/* Per-phase GPU time of forwards (bench breakdown), from events between phases. on = 1
 * starts (resets) profiling, 0 stops, -1 leaves it; ms (GPU_CUDA_PROF_N) gets the totals so
 * far in milliseconds when not NULL. Profiling adds an event per phase: time apart. */
enum {
    GPU_CUDA_PROF_EMBED,     /* input copy + embedding LayerNorm */
    GPU_CUDA_PROF_GEMM,      /* cuBLASLt projections (bias/GELU epilogues included) */
    GPU_CUDA_PROF_ATTENTION, /* fused attention */
    GPU_CUDA_PROF_NORM,      /* residual + LayerNorm, [CLS] gathers */
    GPU_CUDA_PROF_HEAD,      /* pooler + classifier + logits copy */
    GPU_CUDA_PROF_N
};
int gpu_cuda_backend_profile(gpu_backend_t *be, int on, double *ms);

#ifdef __cplusplus
}
#endif
#endif
