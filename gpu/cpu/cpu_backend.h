/* The CPU backend's entry points beyond the backend table "cpu" (gpu/backend.h). */
#ifndef RECLASS_GPU_CPU_BACKEND_H
#define RECLASS_GPU_CPU_BACKEND_H

#include "gpu/backend.h"

/* The "cpu" backend with every projection through OpenBLAS, as CPUs without AVX-512 (or
 * geometries the packed GEMM cannot tile) run it everywhere: for tests that compare the two
 * GEMM paths on one machine. */
extern const gpu_backend_ops_t gpu_cpu_blas_backend_ops;

/* Which kernels run the projections at precision ("fp32", "bf16"; NULL = fp32) on this CPU,
 * in words for start-up lines and plan-memory, e.g. "bf16 projections on amx-bf16 tiles, fp32
 * accumulation"; where bf16 is not on AMX, why not. Written to buf (n bytes). */
void gpu_cpu_kernel_desc(const char *precision, char *buf, size_t n);

#endif
