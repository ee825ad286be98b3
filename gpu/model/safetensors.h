/* A reader for the safetensors format: an 8-byte little-endian header length, a JSON header
 * {name: {dtype, shape, data_offsets: [begin, end]}, "__metadata__": {...}}, then the data
 * section the offsets index into. The file is mapped once; every tensor is validated on
 * open (dtype known, offsets inside the data section, size = numel * dtype size, no two
 * tensors overlapping), so later reads cannot run off the map. */
#ifndef RECLASS_GPU_SAFETENSORS_H
#define RECLASS_GPU_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

#include "common/err.h"

#ifdef __cplusplus
extern "C" {
#endif

/* F32, F16 and BF16 convert to fp32. The other dtypes of the format (integers, F64, F8)
 * are validated like any tensor, so a checkpoint carrying e.g. an I64 position_ids buffer
 * opens, but cannot be read as weights; an unknown dtype string refuses the file. */
typedef enum {
    GPU_ST_F32,
    GPU_ST_F16,
    GPU_ST_BF16,
    GPU_ST_OTHER /* known to the format, not convertible: see dtype_name */
} gpu_st_dtype_t;

#define GPU_ST_MAX_DIMS 8

typedef struct {
    char *name; /* owned by the file */
    gpu_st_dtype_t dtype;
    char dtype_name[8]; /* as in the header: "F16", "I64", ... */
    int ndim;
    int64_t shape[GPU_ST_MAX_DIMS];
    size_t numel;
    size_t offset; /* byte offset inside the data section */
    size_t nbytes;
} gpu_st_tensor_t;

typedef struct gpu_st_file gpu_st_file_t; /* opaque */

/* Maps and validates path. On failure *out is NULL and err holds one line that starts with
 * the path and says what is wrong (COMMON_USAGE; COMMON_FATAL out of memory). */
common_status_t gpu_st_open(const char *path, gpu_st_file_t **out, common_err_t *err);

/* gpu_st_open on a file's len bytes already in memory at buf, which must stay unchanged until
 * gpu_st_close; name stands for the path in messages. */
common_status_t gpu_st_open_mem(const void *buf, size_t len, const char *name, gpu_st_file_t **out,
                                common_err_t *err);

/* The tensor called name, or NULL. */
const gpu_st_tensor_t *gpu_st_find(const gpu_st_file_t *f, const char *name);

int gpu_st_count(const gpu_st_file_t *f);
const gpu_st_tensor_t *gpu_st_at(const gpu_st_file_t *f, int i);
const char *gpu_st_path(const gpu_st_file_t *f);

/* 1 when gpu_st_read_f32 can convert the tensor (F32, F16, BF16). */
int gpu_st_is_float(const gpu_st_tensor_t *t);

/* Converts the tensor's numel elements to fp32 into dst (numel floats); the tensor must be
 * gpu_st_is_float (else dst is zero-filled). */
void gpu_st_read_f32(const gpu_st_file_t *f, const gpu_st_tensor_t *t, float *dst);

const char *gpu_st_dtype_name(gpu_st_dtype_t d);

/* Exact conversions of one IEEE half / bfloat16 to float (subnormals, inf and NaN kept). */
float gpu_st_f16_to_f32(uint16_t h);
float gpu_st_bf16_to_f32(uint16_t h);

void gpu_st_close(gpu_st_file_t *f);

#ifdef __cplusplus
}
#endif
#endif
