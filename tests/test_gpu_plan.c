/* gpu/cuda/plan.c without a GPU: bert-base fp16 at 16384 tokens fits 0.5 GiB; slices are
 * aligned, in order and disjoint; the shared buffer holds every use the backend makes of
 * it; bad input is refused with a message; and `reclass plan-memory` prints the same
 * total on its JSON line. Also gpu/cuda/nvml.c: without a driver it says so; with one (the
 * device) a window over 0.3 s of idle reads a plausible energy and clock. fp8 adds to the fp16
 * plan exactly the scales and the E4M3 input buffer its projections need. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include <time.h>

#include "gpu/model/model.h"
#include "gpu/cuda/nvml.h"
#include "gpu/cuda/plan.h"
#include "gpu/model/fp8.h"
#ifdef RECLASS_HAVE_CUDA
#include "gpu/cuda/cuda_backend.h"
#endif

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

static void check_layout(const gpu_model_config_t *c, int budget, int max_seqs) {
    gpu_plan_t p;
    char err[256];
    CHECK(gpu_plan_compute(c, budget, 0, max_seqs, "bf16", &p, err, sizeof(err)) == 0, "%s", err);
    size_t end = 0;
    for (int i = 0; i < GPU_PLAN_N; i++) {
        CHECK(p.slice[i].offset % GPU_PLAN_ALIGN == 0, "slice %d unaligned", i);
        CHECK(p.slice[i].offset >= end, "slice %d overlaps the previous one", i);
        end = p.slice[i].offset + p.slice[i].bytes;
    }
    CHECK(end <= p.total_bytes, "slices run past the total");
    size_t H = (size_t)c->hidden, I = (size_t)c->intermediate, S = (size_t)p.max_seqs;
    size_t T = (size_t)budget;
    CHECK(p.slice[GPU_PLAN_BIG].bytes >= 2 * T * 3 * H &&
              p.slice[GPU_PLAN_BIG].bytes >= 2 * T * I &&
              p.slice[GPU_PLAN_BIG].bytes >= 2 * S * (2 * H + I),
          "shared buffer too small");
    CHECK(p.slice[GPU_PLAN_LOGITS].bytes == S * (size_t)c->num_labels * 4, "logits size");
    CHECK(p.layer_bytes * (size_t)c->layers == p.slice[GPU_PLAN_LAYERS].bytes, "layer stride");
}

/* The CUDA graph path without a GPU: every family's graph, at every precision, has a launcher
 * for each of its ops, and its one allocation is laid out (fp8 weights under fp16's). */
static void check_graph_plans(void) {
#ifdef RECLASS_HAVE_CUDA
    static const char *const geos[] = {"bert-base",      "distilbert-base", "roberta-base",
                                       "xlmr-base",      "electra-small",   "modernbert-base",
                                       "deberta-v3-base"};
    static const char *const precs[] = {"fp16", "bf16", "fp8"};
    for (size_t i = 0; i < sizeof geos / sizeof geos[0]; i++) {
        gpu_model_config_t c;
        char err[512];
        size_t w16 = 0;
        CHECK(gpu_model_geometry(geos[i], 140, &c) == 0, "%s geometry", geos[i]);
        for (int p = 0; p < 3; p++) {
            size_t w = 0, total = 0;
            int rc = gpu_cuda_graph_plan(&c, precs[p], 16384, 0, 512, &w, &total, err, sizeof err);
            CHECK(rc == 0, "%s %s graph on cuda: %s", geos[i], precs[p], err);
            if (rc) continue;
            printf("cuda graph %-16s %-4s weights %zu B, one allocation %zu B\n", geos[i], precs[p],
                   w, total);
            CHECK(w > 0 && total > w, "%s %s: empty layout", geos[i], precs[p]);
            if (p == 0) w16 = w;
            if (p == 2) CHECK(w <= w16, "%s: fp8 weights %zu B over fp16's %zu B", geos[i], w, w16);
        }
    }
#endif
}

