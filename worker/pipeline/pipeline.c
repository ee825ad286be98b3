/* The pipeline's set-up, teardown and poll thread (see worker/pipeline/pipeline.h). */
#include "worker/pipeline/pipeline.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "worker/pipeline/pipeline_int.h"

volatile sig_atomic_t pl_stop_signal = 0;

/* The first SIGTERM/SIGINT asks for a clean stop; a second one (e.g. while PostgreSQL is down
 * and the last rows cannot be written) exits at once: nothing uncommitted was ever stored, so
 * the records are simply read again by the next worker. */
static void on_signal(int sig) {
    if (pl_stop_signal) _exit(1);
    pl_stop_signal = sig;
}

double pl_now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int64_t pl_now_ms(void) {
    return (int64_t)(pl_now_s() * 1000.0);
}

void pl_item_free(pl_item_t *it) {
    if (!it) return;
    consumers_ticket_free(&it->t);
    free(it->ids);
    free(it->top_k_json);
    free(it);
}

void pl_store(pl_t *pl, int32_t partition, int64_t next_offset) {
    if (consumers_consumer_store(pl->consumer, partition, next_offset)) return;
    if (partition >= pl->n_stored) {
        int n = partition + 1;
        int64_t *ns = realloc(pl->stored, sizeof(*ns) * (size_t)n); /* (n_stored) */
        if (!ns) return;                                            /* only statistics are lost */
        for (int i = pl->n_stored; i < n; i++)
            ns[i] = -1;
        pl->stored = ns;
        pl->n_stored = n;
    }
    pl->stored[partition] = next_offset;
}

/* A dead letter is in Kafka: its source record counts as committed (tag = the epoch of the
 * partition's assignment it was read in). */
static void dlq_done(void *ctx, int32_t partition, int64_t offset, int64_t epoch) {
    pl_t *pl = ctx;
    pthread_mutex_lock(&pl->mu);
    consumers_offsets_committed(pl->offsets, partition, epoch, offset);
    int64_t s = consumers_offsets_storable(pl->offsets, partition);
    if (s >= 0) pl_store(pl, partition, s);
    pl->dead_letters++;
    pthread_mutex_unlock(&pl->mu);
    worker_metrics_add(&worker_metrics.dead_lettered, 1);
}

static void on_assign(void *ctx, const int32_t *parts, int n) {
    pl_t *pl = ctx;
    pthread_mutex_lock(&pl->mu);
    for (int i = 0; i < n; i++)
        consumers_offsets_assign(pl->offsets, parts[i]);
    pthread_mutex_unlock(&pl->mu);
    atomic_fetch_add(&worker_metrics.partitions_assigned, n);
}

/* Stores what is committed of the revoked partitions, then forgets their in-flight offsets;
 * items still in the accumulator or the sink queue finish, but cannot store anything. */
static void on_revoke(void *ctx, const int32_t *parts, int n, int lost) {
    pl_t *pl = ctx;
    long dropped = 0;
    pthread_mutex_lock(&pl->mu);
    for (int i = 0; i < n; i++) {
        int64_t s = consumers_offsets_storable(pl->offsets, parts[i]);
        if (s >= 0 && !lost) pl_store(pl, parts[i], s);
        dropped += consumers_offsets_revoke(pl->offsets, parts[i]);
    }
    pl->revoked_partitions += n;
    pl->dropped_in_flight += dropped;
    pthread_mutex_unlock(&pl->mu);
    atomic_fetch_sub(&worker_metrics.partitions_assigned, n);
    /* overflow items of those partitions will never be stored: drop them now */
    pl_item_t **pp = &pl->ovf_head, *last = NULL;
    while (*pp) {
        pl_item_t *it = *pp;
        int revoked = 0;
        for (int i = 0; i < n; i++)
            revoked |= it->t.partition == parts[i];
        if (revoked) {
            *pp = it->next;
            pl_item_free(it);
            pl->ovf_n--;
        } else {
            last = it;
            pp = &it->next;
        }
    }
    pl->ovf_tail = last;
    if (dropped)
        fprintf(stderr,
                "reclass run: %ld in-flight record(s) of revoked partitions left unstored "
                "(their next owner re-reads them)\n",
                dropped);
}

