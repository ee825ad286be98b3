/* The poll thread: Kafka records -> tickets -> the accumulator, rebalances, and the drain at
 * shutdown (see worker/pipeline/pipeline.h); records that end as dead letters go on in
 * worker/pipeline/dead_letters.c. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/err.h"
#include "worker/pipeline/pipeline_int.h"

void pl_store(pl_t *pl, int32_t partition, int64_t next_offset) { /* partition: a track */
    if (consumers_consumer_store(pl->poll.consumer, partition, next_offset)) return;
    if (partition >= pl->st.n_stored) {
        int n = partition + 1;
        int64_t *ns = realloc(pl->st.stored, sizeof(*ns) * (size_t)n); /* (n_stored) */
        if (!ns) return; /* only statistics are lost */
        for (int i = pl->st.n_stored; i < n; i++)
            ns[i] = -1;
        pl->st.stored = ns;
        pl->st.n_stored = n;
    }
    pl->st.stored[partition] = next_offset;
}

void pl_on_assign(void *ctx, const int32_t *parts, int n) {
    pl_t *pl = ctx;
    pthread_mutex_lock(&pl->q.mu);
    for (int i = 0; i < n; i++)
        consumers_offsets_assign(pl->q.offsets, parts[i]);
    pthread_mutex_unlock(&pl->q.mu);
    atomic_fetch_add(&worker_metrics.partitions_assigned, n);
}

/* Stores what is committed of the revoked partitions, then forgets their in-flight offsets;
 * items still in the accumulator or the sink queue finish, but cannot store anything. */
void pl_on_revoke(void *ctx, const int32_t *parts, int n, int lost) {
    pl_t *pl = ctx;
    long dropped = 0;
    pthread_mutex_lock(&pl->q.mu);
    for (int i = 0; i < n; i++) {
        int64_t s = consumers_offsets_storable(pl->q.offsets, parts[i]);
        if (s >= 0 && !lost) pl_store(pl, parts[i], s);
        dropped += consumers_offsets_revoke(pl->q.offsets, parts[i]);
    }
    pl->st.revoked_partitions += n;
    pl->st.dropped_in_flight += dropped;
    pthread_mutex_unlock(&pl->q.mu);
    atomic_fetch_sub(&worker_metrics.partitions_assigned, n);
    pl_held_revoke(pl, parts, n);
    /* overflow items of those partitions will never be stored: drop them now */
    pl_item_t **pp = &pl->poll.ovf_head, *last = NULL;
    while (*pp) {
        pl_item_t *it = *pp;
        int revoked = 0;
        for (int i = 0; i < n; i++)
            revoked |= it->track == parts[i];
        if (revoked) {
            *pp = it->next;
            pl_item_free(it);
            pl->poll.ovf_n--;
        } else {
            last = it;
            pp = &it->next;
        }
    }
    pl->poll.ovf_tail = last;
    if (dropped)
        common_logf(stderr,
                    "%ld in-flight record(s) of revoked partitions left unstored "
                    "(their next owner re-reads them)\n",
                    dropped);
}

static void set_fatal(pl_t *pl) {
    pthread_mutex_lock(&pl->q.mu);
    pl->q.fatal = 1;
    pthread_mutex_unlock(&pl->q.mu);
}

/* Queues a decoded burst in arrival order: its items into the overflow, its dead letters to
 * the producer; records of partitions revoked meanwhile are dropped (their next owner reads
 * them again). */
