/* Settings of `reclass run`: every flag has an environment variable (RECLASS_*); a flag beats
 * its variable, the variable beats the default. */
#ifndef RECLASS_WORKER_CONFIG_H
#define RECLASS_WORKER_CONFIG_H

#include <stddef.h>
#include <stdio.h>

#define WORKER_RUN_MAX_KAFKA_PROPS 32
#define WORKER_RUN_MAX_TOPICS      8 /* CONSUMERS_MAX_TOPICS */

typedef struct {
    const char *brokers;    /* RECLASS_BROKERS, default 127.0.0.1:9092 */
    const char *topic;      /* RECLASS_TOPIC, default tickets: TOPIC[:PRIORITY],... */
    const char *group;      /* RECLASS_GROUP, default reclass */
    const char *db;         /* RECLASS_DB, required (libpq URL or conninfo) */
    const char *model;      /* RECLASS_MODEL, required (Hugging Face checkpoint directory) */
    const char *backend;    /* RECLASS_BACKEND, cpu | cuda, default cpu */
    const char *precision;  /* RECLASS_PRECISION, NULL = backend default */
    const char *dlq_topic;  /* RECLASS_DLQ_TOPIC, default <topic>.dlq */
    const char *schemas;    /* RECLASS_SCHEMAS, directory of ticket-v<ID>.avsc */
    int token_budget;       /* RECLASS_TOKEN_BUDGET, tokens per encoder batch; 0 = by backend */
    int max_wait_ms;        /* RECLASS_MAX_WAIT_MS, longest a ticket waits for a batch */
    int max_len;            /* RECLASS_MAX_LEN, 0 = the model's max positions */
    int idle_exit_s;        /* RECLASS_IDLE_EXIT, 0 = run until signalled */
    int join_timeout_s;     /* RECLASS_JOIN_TIMEOUT: no assignment by then = exit 1; 0 = wait */
    int threads;            /* RECLASS_THREADS, CPU backend threads, 0 = one per core */
    int device;             /* RECLASS_DEVICE, CUDA device ordinal */
    int max_pending;        /* RECLASS_MAX_PENDING, tickets waiting in the accumulator; 0 = auto */
    int max_pending_tokens; /* RECLASS_MAX_PENDING_TOKENS, their tokens; 0 = auto (pipeline.c) */
    int sink_rows;          /* RECLASS_SINK_ROWS, most rows per PostgreSQL transaction */
    int log_every;          /* RECLASS_LOG_EVERY, a progress line every N batches (0 = never) */
    int top_k;              /* RECLASS_TOP_K, labels kept in top_k */
    const char *stats_json; /* RECLASS_STATS_JSON, also write the exit stats line to this file */
    int http_port;          /* RECLASS_HTTP_PORT, /healthz /readyz /metrics; 0 = off */
    const char *http_addr;  /* RECLASS_HTTP_ADDR, bind address, default 0.0.0.0 */
    int drift_window_s;     /* RECLASS_DRIFT_WINDOW_S, drift window length, default 60 */
    int drift_max_tenants;  /* RECLASS_DRIFT_MAX_TENANTS, tenants per window, default 64 */
    int telemetry_interval_s;   /* RECLASS_TELEMETRY_INTERVAL_S, gpu_memory rows, default 10 */
    const char *tenant_weights; /* RECLASS_TENANT_WEIGHTS, T=W,... (worker/pipeline/fair.h) */
    int tenant_max_tokens;      /* RECLASS_TENANT_MAX_TOKENS, 0 = half the pending tokens */
    const char *kafka_props[WORKER_RUN_MAX_KAFKA_PROPS + 1]; /* --kafka K=V, NULL-ended */
    /* --topic parsed: names (into topic_buf) and priorities, lower = more urgent; n_topics 0
     * (a caller that sets topic itself): the one topic named by topic */
    const char *topics[WORKER_RUN_MAX_TOPICS];
    int topic_prio[WORKER_RUN_MAX_TOPICS];
    int n_topics;
    char topic_buf[1024];
    char dlq_buf[256]; /* backs the default dlq_topic */
} worker_run_cfg_t;

/* Fills cfg from the environment and argv (argv[0] is "run"). Returns 0; 2 with err saying
 * what to fix; 1 when --help was printed (the caller exits 0). The strings point into argv
 * or the environment. */
int worker_run_cfg_parse(worker_run_cfg_t *cfg, int argc, char **argv, char *err, size_t errlen);

void worker_run_cfg_usage(FILE *f);

#endif
