/* The CUDA backend's device memory plan without a GPU (gpu/cuda/layout.c, the one the
 * backend allocates): every family's graph at every precision has a launcher for each op and
 * a layout; bert-base fp16 at 16384 tokens fits 0.5 GiB and needs no more arena than the
 * hand-written forward did; every tensor an op touches is disjoint from the others it
 * touches, and no bytes a tensor's reader needs are written by another tensor's op in
 * between (the activations share bytes by live range); bad input is refused with a message;
 * and `reclass plan-memory` prints the same total on its JSON line. Also gpu/cuda/nvml.c:
 * without a driver it says so; with one (the device) a window over 0.3 s of idle reads a
 * plausible energy and clock. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include <time.h>

#include "gpu/backend.h"
#include "gpu/cuda/cuda_backend.h"
#include "gpu/cuda/layout.h"
#include "gpu/cuda/nvml.h"
#include "gpu/model/model.h"

static int fails = 0;
#define CHECK(cond, ...)                                                                           \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            printf("FAIL line %d: ", __LINE__);                                                    \
            printf(__VA_ARGS__);                                                                   \
            printf("\n");                                                                          \
            fails++;                                                                               \
        }                                                                                          \
    } while (0)

/* The arena of the hand-written BERT forward (gpu/cuda/plan.c before the graph replaced it)
 * for bert-base, 140 labels, fp16, 16384 tokens, max len 512: the graph must not need more. */
#define HANDWRITTEN_ARENA_BERT_BASE_FP16 189300992u

static int overlap(const cg_layout_t *L, int a, int b) {
    return a >= 0 && b >= 0 && a != b && L->t[a].bytes && L->t[b].bytes &&
           L->t[a].off < L->t[b].off + L->t[b].bytes && L->t[b].off < L->t[a].off + L->t[a].bytes;
}

/* Whether op touches tensor t (reads or writes). */
static int touches(const gpu_op_t *op, int t) {
    if (op->out.t == t) return 1;
    for (int j = 0; j < GPU_OP_SRC; j++)
        if (op->src[j].t == t) return 1;
    return 0;
}

/* The layout of cfg's graph at prec: aligned, inside the allocation, and safe to run. */
static void check_layout(const char *what, const gpu_model_config_t *c, gpu_precision_t prec,
                         int budget, int max_seqs) {
    gpu_graph_t *g = NULL;
    cg_layout_t L;
    common_err_t err;
    int rc = cuda_graph_plan(c, prec, budget, gpu_backend_max_seqs(budget, max_seqs), c->max_pos,
                             &g, &L, &err);
    CHECK(rc == 0, "%s %s: %s", what, gpu_precision_name(prec), err.message);
    if (rc) return;
    for (int t = 0; t < g->n_tensors; t++) {
        CHECK(L.t[t].off % CG_ALIGN == 0, "%s: tensor %s unaligned", what, g->tensor[t].name);
        CHECK(L.t[t].off + L.t[t].bytes <= L.o_in, "%s: tensor %s past the tensors' region", what,
              g->tensor[t].name);
        for (int u = 0; u < g->n_tensors; u++) /* only activations share bytes */
            if (overlap(&L, t, u))
                CHECK(g->tensor[t].cls == GPU_TENSOR_ACT && g->tensor[u].cls == GPU_TENSOR_ACT,
                      "%s: %s overlaps %s", what, g->tensor[t].name, g->tensor[u].name);
    }
    for (int j = 0; j < g->n_ops; j++) {
        const gpu_op_t *op = &g->op[j];
        for (int t = 0; t < g->n_tensors; t++) /* what one op touches is disjoint */
            for (int u = t + 1; u < g->n_tensors && touches(op, t); u++)
                CHECK(!touches(op, u) || !overlap(&L, t, u),
                      "%s: %s touches %s and %s, overlapping", what, op->name, g->tensor[t].name,
                      g->tensor[u].name);
        for (int s = 0; s < GPU_OP_SRC; s++) { /* a read sees its tensor's last write */
            const int t = op->src[s].t;
            int i = j - 1;
            while (t >= 0 && i >= 0 && g->op[i].out.t != t)
                i--;
            for (int k = i + 1; t >= 0 && i >= 0 && k < j; k++)
                CHECK(!overlap(&L, g->op[k].out.t, t),
                      "%s: %s writes %s over %s before %s reads it", what, g->op[k].name,
                      g->tensor[g->op[k].out.t].name, g->tensor[t].name, op->name);
        }
    }
    CHECK(L.o_ws + L.ws_bytes == L.total_bytes && L.o_in >= L.o_act + L.act_bytes,
          "%s: regions out of order", what);
    cg_layout_free(&L);
    gpu_graph_free(g);
}

