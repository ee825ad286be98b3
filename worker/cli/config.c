#include "worker/cli/config.h"

#include <arpa/inet.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "common/err.h"
#include "consumers/kafka_props.h"
#include "worker/cli/cli.h"
#include "worker/observe/drift.h"
#include "worker/pipeline/fair.h"

/* The options of `reclass run`, each with its variable, set into c (kafka: c->kafka_props):
 * its own rows, then the shared classification settings (worker/cli/settings_opts.c). */
#define RUN_N_OWN 31
_Static_assert(WORKER_RUN_N_OPTS == RUN_N_OWN + 8,
               "WORKER_RUN_N_OPTS: run's rows and the 8 shared");
void worker_run_cfg_opts(worker_run_cfg_t *c, cli_list_t *kafka,
                         cli_opt_t out[WORKER_RUN_N_OPTS + 1]) {
    const cli_opt_t t[] = {
        worker_cli_opt_brokers(&c->brokers),
        worker_cli_opt_topic(&c->topic, "T[:P],...",
                             "topic(s) the tickets arrive on; several, each with a priority\n"
                             "      (lower = more urgent; 0 when not given), are lanes: e.g.\n"
                             "      tickets.urgent:0,tickets:1 reads tickets only while no urgent\n"
                             "      ticket waits or is in flight"),
        {"group", CLI_STR, &c->group, 0, 0, "RECLASS_GROUP", NULL, "consumer group id", "reclass"},
        worker_cli_opt_db(&c->db, "PostgreSQL URL or conninfo (required)"),
        worker_cli_opt_model(&c->cls.model_dir, 1, 1, NULL),
        {"max-wait-ms", CLI_INT, &c->cls.max_wait_ms, 0, 3600000, "RECLASS_MAX_WAIT_MS", NULL,
         "longest a ticket waits for its batch to fill", "200"},
        {"idle-exit", CLI_INT, &c->idle_exit_s, 0, INT_MAX, "RECLASS_IDLE_EXIT", NULL,
         "exit 0 after N seconds with nothing to do, once the brokers say every assigned\n"
         "      partition is read to its end and everything is committed (0 = never);\n"
         "      counted from the first assignment (joining a group can take a while)",
         "0"},
        {"join-timeout", CLI_INT, &c->join_timeout_s, 0, INT_MAX, "RECLASS_JOIN_TIMEOUT", NULL,
         "exit 1 when no partition assignment came within N seconds of start (0 = wait\n"
         "      forever); at least twice session.timeout.ms, since a group re-assigns a\n"
         "      killed member's partitions only once its session expired",
         "120"},
        {"drain-db-wait", CLI_INT, &c->drain_db_wait_s, 0, 3600, "RECLASS_DRAIN_DB_WAIT", "S",
         "on SIGTERM with PostgreSQL down, retry it for S seconds, then stop without\n"
         "      those results: their offsets stay uncommitted, the next owner re-reads",
         "30"},
        {"dlq-topic", CLI_STR, &c->dlq_topic, 0, 0, "RECLASS_DLQ_TOPIC", NULL,
         "dead-letter topic for undecodable records (default: <topic>.dlq)", NULL},
        worker_cli_opt_schemas(&c->schemas),
        worker_cli_opt_plain_schema(
            &c->plain_schema,
            "writer schema of plain (unframed) Avro records (default: the oldest in --schemas\n"
            "      that the current one reads, so that a new schema never changes how they read)"),
        worker_cli_opt_registry(
            &c->schema_registry,
            "Confluent Schema Registry: framed records' schema ids are the registry's, writer\n"
            "      schemas fetched by id on first sight (cached); credentials from\n"
            "      RECLASS_SCHEMA_REGISTRY_USER_INFO / _TOKEN or --schema-registry-auth-file"),
        worker_cli_opt_registry_auth(&c->schema_registry_auth),
        worker_cli_opt_registry_ca(&c->schema_registry_ca),
        {"sink-rows", CLI_INT, &c->sink_rows, 1, 1 << 20, "RECLASS_SINK_ROWS", NULL,
         "most rows per PostgreSQL transaction", "8192"},
        {"sink-connections", CLI_INT, &c->sink_connections, 0, 64, "RECLASS_SINK_CONNECTIONS", NULL,
         "PostgreSQL connections writing results, each its own thread (0 = one per 4\n"
         "      threads, 1 to 4)",
         "0"},
        {"log-every", CLI_INT, &c->log_every, 0, INT_MAX, "RECLASS_LOG_EVERY", NULL,
         "a progress line on stderr every N batches (0 = none)", "50"},
        worker_cli_opt_top_k(&c->top_k, 1, 1, "labels kept in top_k"),
        {"stats-json", CLI_STR, &c->stats_json, 0, 0, "RECLASS_STATS_JSON", NULL,
         "also write the exit statistics (JSON) to this file", NULL},
        {"http-port", CLI_INT, &c->http_port, 0, 65535, "RECLASS_HTTP_PORT", NULL,
         "serve /healthz, /readyz and /metrics (Prometheus) on this port (0 = off)", "0"},
        {"http-addr", CLI_STR, &c->http_addr, 0, 0, "RECLASS_HTTP_ADDR", NULL,
         "address the HTTP endpoints bind to (127.0.0.1 = local only)", "0.0.0.0"},
        {"drift-window-s", CLI_INT, &c->drift_window_s, 1, 86400, "RECLASS_DRIFT_WINDOW_S", NULL,
         "length of a drift window (table drift_windows) in seconds", "60"},
        {"drift-max-tenants", CLI_INT, &c->drift_max_tenants, 1, 1048576,
         "RECLASS_DRIFT_MAX_TENANTS", NULL,
         "tenants tracked per drift window; further ones are folded into\n"
         "      _other (counted, logged, rows flagged overflow). Memory, fixed at start:\n"
         "      at most 4 x (288 + 8 x labels) bytes per tenant (counted as 4096 when\n"
         "      fewer), 7.3 MB at 4096 tenants and 20 labels; logged at start and\n"
         "      exported as reclass_drift_memory_bytes",
         CLS_STR(WORKER_DRIFT_MAX_TENANTS)},
        {"telemetry-interval-s", CLI_INT, &c->telemetry_interval_s, 1, 86400,
         "RECLASS_TELEMETRY_INTERVAL_S", NULL,
         "seconds between gpu_memory rows (also written at start and exit)", "10"},
        {"tenant-weight", CLI_STR, &c->tenant_weights, 0, 0, "RECLASS_TENANT_WEIGHTS", "T=W,...",
         "tenants' weights (1..1000; 1 when not given) in the deficit round robin that fills\n"
         "      batches: a tenant with records queued gets W/sum(W) of the encoded tokens",
         NULL},
        {"tenant-max-tokens", CLI_INT, &c->tenant_max_tokens, 0, 1 << 30,
         "RECLASS_TENANT_MAX_TOKENS", NULL,
         "tokens one tenant may hold in a lane of the accumulator (0 = half of\n"
         "      --max-pending-tokens); its next record then waits, and reading stops (but\n"
         "      for the most urgent lane) until its queued tickets make room",
         "0"},
        {"priority-step-ms", CLI_INT, &c->priority_step_ms, 0, 3600000, "RECLASS_PRIORITY_STEP_MS",
         NULL,
         "within a lane and tenant, a ticket of priority p (its record's priority field,\n"
         "      0..9, higher first) is due p steps earlier: it goes before lower priorities\n"
         "      that arrived less than that lead before it, never before older ones, so\n"
         "      none starves (0 = priority ignored)",
         "500"},
        {"encoders", CLI_INT, &c->encoders, 1, WORKER_RUN_MAX_ENCODERS, "RECLASS_ENCODERS", NULL,
         "encoder threads a device, each with its own backend instance (weights, arena,\n"
         "      two batches in flight), all fed from the one accumulator: a batch goes to\n"
         "      whichever is free. On the cpu backend they share --threads (each gets\n"
         "      threads/N); an encoder whose backend fails stops, and the others re-run its\n"
         "      batches",
         "1"},
        {"devices", CLI_STR, &c->devices, 0, 0, "RECLASS_DEVICES", "all|D,...",
         "GPUs this worker drives (cuda backend), --encoders on each; when given, it\n"
         "      supersedes --device (default: the one GPU --device names)",
         NULL},
        worker_cli_opt_kafka(kafka),
    };
    _Static_assert(sizeof(t) / sizeof(t[0]) == RUN_N_OWN, "RUN_N_OWN");
    memcpy(out, t, sizeof(t));
    int n = RUN_N_OWN + worker_cli_settings_opts(&c->cls, CLI_SET_ALL, 1, out + RUN_N_OWN);
    out[n] = (cli_opt_t){NULL, CLI_FLAG, NULL, 0, 0, NULL, NULL, NULL, NULL};
}

