/* The CPU backend's entry points beyond the backend table "cpu" (gpu/backend.h). */
#ifndef RECLASS_GPU_CPU_BACKEND_H
#define RECLASS_GPU_CPU_BACKEND_H

#include "gpu/backend.h"

/* Makes OpenBLAS use the best sgemm kernel this CPU runs. OpenBLAS 0.3.21 (Debian 12) does
 * not recognise recent Xeons (e.g. family 6 model 207) and falls back to its SSE3
 * "Prescott" kernels, 3-4x slower; unless OPENBLAS_CORETYPE is set, this re-selects
 * SkylakeX (AVX-512) or Haswell (AVX2) by the CPU's features. Idempotent and thread-safe;
 * must run before BLAS is in use on another thread and before other threads read the
 * environment (the switch goes through setenv): the CPU backend calls it from init, which
 * every command runs before it starts threads. */
void gpu_cpu_blas_init(void);

/* The OpenBLAS kernel family in use ("SkylakeX", "Haswell", ...), or "unknown". */
const char *gpu_cpu_blas_core(void);

#endif
