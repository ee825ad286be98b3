/* kafka_tool: the few Kafka operations the integration tests need, through the librdkafka that
 * reclass itself links (so it speaks to every broker reclass speaks to). Test-only, not part
 * of the reclass binary.
 *
 *   kafka_tool create-topic -b BROKERS -t TOPIC -p N [-H CONFIG=VALUE]...
 *   kafka_tool produce -b BROKERS -t TOPIC [-p PARTITION] [-k KEY] [-H NAME=VALUE]... FILE...
 *   kafka_tool consume -b BROKERS -t TOPIC [-f FORMAT] [-T SECONDS]
 *   kafka_tool watermarks -b BROKERS -t TOPIC
 *
 * -X KEY=VALUE passes a librdkafka property to any command (e.g. -X debug=protocol). */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <librdkafka/rdkafka.h>

#define TOOL_MAX_KV     32 /* -H and -X each */
#define TOOL_TIMEOUT_MS 10000

typedef struct {
    const char *cmd;
    const char *brokers;
    const char *topic;
    int partition; /* -p: produce's target partition, create-topic's count; -1 unset */
    const char *key;
    const char *headers[TOOL_MAX_KV];
    int n_headers;
    const char *props[TOOL_MAX_KV];
    int n_props;
    const char *format;
    int timeout_s;
    char **files;
    int n_files;
} tool_opts_t;

static void tool_usage(FILE *f) {
    fprintf(
        f, "usage: kafka_tool COMMAND -b BROKERS -t TOPIC [options]\n\n"
           "  create-topic -p N [-H CONFIG=VALUE]...\n"
           "                             create TOPIC with N partitions (replication 1) and the\n"
           "                             -H topic configs, and wait until the metadata shows them\n"
           "  produce [-p P] [-k KEY] [-H NAME=VALUE]... FILE...\n"
           "                             one record per FILE, its bytes the value, to\n"
           "                             partition P (default: the partitioner's choice), with\n"
           "                             key KEY (default none) and the -H headers; acks=all;\n"
           "                             exit 1 if any record is not delivered\n"
           "  consume [-f FORMAT] [-T S] every record up to each partition's end, printed by\n"
           "                             FORMAT: %%p partition, %%o offset, %%k key, %%s value,\n"
           "                             %%S value bytes, %%h headers (NAME=VALUE,...), \\n, \\t\n"
           "                             (default '%%p\\t%%o\\t%%S\\t%%h\\n'); exit 1 if the ends\n"
           "                             are not reached in S seconds (default 30)\n"
           "  watermarks [-T S]          reads every partition to its end, then prints one line\n"
           "                             per partition: PARTITION LOW HIGH (its first offset\n"
           "                             and the one after its last record)\n\n"
           "  -X K=V                     a librdkafka property, for any command\n");
}

static int tool_parse_int(const char *s, int lo, int hi, int *out) {
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > hi) return -1;
    *out = (int)v;
    return 0;
}

static int tool_parse(int argc, char **argv, tool_opts_t *o) {
    memset(o, 0, sizeof(*o));
    o->partition = -1;
    o->timeout_s = 30;
    if (argc < 2 || argv[1][0] == '-') {
        tool_usage(stderr);
        return -1;
    }
    o->cmd = argv[1];
    int c;
    optind = 2;
    while ((c = getopt(argc, argv, "b:t:p:k:H:X:T:f:")) != -1) {
        switch (c) {
        case 'b':
            o->brokers = optarg;
            break;
        case 't':
            o->topic = optarg;
            break;
        case 'p':
            if (tool_parse_int(optarg, 0, 100000, &o->partition)) {
                fprintf(stderr, "kafka_tool: -p '%s': give a number 0..100000\n", optarg);
                return -1;
            }
            break;
        case 'T':
            if (tool_parse_int(optarg, 1, 3600, &o->timeout_s)) {
                fprintf(stderr, "kafka_tool: -T '%s': give seconds 1..3600\n", optarg);
                return -1;
            }
            break;
        case 'H':
        case 'X': {
            const char **list = c == 'H' ? o->headers : o->props;
            int *n = c == 'H' ? &o->n_headers : &o->n_props;
            if (!strchr(optarg, '=') || *n == TOOL_MAX_KV) {
                fprintf(stderr, "kafka_tool: -%c '%s': give NAME=VALUE (at most %d)\n", c, optarg,
                        TOOL_MAX_KV);
                return -1;
            }
            list[(*n)++] = optarg;
            break;
        }
        case 'k':
            o->key = optarg;
            break;
        case 'f':
            o->format = optarg;
            break;
        default:
            tool_usage(stderr);
            return -1;
        }
    }
    o->files = argv + optind;
    o->n_files = argc - optind;
    if (!o->brokers || !o->topic) {
        fprintf(stderr, "kafka_tool %s: give -b BROKERS and -t TOPIC\n", o->cmd);
        return -1;
    }
    return 0;
}

