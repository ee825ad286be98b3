/* reclass plan-memory: the CUDA backend's device memory plan (gpu_backend_plan_memory: the
 * layout of the model's encoder graph, gpu/cuda/layout.c), printed without touching a GPU,
 * so an operator can size the token budget before renting one; then the graph op by op. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/err.h"
#include "gpu/backend.h"
#include "gpu/graph.h"
#include "gpu/model/fp8.h"
#include "worker/cli/cli.h"

#define PLAN_OPTS(model_dir, geometry, labels, budget, precision, max_len, max_seqs)                \
    {                                                                                               \
        worker_cli_opt_model(model_dir, 0, 0, NULL), worker_cli_opt_geometry(geometry),             \
            worker_cli_opt_labels(labels),                                                          \
            {"token-budget",                                                                        \
             CLI_INT,                                                                               \
             budget,                                                                                \
             1,                                                                                     \
             1000000000,                                                                            \
             NULL,                                                                                  \
             "N",                                                                                   \
             "tokens per encoder batch (required)",                                                 \
             NULL},                                                                                 \
            {"precision", CLI_STR, precision, 0, 0, NULL, "fp16|bf16|fp8", "default: cuda's, fp16", \
             NULL},                                                                                 \
            {"max-len",  CLI_INT, max_len, 1,                                                       \
             1000000000, NULL,    "N",     "tokens per sequence (default: the model's)",            \
             NULL},                                                                                 \
            {"max-seqs", CLI_INT, max_seqs, 1,                                                      \
             1000000000, NULL,    "N",      "sequences per batch (default: by the token budget)",   \
             NULL},                                                                                 \
        {                                                                                           \
            NULL, CLI_FLAG, NULL, 0, 0, NULL, NULL, NULL, NULL                                      \
        }                                                                                           \
    }

/* bytes as "1.23 GiB", "4.5 MiB", ... into buf */
static const char *human(size_t bytes, char *buf, size_t len) {
    static const char *const unit[] = {"B", "KiB", "MiB", "GiB"};
    double v = (double)bytes;
    int u = 0;
    while (u < 3 && v >= 1024.0)
        v /= 1024.0, u++;
    if (u == 0)
        snprintf(buf, len, "%zu B", bytes);
    else
        snprintf(buf, len, u == 3 ? "%.2f %s" : "%.1f %s", v, unit[u]);
    return buf;
}

/* The graph's own plan (gpu/graph.h), op by op: what each op runs and the bytes of the
 * tensors it writes first, at 16-bit storage (fp32 for precision fp32). */
static int print_graph_plan(const gpu_model_config_t *cfg, const char *precision, int budget,
                            int max_seqs) {
    gpu_precision_t prec = GPU_PREC_FP16;
    common_err_t err;
    char h[32], d[160];
    if (precision && gpu_precision_parse(precision, &prec) != 0) return 0; /* cuda said why */
    gpu_graph_t *g;
    if (gpu_graph_build(cfg, NULL, prec, GPU_PREC_FP16, &g, &err) != 0) {
        common_err_print(stderr, &err);
        return -1;
    }
    gpu_graph_plan_opts_t po = {.act_bytes = prec == GPU_PREC_FP32 ? 4 : 2,
                                .token_budget = budget,
                                .max_seqs = gpu_backend_max_seqs(budget, max_seqs)};
    gpu_graph_plan_t p;
    if (gpu_graph_plan(g, &po, &p) != 0) {
        gpu_graph_free(g);
        common_logf(stderr, "out of memory\n");
        return -1;
    }
    printf("graph: %d ops (%d at init), %d tensors; activations by the op that writes them "
           "first:\n",
           g->n_ops, g->n_prelude, g->n_tensors);
    for (int i = 0; i < g->n_ops; i++) {
        const gpu_op_t *op = &g->op[i];
        printf("  %-64s -> %-10s %12zu  %s\n", gpu_op_describe(op, d, sizeof d),
               g->tensor[op->out.t].name, p.op_bytes[i], human(p.op_bytes[i], h, sizeof h));
    }
    printf("  %-64s    %-10s %12zu  %s\n", "= graph weights", "", p.weights_bytes,
           human(p.weights_bytes, h, sizeof h));
    printf("  %-64s    %-10s %12zu  %s\n", "= every tensor apart (cuda shares activations: above)",
           "", p.arena_bytes, human(p.arena_bytes, h, sizeof h));
    gpu_graph_plan_free(&p);
    gpu_graph_free(g);
    return 0;
}

static void plan_usage(FILE *f) {
    fprintf(
        f,
        "usage: reclass plan-memory (--model DIR | --geometry NAME [--labels N])\n"
        "                            --token-budget N\n"
        "                            [--precision fp16|bf16|fp8] [--max-len N] [--max-seqs N]\n"
        "Prints the CUDA backend's device memory plan (bytes per component, total) and the\n"
        "kernels the cpu backend runs on this machine at each of its precisions, JSON last.\n\n");
    const char *model_dir, *geometry, *precision;
    int labels, budget, max_len, max_seqs;
    const cli_opt_t opts[] =
        PLAN_OPTS(&model_dir, &geometry, &labels, &budget, &precision, &max_len, &max_seqs);
    worker_cli_print_opts(f, opts);
}

