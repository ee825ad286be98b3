/* reclass submit: sends a CSV/JSONL file of tickets to Kafka as one bulk job.
 *
 * Two passes over the file: the first counts the job (every message carries job_total, which
 * is how the workers know a job is complete) and rejects bad input before anything is sent;
 * the second produces. The producer is idempotent with acks=all, so librdkafka's retries
 * neither lose nor duplicate a ticket, and the command waits for every delivery report. */
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <librdkafka/rdkafka.h>

#include "consumers/avro_codec.h"
#include "consumers/kafka_props.h"
#include "consumers/ticket.h"
#include "consumers/kafka_version.h"
#include "worker/cli/cli.h"
#include "worker/text/submit_input.h"

#define SUBMIT_MAX_PROPS 32

typedef struct {
    const char *brokers, *topic, *job_id, *tenant, *text_col, *id_col, *schemas, *file;
    const char *lane;     /* urgent | bulk: the topic is <topic>.urgent or <topic> */
    char lane_topic[256]; /* backs topic for --lane urgent */
    int plain, priority, has_priority, progress;
    const char *props[SUBMIT_MAX_PROPS + 1]; /* --kafka K=V, NULL-ended */
} submit_opts_t;

typedef struct {
    int64_t first_offset; /* lowest offset delivered to the partition */
    long count;           /* tickets delivered there */
} submit_part_t;

typedef struct {
    long delivered, failed, total;
    char first_error[256];
    submit_part_t *parts; /* (n_parts), checked against the low watermarks at the end */
    int32_t n_parts;
    int out_of_memory;
} submit_stats_t;

static volatile sig_atomic_t submit_stop;
static void on_signal(int sig) {
    (void)sig;
    submit_stop = 1;
}