/* Every family's graph, at every precision, has a launcher for each of its ops, and its one
 * allocation is laid out (fp8 weights under fp16's) safely. */
static void check_graph_plans(void) {
    static const char *const geos[] = {"bert-base",      "distilbert-base", "roberta-base",
                                       "xlmr-base",      "electra-small",   "modernbert-base",
                                       "deberta-v3-base"};
    static const char *const precs[] = {"fp16", "bf16", "fp8"};
    for (size_t i = 0; i < sizeof geos / sizeof geos[0]; i++) {
        gpu_model_config_t c;
        common_err_t err;
        size_t w16 = 0;
        CHECK(gpu_model_geometry(geos[i], 140, &c) == 0, "%s geometry", geos[i]);
        for (int p = 0; p < 3; p++) {
            size_t w = 0, total = 0;
            int rc = gpu_cuda_graph_plan(&c, precs[p], 16384, 0, 512, &w, &total, &err);
            CHECK(rc == 0, "%s %s graph on cuda: %s", geos[i], precs[p], err.message);
            if (rc) continue;
            printf("cuda graph %-16s %-4s weights %zu B, one allocation %zu B\n", geos[i], precs[p],
                   w, total);
            CHECK(w > 0 && total > w, "%s %s: empty layout", geos[i], precs[p]);
            if (p == 0) w16 = w;
            if (p == 2) CHECK(w <= w16, "%s: fp8 weights %zu B over fp16's %zu B", geos[i], w, w16);
            gpu_precision_t pr;
            gpu_precision_parse(precs[p], &pr);
            check_layout(geos[i], &c, pr, 16384, 0 /* by the budget */);
            check_layout(geos[i], &c, pr, 100, 100);
        }
    }
}

