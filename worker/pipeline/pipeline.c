/* The pipeline's set-up, teardown and exit statistics (see worker/pipeline/pipeline.h); the
 * poll thread is worker/pipeline/poll.c. */
#include "worker/pipeline/pipeline.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/err.h"
#include "worker/pipeline/pipeline_int.h"

volatile sig_atomic_t pl_stop_signal = 0;

/* The first SIGTERM/SIGINT asks for a clean stop; a second one (e.g. while PostgreSQL is down
 * and the last rows cannot be written) exits at once: nothing uncommitted was ever stored, so
 * the records are simply read again by the next worker. */
static void on_signal(int sig) {
    if (pl_stop_signal) _exit(1);
    pl_stop_signal = sig;
}

/* The last explicit commit. A rebalance in progress makes the broker refuse it for a moment:
 * keep serving the group (paused, so nothing is fetched) and try again. COMMON_OK once
 * committed, COMMON_RETRY when the group still refuses it for a rebalance (every row is stored
 * by then: the partitions' next owner re-reads past the last commit and stores nothing twice,
 * so this is a clean end), COMMON_FATAL when it failed otherwise. */
static common_status_t final_commit(pl_t *pl, common_err_t *e) {
    double until = common_now_s() + PL_FINAL_COMMIT_S;
    for (;;) {
        common_status_t rc = consumers_consumer_commit(pl->poll.consumer, e);
        if (rc == COMMON_OK || common_now_s() > until) return rc;
        for (int i = 0; i < 10; i++) {
            consumers_record_free(consumers_consumer_poll(pl->poll.consumer, PL_DRAIN_POLL_MS));
        }
    }
}

static void print_stats(pl_t *pl, double t_start, worker_pipeline_stats_t *st) {
    double wall = common_now_s() - t_start;
    double span = pl->st.last_commit_s > pl->st.first_record_s
                      ? pl->st.last_commit_s - pl->st.first_record_s
                      : 0.0;
    double share = span > 0 ? 1.0 - pl->st.encoder_s / span : 0.0;
    if (share < 0) share = 0;
    char line[8192];
    snprintf(line, sizeof(line),
             "{\"tickets\":%ld,\"dead_letters\":%ld,\"truncated\":%ld,\"batches\":%ld,"
             "\"pauses\":%ld,\"holds\":%ld,"
             "\"seconds\":%.3f,\"tickets_per_s\":%.1f,\"encoder_seconds\":%.3f,"
             "\"non_encoder_share\":%.4f,\"sink_seconds\":%.3f,\"wall_seconds\":%.3f,"
             "\"backend\":\"%s\"}",
             pl->st.tickets_done, pl->st.dead_letters, pl->st.truncated, pl->st.batches_done,
             pl->poll.pauses, pl->poll.holds, span, span > 0 ? pl->st.tickets_done / span : 0.0,
             pl->st.encoder_s, share, pl->st.sink_s, wall, pl->ses.eng.ops->name);
    size_t len = strlen(line) - 1; /* drop the closing brace */
    /* where the time went: per stage, wall and CPU seconds of this run */
    double dev = pl->ses.eng.ops->device_seconds ? 0.0 : -1.0; /* the encoders' summed */
    for (int i = 0; i < pl->n_enc && dev >= 0; i++)
        dev += pl->ses.eng.ops->device_seconds(pl->enc[i].eng->be);
    len +=
        (size_t)snprintf(line + len, sizeof(line) - len, ",\"threads\":%d,\"device_seconds\":%.3f",
                         pl_pool_slots(pl->pool), dev);
    if (pl->n_enc > 1) /* one encoder's line stays as it was */
        len += (size_t)snprintf(line + len, sizeof(line) - len,
                                ",\"encoders\":%d,\"encoders_up\":%d", pl->n_enc, pl->q.enc_up);
    len += (size_t)snprintf(line + len, sizeof(line) - len, ",\"stages\":{");
    for (int i = 0; i < WORKER_STAGE_N; i++) {
        long long w = atomic_load(&worker_metrics.stage_ns[i][0]) - pl->stage_ns0[i][0];
        long long c = atomic_load(&worker_metrics.stage_ns[i][1]) - pl->stage_ns0[i][1];
        len += (size_t)snprintf(line + len, sizeof(line) - len,
                                "%s\"%s\":{\"wall_s\":%.3f,\"cpu_s\":%.3f}", i ? "," : "",
                                worker_stage_name(i), (double)w * 1e-9, (double)c * 1e-9);
    }
    len += (size_t)snprintf(line + len, sizeof(line) - len, "}");
    /* the hand-offs between the threads: what waited where, and which side waited */
    static const char *const qname[PL_Q_N] = {"accumulate", "encode", "sink_queue", "commit",
                                              "store"};
    len += (size_t)snprintf(line + len, sizeof(line) - len, ",\"transactions\":%ld,\"queues\":{",
                            pl->st.transactions);
    for (int i = 0; i < PL_Q_N; i++) {
        const pl_queue_stat_t *q = &pl->st.queue[i];
        len += (size_t)snprintf(line + len, sizeof(line) - len,
                                "%s\"%s\":{\"batches\":%ld,\"wait_s\":%.3f,\"full\":%ld,"
                                "\"full_s\":%.3f,\"empty\":%ld,\"empty_s\":%.3f}",
                                i ? "," : "", qname[i], q->batches, q->wait_s, q->full, q->full_s,
                                q->empty, q->empty_s);
    }
    len += (size_t)snprintf(line + len, sizeof(line) - len, "}");
    /* offsets this worker stored (and committed) last, per partition: tests compare them with
     * the rows in the database */
    len += (size_t)snprintf(line + len, sizeof(line) - len, ",\"stored_offsets\":{");
    for (int p = 0, first = 1; p < pl->st.n_stored && len < sizeof(line) - 32; p++) {
        if (pl->st.stored[p] < 0) continue;
        len += (size_t)snprintf(line + len, sizeof(line) - len, "%s\"%d\":%" PRId64,
                                first ? "" : ",", p, pl->st.stored[p]);
        first = 0;
    }
    snprintf(line + len, sizeof(line) - len, "}}");
    if (st)
        *st = (worker_pipeline_stats_t){.tickets = pl->st.tickets_done,
                                        .dead_letters = pl->st.dead_letters,
                                        .truncated = pl->st.truncated,
                                        .batches = pl->st.batches_done,
                                        .revoked_partitions = pl->st.revoked_partitions,
                                        .dropped_in_flight = pl->st.dropped_in_flight,
                                        .seconds = span,
                                        .encoder_seconds = pl->st.encoder_s,
                                        .non_encoder_share = share};
    printf("%s\n", line);
    fflush(stdout);
    if (pl->cfg->stats_json) {
        FILE *f = fopen(pl->cfg->stats_json, "w");
        if (f) {
            fprintf(f, "%s\n", line);
            fclose(f);
        } else {
            common_logf(stderr, "cannot write %s\n", pl->cfg->stats_json);
        }
    }
}

