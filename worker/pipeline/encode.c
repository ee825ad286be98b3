/* The encoder threads: accumulator -> classification engine -> sink queue, one thread per
 * engine (--encoders on each of --devices). The engine packs, runs and scores the batches
 * (worker/classify/engine.h); this loop takes them from the one accumulator (whichever encoder
 * is free takes the next), hands the results to the sink and keeps the metrics. An encoder
 * whose backend fails stops and hands its batches in flight back (q.retry), which the others
 * run before anything new; the last one's failure stops the worker, as a lone encoder's does. */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/err.h"
#include "worker/classify/engine.h"
#include "worker/pipeline/pipeline_int.h"
#include "worker/pipeline/pool.h"

/* The items of a batch from pop until published: the encoder submits the next batch before it
 * collects and scores this one, so the device works while the host scores. */
typedef struct {
    void **items; /* (max_seqs) owned from pop until published or freed */
    int n;
    int urgent; /* of a lane more urgent than the last: published as soon as it is run */
    int64_t popped_ms, oldest_ms;
} enc_slot_t;

int pl_encoder_device(const pl_encoder_t *en) {
    /* a backend without devices runs on the host, whatever --devices said: 0 would name a
     * real CUDA ordinal */
    return en->eng->ops->device_count ? en->device : -1;
}

static void enc_slot_drop(enc_slot_t *sl) {
    for (int i = 0; i < sl->n; i++)
        pl_item_free(sl->items[i]);
    sl->n = 0;
}

/* Scores a collected batch on the pool: tasks of chunk items, each writing its own items. */
typedef struct {
    pl_t *pl;
    const cls_engine_t *eng;
    const cls_batch_t *b;
    void **items;
    int n;
    int chunk; /* items per task (enc_score_chunk) */
    atomic_int oom;
} enc_score_job_t;

/* Items per scoring task. The encoder thread waits for a batch's scores before it queues the
 * batch and pops the next, so a batch is cut into about two tasks per pool slot: every thread
 * takes part (a batch of a few hundred tickets in fixed chunks of 128 kept 16 threads to 4 or
 * 5), and the last task to finish is short. Below PL_SCORE_MIN_CHUNK items a task's hand-off
 * (a lock and a wake-up, ~1 us) would cost more than it spreads. */
#define PL_SCORE_MIN_CHUNK 16

static int enc_score_chunk(int n, int slots) {
    int per = (n + 2 * slots - 1) / (2 * slots);
    return per < PL_SCORE_MIN_CHUNK ? PL_SCORE_MIN_CHUNK : per;
}

static void enc_score_task(void *ctx, int task, int slot) {
    (void)slot;
    enc_score_job_t *j = ctx;
    const cls_engine_t *eng = j->eng;
    const int k = j->pl->cfg->top_k;
    int end = (task + 1) * j->chunk < j->n ? (task + 1) * j->chunk : j->n;
    worker_stage_clock_t clk;
    worker_stage_begin(&clk);
    for (int i = task * j->chunk; i < end; i++) {
        pl_item_t *it = j->items[i];
        cls_result_t r;
        cls_buf_t js = {0};
        cls_engine_score(eng, j->b, i, k, &r);
        cls_json_top_k(&js, &r, cls_engine_labels(eng));
        if (js.oom) {
            cls_buf_free(&js);
            atomic_store(&j->oom, 1);
            continue;
        }
        it->label_id = r.label;
        it->confidence = r.confidence;
        it->top_k_json = js.s; /* the item owns it now */
    }
    worker_stage_end(&clk, WORKER_STAGE_SCORE);
}

/* Collects sl's batch (the oldest in flight), scores it and queues it for the sink (takes
 * pl->q.mu to queue). On failure the items stay in sl and err says why. */
