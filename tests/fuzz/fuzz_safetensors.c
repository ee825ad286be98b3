/* Fuzz target: a whole safetensors file through the reader (gpu_st_open_mem: the same header
 * parsing and validation as gpu_st_open, without a file). Whatever it accepts must be safe
 * to read: every tensor is converted, so a tensor reaching past the buffer shows up as an
 * out-of-bounds read. */
#include <stdint.h>
#include <string.h>

#include "gpu/model/safetensors.h"
#include "tests/fuzz/fuzz_util.h"

#define FUZZ_ST_MAX_NUMEL (1u << 20) /* converting more says nothing more */

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    gpu_st_file_t *f;
    common_err_t err;
    if (gpu_st_open_mem(data, size, "model.safetensors", &f, &err) != 0) {
        FUZZ_CHECK(f == NULL && err.message[0]);
        return 0;
    }
    int n = gpu_st_count(f);
    FUZZ_CHECK(n >= 0);
    for (int i = 0; i < n; i++) {
        const gpu_st_tensor_t *t = gpu_st_at(f, i);
        FUZZ_CHECK(t && t->name && gpu_st_find(f, t->name) == t);
        FUZZ_CHECK(t->ndim >= 0 && t->ndim <= GPU_ST_MAX_DIMS);
        size_t numel = 1;
        for (int d = 0; d < t->ndim; d++)
            numel *= (size_t)t->shape[d];
        FUZZ_CHECK(numel == t->numel);
        FUZZ_CHECK(t->offset + t->nbytes <= size);
        if (t->numel > FUZZ_ST_MAX_NUMEL) continue;
        float *dst = malloc(t->numel ? t->numel * sizeof(float) : 1);
        FUZZ_CHECK(dst != NULL);
        gpu_st_read_f32(f, t, dst);
        free(dst);
    }
    FUZZ_CHECK(gpu_st_at(f, n) == NULL && gpu_st_at(f, -1) == NULL);
    gpu_st_close(f);
    return 0;
}