/* The devices the encoders run on, into devs (WORKER_RUN_MAX_DEVICES): --devices, or
 * --device's one. Their count, or 0 with e (--devices all with no device). */
static int encoder_devices(const worker_run_cfg_t *cfg, int *devs, common_err_t *e) {
    if (!cfg->device_all && cfg->n_devices == 0) {
        devs[0] = cfg->cls.device;
        return 1;
    }
    if (!cfg->device_all) {
        memcpy(devs, cfg->device_ids, sizeof(int) * (size_t)cfg->n_devices);
        return cfg->n_devices;
    }
    const gpu_backend_ops_t *ops = gpu_backend_find(cfg->cls.backend, e);
    if (!ops) return 0;
    int n = ops->device_count ? ops->device_count() : 1;
    if (n <= 0) {
        common_err_set(e, COMMON_FATAL, "--devices all: the %s backend sees no device", ops->name);
        return 0;
    }
    if (n > WORKER_RUN_MAX_DEVICES) n = WORKER_RUN_MAX_DEVICES;
    for (int i = 0; i < n; i++)
        devs[i] = i;
    return n;
}

/* The classification session (model, tokenizer, the first encoder's backend), the other
 * encoders' engines and the thread pool. COMMON_OK, or the status with e. */
static common_status_t setup_compute(pl_t *pl, common_err_t *e) {
    const worker_run_cfg_t *cfg = pl->cfg;
    int devs[WORKER_RUN_MAX_DEVICES];
    int n_dev = encoder_devices(cfg, devs, e);
    if (n_dev == 0) return e->code;
    const int per = cfg->encoders > 0 ? cfg->encoders : 1;
    const int n_enc = per * n_dev;
    int threads = cfg->cls.threads > 0 ? cfg->cls.threads : pl_pool_cores();
    cls_settings_t set = cfg->cls;
    set.device = devs[0];
    /* The cpu backend's threads: N encoders split --threads between them (at least one each)
     * rather than each taking them all, so that together they keep the cores busy without
     * oversubscribing them, and no encoder's batch waits for another's to release a core: each
     * runs at the speed of its own slice. One encoder keeps --threads as it always had. */
    if (n_enc > 1) set.threads = threads / n_enc > 0 ? threads / n_enc : 1;
    common_status_t rc = cls_session_open(&pl->ses, &set, 1, e);
    if (rc) return rc;
    pl->enc = calloc((size_t)n_enc, sizeof(*pl->enc)); /* (n_enc) */
    if (!pl->enc) return common_err_set(e, COMMON_FATAL, "out of memory");
    const size_t cap = (size_t)pl->ses.props.max_seqs;
    for (int i = 0; i < n_enc; i++) {
        pl_encoder_t *en = &pl->enc[i];
        *en = (pl_encoder_t){.pl = pl, .id = i, .device = devs[i / per], .eng = &pl->ses.eng};
        if (i > 0) {
            rc = cls_session_engine_open(&pl->ses, en->device, &en->own, e);
            if (rc) return rc;
            en->eng = &en->own;
        }
        pl->n_enc++;
        for (int k = 0; k < 2; k++)
            en->items[k] = malloc(sizeof(void *) * cap);  /* (max_seqs) */
        en->lens = malloc(sizeof(int) * cap);             /* (max_seqs) */
        en->seqp = malloc(sizeof(const int32_t *) * cap); /* (max_seqs) */
        if (!en->items[0] || !en->items[1] || !en->lens || !en->seqp)
            return common_err_set(e, COMMON_FATAL, "out of memory");
    }
    pl->q.enc_up = n_enc;
    atomic_store(&worker_metrics.encoders, n_enc);
    atomic_store(&worker_metrics.encoders_up, n_enc);
    pl->q.max_out_items = 2L * pl->cfg->sink_rows;
    if (pl_pool_init(threads, &pl->pool))
        return common_err_set(e, COMMON_FATAL, "cannot start %d pipeline threads", threads);
    return COMMON_OK;
}

