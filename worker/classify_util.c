#include "worker/classify_util.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

int64_t classify_now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

double classify_now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

void classify_session_free(classify_session_t *s) {
    if (s->be) s->ops->free(s->be);
    if (s->model) gpu_model_free(s->model);
    free(s->ids);
    free(s->cu);
    free(s->logits);
    memset(s, 0, sizeof(*s));
}

int classify_session_init(classify_session_t *s, gpu_model_t *model, const char *backend,
                          const gpu_backend_opts_t *opts, char *err, size_t errlen) {
    memset(s, 0, sizeof(*s));
    s->model = model;
    s->ops = gpu_backend_find(backend, err, errlen);
    if (!s->ops) {
        classify_session_free(s);
        return 2;
    }
    s->opts = *opts;
    if (s->opts.max_len <= 0 || s->opts.max_len > model->cfg.max_pos)
        s->opts.max_len = model->cfg.max_pos;
    s->max_seqs = s->opts.max_seqs > 0 ? s->opts.max_seqs : s->opts.token_budget / 2;
    if (s->max_seqs < 1) s->max_seqs = 1;
    s->opts.max_seqs = s->max_seqs;
    s->ids = malloc((size_t)s->opts.token_budget * sizeof(int32_t));
    s->cu = malloc((size_t)(s->max_seqs + 1) * sizeof(int32_t));
    s->logits = malloc((size_t)s->max_seqs * (size_t)model->cfg.num_labels * sizeof(float));
    if (!s->ids || !s->cu || !s->logits) {
        snprintf(err, errlen, "out of memory for batch buffers (token budget %d)",
                 s->opts.token_budget);
        classify_session_free(s);
        return 1;
    }
    if (s->ops->init(model, &s->opts, &s->be, err, errlen) != 0) {
        s->be = NULL;
        classify_session_free(s);
        return 1;
    }
    return 0;
}

/* Packs n sequences into the session's batch arrays; b points at them. */
static int session_pack(classify_session_t *s, const int32_t *const *seq, const int *lens, int n,
                        gpu_batch_t *b, char *err, size_t errlen) {
    if (n > s->max_seqs) {
        snprintf(err, errlen, "batch of %d sequences exceeds capacity %d", n, s->max_seqs);
        return -1;
    }
    int t = 0, longest = 0;
    s->cu[0] = 0;
    for (int i = 0; i < n; i++) {
        if (t + lens[i] > s->opts.token_budget) {
            snprintf(err, errlen, "batch exceeds the token budget %d", s->opts.token_budget);
            return -1;
        }
        memcpy(s->ids + t, seq[i], (size_t)lens[i] * sizeof(int32_t));
        t += lens[i];
        s->cu[i + 1] = t;
        if (lens[i] > longest) longest = lens[i];
    }
    *b = (gpu_batch_t){s->ids, s->cu, n, t, longest};
    return 0;
}

int classify_session_forward(classify_session_t *s, const int32_t *const *seq, const int *lens,
                             int n, char *err, size_t errlen) {
    gpu_batch_t b;
    if (session_pack(s, seq, lens, n, &b, err, errlen) != 0) return -1;
    return s->ops->forward(s->be, &b, s->logits, err, errlen);
}

int classify_session_submit(classify_session_t *s, const int32_t *const *seq, const int *lens,
                            int n, char *err, size_t errlen) {
    gpu_batch_t b;
    if (session_pack(s, seq, lens, n, &b, err, errlen) != 0) return -1;
    return s->ops->submit(s->be, &b, err, errlen); /* copies the inputs: s->ids is free again */
}

int classify_session_collect(classify_session_t *s, char *err, size_t errlen) {
    return s->ops->collect(s->be, s->logits, err, errlen);
}

void classify_json_string(FILE *f, const char *s) {
    putc('"', f);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\') {
            putc('\\', f);
            putc(*p, f);
        } else if (*p < 0x20) {
            fprintf(f, "\\u%04x", *p);
        } else {
            putc(*p, f);
        }
    }
    putc('"', f);
}

void classify_write_result(FILE *f, const gpu_model_config_t *cfg, const float *logits, int top_k,
                           int with_logits, int tokens, int truncated) {
    int L = cfg->num_labels;
    if (top_k > L) top_k = L;
    /* softmax in double against the max, so large logits cannot overflow */
    float mx = logits[0];
    for (int j = 1; j < L; j++)
        if (logits[j] > mx) mx = logits[j];
    double z = 0;
    for (int j = 0; j < L; j++)
        z += exp((double)logits[j] - mx);
    /* top-k by repeated selection: k is small, labels are few hundred at most */
    int top[64];
    int k = top_k < 64 ? top_k : 64;
    for (int i = 0; i < k; i++) {
        int best = -1;
        for (int j = 0; j < L; j++) {
            int used = 0;
            for (int q = 0; q < i; q++)
                used |= top[q] == j;
            if (!used && (best < 0 || logits[j] > logits[best])) best = j;
        }
        top[i] = best;
    }
    int arg = 0;
    for (int j = 1; j < L; j++)
        if (logits[j] > logits[arg]) arg = j;
    fputs("{\"label\": ", f);
    classify_json_string(f, cfg->id2label[arg]);
    fprintf(f, ", \"confidence\": %.6g, \"top_k\": [", exp((double)logits[arg] - mx) / z);
    for (int i = 0; i < k; i++) {
        fputs(i ? ", {\"label\": " : "{\"label\": ", f);
        classify_json_string(f, cfg->id2label[top[i]]);
        fprintf(f, ", \"p\": %.6g}", exp((double)logits[top[i]] - mx) / z);
    }
    fprintf(f, "], \"tokens\": %d, \"truncated\": %s", tokens, truncated ? "true" : "false");
    if (with_logits) {
        fputs(", \"logits\": [", f);
        for (int j = 0; j < L; j++)
            fprintf(f, j ? ", %.6g" : "%.6g", logits[j]);
        putc(']', f);
    }
    fputs("}\n", f);
}
