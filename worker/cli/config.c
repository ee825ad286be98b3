#include "worker/cli/config.h"

#include <arpa/inet.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "worker/cli/cli.h"

/* One row per setting: the flag, its variable, and where it lands. */
typedef struct {
    const char *flag;
    const char *env;
    int is_int;
    size_t off;
    int min, max; /* for ints */
    const char *help;
} opt_t;

#define S(field)         0, offsetof(worker_run_cfg_t, field), 0, 0
#define I(field, lo, hi) 1, offsetof(worker_run_cfg_t, field), lo, hi

static const opt_t opts[] = {
    {"--brokers", "RECLASS_BROKERS", S(brokers),
     "Kafka bootstrap servers (default 127.0.0.1:9092)"},
    {"--topic", "RECLASS_TOPIC", S(topic), "topic the tickets arrive on (default tickets)"},
    {"--group", "RECLASS_GROUP", S(group), "consumer group id (default reclass)"},
    {"--db", "RECLASS_DB", S(db), "PostgreSQL URL or conninfo (required)"},
    {"--model", "RECLASS_MODEL", S(model), "Hugging Face checkpoint directory (required)"},
    {"--backend", "RECLASS_BACKEND", S(backend), "cpu or cuda (default cpu)"},
    {"--precision", "RECLASS_PRECISION", S(precision),
     "fp32 (cpu), fp16 or bf16 (cuda); default: the backend's"},
    {"--token-budget", "RECLASS_TOKEN_BUDGET", I(token_budget, 0, 1 << 24),
     "tokens per encoder batch (default 0 = 4096 on the cpu backend, 16384 on cuda)"},
    {"--max-wait-ms", "RECLASS_MAX_WAIT_MS", I(max_wait_ms, 0, 3600000),
     "longest a ticket waits for its batch to fill (default 200)"},
    {"--max-len", "RECLASS_MAX_LEN", I(max_len, 0, 1 << 20),
     "truncate texts to this many tokens (default: the model's maximum)"},
    {"--idle-exit", "RECLASS_IDLE_EXIT", I(idle_exit_s, 0, INT_MAX),
     "exit 0 after N seconds with nothing to do, everything committed (default 0 =\n"
     "      never); counted from the first assignment (joining a group can take a while)"},
    {"--join-timeout", "RECLASS_JOIN_TIMEOUT", I(join_timeout_s, 0, INT_MAX),
     "exit 1 when no partition assignment came within N seconds of start (default\n"
     "      120, 0 = wait forever); at least twice session.timeout.ms, since a group\n"
     "      re-assigns a killed member's partitions only once its session expired"},
    {"--dlq-topic", "RECLASS_DLQ_TOPIC", S(dlq_topic),
     "dead-letter topic for undecodable records (default <topic>.dlq)"},
    {"--threads", "RECLASS_THREADS", I(threads, 0, 1024),
     "CPU backend threads (default 0 = one per core)"},
    {"--device", "RECLASS_DEVICE", I(device, 0, 1024), "CUDA device ordinal (default 0)"},
    {"--schemas", "RECLASS_SCHEMAS", S(schemas),
     "directory of ticket-v<ID>.avsc schemas (default: the source tree's consumers/schemas)"},
    {"--max-pending", "RECLASS_MAX_PENDING", I(max_pending, 0, 1 << 24),
     "tickets waiting for a batch before consumption pauses (default 0 = 2048 on the\n"
     "      cpu backend, 32768 on cuda); also bounds the work a shutdown finishes"},
    {"--max-pending-tokens", "RECLASS_MAX_PENDING_TOKENS", I(max_pending_tokens, 0, 1 << 30),
     "tokens of the tickets waiting in the accumulator before consumption pauses\n"
     "      (default 0 = 8 token budgets)"},
    {"--sink-rows", "RECLASS_SINK_ROWS", I(sink_rows, 1, 1 << 20),
     "most rows per PostgreSQL transaction (default 8192)"},
    {"--log-every", "RECLASS_LOG_EVERY", I(log_every, 0, INT_MAX),
     "a progress line on stderr every N batches (default 50, 0 = none)"},
    {"--top-k", "RECLASS_TOP_K", I(top_k, 1, 64), "labels kept in top_k (default 3)"},
    {"--stats-json", "RECLASS_STATS_JSON", S(stats_json),
     "also write the exit statistics (JSON) to this file"},
    {"--http-port", "RECLASS_HTTP_PORT", I(http_port, 0, 65535),
     "serve /healthz, /readyz and /metrics (Prometheus) on this port (default 0 = off)"},
    {"--http-addr", "RECLASS_HTTP_ADDR", S(http_addr),
     "address the HTTP endpoints bind to (default 0.0.0.0; 127.0.0.1 = local only)"},
    {"--drift-window-s", "RECLASS_DRIFT_WINDOW_S", I(drift_window_s, 1, 86400),
     "length of a drift window (table drift_windows) in seconds (default 60)"},
    {"--drift-max-tenants", "RECLASS_DRIFT_MAX_TENANTS", I(drift_max_tenants, 1, 4096),
     "tenants tracked per drift window; further tenants are counted as _other\n"
     "      (default 64)"},
    {"--telemetry-interval-s", "RECLASS_TELEMETRY_INTERVAL_S", I(telemetry_interval_s, 1, 86400),
     "seconds between gpu_memory rows (also written at start and exit; default 10)"},
};
#define N_OPTS (int)(sizeof(opts) / sizeof(opts[0]))

