/* Parity of the graph's ops (gpu/graph.h), ggml's test-backend-ops in our terms: a table of
 * op variants x precisions x backends. Each row is a one-op graph (after a copy op that puts
 * its random input into an activation tensor) run through the backend's init_graph on a
 * packed batch of four sequences, its output read back and compared with the fp32 reference
 * ops of tests/lib on the operands the precision rounds (fp16 / bf16 / E4M3 for a linear
 * op). A row is skipped where the backend is not built, has no device here, or its table
 * says it does not run it (its precisions, supports_op: never guessed from an init error);
 * a 16-bit op of the BERT path the backend lacks, or any failing init, fails. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu/backend.h"
#include "gpu/cpu/cpu_gemm_bf16.h"
#include "gpu/cuda/cuda_backend.h"
#include "gpu/families/family.h"
#include "gpu/model/fp8.h"
#include "tests/lib/ref_ops.h"

enum {
    EMBED,
    NORM,
    NORM_COPY,
    LIN_BIAS,
    LIN_GELU,
    LIN_GELU_TANH,
    LIN_RELU,
    LIN_TANH,
    LIN_GLU,
    LIN_RES,
    LIN_RES_NORM,
    NORM_LIN,
    NORM_FFN,
    ATT_FULL,
    ATT_WINDOW,
    ATT_ROPE,
    ATT_ROPE_WINDOW,
    ATT_FIRST,
    ATT_ROPE_FIRST,
    ATT_REL,
    ATT_REL_FIRST,
    POOL_CLS,
    POOL_MEAN,
    N_CASES
};

static const char *const case_name[N_CASES] = {"embed",
                                               "norm",
                                               "norm (copy)",
                                               "linear bias",
                                               "linear gelu",
                                               "linear gelu_new",
                                               "linear relu",
                                               "linear tanh",
                                               "linear glu gelu",
                                               "linear residual",
                                               "linear residual + norm",
                                               "norm then linear",
                                               "norm, ffn (gelu_new)",
                                               "attention full",
                                               "attention window 2",
                                               "attention rope",
                                               "attention rope + window 3",
                                               "attention first token",
                                               "attention rope first token",
                                               "attention c2p p2c",
                                               "attention c2p p2c first token",
                                               "pool cls",
                                               "pool mean"};

#define NSEQ 4
static const int32_t cu[NSEQ + 1] = {0, 5, 14, 15, 27}; /* lengths 5, 9, 1, 12 */
#define NTOK     27
#define BUDGET   64
#define NOUT     96 /* a linear op's outputs */
#define REL_SPAN 8
static int32_t ids[NTOK]; /* the batch's token ids */

typedef struct {
    gpu_graph_t *g;
    int out;           /* the tensor compared */
    size_t rows, cols; /* its rows read back */
    float *ref;        /* (rows, cols) expected */
    float *slack;      /* (rows, cols) room beyond the precision's tolerance, or NULL */
} built_t;

/* The random tensors a test built: weights the graph points at, freed when the test ends. */
static void *owned[1024];
static int n_owned;
static void owned_free(void) {
    while (n_owned > 0)
        free(owned[--n_owned]);
}

static float *rnd(size_t n, float scale, unsigned *seed) {
    float *x = malloc(sizeof(float) * n);
    assert_non_null(x);
    assert_true(n_owned < (int)(sizeof owned / sizeof owned[0]));
    owned[n_owned++] = x;
    for (size_t i = 0; i < n; i++) {
        *seed = *seed * 1103515245u + 12345u;
        x[i] = scale * ((float)((*seed >> 8) & 0xFFFF) / 32768.0f - 1.0f);
    }
    return x;
}

/* An activation tensor holding data (rows, cols): a weight tensor copied in by a copy op. */
static int input(gpu_gb_t *b, const char *name, gpu_rows_kind_t kind, const float *data, int rows,
                 int cols) {
    const int src = gpu_gb_weight(b, name, data, rows, cols, 1),
              x = gpu_gb_act(b, name, kind, cols);
    gpu_gb_norm(b, "copy", -1, gpu_gb_view(x, 0), gpu_gb_view(src, 0), -1, -1, cols)->prec =
        GPU_PREC_FP32;
    return x;
}

