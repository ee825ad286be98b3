/* The CPU backend's entry points beyond the backend table "cpu" (gpu/backend.h). */
#ifndef RECLASS_GPU_CPU_BACKEND_H
#define RECLASS_GPU_CPU_BACKEND_H

#include "gpu/backend.h"

/* The "cpu" backend with every projection through OpenBLAS, as CPUs without AVX-512 (or
 * geometries the packed GEMM cannot tile) run it everywhere: for tests that compare the two
 * GEMM paths on one machine. */
extern const gpu_backend_ops_t gpu_cpu_blas_backend_ops;

#endif