void worker_run_cfg_usage(FILE *f) {
    fprintf(f, "usage: reclass run --db URL --model DIR [options]\n\n"
               "Consumes tickets (Avro) from a Kafka topic as a member of a consumer group,\n"
               "classifies them and writes the results to PostgreSQL. A record's offset is\n"
               "stored only after its row is committed (or its dead letter delivered), so a\n"
               "crash loses nothing and redelivery never counts twice. SIGTERM/SIGINT: finish\n"
               "in-flight batches, commit, leave the group, exit 0.\n\noptions (each with its "
               "environment variable; a flag beats its variable):\n");
    for (int i = 0; i < N_OPTS; i++) {
        char head[64];
        snprintf(head, sizeof(head), "%s %s", opts[i].flag, opts[i].is_int ? "N" : "VALUE");
        fprintf(f, "  %-22s $%s\n      %s\n", head, opts[i].env, opts[i].help);
    }
    fprintf(f, "  %-22s\n      %s\n", "--kafka K=V",
            "extra librdkafka property (repeatable), e.g. security.protocol=ssl");
    fprintf(f,
            "\nA second SIGTERM/SIGINT exits at once (status 1; nothing uncommitted is stored).\n"
            "At exit one JSON line of statistics goes to stdout: tickets, seconds (first\n"
            "record to last commit), tickets_per_s, encoder_seconds, non_encoder_share.\n"
            "With --http-port: GET /healthz (200 while the poll loop turns), /readyz (200\n"
            "once the group is joined and PostgreSQL is connected), /metrics (Prometheus).\n"
            "Drift statistics per window go to drift_windows, device memory samples to\n"
            "gpu_memory (migrations/003_telemetry.sql).\n");
}

static int set_opt(worker_run_cfg_t *cfg, const opt_t *o, const char *v, const char *from,
                   char *err, size_t errlen) {
    char *base = (char *)cfg;
    if (!o->is_int) {
        if (!*v) {
            snprintf(err, errlen, "%s is empty: give it a value", from);
            return 2;
        }
        *(const char **)(base + o->off) = v;
        return 0;
    }
    long x;
    if (worker_cli_long(v, o->min, o->max, &x) != 0) {
        snprintf(err, errlen, "%s: '%s' is not an integer in %d..%d", from, v, o->min, o->max);
        return 2;
    }
    *(int *)(base + o->off) = (int)x;
    return 0;
}

