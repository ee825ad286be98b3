// The CUDA backend's host-side parts: device queries, the weight image uploaded at init, the
// energy meter and GEMM ceiling of the backend table. (The tests' introspection of an
// instance is tests/lib/cuda_test_api.cu.)
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
#include "gpu/cuda/plan.h"

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

double cuda_be_gemm_ceiling(gpu_backend_t *be, int tokens, const char *precision) {
    const gpu_model_config_t *c = &be->model->cfg;
    return gpu_cuda_layer_gemm_ceiling(be->device, tokens, c->hidden, c->intermediate, precision,
                                       NULL);
}

// Host-side conversion of fp32 weights into the arena's weight region image.
template <typename T> static void put_t(char *img, size_t off, const float *src, size_t n) {
    T *d = (T *)(img + off);
    for (size_t i = 0; i < n; i++)
        d[i] = st<T>::from_f(src[i]);
}
static void put_f(char *img, size_t off, const float *src, size_t n) {
    memcpy(img + off, src, n * sizeof(float));
}

template <typename T> static void be_weights_image(struct gpu_backend *be, char *img) {
    const gpu_model_t *m = be->model;
    const gpu_model_config_t *c = &m->cfg;
    const gpu_plan_t *p = &be->plan;
    size_t H = (size_t)c->hidden, I = (size_t)c->intermediate, L = (size_t)c->num_labels;
    size_t E = (size_t)c->emb_size;
    put_t<T>(img, p->slice[GPU_PLAN_WORD_EMB].offset, m->w.word_emb, (size_t)c->vocab_size * E);
    // pos_emb already starts at the family's offset (RoBERTa's padding_idx + 1)
    put_t<T>(img, p->slice[GPU_PLAN_POS_EMB].offset, m->w.pos_emb, (size_t)c->max_pos * E);
    put_t<T>(img, p->slice[GPU_PLAN_TYPE_EMB].offset, m->w.type_emb, E);
    put_f(img, p->slice[GPU_PLAN_EMB_LN].offset, m->w.emb_ln_g, E);
    put_f(img, p->slice[GPU_PLAN_EMB_LN].offset + E * 4, m->w.emb_ln_b, E);
    if (E != H) {
        put_t<T>(img, p->slice[GPU_PLAN_EMB_PROJ_W].offset, m->w.emb_proj_w, H * E);
        put_t<T>(img, p->slice[GPU_PLAN_EMB_PROJ_B].offset, m->w.emb_proj_b, H);
    }
    for (int l = 0; l < c->layers; l++) {
        const gpu_layer_weights_t *w = &m->w.layer[l];
        size_t b = p->slice[GPU_PLAN_LAYERS].offset + (size_t)l * p->layer_bytes, e = sizeof(T);
        put_t<T>(img, b + p->layer_off[GPU_PLAN_L_QKV_W], w->q_w, H * H);
        put_t<T>(img, b + p->layer_off[GPU_PLAN_L_QKV_W] + H * H * e, w->k_w, H * H);
        put_t<T>(img, b + p->layer_off[GPU_PLAN_L_QKV_W] + 2 * H * H * e, w->v_w, H * H);
        put_t<T>(img, b + p->layer_off[GPU_PLAN_L_QKV_B], w->q_b, H);
        put_t<T>(img, b + p->layer_off[GPU_PLAN_L_QKV_B] + H * e, w->k_b, H);
        put_t<T>(img, b + p->layer_off[GPU_PLAN_L_QKV_B] + 2 * H * e, w->v_b, H);
        put_t<T>(img, b + p->layer_off[GPU_PLAN_L_AO_W], w->ao_w, H * H);
        put_t<T>(img, b + p->layer_off[GPU_PLAN_L_AO_B], w->ao_b, H);
        put_f(img, b + p->layer_off[GPU_PLAN_L_LN1], w->ln1_g, H);
        put_f(img, b + p->layer_off[GPU_PLAN_L_LN1] + H * 4, w->ln1_b, H);
        put_t<T>(img, b + p->layer_off[GPU_PLAN_L_FF1_W], w->ff1_w, I * H);
        put_t<T>(img, b + p->layer_off[GPU_PLAN_L_FF1_B], w->ff1_b, I);
        put_t<T>(img, b + p->layer_off[GPU_PLAN_L_FF2_W], w->ff2_w, H * I);
        put_t<T>(img, b + p->layer_off[GPU_PLAN_L_FF2_B], w->ff2_b, H);
        put_f(img, b + p->layer_off[GPU_PLAN_L_LN2], w->ln2_g, H);
        put_f(img, b + p->layer_off[GPU_PLAN_L_LN2] + H * 4, w->ln2_b, H);
    }
    put_f(img, p->slice[GPU_PLAN_POOL_W].offset, m->w.pool_w, H * H);
    put_f(img, p->slice[GPU_PLAN_POOL_B].offset, m->w.pool_b, H);
    put_f(img, p->slice[GPU_PLAN_CLS_W].offset, m->w.cls_w, L * H);
    put_f(img, p->slice[GPU_PLAN_CLS_B].offset, m->w.cls_b, L);
}
void cuda_be_weights_image(struct gpu_backend *be, char *img) {
    if (be->bf16)
        be_weights_image<__nv_bfloat16>(be, img);
    else
        be_weights_image<__half>(be, img);
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
int cuda_be_warmup(struct gpu_backend *be, char *err, size_t errlen) {
    const gpu_plan_t *p = &be->plan;
    int budget = p->token_budget, max_len = p->max_len, max_seqs = p->max_seqs;
    int32_t *ids = (int32_t *)malloc((size_t)budget * 4);
    int32_t *cu = (int32_t *)malloc((size_t)(budget + 1) * 4);
    float *logits = (float *)malloc((size_t)max_seqs * be->model->cfg.num_labels * 4);
    int rc = 0;
    if (!ids || !cu || !logits) {
        snprintf(err, errlen, "out of host memory for the warm-up sweep");
        rc = -1;
    }
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
            if (gpu_cuda_backend_ops.forward(be, &b, logits, err, errlen) != 0) rc = -1;
        }
        if (tok == budget) break;
    }
    free(ids), free(cu), free(logits);
    return rc;
}
