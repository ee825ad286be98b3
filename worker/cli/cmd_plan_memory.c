/* reclass plan-memory: the CUDA backend's device memory plan (gpu/plan.c), printed without
 * touching a GPU, so an operator can size the token budget before renting one. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu/model.h"
#include "gpu/plan.h"
#include "worker/cli/cli.h"

static void plan_usage(FILE *f) {
    fprintf(f,
            "usage: reclass plan-memory (--model DIR | --geometry bert-mini|bert-base|bert-large\n"
            "                            [--labels N]) --token-budget N\n"
            "                            [--precision fp16|bf16] [--max-len N] [--max-seqs N]\n"
            "Prints the CUDA backend's device memory plan (bytes per component, total), JSON "
            "last.\n");
}

/* Parses a positive int or returns -1. */
static int plan_parse_int(const char *s) {
    long v;
    return worker_cli_long(s, 1, 1000000000L, &v) == 0 ? (int)v : -1;
}

int worker_cmd_plan_memory(int argc, char **argv) {
    if (worker_cli_wants_help(argc, argv)) {
        plan_usage(stdout);
        return 0;
    }
    const char *model_dir = NULL, *geometry = NULL, *precision = "fp16";
    int labels = 2, budget = 0, max_len = 0, max_seqs = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (i + 1 >= argc) {
            fprintf(stderr, "reclass plan-memory: option '%s' needs a value (see --help)\n", a);
            return 2;
        }
        const char *v = argv[++i];
        int *num = NULL;
        if (strcmp(a, "--model") == 0)
            model_dir = v;
        else if (strcmp(a, "--geometry") == 0)
            geometry = v;
        else if (strcmp(a, "--precision") == 0)
            precision = v;
        else if (strcmp(a, "--labels") == 0)
            num = &labels;
        else if (strcmp(a, "--token-budget") == 0)
            num = &budget;
        else if (strcmp(a, "--max-len") == 0)
            num = &max_len;
        else if (strcmp(a, "--max-seqs") == 0)
            num = &max_seqs;
        else {
            fprintf(stderr, "reclass plan-memory: unknown option '%s' (see --help)\n", a);
            return 2;
        }
        if (num && (*num = plan_parse_int(v)) < 0) {
            fprintf(stderr, "reclass plan-memory: %s wants a positive integer, got '%s'\n", a, v);
            return 2;
        }
    }
    if (!model_dir == !geometry) {
        fprintf(stderr,
                "reclass plan-memory: give exactly one of --model DIR or --geometry NAME\n");
        return 2;
    }
    if (budget <= 0) {
        fprintf(stderr, "reclass plan-memory: --token-budget N is required\n");
        return 2;
    }

    gpu_model_config_t cfg;
    gpu_model_t *model = NULL;
    char err[512] = "";
    const char *name = geometry;
    if (model_dir) {
        if (gpu_model_load(model_dir, &model, err, sizeof(err)) != 0) {
            fprintf(stderr, "reclass plan-memory: %s\n", err);
            return 2;
        }
        cfg = model->cfg;
        name = model->name ? model->name : model_dir;
    } else if (gpu_model_geometry(geometry, labels, &cfg) != 0) {
        fprintf(stderr,
                "reclass plan-memory: unknown geometry '%s': use bert-mini, bert-base or "
                "bert-large\n",
                geometry);
        return 2;
    }

    gpu_plan_t plan;
    int rc = gpu_plan_compute(&cfg, budget, max_len, max_seqs, precision, &plan, err, sizeof(err));
    if (rc != 0) {
        fprintf(stderr, "reclass plan-memory: %s\n", err);
        gpu_model_free(model);
        return 2;
    }
    char h[32];
    printf("device memory plan: %s (%d layers, H %d, I %d, %d labels), %s, token budget %d, "
           "max len %d, max seqs %d\n",
           name, cfg.layers, cfg.hidden, cfg.intermediate, cfg.num_labels, precision, budget,
           plan.max_len, plan.max_seqs);
    for (int i = 0; i < GPU_PLAN_N; i++) {
        if (i == GPU_PLAN_X)
            printf("  %-30s %14zu  %s\n", "= weights", plan.weights_bytes,
                   gpu_plan_human(plan.weights_bytes, h, sizeof(h)));
        printf("  %-30s %14zu  %-10s %s\n", plan.slice[i].name, plan.slice[i].bytes,
               gpu_plan_human(plan.slice[i].bytes, h, sizeof(h)), plan.slice[i].shape);
    }
    printf("  %-30s %14zu  %s\n", "= arena (activations+workspace)", plan.arena_bytes,
           gpu_plan_human(plan.arena_bytes, h, sizeof(h)));
    printf("  %-30s %14zu  %s\n", "= total (one allocation)", plan.total_bytes,
           gpu_plan_human(plan.total_bytes, h, sizeof(h)));
    printf("{\"model\":\"%s\",\"precision\":\"%s\",\"token_budget\":%d,\"max_len\":%d,"
           "\"max_seqs\":%d,\"weights_bytes\":%zu,\"arena_bytes\":%zu,\"total_bytes\":%zu,"
           "\"components\":{",
           name, precision, budget, plan.max_len, plan.max_seqs, plan.weights_bytes,
           plan.arena_bytes, plan.total_bytes);
    for (int i = 0; i < GPU_PLAN_N; i++)
        printf("%s\"%s\":%zu", i ? "," : "", plan.slice[i].name, plan.slice[i].bytes);
    printf("}}\n");
    gpu_model_free(model);
    return 0;
}