int worker_run_cfg_parse(worker_run_cfg_t *cfg, int argc, char **argv, char *err, size_t errlen) {
    memset(cfg, 0, sizeof(*cfg));
    cfg->brokers = "127.0.0.1:9092";
    cfg->topic = "tickets";
    cfg->group = "reclass";
    cfg->backend = "cpu";
    cfg->schemas = RECLASS_SOURCE_DIR "/consumers/schemas";
    cfg->max_wait_ms = 200;
    cfg->sink_rows = 8192;
    cfg->log_every = 50;
    cfg->top_k = 3;
    cfg->http_addr = "0.0.0.0";
    cfg->drift_window_s = 60;
    cfg->drift_max_tenants = 64;
    cfg->telemetry_interval_s = 10;
    cfg->join_timeout_s = 120;
    for (int i = 0; i < N_OPTS; i++) {
        const char *v = getenv(opts[i].env);
        if (v && *v) {
            int rc = set_opt(cfg, &opts[i], v, opts[i].env, err, errlen);
            if (rc) return rc;
        }
    }
    int n_props = 0;
    for (int a = 1; a < argc; a++) {
        const char *arg = argv[a];
        if (!strcmp(arg, "-h") || !strcmp(arg, "--help")) {
            worker_run_cfg_usage(stdout);
            return 1;
        }
        const char *eq = strchr(arg, '=');
        size_t name_len = eq ? (size_t)(eq - arg) : strlen(arg);
        const char *val = NULL;
        if (!strncmp(arg, "--kafka", name_len) && name_len == 7) {
            val = eq ? eq + 1 : (a + 1 < argc ? argv[++a] : NULL);
            if (!val || !strchr(val, '=')) {
                snprintf(err, errlen, "--kafka needs KEY=VALUE");
                return 2;
            }
            if (n_props == WORKER_RUN_MAX_KAFKA_PROPS) {
                snprintf(err, errlen, "at most %d --kafka properties", WORKER_RUN_MAX_KAFKA_PROPS);
                return 2;
            }
            cfg->kafka_props[n_props++] = val;
            continue;
        }
        const opt_t *o = NULL;
        for (int i = 0; i < N_OPTS; i++)
            if (strlen(opts[i].flag) == name_len && !strncmp(opts[i].flag, arg, name_len))
                o = &opts[i];
        if (!o) {
            snprintf(err, errlen, "unknown option '%s' (see reclass run --help)", arg);
            return 2;
        }
        val = eq ? eq + 1 : (a + 1 < argc ? argv[++a] : NULL);
        if (!val) {
            snprintf(err, errlen, "%s needs a value", o->flag);
            return 2;
        }
        int rc = set_opt(cfg, o, val, o->flag, err, errlen);
        if (rc) return rc;
    }
    if (!cfg->db) {
        snprintf(err, errlen, "no database: give --db URL or set RECLASS_DB");
        return 2;
    }
    if (!cfg->model) {
        snprintf(err, errlen, "no model: give --model DIR or set RECLASS_MODEL");
        return 2;
    }
    if (strcmp(cfg->backend, "cpu") && strcmp(cfg->backend, "cuda")) {
        snprintf(err, errlen, "--backend '%s': use cpu or cuda", cfg->backend);
        return 2;
    }
    if (!cfg->dlq_topic) {
        snprintf(cfg->dlq_buf, sizeof(cfg->dlq_buf), "%s.dlq", cfg->topic);
        cfg->dlq_topic = cfg->dlq_buf;
    }
    unsigned char addr[sizeof(struct in6_addr)];
    if (inet_pton(AF_INET, cfg->http_addr, addr) != 1 &&
        inet_pton(AF_INET6, cfg->http_addr, addr) != 1) {
        snprintf(err, errlen, "--http-addr '%s': give an IPv4 or IPv6 address (e.g. 0.0.0.0)",
                 cfg->http_addr);
        return 2;
    }
    long session_ms = 45000; /* librdkafka's default */
    for (int i = 0; i < n_props; i++)
        if (!strncmp(cfg->kafka_props[i], "session.timeout.ms=", 19))
            session_ms = atol(cfg->kafka_props[i] + 19);
    if (cfg->join_timeout_s > 0 && cfg->join_timeout_s * 1000L < 2 * session_ms) {
        snprintf(err, errlen,
                 "--join-timeout %d s is under twice session.timeout.ms (%ld ms): the group may "
                 "still be waiting for a dead member's session to expire; raise it or set 0",
                 cfg->join_timeout_s, session_ms);
        return 2;
    }
    if (!strcmp(cfg->dlq_topic, cfg->topic)) {
        snprintf(err, errlen, "--dlq-topic must differ from --topic (%s)", cfg->topic);
        return 2;
    }
    return 0;
}
