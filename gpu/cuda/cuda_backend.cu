// The CUDA backend (gpu/backend.h table "cuda"): BERT-family classifier on fp16 or bf16
// storage with fp32 accumulation. Every projection is a cuBLASLt GEMM (QKV fused, bias and
// the FFN activation in the epilogue where cuBLASLt has it); attention, embedding+LayerNorm,
// residual+LayerNorm and the head's activation are own kernels. The families differ in the
// FFN activation, the head's activation and ELECTRA's embedding projection (E -> H). Tokens are
// packed (cu_seqlens), so a batch costs its real tokens. Memory: one device allocation at init,
// sized by gpu/cuda/plan.c; every buffer is a slice.
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

extern "C" const gpu_backend_ops_t gpu_cuda_backend_ops; // the table, at the end of this file

static void cuda_be_free(gpu_backend_t *be) {
    if (!be) return;
    if (be->win) {
        double s;
        int mhz;
        cuda_be_energy_stop(be, &s, &mhz); // its sampler thread reads nv
    }
    gpu_nvml_free(be->nv);
    if (be->device >= 0) cudaSetDevice(be->device);
    if (be->stream) cudaStreamSynchronize(be->stream); // a batch may still be in flight
    cuda_gemm_free(&be->gemm);
    cuda_gemm_free(&be->gemm32);
    for (int i = 0; i < BE_PROF_EVENTS; i++)
        if (be->ev[i]) cudaEventDestroy(be->ev[i]);
    cuda_be_graph_free(be);
    if (be->dev) cudaFree(be->dev);
    for (int i = 0; i < 2; i++) {
        if (be->h_inputs[i]) cudaFreeHost(be->h_inputs[i]);
        if (be->h_logits[i]) cudaFreeHost(be->h_logits[i]);
        if (be->t_first[i]) cudaEventDestroy(be->t_first[i]);
        if (be->t_last[i]) cudaEventDestroy(be->t_last[i]);
    }
    if (be->stream) cudaStreamDestroy(be->stream);
    free(be);
}

#define BE_CUDA(call, what)                                                                        \
    do {                                                                                           \
        cudaError_t e_ = (call);                                                                   \
        if (e_ != cudaSuccess) {                                                                   \
            snprintf(err, errlen, "CUDA %s failed: %s", what, cudaGetErrorString(e_));             \
            goto fail;                                                                             \
        }                                                                                          \
    } while (0)

static int cuda_be_forward(gpu_backend_t *be, const gpu_batch_t *batch, float *logits, char *err,
                           size_t errlen);

