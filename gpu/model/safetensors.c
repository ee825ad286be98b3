#include "gpu/model/safetensors.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

struct gpu_st_file {
    char *path;
    const uint8_t *map; /* whole file, read-only; (map_len) bytes */
    size_t map_len;
    int mapped;          /* 1: map is ours to munmap; 0: the caller's buffer (gpu_st_open_mem) */
    const uint8_t *data; /* data section: map + 8 + header length */
    size_t data_len;
    gpu_st_tensor_t *t; /* (n) */
    int n;
};

const char *gpu_st_dtype_name(gpu_st_dtype_t d) {
    switch (d) {
    case GPU_ST_F32:
        return "F32";
    case GPU_ST_F16:
        return "F16";
    case GPU_ST_BF16:
        return "BF16";
    case GPU_ST_OTHER:
        return "other";
    }
    return "?";
}

/* Every dtype of the safetensors format and its element size in bytes. */
static const struct {
    const char *name;
    gpu_st_dtype_t dtype;
    size_t size;
} dtypes[] = {
    {"F32", GPU_ST_F32, 4},    {"F16", GPU_ST_F16, 2},       {"BF16", GPU_ST_BF16, 2},
    {"F64", GPU_ST_OTHER, 8},  {"I64", GPU_ST_OTHER, 8},     {"U64", GPU_ST_OTHER, 8},
    {"I32", GPU_ST_OTHER, 4},  {"U32", GPU_ST_OTHER, 4},     {"I16", GPU_ST_OTHER, 2},
    {"U16", GPU_ST_OTHER, 2},  {"I8", GPU_ST_OTHER, 1},      {"U8", GPU_ST_OTHER, 1},
    {"BOOL", GPU_ST_OTHER, 1}, {"F8_E4M3", GPU_ST_OTHER, 1}, {"F8_E5M2", GPU_ST_OTHER, 1},
};

int gpu_st_is_float(const gpu_st_tensor_t *t) {
    return t->dtype != GPU_ST_OTHER;
}

float gpu_st_f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000) << 16;
    uint32_t exp = (h >> 10) & 0x1f;
    uint32_t man = h & 0x3ff;
    uint32_t bits;
    if (exp == 0) {
        if (man == 0) {
            bits = sign;
        } else { /* subnormal: renormalise */
            int e = -1;
            do {
                e++;
                man <<= 1;
            } while (!(man & 0x400));
            bits = sign | ((uint32_t)(127 - 15 - e) << 23) | ((man & 0x3ff) << 13);
        }
    } else if (exp == 0x1f) {
        bits = sign | 0x7f800000u | (man << 13);
    } else {
        bits = sign | ((exp + 127 - 15) << 23) | (man << 13);
    }
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