static gpu_act_t act_of(int c) {
    return c == LIN_GELU_TANH ? GPU_ACT_GELU_TANH
           : c == LIN_RELU    ? GPU_ACT_RELU
           : c == LIN_TANH    ? GPU_ACT_TANH
                              : GPU_ACT_GELU;
}

/* storage: the backend's activation storage at prec fp8 (gpu_graph_build's: fp32 on the CPU
 * reference, fp16 on CUDA), which the reference rounds a linear's input rows to. */
static void build(const gpu_model_t *m, int c, gpu_precision_t prec, gpu_precision_t storage,
                  built_t *o, unsigned seed) {
    *o = (built_t){0};
    gpu_model_config_t cfg = m->cfg;
    const int H = cfg.hidden, hd = H / cfg.heads;
    gpu_gb_t b = {.g = gpu_graph_new(&cfg, prec, 32),
                  .w = &m->w,
                  .prec = prec,
                  .storage = prec == GPU_PREC_FP8 ? GPU_PREC_FP32 : prec};
    assert_non_null(b.g);
    o->g = b.g;
    const float *x = rnd((size_t)NTOK * 3 * H, 1.0f, &seed); /* (tokens, 3H) any op's input */
    if (c == EMBED) {
        o->out = gpu_gb_embed(&b, 1, 1);
        o->rows = NTOK, o->cols = (size_t)cfg.emb_size;
        o->ref = malloc(sizeof(float) * o->rows * o->cols);
        gpu_ref_embed_ln(m, ids, cu, NSEQ, o->ref);
        return;
    }
    if (c == NORM || c == NORM_COPY) {
        const int in = input(&b, "in", GPU_ROWS_TOKENS, x, NTOK, H);
        const float *g = rnd((size_t)H, 1.0f, &seed), *be = rnd((size_t)H, 0.5f, &seed);
        o->out = gpu_gb_act(&b, "y", GPU_ROWS_TOKENS, H);
        gpu_gb_norm(&b, "norm", -1, gpu_gb_view(o->out, 0), gpu_gb_view(in, 0),
                    c == NORM ? gpu_gb_weight(&b, "g", g, 1, H, 1) : -1,
                    c == NORM ? gpu_gb_weight(&b, "b", be, 1, H, 1) : -1, H);
        o->rows = NTOK, o->cols = (size_t)H;
        o->ref = malloc(sizeof(float) * NTOK * H);
        memcpy(o->ref, x, sizeof(float) * NTOK * H);
        float *zero = calloc((size_t)NTOK * H, sizeof(float));
        if (c == NORM) gpu_ref_add_ln(o->ref, zero, g, be, NTOK, H, cfg.ln_eps);
        free(zero);
        return;
    }
    /* a LayerNorm feeding a linear: CUDA's FP8 writes its codes there. FFN: a second linear
     * reads the first's GELU rows, at fp8 under their static scale (the first GEMM writes the
     * codes itself on CUDA) */
    if (c == NORM_LIN || c == NORM_FFN) {
        const int K = H, N = NOUT, ffn = c == NORM_FFN;
        const int in = input(&b, "in", GPU_ROWS_TOKENS, x, NTOK, K);
        const float *g = rnd((size_t)K, 1.0f, &seed), *be = rnd((size_t)K, 0.5f, &seed);
        const float *w = rnd((size_t)N * K, 0.1f, &seed), *bias = rnd((size_t)N, 0.1f, &seed);
        const int h = gpu_gb_act(&b, "h", GPU_ROWS_TOKENS, K);
        gpu_gb_norm(&b, "norm", -1, gpu_gb_view(h, 0), gpu_gb_view(in, 0),
                    gpu_gb_weight(&b, "g", g, 1, K, 1), gpu_gb_weight(&b, "b", be, 1, K, 1), K);
        const int z = gpu_gb_act(&b, ffn ? "z" : "y", GPU_ROWS_TOKENS, N);
        gpu_gb_linear(&b, "linear", -1, prec, gpu_gb_view(z, 0), gpu_gb_view(h, 0),
                      gpu_gb_weight(&b, "w", w, N, K, 0), gpu_gb_weight(&b, "bias", bias, 1, N, 0),
                      N, K, ffn ? GPU_EPI_ACT : GPU_EPI_BIAS, GPU_ACT_GELU_TANH);
        const float *w2 = rnd((size_t)K * N, 0.1f, &seed), *b2 = rnd((size_t)K, 0.1f, &seed);
        o->out = z;
        if (ffn) {
            o->out = gpu_gb_act(&b, "y", GPU_ROWS_TOKENS, K);
            gpu_gb_linear(&b, "linear2", -1, prec, gpu_gb_view(o->out, 0), gpu_gb_view(z, 0),
                          gpu_gb_weight(&b, "w2", w2, K, N, 0),
                          gpu_gb_weight(&b, "b2", b2, 1, K, 0), K, N, GPU_EPI_BIAS, GPU_ACT_GELU);
        }
        float *hr = malloc(sizeof(float) * NTOK * K), *wr = malloc(sizeof(float) * N * K);
        float *zero = calloc((size_t)NTOK * K, sizeof(float));
        for (size_t i = 0; i < (size_t)NTOK * K; i++) /* CUDA's fp8 stores its input fp16 */
            hr[i] =
                prec == GPU_PREC_FP8 && storage == GPU_PREC_FP16 ? gpu_ref_fp16_round(x[i]) : x[i];
        gpu_ref_add_ln(hr, zero, g, be, NTOK, K, cfg.ln_eps);
        /* FP8 quantizes the LayerNorm's row as stored (CUDA's fused LayerNorm too) */
        gpu_ref_round_rows(prec, storage, hr, NTOK, K, hr);
        gpu_ref_round_rows(prec, GPU_PREC_FP32, w, N, K, wr);
        o->rows = NTOK, o->cols = (size_t)(ffn ? K : N);
        o->ref = malloc(sizeof(float) * NTOK * (K > N ? K : N));
        float *zr = malloc(sizeof(float) * NTOK * N), *w2r = malloc(sizeof(float) * K * N);
        gpu_ref_linear(hr, wr, bias, NTOK, K, N, ffn ? zr : o->ref);
        if (ffn) { /* z as stored, then its E4M3 values under the static scale */
            const float s = gpu_graph_fp8_static_scale(b.g, b.g->n_ops - 1);
            gpu_ref_act(zr, (size_t)NTOK * N, GPU_ACT_GELU_TANH);
            for (size_t i = 0; prec == GPU_PREC_FP8 && i < (size_t)NTOK * N; i++)
                if (storage == GPU_PREC_FP16) zr[i] = gpu_ref_fp16_round(zr[i]);
            /* an element of z at an E4M3 rounding midpoint takes either code, as the GEMMs'
             * summation order falls: its one-code step times |w2| is room on each output */
            float *lo = malloc(sizeof(float) * N), *hi = malloc(sizeof(float) * N);
            if (prec == GPU_PREC_FP8) o->slack = calloc((size_t)NTOK * K, sizeof(float));
            for (int t = 0; prec == GPU_PREC_FP8 && t < NTOK; t++) {
                float *zt = zr + (size_t)t * N;
                for (int k = 0; k < N; k++)
                    lo[k] = zt[k] * (1.0f - 2e-3f), hi[k] = zt[k] * (1.0f + 2e-3f);
                gpu_fp8_fake_row_static(lo, N, s, lo);
                gpu_fp8_fake_row_static(hi, N, s, hi);
                gpu_fp8_fake_row_static(zt, N, s, zt);
                for (int k = 0; k < N; k++) {
                    const float step = fabsf(hi[k] - lo[k]);
                    for (int j = 0; step > 0 && j < K; j++)
                        o->slack[(size_t)t * K + j] += step * fabsf(w2[(size_t)j * N + k]);
                }
            }
            free(lo), free(hi);
            if (prec != GPU_PREC_FP8) gpu_ref_round_rows(prec, storage, zr, NTOK, N, zr);
            gpu_ref_round_rows(prec, GPU_PREC_FP32, w2, K, N, w2r);
            gpu_ref_linear(zr, w2r, b2, NTOK, N, K, o->ref);
        }
        free(zr), free(w2r);
        free(hr), free(wr), free(zero);
        return;
    }
    if (c >= LIN_BIAS && c <= LIN_RES_NORM) {
        const int K = H, N = NOUT;
        const int in = input(&b, "in", GPU_ROWS_TOKENS, x, NTOK, K);
        const float *w = rnd((size_t)N * K, 0.1f, &seed), *bias = rnd((size_t)N, 0.1f, &seed);
        const float *y0 = rnd((size_t)NTOK * N, 1.0f, &seed);
        const int res = c == LIN_RES || c == LIN_RES_NORM;
        o->out = res ? input(&b, "y", GPU_ROWS_TOKENS, y0, NTOK, N)
                     : gpu_gb_act(&b, "y", GPU_ROWS_TOKENS, N);
        gpu_epi_t epi = c == LIN_BIAS  ? GPU_EPI_BIAS
                        : c == LIN_GLU ? GPU_EPI_GLU
                        : res          ? GPU_EPI_RESIDUAL
                                       : GPU_EPI_ACT;
        gpu_gb_linear(&b, "linear", -1, prec, gpu_gb_view(o->out, 0), gpu_gb_view(in, 0),
                      gpu_gb_weight(&b, "w", w, N, K, 0), gpu_gb_weight(&b, "bias", bias, 1, N, 0),
                      N, K, epi, act_of(c));
        /* a post-norm layer's residual sum and its LayerNorm (one pass on CUDA's bf16) */
        const float *lg = rnd((size_t)N, 1.0f, &seed), *lb = rnd((size_t)N, 0.5f, &seed);
        if (c == LIN_RES_NORM)
            gpu_gb_norm(&b, "norm", -1, gpu_gb_view(o->out, 0), gpu_gb_view(o->out, 0),
                        gpu_gb_weight(&b, "g", lg, 1, N, 1), gpu_gb_weight(&b, "b", lb, 1, N, 1),
                        N);
        float *xr = malloc(sizeof(float) * NTOK * K), *wr = malloc(sizeof(float) * N * K);
        gpu_ref_round_rows(prec, storage, x, NTOK, K, xr);
        gpu_ref_round_rows(prec, GPU_PREC_FP32, w, N, K, wr); /* weights: the model's fp32 values */
        o->rows = NTOK, o->cols = (size_t)N; /* GLU: its last N/2 columns are scratch */
        float *z = malloc(sizeof(float) * NTOK * N);
        gpu_ref_linear(xr, wr, bias, NTOK, K, N, z);
        o->ref = malloc(sizeof(float) * NTOK * N);
        for (int t = 0; t < NTOK; t++)
            for (int j = 0; j < N; j++) {
                float v = z[(size_t)t * N + j];
                if (epi == GPU_EPI_GLU && j >= N / 2) v = NAN; /* not compared */
                if (epi == GPU_EPI_ACT || epi == GPU_EPI_GLU) gpu_ref_act(&v, 1, act_of(c));
                if (epi == GPU_EPI_GLU && j < N / 2) v *= z[(size_t)t * N + N / 2 + j];
                if (epi == GPU_EPI_RESIDUAL) v += y0[(size_t)t * N + j];
                o->ref[(size_t)t * o->cols + j] = v;
            }
        if (c == LIN_RES_NORM) {
            float *zero = calloc((size_t)NTOK * N, sizeof(float));
            gpu_ref_add_ln(o->ref, zero, lg, lb, NTOK, N, cfg.ln_eps);
            free(zero);
        }
        free(xr), free(wr), free(z);
        return;
    }
    if (c >= ATT_FULL && c <= ATT_REL_FIRST) {
        const int first = c == ATT_FIRST || c == ATT_ROPE_FIRST || c == ATT_REL_FIRST,
                  rel = c == ATT_REL || c == ATT_REL_FIRST;
        const int qkv = input(&b, "qkv", GPU_ROWS_TOKENS, x, NTOK, 3 * H);
        int q = qkv;
        if (first) {
            q = gpu_gb_act(&b, "q.first", GPU_ROWS_SEQS, H);
            gpu_op_t *p = gpu_gb_op(&b, 0, GPU_OP_POOL, "first", -1);
            p->out = gpu_gb_view(q, 0), p->src[0] = gpu_gb_view(qkv, 0), p->n = H;
            p->prec = GPU_PREC_FP32;
        }
        o->out = gpu_gb_act(&b, "ctx", first ? GPU_ROWS_SEQS : GPU_ROWS_TOKENS, H);
        gpu_op_t *a = gpu_gb_op(&b, 0, GPU_OP_ATTENTION, "attn", -1);
        a->out = gpu_gb_view(o->out, 0), a->src[0] = gpu_gb_view(q, 0);
        a->src[1] = gpu_gb_view(qkv, H), a->src[2] = gpu_gb_view(qkv, 2 * H);
        a->heads = cfg.heads, a->head_dim = hd;
        a->window = c == ATT_WINDOW ? 2 : c == ATT_ROPE_WINDOW ? 3 : 0;
        a->rope_theta = c == ATT_ROPE || c == ATT_ROPE_WINDOW || c == ATT_ROPE_FIRST ? 1e4f : 0.f;
        gpu_ref_attn_t r = {.heads = cfg.heads,
                            .head_dim = hd,
                            .window = a->window,
                            .rope_theta = a->rope_theta,
                            .scale_factor = 1};
        if (rel) {
            const float *pk = rnd((size_t)2 * REL_SPAN * H, 1.0f, &seed);
            const float *pq = rnd((size_t)2 * REL_SPAN * H, 1.0f, &seed);
            a->w[0] = gpu_gb_weight(&b, "pk", pk, 2 * REL_SPAN, H, 0);
            a->w[1] = gpu_gb_weight(&b, "pq", pq, 2 * REL_SPAN, H, 0);
            a->scale_factor = 3, a->rel_span = REL_SPAN, a->rel_buckets = 8, a->rel_max_pos = 16;
            r.pk = pk, r.pq = pq, r.rel = a, r.scale_factor = 3;
        }
        o->rows = first ? NSEQ : NTOK, o->cols = (size_t)H;
        o->ref = malloc(sizeof(float) * NTOK * H);
        for (int s = 0; s < NSEQ; s++) {
            const float *sq = x + (size_t)cu[s] * 3 * H;
            const int len = cu[s + 1] - cu[s];
            gpu_ref_attention_op(&r, sq, 3 * H, first ? 1 : len, sq + H, sq + 2 * H, 3 * H, len,
                                 o->ref + (size_t)(first ? s : cu[s]) * H, H);
        }
        return;
    }
    /* pool */
    const int in = input(&b, "in", GPU_ROWS_TOKENS, x, NTOK, H);
    o->out = gpu_gb_act(&b, "pooled", GPU_ROWS_SEQS, H);
    gpu_op_t *p = gpu_gb_op(&b, 0, GPU_OP_POOL, "pool", -1);
    p->out = gpu_gb_view(o->out, 0), p->src[0] = gpu_gb_view(in, 0), p->n = H;
    p->pool = c == POOL_MEAN ? GPU_POOL_MEAN : GPU_POOL_CLS;
    o->rows = NSEQ, o->cols = (size_t)H;
    o->ref = calloc((size_t)NSEQ * H, sizeof(float));
    for (int s = 0; s < NSEQ; s++)
        for (int j = 0; j < H; j++) {
            const int len = cu[s + 1] - cu[s];
            double sum = 0;
            for (int t = 0; t < (c == POOL_MEAN ? len : 1); t++)
                sum += x[(size_t)(cu[s] + t) * H + j];
            o->ref[(size_t)s * H + j] = (float)(sum / (c == POOL_MEAN ? len : 1));
        }
}