void worker_run_cfg_usage(FILE *f) {
    fprintf(f, "usage: reclass run --db URL --model DIR [options]\n\n"
               "Consumes tickets (Avro) from a Kafka topic as a member of a consumer group,\n"
               "classifies them and writes the results to PostgreSQL. A record's offset is\n"
               "stored only after its row is committed (or its dead letter delivered), so a\n"
               "crash loses nothing and redelivery never counts twice. SIGTERM/SIGINT: finish\n"
               "in-flight batches, commit, leave the group, exit 0.\n\noptions (each with its "
               "environment variable; a flag beats its variable):\n");
    worker_run_cfg_t c;
    cli_list_t kafka = {c.kafka_props, 0, WORKER_RUN_MAX_KAFKA_PROPS};
    cli_opt_t opts[WORKER_RUN_N_OPTS + 1];
    worker_run_cfg_opts(&c, &kafka, opts);
    worker_cli_print_opts(f, opts);
    fprintf(f,
            "\nA second SIGTERM/SIGINT exits at once (status 1; nothing uncommitted is stored).\n"
            "At exit one JSON line of statistics goes to stdout: tickets, seconds (first\n"
            "record to last commit), tickets_per_s, encoder_seconds, non_encoder_share.\n"
            "With --http-port: GET /healthz (200 while the poll loop turns), /readyz (200\n"
            "once the group is joined and PostgreSQL is connected), /metrics (Prometheus).\n"
            "Drift statistics per window go to drift_windows, device memory samples to\n"
            "gpu_memory (migrations/003_telemetry.sql).\n");
    /* librdkafka's own default, read from it (a copy would go stale with the library) */
    fprintf(f,
            "Kafka properties that --kafka does not set keep librdkafka's defaults, e.g.\n"
            "session.timeout.ms %ld (the bound of --join-timeout).\n",
            consumers_kafka_setting_long(NULL, "session.timeout.ms"));
}