/* Decodes and tokenizes one record into an item; returns NULL with err for a dead letter. */
static pl_item_t *make_item(pl_t *pl, const rd_kafka_message_t *m, worker_ids_t *ids, char *err,
                            size_t errlen) {
    pl_item_t *it = calloc(1, sizeof(*it));
    if (!it) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    if (!m->payload || m->len == 0) {
        snprintf(err, errlen, "empty record value");
        free(it);
        return NULL;
    }
    if (consumers_codec_decode(pl->codec, m->payload, m->len, &it->t, err, errlen)) {
        free(it);
        return NULL;
    }
    /* the sink keys rows by these: a record without them can never be stored */
    const char *bad = !it->t.job_id || !*it->t.job_id         ? "empty job_id"
                      : !it->t.ticket_id || !*it->t.ticket_id ? "empty ticket_id"
                      : it->t.job_total < 1                   ? "job_total < 1"
                      : !it->t.text                           ? "missing text"
                                                              : NULL;
    if (bad) {
        snprintf(err, errlen, "invalid ticket: %s", bad);
        pl_item_free(it);
        return NULL;
    }
    it->t.partition = m->partition;
    it->t.offset = m->offset;
    if (worker_tok_encode(pl->tok, it->t.text, it->t.text_len, pl->max_len, ids)) {
        snprintf(err, errlen, "out of memory tokenizing");
        pl_item_free(it);
        return NULL;
    }
    it->ids = malloc(sizeof(*it->ids) * (size_t)ids->n); /* (n_ids) */
    if (!it->ids) {
        snprintf(err, errlen, "out of memory");
        pl_item_free(it);
        return NULL;
    }
    memcpy(it->ids, ids->v, sizeof(*it->ids) * (size_t)ids->n);
    it->n_ids = ids->n;
    it->truncated = ids->truncated; /* over-long texts are cut and flagged, never rejected */
    return it;
}

/* Pushes overflow items while the accumulator takes them. Returns 1 when some remain. */
static int drain_overflow(pl_t *pl) {
    if (!pl->ovf_head) return 0;
    int64_t now = pl_now_ms();
    int pushed = 0;
    pthread_mutex_lock(&pl->mu);
    while (pl->ovf_head) {
        pl_item_t *it = pl->ovf_head;
        it->arrived_ms = now;
        if (worker_accum_push(pl->acc, it, it->n_ids, now) != WORKER_ACCUM_OK) break;
        pl->ovf_head = it->next;
        it->next = NULL;
        pl->ovf_n--;
        pushed = 1;
    }
    if (!pl->ovf_head) pl->ovf_tail = NULL;
    if (pushed) pthread_cond_signal(&pl->cv_enc);
    pthread_mutex_unlock(&pl->mu);
    return pl->ovf_head != NULL;
}

static void handle_record(pl_t *pl, rd_kafka_message_t *m, worker_ids_t *ids) {
    pthread_mutex_lock(&pl->mu);
    int64_t epoch = consumers_offsets_epoch(pl->offsets, m->partition);
    int tracked =
        epoch > 0 && consumers_offsets_consumed(pl->offsets, m->partition, epoch, m->offset) == 0;
    if (pl->first_record_s == 0) pl->first_record_s = pl_now_s();
    pthread_mutex_unlock(&pl->mu);
    if (!tracked) { /* not ours (any more), or a redelivery below what we track */
        rd_kafka_message_destroy(m);
        return;
    }
    worker_metrics_add(&worker_metrics.tickets_consumed, 1);
    char err[512];
    pl_item_t *it = make_item(pl, m, ids, err, sizeof(err));
    if (!it) {
        /* the producer keeps the letter until Kafka has it, retrying as needed (dlq.h) */
        if (consumers_dlq_send(pl->dlq, m, err, epoch)) {
            fprintf(stderr,
                    "reclass run: out of memory keeping the dead letter of partition %" PRId32
                    " offset %" PRId64 "; stopping (its offset stays unstored)\n",
                    m->partition, m->offset);
            pthread_mutex_lock(&pl->mu);
            pl->fatal = 1;
            pthread_mutex_unlock(&pl->mu);
        }
        rd_kafka_message_destroy(m);
        return;
    }
    it->epoch = epoch;
    rd_kafka_message_destroy(m);
    pthread_mutex_lock(&pl->mu);
    if (it->truncated) pl->truncated++;
    pthread_mutex_unlock(&pl->mu);
    if (it->truncated) worker_metrics_add(&worker_metrics.truncated, 1);
    /* order matters only within the tracker; the overflow keeps arrival order anyway */
    if (pl->ovf_tail)
        pl->ovf_tail->next = it;
    else
        pl->ovf_head = it;
    pl->ovf_tail = it;
    pl->ovf_n++;
    drain_overflow(pl);
}