/* |got - want| <= tol (1 + |want|): the precision's tolerance, a backend's storage included. */
static double tolerance(gpu_precision_t p) {
    return p == GPU_PREC_FP32 ? 1e-4 : p == GPU_PREC_FP8 ? 5e-3 : 2e-2;
}

/* The cases the BERT families' graphs use (bert, distilbert, roberta, xlm-r, electra): a
 * backend that lists a 16-bit precision must run them at it. */
static const int bert_op[N_CASES] = {
    [EMBED] = 1,         [NORM] = 1,      [LIN_BIAS] = 1, [LIN_GELU] = 1,
    [LIN_GELU_TANH] = 1, [LIN_RELU] = 1,  [LIN_RES] = 1,  [LIN_RES_NORM] = 1,
    [ATT_FULL] = 1,      [ATT_FIRST] = 1, [POOL_CLS] = 1};

/* 1 where the cuda backend is built but no device is here (its rows are skipped). */
static int no_device(void) {
#ifdef RECLASS_HAVE_CUDA
    return gpu_cuda_device_count() == 0;
#else
    return 1;
#endif
}

static void test_parity(void **state) {
    (void)state;
    gpu_model_t *m = NULL;
    common_err_t err;
    assert_int_equal(gpu_model_init_random("bert-mini", 3, 7, &m, &err), 0);
    for (int t = 0; t < NTOK; t++)
        ids[t] = (t * 7919) % m->cfg.vocab_size;
    const gpu_batch_t batch = {
        .ids = ids, .cu_seqlens = cu, .n_seqs = NSEQ, .n_tokens = NTOK, .max_len = 12};
    const gpu_precision_t precs[] = {GPU_PREC_FP32, GPU_PREC_FP16, GPU_PREC_BF16, GPU_PREC_FP8};
    const char *const backends[] = {"cpu", "cuda"};
    int fails = 0, runs = 0;
    printf("%-32s %-5s %-5s %s\n", "op", "prec", "backend", "max |delta| / result");
    for (int c = 0; c < N_CASES; c++)
        for (size_t pi = 0; pi < sizeof precs / sizeof precs[0]; pi++) {
            const gpu_precision_t prec = precs[pi];
            const int linear = c >= LIN_BIAS && c <= NORM_FFN;
            if (prec == GPU_PREC_FP8 && !linear) continue; /* fp8 is a linear op's precision */
            for (size_t bi = 0; bi < 2; bi++) {
                const gpu_backend_ops_t *ops = gpu_backend_find(backends[bi], &err);
                printf("%-32s %-5s %-7s ", case_name[c], gpu_precision_name(prec), backends[bi]);
                fflush(stdout);
                if (!ops || !ops->init_graph) {
                    printf("skip: %s\n", ops ? "no init_graph" : "not built");
                    continue;
                }
                /* What the backend runs, as its table says: its precisions, supports_op. */
                if (!gpu_backend_precision(ops, gpu_precision_name(prec))) {
                    printf("skip: no precision %s\n", gpu_precision_name(prec));
                    continue;
                }
                built_t o;
                build(m, c, prec, bi == 1 ? GPU_PREC_FP16 : GPU_PREC_FP32, &o, 1234u + (unsigned)c);
                if (gpu_graph_check(o.g, backends[bi], ops->supports_op, &err) != 0) {
                    /* a 16-bit BERT op the backend lacks is a failure, not a skip */
                    const int must = bert_op[c] && prec != GPU_PREC_FP32 && prec != GPU_PREC_FP8;
                    printf("%s: %s\n", must ? "FAIL" : "skip", err.message);
                    fails += must;
                    gpu_graph_free(o.g);
                    free(o.ref), free(o.slack);
                    continue;
                }
                gpu_backend_opts_t bo = {.token_budget = BUDGET,
                                         .max_len = 0,
                                         .max_seqs = 8,
                                         .threads = 1,
                                         .precision = gpu_precision_name(prec)};
                gpu_backend_t *be = NULL;
                if (ops->init_graph(m, o.g, &bo, &be, &err) != 0) {
                    const int absent = bi == 1 && no_device(); /* else it said it runs it */
                    printf("%s: %s\n", absent ? "skip" : "FAIL", err.message);
                    fails += !absent;
                    free(o.ref), free(o.slack);
                    continue;
                }
                float *logits = calloc(8 * (size_t)m->cfg.num_labels, sizeof(float));
                float *got = malloc(sizeof(float) * o.rows * o.cols);
                int rc = ops->forward(be, &batch, logits, &err);
                if (rc == 0) rc = ops->read_tensor(be, o.out, o.rows, got, &err);
                double worst = 0;
                int bad = rc != 0;
                for (size_t i = 0; rc == 0 && i < o.rows * o.cols; i++) {
                    if (isnan(o.ref[i])) continue;
                    const double d = fabs((double)got[i] - o.ref[i]);
                    if (d > worst) worst = d;
                    const double room = o.slack ? o.slack[i] : 0.0;
                    if (!(d <= tolerance(prec) * (1 + fabs(o.ref[i])) + room)) bad = 1;
                }
                printf("%.3g %s%s\n", worst, bad ? "FAIL" : "ok", rc ? err.message : "");
                fails += bad;
                runs++;
                ops->free(be);
                free(logits), free(got), free(o.ref), free(o.slack);
            }
        }
    printf("%d rows run, %d failed\n", runs, fails);
    gpu_model_free(m);
    owned_free();
    assert_int_equal(fails, 0);
    assert_true(runs >= N_CASES);
}

