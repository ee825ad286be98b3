/* The "cpu" backend with every projection through OpenBLAS, as CPUs without AVX2 (or
 * geometries the packed GEMM cannot tile) run it everywhere: for tests that compare the two
 * GEMM paths on one machine. */
#ifndef RECLASS_TESTS_LIB_CPU_BLAS_BACKEND_H
#define RECLASS_TESTS_LIB_CPU_BLAS_BACKEND_H

#include "gpu/backend.h"

const gpu_backend_ops_t *test_cpu_blas_backend(void);

#endif