/* Result writers: --sink-connections, or by threads (the default). */
static int sink_connections(const worker_run_cfg_t *cfg, int threads) {
    if (cfg->sink_connections > 0) return cfg->sink_connections;
    int n = threads / 4;
    return n < 1 ? 1 : n > 4 ? 4 : n;
}

/* The result writers' connections; the first is telemetry's too. COMMON_OK, or the sink's
 * status with e. */
static common_status_t open_writers(pl_t *pl, common_err_t *e) {
    int n = sink_connections(pl->cfg, pl_pool_slots(pl->pool));
    pl->sk.writers = calloc((size_t)n, sizeof(*pl->sk.writers)); /* (n_writers) */
    if (!pl->sk.writers) return common_err_set(e, COMMON_FATAL, "out of memory");
    for (int i = 0; i < n; i++) {
        pl->sk.writers[i].pl = pl;
        common_status_t rc =
            sink_init(pl->cfg->db, pl->ses.model->name, &pl->sk.writers[i].sink, e);
        if (rc != COMMON_OK) return rc;
        pl->sk.n_writers++;
    }
    pl->sk.sink = pl->sk.writers[0].sink;
    return COMMON_OK;
}

static void teardown(pl_t *pl) {
    pl_telemetry_free(pl);
    pl_decoders_free(pl);
    pl_pool_free(pl->pool);
    while (pl->q.out_head) {
        pl_out_t *o = pl->q.out_head;
        pl->q.out_head = o->next;
        for (int i = 0; i < o->n; i++)
            pl_item_free(o->items[i]);
        free(o->items);
        free(o);
    }
    if (pl->q.acc) { /* only after a failure: drain() empties it otherwise */
        void *items[256];
        int n;
        while ((n = worker_fair_pop(pl->q.acc, INT64_MAX / 2, 1, items, NULL, 256)) > 0)
            for (int i = 0; i < n; i++)
                pl_item_free(items[i]);
        worker_fair_free(pl->q.acc);
    }
    while (pl->poll.ovf_head) {
        pl_item_t *it = pl->poll.ovf_head;
        pl->poll.ovf_head = it->next;
        pl_item_free(it);
    }
    while (pl->q.retry_head) { /* only after a failure: encoders run them otherwise */
        pl_retry_t *r = pl->q.retry_head;
        pl->q.retry_head = r->next;
        for (int i = 0; i < r->n; i++)
            pl_item_free(r->items[i]);
    }
    while (pl->q.refused) { /* only after a failure: the drain sends them otherwise */
        pl_item_t *it = pl->q.refused;
        pl->q.refused = it->next;
        pl_item_free(it);
    }
    while (pl->q.failed) { /* idem: the sink records them otherwise */
        pl_item_t *it = pl->q.failed;
        pl->q.failed = it->next;
        pl_item_free(it);
    }
    pl_held_free(pl); /* first: librdkafka waits for every message before it closes */
    consumers_consumer_free(pl->poll.consumer);
    consumers_dlq_free(pl->poll.dlq);
    consumers_codec_free(pl->poll.codec);
    consumers_offsets_free(pl->q.offsets);
    free(pl->st.stored);
    for (int i = 0; i < pl->sk.n_writers; i++)
        sink_free(pl->sk.writers[i].sink);
    free(pl->sk.writers);
    for (int i = 0; i < pl->n_enc; i++) {
        pl_encoder_t *en = &pl->enc[i];
        cls_engine_close(&en->own); /* encoder 0's is the session's */
        free(en->items[0]);
        free(en->items[1]);
        free(en->lens);
        free((void *)en->seqp);
    }
    free(pl->enc);
    cls_session_close(&pl->ses);
    pthread_mutex_destroy(&pl->q.mu);
    pthread_cond_destroy(&pl->q.cv_enc);
    pthread_cond_destroy(&pl->q.cv_sink);
    pthread_cond_destroy(&pl->q.cv_room);
    pthread_cond_destroy(&pl->q.cv_accum);
    pthread_mutex_destroy(&pl->sk.drift_mu);
}