int main(void) {
    check_graph_plans();
    gpu_model_config_t base;
    CHECK(gpu_model_geometry("bert-base", 140, &base) == 0, "bert-base geometry");
    if (fails) return 1;

    gpu_mem_plan_t p;
    common_err_t err;
    gpu_backend_opts_t o = {.token_budget = 16384, .max_len = 512, .precision = "fp16"};
    CHECK(gpu_backend_plan_memory("cuda", &base, &o, &p, &err) == 0, "%s", err.message);
    double gib = (double)p.total_bytes / (double)(1u << 30);
    printf("bert-base fp16 16384: weights %zu + arena %zu = %zu B (%.3f GiB); the hand-written "
           "forward's arena %u B\n",
           p.weights_bytes, p.arena_bytes, p.total_bytes, gib, HANDWRITTEN_ARENA_BERT_BASE_FP16);
    CHECK(p.total_bytes <= (size_t)1 << 29, "bert-base at 16384 tokens needs %.3f GiB > 0.5", gib);
    CHECK(p.arena_bytes <= HANDWRITTEN_ARENA_BERT_BASE_FP16, "arena %zu B over the hand-written %u",
          p.arena_bytes, HANDWRITTEN_ARENA_BERT_BASE_FP16);
    CHECK(p.weights_bytes + p.arena_bytes == p.total_bytes, "weights + arena != total");
    size_t sum = 0;
    for (int i = 0; i < p.n; i++)
        sum += p.slice[i].bytes;
    CHECK(sum == p.total_bytes, "components add up to %zu B, not %zu", sum, p.total_bytes);
    /* Weights: every parameter once in 2 bytes (LayerNorm and head biases in 4), give or take
     * alignment and the unused token type rows. */
    size_t params = gpu_model_param_count(&base);
    size_t head = (768 * 768 + 140 * 768) * 2; /* the head is fp32: 2 more bytes each */
    CHECK(p.weights_bytes >= params * 2 + head - 768 * 2 &&
              p.weights_bytes <= params * 2 + head + (1u << 20),
          "weights %zu B for %zu parameters", p.weights_bytes, params);
    CHECK(p.max_seqs == 8192 && p.max_len == 512, "defaults %d %d", p.max_seqs, p.max_len);

    gpu_mem_plan_t q;
    o.token_budget = 32768;
    CHECK(gpu_backend_plan_memory("cuda", &base, &o, &q, &err) == 0, "%s", err.message);
    CHECK(q.weights_bytes == p.weights_bytes && q.arena_bytes > p.arena_bytes,
          "arena must grow with the budget, weights not");
    o.token_budget = 0;
    CHECK(gpu_backend_plan_memory("cuda", &base, &o, &q, &err) == COMMON_USAGE &&
              strstr(err.message, "budget"),
          "zero budget accepted");
    o.token_budget = 1024, o.precision = "fp32";
    CHECK(gpu_backend_plan_memory("cuda", &base, &o, &q, &err) == COMMON_USAGE &&
              strstr(err.message, "fp16"),
          "fp32 accepted");
    o.precision = "fp16", o.max_len = 513;
    CHECK(gpu_backend_plan_memory("cuda", &base, &o, &q, &err) == COMMON_USAGE,
          "max_len above positions accepted");

    /* The command prints the same total on its last (JSON) line. */
    char cmd[1024], line[4096], last[4096] = "";
    snprintf(cmd, sizeof(cmd),
             "'%s' plan-memory --geometry bert-base --labels 140 --token-budget 16384 "
             "--precision fp16 --max-len 512",
             RECLASS_BIN);
    FILE *f = popen(cmd, "r");
    CHECK(f != NULL, "popen");
    if (f) {
        while (fgets(line, sizeof(line), f)) {
            fputs(line, stdout);
            snprintf(last, sizeof(last), "%s", line);
        }
        CHECK(pclose(f) == 0, "plan-memory exit status");
        char want[64];
        snprintf(want, sizeof(want), "\"total_bytes\":%zu", p.total_bytes);
        CHECK(last[0] == '{' && strstr(last, want), "JSON line lacks %s", want);
    }
    snprintf(cmd, sizeof(cmd), "'%s' plan-memory --geometry bert-huge --token-budget 8 2>&1",
             RECLASS_BIN);
    f = popen(cmd, "r");
    if (f) {
        while (fgets(line, sizeof(line), f))
            fputs(line, stdout);
        int st = pclose(f);
        CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 2, "unknown geometry must exit 2");
    }
    snprintf(cmd, sizeof(cmd), "'%s' plan-memory --model '%s' --token-budget 4096 | tail -1",
             RECLASS_BIN, RECLASS_DEMO_MODEL);
    f = popen(cmd, "r");
    if (f) {
        last[0] = 0;
        while (fgets(line, sizeof(line), f))
            snprintf(last, sizeof(last), "%s", line);
        pclose(f);
        printf("%s", last);
        CHECK(strstr(last, "\"total_bytes\":") != NULL, "--model plan has no JSON line");
    }
    CHECK(gpu_nvml_joules(NULL) == -1 && gpu_nvml_sm_mhz(NULL) == -1, "NVML without a device");
    gpu_nvml_t *nv = NULL;
    if (gpu_nvml_init(NULL, &nv) == 0) {
        gpu_nvml_window_t w;
        gpu_nvml_window_start(&w, nv);
        struct timespec ts = {0, 300 * 1000 * 1000};
        nanosleep(&ts, NULL);
        int mhz = gpu_nvml_window_stop(&w);
        printf("NVML: %.2f J in %.3f s (%.1f W idle-ish), SM clock median %d MHz\n", w.joules,
               w.seconds, w.joules / w.seconds, mhz);
        CHECK(w.seconds >= 0.3 && w.joules >= 0 && w.joules / w.seconds < 2000 && mhz > 0,
              "NVML window: %.3f J, %.3f s, %d MHz", w.joules, w.seconds, mhz);
        gpu_nvml_free(nv);
    } else {
        printf("NVML: not available here (no driver): the benches print no energy\n");
    }
    printf("%s\n", fails ? "FAILED" : "PASSED");
    return fails ? 1 : 0;
}