/* A client handle with the common settings; a consumer gets a throwaway group id that never
 * joins (the tool assigns partitions itself) and never commits. */
static rd_kafka_t *tool_client(const tool_opts_t *o, rd_kafka_type_t type, rd_kafka_conf_t *conf) {
    char e[512];
    const char *common[][2] = {
        {"bootstrap.servers", o->brokers},
        {"client.id", "kafka_tool"},
        {"log_level", "4"},
        {"allow.auto.create.topics", "false"}}; /* a missing topic is an error */
    const char *consumer[][2] = {{"group.id", "kafka_tool"},
                                 {"enable.auto.commit", "false"},
                                 {"enable.auto.offset.store", "false"},
                                 {"enable.partition.eof", "true"}};
    for (size_t i = 0; i < sizeof(common) / sizeof(common[0]); i++)
        if (rd_kafka_conf_set(conf, common[i][0], common[i][1], e, sizeof(e))) goto bad;
    for (size_t i = 0; type == RD_KAFKA_CONSUMER && i < sizeof(consumer) / sizeof(consumer[0]); i++)
        if (rd_kafka_conf_set(conf, consumer[i][0], consumer[i][1], e, sizeof(e))) goto bad;
    for (int i = 0; i < o->n_props; i++) {
        char key[256];
        const char *eq = strchr(o->props[i], '=');
        snprintf(key, sizeof(key), "%.*s", (int)(eq - o->props[i]), o->props[i]);
        if (rd_kafka_conf_set(conf, key, eq + 1, e, sizeof(e))) goto bad;
    }
    rd_kafka_t *rk = rd_kafka_new(type, conf, e, sizeof(e));
    if (rk) return rk;
bad:
    fprintf(stderr, "kafka_tool %s: %s\n", o->cmd, e);
    rd_kafka_conf_destroy(conf);
    return NULL;
}

/* The topic's partition count from the broker's metadata; -1 (with a message) if unknown. */
static int tool_partitions(const tool_opts_t *o, rd_kafka_t *rk, int quiet) {
    rd_kafka_topic_t *rkt = rd_kafka_topic_new(rk, o->topic, NULL);
    const struct rd_kafka_metadata *md = NULL;
    rd_kafka_resp_err_t re = rd_kafka_metadata(rk, 0, rkt, &md, TOOL_TIMEOUT_MS);
    int n = -1;
    if (re) {
        if (!quiet)
            fprintf(stderr, "kafka_tool %s: no metadata from %s: %s (is the broker running?)\n",
                    o->cmd, o->brokers, rd_kafka_err2str(re));
    } else if (md->topic_cnt != 1 || md->topics[0].err || md->topics[0].partition_cnt == 0) {
        if (!quiet)
            fprintf(stderr, "kafka_tool %s: topic %s: %s (create it first)\n", o->cmd, o->topic,
                    md->topic_cnt == 1 ? rd_kafka_err2str(md->topics[0].err) : "not found");
    } else {
        n = md->topics[0].partition_cnt;
    }
    if (md) rd_kafka_metadata_destroy(md);
    rd_kafka_topic_destroy(rkt);
    return n;
}