/* The options, set into o (priority: into *priority, LONG_MIN when not given). */
#define SUBMIT_N_OPTS 12
static void submit_opts(submit_opts_t *o, long *priority, cli_list_t *props, int *no_progress,
                        cli_opt_t out[SUBMIT_N_OPTS + 1]) {
    const cli_opt_t t[] = {
        {"brokers", CLI_STR, &o->brokers, 0, 0, "RECLASS_BROKERS", "B",
         "bootstrap servers (default 127.0.0.1:9092)"},
        {"topic", CLI_STR, &o->topic, 0, 0, "RECLASS_TOPIC", "T", "topic (default tickets)"},
        {"lane", CLI_STR, &o->lane, 0, 0, NULL, "urgent|bulk",
         "send to the urgent lane, topic <T>.urgent, or the bulk lane, topic T (default:\n"
         "      T); a worker run with --topic T.urgent:0,T:1 serves urgent tickets first"},
        {"job-id", CLI_STR, &o->job_id, 0, 0, "RECLASS_JOB_ID", "J", "job id (required)"},
        {"tenant", CLI_STR, &o->tenant, 0, 0, "RECLASS_TENANT", "X", "tenant (required)"},
        {"text-column", CLI_STR, &o->text_col, 0, 0, NULL, "NAME",
         "CSV column / JSON key of the text (default text)"},
        {"id-column", CLI_STR, &o->id_col, 0, 0, NULL, "NAME",
         "CSV column / JSON key of the ticket id (default: JSON \"id\", else the record\n"
         "      number)"},
        {"priority", CLI_LONG, priority, -2147483647L, 2147483647L, NULL, "N",
         "priority field of every ticket (default: none)"},
        {"plain-avro", CLI_FLAG, &o->plain, 0, 0, NULL, NULL,
         "plain Avro binary instead of the Confluent framing"},
        {"schemas", CLI_STR, &o->schemas, 0, 0, "RECLASS_SCHEMAS", "DIR",
         "ticket-v<ID>.avsc directory (default: the source tree's consumers/schemas)"},
        {"kafka", CLI_KV, props, 0, 0, NULL, "K=V",
         "extra librdkafka property (repeatable), e.g. security.protocol=SSL"},
        {"no-progress", CLI_FLAG, no_progress, 0, 0, NULL, NULL,
         "no progress bar (it is only drawn when stderr is a terminal)"},
        {NULL, CLI_FLAG, NULL, 0, 0, NULL, NULL, NULL},
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

/* 0, 1 after --help, or 2 with the usage error printed. */
static int parse_opts(int argc, char **argv, submit_opts_t *o) {
    memset(o, 0, sizeof(*o));
    o->brokers = "127.0.0.1:9092";
    o->topic = "tickets";
    o->schemas = RECLASS_SOURCE_DIR "/consumers/schemas";
    o->text_col = "text";
    long priority = LONG_MIN;
    int no_progress = 0, first = 0;
    cli_list_t props = {o->props, 0, SUBMIT_MAX_PROPS};
    cli_opt_t opts[SUBMIT_N_OPTS + 1];
    submit_opts(o, &priority, &props, &no_progress, opts);
    int rc = worker_cli_parse("submit", argc, argv, opts, usage, &first);
    if (rc == 0) return 1;
    if (rc == 2) return 2;
    o->progress = !no_progress && isatty(STDERR_FILENO);
    if (priority != LONG_MIN) {
        o->priority = (int)priority;
        o->has_priority = 1;
    }
    if (first != argc - 1) {
        fprintf(stderr, "reclass submit: give exactly one FILE.csv or FILE.jsonl (see --help)\n");
        return 2;
    }
    o->file = argv[first];
    if (o->lane && !strcmp(o->lane, "urgent")) {
        snprintf(o->lane_topic, sizeof(o->lane_topic), "%s.urgent", o->topic);
        o->topic = o->lane_topic;
    } else if (o->lane && strcmp(o->lane, "bulk")) {
        fprintf(stderr, "reclass submit: --lane '%s': use urgent or bulk\n", o->lane);
        return 2;
    }
    const char *miss = !o->job_id ? "--job-id" : !o->tenant ? "--tenant" : NULL;
    if (miss) {
        fprintf(stderr, "reclass submit: %s is required\n", miss);
        return 2;
    }
    char err[256];
    if (consumers_ticket_check_id("job_id", o->job_id, strlen(o->job_id), err, sizeof(err)) ||
        consumers_ticket_check_id("tenant", o->tenant, strlen(o->tenant), err, sizeof(err))) {
        fprintf(stderr, "reclass submit: %s: %s\n", strstr(err, "job_id") ? "--job-id" : "--tenant",
                err);
        return 2;
    }
    return 0;
}

/* ---- pass 2: produce ---- */

static void on_delivery(rd_kafka_t *rk, const rd_kafka_message_t *m, void *opaque) {
    submit_stats_t *st = opaque;
    if (m->err) {
        if (st->failed++ == 0)
            snprintf(st->first_error, sizeof(st->first_error), "%s", rd_kafka_err2str(m->err));
    } else {
        st->delivered++;
        int32_t p = m->partition;
        if (p >= st->n_parts) {
            submit_part_t *grown = realloc(st->parts, sizeof(*grown) * (size_t)(p + 1));
            if (!grown) {
                st->out_of_memory = 1;
                return;
            }
            memset(grown + st->n_parts, 0, sizeof(*grown) * (size_t)(p + 1 - st->n_parts));
            st->parts = grown;
            st->n_parts = p + 1;
        }
        submit_part_t *sp = &st->parts[p];
        if (!sp->count++ || m->offset < sp->first_offset) sp->first_offset = m->offset;
    }
}

/* A broker deletes a partition's oldest records once it holds more than its retention allows
 * (or, for reclass dev-broker, --partition-mb): tickets delivered and already gone would never
 * be classified, so say so instead of reporting success. Returns 0, or 1 with the loss printed. */
static int check_retained(rd_kafka_t *rk, const submit_opts_t *o, const submit_stats_t *st) {
    int lost = st->out_of_memory;
    if (lost) fprintf(stderr, "reclass submit: out of memory tracking the delivered offsets\n");
    for (int32_t p = 0; p < st->n_parts; p++) {
        const submit_part_t *sp = &st->parts[p];
        if (!sp->count) continue;
        int64_t low = 0, high = 0;
        rd_kafka_resp_err_t e =
            rd_kafka_query_watermark_offsets(rk, o->topic, p, &low, &high, 10000);
        if (e) {
            fprintf(stderr, "reclass submit: cannot check partition %d of %s is intact: %s\n", p,
                    o->topic, rd_kafka_err2str(e));
            lost = 1;
        } else if (low > sp->first_offset) {
            fprintf(stderr,
                    "reclass submit: partition %d no longer holds the records at offsets %lld to "
                    "%lld (its earliest is now %lld): the broker deleted up to %lld of the %ld "
                    "tickets just delivered there (retention or size limit; reclass dev-broker: "
                    "--partition-mb)\n",
                    p, (long long)sp->first_offset, (long long)low - 1, (long long)low,
                    (long long)(low - sp->first_offset), sp->count);
            lost = 1;
        }
    }
    return lost;
}

static void draw_progress(const submit_stats_t *st, int final) {
    static struct timespec last;
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    long ms = (now.tv_sec - last.tv_sec) * 1000 + (now.tv_nsec - last.tv_nsec) / 1000000;
    if (!final && ms < 100) return;
    last = now;
    int width = 30, done = st->total ? (int)(width * st->delivered / st->total) : width;
    char bar[64];
    for (int i = 0; i < width; i++)
        bar[i] = i < done ? '#' : '-';
    bar[width] = '\0';
    fprintf(stderr, "\r[%s] %ld/%ld delivered", bar, st->delivered, st->total);
    if (st->failed) fprintf(stderr, ", %ld failed", st->failed);
    if (final) fputc('\n', stderr);
    fflush(stderr);
}

static rd_kafka_t *make_producer(const submit_opts_t *o, submit_stats_t *st) {
    char errstr[512];
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    const char *props[][2] = {
        {"bootstrap.servers", o->brokers},
        {"enable.idempotence", "true"},
        {"acks", "all"},
        {"linger.ms", "20"}, /* fill batches: thousands of small records */
        {"batch.num.messages", "10000"},
        {"compression.type", "lz4"}, /* ticket text compresses well */
        {"message.timeout.ms", "120000"},
        {"log_level", "4"},
    };
    for (size_t i = 0; i < sizeof(props) / sizeof(props[0]); i++)
        if (rd_kafka_conf_set(conf, props[i][0], props[i][1], errstr, sizeof(errstr))) {
            fprintf(stderr, "reclass submit: %s\n", errstr);
            rd_kafka_conf_destroy(conf);
            return NULL;
        }
    if (consumers_kafka_props_apply(conf, o->props, CONSUMERS_PROPS_ALL, errstr, sizeof(errstr))) {
        fprintf(stderr, "reclass submit: --kafka: %s\n", errstr);
        rd_kafka_conf_destroy(conf);
        return NULL;
    }
    rd_kafka_conf_set_dr_msg_cb(conf, on_delivery);
    rd_kafka_conf_set_opaque(conf, st);
    rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, errstr, sizeof(errstr));
    if (!rk) {
        fprintf(stderr, "reclass submit: %s\n", errstr);
        rd_kafka_conf_destroy(conf);
    }
    return rk;
}

/* Fails fast on an unreachable cluster or a missing topic instead of after message.timeout. */
static int check_topic(rd_kafka_t *rk, const submit_opts_t *o) {
    rd_kafka_topic_t *rkt = rd_kafka_topic_new(rk, o->topic, NULL);
    rd_kafka_resp_err_t err = RD_KAFKA_RESP_ERR_NO_ERROR;
    for (int attempt = 0; attempt < 5; attempt++) {
        const struct rd_kafka_metadata *md;
        err = rd_kafka_metadata(rk, 0, rkt, &md, 10000);
        if (err) break; /* transport trouble: retrying the same request is not faster */
        err = md->topic_cnt ? md->topics[0].err : RD_KAFKA_RESP_ERR__UNKNOWN_TOPIC;
        rd_kafka_metadata_destroy(md);
        if (!err || err != RD_KAFKA_RESP_ERR_LEADER_NOT_AVAILABLE) break;
        usleep(200 * 1000); /* a just auto-created topic has no leader for a moment */
    }
    rd_kafka_topic_destroy(rkt);
    if (err) {
        fprintf(stderr, "reclass submit: topic %s on %s: %s\n", o->topic, o->brokers,
                rd_kafka_err2str(err));
        return 1;
    }
    return 0;
}

static int64_t now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int produce_all(rd_kafka_t *rk, consumers_codec_t *codec, const submit_opts_t *o,
                       submit_stats_t *st, long *sent) {
    worker_submit_input_t *in;
    char err[512];
    *sent = 0;
    if (worker_submit_input_open(o->file, o->text_col, o->id_col, &in, err, sizeof(err))) {
        fprintf(stderr, "reclass submit: %s\n", err);
        return 2;
    }
    worker_submit_rec_t r;
    int rc = 0;
    while (!submit_stop && (rc = worker_submit_input_next(in, &r, err, sizeof(err))) == 1) {
        if (r.text_len == 0) continue;
        consumers_ticket_t t = {.job_id = (char *)o->job_id,
                                .tenant = (char *)o->tenant,
                                .ticket_id = (char *)r.id,
                                .text = (char *)r.text,
                                .text_len = r.text_len,
                                .job_total = (int32_t)st->total,
                                .enqueued_at_ms = now_ms(),
                                .priority = o->priority,
                                .has_priority = o->has_priority};
        void *buf;
        size_t len;
        if (consumers_codec_encode(codec, &t, !o->plain, &buf, &len, err, sizeof(err))) {
            fprintf(stderr, "reclass submit: line %ld: %s\n", r.line, err);
            rc = 1;
            break;
        }
        rd_kafka_resp_err_t e;
        /* F_FREE: librdkafka frees buf (malloc'd by the codec) once the message is done. */
        while ((e = rd_kafka_producev(
                    rk, RD_KAFKA_V_TOPIC(o->topic), RD_KAFKA_V_KEY(r.id, strlen(r.id)),
                    RD_KAFKA_V_VALUE(buf, len), RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_FREE),
                    RD_KAFKA_V_END)) == RD_KAFKA_RESP_ERR__QUEUE_FULL &&
               !submit_stop)
            rd_kafka_poll(rk, 50);
        if (e) {
            free(buf);
            if (!submit_stop)
                fprintf(stderr, "reclass submit: cannot queue ticket %s: %s\n", r.id,
                        rd_kafka_err2str(e));
            rc = 1;
            break;
        }
        ++*sent;
        rd_kafka_poll(rk, 0);
        if (o->progress) draw_progress(st, 0);
    }
    if (submit_stop)
        rc = 1;
    else if (rc == 2)
        fprintf(stderr, "reclass submit: %s\n", err);
    worker_submit_input_free(in);
    return rc;
}