static void queue_burst(pl_t *pl, pl_burst_t *b) {
    pl_poll_t *pp = &pl->poll;
    long truncated = 0;
    pthread_mutex_lock(&pl->q.mu);
    for (int i = 0; i < b->n; i++)
        if (consumers_offsets_epoch(pl->q.offsets, b->track[i]) != b->epoch[i]) b->epoch[i] = 0;
    pthread_mutex_unlock(&pl->q.mu);
    for (int i = 0; i < b->n; i++) {
        int ours = b->epoch[i] != 0;
        pl_item_t *it = b->items[i];
        b->items[i] = NULL;
        char why[COMMON_ERR_LINE_MAX];
        if (ours && !it)
            pl_dead_letter(pl, b->rec[i], NULL, common_err_line(&b->err[i], why, sizeof(why)),
                           b->epoch[i], b->track[i]);
        consumers_record_free(b->rec[i]);
        if (!ours || !it) {
            pl_item_free(it);
            continue;
        }
        it->epoch = b->epoch[i];
        it->track = b->track[i];
        it->polled_ms = b->polled_ms[i];
        it->lane = consumers_consumer_topic_lane(
            pp->consumer, consumers_consumer_track_topic(pp->consumer, it->track));
        it->live = 1;
        atomic_fetch_add_explicit(&worker_metrics.lane_live[it->lane], 1, memory_order_relaxed);
        truncated += it->truncated;
        if (pp->ovf_tail)
            pp->ovf_tail->next = it;
        else
            pp->ovf_head = it;
        pp->ovf_tail = it;
        pp->ovf_n++;
    }
    b->n = 0;
    if (truncated) {
        pthread_mutex_lock(&pl->q.mu);
        pl->st.truncated += truncated;
        pthread_mutex_unlock(&pl->q.mu);
        worker_metrics_add(&worker_metrics.truncated, truncated);
    }
}

void pl_decode_settle(pl_t *pl) {
    pl_burst_t *run = &pl->poll.burst[!pl->poll.fill];
    if (!run->running) return;
    pl_decode_wait(pl, run);
    queue_burst(pl, run);
}

/* The burst on the pool, if any, is finished (the poll thread helps) and queued; the one filled
 * since goes to the pool, and unless wait, the poll thread goes on polling meanwhile. wait:
 * nothing more is at hand, so it is finished and queued now too. */
static void flush_decoded(pl_t *pl, int wait) {
    pl_poll_t *pp = &pl->poll;
    pl_decode_settle(pl);
    pl_burst_t *b = &pp->burst[pp->fill];
    if (b->n) {
        pl_decode_start(pl, b);
        pp->fill = !pp->fill;
        if (wait) pl_decode_settle(pl);
    }
    worker_stage_clock_t clk;
    worker_stage_begin(&clk);
    pl_drain_overflow(pl);
    worker_stage_end(&clk, WORKER_STAGE_ACCUM);
}

/* Tracks a record and puts it into the burst being filled. */
static void handle_decodable(pl_t *pl, consumers_record_t *m) {
    const int32_t track = consumers_consumer_track(pl->poll.consumer, m);
    const int64_t offset = consumers_record_offset(m);
    pthread_mutex_lock(&pl->q.mu);
    int64_t epoch = track < 0 ? 0 : consumers_offsets_epoch(pl->q.offsets, track);
    int tracked = epoch > 0 && consumers_offsets_consumed(pl->q.offsets, track, epoch, offset) == 0;
    if (pl->st.first_record_s == 0) pl->st.first_record_s = common_now_s();
    pthread_mutex_unlock(&pl->q.mu);
    if (!tracked) { /* not ours (any more), or a redelivery below what we track */
        consumers_record_free(m);
        return;
    }
    worker_metrics_add(&worker_metrics.tickets_consumed, 1);
    pl_burst_t *b = &pl->poll.burst[pl->poll.fill];
    b->rec[b->n] = m; /* freed once its item is queued or its dead letter sent */
    b->epoch[b->n] = epoch;
    b->polled_ms[b->n] = common_now_ms();
    b->track[b->n++] = track;
    if (b->n == PL_BURST) flush_decoded(pl, 0);
}

