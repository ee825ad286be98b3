/* The pipeline's telemetry: HTTP endpoints, drift windows and gpu_memory rows. Everything
 * that touches PostgreSQL runs on the sink thread between result transactions (the thread
 * owns the connection); the encoder never waits for it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/err.h"
#include "worker/pipeline/pipeline_int.h"

/* flush_drift hands worker/observe/drift.c's histograms to the sink as they are. */
_Static_assert(WORKER_DRIFT_BINS == SINK_DRIFT_BINS, "drift histogram bins differ");

static int64_t wall_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec;
}

void pl_metrics_store_mem(const pl_encoder_t *en, const gpu_mem_stats_t *ms) {
    worker_metrics_mem_t *g = &worker_metrics.mem[en->id];
    atomic_store_explicit(&g->device, en->device, memory_order_relaxed);
    atomic_store_explicit(&g->device_used_bytes, (long long)ms->device_used, memory_order_relaxed);
    atomic_store_explicit(&g->device_total_bytes, (long long)ms->device_total,
                          memory_order_relaxed);
    atomic_store_explicit(&g->weights_bytes, (long long)ms->weights_bytes, memory_order_relaxed);
    atomic_store_explicit(&g->arena_bytes, (long long)ms->arena_bytes, memory_order_relaxed);
    atomic_store_explicit(&g->allocations_after_init, (long long)ms->allocations_after_init,
                          memory_order_relaxed);
}

void pl_telemetry_mem(pl_t *pl) {
    for (int i = 0; i < pl->n_enc; i++) {
        const pl_encoder_t *en = &pl->enc[i];
        gpu_mem_stats_t ms = {0};
        if (en->eng->ops->mem_stats && !en->eng->ops->mem_stats(en->eng->be, &ms))
            pl_metrics_store_mem(en, &ms);
    }
}

common_status_t pl_telemetry_init(pl_t *pl, common_err_t *e) {
    const worker_run_cfg_t *cfg = pl->cfg;
    char host[256] = "unknown";
    if (gethostname(host, sizeof(host)) != 0) snprintf(host, sizeof(host), "unknown");
    host[sizeof(host) - 1] = '\0';
    snprintf(pl->worker_id, sizeof(pl->worker_id), "%s:%d", host, (int)getpid());
    atomic_store(&worker_metrics.token_budget, pl->ses.props.token_budget);
    pl_telemetry_mem(pl);
    /* zero-initialised configs (tests that skip the parser) get the documented defaults */
    worker_drift_cfg_t dc = {.window_s = cfg->drift_window_s > 0 ? cfg->drift_window_s : 60,
                             .max_tenants = cfg->drift_max_tenants > 0 ? cfg->drift_max_tenants
                                                                       : WORKER_DRIFT_MAX_TENANTS,
                             .num_labels = pl->ses.model->cfg.num_labels};
    common_status_t st = worker_drift_init(&dc, &pl->sk.drift, e);
    if (st != COMMON_OK) return st;
    atomic_store(&worker_metrics.drift_memory_bytes, (long)worker_drift_bytes(pl->sk.drift));
    common_logf(stderr, "drift statistics: %d tenants per %d s window, %zu bytes\n", dc.max_tenants,
                dc.window_s, worker_drift_bytes(pl->sk.drift));
    pl->sk.drift_rows = calloc((size_t)dc.max_tenants + 1, sizeof(*pl->sk.drift_rows));
    if (!pl->sk.drift_rows) return common_err_set(e, COMMON_FATAL, "out of memory");
    st =
        worker_drift_judge_init(dc.max_tenants + 1, dc.num_labels,
                                (const char *const *)pl->ses.model->cfg.id2label, &pl->sk.judge, e);
    if (st != COMMON_OK) return st;
    /* alive from here on: the poll loop takes over the heartbeat once it runs */
    atomic_store(&worker_metrics.last_poll_ms, (long long)common_now_ms());
    if (cfg->http_port > 0) {
        worker_metrics_info_t info = {pl->ses.eng.ops->name, pl->ses.props.precision,
                                      pl->ses.model->name, pl->worker_id};
        st =
            worker_http_start(cfg->http_addr, cfg->http_port, &worker_metrics, &info, &pl->http, e);
        if (st != COMMON_OK) return st;
        common_logf(stderr, "/healthz /readyz /metrics on http://%s:%d\n",
                    cfg->http_addr ? cfg->http_addr : "0.0.0.0", worker_http_port(pl->http));
    }
    return COMMON_OK;
}