int worker_cmd_submit(int argc, char **argv) {
    submit_opts_t o;
    int rc = parse_opts(argc, argv, &o);
    if (rc) return rc == 1 ? 0 : rc;
    if ((rc = consumers_kafka_require_version("submit"))) return rc;

    long total, empty;
    char cerr[512];
    if ((rc = worker_submit_input_count(o.file, o.text_col, o.id_col, &total, &empty, cerr,
                                        sizeof(cerr)))) {
        fprintf(stderr, "reclass submit: %s\n", cerr);
        return rc;
    }

    consumers_codec_t *codec;
    char err[512];
    if (consumers_codec_init(o.schemas, &codec, err, sizeof(err))) {
        fprintf(stderr, "reclass submit: %s (set --schemas or RECLASS_SCHEMAS)\n", err);
        return 1;
    }
    submit_stats_t st = {.total = total};
    rd_kafka_t *rk = make_producer(&o, &st);
    if (!rk) {
        consumers_codec_free(codec);
        return 2;
    }
    struct sigaction sa = {.sa_handler = on_signal}, old_int, old_term;
    sigaction(SIGINT, &sa, &old_int);
    sigaction(SIGTERM, &sa, &old_term);

    long sent = 0;
    rc = check_topic(rk, &o);
    if (rc == 0) rc = produce_all(rk, codec, &o, &st, &sent);
    /* Wait for every delivery report, even after a failure, so the counts are true. */
    while (rd_kafka_outq_len(rk) > 0) {
        rd_kafka_flush(rk, 100);
        if (o.progress) draw_progress(&st, 0);
    }
    if (o.progress) draw_progress(&st, 1);
    int lost = rc == 0 && !st.failed && check_retained(rk, &o, &st);
    free(st.parts);
    rd_kafka_destroy(rk);
    consumers_codec_free(codec);
    sigaction(SIGINT, &old_int, NULL);
    sigaction(SIGTERM, &old_term, NULL);

    if (empty) fprintf(stderr, "reclass submit: skipped %ld records with empty text\n", empty);
    if (st.failed) {
        fprintf(stderr, "reclass submit: %ld of %ld deliveries failed (first: %s)\n", st.failed,
                sent, st.first_error);
        rc = 1;
    }
    if (lost) {
        fprintf(stderr,
                "reclass submit: job %s incomplete: the broker deleted tickets it had "
                "acknowledged; give the topic more room and submit the file again with the same "
                "--job-id\n",
                o.job_id);
        return 1;
    }
    if (rc == 0 && st.delivered == total) {
        printf("submitted %ld tickets of job %s to %s\n", total, o.job_id, o.topic);
        fflush(stdout);
        return 0;
    }
    fprintf(stderr,
            "reclass submit: job %s incomplete: %ld of %ld tickets delivered%s; submit the "
            "file again with the same --job-id\n",
            o.job_id, st.delivered, total, submit_stop ? " (interrupted)" : "");
    return rc ? rc : 1;
}