/* A backend that lacks an op says which, by name, at init: the cpu runs fp8 only as a linear
 * op's precision, so an attention op at fp8 is refused naming it. */
static void test_lacking_op_named(void **state) {
    (void)state;
    gpu_model_t *m = NULL;
    common_err_t err;
    assert_int_equal(gpu_model_init_random("bert-mini", 3, 7, &m, &err), 0);
    unsigned seed = 99;
    built_t o;
    build(m, ATT_FULL, GPU_PREC_FP32, GPU_PREC_FP32, &o, seed);
    for (int i = 0; i < o.g->n_ops; i++)
        if (o.g->op[i].kind == GPU_OP_ATTENTION) o.g->op[i].prec = GPU_PREC_FP8;
    const gpu_backend_ops_t *cpu = gpu_backend_find("cpu", &err);
    gpu_backend_opts_t bo = {
        .token_budget = BUDGET, .max_seqs = 8, .threads = 1, .precision = "fp8"};
    gpu_backend_t *be = NULL;
    assert_int_not_equal(cpu->init_graph(m, o.g, &bo, &be, &err), 0);
    assert_null(be);
    printf("%s\n", err.message);
    assert_non_null(strstr(err.message, "the cpu backend lacks attn: attention"));
    assert_non_null(strstr(err.message, "fp8"));
    free(o.ref), free(o.slack); /* o.g went to init_graph, which frees it on failure */
    gpu_model_free(m);
    owned_free();
}