void pl_telemetry_free(pl_t *pl) {
    worker_http_stop(pl->http); /* first: its thread must not outlive what it shows */
    pl->http = NULL;
    worker_drift_free(pl->sk.drift);
    pl->sk.drift = NULL;
    free(pl->sk.drift_rows);
    pl->sk.drift_rows = NULL;
    worker_drift_judge_free(pl->sk.judge);
    pl->sk.judge = NULL;
}

void pl_telemetry_drift_add(pl_t *pl, pl_item_t *const *its, int n) {
    int64_t now = wall_s();
    pthread_mutex_lock(&pl->sk.drift_mu);
    for (int i = 0; i < n; i++)
        worker_drift_add(pl->sk.drift, now, its[i]->t.tenant, its[i]->label_id, its[i]->confidence,
                         its[i]->truncated, its[i]->n_ids);
    pthread_mutex_unlock(&pl->sk.drift_mu);
}

/* Seconds between gpu_memory rows, and between reconnection attempts of an idle worker
 * (zero-initialised configs, in tests that skip the parser, get the documented 10). */
static int telemetry_every_s(const pl_t *pl) {
    return pl->cfg->telemetry_interval_s > 0 ? pl->cfg->telemetry_interval_s : 10;
}

/* A failed telemetry write: count it, say so once per kind of failure, and decide. Returns 1
 * when the write should be retried later (connection lost). */
static int telemetry_failed(pl_t *pl, const common_err_t *e) {
    worker_metrics_add(&worker_metrics.telemetry_failures, 1);
    if (e->code == COMMON_RETRY) {
        atomic_store(&worker_metrics.sink_connected, 0);
        /* the result path reconnects when it writes; an idle worker must do it here */
        double now = common_now_s();
        if (now >= pl->sk.next_reconnect_s) {
            pl->sk.next_reconnect_s = now + telemetry_every_s(pl);
            common_err_t e2;
            if (sink_reconnect(pl->sk.sink, &e2) == COMMON_OK)
                atomic_store(&worker_metrics.sink_connected, 1);
        }
        return 1;
    }
    char line[COMMON_ERR_LINE_MAX];
    common_logf(stderr, "telemetry disabled: %s\n", common_err_line(e, line, sizeof line));
    pl->sk.telemetry_off = 1;
    return 0;
}

static void put_level(void *ctx, const char *tenant, int level) {
    (void)ctx;
    worker_metrics_drift_put(tenant, level);
}

static void put_count(void *ctx, const char *status, long tenants) {
    (void)ctx;
    worker_metrics_drift_count(status, tenants);
}

/* After a window is written with its judgment: every tenant's status read back worst first,
 * for reclass_drift_status and its alert. Two windows back covers the one just written whatever
 * the clock skew between workers. */
static void read_drift_levels(pl_t *pl, int window_s) {
    common_err_t e;
    worker_metrics_drift_begin();
    if (sink_drift_status(pl->sk.sink, pl->ses.model->name, wall_s() - 2 * (int64_t)window_s,
                          WORKER_METRICS_DRIFT_TENANTS, put_level, put_count, NULL,
                          &e) == COMMON_OK)
        worker_metrics_drift_end();
    else
        telemetry_failed(pl, &e);
}

