/* reclass submit: sends a CSV/JSONL file of tickets to Kafka as one bulk job.
 *
 * Two passes over the file: the first counts the job (every message carries job_total, which
 * is how the workers know a job is complete) and rejects bad input before anything is sent,
 * its largest record held against the largest the topic takes; the second produces
 * (consumers/producer.c), and the command waits for every delivery report. */
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/err.h"
#include "consumers/avro_codec.h"
#include "consumers/kafka_props.h"
#include "consumers/producer.h"
#include "consumers/schema_registry.h"
#include "consumers/ticket.h"
#include "sink/owner.h"
#include "sink/sink.h"
#include "worker/cli/cli.h"
#include "worker/submit/input.h"

#define SUBMIT_MAX_PROPS 32

typedef struct {
    const char *brokers, *topic, *job_id, *tenant, *text_col, *id_col, *schemas, *file, *db;
    const char *registry, *registry_auth, *registry_ca, *plain_schema;
    const char *lane;     /* urgent | bulk: the topic is <topic>.urgent or <topic> */
    char lane_topic[256]; /* backs topic for --lane urgent */
    int plain, priority, has_priority, progress;
    const char *props[SUBMIT_MAX_PROPS + 1]; /* --kafka K=V, NULL-ended */
    char schemas_buf[4096];                  /* backs the default schemas */
} submit_opts_t;

static volatile sig_atomic_t submit_stop;
static void on_signal(int sig) {
    (void)sig;
    submit_stop = 1;
}

/* The options, set into o (priority: into *priority, LONG_MIN when not given). */
#define SUBMIT_N_OPTS 17
static void submit_opts(submit_opts_t *o, long *priority, cli_list_t *props, int *no_progress,
                        cli_opt_t out[SUBMIT_N_OPTS + 1]) {
    const cli_opt_t t[] = {
        worker_cli_opt_brokers(&o->brokers),
        worker_cli_opt_topic(&o->topic, "T", "topic"),
        {"lane", CLI_STR, &o->lane, 0, 0, NULL, "urgent|bulk",
         "send to the urgent lane, topic <T>.urgent, or the bulk lane, topic T (default:\n"
         "      T); a worker run with --topic T.urgent:0,T:1 serves urgent tickets first",
         NULL},
        {"job-id", CLI_STR, &o->job_id, 0, 0, "RECLASS_JOB_ID", "J", "job id (required)", NULL},
        {"tenant", CLI_STR, &o->tenant, 0, 0, "RECLASS_TENANT", "X", "tenant (required)", NULL},
        {"text-column", CLI_STR, &o->text_col, 0, 0, NULL, "NAME",
         "CSV column / JSON key of the text", "text"},
        {"id-column", CLI_STR, &o->id_col, 0, 0, NULL, "NAME",
         "CSV column / JSON key of the ticket id (default: JSON \"id\", else the record\n"
         "      number)",
         NULL},
        {"priority", CLI_LONG, priority, -2147483647L, 2147483647L, NULL, "N",
         "priority field of every ticket (default: none)", NULL},
        {"plain-avro", CLI_FLAG, &o->plain, 0, 0, NULL, NULL,
         "plain Avro binary instead of the Confluent framing", NULL},
        worker_cli_opt_plain_schema(
            &o->plain_schema,
            "writer schema of --plain-avro records (default: the oldest in --schemas that the\n"
            "      current one reads; the workers must be given the same)"),
        worker_cli_opt_schemas(&o->schemas),
        worker_cli_opt_registry(
            &o->registry,
            "register the schema under <topic>-value in this Confluent Schema Registry and\n"
            "      frame the records with its id (credentials as for reclass run)"),
        worker_cli_opt_registry_auth(&o->registry_auth),
        worker_cli_opt_registry_ca(&o->registry_ca),
        worker_cli_opt_kafka(props),
        worker_cli_opt_db(
            &o->db, "PostgreSQL URL or conninfo: refuse, before sending, a job id another tenant "
                    "owns"),
        {"no-progress", CLI_FLAG, no_progress, 0, 0, NULL, NULL,
         "no progress bar (it is only drawn when stderr is a terminal)", NULL},
        {NULL, CLI_FLAG, NULL, 0, 0, NULL, NULL, NULL, NULL},
    };
    _Static_assert(sizeof(t) / sizeof(t[0]) == SUBMIT_N_OPTS + 1, "SUBMIT_N_OPTS");
    memcpy(out, t, sizeof(t));
}