common_status_t worker_cmd_plan_memory(int argc, char **argv) {
    const char *model_dir = NULL, *geometry = NULL, *precision = NULL;
    int labels, budget = 0, max_len = 0, max_seqs = 0;
    const cli_opt_t opts[] =
        PLAN_OPTS(&model_dir, &geometry, &labels, &budget, &precision, &max_len, &max_seqs);
    int prc = worker_cli_parse("plan-memory", argc, argv, opts, plan_usage, NULL);
    if (prc != COMMON_OK) return prc;
    if (!model_dir == !geometry) {
        common_logf(stderr, "give exactly one of --model DIR or --geometry NAME\n");
        return COMMON_USAGE;
    }
    if (budget <= 0) {
        common_logf(stderr, "--token-budget N is required\n");
        return COMMON_USAGE;
    }

    gpu_model_config_t cfg;
    gpu_model_t *model = NULL;
    common_err_t err;
    const char *name = geometry;
    if (model_dir) {
        common_status_t st = gpu_model_load(model_dir, &model, &err);
        if (st != COMMON_OK) {
            common_err_print(stderr, &err);
            return st;
        }
        cfg = model->cfg;
        name = model->name ? model->name : model_dir;
    } else if (gpu_model_geometry(geometry, labels, &cfg) != 0) {
        common_logf(stderr, "unknown geometry '%s': use one of %s\n", geometry,
                    gpu_model_geometries());
        return COMMON_USAGE;
    }

    gpu_mem_plan_t plan;
    gpu_backend_opts_t bo = {
        .token_budget = budget, .max_len = max_len, .max_seqs = max_seqs, .precision = precision};
    common_status_t rc = gpu_backend_plan_memory("cuda", &cfg, &bo, &plan, &err);
    if (rc != COMMON_OK) {
        common_err_print(stderr, &err);
        gpu_model_free(model);
        return rc;
    }
    char h[32];
    printf("device memory plan: %s (%s, %d layers, H %d, E %d, I %d, %s, %d labels), %s, token "
           "budget %d, max len %d, max seqs %d\n",
           name, gpu_model_family_name(cfg.family), cfg.layers, cfg.hidden, cfg.emb_size,
           cfg.intermediate, gpu_model_act_name(cfg.act), cfg.num_labels, plan.precision, budget,
           plan.max_len, plan.max_seqs);
    if (strcmp(plan.precision, "fp8") == 0) {
        char fp8[1024];
        printf("  %s\n", gpu_fp8_plan_text(&cfg, fp8, sizeof fp8));
    }
    for (int i = 0; i < plan.n; i++) {
        if (i > 0 && plan.slice[i - 1].weights && !plan.slice[i].weights)
            printf("  %-30s %14zu  %s\n", "= weights", plan.weights_bytes,
                   human(plan.weights_bytes, h, sizeof(h)));
        printf("  %-30s %14zu  %-10s %s\n", plan.slice[i].name, plan.slice[i].bytes,
               human(plan.slice[i].bytes, h, sizeof(h)), plan.slice[i].shape);
    }
    printf("  %-30s %14zu  %s\n", "= arena (activations+workspace)", plan.arena_bytes,
           human(plan.arena_bytes, h, sizeof(h)));
    printf("  %-30s %14zu  %s\n", "= total (one allocation)", plan.total_bytes,
           human(plan.total_bytes, h, sizeof(h)));
    if (print_graph_plan(&cfg, plan.precision, budget, max_seqs) != 0) {
        gpu_model_free(model);
        return COMMON_USAGE;
    }
    /* the cpu backend's kernels by this CPU's features: never a silent fallback */
    const gpu_backend_ops_t *cpu = gpu_backend_find("cpu", &err);
    for (int i = 0; cpu && cpu->kernels && cpu->precisions[i]; i++) {
        char k[256];
        cpu->kernels(cpu->precisions[i], k, sizeof k);
        printf("cpu backend on this machine, %s: %s\n", cpu->precisions[i], k);
    }
    printf("{\"model\":\"%s\",\"precision\":\"%s\",\"token_budget\":%d,\"max_len\":%d,"
           "\"max_seqs\":%d,\"weights_bytes\":%zu,\"arena_bytes\":%zu,\"total_bytes\":%zu,"
           "\"components\":{",
           name, plan.precision, budget, plan.max_len, plan.max_seqs, plan.weights_bytes,
           plan.arena_bytes, plan.total_bytes);
    for (int i = 0; i < plan.n; i++)
        printf("%s\"%s\":%zu", i ? "," : "", plan.slice[i].name, plan.slice[i].bytes);
    printf("}}\n");
    gpu_model_free(model);
    return 0;
}