static int tool_create_topic(const tool_opts_t *o) {
    if (o->partition < 1) {
        fprintf(stderr, "kafka_tool create-topic: give -p N (partitions, at least 1)\n");
        return 1;
    }
    rd_kafka_t *rk = tool_client(o, RD_KAFKA_PRODUCER, rd_kafka_conf_new());
    if (!rk) return 1;
    char e[512];
    int rc = 1;
    rd_kafka_NewTopic_t *nt = rd_kafka_NewTopic_new(o->topic, o->partition, 1, e, sizeof(e));
    rd_kafka_queue_t *q = rd_kafka_queue_new(rk);
    rd_kafka_event_t *ev = NULL;
    if (!nt) {
        fprintf(stderr, "kafka_tool create-topic: %s\n", e);
        goto out;
    }
    for (int i = 0; i < o->n_headers; i++) {
        char name[256];
        const char *eq = strchr(o->headers[i], '=');
        snprintf(name, sizeof(name), "%.*s", (int)(eq - o->headers[i]), o->headers[i]);
        if (rd_kafka_NewTopic_set_config(nt, name, eq + 1)) {
            fprintf(stderr, "kafka_tool create-topic: -H %s: not accepted\n", o->headers[i]);
            goto out;
        }
    }
    rd_kafka_CreateTopics(rk, &nt, 1, NULL, q);
    ev = rd_kafka_queue_poll(q, 3 * TOOL_TIMEOUT_MS);
    if (!ev || rd_kafka_event_error(ev)) {
        fprintf(stderr, "kafka_tool create-topic: %s: %s (is the broker running?)\n", o->brokers,
                ev ? rd_kafka_event_error_string(ev) : "no answer in 30 s");
        goto out;
    }
    size_t n;
    const rd_kafka_topic_result_t **res =
        rd_kafka_CreateTopics_result_topics(rd_kafka_event_CreateTopics_result(ev), &n);
    if (n != 1 || rd_kafka_topic_result_error(res[0])) {
        fprintf(stderr, "kafka_tool create-topic: %s: %s\n", o->topic,
                n == 1 ? rd_kafka_topic_result_error_string(res[0]) : "no result");
        goto out;
    }
    /* a broker may answer before its metadata shows the topic: wait for that too */
    for (int i = 0; i < 100 && rc; i++) {
        if (tool_partitions(o, rk, 1) == o->partition)
            rc = 0;
        else
            usleep(100 * 1000);
    }
    if (rc)
        fprintf(stderr,
                "kafka_tool create-topic: %s created, but the metadata does not show %d "
                "partitions after 10 s\n",
                o->topic, o->partition);
out:
    if (ev) rd_kafka_event_destroy(ev);
    if (nt) rd_kafka_NewTopic_destroy(nt);
    rd_kafka_queue_destroy(q);
    rd_kafka_destroy(rk);
    return rc;
}

static void tool_on_delivery(rd_kafka_t *rk, const rd_kafka_message_t *m, void *opaque) {
    long *failed = opaque;
    if (!m->err) return;
    (*failed)++;
    fprintf(stderr, "kafka_tool produce: a record to partition %" PRId32 " failed: %s\n",
            m->partition, rd_kafka_err2str(m->err));
}

static char *tool_read_file(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    size_t cap = 4096, n = 0, got;
    char *buf = malloc(cap);
    while (buf && (got = fread(buf + n, 1, cap - n, f)) > 0) {
        n += got;
        if (n == cap) {
            char *b = realloc(buf, cap *= 2);
            if (!b) free(buf);
            buf = b;
        }
    }
    if (buf && ferror(f)) {
        free(buf);
        buf = NULL;
    }
    fclose(f);
    *len = n;
    return buf;
}

