/* The whole CUDA classifier (backend table "cuda": every family on the encoder graph) on the
 * CLINC150 demo model against the
 * Hugging Face fp32 golden file: argmax agreement >= 99.9% in fp16 and bf16, and
 * max |delta logit| <= 0.05 in fp16 (bf16 <= 0.25). Then the fixture
 * classifier of every other family (tests/lib/family_golden.h) on its CLINC150 and
 * multilingual goldens: fp16 >= 99.9% and <= 0.05, bf16 >= 99.5% and <= 0.25. Everywhere,
 * too, every row whose argmax is not HF's must have an fp32 top-2 margin below 4x the
 * precision's delta bound (fg_gate: a flip on a wider margin is an error, not rounding; an
 * agreement under the floor passes only on thin flips, at most half the rows at risk);
 * the fp32 margins are the CPU backend's. Batches are packed
 * in file order under a token budget, so every batch mixes lengths; they go through submit and
 * collect with two in flight, as the worker drives the backend. SKIPPED without GPU. */
#include <jansson.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu/backend.h"
#include "gpu/model/model.h"

#ifndef RECLASS_HAVE_CUDA
int main(void) {
    printf("SKIP: built without CUDA\n");
    return 77;
}
#else
#include "gpu/cuda/cuda_backend.h"
#include "tests/lib/backend_flight.h"
#include "tests/lib/family_golden.h"

typedef struct {
    int32_t *ids;
    int len;
    int pred;      /* label index of the golden argmax */
    float *logits; /* (L) or NULL */
} row_t;

static int label_index(const gpu_model_t *m, const char *name) {
    for (int i = 0; i < m->cfg.num_labels; i++)
        if (strcmp(m->cfg.id2label[i], name) == 0) return i;
    return -1;
}

static int load_rows(const char *path, const gpu_model_t *m, row_t **out) {
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    int n = 0, cap = 8192;
    row_t *rows = calloc((size_t)cap, sizeof(row_t));
    char *line = NULL;
    size_t lcap = 0;
    while (getline(&line, &lcap, f) > 0) {
        json_error_t je;
        json_t *o = json_loads(line, 0, &je);
        if (!o) continue;
        json_t *ids = json_object_get(o, "ids"), *lg = json_object_get(o, "logits");
        row_t *r = &rows[n];
        r->len = (int)json_array_size(ids);
        r->ids = malloc((size_t)r->len * 4);
        for (int i = 0; i < r->len; i++)
            r->ids[i] = (int32_t)json_integer_value(json_array_get(ids, (size_t)i));
        r->pred = label_index(m, json_string_value(json_object_get(o, "pred")));
        if (lg && json_array_size(lg) == (size_t)m->cfg.num_labels) {
            r->logits = malloc((size_t)m->cfg.num_labels * 4);
            for (int i = 0; i < m->cfg.num_labels; i++)
                r->logits[i] = (float)json_number_value(json_array_get(lg, (size_t)i));
        }
        json_decref(o);
        if (++n == cap) rows = realloc(rows, (size_t)(cap *= 2) * sizeof(row_t));
    }
    free(line);
    fclose(f);
    *out = rows;
    return n;
}

static const gpu_backend_ops_t *ops;

/* fp32 logits (set->n, L) of the CPU backend, for the margins of fg_flips; NULL on failure. */
static float *fp32_logits(const gpu_model_t *m, const fg_set_t *set) {
    common_err_t err;
    const gpu_backend_ops_t *cpu = gpu_backend_find("cpu", &err);
    float *lg = (float *)malloc(sizeof(float) * (size_t)set->n * m->cfg.num_labels);
    gpu_backend_opts_t o = {.token_budget = 8192, .threads = 0};
    if (!cpu || !lg || fg_run(cpu, m, &o, set, lg, &err) != 0) {
        printf("FAIL fp32 reference: %s\n", err.message);
        free(lg);
        return NULL;
    }
    return lg;
}

/* The demo golden as a family set, with its fp32 reference, for run_precision's gate. */
static fg_set_t demo_set;
static float *demo_fp32;

