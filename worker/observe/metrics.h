/* Process-wide counters and gauges of `reclass run`, and the HTTP endpoints that expose them
 * (their own thread, worker/observe/metrics_http.c): /healthz, /readyz, /metrics (Prometheus
 * text 0.0.4).
 *
 * The pipeline's threads update worker_metrics with relaxed C11 atomics (no lock on the hot
 * path); the HTTP thread reads them. Values are process-wide: two pipelines in one process
 * (only tests do that) add into the same counters. */
#ifndef RECLASS_WORKER_METRICS_H
#define RECLASS_WORKER_METRICS_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "common/err.h"

/* The stages of a ticket's way through `reclass run`, each timed on the threads that run it in
 * wall and CPU seconds (CLOCK_THREAD_CPUTIME_ID), summed over those threads (tokenize and
 * score run on the pool): where the host's time goes, next to the backend's. */
typedef enum {
    WORKER_STAGE_POLL,     /* Kafka poll, offset tracking, queueing, dead letters (poll thread) */
    WORKER_STAGE_DECODE,   /* Avro decode, validation (on the pool) */
    WORKER_STAGE_TOKENIZE, /* text -> ids (on the pool) */
    WORKER_STAGE_ACCUM,    /* pushes into and batches out of the accumulator */
    WORKER_STAGE_PACK,     /* ids + cu_seqlens into the engine's staging */
    WORKER_STAGE_SUBMIT,   /* backend submit: H2D and launches (the whole forward on cpu) */
    WORKER_STAGE_COLLECT,  /* backend collect: waiting for the device, D2H */
    WORKER_STAGE_SCORE,    /* softmax, label, top-k JSON */
    WORKER_STAGE_ROWS,     /* results queued, made sink rows, offsets marked, prefix stored */
    WORKER_STAGE_COPY,     /* PostgreSQL: COPY, upsert, progress, COMMIT */
    WORKER_STAGE_N
} worker_stage_id_t;

/* "poll", "tokenize", ...: the stage's label on /metrics and key in the stats JSON. */
const char *worker_stage_name(int stage);

/* Device memory of one encoder: its backend's mem_stats, as of its last batch. */
#define WORKER_METRICS_ENCODERS 256 /* --encoders (16) on each of --devices (16) */
typedef struct {
    atomic_int device; /* the device it runs on (a CUDA ordinal; 0 on cpu) */
    atomic_llong device_used_bytes;
    atomic_llong device_total_bytes;
    atomic_llong weights_bytes;
    atomic_llong arena_bytes;
    atomic_llong allocations_after_init; /* must stay 0: the GPU cannot OOM by construction */
} worker_metrics_mem_t;

typedef struct {
    /* counters (only ever grow) */
    atomic_long tickets_consumed;     /* records taken from Kafka for this worker to handle */
    atomic_long tickets_classified;   /* rows committed to PostgreSQL */
    atomic_long dead_lettered;        /* records acknowledged by the dead-letter topic */
    atomic_long truncated;            /* texts cut to the model's maximum length */
    atomic_long batches;              /* encoder batches run */
    atomic_long tokens;               /* real tokens encoded */
    atomic_llong encoder_ns;          /* time inside the backend's forward */
    atomic_long sink_commits;         /* PostgreSQL transactions of results committed */
    atomic_long sink_retries;         /* writes refused by a lost connection and retried */
    atomic_long pauses;               /* times consumption was paused (backpressure) */
    atomic_long holds;                /* backlogs waited out without a pause (backpressure) */
    atomic_long drift_windows;        /* drift windows written to drift_windows */
    atomic_long drift_dropped;        /* closed windows dropped unwritten (database down) */
    atomic_long drift_folded_tickets; /* tickets counted in "_other": past --drift-max-tenants */
    atomic_long drift_folded_tenants; /* gauge: tenants folded into "_other" in the last window */
    atomic_long drift_memory_bytes;   /* gauge: the drift statistics' whole allocation */
    atomic_long telemetry_rows;       /* gpu_memory rows written */
    atomic_long telemetry_failures;   /* drift/gpu_memory writes that failed */
    /* gauges */
    atomic_long pending_items;      /* tickets waiting in the accumulator */
    atomic_long pending_tokens;     /* their tokens */
    atomic_long consumer_lag;       /* records past the fetch position in owned partitions */
    atomic_int consumer_paused;     /* 1 while fetching is paused */
    atomic_int partitions_assigned; /* partitions this member owns now */
    atomic_int group_joined;        /* 1 once the first rebalance was served */
    atomic_int sink_connected;      /* 1 while PostgreSQL takes writes */
    atomic_llong last_poll_ms;      /* common_now_ms() of the poll loop's last turn; 0 = none */
    /* each encoder's backend mem_stats, as of its last batch: mem[0 .. encoders - 1] (mem[0]
     * while encoders is 0) */
    worker_metrics_mem_t mem[WORKER_METRICS_ENCODERS];
    atomic_int token_budget;
    atomic_int encoders;    /* encoder threads started (--encoders on each of --devices) */
    atomic_int encoders_up; /* of them, those whose backend has not failed */
    /* per stage, nanoseconds: [stage][0] wall, [stage][1] CPU of the threads that ran it */
    atomic_llong stage_ns[WORKER_STAGE_N][2];
    /* tickets of each lane (worker/pipeline/fair.h) taken from Kafka and not yet written or
     * dropped: while a lane has some, the less urgent lanes' topics are held */
    atomic_long lane_live[8];
} worker_metrics_t;