// graph: 1 runs the model through the encoder graph whatever its family (the GPU tests), 0 as
// cuda_be_wants_graph says.
// given: a graph to run instead of the family's (init_graph), owned from the call on.
static int cuda_be_init_path(const gpu_model_t *model, const gpu_backend_opts_t *opts, int graph,
                             gpu_graph_t *given, gpu_backend_t **out, char *err, size_t errlen) {
    *out = NULL;
    const gpu_model_config_t *c = &model->cfg;
    const char *prec = gpu_backend_precision(&gpu_cuda_backend_ops, opts->precision);
    if (!prec) {
        snprintf(err, errlen,
                 "precision '%s' is not supported by the cuda backend: use fp16, "
                 "bf16 or fp8",
                 opts->precision);
        gpu_graph_free(given);
        return -1;
    }
    char *img = NULL;
    struct gpu_backend *be = (struct gpu_backend *)calloc(1, sizeof(*be));
    if (!be) {
        snprintf(err, errlen, "out of host memory");
        gpu_graph_free(given);
        return -1;
    }
    be->gg = given; // freed with the instance
    graph = graph || given;
    be->device = -1;
    be->model = model;
    be->opts = *opts;
    snprintf(be->prec, sizeof(be->prec), "%s", prec);
    be->opts.precision = be->prec;
    be->bf16 = strcmp(prec, "bf16") == 0;
    if (gpu_plan_compute(c, opts->token_budget, opts->max_len, opts->max_seqs, prec, &be->plan, err,
                         errlen) != 0)
        goto fail_quiet;
    be->opts.max_len = be->plan.max_len;
    be->opts.max_seqs = be->plan.max_seqs;
    graph = graph || cuda_be_wants_graph(c, prec);
    if (!graph && (c->hidden / c->heads != 64 || c->hidden % 8 != 0 || c->hidden > 1024 ||
                   c->emb_size % 8 != 0 || c->intermediate % 8 != 0)) {
        snprintf(err, errlen,
                 "the cuda backend needs head_dim 64, hidden <= 1024 and embedding and "
                 "intermediate sizes that are multiples of 8 (model has hidden %d, %d heads, "
                 "embedding %d, intermediate %d)",
                 c->hidden, c->heads, c->emb_size, c->intermediate);
        goto fail_quiet;
    }
    if (gpu_cuda_device_count() <= opts->device) {
        snprintf(err, errlen, "no CUDA device %d (found %d)", opts->device,
                 gpu_cuda_device_count());
        goto fail_quiet;
    }
    be->device = opts->device;
    BE_CUDA(cudaSetDevice(be->device), "set device");
    BE_CUDA(cudaStreamCreateWithFlags(&be->stream, cudaStreamNonBlocking), "stream create");
    for (int i = 0; i < 2; i++) {
        BE_CUDA(cudaEventCreate(&be->t_first[i]), "event create");
        BE_CUDA(cudaEventCreate(&be->t_last[i]), "event create");
    }
    be->att_wgmma = cuda_attention_has_wgmma(be->device);
    BE_CUDA(cudaDeviceGetAttribute(&be->sms, cudaDevAttrMultiProcessorCount, be->device),
            "device attribute");
    if (graph) { // the op list: its layout, one allocation, its prelude, then the warm-up
        if (cuda_be_graph_init(be, err, errlen) != 0) goto fail_quiet;
        cuda_be_graph_tune(be, BE_TUNE_CANDIDATES);
        if (cuda_be_warmup(be, err, errlen) != 0) goto fail_quiet;
        cuda_be_graph_tune(be, 0);
        *out = be;
        return 0;
    }
    BE_CUDA(be_device_alloc(be, (void **)&be->dev, be->plan.total_bytes), "arena allocation");
    be->init_done = 1;
    for (int i = 0; i < 2; i++) {
        BE_CUDA(cudaMallocHost((void **)&be->h_inputs[i], be->plan.slice[GPU_PLAN_INPUTS].bytes),
                "pinned input staging");
        BE_CUDA(cudaMallocHost((void **)&be->h_logits[i], be->plan.slice[GPU_PLAN_LOGITS].bytes),
                "pinned logits staging");
    }

    img = (char *)malloc(be->plan.weights_bytes);
    if (!img) {
        snprintf(err, errlen, "out of host memory for the weight image");
        goto fail_quiet;
    }
    memset(img, 0, be->plan.weights_bytes);
    cuda_be_weights_image(be, img);
    BE_CUDA(cudaMemcpy(be->dev, img, be->plan.weights_bytes, cudaMemcpyHostToDevice),
            "weight upload");
    free(img);
    img = NULL;
    {
        // The projections and the head run one after another on one stream: they share the
        // workspace.
        char *ws = be_slice(be, GPU_PLAN_WORKSPACE);
        size_t ws_bytes = be->plan.slice[GPU_PLAN_WORKSPACE].bytes;
        int type = be->bf16 ? CUDA_GEMM_BF16 : CUDA_GEMM_FP16;
        if (cuda_gemm_init(&be->gemm, type, ws, ws_bytes, err, errlen) != 0 ||
            cuda_gemm_init(&be->gemm32, CUDA_GEMM_FP32, ws, ws_bytes, err, errlen) != 0)
            goto fail_quiet;
    }
    be->gemm.tune = BE_TUNE_CANDIDATES;
    if (cuda_be_warmup(be, err, errlen) != 0) goto fail_quiet;
    be->gemm.tune = 0;
    *out = be;
    return 0;
fail:
fail_quiet:
    free(img);
    cuda_be_free(be);
    return -1;
}

