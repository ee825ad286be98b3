/* Counters of `reclass run` and their Prometheus rendering (see worker/observe/metrics.h). */
#include "worker/observe/metrics.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

worker_metrics_t worker_metrics;

void worker_metrics_reset(worker_metrics_t *m) {
    /* atomic stores, not memset: another thread may be reading */
    atomic_long *longs[] = {&m->tickets_consumed,
                            &m->tickets_classified,
                            &m->dead_lettered,
                            &m->truncated,
                            &m->batches,
                            &m->tokens,
                            &m->sink_commits,
                            &m->sink_retries,
                            &m->pauses,
                            &m->holds,
                            &m->drift_windows,
                            &m->drift_dropped,
                            &m->drift_folded_tickets,
                            &m->drift_folded_tenants,
                            &m->drift_memory_bytes,
                            &m->telemetry_rows,
                            &m->telemetry_failures,
                            &m->pending_items,
                            &m->pending_tokens,
                            &m->consumer_lag};
    for (size_t i = 0; i < sizeof(longs) / sizeof(longs[0]); i++)
        atomic_store(longs[i], 0);
    atomic_store(&m->encoder_ns, 0);
    atomic_store(&m->last_poll_ms, 0);
    for (int i = 0; i < WORKER_METRICS_ENCODERS; i++) {
        worker_metrics_mem_t *g = &m->mem[i];
        atomic_store(&g->device, 0);
        atomic_llong *v[] = {&g->device_used_bytes, &g->device_total_bytes, &g->weights_bytes,
                             &g->arena_bytes, &g->allocations_after_init};
        for (size_t k = 0; k < sizeof(v) / sizeof(v[0]); k++)
            atomic_store(v[k], 0);
    }
    atomic_store(&m->consumer_paused, 0);
    atomic_store(&m->partitions_assigned, 0);
    atomic_store(&m->group_joined, 0);
    atomic_store(&m->sink_connected, 0);
    atomic_store(&m->token_budget, 0);
    atomic_store(&m->encoders, 0);
    atomic_store(&m->encoders_up, 0);
    for (int i = 0; i < WORKER_STAGE_N; i++)
        for (int k = 0; k < 2; k++)
            atomic_store(&m->stage_ns[i][k], 0);
}

static const char *const stage_names[WORKER_STAGE_N] = {"poll", "decode", "tokenize", "accumulate",
                                                        "pack", "submit", "collect",  "score",
                                                        "rows", "copy"};

const char *worker_stage_name(int stage) {
    return stage >= 0 && stage < WORKER_STAGE_N ? stage_names[stage] : "unknown";
}

