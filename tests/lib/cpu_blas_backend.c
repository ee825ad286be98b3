#include "tests/lib/cpu_blas_backend.h"

#include "gpu/cpu/cpu_backend_int.h"

extern const gpu_backend_ops_t gpu_cpu_backend_ops;

static common_status_t init_blas(const gpu_model_t *m, const gpu_backend_opts_t *opts,
                                 gpu_backend_t **out, common_err_t *err) {
    return gpu_cpu_init_as(m, opts, 1, out, err);
}

const gpu_backend_ops_t *test_cpu_blas_backend(void) {
    static gpu_backend_ops_t t;
    t = gpu_cpu_backend_ops; /* the same table, another init */
    t.init = init_blas;
    return &t;
}