int main(void) {
    check_graph_plans();
    gpu_model_config_t base, mini, large;
    CHECK(gpu_model_geometry("bert-base", 140, &base) == 0, "bert-base geometry");
    CHECK(gpu_model_geometry("bert-mini", 151, &mini) == 0, "bert-mini geometry");
    CHECK(gpu_model_geometry("bert-large", 2, &large) == 0, "bert-large geometry");
    if (fails) return 1;

    gpu_plan_t p;
    char err[256];
    CHECK(gpu_plan_compute(&base, 16384, 512, 0, "fp16", &p, err, sizeof(err)) == 0, "%s", err);
    double gib = (double)p.total_bytes / (double)(1u << 30);
    printf("bert-base fp16 16384: weights %zu + arena %zu = %zu B (%.3f GiB)\n", p.weights_bytes,
           p.arena_bytes, p.total_bytes, gib);
    CHECK(p.total_bytes <= (size_t)1 << 29, "bert-base at 16384 tokens needs %.3f GiB > 0.5", gib);
    CHECK(p.weights_bytes + p.arena_bytes == p.total_bytes, "weights + arena != total");
    /* Weights: every parameter once in 2 bytes (LayerNorm and head biases in 4), give or take
     * alignment and the unused token type row. */
    size_t params = gpu_model_param_count(&base);
    size_t head = (768 * 768 + 140 * 768) * 2; /* the head is fp32: 2 more bytes each */
    CHECK(p.weights_bytes >= params * 2 + head - 768 * 2 &&
              p.weights_bytes <= params * 2 + head + (1u << 20),
          "weights %zu B for %zu parameters", p.weights_bytes, params);
    CHECK(p.slice[GPU_PLAN_XR].bytes == 0, "fp16 has no fp32 residual");
    CHECK(p.max_seqs == 8192 && p.max_len == 512, "defaults %d %d", p.max_seqs, p.max_len);

    check_layout(&base, 16384, 0);
    check_layout(&base, 100, 100);
    check_layout(&mini, 8192, 0);
    check_layout(&large, 32768, 500);

    /* fp8: the fp16 plan plus, for each projection gpu_fp8_runs names in some layer, its
     * per-channel scales in every layer's block (its codes in its 16-bit slot unless every
     * layer runs it in FP8), and the E4M3 input with its per-token scales. */
    gpu_plan_t f8;
    CHECK(gpu_plan_compute(&base, 16384, 512, 0, "fp8", &f8, err, sizeof(err)) == 0, "%s", err);
    size_t extra = 0, codes_saved = 0, per_layer[GPU_FP8_POINTS] = {3 * 768, 768, 3072, 768};
    size_t wsz[GPU_FP8_POINTS] = {3 * 768 * 768, 768 * 768, 3072 * 768, 768 * 3072};
    for (int q = 0; q < GPU_FP8_POINTS; q++) {
        int any = 0, all = 1;
        for (int l = 0; l < base.layers; l++) {
            any |= gpu_fp8_runs(&base, l, (gpu_fp8_point_t)q);
            all &= gpu_fp8_runs(&base, l, (gpu_fp8_point_t)q);
        }
        if (any) extra += (per_layer[q] * 4 + GPU_PLAN_ALIGN - 1) / GPU_PLAN_ALIGN * GPU_PLAN_ALIGN;
        if (all) codes_saved += wsz[q];
    }
    CHECK(f8.layer_bytes == p.layer_bytes + extra - codes_saved, "fp8 layer block %zu vs %zu",
          f8.layer_bytes, p.layer_bytes + extra - codes_saved);
    CHECK(f8.slice[GPU_PLAN_XQ].bytes == (extra ? 16384u * 3072 : 0) &&
              f8.slice[GPU_PLAN_XS].bytes == (extra ? 16384u * 4 : 0) &&
              p.slice[GPU_PLAN_XQ].bytes == 0 && p.slice[GPU_PLAN_XS].bytes == 0,
          "fp8 input buffers");
    CHECK(f8.fp8 && !p.fp8 && f8.total_bytes <= (size_t)3 << 28, "fp8 total %zu", f8.total_bytes);

    gpu_plan_t q;
    CHECK(gpu_plan_compute(&base, 32768, 512, 0, "fp16", &q, err, sizeof(err)) == 0, "%s", err);
    CHECK(q.weights_bytes == p.weights_bytes && q.arena_bytes > p.arena_bytes,
          "arena must grow with the budget, weights not");

    CHECK(gpu_plan_compute(&base, 0, 0, 0, "fp16", &q, err, sizeof(err)) != 0 &&
              strstr(err, "budget"),
          "zero budget accepted");
    CHECK(gpu_plan_compute(&base, 1024, 0, 0, "fp32", &q, err, sizeof(err)) != 0 &&
              strstr(err, "fp16"),
          "fp32 accepted");
    CHECK(gpu_plan_compute(&base, 1024, 513, 0, "fp16", &q, err, sizeof(err)) != 0,
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
    /* Every family's geometry: ELECTRA's projection counted (and nothing where E == H), the
     * tables at E wide, RoBERTa's 514-row table as its 512 usable positions. */
    static const char *const fam[] = {"distilbert-base", "roberta-base", "xlmr-base",
                                      "electra-small", "electra-base"};
    for (size_t i = 0; i < sizeof fam / sizeof fam[0]; i++) {
        gpu_model_config_t c;
        CHECK(gpu_model_geometry(fam[i], 151, &c) == 0, "%s geometry", fam[i]);
        CHECK(gpu_plan_compute(&c, 16384, 0, 0, "bf16", &p, err, sizeof(err)) == 0, "%s", err);
        check_layout(&c, 16384, 0);
        size_t H = (size_t)c.hidden, E = (size_t)c.emb_size;
        CHECK(p.max_len == 512, "%s max len %d", fam[i], p.max_len);
        CHECK(p.slice[GPU_PLAN_WORD_EMB].bytes == (size_t)c.vocab_size * E * 2, "%s word", fam[i]);
        CHECK(p.slice[GPU_PLAN_POS_EMB].bytes == 512 * E * 2, "%s positions", fam[i]);
        CHECK(p.slice[GPU_PLAN_EMB_PROJ_W].bytes == (E != H ? H * E * 2 : 0), "%s proj", fam[i]);
        CHECK(p.slice[GPU_PLAN_BIG].bytes >= 16384 * E * 2, "%s embeddings in BIG", fam[i]);
        printf("%s bf16 16384: weights %zu + arena %zu B\n", fam[i], p.weights_bytes,
               p.arena_bytes);
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