static int64_t clock_ns(clockid_t id) {
    struct timespec ts;
    clock_gettime(id, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

void worker_stage_begin(worker_stage_clock_t *c) {
    c->wall_ns = clock_ns(CLOCK_MONOTONIC);
    c->cpu_ns = clock_ns(CLOCK_THREAD_CPUTIME_ID);
}

static void stage_add(int stage, int64_t wall_ns, int64_t cpu_ns) {
    if (stage < 0 || stage >= WORKER_STAGE_N) return;
    atomic_fetch_add_explicit(&worker_metrics.stage_ns[stage][0], wall_ns, memory_order_relaxed);
    atomic_fetch_add_explicit(&worker_metrics.stage_ns[stage][1], cpu_ns, memory_order_relaxed);
}

void worker_stage_end(worker_stage_clock_t *c, int stage) {
    worker_stage_clock_t now;
    worker_stage_begin(&now);
    int64_t w = now.wall_ns - c->wall_ns, u = now.cpu_ns - c->cpu_ns;
    stage_add(stage, w, u);
    *c = now;
}

int worker_metrics_healthy(const worker_metrics_t *m, int64_t now_ms) {
    int64_t last = atomic_load_explicit(&m->last_poll_ms, memory_order_relaxed);
    return last > 0 && now_ms - last < WORKER_METRICS_STALE_MS;
}

int worker_metrics_ready(const worker_metrics_t *m) {
    int joined = atomic_load_explicit(&m->group_joined, memory_order_relaxed) ||
                 atomic_load_explicit(&m->partitions_assigned, memory_order_relaxed) > 0;
    return joined && atomic_load_explicit(&m->sink_connected, memory_order_relaxed);
}

/* A growing text buffer; len stays valid after a failed append (oom is sticky). */
typedef struct {
    char *p;
    size_t len, cap;
    int oom;
} buf_t;

static void buf_printf(buf_t *b, const char *fmt, ...) {
    if (b->oom) return;
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(b->p + b->len, b->cap - b->len, fmt, ap);
        va_end(ap);
        if (n < 0) {
            b->oom = 1;
            return;
        }
        if ((size_t)n < b->cap - b->len) {
            b->len += (size_t)n;
            return;
        }
        size_t cap = (b->cap + (size_t)n) * 2;
        char *p = realloc(b->p, cap);
        if (!p) {
            b->oom = 1;
            return;
        }
        b->p = p;
        b->cap = cap;
    }
}

/* Label values escape backslash, double quote and newline (exposition format 0.0.4). */
static void buf_label(buf_t *b, const char *name, const char *v, int first) {
    buf_printf(b, "%s%s=\"", first ? "" : ",", name);
    for (const char *s = v ? v : ""; *s; s++) {
        if (*s == '\\')
            buf_printf(b, "\\\\");
        else if (*s == '"')
            buf_printf(b, "\\\"");
        else if (*s == '\n')
            buf_printf(b, "\\n");
        else
            buf_printf(b, "%c", *s);
    }
    buf_printf(b, "\"");
}

static void metric(buf_t *b, const char *name, const char *type, const char *help, double v) {
    buf_printf(b, "# HELP %s %s\n# TYPE %s %s\n%s %.17g\n", name, help, name, type, name, v);
}

/* The drift levels shown (the set being built is staged apart, so a scrape never sees half). */
static struct {
    pthread_mutex_t mu;
    int n, staged_n;
    char tenant[2][WORKER_METRICS_DRIFT_TENANTS][128];
    int level[2][WORKER_METRICS_DRIFT_TENANTS];
    long count[2][5]; /* tenants per drift_status_names[] */
} drift_levels = {.mu = PTHREAD_MUTEX_INITIALIZER};

/* drift_compare's statuses (migrations/004_drift.sql) */
static const char *const drift_status_names[5] = {"drift", "watch", "ok", "sparse", "no_baseline"};

void worker_metrics_drift_begin(void) {
    drift_levels.staged_n = 0; /* only the sink thread writes the staging half */
    memset(drift_levels.count[1], 0, sizeof(drift_levels.count[1]));
}

void worker_metrics_drift_count(const char *status, long tenants) {
    for (int i = 0; i < 5; i++)
        if (!strcmp(status, drift_status_names[i])) drift_levels.count[1][i] = tenants;
}

void worker_metrics_drift_put(const char *tenant, int level) {
    int i = drift_levels.staged_n;
    if (i >= WORKER_METRICS_DRIFT_TENANTS) return;
    snprintf(drift_levels.tenant[1][i], sizeof(drift_levels.tenant[1][i]), "%s", tenant);
    drift_levels.level[1][i] = level;
    drift_levels.staged_n = i + 1;
}

void worker_metrics_drift_end(void) {
    pthread_mutex_lock(&drift_levels.mu);
    memcpy(drift_levels.tenant[0], drift_levels.tenant[1], sizeof(drift_levels.tenant[0]));
    memcpy(drift_levels.level[0], drift_levels.level[1], sizeof(drift_levels.level[0]));
    memcpy(drift_levels.count[0], drift_levels.count[1], sizeof(drift_levels.count[0]));
    drift_levels.n = drift_levels.staged_n;
    pthread_mutex_unlock(&drift_levels.mu);
}

static void render_drift(buf_t *b, const char *model) {
    buf_printf(b, "# HELP reclass_drift_status Newest judged drift window per tenant, the worst "
                  "tenants first: 3 drift, 2 watch, 1 ok, 0 not judged (sparse, no baseline).\n"
                  "# TYPE reclass_drift_status gauge\n");
    pthread_mutex_lock(&drift_levels.mu);
    for (int i = 0; i < drift_levels.n; i++) {
        buf_printf(b, "reclass_drift_status{");
        buf_label(b, "tenant", drift_levels.tenant[0][i], 1);
        buf_label(b, "model", model, 0);
        buf_printf(b, "} %d\n", drift_levels.level[0][i]);
    }
    buf_printf(b, "# HELP reclass_drift_tenants Tenants per drift status of their newest judged "
                  "window, all of them.\n# TYPE reclass_drift_tenants gauge\n");
    for (int i = 0; i < 5; i++) {
        buf_printf(b, "reclass_drift_tenants{");
        buf_label(b, "model", model, 1);
        buf_label(b, "status", drift_status_names[i], 0);
        buf_printf(b, "} %ld\n", drift_levels.count[0][i]);
    }
    pthread_mutex_unlock(&drift_levels.mu);
}

/* Upper bounds of the latency buckets, seconds (+Inf follows). */
static const double latency_le[WORKER_METRICS_LATENCY_BUCKETS] = {
    0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60, 300, 1800, 7200};

static struct {
    pthread_mutex_t mu;
    int n;
    int lane[WORKER_METRICS_LATENCY_SERIES];
    char tenant[WORKER_METRICS_LATENCY_SERIES][128];
    long bucket[WORKER_METRICS_LATENCY_SERIES][WORKER_METRICS_LATENCY_BUCKETS + 1];
    double sum[WORKER_METRICS_LATENCY_SERIES];
    long count[WORKER_METRICS_LATENCY_SERIES];
} latency = {.mu = PTHREAD_MUTEX_INITIALIZER};

void worker_metrics_latency_reset(void) {
    pthread_mutex_lock(&latency.mu);
    latency.n = 0;
    pthread_mutex_unlock(&latency.mu);
}

/* The series of (lane, tenant), new when there is room, else -1. mu held. */
static int latency_series(int lane, const char *tenant) {
    for (int i = 0; i < latency.n; i++)
        if (latency.lane[i] == lane && !strcmp(latency.tenant[i], tenant)) return i;
    if (latency.n >= WORKER_METRICS_LATENCY_SERIES) return -1;
    int i = latency.n++;
    latency.lane[i] = lane;
    snprintf(latency.tenant[i], sizeof(latency.tenant[i]), "%s", tenant);
    memset(latency.bucket[i], 0, sizeof(latency.bucket[i]));
    latency.sum[i] = 0;
    latency.count[i] = 0;
    return i;
}

void worker_metrics_latency_observe(int lane, const char *tenant, double seconds) {
    if (seconds < 0) seconds = 0; /* the producer's clock ahead of ours */
    pthread_mutex_lock(&latency.mu);
    /* 8 series stay for the lanes' "_other" */
    int own = tenant && latency.n < WORKER_METRICS_LATENCY_SERIES - 8 && strlen(tenant) < 128;
    int i = -1;
    for (int k = 0; k < latency.n && i < 0; k++)
        if (latency.lane[k] == lane && !strcmp(latency.tenant[k], tenant ? tenant : "")) i = k;
    if (i < 0) i = latency_series(lane, own ? tenant : "_other");
    if (i >= 0) {
        int b = 0;
        while (b < WORKER_METRICS_LATENCY_BUCKETS && seconds > latency_le[b])
            b++;
        latency.bucket[i][b]++;
        latency.sum[i] += seconds;
        latency.count[i]++;
    }
    pthread_mutex_unlock(&latency.mu);
}

/* One series of a histogram: bucket[] holds the counts of each bound (not cumulative), the
 * last one +Inf; labels k1=v1 (and k2=v2 when k2). */
static void hist_series(buf_t *b, const char *name, const char *k1, const char *v1, const char *k2,
                        const char *v2, const double *le, int nb, const long *bucket, double sum,
                        long count) {
    long cum = 0;
    for (int k = 0; k <= nb; k++) {
        cum += bucket[k];
        buf_printf(b, "%s_bucket{", name);
        buf_label(b, k1, v1, 1);
        if (k2) buf_label(b, k2, v2, 0);
        if (k < nb)
            buf_printf(b, ",le=\"%g\"} %ld\n", le[k], cum);
        else
            buf_printf(b, ",le=\"+Inf\"} %ld\n", cum);
    }
    for (int k = 0; k < 2; k++) {
        buf_printf(b, "%s_%s{", name, k ? "count" : "sum");
        buf_label(b, k1, v1, 1);
        if (k2) buf_label(b, k2, v2, 0);
        if (k)
            buf_printf(b, "} %ld\n", count);
        else
            buf_printf(b, "} %.17g\n", sum);
    }
}

static void render_latency(buf_t *b) {
    buf_printf(b, "# HELP reclass_commit_latency_seconds Produce-to-commit latency of committed "
                  "tickets (enqueued_at to row commit), per lane and tenant.\n"
                  "# TYPE reclass_commit_latency_seconds histogram\n");
    pthread_mutex_lock(&latency.mu);
    for (int i = 0; i < latency.n; i++) {
        char lane[16];
        snprintf(lane, sizeof(lane), "%d", latency.lane[i]);
        hist_series(b, "reclass_commit_latency_seconds", "lane", lane, "tenant", latency.tenant[i],
                    latency_le, WORKER_METRICS_LATENCY_BUCKETS, latency.bucket[i], latency.sum[i],
                    latency.count[i]);
    }
    pthread_mutex_unlock(&latency.mu);
}

/* Upper bounds of the stage-wait buckets, seconds (+Inf follows): a stage takes from a
 * millisecond (an idle worker) to seconds (a backlog ahead). */
static const double wait_le[WORKER_METRICS_WAIT_BUCKETS] = {
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 60};
static const char *const wait_names[WORKER_WAIT_N] = {"poll", "accumulate", "encode", "sink"};

static struct {
    atomic_long bucket[WORKER_METRICS_WAIT_LANES][WORKER_WAIT_N][WORKER_METRICS_WAIT_BUCKETS + 1];
    atomic_llong sum_ms[WORKER_METRICS_WAIT_LANES][WORKER_WAIT_N];
} waits;

void worker_metrics_wait_observe(int lane, int stage, int64_t ms) {
    if (lane < 0 || lane >= WORKER_METRICS_WAIT_LANES || stage < 0 || stage >= WORKER_WAIT_N)
        return;
    if (ms < 0) ms = 0;
    int k = 0;
    while (k < WORKER_METRICS_WAIT_BUCKETS && (double)ms * 1e-3 > wait_le[k])
        k++;
    atomic_fetch_add_explicit(&waits.bucket[lane][stage][k], 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&waits.sum_ms[lane][stage], ms, memory_order_relaxed);
}

void worker_metrics_wait_reset(void) {
    for (int l = 0; l < WORKER_METRICS_WAIT_LANES; l++)
        for (int s = 0; s < WORKER_WAIT_N; s++) {
            atomic_store(&waits.sum_ms[l][s], 0);
            for (int k = 0; k <= WORKER_METRICS_WAIT_BUCKETS; k++)
                atomic_store(&waits.bucket[l][s][k], 0);
        }
}

static void render_waits(buf_t *b) {
    buf_printf(b, "# HELP reclass_ticket_wait_seconds Where tickets wait between poll and commit,"
                  " per lane and stage (poll: to the accumulator; accumulate: to a batch; encode:"
                  " to the sink queue; sink: to the row's commit).\n"
                  "# TYPE reclass_ticket_wait_seconds histogram\n");
    for (int l = 0; l < WORKER_METRICS_WAIT_LANES; l++)
        for (int s = 0; s < WORKER_WAIT_N; s++) {
            long bucket[WORKER_METRICS_WAIT_BUCKETS + 1], count = 0;
            for (int k = 0; k <= WORKER_METRICS_WAIT_BUCKETS; k++)
                count += bucket[k] =
                    atomic_load_explicit(&waits.bucket[l][s][k], memory_order_relaxed);
            if (!count) continue; /* a lane shows once a ticket of it passed the stage */
            char lane[16];
            snprintf(lane, sizeof(lane), "%d", l);
            double sum =
                (double)atomic_load_explicit(&waits.sum_ms[l][s], memory_order_relaxed) * 1e-3;
            hist_series(b, "reclass_ticket_wait_seconds", "lane", lane, "stage", wait_names[s],
                        wait_le, WORKER_METRICS_WAIT_BUCKETS, bucket, sum, count);
        }
}

#define LD(x) ((double)atomic_load_explicit(&m->x, memory_order_relaxed))

enum { MEM_USED, MEM_TOTAL, MEM_WEIGHTS, MEM_ARENA, MEM_ALLOCS };
/* Gauge MEM_* of worker_metrics_mem_t: a sample per encoder, labelled with it and its device. */
static void metric_mem(buf_t *b, const worker_metrics_t *m, int field, const char *name,
                       const char *help) {
    buf_printf(b, "# HELP %s %s\n# TYPE %s gauge\n", name, help, name);
    int n = atomic_load_explicit(&m->encoders, memory_order_relaxed);
    n = n < 1 ? 1 : n > WORKER_METRICS_ENCODERS ? WORKER_METRICS_ENCODERS : n;
    for (int i = 0; i < n; i++) {
        const worker_metrics_mem_t *g = &m->mem[i];
        const atomic_llong *v[] = {&g->device_used_bytes, &g->device_total_bytes, &g->weights_bytes,
                                   &g->arena_bytes, &g->allocations_after_init};
        buf_printf(b, "%s{encoder=\"%d\",device=\"%d\"} %.17g\n", name, i,
                   atomic_load_explicit(&g->device, memory_order_relaxed),
                   (double)atomic_load_explicit(v[field], memory_order_relaxed));
    }
}

char *worker_metrics_render(const worker_metrics_t *m, const worker_metrics_info_t *info,
                            int64_t now_ms) {
    buf_t b = {malloc(8192), 0, 8192, 0};
    if (!b.p) return NULL;
    b.p[0] = '\0';
    metric(&b, "reclass_tickets_consumed_total", "counter",
           "Records taken from Kafka for this worker to handle.", LD(tickets_consumed));
    metric(&b, "reclass_tickets_classified_total", "counter",
           "Tickets classified and committed to PostgreSQL.", LD(tickets_classified));
    metric(&b, "reclass_tickets_dead_lettered_total", "counter",
           "Records dead-lettered (undecodable, or refused by the database) and acknowledged.",
           LD(dead_lettered));
    metric(&b, "reclass_tickets_truncated_total", "counter",
           "Texts cut to the model's maximum length.", LD(truncated));
    metric(&b, "reclass_batches_total", "counter", "Encoder batches run.", LD(batches));
    metric(&b, "reclass_encoded_tokens_total", "counter", "Real (unpadded) tokens encoded.",
           LD(tokens));
    metric(&b, "reclass_encoder_seconds_total", "counter", "Seconds the backend spent on batches.",
           LD(encoder_ns) * 1e-9);
    metric(&b, "reclass_sink_commits_total", "counter",
           "PostgreSQL transactions of results committed.", LD(sink_commits));
    metric(&b, "reclass_sink_retries_total", "counter",
           "Result writes that met a lost connection and were retried.", LD(sink_retries));
    metric(&b, "reclass_consumer_pauses_total", "counter",
           "Times consumption was paused for backpressure.", LD(pauses));
    metric(&b, "reclass_consumer_holds_total", "counter",
           "Backlogs waited out without polling or pausing (backpressure under a second).",
           LD(holds));
    metric(&b, "reclass_drift_windows_flushed_total", "counter",
           "Drift windows written to drift_windows.", LD(drift_windows));
    metric(&b, "reclass_drift_windows_dropped_total", "counter",
           "Closed drift windows dropped unwritten (database unavailable too long).",
           LD(drift_dropped));
    metric(&b, "reclass_drift_folded_tickets_total", "counter",
           "Tickets counted under tenant _other because the window already held "
           "--drift-max-tenants tenants.",
           LD(drift_folded_tickets));
    metric(&b, "reclass_drift_folded_tenants", "gauge",
           "Tenants folded into _other in the last closed drift window (0: every tenant has its "
           "own row).",
           LD(drift_folded_tenants));
    metric(&b, "reclass_drift_memory_bytes", "gauge",
           "Bytes of the drift statistics (fixed at start by --drift-max-tenants).",
           LD(drift_memory_bytes));
    metric(&b, "reclass_gpu_memory_rows_total", "counter", "Rows written to gpu_memory.",
           LD(telemetry_rows));
    metric(&b, "reclass_telemetry_write_failures_total", "counter",
           "Telemetry (drift_windows, gpu_memory) writes that failed.", LD(telemetry_failures));
    metric(&b, "reclass_pending_items", "gauge", "Tickets waiting in the batch accumulator.",
           LD(pending_items));
    metric(&b, "reclass_pending_tokens", "gauge", "Tokens waiting in the batch accumulator.",
           LD(pending_tokens));
    metric(&b, "reclass_consumer_paused", "gauge", "1 while Kafka fetching is paused.",
           LD(consumer_paused));
    metric(&b, "reclass_partitions_assigned", "gauge", "Partitions this group member owns.",
           LD(partitions_assigned));
    metric(&b, "reclass_group_joined", "gauge", "1 once the consumer group was joined.",
           LD(group_joined));
    metric(&b, "reclass_sink_connected", "gauge", "1 while PostgreSQL accepts writes.",
           LD(sink_connected));
    metric(&b, "reclass_consumer_lag_records", "gauge",
           "Records in this member's partitions not yet fetched (from the last fetch's high "
           "watermarks).",
           LD(consumer_lag));
    metric(&b, "reclass_ready", "gauge", "1 while /readyz answers ready.",
           (double)worker_metrics_ready(m));
    metric(&b, "reclass_healthy", "gauge", "1 while /healthz answers ok.",
           (double)worker_metrics_healthy(m, now_ms));
    int64_t last = atomic_load_explicit(&m->last_poll_ms, memory_order_relaxed);
    metric(&b, "reclass_last_poll_age_seconds", "gauge",
           "Seconds since the poll loop last turned (-1 before it started).",
           last > 0 ? (double)(now_ms - last) * 1e-3 : -1.0);
    metric_mem(&b, m, MEM_USED, "reclass_device_used_bytes",
               "Device memory in use on the encoder's GPU (0 on the CPU backend).");
    metric_mem(&b, m, MEM_TOTAL, "reclass_device_total_bytes",
               "Device memory of the encoder's GPU (0 on the CPU backend).");
    metric_mem(&b, m, MEM_WEIGHTS, "reclass_weights_bytes",
               "Bytes of model weights held by the encoder's backend.");
    metric_mem(&b, m, MEM_ARENA, "reclass_arena_bytes",
               "Bytes of the encoder's activation arena, sized once from the token budget.");
    metric_mem(&b, m, MEM_ALLOCS, "reclass_allocations_after_init",
               "Device allocations the encoder made after start-up (stays 0 by construction).");
    metric(&b, "reclass_token_budget", "gauge", "Tokens per encoder batch.", LD(token_budget));
    metric(&b, "reclass_encoders", "gauge", "Encoder threads started, a backend instance each.",
           LD(encoders));
    metric(&b, "reclass_encoders_up", "gauge",
           "Encoders whose backend has not failed (one that fails stops; the others re-run its "
           "batches).",
           LD(encoders_up));
    buf_printf(&b, "# HELP reclass_stage_seconds_total Seconds spent per pipeline stage, by clock"
                   " (wall, or CPU of the threads that ran it).\n"
                   "# TYPE reclass_stage_seconds_total counter\n");
    for (int i = 0; i < WORKER_STAGE_N; i++)
        for (int k = 0; k < 2; k++)
            buf_printf(&b, "reclass_stage_seconds_total{stage=\"%s\",clock=\"%s\"} %.9g\n",
                       stage_names[i], k ? "cpu" : "wall",
                       (double)atomic_load_explicit(&m->stage_ns[i][k], memory_order_relaxed) *
                           1e-9);
    render_latency(&b);
    render_waits(&b);
    if (info) {
        render_drift(&b, info->model);
        buf_printf(&b, "# HELP reclass_info Constant 1, labelled with this worker's set-up.\n"
                       "# TYPE reclass_info gauge\nreclass_info{");
        buf_label(&b, "backend", info->backend, 1);
        buf_label(&b, "precision", info->precision, 0);
        buf_label(&b, "model", info->model, 0);
        buf_label(&b, "worker", info->worker, 0);
        buf_printf(&b, "} 1\n");
    }
    if (b.oom) {
        free(b.p);
        return NULL;
    }
    return b.p;
}