static void usage(FILE *f) {
    fprintf(f, "usage: reclass submit --job-id J --tenant X [options] FILE.csv|FILE.jsonl\n\n"
               "Sends every ticket with non-empty text in FILE to Kafka as one bulk job (Avro,\n"
               "key = ticket id). CSV needs a header row; JSONL lines are objects like\n"
               "{\"text\": \"...\", \"id\": \"optional\"} (other keys are ignored).\n\n"
               "options (those with an environment variable: a flag beats its variable):\n");
    submit_opts_t o;
    long priority;
    int no_progress;
    cli_list_t props = {o.props, 0, SUBMIT_MAX_PROPS};
    cli_opt_t opts[SUBMIT_N_OPTS + 1];
    submit_opts(&o, &priority, &props, &no_progress, opts);
    worker_cli_print_opts(f, opts);
}

/* COMMON_OK, COMMON_DONE after --help, or COMMON_USAGE with the usage error printed. */
static common_status_t parse_opts(int argc, char **argv, submit_opts_t *o) {
    memset(o, 0, sizeof(*o));
    long priority = LONG_MIN;
    int no_progress = 0, first = 0;
    cli_list_t props = {o->props, 0, SUBMIT_MAX_PROPS};
    cli_opt_t opts[SUBMIT_N_OPTS + 1];
    submit_opts(o, &priority, &props, &no_progress, opts);
    common_status_t rc = worker_cli_parse("submit", argc, argv, opts, usage, &first);
    if (rc != COMMON_OK) return rc;
    o->progress = !no_progress && isatty(STDERR_FILENO);
    if (priority != LONG_MIN) {
        o->priority = (int)priority;
        o->has_priority = 1;
    }
    if (first != argc - 1) {
        common_logf(stderr, "give exactly one FILE.csv or FILE.jsonl (see --help)\n");
        return COMMON_USAGE;
    }
    o->file = argv[first];
    if (o->lane && !strcmp(o->lane, "urgent")) {
        snprintf(o->lane_topic, sizeof(o->lane_topic), "%s.urgent", o->topic);
        o->topic = o->lane_topic;
    } else if (o->lane && strcmp(o->lane, "bulk")) {
        common_logf(stderr, "--lane '%s': use urgent or bulk\n", o->lane);
        return COMMON_USAGE;
    }
    common_err_t e;
    if (worker_cli_schemas_default(&o->schemas, o->schemas_buf, sizeof(o->schemas_buf), &e)) {
        common_err_print(stderr, &e);
        return e.code;
    }
    const char *miss = !o->job_id ? "--job-id" : !o->tenant ? "--tenant" : NULL;
    if (miss) {
        common_logf(stderr, "%s is required\n", miss);
        return COMMON_USAGE;
    }
    if ((rc = consumers_kafka_props_check(o->props, &e))) {
        common_err_print(stderr, &e);
        return rc;
    }
    const char *bad =
        consumers_ticket_check_id("job_id", o->job_id, strlen(o->job_id), &e)   ? "--job-id"
        : consumers_ticket_check_id("tenant", o->tenant, strlen(o->tenant), &e) ? "--tenant"
                                                                                : NULL;
    if (bad) {
        char line[COMMON_ERR_LINE_MAX];
        common_logf(stderr, "%s: %s\n", bad, common_err_line(&e, line, sizeof(line)));
        return e.code;
    }
    return COMMON_OK;
}

/* ---- pass 2: produce ---- */

static void draw_progress(const consumers_producer_t *p, long total, int final) {
    static struct timespec last;
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    long ms = (now.tv_sec - last.tv_sec) * 1000 + (now.tv_nsec - last.tv_nsec) / 1000000;
    if (!final && ms < 100) return;
    last = now;
    const consumers_producer_stats_t *st = consumers_producer_stats(p);
    int width = 30, done = total ? (int)(width * st->delivered / total) : width;
    char bar[64];
    for (int i = 0; i < width; i++)
        bar[i] = i < done ? '#' : '-';
    bar[width] = '\0';
    fprintf(stderr, "\r[%s] %ld/%ld delivered", bar, st->delivered, total);
    if (st->failed) fprintf(stderr, ", %ld failed", st->failed);
    if (final) fputc('\n', stderr);
    fflush(stderr);
}

static int64_t now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Registers the current schema under <topic>-value (Confluent's TopicNameStrategy, what its
 * serializers and consumers expect) and frames the records with the registry's id. */