static int tool_produce(const tool_opts_t *o) {
    if (o->n_files == 0) {
        fprintf(stderr, "kafka_tool produce: give the FILEs whose bytes are the records\n");
        return 1;
    }
    long failed = 0;
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    char e[512];
    rd_kafka_conf_set(conf, "acks", "all", e, sizeof(e));
    rd_kafka_conf_set_dr_msg_cb(conf, tool_on_delivery);
    rd_kafka_conf_set_opaque(conf, &failed);
    rd_kafka_t *rk = tool_client(o, RD_KAFKA_PRODUCER, conf);
    if (!rk) return 1;
    int parts = tool_partitions(o, rk, 0), rc = 0;
    if (parts < 0 || o->partition >= parts) {
        if (parts >= 0)
            fprintf(stderr, "kafka_tool produce: %s has %d partitions, no partition %d\n", o->topic,
                    parts, o->partition);
        rd_kafka_destroy(rk);
        return 1;
    }
    rd_kafka_headers_t *hdrs = rd_kafka_headers_new(o->n_headers > 0 ? o->n_headers : 1);
    for (int i = 0; i < o->n_headers; i++) {
        const char *eq = strchr(o->headers[i], '=');
        rd_kafka_header_add(hdrs, o->headers[i], eq - o->headers[i], eq + 1, -1);
    }
    for (int i = 0; i < o->n_files && !rc; i++) {
        size_t len;
        char *val = tool_read_file(o->files[i], &len);
        if (!val) {
            fprintf(stderr, "kafka_tool produce: cannot read %s: %s\n", o->files[i],
                    strerror(errno));
            rc = 1;
            break;
        }
        rd_kafka_resp_err_t re;
        do {
            rd_kafka_headers_t *h = rd_kafka_headers_copy(hdrs); /* producev takes it */
            re = rd_kafka_producev(
                rk, RD_KAFKA_V_TOPIC(o->topic),
                RD_KAFKA_V_PARTITION(o->partition >= 0 ? o->partition : RD_KAFKA_PARTITION_UA),
                RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_FREE),
                RD_KAFKA_V_KEY(o->key, o->key ? strlen(o->key) : 0), RD_KAFKA_V_VALUE(val, len),
                RD_KAFKA_V_HEADERS(h), RD_KAFKA_V_END);
            if (re) rd_kafka_headers_destroy(h);
            if (re == RD_KAFKA_RESP_ERR__QUEUE_FULL) rd_kafka_poll(rk, 100);
        } while (re == RD_KAFKA_RESP_ERR__QUEUE_FULL);
        if (re) {
            fprintf(stderr, "kafka_tool produce: %s: %s\n", o->files[i], rd_kafka_err2str(re));
            free(val);
            rc = 1;
        }
        rd_kafka_poll(rk, 0);
    }
    rd_kafka_headers_destroy(hdrs);
    rd_kafka_flush(rk, 3 * TOOL_TIMEOUT_MS);
    int left = rd_kafka_outq_len(rk);
    if (left > 0)
        fprintf(stderr, "kafka_tool produce: %d record(s) undelivered after 30 s\n", left);
    if (left > 0 || failed > 0) rc = 1;
    if (!rc) fprintf(stderr, "kafka_tool produce: %d record(s) to %s\n", o->n_files, o->topic);
    rd_kafka_destroy(rk);
    return rc;
}

static void tool_print_headers(const rd_kafka_message_t *m) {
    rd_kafka_headers_t *h = NULL;
    if (rd_kafka_message_headers(m, &h) != RD_KAFKA_RESP_ERR_NO_ERROR) return;
    const char *name;
    const void *val;
    size_t len;
    for (size_t i = 0; !rd_kafka_header_get_all(h, i, &name, &val, &len); i++) {
        printf("%s%s=", i ? "," : "", name);
        if (val) fwrite(val, 1, len, stdout);
    }
}

/* One record by the consume format (see tool_usage). */
static void tool_print_record(const char *fmt, const rd_kafka_message_t *m) {
    for (const char *f = fmt; *f; f++) {
        if (*f == '\\' && (f[1] == 'n' || f[1] == 't')) {
            putchar(*++f == 'n' ? '\n' : '\t');
            continue;
        }
        if (*f != '%' || !f[1]) {
            putchar(*f);
            continue;
        }
        switch (*++f) {
        case 'p':
            printf("%" PRId32, m->partition);
            break;
        case 'o':
            printf("%" PRId64, m->offset);
            break;
        case 'S':
            printf("%zu", m->len);
            break;
        case 'k':
            if (m->key) fwrite(m->key, 1, m->key_len, stdout);
            break;
        case 's':
            if (m->payload) fwrite(m->payload, 1, m->len, stdout);
            break;
        case 'h':
            tool_print_headers(m);
            break;
        case '%':
            putchar('%');
            break;
        default:
            putchar('%'), putchar(*f);
        }
    }
}