/* budget, seqs_cap: batch shape (small batches of many sequences, and full budgets). */
static int run_precision(const gpu_model_t *m, row_t *rows, int n, const char *prec,
                         double max_delta_bound, int budget, int seqs_cap) {
    gpu_backend_opts_t opts = {.token_budget = budget, .max_len = 512, .precision = prec};
    gpu_backend_t *be = NULL;
    common_err_t err;
    if (ops->init(m, &opts, &be, &err) != 0) {
        printf("FAIL %s init: %s\n", prec, err.message);
        return 1;
    }
    int L = m->cfg.num_labels, agree = 0, with_logits = 0, failed = 0;
    double maxd = 0;
    /* As the worker drives the backend: each batch is submitted before the previous one is
     * collected, from its own input arrays (slot), so two batches are in flight; a mix-up of
     * their staging or logits would show here as wrong answers. */
    int32_t *ids[2] = {malloc((size_t)budget * 4), malloc((size_t)budget * 4)};
    int32_t *cu[2] = {malloc((size_t)(budget + 1) * 4), malloc((size_t)(budget + 1) * 4)};
    int first[2] = {0, 0}, nseq[2] = {0, 0}, slot = 0, prev = -1;
    float *logits = malloc((size_t)budget * L * 4);
    float *all = malloc((size_t)n * L * 4); /* (n, L) every row's logits, for fg_flips */
    for (int i = 0; !failed;) {
        int have = i < n;
        if (have) {
            gpu_batch_t b = {.ids = ids[slot], .cu_seqlens = cu[slot]};
            int32_t *c = cu[slot];
            c[0] = 0;
            first[slot] = i;
            while (i < n && c[b.n_seqs] + rows[i].len <= budget && b.n_seqs < seqs_cap) {
                memcpy(ids[slot] + c[b.n_seqs], rows[i].ids, (size_t)rows[i].len * 4);
                c[b.n_seqs + 1] = c[b.n_seqs] + rows[i].len;
                if (rows[i].len > b.max_len) b.max_len = rows[i].len;
                b.n_seqs++, i++;
            }
            b.n_tokens = c[b.n_seqs];
            nseq[slot] = b.n_seqs;
            if (ops->submit(be, &b, &err) != 0) {
                printf("FAIL %s submit: %s\n", prec, err.message);
                failed = 1;
                break;
            }
        }
        if (prev >= 0) {
            if (ops->collect(be, logits, &err) != 0) {
                printf("FAIL %s collect: %s\n", prec, err.message);
                failed = 1;
                break;
            }
            for (int s = 0; s < nseq[prev]; s++) {
                row_t *r = &rows[first[prev] + s];
                const float *lg = logits + (size_t)s * L;
                memcpy(all + (size_t)(first[prev] + s) * L, lg, sizeof(float) * (size_t)L);
                int am = 0;
                for (int j = 1; j < L; j++)
                    if (lg[j] > lg[am]) am = j;
                agree += am == r->pred;
                if (r->logits) {
                    with_logits++;
                    for (int j = 0; j < L; j++) {
                        double d = fabs((double)lg[j] - r->logits[j]);
                        if (!(d <= maxd)) maxd = isfinite(d) ? d : INFINITY;
                    }
                }
            }
        }
        if (!have) break;
        prev = slot;
        slot ^= 1;
    }
    if (!failed) { /* out-of-turn calls: refused, and the backend still works after them */
        gpu_batch_t b = {
            .ids = ids[0], .cu_seqlens = cu[0], .n_seqs = 1, .n_tokens = 2, .max_len = 2};
        cu[0][0] = 0, cu[0][1] = 2, ids[0][0] = 101, ids[0][1] = 102;
        if (backend_flight_refusals(ops, be, &b, logits) != 0) {
            printf("FAIL %s submit/collect refusals\n", prec);
            failed = 1;
        }
    }
    ops->free(be);
    free(ids[0]), free(ids[1]), free(cu[0]), free(cu[1]), free(logits);
    if (failed || demo_set.n != n) {
        free(all);
        return 1;
    }
    double agreement = (double)agree / n;
    fg_score_t sc = {.rows = n, .agree = agree, .logit_rows = with_logits, .max_delta = maxd};
    fg_flips_t fl = fg_flips(m, &demo_set, all, demo_fp32, max_delta_bound);
    char why[256];
    int ok = fg_gate(&sc, &fl, 0.999, max_delta_bound, why, sizeof why);
    free(all);
    printf("%s %s budget %d: argmax agreement %d/%d = %.4f%% (>= 99.9%%), max |delta logit| %.4f "
           "over %d rows (<= %.2f), %d flips, widest fp32 margin %.4f (< %.2f)%s%s\n",
           ok ? "ok  " : "FAIL", prec, budget, agree, n, 100.0 * agreement, maxd, with_logits,
           max_delta_bound, fl.flips, fl.widest, fl.bound, ok ? "" : ": ", why);
    printf("{\"test\":\"gpu_golden\",\"precision\":\"%s\",\"budget\":%d,\"agreement\":%.6f,"
           "\"max_abs_delta\":%.5f,\"rows\":%d,\"flips\":%d,\"widest_flip_margin\":%.5f}\n",
           prec, budget, agreement, maxd, n, fl.flips, fl.widest);
    return ok ? 0 : 1;
}

/* The families' fixtures: the BERT-like ones of family_golden.h, then ModernBERT and
 * DeBERTa-v3. */
#define N_FAMILY_MODELS (FG_N_MODELS + 2)
static const char *family_model(int i) {
    return i < FG_N_MODELS    ? fg_models[i]
           : i == FG_N_MODELS ? "modernbert-clinc150"
                              : "deberta-clinc150";
}

/* Every family's fixture (only those whose name holds one of only[0..n_only) when n_only > 0),
 * both golden sets, both precisions. Returns the failures. */