common_status_t worker_pipeline_run(const worker_run_cfg_t *cfg, common_err_t *e) {
    return worker_pipeline_run_ex(cfg, NULL, e);
}

common_status_t worker_pipeline_run_ex(const worker_run_cfg_t *cfg, worker_pipeline_stats_t *stats,
                                       common_err_t *e) {
    pl_t pl_s = {0}, *pl = &pl_s;
    pl->cfg = cfg;
    pthread_mutex_init(&pl->q.mu, NULL);
    pthread_cond_init(&pl->q.cv_enc, NULL);
    pthread_cond_init(&pl->q.cv_sink, NULL);
    pthread_cond_init(&pl->q.cv_room, NULL);
    pthread_cond_init(&pl->q.cv_accum, NULL);
    pthread_mutex_init(&pl->sk.drift_mu, NULL);
    double t_start = common_now_s();
    for (int i = 0; i < WORKER_STAGE_N; i++)
        for (int k = 0; k < 2; k++)
            pl->stage_ns0[i][k] = atomic_load(&worker_metrics.stage_ns[i][k]);
    common_status_t rc = setup_compute(pl, e);
    if (!rc) rc = pl_telemetry_init(pl, e);
    if (!rc) rc = consumers_codec_init(cfg->schemas, &pl->poll.codec, e);
    if (!rc && cfg->plain_schema)
        rc = consumers_codec_set_plain_schema(pl->poll.codec, cfg->plain_schema, e);
    if (!rc) rc = pl_held_open(pl, e);
    if (!rc) rc = pl_decoders_open(pl, e);
    if (!rc && consumers_offsets_init(&pl->q.offsets))
        rc = common_err_set(e, COMMON_FATAL, "out of memory");
    if (!rc) rc = open_writers(pl, e);
    if (!rc) atomic_store(&worker_metrics.sink_connected, 1);
    if (!rc) {
        consumers_consumer_cfg_t ccfg = {.brokers = cfg->brokers,
                                         .topic = cfg->topic,
                                         .topics = cfg->topics,
                                         .priorities = cfg->topic_prio,
                                         .n_topics = cfg->n_topics,
                                         .group = cfg->group,
                                         .extra = cfg->kafka_props,
                                         .log = stderr};
        consumers_rebalance_t rb = {pl_on_assign, pl_on_revoke, pl};
        rc = consumers_consumer_init(&ccfg, &rb, &pl->poll.consumer, e);
    }
    if (!rc) { /* one class per lane and tenant (worker/pipeline/fair.h) */
        worker_fair_cfg_t fc = {.acc = pl->ses.acc,
                                .n_lanes = consumers_consumer_n_lanes(pl->poll.consumer),
                                .tenant_max_tokens = cfg->tenant_max_tokens,
                                .weights = cfg->tenant_weights,
                                .synchronous = pl->ses.props.synchronous};
        fc.acc.priority_step_ms = cfg->priority_step_ms;
        rc = worker_fair_init(&fc, &pl->q.acc, e);
    }
    if (!rc)
        rc = consumers_dlq_init(cfg->brokers, cfg->dlq_topic, cfg->kafka_props, pl_dlq_done, pl,
                                stderr, &pl->poll.dlq, e);
    if (rc) {
        teardown(pl);
        return rc;
    }
    /* room for every writer's next transaction, and as much again being formed */
    pl->q.max_out_items = (pl->sk.n_writers + 1L) * cfg->sink_rows;
    char kern[256], plain[64] = ""; /* a smaller bulk batch beside urgent lanes (fair.c) */
    if (worker_fair_plain_budget(pl->q.acc) < pl->ses.props.token_budget)
        snprintf(plain, sizeof plain, " (%ld a batch without urgent records)",
                 worker_fair_plain_budget(pl->q.acc));
    common_logf(stderr,
                "model %s (%d labels), backend %s, precision %s, token budget %d%s, "
                "max len %d, topic %s, group %s, dead letters to %s%s%s\n",
                pl->ses.model->name, pl->ses.model->cfg.num_labels, pl->ses.eng.ops->name,
                pl->ses.props.precision, pl->ses.props.token_budget, plain, pl->ses.props.max_len,
                cfg->topic, cfg->group, cfg->dlq_topic,
                *cls_session_kernels(&pl->ses, kern, sizeof kern) ? "; " : "", kern);

    if (pl->n_enc > 1)
        common_logf(stderr, "%d encoders (%d a device), each its own %s instance%s\n", pl->n_enc,
                    cfg->encoders > 0 ? cfg->encoders : 1, pl->ses.eng.ops->name,
                    pl->ses.eng.ops->device_count ? "" : ", --threads split between them");
    struct sigaction sa = {0};
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    int n_started = 0;
    pl->q.enc_running = pl->n_enc;
    while (n_started < pl->n_enc) {
        pl_encoder_t *en = &pl->enc[n_started];
        if (pthread_create(&en->th, NULL, pl_encoder_main, en) != 0) break;
        en->started = 1;
        n_started++;
    }
    int have_enc = n_started == pl->n_enc;
    pl->q.writers_running = pl->sk.n_writers;
    int started = 0;
    while (have_enc && started < pl->sk.n_writers) {
        pl_sink_writer_t *w = &pl->sk.writers[started];
        if (pthread_create(&w->th, NULL, pl_sink_main, w) != 0) break;
        w->started = 1;
        started++;
    }
    if (have_enc && started == pl->sk.n_writers) {
        pl_poll_loop(pl);
    } else {
        common_logf(stderr, "cannot start threads\n");
        pthread_mutex_lock(&pl->q.mu);
        pl->q.fatal = 1;
        /* the writers started leave on fatal, the last of them says done; with none, here */
        pl->q.writers_running -= pl->sk.n_writers - started;
        if (started == 0) pl->q.sink_done = 1;
        pl->q.enc_running -= pl->n_enc - n_started; /* idem for the encoders */
        if (n_started == 0) pl->q.enc_done = 1;
        pthread_cond_broadcast(&pl->q.cv_enc);
        pthread_cond_broadcast(&pl->q.cv_sink);
        pthread_mutex_unlock(&pl->q.mu);
    }
    pl_drain(pl);
    for (int i = 0; i < pl->n_enc; i++)
        if (pl->enc[i].started) pthread_join(pl->enc[i].th, NULL);
    for (int i = 0; i < pl->sk.n_writers; i++)
        if (pl->sk.writers[i].started) pthread_join(pl->sk.writers[i].th, NULL);
    /* exit codes: README, "Exit codes"; a runtime failure's lines went out as it happened */
    rc = pl->q.fatal ? COMMON_FATAL : COMMON_OK;
    if (pl->q.fatal) *e = (common_err_t){.code = COMMON_FATAL};
    common_err_t ce;
    common_status_t fc = pl->q.fatal ? COMMON_OK : final_commit(pl, &ce);
    if (fc == COMMON_RETRY) {
        char line[COMMON_ERR_LINE_MAX];
        common_logf(
            stderr,
            "%s: the group is rebalancing; every row is stored, so the "
            "partitions' next owner re-reads from the last commit and stores nothing twice\n",
            common_err_line(&ce, line, sizeof line));
    } else if (fc) {
        *e = ce;
        rc = fc;
    }
    consumers_consumer_close(pl->poll.consumer);
    print_stats(pl, t_start, stats);
    teardown(pl);
    return rc;
}