/* A record waits behind held ones, or for its own writer schema, or goes on now. */
static void handle_record(pl_t *pl, consumers_record_t *m) {
    common_err_t e;
    char err[COMMON_ERR_LINE_MAX]; /* its line for the log */
    int s = pl->poll.held_n ? PL_SCHEMA_WAIT : pl_schema_check(pl, m, &e);
    if (s != PL_SCHEMA_READY && !pl->poll.held_n) common_err_line(&e, err, sizeof err);
    if (s == PL_SCHEMA_READY) {
        handle_decodable(pl, m);
        return;
    }
    if (s == PL_SCHEMA_FATAL) {
        common_logf(stderr, "%s; stopping (fix the registry settings)\n", err);
        consumers_record_free(m);
        set_fatal(pl);
        return;
    }
    if (!pl->poll.held_n)
        common_logf(stderr,
                    "%s; holding the records from here on (nothing is "
                    "dead-lettered)\n",
                    err);
    if (pl_held_push(pl, m)) {
        common_logf(stderr, "out of memory holding records for the schema registry\n");
        consumers_record_free(m);
        set_fatal(pl);
    }
}

/* Feeds held records whose writer schema came, in order. */
static void release_held(pl_t *pl) {
    common_err_t e;
    int fatal = 0;
    consumers_record_t *m;
    int any = 0;
    while ((m = pl_held_next(pl, &fatal, &e)) != NULL) {
        handle_decodable(pl, m);
        any = 1;
    }
    if (any) flush_decoded(pl, 1);
    if (fatal) {
        char line[COMMON_ERR_LINE_MAX];
        common_logf(stderr, "%s; stopping (fix the registry settings)\n",
                    common_err_line(&e, line, sizeof line));
        set_fatal(pl);
    }
}

static void log_progress(pl_t *pl, double t0) {
    pthread_mutex_lock(&pl->q.mu);
    double el = common_now_s() - (pl->st.first_record_s ? pl->st.first_record_s : t0);
    common_logf(stderr,
                "tickets=%ld batches=%ld tickets/s=%.0f pending=%d uncommitted=%ld "
                "dead_letters=%ld encoder_s=%.1f%s\n",
                pl->st.tickets_done, pl->st.batches_done, el > 0 ? pl->st.tickets_done / el : 0.0,
                worker_fair_pending_items(pl->q.acc), consumers_offsets_pending(pl->q.offsets, -1),
                pl->st.dead_letters, pl->st.encoder_s, pl->q.sink_down ? " (database down)" : "");
    pthread_mutex_unlock(&pl->q.mu);
}

#define PL_HOLD_MS         1000 /* longest backlog waited out without pausing the partitions */
#define PL_DLQ_WAITING_MAX 1000 /* dead letters waiting for a retry before reading stops */
#define PL_LAG_EVERY_S     1.0  /* how often reclass_consumer_lag_records is refreshed */
#define PL_CAUGHT_UP_MS    5000 /* longest wait for the brokers' watermarks before an idle exit */