static void log_progress(pl_t *pl, double t0) {
    pthread_mutex_lock(&pl->mu);
    double el = pl_now_s() - (pl->first_record_s ? pl->first_record_s : t0);
    fprintf(stderr,
            "reclass run: tickets=%ld batches=%ld tickets/s=%.0f pending=%d uncommitted=%ld "
            "dead_letters=%ld encoder_s=%.1f%s\n",
            pl->tickets_done, pl->batches_done, el > 0 ? pl->tickets_done / el : 0.0,
            worker_accum_pending_items(pl->acc), consumers_offsets_pending(pl->offsets, -1),
            pl->dead_letters, pl->encoder_s, pl->sink_down ? " (database down)" : "");
    pthread_mutex_unlock(&pl->mu);
}

#define PL_HOLD_MS         1000 /* longest backlog waited out without pausing the partitions */
#define PL_DLQ_WAITING_MAX 1000 /* dead letters waiting for a retry before reading stops */

/* The poll loop: returns when a stop was asked (signal, idle, fatal). */
static void poll_loop(pl_t *pl) {
    const worker_run_cfg_t *cfg = pl->cfg;
    worker_ids_t ids = {0};
    double t0 = pl_now_s(), last_activity = t0;
    long logged_batches = 0, seen_rebalances = 0;
    int64_t hold_since = 0; /* when the accumulator became full without a pause; 0 = not */
    for (;;) {
        if (pl_stop_signal) {
            fprintf(stderr, "reclass run: signal %d: finishing in-flight work\n",
                    (int)pl_stop_signal);
            break;
        }
        char e[512];
        if (consumers_consumer_fatal(pl->consumer, e, sizeof(e)) ||
            consumers_dlq_fatal(pl->dlq, e, sizeof(e))) {
            fprintf(stderr, "reclass run: fatal Kafka error: %s\n", e);
            pthread_mutex_lock(&pl->mu);
            pl->fatal = 1;
            pthread_mutex_unlock(&pl->mu);
            break;
        }
        pthread_mutex_lock(&pl->mu);
        int fatal = pl->fatal, sink_down = pl->sink_down;
        int pending = worker_accum_pending_items(pl->acc);
        long pending_tokens = worker_accum_pending_tokens(pl->acc);
        long uncommitted = consumers_offsets_pending(pl->offsets, -1);
        long batches = pl->batches_done;
        pthread_mutex_unlock(&pl->mu);
        /* the liveness heartbeat: /healthz fails once this loop stops turning */
        atomic_store_explicit(&worker_metrics.last_poll_ms, (long long)worker_metrics_now_ms(),
                              memory_order_relaxed);
        atomic_store_explicit(&worker_metrics.pending_items, pending, memory_order_relaxed);
        atomic_store_explicit(&worker_metrics.pending_tokens, pending_tokens, memory_order_relaxed);
        if (fatal) break;
        /* dead letters the dead-letter topic does not take yet count as a full accumulator:
         * reading on would only pile them up in memory */
        int full = drain_overflow(pl) || consumers_dlq_waiting(pl->dlq) > PL_DLQ_WAITING_MAX;
        /* Backpressure. A short backlog (the encoder takes a batch soon) is waited out without
         * polling: the fetched records stay in librdkafka's local queue, whose own limit
         * (queued.max.messages.kbytes) then stops the fetcher, and heartbeats go on in the
         * background. A pause instead purges that queue (librdkafka issues #2052, #5343) and
         * costs a re-fetch on resume (~0.2 s a cycle with the dev broker: 18 pauses took the
         * CPU demo at --max-pending 256 from 1.3 s to 5.5 s), so the partitions are paused
         * only when the backlog outlasts PL_HOLD_MS or the database is down; polling goes on
         * then (max.poll.interval.ms is never hit). Rebalance callbacks wait at most
         * PL_HOLD_MS. */
        if (!full) {
            hold_since = 0;
        } else if (!sink_down && !consumers_consumer_paused(pl->consumer)) {
            int64_t now_ms = pl_now_ms();
            if (!hold_since) {
                hold_since = now_ms;
                pl->holds++;
                worker_metrics_add(&worker_metrics.holds, 1);
            }
            if (now_ms - hold_since < PL_HOLD_MS) {
                pthread_mutex_lock(&pl->mu);
                pl_wait_until_ms(&pl->cv_accum, &pl->mu, now_ms + 10);
                pthread_mutex_unlock(&pl->mu);
                continue;
            }
        }
        if (full || sink_down) {
            if (!consumers_consumer_paused(pl->consumer) &&
                consumers_consumer_pause(pl->consumer) == 0) {
                pl->pauses++;
                worker_metrics_add(&worker_metrics.pauses, 1);
            }
        } else if (consumers_consumer_paused(pl->consumer) &&
                   pending < pl->acc_cfg.max_pending_items / 2)
            consumers_consumer_resume(pl->consumer);
        atomic_store_explicit(&worker_metrics.consumer_paused,
                              consumers_consumer_paused(pl->consumer), memory_order_relaxed);
        rd_kafka_message_t *m = consumers_consumer_poll(pl->consumer, full ? 20 : 100);
        consumers_dlq_poll(pl->dlq, 0);
        double now = pl_now_s();
        long rebalances = consumers_consumer_rebalances(pl->consumer);
        if (rebalances != seen_rebalances) { /* joining or rebalancing is not idleness */
            seen_rebalances = rebalances;
            last_activity = now;
            atomic_store(&worker_metrics.group_joined, 1);
        }
        if (m) {
            last_activity = now;
            handle_record(pl, m, &ids);
        } else if (uncommitted > 0 || pl->ovf_head || consumers_dlq_outstanding(pl->dlq) > 0) {
            last_activity = now;
        }
        if (cfg->log_every > 0 && batches - logged_batches >= cfg->log_every) {
            logged_batches = batches;
            log_progress(pl, t0);
        }
        /* Idle time counts from the first assignment only: before it nothing was read, so
         * nothing can be called done, and the group may still be waiting for a dead member's
         * session to expire. A worker never assigned gives up, non-zero, after the bound. */
        if (!seen_rebalances) {
            if (cfg->join_timeout_s > 0 && now - t0 >= cfg->join_timeout_s) {
                fprintf(stderr,
                        "reclass run: no partition assignment from group %s within %d s "
                        "(--join-timeout): check that %s is reachable, that topic %s exists "
                        "and that the group is not stuck rebalancing; exiting\n",
                        cfg->group, cfg->join_timeout_s, cfg->brokers, cfg->topic);
                pthread_mutex_lock(&pl->mu);
                pl->fatal = 1;
                pthread_mutex_unlock(&pl->mu);
                break;
            }
            continue;
        }
        if (cfg->idle_exit_s > 0 && now - last_activity >= cfg->idle_exit_s) {
            fprintf(stderr, "reclass run: idle for %d s, everything committed: exiting\n",
                    cfg->idle_exit_s);
            break;
        }
    }
    worker_ids_free(&ids);
}