/* --topic T[:P],...: names and priorities into cfg->topics / topic_prio. COMMON_OK, or COMMON_USAGE
 * with e. */
/* --devices all|D,...: into cfg->device_ids / device_all. COMMON_OK, or COMMON_USAGE with e. */
static common_status_t parse_devices(worker_run_cfg_t *cfg, common_err_t *e) {
    cfg->n_devices = 0;
    cfg->device_all = 0;
    if (!cfg->devices) return COMMON_OK;
    if (strcmp(cfg->cls.backend, "cuda"))
        return common_err_set(e, COMMON_USAGE,
                              "--devices names GPUs of the cuda backend; the %s backend runs "
                              "--encoders N on its one device",
                              cfg->cls.backend);
    if (!strcmp(cfg->devices, "all")) {
        cfg->device_all = 1;
        return COMMON_OK;
    }
    const char *p = cfg->devices;
    for (;;) {
        char *end = NULL;
        long d = strtol(p, &end, 10);
        if (end == p || d < 0 || d > 1024 || (*end && *end != ','))
            return common_err_set(e, COMMON_USAGE,
                                  "--devices '%s': give all or device ordinals, e.g. 0,1",
                                  cfg->devices);
        for (int i = 0; i < cfg->n_devices; i++)
            if (cfg->device_ids[i] == d)
                return common_err_set(e, COMMON_USAGE, "--devices '%s': device %ld twice",
                                      cfg->devices, d);
        if (cfg->n_devices == WORKER_RUN_MAX_DEVICES)
            return common_err_set(e, COMMON_USAGE, "--devices: at most %d devices",
                                  WORKER_RUN_MAX_DEVICES);
        cfg->device_ids[cfg->n_devices++] = (int)d;
        if (!*end) return COMMON_OK;
        p = end + 1;
    }
}