/* The poll loop: returns when a stop was asked (signal, idle, fatal). */
void pl_poll_loop(pl_t *pl) {
    const worker_run_cfg_t *cfg = pl->cfg;
    double t0 = common_now_s(), last_activity = t0;
    long logged_batches = 0, seen_rebalances = 0;
    int64_t hold_since = 0; /* when the accumulator became full without a pause; 0 = not */
    double next_lag_s = t0;
    for (;;) {
        if (common_now_s() >= next_lag_s) {
            next_lag_s = common_now_s() + PL_LAG_EVERY_S;
            long lag = consumers_consumer_lag(pl->poll.consumer);
            if (lag >= 0)
                atomic_store_explicit(&worker_metrics.consumer_lag, lag, memory_order_relaxed);
        }
        if (pl_stop_signal) {
            common_logf(stderr, "signal %d: finishing in-flight work\n", (int)pl_stop_signal);
            break;
        }
        common_err_t fe;
        if (consumers_consumer_fatal(pl->poll.consumer, &fe) ||
            consumers_dlq_fatal(pl->poll.dlq, &fe)) {
            char line[COMMON_ERR_LINE_MAX];
            common_logf(stderr, "fatal Kafka error: %s\n",
                        common_err_line(&fe, line, sizeof(line)));
            pthread_mutex_lock(&pl->q.mu);
            pl->q.fatal = 1;
            pthread_mutex_unlock(&pl->q.mu);
            break;
        }
        pthread_mutex_lock(&pl->q.mu);
        int fatal = pl->q.fatal, sink_down = pl->q.sink_down;
        int pending = worker_fair_pending_items(pl->q.acc);
        long pending_tokens = worker_fair_pending_tokens(pl->q.acc);
        long uncommitted = consumers_offsets_pending(pl->q.offsets, -1);
        long batches = pl->st.batches_done;
        pthread_mutex_unlock(&pl->q.mu);
        /* the liveness heartbeat: /healthz fails once this loop stops turning */
        atomic_store_explicit(&worker_metrics.last_poll_ms, (long long)common_now_ms(),
                              memory_order_relaxed);
        atomic_store_explicit(&worker_metrics.pending_items, pending, memory_order_relaxed);
        atomic_store_explicit(&worker_metrics.pending_tokens, pending_tokens, memory_order_relaxed);
        if (fatal) break;
        pl_hold_lanes(pl);
        /* dead letters the dead-letter topic does not take yet count as a full accumulator:
         * reading on would only pile them up in memory */
        release_held(pl);
        int full = pl_drain_overflow(pl) ||
                   consumers_dlq_waiting(pl->poll.dlq) > PL_DLQ_WAITING_MAX || pl->poll.held_n > 0;
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
        } else if (!sink_down && !consumers_consumer_paused(pl->poll.consumer)) {
            int64_t now_ms = common_now_ms();
            if (!hold_since) {
                hold_since = now_ms;
                pl->poll.holds++;
                worker_metrics_add(&worker_metrics.holds, 1);
            }
            if (now_ms - hold_since < PL_HOLD_MS) {
                /* a backlog of less urgent lanes keeps the most urgent one's records readable
                 * (they stay in the accumulator's room of their own tenants) */
                consumers_record_t *um = pl->poll.ovf_n < PL_OVERFLOW_URGENT_MAX
                                             ? consumers_consumer_poll_lane(pl->poll.consumer, 0)
                                             : NULL;
                if (um) {
                    last_activity = common_now_s();
                    handle_record(pl, um);
                    flush_decoded(pl, 1); /* urgent: into the accumulator now */
                    continue;
                }
                pthread_mutex_lock(&pl->q.mu);
                pl_queue_wait(&pl->st, PL_Q_ACCUM, 1, &pl->q.cv_accum, &pl->q.mu,
                              now_ms + PL_HOLD_POLL_MS);
                pthread_mutex_unlock(&pl->q.mu);
                continue;
            }
        }
        pl_backpressure(pl, full, sink_down, pending);
        atomic_store_explicit(&worker_metrics.consumer_paused,
                              consumers_consumer_paused(pl->poll.consumer), memory_order_relaxed);
        worker_stage_clock_t clk;
        worker_stage_begin(&clk);
        /* a burst: the first record waits (not while one is on the pool), the rest are what
         * librdkafka holds already; each is tracked as it comes, then the burst is decoded on
         * the pool while the next one is polled. A burst cut short (nothing more at hand) is
         * finished at once. */
        int running = pl->poll.burst[!pl->poll.fill].running;
        consumers_record_t *m = consumers_consumer_poll(pl->poll.consumer, running ? 0
                                                                           : full  ? PL_POLL_FULL_MS
                                                                                   : PL_POLL_MS);
        int got = m != NULL, k = 1;
        for (; m; k++) {
            handle_record(pl, m);
            m = k < PL_BURST && !full ? consumers_consumer_poll(pl->poll.consumer, 0) : NULL;
        }
        if (got) worker_stage_end(&clk, WORKER_STAGE_POLL);
        int dry = full || k <= PL_BURST;
        if (pl->poll.burst[pl->poll.fill].n || (dry && pl->poll.burst[!pl->poll.fill].running))
            flush_decoded(pl, dry);
        pl_send_refused(pl);
        consumers_dlq_poll(pl->poll.dlq, 0);
        double now = common_now_s();
        long rebalances = consumers_consumer_rebalances(pl->poll.consumer);
        if (rebalances != seen_rebalances) { /* joining or rebalancing is not idleness */
            seen_rebalances = rebalances;
            last_activity = now;
            atomic_store(&worker_metrics.group_joined, 1);
        }
        if (got) {
            last_activity = now;
        } else if (uncommitted > 0 || pl->poll.ovf_head || pl->poll.held_n ||
                   consumers_dlq_outstanding(pl->poll.dlq) > 0) {
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
                common_logf(stderr,
                            "no partition assignment from group %s within %d s "
                            "(--join-timeout): check that %s is reachable, that topic %s exists "
                            "and that the group is not stuck rebalancing; exiting\n",
                            cfg->group, cfg->join_timeout_s, cfg->brokers, cfg->topic);
                pthread_mutex_lock(&pl->q.mu);
                pl->q.fatal = 1;
                pthread_mutex_unlock(&pl->q.mu);
                break;
            }
            continue;
        }
        /* Quiet is not the end: a fetch slower than the bound (a loaded or distant broker)
         * would leave this member's partitions unread, its job unfinished, and hand them to
         * members that are leaving too. It leaves only when the brokers say nothing is left;
         * else the bound starts again. */
        if (cfg->idle_exit_s > 0 && now - last_activity >= cfg->idle_exit_s) {
            int up = consumers_consumer_caught_up(pl->poll.consumer, PL_CAUGHT_UP_MS);
            if (up == 1) {
                common_logf(stderr, "idle for %d s, everything read and committed: exiting\n",
                            cfg->idle_exit_s);
                break;
            }
            if (up < 0)
                common_logf(stderr,
                            "idle for %d s, but the brokers did not say within %d ms whether "
                            "records are left to read: staying\n",
                            cfg->idle_exit_s, PL_CAUGHT_UP_MS);
            last_activity = common_now_s();
        }
    }
}