/* Stop fetching, let encoder and sink finish what was accepted, then hand offsets back. */
static void drain(pl_t *pl) {
    consumers_consumer_pause(pl->consumer);
    /* overflow items were never accepted: unstored, so redelivered to whoever comes next */
    while (pl->ovf_head) {
        pl_item_t *it = pl->ovf_head;
        pl->ovf_head = it->next;
        pl_item_free(it);
    }
    pl->ovf_tail = NULL;
    pl->ovf_n = 0;
    pthread_mutex_lock(&pl->mu);
    pl->draining = 1;
    pthread_cond_broadcast(&pl->cv_enc);
    pthread_cond_broadcast(&pl->cv_room);
    pthread_mutex_unlock(&pl->mu);
    for (;;) { /* keep serving the group and the dead letters meanwhile */
        pthread_mutex_lock(&pl->mu);
        int done = pl->sink_done;
        pthread_mutex_unlock(&pl->mu);
        if (done) break;
        atomic_store_explicit(&worker_metrics.last_poll_ms, (long long)worker_metrics_now_ms(),
                              memory_order_relaxed);
        rd_kafka_message_t *m = consumers_consumer_poll(pl->consumer, 50);
        if (m) rd_kafka_message_destroy(m); /* fetched before the pause: not tracked */
        consumers_dlq_poll(pl->dlq, 0);
    }
    if (consumers_dlq_flush(pl->dlq, 30000))
        fprintf(stderr,
                "reclass run: %ld dead letter(s) not acknowledged; their offsets stay "
                "unstored\n",
                consumers_dlq_outstanding(pl->dlq));
}

