/* `reclass run`: the job pipeline, Kafka in, PostgreSQL out, nothing lost, nothing twice.
 *
 * The poll, encoder and sink threads share one lock; a pool of --threads threads
 * (worker/pipeline/pool.h) tokenizes and scores for them:
 *   poll (the caller's thread): consumes and tracks bursts of records, each decoded,
 *     validated and tokenized on the pool while the next is polled, then pushed in arrival
 *     order into the length-sorting accumulator; undecodable records go to the dead-letter topic;
 *     pauses the partitions when the accumulator is full or PostgreSQL is down, while it keeps
 *     polling;
 *   encoders (--encoders on each of --devices, one by default): each pops token-budgeted
 *     batches (when ready or at the oldest item's deadline; whichever encoder is free takes
 *     the next), runs its own backend instance, has the logits turned into label, confidence
 *     and top-k on the pool; one whose backend fails hands its batches to the others;
 *   sink (--sink-connections threads, a connection each): writes the results of one or more
 *     batches per transaction, in any order between writers; only after COMMIT are
 *     their offsets marked committed and the contiguous committed prefix stored to Kafka.
 *     A lost connection pauses consumption and retries the same rows after reconnecting
 *     with exponential backoff.
 * On revocation the revoked partitions' committed prefix is stored and their in-flight work is
 * dropped from offset tracking (rows may still be written: the upsert makes that harmless).
 * SIGTERM/SIGINT or --idle-exit: stop fetching, finish in-flight batches, store and commit
 * offsets, leave the group, exit 0.
 * Telemetry (worker/pipeline/telemetry.c): every thread bumps the atomics of
 * worker/observe/metrics.h, served by --http-port (/healthz /readyz /metrics); the sink thread also
 * owns the drift windows (worker/observe/drift.h) and writes them and the gpu_memory rows between
 * result transactions. */
#ifndef RECLASS_WORKER_PIPELINE_H
#define RECLASS_WORKER_PIPELINE_H

#include "worker/classify/settings.h"

/* The settings of `reclass run` (parsed by worker/cli/config.c). */
#define WORKER_RUN_MAX_KAFKA_PROPS 32
#define WORKER_RUN_MAX_TOPICS      8  /* CONSUMERS_MAX_TOPICS */
#define WORKER_RUN_MAX_ENCODERS    16 /* --encoders: encoder threads a device */
#define WORKER_RUN_MAX_DEVICES     16 /* --devices: GPUs one worker drives */

