#include "tests/lib/family_golden.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *const fg_models[FG_N_MODELS] = {"distilbert-clinc150", "roberta-clinc150",
                                            "xlmr-clinc150", "electra-clinc150"};
const char *const fg_sets[FG_N_SETS] = {"clinc150_test", "multilingual"};

void fg_free(fg_set_t *s) {
    for (int i = 0; i < s->n; i++) {
        free(s->rows[i].ids);
        free(s->rows[i].pred);
        free(s->rows[i].logits);
    }
    free(s->rows);
    s->rows = NULL;
    s->n = 0;
}

/* One golden line -> r. 0 or -1. */
static int row_parse(const char *line, fg_row_t *r) {
    json_error_t je;
    json_t *o = json_loads(line, 0, &je);
    if (!o) return -1;
    json_t *ids = json_object_get(o, "ids"), *lg = json_object_get(o, "logits");
    json_t *pred = json_object_get(o, "pred");
    int rc = -1;
    memset(r, 0, sizeof *r);
    if (!json_is_array(ids) || json_array_size(ids) < 1 || !json_is_string(pred)) goto out;
    r->len = (int)json_array_size(ids);
    if (!(r->ids = malloc(sizeof(int32_t) * (size_t)r->len))) goto out;
    for (int i = 0; i < r->len; i++)
        r->ids[i] = (int32_t)json_integer_value(json_array_get(ids, (size_t)i));
    if (!(r->pred = strdup(json_string_value(pred)))) goto out;
    if (json_is_array(lg)) {
        if (!(r->logits = malloc(sizeof(float) * (json_array_size(lg) + 1)))) goto out;
        for (size_t i = 0; i < json_array_size(lg); i++)
            r->logits[i] = (float)json_number_value(json_array_get(lg, i));
    }
    rc = 0;
out:
    json_decref(o);
    return rc;
}

int fg_load(const char *dir, const char *set, fg_set_t *out, common_err_t *err) {
    char path[1024];
    snprintf(path, sizeof path, "%s/golden_%s.jsonl", dir, set);
    memset(out, 0, sizeof *out);
    FILE *f = fopen(path, "r");
    if (!f) {
        common_err_set(err, COMMON_FATAL, "%s: cannot open", path);
        return -1;
    }
    char *line = NULL;
    size_t cap = 0;
    int alloc = 0, rc = 0;
    while (getline(&line, &cap, f) > 0) {
        if (out->n == alloc) {
            alloc = alloc ? 2 * alloc : 1024;
            fg_row_t *nr = realloc(out->rows, sizeof *nr * (size_t)alloc);
            if (!nr) {
                rc = -1;
                break;
            }
            out->rows = nr;
        }
        if (row_parse(line, &out->rows[out->n]) != 0) {
            fg_row_t *r = &out->rows[out->n];
            free(r->ids);
            free(r->pred);
            free(r->logits);
            common_err_set(err, COMMON_FATAL, "%s: line %d is not a golden row", path, out->n + 1);
            rc = -1;
            break;
        }
        out->n++;
    }
    free(line);
    fclose(f);
    if (rc == 0 && out->n == 0) {
        common_err_set(err, COMMON_FATAL, "%s: empty", path);
        rc = -1;
    }
    if (rc != 0) fg_free(out);
    return rc;
}

int fg_run(const gpu_backend_ops_t *ops, const gpu_model_t *m, const gpu_backend_opts_t *opts,
           const fg_set_t *s, float *logits, common_err_t *err) {
    gpu_backend_t *be = NULL;
    if (ops->init(m, opts, &be, err) != 0) return -1;
    return fg_run_be(ops, be, m, opts->token_budget, s, logits, err);
}