/* The last explicit commit. A rebalance in progress makes the broker refuse it for a moment:
 * keep serving the group (paused, so nothing is fetched) and try again. */
static int final_commit(pl_t *pl, char *err, size_t errlen) {
    double until = pl_now_s() + 20.0;
    for (;;) {
        if (consumers_consumer_commit(pl->consumer, err, errlen) == 0) return 0;
        if (pl_now_s() > until) return -1;
        for (int i = 0; i < 10; i++) {
            rd_kafka_message_t *m = consumers_consumer_poll(pl->consumer, 50);
            if (m) rd_kafka_message_destroy(m);
        }
    }
}

static void print_stats(pl_t *pl, double t_start, worker_pipeline_stats_t *st) {
    double wall = pl_now_s() - t_start;
    double span =
        pl->last_commit_s > pl->first_record_s ? pl->last_commit_s - pl->first_record_s : 0.0;
    double share = span > 0 ? 1.0 - pl->encoder_s / span : 0.0;
    if (share < 0) share = 0;
    char line[4096];
    snprintf(line, sizeof(line),
             "{\"tickets\":%ld,\"dead_letters\":%ld,\"truncated\":%ld,\"batches\":%ld,"
             "\"pauses\":%ld,\"holds\":%ld,"
             "\"seconds\":%.3f,\"tickets_per_s\":%.1f,\"encoder_seconds\":%.3f,"
             "\"non_encoder_share\":%.4f,\"sink_seconds\":%.3f,\"wall_seconds\":%.3f,"
             "\"backend\":\"%s\"}",
             pl->tickets_done, pl->dead_letters, pl->truncated, pl->batches_done, pl->pauses,
             pl->holds, span, span > 0 ? pl->tickets_done / span : 0.0, pl->encoder_s, share,
             pl->sink_s, wall, pl->ops->name);
    /* offsets this worker stored (and committed) last, per partition: tests compare them with
     * the rows in the database */
    size_t len = strlen(line) - 1; /* drop the closing brace */
    len += (size_t)snprintf(line + len, sizeof(line) - len, ",\"stored_offsets\":{");
    for (int p = 0, first = 1; p < pl->n_stored && len < sizeof(line) - 32; p++) {
        if (pl->stored[p] < 0) continue;
        len += (size_t)snprintf(line + len, sizeof(line) - len, "%s\"%d\":%" PRId64,
                                first ? "" : ",", p, pl->stored[p]);
        first = 0;
    }
    snprintf(line + len, sizeof(line) - len, "}}");
    if (st)
        *st = (worker_pipeline_stats_t){.tickets = pl->tickets_done,
                                        .dead_letters = pl->dead_letters,
                                        .truncated = pl->truncated,
                                        .batches = pl->batches_done,
                                        .revoked_partitions = pl->revoked_partitions,
                                        .dropped_in_flight = pl->dropped_in_flight,
                                        .seconds = span,
                                        .encoder_seconds = pl->encoder_s,
                                        .non_encoder_share = share};
    printf("%s\n", line);
    fflush(stdout);
    if (pl->cfg->stats_json) {
        FILE *f = fopen(pl->cfg->stats_json, "w");
        if (f) {
            fprintf(f, "%s\n", line);
            fclose(f);
        } else {
            fprintf(stderr, "reclass run: cannot write %s\n", pl->cfg->stats_json);
        }
    }
}

