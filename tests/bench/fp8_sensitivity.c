/* Which projections can run in FP8, measured with the C reference (the CPU backend at fp8, what
 * the CUDA path must reproduce) against Hugging Face fp32 goldens: per plan, top-1 agreement and
 * max |delta logit| on each golden set. The recipe in gpu_fp8_runs (gpu/model/fp8.c) is chosen
 * from its tables (gpu/NOTES-cuda.md "FP8").
 *
 *   fp8_sensitivity [--model DIR] [--fixtures DIR] [--sets a,b] [--threads N] PLAN...
 *
 * PLAN: "plan" (gpu_fp8_runs' own), "none", "each" (every projection of every layer alone), or
 * groups "LAYERS:POINTS" joined by '/': LAYERS "all", "inner" (all but the first and the last),
 * "3" or "1-10"; POINTS qkv, ao, ff1, ff2 joined by '+'. E.g. "inner:qkv+ff1/0:ao". */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu/backend.h"
#include "gpu/graph.h"
#include "gpu/model/fp8.h"
#include "gpu/model/model.h"
#include "tests/lib/family_golden.h"

#define MAX_LAYERS 64
static const char *const point_name[GPU_FP8_POINTS] = {"qkv", "ao", "ff1", "ff2"};

/* The point of a linear op's name ("l3.ff1", the last layer's "l11.kv" / "l11.q"), -1 if none. */
static int point_of(const char *name) {
    const char *p = strchr(name, '.');
    p = p ? p + 1 : name;
    if (!strcmp(p, "kv") || !strcmp(p, "q")) return GPU_FP8_QKV;
    for (int i = 0; i < GPU_FP8_POINTS; i++)
        if (!strcmp(p, point_name[i])) return i;
    return -1;
}

/* mask[l] bit p: point p of layer l in FP8. 0, or -1 for a plan it cannot read. */
static int parse_plan(const char *spec, const gpu_model_config_t *cfg, unsigned *mask) {
    const int L = cfg->layers;
    memset(mask, 0, sizeof(unsigned) * MAX_LAYERS);
    if (!strcmp(spec, "none")) return 0;
    if (!strcmp(spec, "plan")) {
        for (int l = 0; l < L; l++)
            for (int p = 0; p < GPU_FP8_POINTS; p++)
                mask[l] |= (unsigned)gpu_fp8_runs(cfg, l, (gpu_fp8_point_t)p) << p;
        return 0;
    }
    char buf[256];
    snprintf(buf, sizeof buf, "%s", spec);
    for (char *save = NULL, *grp = strtok_r(buf, "/", &save); grp;
         grp = strtok_r(NULL, "/", &save)) {
        char *colon = strchr(grp, ':');
        if (!colon) return -1;
        *colon = '\0';
        int a, b;
        if (!strcmp(grp, "all"))
            a = 0, b = L - 1;
        else if (!strcmp(grp, "inner"))
            a = 1, b = L - 2;
        else if (sscanf(grp, "%d-%d", &a, &b) != 2)
            a = b = atoi(grp);
        if (a < 0 || b >= L || a > b) return -1;
        unsigned pts = 0;
        for (char *s2 = NULL, *pt = strtok_r(colon + 1, "+", &s2); pt;
             pt = strtok_r(NULL, "+", &s2)) {
            const int p = point_of(pt);
            if (p < 0) return -1;
            pts |= 1u << p;
        }
        for (int l = a; l <= b; l++)
            mask[l] |= pts;
    }
    return 0;
}

/* Agreement of one plan on one set: the graph at fp8 with exactly mask's projections in FP8
 * (the rest fp32, as the reference's storage), on the CPU backend. 0 or -1. */
