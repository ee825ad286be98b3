/* The encoder thread: accumulator -> backend forward -> label, confidence, top-k. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "worker/pipeline/pipeline_int.h"

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

/* A batch from submit to its results: the encoder submits the next batch before it collects
 * and scores this one, so the device works while the host scores (with a backend that has
 * submit/collect; otherwise submit runs the forward and collect is a copy). */
typedef struct {
    void **items;  /* (max_seqs) owned from pop until published or freed */
    float *logits; /* (max_seqs, L) */
    int n, n_tok, longest;
    int64_t popped_ms, oldest_ms;
    double t_submit; /* monotonic seconds */
} enc_slot_t;

static void enc_slot_drop(enc_slot_t *sl) {
    for (int i = 0; i < sl->n; i++)
        pl_item_free(sl->items[i]);
    sl->n = 0;
}

/* Collects, scores and queues sl's batch for the sink (takes pl->q.mu to queue). *last_ready:
 * when the previous batch's logits were in; a batch's compute time runs from the later of
 * that and its submit to its own logits, so overlapped batches are not counted twice.
 * On failure the items are freed and err says why. */
static int enc_publish(pl_t *pl, enc_slot_t *sl, double *last_ready, float *probs, int *top,
                       char *err, size_t errlen) {
    const gpu_model_config_t *mc = &pl->model->cfg;
    const int L = mc->num_labels, k = pl->cfg->top_k, n = sl->n;
    int rc = pl->ops->collect(pl->be, sl->logits, err, errlen);
    double t_ready = pl_now_s();
    double t_start = sl->t_submit > *last_ready ? sl->t_submit : *last_ready;
    double dt = t_ready - t_start;
    *last_ready = t_ready;
    for (int i = 0; !rc && i < n; i++)
        if (score_item(sl->items[i], sl->logits + (size_t)i * L, mc, k, probs, top)) {
            snprintf(err, errlen, "out of memory");
            rc = -1;
        }
    pl_out_t *o = rc ? NULL : calloc(1, sizeof(*o));
    if (o) o->items = malloc(sizeof(*o->items) * (size_t)n); /* (n) */
    if (!rc && (!o || !o->items)) {
        snprintf(err, errlen, "out of memory");
        rc = -1;
    }
    if (rc) {
        if (o) free(o->items);
        free(o);
        enc_slot_drop(sl);
        return rc;
    }
    for (int i = 0; i < n; i++)
        o->items[i] = sl->items[i];
    o->n = n;
    sl->n = 0; /* the sink owns the items now */
    gpu_mem_stats_t ms = {0};
    if (pl->ops->mem_stats) pl->ops->mem_stats(pl->be, &ms);
    worker_metrics_add(&worker_metrics.batches, 1);
    worker_metrics_add(&worker_metrics.tokens, sl->n_tok);
    atomic_fetch_add_explicit(&worker_metrics.encoder_ns, (long long)(dt * 1e9),
                              memory_order_relaxed);
    pl_metrics_store_mem(&ms);
    o->tel = (sink_batch_t){.tickets = n,
                            .real_tokens = sl->n_tok,
                            .padded_tokens = (long)n * sl->longest,
                            .wait_ms = (double)(sl->popped_ms - sl->oldest_ms),
                            .compute_ms = dt * 1000.0,
                            .backend = pl->ops->name,
                            .device_used_bytes = (int64_t)ms.device_used,
                            .arena_bytes = (int64_t)ms.arena_bytes};
    pthread_mutex_lock(&pl->q.mu);
    pl->st.encoder_s += dt;
    if (pl->q.out_tail)
        pl->q.out_tail->next = o;
    else
        pl->q.out_head = o;
    pl->q.out_tail = o;
    pl->q.out_items += n;
    pthread_cond_signal(&pl->q.cv_sink);
    pthread_mutex_unlock(&pl->q.mu);
    return 0;
}

/* Packs sl's items into one batch and hands it to the backend (ids and cu are scratch). */
static int enc_submit(pl_t *pl, enc_slot_t *sl, int32_t *ids, int32_t *cu, char *err,
                      size_t errlen) {
    int n_tok = 0, longest = 0;
    int64_t oldest = sl->popped_ms;
    cu[0] = 0;
    for (int i = 0; i < sl->n; i++) {
        pl_item_t *it = sl->items[i];
        memcpy(ids + n_tok, it->ids, sizeof(*ids) * (size_t)it->n_ids);
        n_tok += it->n_ids;
        cu[i + 1] = n_tok;
        if (it->n_ids > longest) longest = it->n_ids;
        if (it->arrived_ms < oldest) oldest = it->arrived_ms;
    }
    sl->n_tok = n_tok, sl->longest = longest, sl->oldest_ms = oldest;
    gpu_batch_t b = {
        .ids = ids, .cu_seqlens = cu, .n_seqs = sl->n, .n_tokens = n_tok, .max_len = longest};
    sl->t_submit = pl_now_s();
    return pl->ops->submit(pl->be, &b, err, errlen);
}