/* Loads model, tokenizer, backend and accumulator. 0, or the exit code with a message. */
static int setup_compute(pl_t *pl, char *err, size_t errlen) {
    const worker_run_cfg_t *cfg = pl->cfg;
    if (gpu_model_load(cfg->model, &pl->model, err, errlen)) return 2;
    if (worker_tok_init(pl->model->vocab_path, &pl->model->cfg.tok, &pl->tok, err, errlen))
        return 2;
    pl->ops = gpu_backend_find(cfg->backend, err, errlen);
    if (!pl->ops) return 2;
    int max_len = pl->model->cfg.max_pos;
    if (cfg->max_len > 0 && cfg->max_len < max_len) max_len = cfg->max_len;
    if (max_len < 2) {
        snprintf(err, errlen, "--max-len %d: must be at least 2 ([CLS] and [SEP])", max_len);
        return 2;
    }
    /* 0 = by backend. The GPU's matrix units want big batches (bert-base on the H200,
     * `reclass bench`: 19,001 tickets/s at 4096 tokens, 21,716 at 8192, 22,322 at 16384,
     * 23,290 at 65536; tests/bench/RESULTS-gpu.md), and 16384 keeps weights + arena at
     * 0.38 GiB; the CPU gains nothing past a few thousand. */
    int gpu = strcmp(pl->ops->name, "cpu") != 0;
    pl->token_budget = cfg->token_budget > 0 ? cfg->token_budget : gpu ? 16384 : 4096;
    if (pl->token_budget < max_len) {
        snprintf(err, errlen,
                 "--token-budget %d is below the longest sequence (%d tokens): raise it or "
                 "lower --max-len",
                 pl->token_budget, max_len);
        return 2;
    }
    pl->max_len = max_len;
    pl->be_opts = (gpu_backend_opts_t){.token_budget = pl->token_budget,
                                       .max_len = max_len,
                                       .threads = cfg->threads,
                                       .precision = cfg->precision,
                                       .device = cfg->device};
    pl->max_seqs = pl->token_budget / 2;
    if (pl->ops->init(pl->model, &pl->be_opts, &pl->be, err, errlen)) return 1;
    /* Backpressure bounds (0 = by backend). A GPU encoder drains a batch in milliseconds, so
     * on the GPU the accumulator may hold many short tickets: on the H200 (bert-base, 60,345
     * real tickets, fetch.wait.max.ms 100) a 2048-ticket cap paused consumption so often that
     * the job took 20.3 s, 32768 tickets took 0.97 s (62,193 tickets/s, encoder 0.86 s).
     * Tokens stay at 8 budgets: a few batches to sort by length, and little for a shutdown
     * to finish. */
    pl->acc_cfg = (worker_accum_cfg_t){
        .token_budget = pl->token_budget,
        .padded = !pl->ops->padding_free,
        .max_wait_ms = cfg->max_wait_ms,
        .max_pending_items = cfg->max_pending > 0 ? cfg->max_pending
                             : gpu                ? 32768
                                                  : 2048,
        .max_pending_tokens =
            cfg->max_pending_tokens > 0 ? cfg->max_pending_tokens : 8L * pl->token_budget,
        .max_len = max_len,
    };
    if (worker_accum_init(&pl->acc_cfg, &pl->acc, err, errlen)) return 2;
    pl->max_out_items = 2L * cfg->sink_rows;
    return 0;
}

static void teardown(pl_t *pl) {
    pl_telemetry_free(pl);
    while (pl->out_head) {
        pl_out_t *o = pl->out_head;
        pl->out_head = o->next;
        for (int i = 0; i < o->n; i++)
            pl_item_free(o->items[i]);
        free(o->items);
        free(o);
    }
    if (pl->acc) { /* only after a failure: drain() empties it otherwise */
        void *items[256];
        int n;
        while ((n = worker_accum_pop(pl->acc, INT64_MAX / 2, 1, items, NULL, 256)) > 0)
            for (int i = 0; i < n; i++)
                pl_item_free(items[i]);
        worker_accum_free(pl->acc);
    }
    while (pl->ovf_head) {
        pl_item_t *it = pl->ovf_head;
        pl->ovf_head = it->next;
        pl_item_free(it);
    }
    consumers_consumer_free(pl->consumer);
    consumers_dlq_free(pl->dlq);
    consumers_codec_free(pl->codec);
    consumers_offsets_free(pl->offsets);
    free(pl->stored);
    sink_free(pl->sink);
    if (pl->be) pl->ops->free(pl->be);
    worker_tok_free(pl->tok);
    gpu_model_free(pl->model);
    pthread_mutex_destroy(&pl->mu);
    pthread_cond_destroy(&pl->cv_enc);
    pthread_cond_destroy(&pl->cv_sink);
    pthread_cond_destroy(&pl->cv_room);
    pthread_cond_destroy(&pl->cv_accum);
}

