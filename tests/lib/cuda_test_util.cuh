// Helpers of the CUDA test entry points (tests/lib/cuda_test_*.cu): uploads in the storage
// type, NaN-poisoned outputs, downloads as fp32. Each allocates (tests only).
#ifndef RECLASS_TESTS_CUDA_TEST_UTIL_CUH
#define RECLASS_TESTS_CUDA_TEST_UTIL_CUH

#include <cuda_runtime.h>
#include <stdio.h>
#include <string.h>

#include "gpu/cuda/cuda_common.cuh"

static inline int is_bf16(const char *p) {
    return p && strcmp(p, "bf16") == 0;
}

#define TA_CHECK(call)                                                                             \
    do {                                                                                           \
        cudaError_t e_ = (call);                                                                   \
        if (e_ != cudaSuccess) {                                                                   \
            fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(e_));  \
            rc = -1;                                                                               \
            goto done;                                                                             \
        }                                                                                          \
    } while (0)

// Device copy of a host fp32 array in storage type T (n elements); NULL on failure.
template <typename T> static T *ta_upload(const float *h, size_t n) {
    float *tmp = NULL;
    T *d = NULL;
    if (cudaMalloc(&tmp, n * sizeof(float) + 16) != cudaSuccess) return NULL;
    if (cudaMalloc(&d, n * sizeof(T) + 16) != cudaSuccess ||
        cudaMemcpy(tmp, h, n * sizeof(float), cudaMemcpyHostToDevice) != cudaSuccess ||
        cuda_convert<T>(tmp, n, d, 0) != cudaSuccess || cudaDeviceSynchronize() != cudaSuccess) {
        cudaFree(d);
        d = NULL;
    }
    cudaFree(tmp);
    return d;
}
template <typename T> static int ta_download(const T *d, size_t n, float *h) {
    float *tmp = NULL;
    int rc = -1;
    if (cudaMalloc(&tmp, n * sizeof(float) + 16) == cudaSuccess &&
        cuda_to_float<T>(d, n, tmp, 0) == cudaSuccess &&
        cudaMemcpy(h, tmp, n * sizeof(float), cudaMemcpyDeviceToHost) == cudaSuccess)
        rc = 0;
    cudaFree(tmp);
    return rc;
}
// Storage-type buffer of n elements filled with NaN (0xFFFF is NaN in fp16 and bf16).
template <typename T> static T *ta_poisoned(size_t n) {
    T *d = NULL;
    if (cudaMalloc(&d, n * sizeof(T) + 16) != cudaSuccess) return NULL;
    cudaMemset(d, 0xFF, n * sizeof(T));
    return d;
}
static inline void *ta_dup(const void *h, size_t bytes) {
    void *d = NULL;
    if (cudaMalloc(&d, bytes + 16) != cudaSuccess) return NULL;
    if (cudaMemcpy(d, h, bytes, cudaMemcpyHostToDevice) != cudaSuccess) {
        cudaFree(d);
        return NULL;
    }
    return d;
}

#endif
