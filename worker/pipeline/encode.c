/* The encoder thread: accumulator -> classification engine -> sink queue. The engine packs,
 * runs and scores the batches (worker/classify/engine.h); this loop forms them from the
 * accumulator, hands the results to the sink and keeps the metrics. */
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

static void enc_slot_drop(enc_slot_t *sl) {
    for (int i = 0; i < sl->n; i++)
        pl_item_free(sl->items[i]);
    sl->n = 0;
}

/* Scores a collected batch on the pool: tasks of chunk items, each writing its own items. */
typedef struct {
    pl_t *pl;
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
    const cls_engine_t *eng = &j->pl->ses.eng;
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
 * pl->q.mu to queue). On failure the items are freed and err says why. */
static common_status_t enc_publish(pl_t *pl, cls_engine_t *eng, enc_slot_t *sl, common_err_t *err) {
    const int n = sl->n;
    const cls_batch_t *b = NULL;
    worker_stage_clock_t clk;
    worker_stage_begin(&clk);
    common_status_t rc = cls_engine_collect(eng, &b, err);
    worker_stage_end(&clk, WORKER_STAGE_COLLECT);
    if (!rc) {
        enc_score_job_t job = {.pl = pl, .b = b, .items = sl->items, .n = n};
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
        enc_slot_drop(sl);
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
    if (pl->ses.eng.ops->mem_stats) pl->ses.eng.ops->mem_stats(pl->ses.eng.be, &ms);
    worker_metrics_add(&worker_metrics.batches, 1);
    worker_metrics_add(&worker_metrics.tokens, b->n_tokens);
    atomic_fetch_add_explicit(&worker_metrics.encoder_ns, (long long)(b->compute_s * 1e9),
                              memory_order_relaxed);
    pl_metrics_store_mem(&ms);
    o->tel = (sink_batch_t){.tickets = n,
                            .real_tokens = b->n_tokens,
                            .padded_tokens = (long)n * b->longest,
                            .wait_ms = (double)(sl->popped_ms - sl->oldest_ms),
                            .compute_ms = b->compute_s * 1000.0,
                            .backend = pl->ses.eng.ops->name,
                            .device_used_bytes = (int64_t)ms.device_used,
                            .arena_bytes = (int64_t)ms.arena_bytes};
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

void *pl_encoder_main(void *arg) {
    pl_t *pl = arg;
    int cap = pl->ses.props.max_seqs;
    common_err_t err;
    char line[800]; /* err as the log line says it */
    cls_engine_t *eng = &pl->ses.eng;
    enc_slot_t slot[2] = {{0}};
    for (int i = 0; i < 2; i++)
        slot[i].items = malloc(sizeof(void *) * (size_t)cap);   /* (max_seqs) */
    int *lens = malloc(sizeof(*lens) * (size_t)cap);            /* (max_seqs) */
    const int32_t **seqp = malloc(sizeof(*seqp) * (size_t)cap); /* (max_seqs) */
    int failed = !slot[0].items || !slot[1].items || !lens || !seqp;
    if (failed) common_logf(stderr, "encoder: out of memory\n");

    enc_slot_t *prev = NULL; /* submitted, not yet published */
    int cur = 0;
    pthread_mutex_lock(&pl->q.mu);
    while (!failed && !pl->q.fatal) {
        int64_t now = common_now_ms();
        int pending = worker_fair_pending_items(pl->q.acc);
        if (pl->q.draining && pending == 0 && !prev) break;
        /* an urgent batch is not held back by the bulk queued for the sink (it goes ahead of
         * it there); it may overfill the queue by one bulk batch in flight */
        int urgent = worker_fair_urgent_lane(pl->q.acc) >= 0;
        int room = urgent || pl->q.out_items < pl->q.max_out_items; /* else the sink is behind */
        int ready = pending > 0 && (pl->q.draining || worker_fair_ready(pl->q.acc, now));
        int n = 0;
        if (room && ready) {
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
                common_status_t rc = enc_publish(pl, eng, prev, &err);
                prev = NULL;
                pthread_mutex_lock(&pl->q.mu);
                if (rc) {
                    common_logf(stderr, "encoder: %s\n", common_err_line(&err, line, sizeof line));
                    pl->q.fatal = 1;
                }
            } else {
                pl_queue_wait(&pl->st, PL_Q_ACCUM, 0, &pl->q.cv_enc, &pl->q.mu,
                              ready ? now + PL_READY_POLL_MS
                                    : worker_fair_next_deadline(pl->q.acc));
            }
            continue;
        }
        pthread_cond_signal(&pl->q.cv_accum); /* a consumer holding back may push again */
        pthread_mutex_unlock(&pl->q.mu);

        enc_slot_t *sl = &slot[cur];
        sl->n = n;
        sl->urgent = urgent;
        sl->popped_ms = now;
        common_status_t rc = enc_submit(eng, sl, seqp, lens, &err);
        if (rc) enc_slot_drop(sl);
        if (prev) { /* the device works on sl while prev is scored */
            if (rc)
                enc_slot_drop(prev); /* a failed submit aborts the batch in flight too */
            else
                rc = enc_publish(pl, eng, prev, &err);
            prev = NULL;
        }
        if (!rc && sl->urgent) { /* not kept in flight behind the next batch's run */
            rc = enc_publish(pl, eng, sl, &err);
            if (!rc) {
                pthread_mutex_lock(&pl->q.mu);
                continue;
            }
        }
        if (rc) {
            common_logf(stderr, "encoder: %s\n", common_err_line(&err, line, sizeof line));
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
    if (prev) enc_slot_drop(prev); /* stopped by a failure elsewhere */
    cls_engine_drain(eng);         /* collects what is in flight: the backend idles */
    for (int i = 0; i < 2; i++)
        free(slot[i].items);
    free(lens);
    free((void *)seqp);
    return NULL;
}
