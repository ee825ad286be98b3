/* The sink threads: results -> PostgreSQL (one transaction per group of batches) -> offsets;
 * rows the database refuses -> back to the poll thread, for their dead letters. Each writer has
 * its own connection and takes whole batches off the one queue; commits of different writers
 * may land in any order, which the offset tracker allows (an offset is stored only once every
 * earlier one of its partition is committed). */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/err.h"
#include "worker/pipeline/pipeline_int.h"

static void sleep_ms(int ms) {
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* One write the sink retries until committed: results and telemetry, or failures. */
typedef struct {
    const sink_result_t *rows;
    int n_rows;
    const sink_batch_t *bat;
    int n_bat;
    const sink_failure_t *fails;
    int n_fails;
} pl_write_t;

static common_status_t write_once(sink_t *sk, const pl_write_t *w, common_err_t *e) {
    if (w->fails) return sink_write_failures(sk, w->fails, w->n_fails, e);
    return sink_write(sk, w->rows, w->n_rows, w->bat, w->n_bat, e);
}

/* Writes until committed. COMMON_RETRY: pause consumption, reconnect with exponential backoff,
 * retry the same rows. Returns COMMON_OK or COMMON_FATAL. */
static int write_committed(pl_t *pl, sink_t *sk, const pl_write_t *w) {
    common_err_t e;
    char err[COMMON_ERR_LINE_MAX]; /* the last failure, for the log lines */
    int n_rows = w->fails ? w->n_fails : w->n_rows;
    int backoff = PL_RETRY_FIRST_MS;
    time_t stop_at = 0; /* after a signal: when to give up on a database that is down */
    for (;;) {
        common_status_t rc = write_once(sk, w, &e);
        if (rc == COMMON_OK) break;
        common_err_line(&e, err, sizeof err);
        if (rc != COMMON_RETRY) {
            common_logf(stderr, "database write failed for good: %s\n", err);
            atomic_store(&worker_metrics.sink_connected, 0);
            return COMMON_FATAL;
        }
        worker_metrics_add(&worker_metrics.sink_retries, 1);
        atomic_store(&worker_metrics.sink_connected, 0);
        pthread_mutex_lock(&pl->q.mu);
        if (!pl->q.sink_down)
            common_logf(stderr,
                        "database unavailable (%s): pausing consumption, "
                        "retrying\n",
                        err);
        pl->q.sink_down = 1;
        pthread_mutex_unlock(&pl->q.mu);
        for (;;) {
            if (pl_stop_signal && !stop_at) {
                stop_at = time(NULL) + pl->cfg->drain_db_wait_s;
                common_logf(stderr,
                            "stopping: waiting up to %d s (--drain-db-wait) for "
                            "PostgreSQL to take the last %d result(s) (%s)\n",
                            pl->cfg->drain_db_wait_s, n_rows, err);
            }
            if (stop_at && time(NULL) >= stop_at) {
                common_logf(stderr,
                            "PostgreSQL still unavailable: stopping without %d "
                            "result(s); their offsets stay uncommitted, so the next owner re-reads "
                            "them\n",
                            n_rows);
                return COMMON_FATAL;
            }
            sleep_ms(backoff);
            backoff = backoff * 2 > PL_RETRY_MAX_MS ? PL_RETRY_MAX_MS : backoff * 2;
            if (stop_at && backoff > 1000) backoff = 1000; /* keep to the stop deadline */
            if (sink_reconnect(sk, &e) == COMMON_OK) break;
            common_err_line(&e, err, sizeof err);
        }
    }
    pthread_mutex_lock(&pl->q.mu);
    if (pl->q.sink_down) common_logf(stderr, "database back: resuming\n");
    pl->q.sink_down = 0;
    pthread_mutex_unlock(&pl->q.mu);
    worker_metrics_add(&worker_metrics.sink_commits, 1);
    atomic_store(&worker_metrics.sink_connected, 1);
    return COMMON_OK;
}

/* The rows the database refused for their data leave its[] for *refused, each with the reason
 * for its dead letter: their offsets count as committed only once it is recorded against its
 * job (record_failures) and in Kafka. Returns how many rows stay. */
static int take_refused(sink_t *sk, pl_item_t **its, int r, pl_item_t **refused) {
    const sink_reject_t *rj;
    int n = sink_rejected(sk, &rj);
    if (n == 0) return r;
    int32_t first_part = its[rj[0].row]->t.partition;
    int64_t first_off = its[rj[0].row]->t.offset;
    int k = 0, kept = 0;
    for (int q = 0; q < r; q++) {
        if (k < n && rj[k].row == q) {
            pl_item_t *x = its[q];
            x->refused = 1;
            x->dlq_error = strdup(rj[k].error); /* NULL: a generic reason is sent */
            x->next = *refused;
            *refused = x;
            k++;
            continue;
        }
        its[kept++] = its[q];
    }
    /* one line a write: the dead letters carry each reason */
    common_logf(stderr,
                "%d row(s) refused by the database, dead-lettered (first: partition %" PRId32
                " offset %" PRId64 ": %s)\n",
                n, first_part, first_off, rj[0].error);
    return kept;
}

/* Writes r rows (+ b batches' telemetry) until committed, then marks their offsets committed
 * and stores each touched partition's committed prefix. parts: (r) scratch. */
static int commit_rows(pl_t *pl, sink_t *sk, const sink_result_t *rows, pl_item_t **its, int r,
                       const sink_batch_t *bat, int b, int32_t *parts, pl_item_t **refused) {
    worker_stage_clock_t clk;
    worker_stage_begin(&clk);
    int rc =
        write_committed(pl, sk, &(pl_write_t){.rows = rows, .n_rows = r, .bat = bat, .n_bat = b});
    worker_stage_end(&clk, WORKER_STAGE_COPY);
    if (rc != COMMON_OK) return rc;
    r = take_refused(sk, its, r, refused);
    /* committed: now, and only now, these offsets may be stored */
    pthread_mutex_lock(&pl->q.mu);
    int n_parts = 0;
    for (int q = 0; q < r; q++) {
        pl_item_t *x = its[q];
        if (consumers_offsets_committed(pl->q.offsets, x->track, x->epoch, x->t.offset)) {
            int seen = 0;
            for (int p = 0; p < n_parts && !seen; p++)
                seen = parts[p] == x->track;
            if (!seen) parts[n_parts++] = x->track;
        }
    }
    pl_queue_stat_t *qs = &pl->st.queue[PL_Q_STORE];
    for (int p = 0; p < n_parts; p++) {
        int64_t s = consumers_offsets_storable(pl->q.offsets, parts[p]);
        if (s >= 0)
            pl_store(pl, parts[p], s);
        else
            qs->full++; /* an earlier offset is still in flight (another writer's) */
    }
    qs->batches += n_parts;
    pl->st.transactions++;
    pl_queue_commit(&pl->st);
    pl->st.tickets_done += r;
    pl->st.rows_written += r;
    pl->st.batches_done += b;
    pl->st.last_commit_s = common_now_s();
    pthread_mutex_unlock(&pl->q.mu);
    worker_metrics_add(&worker_metrics.tickets_classified, r);
    const int64_t now_ms = common_now_ms();
    for (int q = 0; q < r; q++)
        worker_metrics_wait_observe(its[q]->lane, WORKER_WAIT_SINK, now_ms - its[q]->queued_ms);
    struct timespec wall; /* enqueued_at is the producer's wall clock */
    clock_gettime(CLOCK_REALTIME, &wall);
    int64_t wall_ms = (int64_t)wall.tv_sec * 1000 + wall.tv_nsec / 1000000;
    for (int q = 0; q < r; q++)
        if (its[q]->t.enqueued_at_ms > 0)
            worker_metrics_latency_observe(its[q]->lane, its[q]->t.tenant,
                                           (double)(wall_ms - its[q]->t.enqueued_at_ms) * 1e-3);
    pl_telemetry_drift_add(pl, its, r); /* committed rows only */
    worker_stage_end(&clk, WORKER_STAGE_ROWS);
    return COMMON_OK;
}

/* The tickets on list (refused rows, records that failed before) are recorded as failed
 * against their jobs, then handed to the poll thread for their dead letters. COMMON_OK, or
 * COMMON_FATAL (the list is freed: nothing of it is stored, the next owner re-reads it). */
static int record_failures(pl_t *pl, sink_t *sk, pl_item_t *list) {
    int n = 0;
    for (pl_item_t *x = list; x; x = x->next)
        n++;
    if (!n) return COMMON_OK;
    sink_failure_t *f = malloc(sizeof(*f) * (size_t)n); /* (n) */
    int rc = COMMON_FATAL;
    if (f) {
        int i = 0;
        for (pl_item_t *x = list; x; x = x->next, i++) {
            int topic = consumers_consumer_track_topic(pl->poll.consumer, x->track);
            f[i] = (sink_failure_t){
                .topic = topic < 0 ? "" : consumers_consumer_topic_name(pl->poll.consumer, topic),
                .partition = x->t.partition,
                .offset = x->t.offset,
                .job_id = x->t.job_id,
                .tenant = x->t.tenant,
                .ticket_id = x->t.ticket_id,
                .job_total = x->t.job_total,
                .reason = x->dlq_error ? x->dlq_error : "the database refused the row"};
        }
        rc = write_committed(pl, sk, &(pl_write_t){.fails = f, .n_fails = n});
        free(f);
    } else {
        common_logf(stderr, "sink: out of memory recording %d dead letter(s)\n", n);
    }
    pthread_mutex_lock(&pl->q.mu);
    /* appended in the list's order: records that failed before the encoder keep the order they
     * were read in, so their dead letters leave in each partition's order */
    pl_item_t **end = &pl->q.refused;
    while (*end)
        end = &(*end)->next;
    while (list) {
        pl_item_t *x = list;
        list = x->next;
        if (rc != COMMON_OK) {
            pl_item_free(x);
            continue;
        }
        x->next = NULL;
        *end = x;
        end = &x->next;
    }
    pthread_mutex_unlock(&pl->q.mu);
    return rc;
}

/* Whether a writer takes work now (q.mu held): records that failed, an urgent batch, any
 * batch while no other writer is writing (a lone writer never waits), else once a group's
 * worth of rows waits; the rest waits for the writer that finishes first. */
static int sink_ready(const pl_t *pl, int group_rows) {
    const pl_queue_t *q = &pl->q;
    if (q->failed) return 1;
    if (!q->out_head) return 0;
    return q->out_head->urgent || q->writing == 0 || q->out_items >= group_rows || q->enc_done;
}

void *pl_sink_main(void *arg) {
    pl_sink_writer_t *w = arg;
    pl_t *pl = w->pl;
    sink_t *sk = w->sink;
    const int first = w == &pl->sk.writers[0]; /* the one that also writes telemetry */
    int cap_rows = pl->cfg->sink_rows;
    int cap_bat = cap_rows; /* a batch holds at least one row */
    sink_result_t *rows = malloc(sizeof(*rows) * (size_t)cap_rows); /* (sink_rows) */
    sink_batch_t *bat = malloc(sizeof(*bat) * (size_t)cap_bat);     /* (sink_rows) */
    pl_item_t **its = malloc(sizeof(*its) * (size_t)cap_rows);      /* (sink_rows) */
    int32_t *parts = malloc(sizeof(*parts) * (size_t)cap_rows);     /* (sink_rows) touched */
    const gpu_model_config_t *mc = &pl->ses.model->cfg;
    if (first) pl_telemetry_tick(pl, 0); /* the start-up gpu_memory row */
    pthread_mutex_lock(&pl->q.mu);
    if (!rows || !bat || !its || !parts) {
        common_logf(stderr, "sink: out of memory\n");
        pl->q.fatal = 1;
    }
    const int group_rows = (cap_rows + PL_SINK_GROUP_DIV - 1) / PL_SINK_GROUP_DIV;
    while (!pl->q.fatal) {
        while (!sink_ready(pl, group_rows) && !pl->q.enc_done && !pl->q.fatal) {
            /* wake up now and then: a quiet drift window must still close and be written */
            double idle0 = common_now_s();
            const int empty = !pl->q.out_head; /* else gathering a group behind a writer */
            pl_timedwait_ms(&pl->q.cv_sink, &pl->q.mu, PL_SINK_IDLE_MS);
            if (empty) pl_queue_count(&pl->st, PL_Q_OUT, 0, idle0);
            if (sink_ready(pl, group_rows) || pl->q.enc_done || pl->q.fatal || !first) continue;
            pthread_mutex_unlock(&pl->q.mu);
            pl_telemetry_tick(pl, 0);
            pthread_mutex_lock(&pl->q.mu);
        }
        if (!pl->q.out_head && !pl->q.failed) break; /* the encoder is done, all written */
        /* records that failed before the encoder, of partitions still ours (q.failed is
         * newest first: taken in reverse, refused holds them in the order they were read) */
        pl_item_t *refused = NULL; /* for the poll thread to dead-letter, once recorded */
        while (pl->q.failed) {
            pl_item_t *x = pl->q.failed;
            pl->q.failed = x->next;
            if (consumers_offsets_epoch(pl->q.offsets, x->track) != x->epoch) {
                pl_item_free(x);
                continue;
            }
            x->next = refused;
            refused = x;
        }
        /* take whole batches while they fit; a batch larger than sink_rows goes alone. Urgent
         * batches lead the queue and commit in transactions of their own: none waits for a
         * bulk batch's rows (offsets stay safe in any order: see the tracker above) */
        int n_rows = 0, n_bat = 0;
        const double taken_s = common_now_s();
        pl_queue_stat_t *qo = &pl->st.queue[PL_Q_OUT];
        const int urgent = pl->q.out_head && pl->q.out_head->urgent;
        pl_out_t *taken = NULL, **tail = &taken;
        while (pl->q.out_head && pl->q.out_head->urgent == urgent &&
               (n_bat == 0 || n_rows + pl->q.out_head->n <= cap_rows)) {
            pl_out_t *o = pl->q.out_head;
            pl->q.out_head = o->next;
            if (!pl->q.out_head) pl->q.out_tail = NULL;
            if (pl->q.out_urgent == o) pl->q.out_urgent = NULL;
            o->next = NULL;
            *tail = o;
            tail = &o->next;
            n_rows += o->n;
            n_bat++;
            qo->batches++;
            qo->wait_s += taken_s - o->queued_s;
            pl->q.out_items -= o->n;
            if (n_rows >= cap_rows) break;
        }
        /* results of partitions revoked since they were consumed: their new owner re-reads
         * them from the stored offset, so writing them here would only duplicate work */
        long stale = 0;
        for (pl_out_t *o = taken; o; o = o->next) {
            int k = 0;
            for (int i = 0; i < o->n; i++) {
                pl_item_t *it = o->items[i];
                if (consumers_offsets_epoch(pl->q.offsets, it->track) == it->epoch)
                    o->items[k++] = it;
                else
                    pl_item_free(it);
            }
            stale += o->n - k;
            o->n = k;
        }
        pl->st.stale_skipped += stale;
        pl->q.writing++;
        pthread_cond_broadcast(&pl->q.cv_room);
        pthread_mutex_unlock(&pl->q.mu);

        /* flatten into rows; a batch bigger than cap_rows is written in slices */
        int rc = COMMON_OK;
        double t0 = common_now_s();
        int r = 0, b = 0;
        worker_stage_clock_t clk;
        worker_stage_begin(&clk);
        for (pl_out_t *o = taken; o && rc == COMMON_OK; o = o->next) {
            bat[b++] = o->tel;
            for (int i = 0; i < o->n && rc == COMMON_OK; i++) {
                pl_item_t *it = o->items[i];
                rows[r] = (sink_result_t){.job_id = it->t.job_id,
                                          .tenant = it->t.tenant,
                                          .ticket_id = it->t.ticket_id,
                                          .job_total = it->t.job_total,
                                          .label = mc->id2label[it->label_id],
                                          .label_id = it->label_id,
                                          .confidence = it->confidence,
                                          .top_k_json = it->top_k_json,
                                          .tokens = it->n_ids,
                                          .truncated = it->truncated,
                                          .partition = it->t.partition,
                                          .offset = it->t.offset,
                                          .enqueued_at_ms = it->t.enqueued_at_ms};
                its[r++] = it;
                if (r == cap_rows) {
                    worker_stage_end(&clk, WORKER_STAGE_ROWS);
                    rc = commit_rows(pl, sk, rows, its, r, bat, b, parts, &refused);
                    worker_stage_begin(&clk);
                    r = b = 0;
                }
            }
        }
        worker_stage_end(&clk, WORKER_STAGE_ROWS);
        if (rc == COMMON_OK && r > 0)
            rc = commit_rows(pl, sk, rows, its, r, bat, b, parts, &refused);
        double dt = common_now_s() - t0;
        if (rc == COMMON_OK && first) pl_telemetry_tick(pl, 0);
        while (taken) {
            pl_out_t *o = taken;
            taken = o->next;
            for (int i = 0; i < o->n; i++)
                if (!o->items[i]->refused) pl_item_free(o->items[i]);
            free(o->items);
            free(o);
        }
        if (rc == COMMON_OK)
            rc = record_failures(pl, sk, refused);
        else
            while (refused) { /* nothing more is stored once a write failed for good */
                pl_item_t *x = refused;
                refused = x->next;
                pl_item_free(x);
            }
        pthread_mutex_lock(&pl->q.mu);
        pl->q.writing--;
        pthread_cond_broadcast(&pl->q.cv_sink); /* what gathered behind this write is due */
        pl->st.sink_s += dt;
        if (rc == COMMON_OK) {
            pl->st.queue[PL_Q_COMMIT].batches += n_bat;
            pl->st.queue[PL_Q_COMMIT].wait_s += n_bat * (common_now_s() - taken_s);
        }
        if (rc != COMMON_OK) pl->q.fatal = 1; /* stop; nothing unwritten is ever stored */
    }
    /* the last writer out finishes: everything accepted is written (or the run failed), so the
     * last drift window and the exit row go out (on the first writer's connection) */
    int last = --pl->q.writers_running == 0;
    pthread_cond_broadcast(&pl->q.cv_sink);
    pthread_mutex_unlock(&pl->q.mu);
    if (!last) {
        free(rows);
        free(bat);
        free(its);
        free(parts);
        return NULL;
    }
    pl_telemetry_tick(pl, 1);
    pthread_mutex_lock(&pl->q.mu);
    pl->q.sink_done = 1;
    pthread_cond_broadcast(&pl->q.cv_room);
    pthread_cond_broadcast(&pl->q.cv_enc);
    pthread_mutex_unlock(&pl->q.mu);
    free(rows);
    free(bat);
    free(its);
    free(parts);
    return NULL;
}