static common_status_t register_schema(const submit_opts_t *o, consumers_codec_t *codec) {
    char subject[512];
    if (o->plain) {
        common_logf(stderr, "--schema-registry needs the Confluent framing (drop "
                            "--plain-avro)\n");
        return COMMON_USAGE;
    }
    consumers_registry_cfg_t rc = {
        .url = o->registry, .ca_file = o->registry_ca, .auth_file = o->registry_auth};
    consumers_registry_t *r;
    common_err_t e;
    if (consumers_registry_open(&rc, &r, &e)) {
        common_err_print(stderr, &e);
        return e.code;
    }
    snprintf(subject, sizeof(subject), "%s-value", o->topic);
    char *txt = consumers_codec_reader_text(codec);
    int32_t id = -1;
    common_status_t res = txt ? consumers_registry_register(r, subject, txt, &id, &e)
                              : common_err_set(&e, COMMON_RETRY, "out of memory");
    free(txt);
    consumers_registry_free(r);
    if (res != COMMON_OK) {
        common_err_hint(&e, "nothing was sent");
        common_err_print(stderr, &e);
        return COMMON_FATAL;
    }
    consumers_codec_set_encode_id(codec, id);
    common_logf(stderr, "schema id %d under subject %s\n", (int)id, subject);
    return COMMON_OK;
}

static common_status_t produce_all(consumers_producer_t *p, consumers_codec_t *codec,
                                   const submit_opts_t *o, long total, long *sent) {
    worker_submit_input_t *in;
    common_err_t e;
    *sent = 0;
    if (worker_submit_input_open(o->file, o->text_col, o->id_col, &in, &e)) {
        common_err_print(stderr, &e);
        return e.code;
    }
    worker_submit_rec_t r;
    common_status_t rc = COMMON_OK;
    while (!submit_stop && (rc = worker_submit_input_next(in, &r, &e)) == COMMON_OK) {
        if (r.text_len == 0) continue;
        consumers_ticket_t t = {.job_id = (char *)o->job_id,
                                .tenant = (char *)o->tenant,
                                .ticket_id = (char *)r.id,
                                .text = (char *)r.text,
                                .text_len = r.text_len,
                                .job_total = (int32_t)total,
                                .enqueued_at_ms = now_ms(),
                                .priority = o->priority,
                                .has_priority = o->has_priority};
        void *buf;
        size_t len;
        if (consumers_codec_encode(codec, &t, !o->plain, &buf, &len, &e)) {
            char line[COMMON_ERR_LINE_MAX];
            common_logf(stderr, "line %ld: %s\n", r.line, common_err_line(&e, line, sizeof(line)));
            rc = COMMON_FATAL;
            break;
        }
        if (consumers_producer_send(p, r.id, buf, len, &submit_stop, &e)) {
            if (!submit_stop) common_err_print(stderr, &e);
            rc = COMMON_FATAL;
            break;
        }
        ++*sent;
        if (o->progress) draw_progress(p, total, 0);
    }
    if (submit_stop)
        rc = COMMON_FATAL;
    else if (rc == COMMON_DONE)
        rc = COMMON_OK;
    else if (rc == COMMON_USAGE)
        common_err_print(stderr, &e);
    worker_submit_input_free(in);
    return rc;
}

/* All or nothing: the largest record of the file against what the producer and the topic take,
 * before the first is sent. COMMON_OK, or COMMON_USAGE with the first line over the limit
 * printed (one more read of the file, only then). */
static common_status_t check_record_limit(consumers_producer_t *p, const submit_opts_t *o,
                                          const worker_submit_count_t *c) {
    char source[512];
    int reported;
    size_t limit = consumers_producer_record_limit(p, &reported, source, sizeof(source));
    if (!reported) common_logf(stderr, "records up to %zu bytes, %s\n", limit, source);
    size_t job = strlen(o->job_id), tenant = strlen(o->tenant);
    if (consumers_producer_ticket_bytes(c->largest_text, c->largest_id, job, tenant) <= limit)
        return COMMON_OK;
    long first = c->largest_line, over = 0;
    size_t need = 0;
    worker_submit_input_t *in;
    worker_submit_rec_t r;
    common_err_t e;
    if (worker_submit_input_open(o->file, o->text_col, o->id_col, &in, &e) == COMMON_OK) {
        while (worker_submit_input_next(in, &r, &e) == COMMON_OK) {
            size_t b = consumers_producer_ticket_bytes(r.text_len, strlen(r.id), job, tenant);
            if (r.text_len == 0 || b <= limit) continue;
            if (over++ == 0) first = r.line, need = b;
        }
        worker_submit_input_free(in);
    }
    common_logf(
        stderr,
        "%s: line %ld: the ticket's record takes up to %zu bytes, over the "
        "%zu bytes of %s (%ld such records); nothing was sent: shorten the texts or raise the "
        "topic's max.message.bytes\n",
        o->file, first, need, limit, source, over);
    return COMMON_USAGE;
}