static int run_plan(const gpu_model_t *m, const unsigned *mask, const fg_set_t *s, int threads,
                    fg_score_t *sc, common_err_t *err) {
    const gpu_backend_ops_t *ops = gpu_backend_find("cpu", err);
    gpu_graph_t *g = NULL;
    gpu_backend_t *be = NULL;
    if (!ops || !ops->init_graph ||
        gpu_graph_build(&m->cfg, &m->w, GPU_PREC_FP8, GPU_PREC_FP32, &g, err) != 0)
        return -1;
    for (int i = 0; i < g->n_ops; i++) {
        gpu_op_t *op = &g->op[i];
        const int p = op->kind == GPU_OP_LINEAR && op->layer >= 0 ? point_of(op->name) : -1;
        if (p >= 0) op->prec = (mask[op->layer] >> p) & 1u ? GPU_PREC_FP8 : GPU_PREC_FP32;
    }
    const gpu_backend_opts_t o = {.token_budget = 8192, .threads = threads, .precision = "fp8"};
    if (ops->init_graph(m, g, &o, &be, err) != 0) return -1; /* g is the instance's */
    float *lg = malloc(sizeof(float) * (size_t)s->n * (size_t)m->cfg.num_labels);
    int rc = lg ? fg_run_be(ops, be, m, o.token_budget, s, lg, err) : -1;
    if (rc == 0) *sc = fg_compare(m, s, lg);
    free(lg);
    return rc;
}

static void report(const gpu_model_t *m, const char *name, const unsigned *mask, fg_set_t *sets,
                   char **set_names, int n_sets, int threads) {
    printf("%-34s", name);
    for (int i = 0; i < n_sets; i++) {
        common_err_t err;
        fg_score_t sc;
        if (run_plan(m, mask, &sets[i], threads, &sc, &err) != 0) {
            printf("  %s: error %s", set_names[i], err.message);
            continue;
        }
        printf("  %s %6.2f%% (%d/%d, max |dlogit| %.3f)", set_names[i], 100.0 * sc.agree / sc.rows,
               sc.agree, sc.rows, sc.max_delta);
    }
    printf("\n");
    fflush(stdout);
}

int main(int argc, char **argv) {
    const char *model = RECLASS_DEMO_MODEL, *fixtures = RECLASS_FIXTURES;
    char set_list[256] = "clinc150_test,cfpb_long";
    common_err_t err;
    int threads = 0, a = 1;
    for (; a + 1 < argc && !strncmp(argv[a], "--", 2); a += 2) {
        if (!strcmp(argv[a], "--model"))
            model = argv[a + 1];
        else if (!strcmp(argv[a], "--fixtures"))
            fixtures = argv[a + 1];
        else if (!strcmp(argv[a], "--sets"))
            snprintf(set_list, sizeof set_list, "%s", argv[a + 1]);
        else if (!strcmp(argv[a], "--threads"))
            threads = atoi(argv[a + 1]);
        else
            break;
    }
    if (a >= argc) {
        fprintf(stderr, "usage: fp8_sensitivity [--model DIR] [--fixtures DIR] [--sets a,b] "
                        "[--threads N] PLAN...\n");
        return 2;
    }
    gpu_model_t *m = NULL;
    if (gpu_model_load(model, &m, &err) != 0) {
        fprintf(stderr, "%s: %s\n", model, err.message);
        return 1;
    }
    if (m->cfg.layers > MAX_LAYERS) return 1;
    fg_set_t sets[4];
    char *names[4];
    int n_sets = 0;
    for (char *save = NULL, *s = strtok_r(set_list, ",", &save); s && n_sets < 4;
         s = strtok_r(NULL, ",", &save)) {
        if (fg_load(fixtures, s, &sets[n_sets], &err) != 0) {
            fprintf(stderr, "%s\n", err.message);
            return 1;
        }
        names[n_sets++] = s;
    }
    unsigned mask[MAX_LAYERS];
    for (; a < argc; a++) {
        if (!strcmp(argv[a], "each")) {
            for (int l = 0; l < m->cfg.layers; l++)
                for (int p = 0; p < GPU_FP8_POINTS; p++) {
                    char name[32];
                    memset(mask, 0, sizeof mask);
                    mask[l] = 1u << p;
                    snprintf(name, sizeof name, "layer %d %s alone", l, point_name[p]);
                    report(m, name, mask, sets, names, n_sets, threads);
                }
            continue;
        }
        if (parse_plan(argv[a], &m->cfg, mask) != 0) {
            fprintf(stderr, "cannot read plan '%s'\n", argv[a]);
            return 2;
        }
        report(m, argv[a], mask, sets, names, n_sets, threads);
    }
    for (int i = 0; i < n_sets; i++)
        fg_free(&sets[i]);
    gpu_model_free(m);
    return 0;
}