static common_status_t enc_publish(const pl_encoder_t *en, enc_slot_t *sl, common_err_t *err) {
    pl_t *pl = en->pl;
    cls_engine_t *eng = en->eng;
    const int n = sl->n;
    const cls_batch_t *b = NULL;
    worker_stage_clock_t clk;
    worker_stage_begin(&clk);
    common_status_t rc = cls_engine_collect(eng, &b, err);
    worker_stage_end(&clk, WORKER_STAGE_COLLECT);
    if (!rc) {
        enc_score_job_t job = {.pl = pl, .eng = eng, .b = b, .items = sl->items, .n = n};
        job.chunk = enc_score_chunk(n, pl_pool_slots(pl->pool));
        pl_pool_run(pl->pool, (n + job.chunk - 1) / job.chunk, enc_score_task, &job);
        worker_stage_begin(&clk); /* the tasks timed themselves */
        if (atomic_load(&job.oom)) rc = common_err_set(err, COMMON_FATAL, "out of memory");
    }
    pl_out_t *o = rc ? NULL : calloc(1, sizeof(*o));
    if (o) o->items = malloc(sizeof(*o->items) * (size_t)n); /* (n) */
    if (!rc && (!o || !o->items)) rc = common_err_set(err, COMMON_FATAL, "out of memory");
    if (rc) {
        if (o) free(o->items);
        free(o);
        return rc;
    }
    const int64_t now = common_now_ms();
    int64_t accum_ms = 0; /* the tickets' time in the accumulator, summed */
    for (int i = 0; i < n; i++) {
        pl_item_t *it = sl->items[i];
        accum_ms += sl->popped_ms - it->arrived_ms;
        worker_metrics_wait_observe(it->lane, WORKER_WAIT_POLL, it->arrived_ms - it->polled_ms);
        worker_metrics_wait_observe(it->lane, WORKER_WAIT_ACCUMULATE,
                                    sl->popped_ms - it->arrived_ms);
        worker_metrics_wait_observe(it->lane, WORKER_WAIT_ENCODE, now - sl->popped_ms);
        it->queued_ms = now;
        o->items[i] = it;
    }
    o->n = n;
    o->urgent = sl->urgent;
    sl->n = 0; /* the sink owns the items now */
    gpu_mem_stats_t ms = {0};
    if (eng->ops->mem_stats) eng->ops->mem_stats(eng->be, &ms);
    worker_metrics_add(&worker_metrics.batches, 1);
    worker_metrics_add(&worker_metrics.tokens, b->n_tokens);
    atomic_fetch_add_explicit(&worker_metrics.encoder_ns, (long long)(b->compute_s * 1e9),
                              memory_order_relaxed);
    pl_metrics_store_mem(en, &ms);
    o->tel = (sink_batch_t){.tickets = n,
                            .real_tokens = b->n_tokens,
                            .padded_tokens = (long)n * b->longest,
                            .wait_ms = (double)(sl->popped_ms - sl->oldest_ms),
                            .compute_ms = b->compute_s * 1000.0,
                            .backend = eng->ops->name,
                            .device_used_bytes = (int64_t)ms.device_used,
                            .arena_bytes = (int64_t)ms.arena_bytes,
                            .encoder = en->id,
                            .device = pl_encoder_device(en),
                            .worker = pl->worker_id};
    o->queued_s = common_now_s();
    pthread_mutex_lock(&pl->q.mu);
    pl->st.encoder_s += b->compute_s;
    pl_queue_stat_t *qa = &pl->st.queue[PL_Q_ACCUM], *qe = &pl->st.queue[PL_Q_ENCODE];
    qa->batches++;
    qa->wait_s += n > 0 ? (double)accum_ms * 1e-3 / n : 0.0;
    qe->batches++;
    qe->wait_s += (double)(now - sl->popped_ms) * 1e-3;
    pl_out_t **at = o->urgent ? (pl->q.out_urgent ? &pl->q.out_urgent->next : &pl->q.out_head)
                              : (pl->q.out_tail ? &pl->q.out_tail->next : &pl->q.out_head);
    o->next = *at; /* an urgent batch goes after the urgent ones queued, before the bulk */
    *at = o;
    if (!o->next) pl->q.out_tail = o;
    if (o->urgent) pl->q.out_urgent = o;
    pl->q.out_items += n;
    if (--pl->q.enc_batches == 0) pthread_cond_broadcast(&pl->q.cv_enc); /* drain may end */
    pthread_cond_signal(&pl->q.cv_sink);
    pthread_mutex_unlock(&pl->q.mu);
    worker_stage_end(&clk, WORKER_STAGE_ROWS);
    return COMMON_OK;
}