/* A builder that runs past the graph's room is a bug the library reports, never prints or
 * aborts on: the first overrun is named in b.overflow (gpu_graph_build's error), later tensors
 * are index 0 and later ops the spill slot, so the builder returns. */
static void test_builder_overflow_noted(void **state) {
    (void)state;
    gpu_model_config_t cfg = {.hidden = 8, .ln_eps = 1e-5f};
    gpu_gb_t b = {.g = gpu_graph_new(&cfg, GPU_PREC_FP32, 2), .prec = GPU_PREC_FP32};
    assert_non_null(b.g);
    assert_int_equal(gpu_gb_const(&b, "a", 1, 8), 0);
    assert_int_equal(gpu_gb_const(&b, "b", 1, 8), 1);
    assert_string_equal(b.overflow, "");
    assert_int_equal(gpu_gb_const(&b, "c", 1, 8), 0);
    assert_string_equal(b.overflow, "more than 2 tensors");
    b.overflow[0] = 0;
    for (int i = 0; i < 3; i++)
        assert_non_null(gpu_gb_op(&b, 1, GPU_OP_NORM, "n", -1));
    assert_int_equal(b.g->n_prelude, 2);
    assert_string_equal(b.overflow, "more than 2 prelude ops");
    gpu_graph_free(b.g);
}

int main(void) {
    /* the bf16 kernel is picked once per process, by a probe that must not run under cmocka's
     * signal handlers */
    (void)gpu_cpu_bf16_best();
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_parity),
                                       cmocka_unit_test(test_lacking_op_named),
                                       cmocka_unit_test(test_builder_overflow_noted)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
