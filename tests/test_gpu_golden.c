/* The whole CUDA classifier (backend table "cuda") on the CLINC150 demo model against the
 * Hugging Face fp32 golden file: argmax agreement >= 99.9% in fp16 and bf16, and
 * max |delta logit| <= 0.05 in fp16 (bf16 reported, bounded loosely). Batches are packed
 * in file order under a token budget, so every batch mixes lengths. SKIPPED without GPU. */
#include <jansson.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu/backend.h"
#include "gpu/model.h"

#ifndef RECLASS_HAVE_CUDA
int main(void) {
    printf("SKIP: built without CUDA\n");
    return 77;
}
#else
#include "gpu/cuda_backend.h"

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

/* budget, seqs_cap: batch shape. With RECLASS_CUDA_STREAMS=2 (set in main) small batches run
 * on one stream and batches of >= 4096 tokens are split across two streams, so both of the
 * backend's paths face the golden file. */
static int run_precision(const gpu_model_t *m, row_t *rows, int n, const char *prec,
                         double max_delta_bound, int budget, int seqs_cap) {
    gpu_backend_opts_t opts = {.token_budget = budget, .max_len = 512, .precision = prec};
    gpu_backend_t *be = NULL;
    char err[512];
    if (ops->init(m, &opts, &be, err, sizeof(err)) != 0) {
        printf("FAIL %s init: %s\n", prec, err);
        return 1;
    }
    int L = m->cfg.num_labels, agree = 0, with_logits = 0, failed = 0;
    double maxd = 0;
    int32_t *ids = malloc((size_t)budget * 4), *cu = malloc((size_t)(budget + 1) * 4);
    float *logits = malloc((size_t)budget * L * 4);
    for (int i = 0; i < n && !failed;) {
        gpu_batch_t b = {.ids = ids, .cu_seqlens = cu};
        cu[0] = 0;
        int first = i;
        while (i < n && cu[b.n_seqs] + rows[i].len <= budget && b.n_seqs < seqs_cap) {
            memcpy(ids + cu[b.n_seqs], rows[i].ids, (size_t)rows[i].len * 4);
            cu[b.n_seqs + 1] = cu[b.n_seqs] + rows[i].len;
            if (rows[i].len > b.max_len) b.max_len = rows[i].len;
            b.n_seqs++, i++;
        }
        b.n_tokens = cu[b.n_seqs];
        if (ops->forward(be, &b, logits, err, sizeof(err)) != 0) {
            printf("FAIL %s forward: %s\n", prec, err);
            failed = 1;
            break;
        }
        for (int s = 0; s < b.n_seqs; s++) {
            row_t *r = &rows[first + s];
            const float *lg = logits + (size_t)s * L;
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
    ops->free(be);
    free(ids), free(cu), free(logits);
    if (failed) return 1;
    double agreement = (double)agree / n;
    int ok = agreement >= 0.999 && maxd <= max_delta_bound;
    printf("%s %s budget %d: argmax agreement %d/%d = %.4f%% (>= 99.9%%), max |delta logit| %.4f "
           "over %d rows (<= %.2f)\n",
           ok ? "ok  " : "FAIL", prec, budget, agree, n, 100.0 * agreement, maxd, with_logits,
           max_delta_bound);
    printf("{\"test\":\"gpu_golden\",\"precision\":\"%s\",\"budget\":%d,\"agreement\":%.6f,"
           "\"max_abs_delta\":%.5f,\"rows\":%d}\n",
           prec, budget, agreement, maxd, n);
    return ok ? 0 : 1;
}

int main(void) {
    if (gpu_cuda_device_count() == 0) {
        printf("SKIP: no CUDA device\n");
        return 77;
    }
    gpu_model_t *m = NULL;
    char err[512];
    if (!(ops = gpu_backend_find("cuda", err, sizeof(err)))) {
        printf("FAIL: %s\n", err);
        return 1;
    }
    if (gpu_model_load(RECLASS_DEMO_MODEL, &m, err, sizeof(err)) != 0) {
        printf("FAIL model: %s\n", err);
        return 1;
    }
    row_t *rows = NULL;
    int n = load_rows(RECLASS_FIXTURES "/golden_clinc150_test.jsonl", m, &rows);
    if (n < 5000) {
        printf("FAIL golden file: %d rows\n", n);
        return 1;
    }
    setenv("RECLASS_CUDA_STREAMS", "2", 1); /* batches >= 4096 tokens take the split path */
    int fails = run_precision(m, rows, n, "fp16", 0.05, 4096, 200) +
                run_precision(m, rows, n, "bf16", 0.25, 4096, 200) +
                run_precision(m, rows, n, "fp16", 0.05, 16384, 1 << 30) +
                run_precision(m, rows, n, "bf16", 0.25, 16384, 1 << 30);
    setenv("RECLASS_CUDA_FUSE_RES", "0", 1); /* the opt-in unfused fp16 residual too */
    fails += run_precision(m, rows, n, "fp16", 0.05, 16384, 1 << 30);
    unsetenv("RECLASS_CUDA_FUSE_RES");
    for (int i = 0; i < n; i++)
        free(rows[i].ids), free(rows[i].logits);
    free(rows);
    gpu_model_free(m);
    printf("%s\n", fails ? "FAILED" : "PASSED");
    return fails ? 1 : 0;
}
#endif
