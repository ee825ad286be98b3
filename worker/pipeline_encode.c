/* The encoder thread: accumulator -> backend forward -> label, confidence, top-k. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "worker/pipeline_int.h"

/* Appends s to buf as a JSON string literal; returns the new length (bounded by cap). */
static size_t json_str(char *buf, size_t len, size_t cap, const char *s) {
    if (len < cap) buf[len++] = '"';
    for (; *s && len + 7 < cap; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') {
            buf[len++] = '\\';
            buf[len++] = (char)c;
        } else if (c < 0x20) {
            len += (size_t)snprintf(buf + len, cap - len, "\\u%04x", c);
        } else {
            buf[len++] = (char)c;
        }
    }
    if (len < cap) buf[len++] = '"';
    return len;
}

/* Softmax over one row of logits; fills label, confidence and the top-k JSON of it. */
static int score_item(pl_item_t *it, const float *logits, const gpu_model_config_t *mc, int k,
                      float *probs, int *top) {
    int L = mc->num_labels;
    float mx = logits[0];
    for (int j = 1; j < L; j++)
        if (logits[j] > mx) mx = logits[j];
    double sum = 0;
    for (int j = 0; j < L; j++)
        sum += (probs[j] = expf(logits[j] - mx));
    for (int j = 0; j < L; j++)
        probs[j] = (float)(probs[j] / sum);
    if (k > L) k = L;
    for (int r = 0; r < k; r++) { /* k is tiny: selection beats sorting L labels */
        int best = -1;
        for (int j = 0; j < L; j++) {
            int used = 0;
            for (int q = 0; q < r; q++)
                used |= top[q] == j;
            if (!used && (best < 0 || probs[j] > probs[best])) best = j;
        }
        top[r] = best;
    }
    it->label_id = top[0];
    it->confidence = probs[top[0]];
    size_t cap = 64 + (size_t)k * 160, len = 0;
    char *buf = malloc(cap); /* (cap) JSON text */
    if (!buf) return -1;
    buf[len++] = '[';
    for (int r = 0; r < k; r++) {
        if (r) buf[len++] = ',';
        len += (size_t)snprintf(buf + len, cap - len, "{\"label\":");
        len = json_str(buf, len, cap - 40, mc->id2label[top[r]]);
        len += (size_t)snprintf(buf + len, cap - len, ",\"p\":%.5f}", probs[top[r]]);
    }
    if (len + 2 > cap) len = cap - 2;
    buf[len++] = ']';
    buf[len] = '\0';
    it->top_k_json = buf;
    return 0;
}

void pl_wait_until_ms(pthread_cond_t *cv, pthread_mutex_t *mu, int64_t wake_ms) {
    int64_t now = pl_now_ms();
    int64_t dt = wake_ms - now;
    if (dt > 100) dt = 100; /* re-check flags regularly */
    if (dt < 1) dt = 1;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_nsec += (long)(dt % 1000) * 1000000L;
    ts.tv_sec += (time_t)(dt / 1000) + ts.tv_nsec / 1000000000L;
    ts.tv_nsec %= 1000000000L;
    pthread_cond_timedwait(cv, mu, &ts);
}