int worker_pipeline_run(const worker_run_cfg_t *cfg) {
    return worker_pipeline_run_ex(cfg, NULL);
}

int worker_pipeline_run_ex(const worker_run_cfg_t *cfg, worker_pipeline_stats_t *stats) {
    pl_t pl_s = {0}, *pl = &pl_s;
    pl->cfg = cfg;
    pthread_mutex_init(&pl->mu, NULL);
    pthread_cond_init(&pl->cv_enc, NULL);
    pthread_cond_init(&pl->cv_sink, NULL);
    pthread_cond_init(&pl->cv_room, NULL);
    pthread_cond_init(&pl->cv_accum, NULL);
    double t_start = pl_now_s();
    char err[1024] = "";
    int rc = setup_compute(pl, err, sizeof(err));
    if (!rc) rc = pl_telemetry_init(pl, err, sizeof(err));
    if (!rc && consumers_codec_init(cfg->schemas, &pl->codec, err, sizeof(err))) rc = 2;
    if (!rc && consumers_offsets_init(&pl->offsets)) {
        snprintf(err, sizeof(err), "out of memory");
        rc = 1;
    }
    if (!rc && sink_init(cfg->db, pl->model->name, &pl->sink, err, sizeof(err))) rc = 1;
    if (!rc) atomic_store(&worker_metrics.sink_connected, 1);
    if (!rc) {
        consumers_consumer_cfg_t ccfg = {.brokers = cfg->brokers,
                                         .topic = cfg->topic,
                                         .group = cfg->group,
                                         .extra = cfg->kafka_props};
        consumers_rebalance_t rb = {on_assign, on_revoke, pl};
        if (consumers_consumer_init(&ccfg, &rb, &pl->consumer, err, sizeof(err))) rc = 2;
    }
    if (!rc && consumers_dlq_init(cfg->brokers, cfg->dlq_topic, cfg->kafka_props, dlq_done, pl,
                                  &pl->dlq, err, sizeof(err)))
        rc = 2;
    if (rc) {
        fprintf(stderr, "reclass run: %s\n", err);
        teardown(pl);
        return rc;
    }
    fprintf(stderr,
            "reclass run: model %s (%d labels), backend %s, token budget %d, max len %d, "
            "topic %s, group %s, dead letters to %s\n",
            pl->model->name, pl->model->cfg.num_labels, pl->ops->name, pl->token_budget,
            pl->max_len, cfg->topic, cfg->group, cfg->dlq_topic);

    struct sigaction sa = {0};
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    pthread_t enc_th, sink_th;
    int have_enc = pthread_create(&enc_th, NULL, pl_encoder_main, pl) == 0;
    int have_sink = have_enc && pthread_create(&sink_th, NULL, pl_sink_main, pl) == 0;
    if (have_sink)
        poll_loop(pl);
    else {
        fprintf(stderr, "reclass run: cannot start threads\n");
        pl->fatal = 1;
    }
    if (!have_sink) { /* the encoder alone cannot finish: let it leave */
        pthread_mutex_lock(&pl->mu);
        pl->sink_done = 1;
        pthread_mutex_unlock(&pl->mu);
    }
    drain(pl);
    if (have_enc) pthread_join(enc_th, NULL);
    if (have_sink) pthread_join(sink_th, NULL);
    rc = pl->fatal ? 1 : 0;
    if (!pl->fatal && final_commit(pl, err, sizeof(err))) {
        fprintf(stderr, "reclass run: %s\n", err);
        rc = 1;
    }
    consumers_consumer_close(pl->consumer);
    print_stats(pl, t_start, stats);
    teardown(pl);
    return rc;
}