void *pl_encoder_main(void *arg) {
    pl_t *pl = arg;
    const gpu_model_config_t *mc = &pl->model->cfg;
    int budget = pl->token_budget, cap = pl->max_seqs, L = mc->num_labels;
    int k = pl->cfg->top_k;
    enc_slot_t slot[2] = {{0}};
    for (int i = 0; i < 2; i++) {
        slot[i].items = malloc(sizeof(void *) * (size_t)cap);             /* (max_seqs) */
        slot[i].logits = malloc(sizeof(float) * (size_t)cap * (size_t)L); /* (max_seqs, L) */
    }
    int *lens = malloc(sizeof(*lens) * (size_t)cap);           /* (max_seqs) */
    int32_t *ids = malloc(sizeof(*ids) * (size_t)budget);      /* (token_budget) */
    int32_t *cu = malloc(sizeof(*cu) * (size_t)(cap + 1));     /* (max_seqs + 1) */
    float *probs = malloc(sizeof(*probs) * (size_t)L);         /* (L) */
    int *top = malloc(sizeof(*top) * (size_t)(k < L ? k : L)); /* (k) */
    int failed = !slot[0].items || !slot[0].logits || !slot[1].items || !slot[1].logits || !lens ||
                 !ids || !cu || !probs || !top;
    if (failed) fprintf(stderr, "reclass run: encoder: out of memory\n");
    if (!failed && (!pl->ops->submit || !pl->ops->collect)) {
        fprintf(stderr, "reclass run: encoder: backend %s has no submit/collect\n", pl->ops->name);
        failed = 1;
    }

    enc_slot_t *prev = NULL; /* submitted, not yet published */
    int cur = 0;
    double last_ready = 0;
    char err[512];
    pthread_mutex_lock(&pl->q.mu);
    while (!failed && !pl->q.fatal) {
        int64_t now = pl_now_ms();
        int pending = worker_accum_pending_items(pl->q.acc);
        if (pl->q.draining && pending == 0 && !prev) break;
        int room = pl->q.out_items < pl->q.max_out_items; /* else the sink is behind (or db down) */
        int ready = pending > 0 && (pl->q.draining || worker_accum_ready(pl->q.acc, now));
        int n = room && ready
                    ? worker_accum_pop(pl->q.acc, now, pl->q.draining, slot[cur].items, lens, cap)
                    : 0;
        if (n <= 0) {
            if (!room) { /* even a batch in flight waits: its rows would overfill the queue */
                pl_wait_until_ms(&pl->q.cv_room, &pl->q.mu, now + 100);
            } else if (prev) { /* nothing to submit: finish the batch in flight */
                pthread_mutex_unlock(&pl->q.mu);
                int rc = enc_publish(pl, prev, &last_ready, probs, top, err, sizeof(err));
                prev = NULL;
                pthread_mutex_lock(&pl->q.mu);
                if (rc) {
                    fprintf(stderr, "reclass run: encoder: %s\n", err);
                    pl->q.fatal = 1;
                }
            } else {
                pl_wait_until_ms(&pl->q.cv_enc, &pl->q.mu,
                                 ready ? now + 5 : worker_accum_next_deadline(pl->q.acc));
            }
            continue;
        }
        pthread_cond_signal(&pl->q.cv_accum); /* a consumer holding back may push again */
        pthread_mutex_unlock(&pl->q.mu);

        enc_slot_t *sl = &slot[cur];
        sl->n = n;
        sl->popped_ms = now;
        int rc = enc_submit(pl, sl, ids, cu, err, sizeof(err));
        if (rc) enc_slot_drop(sl);
        if (prev) { /* the device works on sl while prev is scored */
            if (rc)
                enc_slot_drop(prev); /* a failed submit aborts the batch in flight too */
            else
                rc = enc_publish(pl, prev, &last_ready, probs, top, err, sizeof(err));
            prev = NULL;
        }
        if (rc) {
            fprintf(stderr, "reclass run: encoder: %s\n", err);
            enc_slot_drop(sl);
            pthread_mutex_lock(&pl->q.mu);
            pl->q.fatal = 1;
            break;
        }
        prev = sl;
        cur ^= 1;
        pthread_mutex_lock(&pl->q.mu);
    }
    pl->q.enc_done = 1;
    if (failed) pl->q.fatal = 1;
    pthread_cond_broadcast(&pl->q.cv_sink);
    pthread_mutex_unlock(&pl->q.mu);
    if (prev) { /* stopped by a failure elsewhere: collect so the backend is idle, drop */
        if (pl->ops->collect(pl->be, prev->logits, err, sizeof(err)) != 0)
            fprintf(stderr, "reclass run: encoder: %s\n", err);
        enc_slot_drop(prev);
    }
    for (int i = 0; i < 2; i++) {
        free(slot[i].items);
        free(slot[i].logits);
    }
    free(lens);
    free(ids);
    free(cu);
    free(probs);
    free(top);
    return NULL;
}