int fg_run_be(const gpu_backend_ops_t *ops, gpu_backend_t *be, const gpu_model_t *m, int budget,
              const fg_set_t *s, float *logits, common_err_t *err) {
    const int L = m->cfg.num_labels;
    int32_t *ids = malloc(sizeof(int32_t) * (size_t)budget);      /* (budget) */
    int32_t *cu = malloc(sizeof(int32_t) * (size_t)(budget + 1)); /* (seqs + 1) */
    int rc = ids && cu ? 0 : -1, i = 0, prev_first = -1;
    while (rc == 0 && i < s->n) {
        int n = 0, t = 0, mx = 0, first = i;
        cu[0] = 0;
        while (i < s->n && t + s->rows[i].len <= budget) {
            memcpy(ids + t, s->rows[i].ids, sizeof(int32_t) * (size_t)s->rows[i].len);
            t += s->rows[i].len;
            if (s->rows[i].len > mx) mx = s->rows[i].len;
            cu[++n] = t;
            i++;
        }
        if (n == 0) {
            common_err_set(err, COMMON_FATAL, "row %d (%d tokens) exceeds the budget", i,
                           s->rows[i].len);
            rc = -1;
            break;
        }
        gpu_batch_t b = {.ids = ids, .cu_seqlens = cu, .n_seqs = n, .n_tokens = t, .max_len = mx};
        rc = ops->submit(be, &b, err);
        if (rc == 0 && prev_first >= 0) rc = ops->collect(be, logits + (size_t)prev_first * L, err);
        prev_first = first;
    }
    if (rc == 0 && prev_first >= 0) rc = ops->collect(be, logits + (size_t)prev_first * L, err);
    gpu_mem_stats_t st;
    if (rc == 0 && ops->mem_stats(be, &st) == 0 && st.allocations_after_init != 0) {
        common_err_set(err, COMMON_FATAL, "%ld allocations after init",
                       (long)st.allocations_after_init);
        rc = -1;
    }
    free(ids);
    free(cu);
    ops->free(be);
    return rc ? -1 : 0;
}

fg_score_t fg_compare(const gpu_model_t *m, const fg_set_t *s, const float *logits) {
    const int L = m->cfg.num_labels;
    fg_score_t sc = {.rows = s->n};
    for (int r = 0; r < s->n; r++) {
        const float *v = logits + (size_t)r * L;
        int b = 0;
        for (int j = 1; j < L; j++)
            if (v[j] > v[b]) b = j;
        if (strcmp(m->cfg.id2label[b], s->rows[r].pred) == 0) sc.agree++;
        if (!s->rows[r].logits) continue;
        sc.logit_rows++;
        for (int j = 0; j < L; j++)
            sc.max_delta = fmax(sc.max_delta, fabs((double)v[j] - s->rows[r].logits[j]));
    }
    return sc;
}

static double top2_margin(const float *v, int L) {
    int a = 0;
    for (int j = 1; j < L; j++)
        if (v[j] > v[a]) a = j;
    double second = -INFINITY;
    for (int j = 0; j < L; j++)
        if (j != a && v[j] > second) second = v[j];
    return L > 1 ? (double)v[a] - second : INFINITY;
}

fg_flips_t fg_flips(const gpu_model_t *m, const fg_set_t *s, const float *logits, const float *fp32,
                    double delta_max) {
    const int L = m->cfg.num_labels;
    fg_flips_t fl = {.bound = FG_MARGIN_FACTOR * delta_max, .first_thick = -1};
    for (int r = 0; r < s->n; r++) {
        const float *v = logits + (size_t)r * L;
        int b = 0;
        for (int j = 1; j < L; j++)
            if (v[j] > v[b]) b = j;
        const double margin = top2_margin(fp32 + (size_t)r * L, L);
        if (margin < 2.0 * delta_max) fl.at_risk++;
        if (strcmp(m->cfg.id2label[b], s->rows[r].pred) == 0) continue;
        fl.flips++;
        if (margin > fl.widest) fl.widest = margin;
        if (!(margin < fl.bound)) {
            if (fl.thick++ == 0) fl.first_thick = r;
        }
    }
    return fl;
}

int fg_gate(const fg_score_t *sc, const fg_flips_t *fl, double agree_min, double delta_max,
            char *why, size_t whylen) {
    const double agreement = sc->rows ? (double)sc->agree / sc->rows : 0.0;
    why[0] = '\0';
    const int rounding = fl->thick == 0 && 2 * fl->flips <= fl->at_risk;
    if (agreement < agree_min && !rounding)
        snprintf(why, whylen, "agreement %.4f%% below %.2f%% (%d flips, %d rows at risk)",
                 100.0 * agreement, 100.0 * agree_min, fl->flips, fl->at_risk);
    else if (!(sc->max_delta <= delta_max))
        snprintf(why, whylen, "max |delta logit| %.4f above %.4f", sc->max_delta, delta_max);
    else if (fl->thick > 0)
        snprintf(why, whylen,
                 "%d of %d flips on an fp32 margin >= %.3f (the widest %.3f, first at row %d): "
                 "not rounding",
                 fl->thick, fl->flips, fl->bound, fl->widest, fl->first_thick);
    return why[0] == '\0';
}