extern worker_metrics_t worker_metrics;

/* Zeroes every counter and gauge (tests). */
void worker_metrics_reset(worker_metrics_t *m);

static inline void worker_metrics_add(atomic_long *c, long n) {
    atomic_fetch_add_explicit(c, n, memory_order_relaxed);
}

/* A stage timer: begin reads both clocks; end adds the time since to stage's counters and
 * restarts the timer, so consecutive stages chain. */
typedef struct {
    int64_t wall_ns, cpu_ns;
} worker_stage_clock_t;

void worker_stage_begin(worker_stage_clock_t *c);
void worker_stage_end(worker_stage_clock_t *c, int stage);

/* reclass_drift_status{tenant,model}: tenants' newest judged drift window (3 drift, 2 watch, 1
 * ok, 0 not judged), the worst first as drift_status (migration 009) ranks them, and
 * reclass_drift_tenants{model,status}: how many tenants have each status, over all of them.
 * Replaced as a whole each time the worker reads drift_status after writing a window. At
 * most WORKER_METRICS_DRIFT_TENANTS tenants are kept (put them worst first). */
#define WORKER_METRICS_DRIFT_TENANTS 64
void worker_metrics_drift_begin(void); /* starts a new set; the old one shows until _end */
void worker_metrics_drift_put(const char *tenant, int level);
/* status: drift, watch, ok, sparse or no_baseline (others are ignored) */
void worker_metrics_drift_count(const char *status, long tenants);
void worker_metrics_drift_end(void);

/* reclass_commit_latency_seconds{lane,tenant}: a histogram of produce-to-commit latency (the
 * record's enqueued_at to its row's commit) of committed tickets, per lane (0 = the most urgent
 * topic) and tenant. The first WORKER_METRICS_LATENCY_SERIES (lane, tenant) pairs get a series
 * each; later ones are counted under tenant "_other". Any thread may observe. */
#define WORKER_METRICS_LATENCY_SERIES  64
#define WORKER_METRICS_LATENCY_BUCKETS 13
void worker_metrics_latency_observe(int lane, const char *tenant, double seconds);
void worker_metrics_latency_reset(void); /* tests */

/* reclass_ticket_wait_seconds{lane,stage}: a histogram of where a ticket's time goes between
 * its poll and its row's commit, on common/clock.h's clock, per lane (0 = the most urgent
 * topic, up to WORKER_METRICS_WAIT_LANES) and stage: "poll" (polled to pushed into the
 * accumulator: decode, tokenize, room), "accumulate" (pushed to taken into a batch), "encode"
 * (taken to scored and queued for the sink), "sink" (queued to its row's commit). Lock-free:
 * any thread may observe. */
typedef enum {
    WORKER_WAIT_POLL,
    WORKER_WAIT_ACCUMULATE,
    WORKER_WAIT_ENCODE,
    WORKER_WAIT_SINK,
    WORKER_WAIT_N
} worker_wait_stage_t;
#define WORKER_METRICS_WAIT_LANES   8
#define WORKER_METRICS_WAIT_BUCKETS 14
void worker_metrics_wait_observe(int lane, int stage, int64_t ms);
void worker_metrics_wait_reset(void); /* tests */

/* Strings shown as labels of reclass_info; copied by worker_http_start. */
typedef struct {
    const char *backend;
    const char *precision;
    const char *model;
    const char *worker; /* hostname:pid */
} worker_metrics_info_t;

/* Renders the Prometheus text exposition (format 0.0.4) of m into a new NUL-terminated buffer
 * (the caller frees it); info may be NULL. NULL when out of memory. */
char *worker_metrics_render(const worker_metrics_t *m, const worker_metrics_info_t *info,
                            int64_t now_ms);

/* Liveness: the poll loop turned within the last WORKER_METRICS_STALE_MS. */
#define WORKER_METRICS_STALE_MS 30000
int worker_metrics_healthy(const worker_metrics_t *m, int64_t now_ms);
/* Readiness: the group is joined (or partitions are assigned) and PostgreSQL is connected. */
int worker_metrics_ready(const worker_metrics_t *m);

typedef struct worker_http worker_http_t;

/* Serves m on addr:port (addr an IPv4 or IPv6 literal; port 0 = any free port) from
 * a thread of its own. COMMON_OK, or with e: COMMON_USAGE a bad address or port, COMMON_FATAL
 * when the socket cannot be bound or the thread started (or no memory). */
common_status_t worker_http_start(const char *addr, int port, const worker_metrics_t *m,
                                  const worker_metrics_info_t *info, worker_http_t **out,
                                  common_err_t *e);

/* The port actually bound (useful with port 0). */
int worker_http_port(const worker_http_t *h);

/* Stops the daemon (waits for its thread) and frees everything; NULL is fine. */
void worker_http_stop(worker_http_t *h);

#endif