static common_status_t parse_topics(worker_run_cfg_t *cfg, common_err_t *e) {
    size_t n = strlen(cfg->topic);
    if (n >= sizeof(cfg->topic_buf)) {
        return common_err_set(e, COMMON_USAGE, "--topic: over %zu bytes",
                              sizeof(cfg->topic_buf) - 1);
    }
    memcpy(cfg->topic_buf, cfg->topic, n + 1);
    cfg->n_topics = 0;
    char *save = NULL;
    for (char *t = strtok_r(cfg->topic_buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        if (cfg->n_topics == WORKER_RUN_MAX_TOPICS) {
            return common_err_set(e, COMMON_USAGE, "--topic: at most %d topics",
                                  WORKER_RUN_MAX_TOPICS);
        }
        long prio = 0;
        char *colon = strchr(t, ':');
        if (colon) {
            *colon = 0;
            if (worker_cli_long(colon + 1, -1000000, 1000000, &prio)) {
                return common_err_set(
                    e, COMMON_USAGE,
                    "--topic %s: priority '%s' is not an integer (lower = more urgent)", t,
                    colon + 1);
            }
        }
        if (!*t) {
            return common_err_set(e, COMMON_USAGE, "--topic '%s': an empty topic name", cfg->topic);
        }
        cfg->topics[cfg->n_topics] = t;
        cfg->topic_prio[cfg->n_topics++] = (int)prio;
    }
    if (!cfg->n_topics) {
        return common_err_set(e, COMMON_USAGE, "--topic '%s': no topic in it", cfg->topic);
    }
    return COMMON_OK;
}

common_status_t worker_run_cfg_parse(worker_run_cfg_t *cfg, int argc, char **argv,
                                     common_err_t *e) {
    memset(cfg, 0, sizeof(*cfg));
    cli_list_t kafka = {cfg->kafka_props, 0, WORKER_RUN_MAX_KAFKA_PROPS};
    cli_opt_t opts[WORKER_RUN_N_OPTS + 1];
    worker_run_cfg_opts(cfg, &kafka, opts);
    common_status_t rc =
        worker_cli_parse_err("run", argc, argv, opts, worker_run_cfg_usage, NULL, e);
    if (rc) return rc;
    if (!cfg->db)
        return common_err_set(e, COMMON_USAGE, "no database: give --db URL or set RECLASS_DB");
    if (!cfg->cls.model_dir)
        return common_err_set(e, COMMON_USAGE, "no model: give --model DIR or set RECLASS_MODEL");
    if (strcmp(cfg->cls.backend, "cpu") && strcmp(cfg->cls.backend, "cuda"))
        return common_err_set(e, COMMON_USAGE, "--backend '%s': use cpu or cuda", cfg->cls.backend);
    if ((rc = parse_topics(cfg, e))) return rc;
    if ((rc = parse_devices(cfg, e))) return rc;
    if (cfg->tenant_weights && (rc = worker_fair_weights_parse(cfg->tenant_weights, NULL, e)))
        return rc;
    if ((rc = worker_cli_schemas_default(&cfg->schemas, cfg->schemas_buf, sizeof(cfg->schemas_buf),
                                         e)))
        return rc;
    if (!cfg->dlq_topic) {
        snprintf(cfg->dlq_buf, sizeof(cfg->dlq_buf), "%s.dlq", cfg->topics[0]);
        cfg->dlq_topic = cfg->dlq_buf;
    }
    unsigned char addr[sizeof(struct in6_addr)];
    if (inet_pton(AF_INET, cfg->http_addr, addr) != 1 &&
        inet_pton(AF_INET6, cfg->http_addr, addr) != 1)
        return common_err_set(e, COMMON_USAGE,
                              "--http-addr '%s': give an IPv4 or IPv6 address (e.g. 0.0.0.0)",
                              cfg->http_addr);
    if ((rc = consumers_kafka_props_check(cfg->kafka_props, e))) return rc;
    long session_ms = consumers_kafka_setting_long(cfg->kafka_props, "session.timeout.ms");
    if (cfg->join_timeout_s > 0 && cfg->join_timeout_s * 1000L < 2 * session_ms) {
        common_err_set(e, COMMON_USAGE,
                       "--join-timeout %d s is under twice session.timeout.ms (%ld ms)",
                       cfg->join_timeout_s, session_ms);
        common_err_detail(e,
                          "the group may still be waiting for a dead member's session to expire");
        common_err_hint(e, "raise it or set 0");
        return COMMON_USAGE;
    }
    for (int i = 0; i < cfg->n_topics; i++)
        if (!strcmp(cfg->dlq_topic, cfg->topics[i]))
            return common_err_set(e, COMMON_USAGE, "--dlq-topic must differ from --topic (%s)",
                                  cfg->topics[i]);
    return COMMON_OK;
}