/* Stop fetching, let encoder and sink finish what was accepted, then hand offsets back. */
void pl_drain(pl_t *pl) {
    for (int k = 0; k < 2; k++) { /* decoded, never accepted: unstored too */
        pl_burst_t *b = &pl->poll.burst[k];
        pl_decode_wait(pl, b);
        for (int i = 0; i < b->n; i++) {
            pl_item_free(b->items[i]);
            b->items[i] = NULL;
            consumers_record_free(b->rec[i]);
        }
        b->n = 0;
    }
    consumers_consumer_pause(pl->poll.consumer);
    pl_held_revoke(pl, NULL, -1); /* held records were never accepted either */
    /* overflow items were never accepted: unstored, so redelivered to whoever comes next */
    while (pl->poll.ovf_head) {
        pl_item_t *it = pl->poll.ovf_head;
        pl->poll.ovf_head = it->next;
        pl_item_free(it);
    }
    pl->poll.ovf_tail = NULL;
    pl->poll.ovf_n = 0;
    pthread_mutex_lock(&pl->q.mu);
    pl->q.draining = 1;
    pthread_cond_broadcast(&pl->q.cv_enc);
    pthread_cond_broadcast(&pl->q.cv_room);
    pthread_mutex_unlock(&pl->q.mu);
    for (;;) { /* keep serving the group and the dead letters meanwhile */
        pthread_mutex_lock(&pl->q.mu);
        int done = pl->q.sink_done;
        pthread_mutex_unlock(&pl->q.mu);
        if (done) break;
        atomic_store_explicit(&worker_metrics.last_poll_ms, (long long)common_now_ms(),
                              memory_order_relaxed);
        consumers_record_t *m = consumers_consumer_poll(pl->poll.consumer, PL_DRAIN_POLL_MS);
        if (m) consumers_record_free(m); /* fetched before the pause: not tracked */
        pl_send_refused(pl);
        consumers_dlq_poll(pl->poll.dlq, 0);
    }
    pl_send_refused(pl); /* the sink's last write */
    if (consumers_dlq_flush(pl->poll.dlq, 30000))
        common_logf(stderr,
                    "%ld dead letter(s) not acknowledged; their offsets stay "
                    "unstored\n",
                    consumers_dlq_outstanding(pl->poll.dlq));
}
