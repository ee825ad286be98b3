#include "worker/bench/workload.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/err.h"

/* splitmix64: tiny, seeded, identical everywhere */
static uint64_t mix_next(uint64_t *s) {
    uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static double mix_unit(uint64_t *s) { /* (0, 1) */
    return ((double)(mix_next(s) >> 11) + 0.5) * (1.0 / 9007199254740992.0);
}

void worker_workload_free(worker_workload_t *w) {
    if (!w) return;
    free(w->ids);
    free(w->off);
    free(w->text);
    free(w->text_off);
    free(w);
}

common_status_t worker_workload_tickets_mix(long n, uint64_t seed, int max_len, int vocab_size,
                                            worker_workload_t **out, common_err_t *e) {
    *out = NULL;
    int id_hi = vocab_size < 30000 ? vocab_size : 30000;
    if (id_hi <= 1000 || max_len < 2)
        return common_err_set(e, COMMON_USAGE,
                              "tickets-mix needs a vocabulary above 1000 ids and max length >= 2");
    worker_workload_t *w = calloc(1, sizeof(*w));
    if (!w || !(w->off = malloc((size_t)(n + 1) * sizeof(long)))) goto oom;
    uint64_t s = seed * 0x2545f4914f6cdd1dULL + 1;
    const double pi = 3.14159265358979323846;
    w->off[0] = 0;
    for (long i = 0; i < n; i++) {
        int len;
        if (mix_unit(&s) < 0.9) {
            double z = sqrt(-2.0 * log(mix_unit(&s))) * cos(2.0 * pi * mix_unit(&s));
            double l = round(exp(log(60.0) + 0.8 * z));
            len = l < 8 ? 8 : l > 512 ? 512 : (int)l;
        } else {
            len = 448 + (int)(mix_next(&s) % 65);
        }
        if (len > max_len) len = max_len;
        w->off[i + 1] = w->off[i] + len;
    }
    w->n = n;
    w->ids_cap = w->off[n];
    if (!(w->ids = malloc((size_t)w->ids_cap * sizeof(int32_t)))) goto oom;
    for (long i = 0; i < n; i++) {
        int32_t *t = w->ids + w->off[i];
        long len = w->off[i + 1] - w->off[i];
        t[0] = 101;
        for (long j = 1; j < len - 1; j++)
            t[j] = 1000 + (int32_t)(mix_next(&s) % (uint64_t)(id_hi - 1000));
        t[len - 1] = 102;
    }
    *out = w;
    return COMMON_OK;
oom:
    worker_workload_free(w);
    return common_err_set(e, COMMON_FATAL, "out of memory for %ld tickets", n);
}

/* Appends to a growable array; returns 0 or -1. */
static int grow(void **p, long *cap, long need, size_t elem) {
    if (need <= *cap) return 0;
    long c = *cap ? *cap : 1024;
    while (c < need)
        c *= 2;
    void *q = realloc(*p, (size_t)c * elem);
    if (!q) return -1;
    *p = q;
    *cap = c;
    return 0;
}

common_status_t worker_workload_load(const char *path, int max_len, int vocab_size,
                                     worker_workload_t **out, common_err_t *e) {
    *out = NULL;
    FILE *f = fopen(path, "r");
    if (!f)
        return common_err_set(e, COMMON_USAGE,
                              "cannot open workload %s: use a JSONL file or tickets-mix", path);
    worker_workload_t *w = calloc(1, sizeof(*w));
    char *line = NULL;
    size_t line_cap = 0;
    long off_cap = 0, toff_cap = 0, text_cap = 0, lineno = 0;
    int kind = 0; /* 1 ids, 2 text */
    common_status_t rc = COMMON_FATAL;
    if (!w) goto fail_oom;
    ssize_t got;
    while ((got = getline(&line, &line_cap, f)) != -1) {
        lineno++;
        const char *p = line;
        while (*p == ' ' || *p == '\t' || *p == '\r' || *p == '\n')
            p++;
        if (!*p) continue;
        json_error_t je;
        json_t *o = json_loadb(line, (size_t)got, 0, &je);
        json_t *ids = o && json_is_object(o) ? json_object_get(o, "ids") : NULL;
        json_t *text = o && json_is_object(o) ? json_object_get(o, "text") : NULL;
        int this_kind = json_is_array(ids) ? 1 : json_is_string(text) ? 2 : 0;
        if (!this_kind || (kind && this_kind != kind)) {
            rc = common_err_set(e, COMMON_USAGE,
                                this_kind ? "%s line %ld: mixes {\"ids\"} and {\"text\"} lines: "
                                            "use one kind per file"
                                          : "%s line %ld: not a JSON object with an \"ids\" array "
                                            "or a \"text\" string",
                                path, lineno);
            json_decref(o);
            goto fail;
        }
        kind = this_kind;
        if (grow((void **)&w->off, &off_cap, w->n + 2, sizeof(long))) goto fail_oom_json;
        if (w->n == 0) w->off[0] = 0;
        if (kind == 1) {
            long len = (long)json_array_size(ids);
            if (len < 1) {
                rc = common_err_set(e, COMMON_USAGE, "%s line %ld: \"ids\" is empty", path, lineno);
                json_decref(o);
                goto fail;
            }
            long keep = len > max_len ? max_len : len;
            if (grow((void **)&w->ids, &w->ids_cap, w->off[w->n] + keep, sizeof(int32_t)))
                goto fail_oom_json;
            int32_t *t = w->ids + w->off[w->n];
            for (long j = 0; j < keep; j++) {
                /* truncation keeps the head and the final id ([SEP]) */
                json_t *v = json_array_get(ids, j == keep - 1 ? len - 1 : j);
                json_int_t x = json_is_integer(v) ? json_integer_value(v) : -1;
                if (x < 0 || x >= vocab_size) {
                    rc = common_err_set(e, COMMON_USAGE,
                                        "%s line %ld: \"ids\"[%ld] is not an integer in 0..%d (the "
                                        "model's vocabulary)",
                                        path, lineno, j, vocab_size - 1);
                    json_decref(o);
                    goto fail;
                }
                t[j] = (int32_t)x;
            }
            if (keep < len) w->truncated++;
            w->off[w->n + 1] = w->off[w->n] + keep;
        } else {
            size_t tl = json_string_length(text);
            if (grow((void **)&w->text_off, &toff_cap, w->n + 2, sizeof(long))) goto fail_oom_json;
            if (w->n == 0) w->text_off[0] = 0;
            long at = w->text_off[w->n];
            if (grow((void **)&w->text, &text_cap, at + (long)tl + 1, 1)) goto fail_oom_json;
            memcpy(w->text + at, json_string_value(text), tl);
            w->text[at + (long)tl] = '\0';
            w->text_off[w->n + 1] = at + (long)tl + 1;
            w->off[w->n + 1] = 0;
        }
        json_decref(o);
        w->n++;
    }
    if (ferror(f)) {
        rc = common_err_set(e, COMMON_FATAL, "reading %s failed", path);
        goto fail;
    }
    if (w->n == 0) {
        rc = common_err_set(e, COMMON_USAGE, "%s holds no tickets", path);
        goto fail;
    }
    w->is_text = kind == 2;
    if (w->is_text) { /* ids are sized by the first tokenization */
        free(w->ids);
        w->ids = NULL;
        w->ids_cap = 0;
    }
    free(line);
    fclose(f);
    *out = w;
    return COMMON_OK;
fail_oom_json:
fail_oom:
    rc = common_err_set(e, COMMON_FATAL, "out of memory loading %s", path);
fail:
    free(line);
    fclose(f);
    worker_workload_free(w);
    return rc;
}

int worker_workload_tokenize(worker_workload_t *w, const worker_tok_t *tok, int max_len,
                             worker_ids_t *scratch) {
    w->truncated = 0;
    w->off[0] = 0;
    for (long i = 0; i < w->n; i++) {
        const char *t = w->text + w->text_off[i];
        size_t len = (size_t)(w->text_off[i + 1] - w->text_off[i] - 1);
        if (worker_tok_encode(tok, t, len, max_len, scratch) != 0) return -1;
        long need = w->off[i] + scratch->n;
        if (need > w->ids_cap) {
            long c = w->ids_cap ? w->ids_cap : 1 << 16;
            while (c < need)
                c *= 2;
            int32_t *q = realloc(w->ids, (size_t)c * sizeof(int32_t));
            if (!q) return -1;
            w->ids = q;
            w->ids_cap = c;
        }
        memcpy(w->ids + w->off[i], scratch->v, (size_t)scratch->n * sizeof(int32_t));
        w->off[i + 1] = need;
        w->truncated += scratch->truncated;
    }
    return 0;
}