float gpu_st_bf16_to_f32(uint16_t h) {
    uint32_t bits = (uint32_t)h << 16;
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

static int tensor_cmp_offset(const void *a, const void *b) {
    const gpu_st_tensor_t *x = *(gpu_st_tensor_t *const *)a, *y = *(gpu_st_tensor_t *const *)b;
    if (x->offset != y->offset) return x->offset < y->offset ? -1 : 1;
    return 0;
}

/* Fills t from one header entry; err names the tensor. */
static common_status_t parse_entry(const char *path, const char *name, json_t *v,
                                   gpu_st_tensor_t *t, size_t data_len, common_err_t *err) {
    if (!json_is_object(v)) {
        return common_err_set(err, COMMON_USAGE, "%s: header entry '%s' is not an object", path,
                              name);
    }
    json_t *dt = json_object_get(v, "dtype");
    json_t *shape = json_object_get(v, "shape");
    json_t *offs = json_object_get(v, "data_offsets");
    if (!json_is_string(dt) || !json_is_array(shape) || !json_is_array(offs) ||
        json_array_size(offs) != 2) {
        return common_err_set(err, COMMON_USAGE,
                              "%s: tensor '%s' lacks dtype, shape or data_offsets [begin, end]",
                              path, name);
    }
    const char *ds = json_string_value(dt);
    size_t esize = 0;
    for (size_t i = 0; i < sizeof dtypes / sizeof dtypes[0]; i++)
        if (strcmp(ds, dtypes[i].name) == 0) {
            t->dtype = dtypes[i].dtype;
            esize = dtypes[i].size;
            snprintf(t->dtype_name, sizeof t->dtype_name, "%s", ds);
        }
    if (!esize) {
        return common_err_set(err, COMMON_USAGE, "%s: tensor '%s' has unknown dtype '%s'", path,
                              name, ds);
    }
    size_t nd = json_array_size(shape);
    if (nd > GPU_ST_MAX_DIMS) {
        return common_err_set(err, COMMON_USAGE, "%s: tensor '%s' has %zu dimensions (at most %d)",
                              path, name, nd, GPU_ST_MAX_DIMS);
    }
    t->ndim = (int)nd;
    size_t numel = 1;
    for (size_t i = 0; i < nd; i++) {
        json_t *d = json_array_get(shape, i);
        if (!json_is_integer(d) || json_integer_value(d) < 0 ||
            json_integer_value(d) > (json_int_t)1 << 40) {
            return common_err_set(err, COMMON_USAGE, "%s: tensor '%s' has an invalid shape", path,
                                  name);
        }
        t->shape[i] = json_integer_value(d);
        numel *= (size_t)t->shape[i];
        if (numel > ((size_t)1 << 40)) {
            return common_err_set(err, COMMON_USAGE, "%s: tensor '%s' has an invalid shape", path,
                                  name);
        }
    }
    t->numel = numel;
    json_t *b = json_array_get(offs, 0), *e = json_array_get(offs, 1);
    if (!json_is_integer(b) || !json_is_integer(e) || json_integer_value(b) < 0 ||
        json_integer_value(e) < json_integer_value(b)) {
        return common_err_set(err, COMMON_USAGE, "%s: tensor '%s' has invalid data_offsets", path,
                              name);
    }
    size_t begin = (size_t)json_integer_value(b), end = (size_t)json_integer_value(e);
    if (end > data_len) {
        return common_err_set(
            err, COMMON_USAGE,
            "%s: tensor '%s' data_offsets [%zu, %zu] lie outside the data section of %zu "
            "bytes (truncated file?)",
            path, name, begin, end, data_len);
    }
    if (end - begin != numel * esize) {
        return common_err_set(err, COMMON_USAGE,
                              "%s: tensor '%s' spans %zu bytes but %s x %zu elements need %zu",
                              path, name, end - begin, ds, numel, numel * esize);
    }
    t->offset = begin;
    t->nbytes = end - begin;
    return COMMON_OK;
}

static common_status_t parse_header(gpu_st_file_t *f, const char *hdr, size_t hlen,
                                    common_err_t *err) {
    json_error_t jerr;
    json_t *root = json_loadb(hdr, hlen, JSON_REJECT_DUPLICATES, &jerr);
    if (!root) {
        return common_err_set(err, COMMON_USAGE, "%s: header is not valid JSON (%s at byte %d)",
                              f->path, jerr.text, jerr.position);
    }
    if (!json_is_object(root)) {
        common_err_set(err, COMMON_USAGE, "%s: header is not a JSON object", f->path);
        json_decref(root);
        return COMMON_USAGE;
    }
    size_t cap = json_object_size(root);
    f->t = calloc(cap ? cap : 1, sizeof *f->t);
    gpu_st_tensor_t **order = calloc(cap ? cap : 1, sizeof *order);
    common_status_t rc = COMMON_OK;
    if (!f->t || !order) {
        common_err_set(err, COMMON_FATAL, "%s: out of memory reading the header", f->path);
        rc = err->code;
        goto out;
    }
    const char *key;
    json_t *val;
    json_object_foreach(root, key, val) {
        if (strcmp(key, "__metadata__") == 0) continue;
        gpu_st_tensor_t *t = &f->t[f->n];
        if (parse_entry(f->path, key, val, t, f->data_len, err) != 0) {
            rc = err->code;
            goto out;
        }
        t->name = strdup(key);
        if (!t->name) {
            common_err_set(err, COMMON_FATAL, "%s: out of memory reading the header", f->path);
            rc = err->code;
            goto out;
        }
        order[f->n] = t;
        f->n++;
    }
    /* Overlapping tensors would mean a corrupt or hand-made file: refuse it. */
    qsort(order, (size_t)f->n, sizeof *order, tensor_cmp_offset);
    for (int i = 1; i < f->n; i++) {
        const gpu_st_tensor_t *a = order[i - 1], *b = order[i];
        if (b->offset < a->offset + a->nbytes) {
            common_err_set(err, COMMON_USAGE,
                           "%s: tensors '%s' and '%s' overlap in the data section", f->path,
                           a->name, b->name);
            rc = err->code;
            goto out;
        }
    }
out:
    free(order);
    json_decref(root);
    return rc;
}

/* Reads the header of the map_len (>= 8) bytes at f->map and validates every tensor. */
static common_status_t st_index(gpu_st_file_t *f, common_err_t *err) {
    uint64_t hlen = 0;
    for (int i = 7; i >= 0; i--)
        hlen = hlen << 8 | f->map[i];
    if (hlen > f->map_len - 8) {
        return common_err_set(
            err, COMMON_USAGE,
            "%s: header length %llu runs past the end of the file (%zu bytes; truncated or "
            "not a safetensors file)",
            f->path, (unsigned long long)hlen, f->map_len);
    }
    f->data = f->map + 8 + hlen;
    f->data_len = f->map_len - 8 - (size_t)hlen;
    return parse_header(f, (const char *)f->map + 8, (size_t)hlen, err);
}

common_status_t gpu_st_open(const char *path, gpu_st_file_t **out, common_err_t *err) {
    *out = NULL;
    gpu_st_file_t *f = calloc(1, sizeof *f);
    if (!f || !(f->path = strdup(path))) {
        free(f);
        return common_err_set(err, COMMON_FATAL, "%s: out of memory", path);
    }
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        common_err_set(err, COMMON_USAGE, "%s: cannot open: %s", path, strerror(errno));
        gpu_st_close(f);
        return COMMON_USAGE;
    }
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        common_err_set(err, COMMON_USAGE, "%s: not a regular file", path);
        close(fd);
        gpu_st_close(f);
        return COMMON_USAGE;
    }
    f->map_len = (size_t)st.st_size;
    if (f->map_len < 8) {
        common_err_set(err, COMMON_USAGE,
                       "%s: truncated: %zu bytes, shorter than the 8-byte header length", path,
                       f->map_len);
        close(fd);
        gpu_st_close(f);
        return COMMON_USAGE;
    }
    void *m = mmap(NULL, f->map_len, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (m == MAP_FAILED) {
        common_err_set(err, COMMON_USAGE, "%s: cannot map: %s", path, strerror(errno));
        gpu_st_close(f);
        return COMMON_USAGE;
    }
    f->map = m;
    f->mapped = 1;
    if (st_index(f, err) != 0) {
        gpu_st_close(f);
        return err->code;
    }
    *out = f;
    return COMMON_OK;
}

