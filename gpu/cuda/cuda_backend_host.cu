// The CUDA backend's host-side parts: device queries, the warm-up sweep, the energy meter
// and GEMM ceiling of the backend table. (The tests' introspection of an instance is
// tests/lib/cuda_test_api.cu.)
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu/backend.h"
#include "gpu/cuda/cuda_backend.h"
#include "gpu/cuda/cuda_backend_int.cuh"
#include "gpu/cuda/cuda_common.cuh"
#include "gpu/cuda/cuda_gemm.cuh"

extern "C" int gpu_cuda_device_count(void) {
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
        cudaGetLastError(); // clear the sticky "no driver" error for later callers
        return 0;
    }
    return n;
}

extern "C" int gpu_cuda_pci_bus_id(int device, char *buf, int len) {
    if (cudaDeviceGetPCIBusId(buf, len, device) != cudaSuccess) {
        cudaGetLastError();
        return -1;
    }
    return 0;
}

int cuda_be_energy_start(gpu_backend_t *be) {
    char pci[32];
    if (be->win) return -1; // one window at a time
    if (!be->nv &&
        (gpu_cuda_pci_bus_id(be->device, pci, sizeof pci) != 0 || gpu_nvml_init(pci, &be->nv) != 0))
        return -1;
    be->win = (gpu_nvml_window_t *)calloc(1, sizeof(*be->win));
    if (!be->win) return -1;
    gpu_nvml_window_start(be->win, be->nv);
    return 0;
}

double cuda_be_energy_stop(gpu_backend_t *be, double *seconds, int *sm_mhz) {
    *seconds = 0;
    *sm_mhz = -1;
    if (!be->win) return -1;
    *sm_mhz = gpu_nvml_window_stop(be->win);
    double joules = be->win->joules;
    *seconds = be->win->seconds;
    free(be->win);
    be->win = NULL;
    return joules;
}

double cuda_be_gemm_ceiling(gpu_backend_t *be, int tokens, const char *precision,
                            common_err_t *err) {
    const gpu_model_config_t *c = &be->model->cfg;
    return gpu_cuda_layer_gemm_ceiling(be->device, tokens, c->hidden, c->intermediate, precision,
                                       NULL, err);
}

// Introspection (gpu/cuda/cuda_backend.h). Asks the backend's allocator for device memory after
// init (must be refused).
extern "C" const char *gpu_backend_cuda_versions(void) {
    static thread_local char buf[96]; // the caller's thread's copy
    int rt = 0, drv = 0;
    cudaRuntimeGetVersion(&rt);
    cudaDriverGetVersion(&drv); /* 0 without a driver */
    size_t lt = cublasLtGetVersion();
    char d[16] = "none";
    if (drv > 0) snprintf(d, sizeof(d), "%d.%d", drv / 1000, drv % 1000 / 10);
    snprintf(buf, sizeof(buf), "runtime %d.%d, cublas %zu.%zu.%zu, driver %s", rt / 1000,
             rt % 1000 / 10, lt / 10000, lt / 100 % 100, lt % 100, d);
    return buf;
}

extern "C" const gpu_backend_ops_t gpu_cuda_backend_ops; // cuda_backend.cu

// The warm-up sweep at init: for every cuBLASLt shape bucket up to the token budget, one
// batch of long sequences (the long-sequence attention path, few [CLS] rows) and one of the
// shortest (the short path, the most [CLS] rows), on throw-away data. After it, every kernel
// a run can launch is loaded (CUDA loads modules lazily and a first launch takes device
// memory for its code, so device memory in use stays constant from here on) and every GEMM
// algorithm is chosen, timed among cuBLASLt's top BE_TUNE_CANDIDATES candidates.
common_status_t cuda_be_warmup(struct gpu_backend *be, common_err_t *err) {
    int budget = be->token_budget, max_len = be->max_len, max_seqs = be->max_seqs;
    int32_t *ids = (int32_t *)malloc((size_t)budget * 4);
    int32_t *cu = (int32_t *)malloc((size_t)(budget + 1) * 4);
    float *logits = (float *)malloc((size_t)max_seqs * be->model->cfg.num_labels * 4);
    common_status_t rc = COMMON_OK;
    if (!ids || !cu || !logits)
        rc = common_err_set(err, COMMON_FATAL, "out of host memory for the warm-up sweep");
    uint32_t r = 12345u;
    for (int i = 0; rc == 0 && i < budget; i++) {
        r = r * 1664525u + 1013904223u;
        ids[i] = (int32_t)(1000 + (r >> 8) % 20000u) % be->model->cfg.vocab_size;
    }
    for (int m = cuda_gemm_bucket(1); rc == 0; m = cuda_gemm_bucket(m + 1)) { // bucket tops
        int tok = m < budget ? m : budget;
        for (int kind = 0; kind < 2 && rc == 0; kind++) {
            int len = kind == 0 ? max_len : (tok + max_seqs - 1) / max_seqs;
            if (len < 1) len = 1;
            gpu_batch_t b;
            memset(&b, 0, sizeof(b));
            b.ids = ids, b.cu_seqlens = cu;
            cu[0] = 0;
            while (cu[b.n_seqs] < tok && b.n_seqs < max_seqs) {
                int l = tok - cu[b.n_seqs] > len ? len : tok - cu[b.n_seqs];
                cu[b.n_seqs + 1] = cu[b.n_seqs] + l;
                if (l > b.max_len) b.max_len = l;
                b.n_seqs++;
            }
            b.n_tokens = cu[b.n_seqs];
            rc = gpu_cuda_backend_ops.forward(be, &b, logits, err);
        }
        if (tok == budget) break;
    }
    free(ids), free(cu), free(logits);
    return rc;
}