common_status_t worker_cmd_submit(int argc, char **argv) {
    submit_opts_t o;
    common_status_t rc = parse_opts(argc, argv, &o);
    if (rc) return rc;
    if ((rc = worker_cli_require_kafka())) return rc;
    common_err_t e;
    if (o.db && (rc = sink_job_owner_check(o.db, o.job_id, o.tenant, &e))) {
        common_err_print(stderr, &e);
        return rc; /* COMMON_USAGE: another tenant's job, or a bad --db */
    }

    worker_submit_count_t cnt;
    char line[COMMON_ERR_LINE_MAX];
    if ((rc = worker_submit_input_count(o.file, o.text_col, o.id_col, &cnt, &e))) {
        common_err_print(stderr, &e);
        return rc;
    }
    long total = cnt.count;

    consumers_codec_t *codec;
    if ((rc = consumers_codec_init(o.schemas, &codec, &e))) {
        common_logf(stderr, "%s (set --schemas or RECLASS_SCHEMAS)\n",
                    common_err_line(&e, line, sizeof(line)));
        return rc;
    }
    if (o.plain_schema && (rc = consumers_codec_set_plain_schema(codec, o.plain_schema, &e))) {
        common_logf(stderr, "--plain-schema: %s\n", common_err_line(&e, line, sizeof(line)));
        consumers_codec_free(codec);
        return rc;
    }
    if (o.registry && (rc = register_schema(&o, codec)) != COMMON_OK) {
        consumers_codec_free(codec);
        return rc;
    }
    consumers_producer_t *p;
    if ((rc = consumers_producer_new(o.brokers, o.topic, o.props, &p, &e))) {
        common_err_print(stderr, &e);
        consumers_codec_free(codec);
        return rc;
    }
    struct sigaction sa = {.sa_handler = on_signal}, old_int, old_term;
    sigaction(SIGINT, &sa, &old_int);
    sigaction(SIGTERM, &sa, &old_term);

    long sent = 0;
    if ((rc = consumers_producer_check_topic(p, &e))) common_err_print(stderr, &e);
    if (rc == COMMON_OK) rc = check_record_limit(p, &o, &cnt);
    if (rc == COMMON_OK) rc = produce_all(p, codec, &o, total, &sent);
    /* Wait for every delivery report, even after a failure, so the counts are true. */
    while (consumers_producer_wait(p, 100) > 0)
        if (o.progress) draw_progress(p, total, 0);
    if (o.progress && rc != COMMON_USAGE) draw_progress(p, total, 1);
    const consumers_producer_stats_t st = *consumers_producer_stats(p);
    int lost = rc == COMMON_OK && !st.failed && consumers_producer_check_retained(p, &e);
    if (lost) common_err_print(stderr, &e);
    consumers_producer_free(p);
    consumers_codec_free(codec);
    sigaction(SIGINT, &old_int, NULL);
    sigaction(SIGTERM, &old_term, NULL);
    if (rc == COMMON_USAGE && sent == 0)
        return COMMON_USAGE; /* refused before sending: the message says why */

    if (cnt.empty) common_logf(stderr, "skipped %ld records with empty text\n", cnt.empty);
    if (st.failed) {
        common_logf(stderr, "%ld of %ld deliveries failed (first: %s)\n", st.failed, sent,
                    st.first_error);
        rc = COMMON_FATAL;
    }
    if (lost) {
        common_logf(
            stderr,
            "job %s incomplete: the broker deleted tickets it had "
            "acknowledged; give the topic more room and submit the file again with the same "
            "--job-id\n",
            o.job_id);
        return COMMON_FATAL;
    }
    if (rc == COMMON_OK && st.delivered == total) {
        printf("submitted %ld tickets of job %s to %s\n", total, o.job_id, o.topic);
        fflush(stdout);
        return COMMON_OK;
    }
    common_logf(stderr,
                "job %s incomplete: %ld of %ld tickets delivered%s; submit the "
                "file again with the same --job-id\n",
                o.job_id, st.delivered, total, submit_stop ? " (interrupted)" : "");
    return rc ? rc : COMMON_FATAL;
}