/* Hands sl's items to the engine as one batch (seqp, lens: scratch). */
static common_status_t enc_submit(cls_engine_t *eng, enc_slot_t *sl, const int32_t **seqp,
                                  int *lens, common_err_t *err) {
    int64_t oldest = sl->popped_ms;
    for (int i = 0; i < sl->n; i++) {
        pl_item_t *it = sl->items[i];
        seqp[i] = it->ids;
        lens[i] = it->n_ids;
        if (it->arrived_ms < oldest) oldest = it->arrived_ms;
    }
    sl->oldest_ms = oldest;
    worker_stage_clock_t clk;
    worker_stage_begin(&clk);
    common_status_t rc = cls_engine_pack(eng, seqp, lens, sl->n, err);
    worker_stage_end(&clk, WORKER_STAGE_PACK);
    if (!rc) rc = cls_engine_submit_packed(eng, err);
    worker_stage_end(&clk, WORKER_STAGE_SUBMIT);
    return rc;
}

/* Takes the oldest batch handed back by a failed encoder into sl (q.mu held): its count. */
static int enc_take_retry(pl_t *pl, enc_slot_t *sl) {
    pl_retry_t *r = pl->q.retry_head;
    pl->q.retry_head = r->next;
    if (!pl->q.retry_head) pl->q.retry_tail = NULL;
    memcpy(sl->items, r->items, sizeof(void *) * (size_t)r->n);
    int n = r->n;
    sl->urgent = r->urgent;
    r->n = 0;
    return n;
}

/* en's backend failed (err) with the batches of slots a and b (either may be NULL or empty)
 * in flight; q.mu held. While another encoder is up, en stops and its batches go to q.retry
 * for the others, whole, scores dropped; else the worker stops (q.fatal) as before there were
 * several. */
static void enc_fail(pl_encoder_t *en, enc_slot_t *a, enc_slot_t *b, const common_err_t *err) {
    pl_t *pl = en->pl;
    char line[800]; /* err as the log line says it */
    common_err_line(err, line, sizeof line);
    enc_slot_t *sl[2] = {a, b};
    int held = 0;
    for (int k = 0; k < 2; k++)
        held += sl[k] && sl[k]->n > 0;
    pl->q.enc_up--;
    if (pl->n_enc == 1) {
        common_logf(stderr, "encoder: %s\n", line);
    } else if (pl->q.enc_up == 0) {
        common_logf(stderr, "encoder %d (device %d) stopped, the last one up: %s\n", en->id,
                    en->device, line);
    } else {
        common_logf(stderr,
                    "encoder %d (device %d) stopped: %s; its %d batches in flight go to the "
                    "others (%d up)\n",
                    en->id, en->device, line, held, pl->q.enc_up);
    }
    for (int k = 0; k < 2; k++) {
        if (!sl[k] || sl[k]->n == 0) continue;
        pl->q.enc_batches--;
        if (pl->q.enc_up == 0) {
            enc_slot_drop(sl[k]);
            continue;
        }
        for (int i = 0; i < sl[k]->n; i++) { /* scored in part, perhaps: scored again */
            pl_item_t *it = sl[k]->items[i];
            free(it->top_k_json);
            it->top_k_json = NULL;
        }
        pl_retry_t *r = &en->retry[k];
        *r = (pl_retry_t){.items = sl[k]->items, .n = sl[k]->n, .urgent = sl[k]->urgent};
        if (pl->q.retry_tail)
            pl->q.retry_tail->next = r;
        else
            pl->q.retry_head = r;
        pl->q.retry_tail = r;
        sl[k]->n = 0;
    }
    atomic_store(&worker_metrics.encoders_up, pl->q.enc_up);
    if (pl->q.enc_up == 0) pl->q.fatal = 1;
    pthread_cond_broadcast(&pl->q.cv_enc);
}