common_status_t gpu_st_open_mem(const void *buf, size_t len, const char *name, gpu_st_file_t **out,
                                common_err_t *err) {
    *out = NULL;
    gpu_st_file_t *f = calloc(1, sizeof *f);
    if (!f || !(f->path = strdup(name))) {
        free(f);
        return common_err_set(err, COMMON_FATAL, "%s: out of memory", name);
    }
    f->map = buf;
    f->map_len = len;
    if (len < 8) {
        common_err_set(err, COMMON_USAGE,
                       "%s: truncated: %zu bytes, shorter than the 8-byte header length", name,
                       len);
        gpu_st_close(f);
        return COMMON_USAGE;
    }
    if (st_index(f, err) != 0) {
        gpu_st_close(f);
        return err->code;
    }
    *out = f;
    return COMMON_OK;
}

const gpu_st_tensor_t *gpu_st_find(const gpu_st_file_t *f, const char *name) {
    for (int i = 0; i < f->n; i++)
        if (strcmp(f->t[i].name, name) == 0) return &f->t[i];
    return NULL;
}

int gpu_st_count(const gpu_st_file_t *f) {
    return f->n;
}

const gpu_st_tensor_t *gpu_st_at(const gpu_st_file_t *f, int i) {
    return i >= 0 && i < f->n ? &f->t[i] : NULL;
}

const char *gpu_st_path(const gpu_st_file_t *f) {
    return f->path;
}

void gpu_st_read_f32(const gpu_st_file_t *f, const gpu_st_tensor_t *t, float *dst) {
    const uint8_t *src = f->data + t->offset;
    /* memcpy per element: the data section has no alignment guarantee. */
    switch (t->dtype) {
    case GPU_ST_F32:
        memcpy(dst, src, t->numel * 4);
        break;
    case GPU_ST_F16:
        for (size_t i = 0; i < t->numel; i++) {
            uint16_t h;
            memcpy(&h, src + 2 * i, 2);
            dst[i] = gpu_st_f16_to_f32(h);
        }
        break;
    case GPU_ST_BF16:
        for (size_t i = 0; i < t->numel; i++) {
            uint16_t h;
            memcpy(&h, src + 2 * i, 2);
            dst[i] = gpu_st_bf16_to_f32(h);
        }
        break;
    case GPU_ST_OTHER:
        memset(dst, 0, t->numel * sizeof(float));
        break;
    }
}

void gpu_st_close(gpu_st_file_t *f) {
    if (!f) return;
    if (f->mapped) munmap((void *)f->map, f->map_len);
    for (int i = 0; i < f->n; i++)
        free(f->t[i].name);
    free(f->t);
    free(f->path);
    free(f);
}