#define FW_CUDA(call)                                                                              \
    do {                                                                                           \
        cudaError_t e_ = (call);                                                                   \
        if (e_ != cudaSuccess) {                                                                   \
            snprintf(err, errlen, "CUDA error in %s: %s", #call, cudaGetErrorString(e_));          \
            return 1;                                                                              \
        }                                                                                          \
    } while (0)
#define FW_GEMM(w, x, y, ldy, b, r, m, n, k, epi)                                                  \
    do {                                                                                           \
        if (cuda_gemm_run_ld(g, w, x, y, ldy, b, r, m, n, k, epi, s, err, errlen) != 0) return 1;  \
    } while (0)

// Marks the end of a phase of category cat (profiling only).
static void be_mark(struct gpu_backend *be, int cat) {
    if (!be->prof || be->n_ev >= BE_PROF_EVENTS) return;
    be->ev_cat[be->n_ev] = cat;
    cudaEventRecord(be->ev[be->n_ev++], be->stream);
}

// One encoder layer, all of it but the last layer's tail, for the S sequences of the batch
// (rows tokens). last: only the K/V projection (the tail does the rest).
template <typename T, typename R>
static int be_layer_t(struct gpu_backend *be, int l, int S, int rows, int q_tiles, int last,
                      const int32_t *d_cu, char *err, size_t errlen) {
    constexpr bool fp32_res = sizeof(R) == 4;
    const gpu_model_config_t *c = &be->model->cfg;
    const int H = c->hidden, I = c->intermediate;
    const int BLD = be->plan.big_ld;
    const int ff1_epi = cuda_gemm_act_epi(c->act);
    const float eps = c->ln_eps;
    cudaStream_t s = be->stream;
    cuda_gemm_t *g = &be->gemm;
    T *x = (T *)be_slice(be, GPU_PLAN_X);     // (Tn, H) storage-type hidden state
    T *ctx = (T *)be_slice(be, GPU_PLAN_CTX); // (Tn, H)
    T *big = (T *)be_slice(be, GPU_PLAN_BIG); // (Tn, BLD): QKV | attn-out | FFN inner
    R *xr = fp32_res ? (R *)be_slice(be, GPU_PLAN_XR) : (R *)(void *)x; // (Tn, H) residual
    const float *ln1 = (const float *)be_layer(be, l, GPU_PLAN_L_LN1);
    const float *ln2 = (const float *)be_layer(be, l, GPU_PLAN_L_LN2);
    if (last) {
        // Only [CLS] queries reach the head: K and V for every token here (the weight rows
        // after Q's), Q and attention on the gathered [CLS] rows in the tail.
        FW_GEMM(be_layer(be, l, GPU_PLAN_L_QKV_W) + (size_t)H * H * sizeof(T), x, big + H, BLD,
                be_layer(be, l, GPU_PLAN_L_QKV_B) + (size_t)H * sizeof(T), NULL, rows, 2 * H, H,
                CUDA_GEMM_BIAS);
        be_mark(be, GPU_CUDA_PROF_GEMM);
        return 0;
    }
    FW_GEMM(be_layer(be, l, GPU_PLAN_L_QKV_W), x, big, BLD, be_layer(be, l, GPU_PLAN_L_QKV_B), NULL,
            rows, 3 * H, H, CUDA_GEMM_BIAS);
    be_mark(be, GPU_CUDA_PROF_GEMM);
    FW_CUDA(cuda_attention<T>(big, big + H, big + 2 * H, BLD, d_cu, S, c->heads, q_tiles, ctx, H,
                              be->att_wgmma, s));
    be_mark(be, GPU_CUDA_PROF_ATTENTION);
    if (!fp32_res) {
        // fp16: the residual is added in the projection's epilogue, in place (C = D = x).
        FW_GEMM(be_layer(be, l, GPU_PLAN_L_AO_W), ctx, x, H, be_layer(be, l, GPU_PLAN_L_AO_B), x,
                rows, H, H, CUDA_GEMM_BIAS);
        be_mark(be, GPU_CUDA_PROF_GEMM);
        FW_CUDA((cuda_add_ln<T, R>(x, (const R *)NULL, ln1, ln1 + H, rows, H, eps, (R *)NULL, x,
                                   be->sms, s)));
        be_mark(be, GPU_CUDA_PROF_NORM);
        FW_GEMM(be_layer(be, l, GPU_PLAN_L_FF1_W), x, big, I, be_layer(be, l, GPU_PLAN_L_FF1_B),
                NULL, rows, I, H, ff1_epi);
        FW_GEMM(be_layer(be, l, GPU_PLAN_L_FF2_W), big, x, H, be_layer(be, l, GPU_PLAN_L_FF2_B), x,
                rows, H, I, CUDA_GEMM_BIAS);
        be_mark(be, GPU_CUDA_PROF_GEMM);
        FW_CUDA((cuda_add_ln<T, R>(x, (const R *)NULL, ln2, ln2 + H, rows, H, eps, (R *)NULL, x,
                                   be->sms, s)));
        be_mark(be, GPU_CUDA_PROF_NORM);
    } else {
        // bf16: fp32 residual xr beside the bf16 GEMM input x.
        FW_GEMM(be_layer(be, l, GPU_PLAN_L_AO_W), ctx, big, H, be_layer(be, l, GPU_PLAN_L_AO_B),
                NULL, rows, H, H, CUDA_GEMM_BIAS);
        be_mark(be, GPU_CUDA_PROF_GEMM);
        FW_CUDA((cuda_add_ln<T, R>(big, xr, ln1, ln1 + H, rows, H, eps, xr, x, be->sms, s)));
        be_mark(be, GPU_CUDA_PROF_NORM);
        FW_GEMM(be_layer(be, l, GPU_PLAN_L_FF1_W), x, big, I, be_layer(be, l, GPU_PLAN_L_FF1_B),
                NULL, rows, I, H, ff1_epi);
        FW_GEMM(be_layer(be, l, GPU_PLAN_L_FF2_W), big, ctx, H, be_layer(be, l, GPU_PLAN_L_FF2_B),
                NULL, rows, H, I, CUDA_GEMM_BIAS);
        be_mark(be, GPU_CUDA_PROF_GEMM);
        FW_CUDA((cuda_add_ln<T, R>(ctx, xr, ln2, ln2 + H, rows, H, eps, xr, x, be->sms, s)));
        be_mark(be, GPU_CUDA_PROF_NORM);
    }
    return 0;
}

// R: the residual stream's type. fp16 keeps it in fp16 and adds the residual inside the
// projection's epilogue (beta = 1, in place), so LayerNorm reads one tensor; bf16 keeps an
// fp32 copy (XR) beside the bf16 GEMM input, because bf16's 8-bit mantissa would otherwise
// round the residual sum in every layer.
template <typename T, typename R>
static int cuda_be_submit_t(struct gpu_backend *be, const gpu_batch_t *b, int slot, char *err,
                            size_t errlen) {
    constexpr bool fp32_res = sizeof(R) == 4;
    const gpu_model_config_t *c = &be->model->cfg;
    const int H = c->hidden, I = c->intermediate, L = c->num_labels, NL = c->layers;
    const int Tn = b->n_tokens, S = b->n_seqs, E = c->emb_size;
    const int ff1_epi = cuda_gemm_act_epi(c->act);
    const float eps = c->ln_eps;
    cudaStream_t s = be->stream;
    cuda_gemm_t *g = &be->gemm;

    // Inputs packed for one copy: ids (Tn), positions (Tn), cu_seqlens (S + 1), int32.
    int ta = (Tn + 3) & ~3; // keeps each part 16-byte aligned
    int32_t *hi = be->h_inputs[slot];
    memcpy(hi, b->ids, (size_t)Tn * 4);
    for (int q = 0; q < S; q++)
        for (int t = b->cu_seqlens[q]; t < b->cu_seqlens[q + 1]; t++)
            hi[ta + t] = t - b->cu_seqlens[q];
    memcpy(hi + 2 * ta, b->cu_seqlens, (size_t)(S + 1) * 4);
    be->n_ev = 0;
    be_mark(be, GPU_CUDA_PROF_EMBED);
    int32_t *d_in = (int32_t *)be_slice(be, GPU_PLAN_INPUTS);
    const int32_t *d_ids = d_in, *d_pos = d_in + ta, *d_cu = d_in + 2 * ta;
    FW_CUDA(cudaEventRecord(be->t_first[slot], s));
    FW_CUDA(cudaMemcpyAsync(d_in, hi, (size_t)(2 * ta + S + 1) * 4, cudaMemcpyHostToDevice, s));

    T *X = (T *)be_slice(be, GPU_PLAN_X);                               // (Tn, H)
    R *XR = fp32_res ? (R *)be_slice(be, GPU_PLAN_XR) : (R *)(void *)X; // (Tn, H)
    T *CTX = (T *)be_slice(be, GPU_PLAN_CTX);                           // (Tn, H)
    char *BIG = be_slice(be, GPU_PLAN_BIG);
    const float *eln = (const float *)be_slice(be, GPU_PLAN_EMB_LN);
    const T *wemb = (const T *)be_slice(be, GPU_PLAN_WORD_EMB);
    const T *pemb = (const T *)be_slice(be, GPU_PLAN_POS_EMB);
    const T *temb = (const T *)be_slice(be, GPU_PLAN_TYPE_EMB);
    if (E == H) {
        FW_CUDA((cuda_embed_ln<T, R>(d_ids, d_pos, Tn, wemb, pemb, temb, eln, eln + H, H, eps,
                                     fp32_res ? XR : (R *)NULL, X, s)));
    } else {
        // ELECTRA: LayerNorm over E into BIG (free until layer 0's QKV), projected to H.
        T *emb = (T *)BIG; // (Tn, E)
        FW_CUDA((cuda_embed_ln<T, T>(d_ids, d_pos, Tn, wemb, pemb, temb, eln, eln + E, E, eps,
                                     (T *)NULL, emb, s)));
        FW_GEMM(be_slice(be, GPU_PLAN_EMB_PROJ_W), emb, X, H, be_slice(be, GPU_PLAN_EMB_PROJ_B),
                NULL, Tn, H, E, CUDA_GEMM_BIAS);
        // bf16's fp32 residual stream starts from the projection's (bf16-rounded) output
        if (fp32_res) FW_CUDA(cuda_to_float<T>(X, (size_t)Tn * H, (float *)(void *)XR, s));
    }
    be_mark(be, GPU_CUDA_PROF_EMBED);
    int q_tiles = (b->max_len + 63) / 64;

    for (int l = 0; l < NL; l++)
        if (be_layer_t<T, R>(be, l, S, Tn, q_tiles, l == NL - 1, d_cu, err, errlen)) return 1;

    // The last layer past its K/V projection, on the S [CLS] rows: gathered compact, they
    // take Q, attend over their sequence's keys and values (still in BIG), and run the rest.
    {
        const int l = NL - 1;
        const float *ln1 = (const float *)be_layer(be, l, GPU_PLAN_L_LN1);
        const float *ln2 = (const float *)be_layer(be, l, GPU_PLAN_L_LN2);
        const int BLD = be->plan.big_ld;
        gpu_plan_last_t lo;
        gpu_plan_last_layer(fp32_res, (size_t)S, (size_t)H, (size_t)I, &lo);
        T *xc = CTX; // (S, H) the [CLS] hidden rows: Q's input, then the fp16 residual stream
        T *att = X;  // (S, H) their queries, then (in place) their attention outputs
        T *ff = (T *)(BIG + lo.ff); // (S, I), once K/V are done
        R *xr = fp32_res ? (R *)(void *)(BIG + lo.xr) : (R *)(void *)xc; // (S, H)
        T *ao = (T *)(BIG + lo.ctx);                                     // (S, H) bf16 projections
        FW_CUDA(cuda_gather_rows<T>(X, d_cu, S, H, xc, s));              // X is free from here on
        be_mark(be, GPU_CUDA_PROF_NORM);
        FW_GEMM(be_layer(be, l, GPU_PLAN_L_QKV_W), xc, att, H, be_layer(be, l, GPU_PLAN_L_QKV_B),
                NULL, S, H, H, CUDA_GEMM_BIAS);
        be_mark(be, GPU_CUDA_PROF_GEMM);
        FW_CUDA(cuda_attention_first<T>(att, H, (const T *)BIG + H, (const T *)BIG + 2 * H, BLD,
                                        d_cu, S, c->heads, att, H, s));
        be_mark(be, GPU_CUDA_PROF_ATTENTION);
        if (fp32_res) FW_CUDA(cuda_gather_rows<R>(XR, d_cu, S, H, xr, s)); // BIG's K/V are done
        if (!fp32_res) {
            FW_GEMM(be_layer(be, l, GPU_PLAN_L_AO_W), att, xc, H, be_layer(be, l, GPU_PLAN_L_AO_B),
                    xc, S, H, H, CUDA_GEMM_BIAS);
            FW_CUDA((cuda_add_ln<T, R>(xc, (const R *)NULL, ln1, ln1 + H, S, H, eps, (R *)NULL, xc,
                                       be->sms, s)));
            FW_GEMM(be_layer(be, l, GPU_PLAN_L_FF1_W), xc, ff, I, be_layer(be, l, GPU_PLAN_L_FF1_B),
                    NULL, S, I, H, ff1_epi);
            FW_GEMM(be_layer(be, l, GPU_PLAN_L_FF2_W), ff, xc, H, be_layer(be, l, GPU_PLAN_L_FF2_B),
                    xc, S, H, I, CUDA_GEMM_BIAS);
            FW_CUDA((cuda_add_ln<T, R>(xc, (const R *)NULL, ln2, ln2 + H, S, H, eps, (R *)NULL, xc,
                                       be->sms, s)));
        } else {
            FW_GEMM(be_layer(be, l, GPU_PLAN_L_AO_W), att, ao, H, be_layer(be, l, GPU_PLAN_L_AO_B),
                    NULL, S, H, H, CUDA_GEMM_BIAS);
            FW_CUDA((cuda_add_ln<T, R>(ao, xr, ln1, ln1 + H, S, H, eps, xr, xc, be->sms, s)));
            FW_GEMM(be_layer(be, l, GPU_PLAN_L_FF1_W), xc, ff, I, be_layer(be, l, GPU_PLAN_L_FF1_B),
                    NULL, S, I, H, ff1_epi);
            FW_GEMM(be_layer(be, l, GPU_PLAN_L_FF2_W), ff, ao, H, be_layer(be, l, GPU_PLAN_L_FF2_B),
                    NULL, S, H, I, CUDA_GEMM_BIAS);
            FW_CUDA((cuda_add_ln<T, R>(ao, xr, ln2, ln2 + H, S, H, eps, xr, xc, be->sms, s)));
        }
        be_mark(be, GPU_CUDA_PROF_GEMM);

        // Head in fp32 on the S compact rows.
        float *hx = (float *)(BIG + lo.head_x);
        if (fp32_res)
            hx = (float *)(void *)xr;
        else
            FW_CUDA(cuda_to_float<T>(xc, (size_t)S * H, hx, s));
        float *d_logits = (float *)be_slice(be, GPU_PLAN_LOGITS);
        if (cuda_head_run(&be->gemm32, hx, S, (const float *)be_slice(be, GPU_PLAN_POOL_W),
                          (const float *)be_slice(be, GPU_PLAN_POOL_B),
                          (const float *)be_slice(be, GPU_PLAN_CLS_W),
                          (const float *)be_slice(be, GPU_PLAN_CLS_B), H, L, (int)c->head_act,
                          (float *)(BIG + lo.head_pooled), d_logits, s, err, errlen) != 0)
            return 1;
        FW_CUDA(cudaMemcpyAsync(be->h_logits[slot], d_logits, (size_t)S * L * sizeof(float),
                                cudaMemcpyDeviceToHost, s));
    }
    be_mark(be, GPU_CUDA_PROF_HEAD);
    FW_CUDA(cudaEventRecord(be->t_last[slot], s));
    return 0;
}

// Queues a batch in the next free slot; the device works on it while the host goes on.
static int cuda_be_submit(gpu_backend_t *be, const gpu_batch_t *batch, char *err, size_t errlen) {
    const int slot = gpu_flight_slot(&be->flight, err, errlen);
    if (slot < 0) return 2;
    if (be->prof && be->flight.n > 0) {
        snprintf(err, errlen, "profiling times one batch at a time: collect first");
        return 2;
    }
    if (gpu_batch_check(batch, &be->model->cfg, &be->opts, err, errlen) != 0) return 2;
    if (cudaSetDevice(be->device) != cudaSuccess) {
        snprintf(err, errlen, "CUDA device %d is gone", be->device);
        return 1;
    }
    int rc = be->graph  ? cuda_be_graph_submit(be, batch, slot, err, errlen)
             : be->bf16 ? cuda_be_submit_t<__nv_bfloat16, float>(be, batch, slot, err, errlen)
                        : cuda_be_submit_t<__half, __half>(be, batch, slot, err, errlen);
    if (rc == 0) gpu_flight_push(&be->flight, slot, batch->n_seqs);
    return rc;
}

// Waits for the oldest batch in flight and copies its logits (n_seqs, L) out.
static int cuda_be_collect(gpu_backend_t *be, float *logits, char *err, size_t errlen) {
    int n_seqs;
    const int slot = gpu_flight_pop(&be->flight, &n_seqs, err, errlen);
    if (slot < 0) return 2;
    cudaSetDevice(be->device);
    cudaError_t e = cudaEventSynchronize(be->t_last[slot]);
    if (e != cudaSuccess) {
        snprintf(err, errlen, "CUDA error in the batch's work: %s", cudaGetErrorString(e));
        return 1;
    }
    memcpy(logits, be->h_logits[slot], (size_t)n_seqs * be->model->cfg.num_labels * sizeof(float));
    float fw_ms = 0;
    if (cudaEventElapsedTime(&fw_ms, be->t_first[slot], be->t_last[slot]) == cudaSuccess)
        be->device_s += fw_ms * 1e-3;
    for (int i = 1; be->prof && i < be->n_ev; i++) {
        float ms = 0;
        if (cudaEventElapsedTime(&ms, be->ev[i - 1], be->ev[i]) == cudaSuccess)
            be->prof_ms[be->ev_cat[i]] += ms;
    }
    return 0;
}

static int cuda_be_forward(gpu_backend_t *be, const gpu_batch_t *batch, float *logits, char *err,
                           size_t errlen) {
    if (gpu_flight_idle(&be->flight, err, errlen) != 0) return 2;
    int rc = cuda_be_submit(be, batch, err, errlen);
    return rc ? rc : cuda_be_collect(be, logits, err, errlen);
}

static int cuda_be_mem_stats(gpu_backend_t *be, gpu_mem_stats_t *st) {
    memset(st, 0, sizeof(*st));
    st->weights_bytes = be->graph ? cuda_be_graph_weights_bytes(be) : be->plan.weights_bytes;
    st->arena_bytes = be->graph ? cuda_be_graph_arena_bytes(be) : be->plan.arena_bytes;
    st->allocations_after_init = be->allocs_after_init;
    size_t fr = 0, tot = 0;
    cudaSetDevice(be->device);
    if (cudaMemGetInfo(&fr, &tot) == cudaSuccess) {
        st->device_used = tot - fr;
        st->device_total = tot;
    }
    return 0;
}

static double cuda_be_device_seconds(gpu_backend_t *be) {
    return be->device_s;
}

static void cuda_be_get_props(const gpu_backend_t *be, gpu_backend_props_t *p) {
    p->precision = be->prec;
    p->token_budget = be->plan.token_budget;
    p->max_seqs = be->plan.max_seqs;
    p->max_len = be->plan.max_len;
    p->padded = 0; // packed tokens (cu_seqlens)
}

static int cuda_be_init(const gpu_model_t *model, const gpu_backend_opts_t *opts,
                        gpu_backend_t **out, char *err, size_t errlen) {
    return cuda_be_init_path(model, opts, 0, NULL, out, err, errlen);
}
static int cuda_be_init_given(const gpu_model_t *model, gpu_graph_t *g,
                              const gpu_backend_opts_t *opts, gpu_backend_t **out, char *err,
                              size_t errlen) {
    return cuda_be_init_path(model, opts, 1, g, out, err, errlen);
}
extern "C" int gpu_cuda_backend_init_graph(const gpu_model_t *model, const gpu_backend_opts_t *opts,
                                           gpu_backend_t **out, char *err, size_t errlen) {
    return cuda_be_init_path(model, opts, 1, NULL, out, err, errlen);
}

static const char *const cuda_precisions[] = {"fp16", "bf16", "fp8", NULL};

extern "C" const gpu_backend_ops_t gpu_cuda_backend_ops = {
    "cuda",
    cuda_be_init,
    cuda_be_forward,
    cuda_be_mem_stats,
    cuda_be_free,
    cuda_be_device_seconds,
    cuda_be_submit,
    cuda_be_collect,
    cuda_be_get_props,
    cuda_precisions,
    cuda_be_energy_start,
    cuda_be_energy_stop,
    cuda_be_gemm_ceiling,
    NULL, // kernels: cuBLASLt's choice, nothing to add at start-up
    cuda_be_supports_op,
    cuda_be_init_given,
    cuda_be_read_tensor,
};