static void flush_drift(pl_t *pl) {
    const worker_drift_window_t *w;
    int written = 0, window_s = 0;
    while (!pl->sk.telemetry_off && (w = worker_drift_oldest(pl->sk.drift)) != NULL) {
        for (int i = 0; i < w->n_rows; i++) {
            const worker_drift_row_t *r = &w->rows[i];
            pl->sk.drift_rows[i] = (sink_drift_row_t){.tenant = r->tenant,
                                                      .overflow = r->overflow,
                                                      .tickets = r->tickets,
                                                      .label_counts = r->label_counts,
                                                      .hist = r->hist,
                                                      .confidence_sum = r->confidence_sum,
                                                      .truncated = r->truncated,
                                                      .tokens = r->tokens};
        }
        sink_drift_t d = {.window_start_s = w->start_s,
                          .window_s = w->window_s,
                          .model = pl->ses.model->name,
                          .worker = pl->worker_id,
                          .labels = (const char *const *)pl->ses.model->cfg.id2label,
                          .n_labels = pl->ses.model->cfg.num_labels,
                          .rows = pl->sk.drift_rows,
                          .n_rows = w->n_rows};
        common_err_t e;
        /* judged here over every worker's rows of the window (sink/drift_judge.h) */
        if (sink_write_drift_judged(pl->sk.sink, &d, worker_drift_judge_stored(pl->sk.judge),
                                    worker_drift_judge_judged(pl->sk.judge),
                                    worker_drift_judge_rows, pl->sk.judge,
                                    &e) == COMMON_OK) { /* once per window: a retry comes back */
            atomic_store(&worker_metrics.drift_folded_tenants, w->folded_tenants);
            if (w->folded_tenants > 0) {
                worker_metrics_add(&worker_metrics.drift_folded_tickets, w->folded_tickets);
                common_logf(stderr,
                            "drift window %lld: %d tenants (%ld tickets) past "
                            "--drift-max-tenants %d folded into _other, their rows flagged "
                            "overflow; raise --drift-max-tenants\n",
                            (long long)w->start_s, w->folded_tenants, w->folded_tickets,
                            pl->cfg->drift_max_tenants > 0 ? pl->cfg->drift_max_tenants
                                                           : WORKER_DRIFT_MAX_TENANTS);
            }

            worker_metrics_add(&worker_metrics.drift_windows, 1);
            written = 1;
            window_s = w->window_s;
            pl->sk.drift_last_end_s = w->start_s + w->window_s;
            worker_drift_pop(pl->sk.drift);
        } else if (telemetry_failed(pl, &e)) {
            break; /* kept (bounded by WORKER_DRIFT_SLOTS) and retried on a later tick */
        }
    }
    atomic_store(&worker_metrics.drift_dropped, worker_drift_dropped(pl->sk.drift));
    if (written && !pl->sk.telemetry_off) read_drift_levels(pl, window_s);
}

/* A gpu_memory row per encoder, from what its last batch (or start-up) published. */
static void write_gpu_rows(pl_t *pl) {
    for (int i = 0; i < pl->n_enc; i++) {
        const worker_metrics_mem_t *m = &worker_metrics.mem[i];
        long long total = atomic_load(&m->device_total_bytes);
        sink_gpu_memory_t g = {
            .worker = pl->worker_id,
            .backend = pl->ses.eng.ops->name,
            .precision = pl->ses.props.precision,
            .device_total_bytes = total > 0 ? total : -1, /* unknown (cpu): NULL */
            .device_used_bytes = atomic_load(&m->device_used_bytes),
            .weights_bytes = atomic_load(&m->weights_bytes),
            .arena_bytes = atomic_load(&m->arena_bytes),
            .allocations_after_init = atomic_load(&m->allocations_after_init),
            .token_budget = pl->ses.props.token_budget,
            .device = pl_encoder_device(&pl->enc[i]),
            .encoder = i,
        };
        common_err_t e;
        if (sink_write_gpu_memory(pl->sk.sink, &g, &e) != COMMON_OK) {
            telemetry_failed(pl, &e);
            return;
        }
        worker_metrics_add(&worker_metrics.telemetry_rows, 1);
    }
}

void pl_telemetry_tick(pl_t *pl, int final) {
    if (!pl->sk.drift || !pl->sk.sink) return;
    pthread_mutex_lock(&pl->sk.drift_mu); /* other writers count into the open window */
    int waiting = worker_drift_tick(pl->sk.drift, wall_s(), final);
    if (pl->sk.telemetry_off) {
        while (worker_drift_oldest(pl->sk.drift)) /* nowhere to write them: keep the slots free */
            worker_drift_pop(pl->sk.drift);
        pthread_mutex_unlock(&pl->sk.drift_mu);
        return;
    }
    if (waiting) flush_drift(pl);
    pthread_mutex_unlock(&pl->sk.drift_mu);
    double now = common_now_s();
    if (pl->sk.telemetry_off || (!final && now < pl->sk.next_gpu_row_s)) return;
    pl->sk.next_gpu_row_s = now + telemetry_every_s(pl);
    write_gpu_rows(pl);
    if (final && worker_drift_oldest(pl->sk.drift))
        common_logf(stderr, "drift statistics of the last window not written\n");
    /* a stopping worker's last hour: its judgments stored now, not at the hour's close (which
     * another worker's window of a later hour makes) */
    common_err_t e;
    if (final && pl->sk.drift_last_end_s > 0 &&
        sink_drift_judged_close(pl->sk.sink, pl->ses.model->name,
                                (pl->sk.drift_last_end_s + 3599) / 3600 * 3600, &e) != COMMON_OK)
        telemetry_failed(pl, &e);
}