void *pl_encoder_main(void *arg) {
    pl_encoder_t *en = arg;
    pl_t *pl = en->pl;
    int cap = pl->ses.props.max_seqs;
    common_err_t err;
    cls_engine_t *eng = en->eng;
    enc_slot_t slot[2] = {{.items = en->items[0]}, {.items = en->items[1]}};
    int *lens = en->lens;
    const int32_t **seqp = en->seqp;

    enc_slot_t *prev = NULL; /* submitted, not yet published */
    int cur = 0;
    pthread_mutex_lock(&pl->q.mu);
    while (!pl->q.fatal) {
        int64_t now = common_now_ms();
        int pending = worker_fair_pending_items(pl->q.acc);
        /* while another encoder holds a batch, it may yet hand it back */
        if (pl->q.draining && pending == 0 && !pl->q.retry_head && pl->q.enc_batches == 0) break;
        /* an urgent batch is not held back by the bulk queued for the sink (it goes ahead of
         * it there); it may overfill the queue by one bulk batch in flight */
        int urgent = worker_fair_urgent_lane(pl->q.acc) >= 0;
        int room = urgent || pl->q.out_items < pl->q.max_out_items; /* else the sink is behind */
        int ready = pending > 0 && (pl->q.draining || worker_fair_ready(pl->q.acc, now));
        int n = 0;
        if (room && pl->q.retry_head) {
            n = enc_take_retry(pl, &slot[cur]);
            urgent = slot[cur].urgent;
        } else if (room && ready) {
            worker_stage_clock_t clk;
            worker_stage_begin(&clk);
            n = worker_fair_pop(pl->q.acc, now, pl->q.draining, slot[cur].items, lens, cap);
            worker_stage_end(&clk, WORKER_STAGE_ACCUM);
        }
        if (n <= 0) {
            if (!room) { /* even a batch in flight waits: its rows would overfill the queue */
                pl_queue_wait(&pl->st, PL_Q_OUT, 1, &pl->q.cv_room, &pl->q.mu, now + PL_RECHECK_MS);
            } else if (prev) { /* nothing to submit: finish the batch in flight */
                pthread_mutex_unlock(&pl->q.mu);
                common_status_t rc = enc_publish(en, prev, &err);
                pthread_mutex_lock(&pl->q.mu);
                if (rc) {
                    enc_fail(en, prev, NULL, &err);
                    prev = NULL;
                    break;
                }
                prev = NULL;
            } else {
                pl_queue_wait(&pl->st, PL_Q_ACCUM, 0, &pl->q.cv_enc, &pl->q.mu,
                              ready ? now + PL_READY_POLL_MS
                                    : worker_fair_next_deadline(pl->q.acc));
            }
            continue;
        }
        pl->q.enc_batches++;
        pthread_cond_signal(&pl->q.cv_accum); /* a consumer holding back may push again */
        pthread_mutex_unlock(&pl->q.mu);

        enc_slot_t *sl = &slot[cur];
        sl->n = n;
        sl->urgent = urgent;
        sl->popped_ms = now;
        common_status_t rc = enc_submit(eng, sl, seqp, lens, &err);
        if (!rc && prev) /* the device works on sl while prev is scored */
            rc = enc_publish(en, prev, &err);
        if (!rc) prev = NULL;
        if (!rc && sl->urgent) { /* not kept in flight behind the next batch's run */
            rc = enc_publish(en, sl, &err);
            if (!rc) {
                pthread_mutex_lock(&pl->q.mu);
                continue;
            }
        }
        pthread_mutex_lock(&pl->q.mu);
        if (rc) { /* a failed submit or collect aborts both batches in flight */
            enc_fail(en, sl, prev, &err);
            prev = NULL;
            break;
        }
        prev = sl;
        cur ^= 1;
    }
    if (prev) { /* stopped by a failure elsewhere */
        pl->q.enc_batches--;
        enc_slot_drop(prev);
    }
    if (--pl->q.enc_running == 0) {
        pl->q.enc_done = 1;
        pthread_cond_broadcast(&pl->q.cv_sink);
    }
    pthread_cond_broadcast(&pl->q.cv_enc); /* the others may be waiting out its batches */
    pthread_mutex_unlock(&pl->q.mu);
    cls_engine_drain(eng); /* collects what is in flight: the backend idles */
    return NULL;
}