typedef struct {
    const char *brokers; /* RECLASS_BROKERS, default 127.0.0.1:9092 */
    const char *topic;   /* RECLASS_TOPIC, default tickets: TOPIC[:PRIORITY],... */
    const char *group;   /* RECLASS_GROUP, default reclass */
    const char *db;      /* RECLASS_DB, required (libpq URL or conninfo) */
    /* the classification settings: --model (RECLASS_MODEL, required), --backend,
     * --precision, --token-budget, --max-wait-ms, --max-len, --threads, --device,
     * --max-pending, --max-pending-tokens (their RECLASS_* variables) */
    cls_settings_t cls;
    const char *dlq_topic;       /* RECLASS_DLQ_TOPIC, default <topic>.dlq */
    const char *schemas;         /* RECLASS_SCHEMAS, directory of ticket-v<ID>.avsc */
    const char *plain_schema;    /* RECLASS_PLAIN_SCHEMA: plain records' writer; NULL = oldest */
    const char *schema_registry; /* RECLASS_SCHEMA_REGISTRY URL, NULL = local ids */
    const char *schema_registry_auth; /* RECLASS_SCHEMA_REGISTRY_AUTH_FILE */
    const char *schema_registry_ca;   /* RECLASS_SCHEMA_REGISTRY_CA */
    int idle_exit_s;                  /* RECLASS_IDLE_EXIT, 0 = run until signalled */
    int join_timeout_s;       /* RECLASS_JOIN_TIMEOUT: no assignment by then = exit 1; 0 = wait */
    int drain_db_wait_s;      /* RECLASS_DRAIN_DB_WAIT: after a signal, how long the sink retries a
                                 PostgreSQL that is down before stopping without those rows */
    int sink_rows;            /* RECLASS_SINK_ROWS, most rows per PostgreSQL transaction */
    int sink_connections;     /* RECLASS_SINK_CONNECTIONS, result writers, 0 = by threads */
    int log_every;            /* RECLASS_LOG_EVERY, a progress line every N batches (0 = never) */
    int top_k;                /* RECLASS_TOP_K, labels kept in top_k */
    const char *stats_json;   /* RECLASS_STATS_JSON, also write the exit stats line to this file */
    int http_port;            /* RECLASS_HTTP_PORT, /healthz /readyz /metrics; 0 = off */
    const char *http_addr;    /* RECLASS_HTTP_ADDR, bind address, default 0.0.0.0 */
    int drift_window_s;       /* RECLASS_DRIFT_WINDOW_S, drift window length, default 60 */
    int drift_max_tenants;    /* RECLASS_DRIFT_MAX_TENANTS, tenants per window, default 4096 */
    int telemetry_interval_s; /* RECLASS_TELEMETRY_INTERVAL_S, gpu_memory rows, default 10 */
    const char *tenant_weights; /* RECLASS_TENANT_WEIGHTS, T=W,... (worker/pipeline/fair.h) */
    int tenant_max_tokens;      /* RECLASS_TENANT_MAX_TOKENS, 0 = half the pending tokens */
    int priority_step_ms;       /* RECLASS_PRIORITY_STEP_MS (worker/pipeline/accum.h) */
    int encoders;               /* RECLASS_ENCODERS, encoder threads a device; 0 = 1 */
    const char *devices;        /* RECLASS_DEVICES, all|D,D,...: supersedes cls.device; NULL */
    /* --devices parsed: the ordinals (device_all: every device the backend counts at start);
     * n_devices 0 and no device_all: the one device cls.device */
    int device_ids[WORKER_RUN_MAX_DEVICES];
    int n_devices;
    int device_all;
    const char *kafka_props[WORKER_RUN_MAX_KAFKA_PROPS + 1]; /* --kafka K=V, NULL-ended */
    /* --topic parsed: names (into topic_buf) and priorities, lower = more urgent; n_topics 0
     * (a caller that sets topic itself): the one topic named by topic */
    const char *topics[WORKER_RUN_MAX_TOPICS];
    int topic_prio[WORKER_RUN_MAX_TOPICS];
    int n_topics;
    char topic_buf[1024];
    char dlq_buf[256];      /* backs the default dlq_topic */
    char schemas_buf[4096]; /* backs the default schemas */
} worker_run_cfg_t;

/* Runs until signalled, idle (cfg->idle_exit_s) or a fatal error. COMMON_OK clean; else the
 * status with e: a setup failure's (a bad setting COMMON_USAGE, a service away COMMON_RETRY, ...)
 * or the final commit's; a failure while running is COMMON_FATAL with e's message empty: its
 * lines went to stderr as it happened. */
common_status_t worker_pipeline_run(const worker_run_cfg_t *cfg, common_err_t *e);

/* What one run did (the exit JSON line, as numbers). */
typedef struct {
    long tickets;      /* rows committed */
    long dead_letters; /* delivered to the dead-letter topic */
    long truncated;
    long batches;
    long revoked_partitions; /* partitions taken away by rebalances (or at close) */
    long dropped_in_flight;  /* uncommitted records of revoked partitions left unstored */
    double seconds;          /* first record to last commit */
    double encoder_seconds;
    double non_encoder_share;
} worker_pipeline_stats_t;

/* worker_pipeline_run that also reports its statistics (stats may be NULL). */
common_status_t worker_pipeline_run_ex(const worker_run_cfg_t *cfg, worker_pipeline_stats_t *stats,
                                       common_err_t *e);

#endif