static int run_families(char **only, int n_only) {
    int fails = 0;
    common_err_t err;
    for (int i = 0; i < N_FAMILY_MODELS; i++) {
        int pick = n_only == 0;
        for (int k = 0; k < n_only; k++)
            pick |= strstr(family_model(i), only[k]) != NULL;
        if (!pick) continue;
        char dir[512];
        snprintf(dir, sizeof dir, "%s/models/%s", RECLASS_FIXTURES, family_model(i));
        gpu_model_t *m = NULL;
        if (gpu_model_load(dir, &m, &err) != 0) {
            printf("FAIL model: %s\n", err.message);
            fails++;
            continue;
        }
        for (int s = 0; s < FG_N_SETS; s++) {
            fg_set_t set;
            if (fg_load(dir, fg_sets[s], &set, &err) != 0) {
                printf("FAIL golden: %s\n", err.message);
                fails++;
                continue;
            }
            float *lg = (float *)malloc(sizeof(float) * (size_t)set.n * m->cfg.num_labels);
            float *ref = fp32_logits(m, &set);
            if (!ref) fails++;
            static const struct {
                const char *prec;
                double agree, delta;
            } bound[2] = {{"fp16", 0.999, 0.05}, {"bf16", 0.995, 0.25}};
            for (int p = 0; p < 2 && lg && ref; p++) {
                gpu_backend_opts_t o = {.token_budget = 4096, .precision = bound[p].prec};
                if (fg_run(ops, m, &o, &set, lg, &err) != 0) {
                    printf("FAIL %s %s %s: %s\n", family_model(i), fg_sets[s], bound[p].prec,
                           err.message);
                    fails++;
                    continue;
                }
                fg_score_t sc = fg_compare(m, &set, lg);
                fg_flips_t fl = fg_flips(m, &set, lg, ref, bound[p].delta);
                char why[256];
                int ok = fg_gate(&sc, &fl, bound[p].agree, bound[p].delta, why, sizeof why);
                printf("%s %s %s %s: argmax agreement %d/%d = %.4f%% (>= %.1f%%), max |delta "
                       "logit| %.4f over %d rows (<= %.2f), %d flips, widest fp32 margin %.4f "
                       "(< %.2f)%s%s\n",
                       ok ? "ok  " : "FAIL", family_model(i), fg_sets[s], bound[p].prec, sc.agree,
                       sc.rows, 100.0 * sc.agree / sc.rows, 100.0 * bound[p].agree, sc.max_delta,
                       sc.logit_rows, bound[p].delta, fl.flips, fl.widest, fl.bound, ok ? "" : ": ",
                       why);
                fails += !ok;
            }
            free(lg);
            free(ref);
            fg_free(&set);
        }
        gpu_model_free(m);
    }
    return fails;
}

/* Every family through the backend table as the worker gets it (the encoder graph). Arguments:
 * only the family fixtures whose names hold one of them ("modernbert deberta"), without the
 * demo model's runs. */
int main(int argc, char **argv) {
    if (gpu_cuda_device_count() == 0) {
        printf("SKIP: no CUDA device\n");
        return 77;
    }
    gpu_model_t *m = NULL;
    common_err_t err;
    if (!(ops = gpu_backend_find("cuda", &err))) {
        printf("FAIL: %s\n", err.message);
        return 1;
    }
    if (argc > 1) {
        const int fails = run_families(argv + 1, argc - 1);
        printf("%s\n", fails ? "FAILED" : "PASSED");
        return fails ? 1 : 0;
    }
    if (gpu_model_load(RECLASS_DEMO_MODEL, &m, &err) != 0) {
        printf("FAIL model: %s\n", err.message);
        return 1;
    }
    row_t *rows = NULL;
    int n = load_rows(RECLASS_FIXTURES "/golden_clinc150_test.jsonl", m, &rows);
    if (n < 5000) {
        printf("FAIL golden file: %d rows\n", n);
        return 1;
    }
    if (fg_load(RECLASS_FIXTURES, "clinc150_test", &demo_set, &err) != 0 || demo_set.n != n ||
        !(demo_fp32 = fp32_logits(m, &demo_set))) {
        printf("FAIL demo golden as a set: %s\n", err.message);
        return 1;
    }
    int fails = run_precision(m, rows, n, "fp16", 0.05, 4096, 200) +
                run_precision(m, rows, n, "bf16", 0.25, 4096, 200) +
                run_precision(m, rows, n, "fp16", 0.05, 16384, 1 << 30) +
                run_precision(m, rows, n, "bf16", 0.25, 16384, 1 << 30) + run_families(NULL, 0);
    for (int i = 0; i < n; i++)
        free(rows[i].ids), free(rows[i].logits);
    free(rows);
    free(demo_fp32);
    fg_free(&demo_set);
    gpu_model_free(m);
    printf("%s\n", fails ? "FAILED" : "PASSED");
    return fails ? 1 : 0;
}
#endif
