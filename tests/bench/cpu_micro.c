/* Tickets/s of the CPU backend on the CLINC150 golden ids (not a test): each token budget
 * is run reps times over the 5,500 queries, sorted by length as the worker batches them,
 * and the best pass is printed.
 * usage: cpu_micro [model_dir] [golden.jsonl] [threads] [reps] [budget...] */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gpu/backend.h"
#include "gpu/model/model.h"

typedef struct {
    int32_t *ids;
    int len;
} row_t;

static int by_len(const void *a, const void *b) {
    return ((const row_t *)a)->len - ((const row_t *)b)->len;
}

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* CPU seconds of the whole process: less sensitive than wall time to other load. */
static double cpu_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

int main(int argc, char **argv) {
    const char *dir = argc > 1 ? argv[1] : RECLASS_DEMO_MODEL;
    const char *gold = argc > 2 ? argv[2] : RECLASS_FIXTURES "/golden_clinc150_test.jsonl";
    int threads = argc > 3 ? atoi(argv[3]) : 0, reps = argc > 4 ? atoi(argv[4]) : 3;
    common_err_t err;
    gpu_model_t *m;
    if (gpu_model_load(dir, &m, &err)) {
        fprintf(stderr, "%s\n", err.message);
        return 2;
    }
    FILE *f = fopen(gold, "r");
    if (!f) return 2;
    row_t *rows = malloc(sizeof *rows * 6000);
    int n = 0;
    long tokens = 0;
    char *line = NULL;
    size_t cap = 0;
    while (n < 6000 && getline(&line, &cap, f) > 0) {
        json_t *o = json_loads(line, 0, NULL), *ids = json_object_get(o, "ids");
        rows[n].len = (int)json_array_size(ids);
        rows[n].ids = malloc(sizeof(int32_t) * rows[n].len);
        for (int i = 0; i < rows[n].len; i++)
            rows[n].ids[i] = (int32_t)json_integer_value(json_array_get(ids, i));
        tokens += rows[n].len;
        n++;
        json_decref(o);
    }
    fclose(f);
    qsort(rows, n, sizeof *rows, by_len);
    printf("%d tickets, %.1f tokens avg\n", n, (double)tokens / n);
    int budgets_default[] = {512, 1024, 2048, 4096, 8192};
    int nb = argc > 5 ? argc - 5 : 5;
    const gpu_backend_ops_t *ops = gpu_backend_find("cpu", &err);
    float *logits = malloc(sizeof(float) * n * m->cfg.num_labels);
    for (int bi = 0; bi < nb; bi++) {
        int budget = argc > 5 ? atoi(argv[5 + bi]) : budgets_default[bi];
        gpu_backend_opts_t o = {.token_budget = budget, .threads = threads};
        gpu_backend_t *be;
        if (ops->init(m, &o, &be, &err)) {
            fprintf(stderr, "%s\n", err.message);
            return 1;
        }
        int32_t *ids = malloc(sizeof(int32_t) * budget),
                *cu = malloc(sizeof(int32_t) * (budget + 1));
        double best = 1e30, best_cpu = 1e30;
        for (int r = 0; r < reps; r++) {
            double t0 = now(), c0 = cpu_now();
            for (int i = 0; i < n;) {
                int s = 0, t = 0, first = i, mx = 0;
                cu[0] = 0;
                while (i < n && t + rows[i].len <= budget && s < budget / 2) {
                    memcpy(ids + t, rows[i].ids, sizeof(int32_t) * rows[i].len);
                    t += rows[i].len;
                    mx = rows[i].len > mx ? rows[i].len : mx;
                    cu[++s] = t;
                    i++;
                }
                gpu_batch_t b = {ids, cu, s, t, mx};
                if (ops->forward(be, &b, logits + (size_t)first * m->cfg.num_labels, &err)) {
                    fprintf(stderr, "%s\n", err.message);
                    return 1;
                }
            }
            double dt = now() - t0, dc = cpu_now() - c0;
            if (dt < best) best = dt;
            if (dc < best_cpu) best_cpu = dc;
        }
        printf("budget %5d threads %d: best %.3f s  %.0f tickets/s  %.0f tokens/s  (%.0f "
               "tickets per CPU-second)\n",
               budget, threads, best, n / best, tokens / best, n / best_cpu);
        fflush(stdout);
        free(ids);
        free(cu);
        ops->free(be);
    }
    gpu_model_free(m);
    return 0;
}