void *pl_encoder_main(void *arg) {
    pl_t *pl = arg;
    const gpu_model_config_t *mc = &pl->model->cfg;
    int budget = pl->token_budget, cap = pl->max_seqs, L = mc->num_labels;
    int k = pl->cfg->top_k;
    void **items = malloc(sizeof(*items) * (size_t)cap);               /* (max_seqs) */
    int *lens = malloc(sizeof(*lens) * (size_t)cap);                   /* (max_seqs) */
    int32_t *ids = malloc(sizeof(*ids) * (size_t)budget);              /* (token_budget) */
    int32_t *cu = malloc(sizeof(*cu) * (size_t)(cap + 1));             /* (max_seqs + 1) */
    float *logits = malloc(sizeof(*logits) * (size_t)cap * (size_t)L); /* (max_seqs, L) */
    float *probs = malloc(sizeof(*probs) * (size_t)L);                 /* (L) */
    int *top = malloc(sizeof(*top) * (size_t)(k < L ? k : L));         /* (k) */
    int failed = !items || !lens || !ids || !cu || !logits || !probs || !top;
    if (failed) fprintf(stderr, "reclass run: encoder: out of memory\n");

    pthread_mutex_lock(&pl->mu);
    while (!failed && !pl->fatal) {
        int64_t now = pl_now_ms();
        int pending = worker_accum_pending_items(pl->acc);
        if (pl->draining && pending == 0) break;
        if (pl->out_items >= pl->max_out_items) { /* the sink is behind (or the db is down) */
            pl_wait_until_ms(&pl->cv_room, &pl->mu, now + 100);
            continue;
        }
        if (!pl->draining && !worker_accum_ready(pl->acc, now)) {
            pl_wait_until_ms(&pl->cv_enc, &pl->mu, worker_accum_next_deadline(pl->acc));
            continue;
        }
        int n = worker_accum_pop(pl->acc, now, pl->draining, items, lens, cap);
        if (n <= 0) {
            pl_wait_until_ms(&pl->cv_enc, &pl->mu, now + 5);
            continue;
        }
        pthread_cond_signal(&pl->cv_accum); /* a consumer holding back may push again */
        pl->encoding = 1;
        pthread_mutex_unlock(&pl->mu);

        double t0 = pl_now_s();
        int n_tok = 0, longest = 0;
        int64_t oldest = now;
        cu[0] = 0;
        for (int i = 0; i < n; i++) {
            pl_item_t *it = items[i];
            memcpy(ids + n_tok, it->ids, sizeof(*ids) * (size_t)it->n_ids);
            n_tok += it->n_ids;
            cu[i + 1] = n_tok;
            if (it->n_ids > longest) longest = it->n_ids;
            if (it->arrived_ms < oldest) oldest = it->arrived_ms;
        }
        gpu_batch_t b = {
            .ids = ids, .cu_seqlens = cu, .n_seqs = n, .n_tokens = n_tok, .max_len = longest};
        char err[512];
        int rc = pl->ops->forward(pl->be, &b, logits, err, sizeof(err));
        for (int i = 0; !rc && i < n; i++)
            if (score_item(items[i], logits + (size_t)i * L, mc, k, probs, top)) {
                snprintf(err, sizeof(err), "out of memory");
                rc = -1;
            }
        double dt = pl_now_s() - t0;
        pl_out_t *o = rc ? NULL : calloc(1, sizeof(*o));
        if (o) o->items = malloc(sizeof(*o->items) * (size_t)n); /* (n) */
        if (!rc && (!o || !o->items)) {
            snprintf(err, sizeof(err), "out of memory");
            rc = -1;
        }
        if (rc) {
            fprintf(stderr, "reclass run: encoder: %s\n", err);
            if (o) free(o->items);
            free(o);
            for (int i = 0; i < n; i++)
                pl_item_free(items[i]);
            pthread_mutex_lock(&pl->mu);
            pl->encoding = 0;
            pl->fatal = 1;
            break;
        }
        for (int i = 0; i < n; i++)
            o->items[i] = items[i];
        o->n = n;
        gpu_mem_stats_t ms = {0};
        if (pl->ops->mem_stats) pl->ops->mem_stats(pl->be, &ms);
        worker_metrics_add(&worker_metrics.batches, 1);
        worker_metrics_add(&worker_metrics.tokens, n_tok);
        atomic_fetch_add_explicit(&worker_metrics.encoder_ns, (long long)(dt * 1e9),
                                  memory_order_relaxed);
        pl_metrics_store_mem(&ms);
        o->tel = (sink_batch_t){.tickets = n,
                                .real_tokens = n_tok,
                                .padded_tokens = (long)n * longest,
                                .wait_ms = (double)(now - oldest),
                                .compute_ms = dt * 1000.0,
                                .backend = pl->ops->name,
                                .device_used_bytes = (int64_t)ms.device_used,
                                .arena_bytes = (int64_t)ms.arena_bytes};
        pthread_mutex_lock(&pl->mu);
        pl->encoding = 0;
        pl->encoder_s += dt;
        if (pl->out_tail)
            pl->out_tail->next = o;
        else
            pl->out_head = o;
        pl->out_tail = o;
        pl->out_items += n;
        pthread_cond_signal(&pl->cv_sink);
    }
    pl->enc_done = 1;
    if (failed) pl->fatal = 1;
    pthread_cond_broadcast(&pl->cv_sink);
    pthread_mutex_unlock(&pl->mu);
    free(items);
    free(lens);
    free(ids);
    free(cu);
    free(logits);
    free(probs);
    free(top);
    return NULL;
}