/* Reads every partition from its start to its end, printing each record by the format unless
 * watermarks_only, then the watermarks as read: the first offset and the end (the offset after
 * the last record). The end is where the fetch answers say a partition ends (the consumer's
 * end-of-partition event), not the ListOffsets answer, which Tansu 0.6 gets wrong after a batch
 * of several records (the last batch's base offset + 1). */
static int tool_consume(const tool_opts_t *o, int watermarks_only) {
    rd_kafka_t *rk = tool_client(o, RD_KAFKA_CONSUMER, rd_kafka_conf_new());
    if (!rk) return 1;
    int parts = tool_partitions(o, rk, 0), rc = 1, left = parts;
    int64_t *low = malloc(sizeof(*low) * (size_t)(parts > 0 ? parts : 1));
    int64_t *high = malloc(sizeof(*high) * (size_t)(parts > 0 ? parts : 1));
    rd_kafka_topic_partition_list_t *l = rd_kafka_topic_partition_list_new(parts > 0 ? parts : 1);
    if (parts < 0 || !low || !high) goto out;
    for (int p = 0; p < parts; p++) {
        low[p] = high[p] = -1;
        rd_kafka_topic_partition_list_add(l, o->topic, p)->offset = RD_KAFKA_OFFSET_BEGINNING;
    }
    rd_kafka_resp_err_t re = rd_kafka_assign(rk, l);
    if (re) {
        fprintf(stderr, "kafka_tool %s: assign: %s\n", o->cmd, rd_kafka_err2str(re));
        goto out;
    }
    time_t deadline = time(NULL) + o->timeout_s;
    long records = 0;
    while (left > 0 && time(NULL) < deadline) {
        rd_kafka_message_t *m = rd_kafka_consumer_poll(rk, 200);
        if (!m) continue;
        int p = m->partition;
        if (p < 0 || p >= parts || high[p] >= 0) {
            /* another topic's error, or a partition already read to its end */
        } else if (m->err == RD_KAFKA_RESP_ERR__PARTITION_EOF) {
            high[p] = m->offset;
            if (low[p] < 0) low[p] = m->offset;
            left--;
        } else if (m->err) {
            fprintf(stderr, "kafka_tool %s: %s\n", o->cmd, rd_kafka_message_errstr(m));
        } else {
            if (low[p] < 0) low[p] = m->offset;
            if (!watermarks_only) tool_print_record(o->format ? o->format : "%p\t%o\t%S\t%h\n", m);
            records++;
        }
        rd_kafka_message_destroy(m);
    }
    if (left > 0) {
        fprintf(stderr, "kafka_tool %s: %d partition(s) of %s not read to the end in %d s\n",
                o->cmd, left, o->topic, o->timeout_s);
        goto out;
    }
    if (watermarks_only)
        for (int p = 0; p < parts; p++)
            printf("%d\t%" PRId64 "\t%" PRId64 "\n", p, low[p], high[p]);
    else
        fprintf(stderr, "kafka_tool consume: %ld record(s) from %s\n", records, o->topic);
    rc = 0;
out:
    fflush(stdout);
    rd_kafka_topic_partition_list_destroy(l);
    free(low);
    free(high);
    rd_kafka_consumer_close(rk);
    rd_kafka_destroy(rk);
    return rc;
}

int main(int argc, char **argv) {
    tool_opts_t o;
    if (argc == 2 && (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help"))) {
        tool_usage(stdout);
        return 0;
    }
    if (tool_parse(argc, argv, &o)) return 2;
    if (strcmp(o.cmd, "produce") && o.n_files > 0) {
        fprintf(stderr, "kafka_tool %s: unexpected argument '%s'\n", o.cmd, o.files[0]);
        return 2;
    }
    if (!strcmp(o.cmd, "create-topic")) return tool_create_topic(&o);
    if (!strcmp(o.cmd, "produce")) return tool_produce(&o);
    if (!strcmp(o.cmd, "consume")) return tool_consume(&o, 0);
    if (!strcmp(o.cmd, "watermarks")) return tool_consume(&o, 1);
    fprintf(stderr, "kafka_tool: unknown command '%s'\n", o.cmd);
    tool_usage(stderr);
    return 2;
}
