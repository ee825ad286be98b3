#include "consumers/producer.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <librdkafka/rdkafka.h>

#include "consumers/kafka_props.h"

/* Room beside the text: the ids (key and value), job id and tenant are counted by length;
 * this covers the rest. Avro: at most 16 fields of 10-byte varints and union indexes, 5 bytes
 * of Confluent framing; Kafka: a v2 record's header (36 bytes) and its batch's (61). */
#define PRODUCER_RECORD_OVERHEAD 512

/* The producer's message.max.bytes unless --kafka sets it: a ticket at the text cap with ids
 * at their cap fits. */
#define PRODUCER_MAX_MSG                                                                           \
    (CONSUMERS_TICKET_MAX_TEXT_BYTES + 4 * CONSUMERS_TICKET_MAX_ID_BYTES + PRODUCER_RECORD_OVERHEAD)

typedef struct {
    int64_t first_offset; /* lowest offset delivered to the partition */
    long count;           /* records delivered there */
} producer_part_t;

struct consumers_producer {
    rd_kafka_t *rk;
    char *brokers, *topic;
    long max_msg; /* the producer's message.max.bytes */
    consumers_producer_stats_t st;
    producer_part_t *parts; /* (n_parts), checked against the low watermarks at the end */
    int32_t n_parts;
    int out_of_memory;
    int fatal; /* a TLS or authentication failure: fatal_msg says which */
    char fatal_msg[512];
};

size_t consumers_producer_ticket_bytes(size_t text_len, size_t id_len, size_t job_len,
                                       size_t tenant_len) {
    return text_len + 2 * id_len + job_len + tenant_len + PRODUCER_RECORD_OVERHEAD;
}

/* A failed TLS handshake or login does not heal by retrying: remembered for check_topic. */
/* A failed TLS handshake or login does not heal by retrying: remembered for check_topic. */
static void on_error(rd_kafka_t *rk, int err, const char *reason, void *opaque) {
    (void)rk;
    consumers_producer_t *p = opaque;
    const char *hint = consumers_kafka_unrecoverable(err);
    if (!hint || p->fatal) return;
    p->fatal = 1;
    snprintf(p->fatal_msg, sizeof(p->fatal_msg), "%s: %s", hint, reason);
}

static void on_delivery(rd_kafka_t *rk, const rd_kafka_message_t *m, void *opaque) {
    (void)rk;
    consumers_producer_t *p = opaque;
    if (m->err) {
        if (p->st.failed++ == 0)
            snprintf(p->st.first_error, sizeof(p->st.first_error), "%s", rd_kafka_err2str(m->err));
        return;
    }
    p->st.delivered++;
    int32_t n = m->partition;
    if (n >= p->n_parts) {
        producer_part_t *grown = realloc(p->parts, sizeof(*grown) * (size_t)(n + 1));
        if (!grown) {
            p->out_of_memory = 1;
            return;
        }
        memset(grown + p->n_parts, 0, sizeof(*grown) * (size_t)(n + 1 - p->n_parts));
        p->parts = grown;
        p->n_parts = n + 1;
    }
    producer_part_t *sp = &p->parts[n];
    if (!sp->count++ || m->offset < sp->first_offset) sp->first_offset = m->offset;
}

void consumers_producer_free(consumers_producer_t *p) {
    if (!p) return;
    if (p->rk) rd_kafka_destroy(p->rk);
    free(p->parts);
    free(p->brokers);
    free(p->topic);
    free(p);
}

common_status_t consumers_producer_new(const char *brokers, const char *topic,
                                       const char *const *props, consumers_producer_t **out,
                                       common_err_t *e) {
    *out = NULL;
    consumers_producer_t *p = calloc(1, sizeof(*p));
    if (!p || !(p->brokers = strdup(brokers)) || !(p->topic = strdup(topic))) {
        consumers_producer_free(p);
        return common_err_set(e, COMMON_FATAL, "out of memory");
    }
    char why[512], max_msg[24];
    snprintf(max_msg, sizeof(max_msg), "%d", PRODUCER_MAX_MSG);
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    const char *fixed[][2] = {
        {"bootstrap.servers", brokers},
        {"enable.idempotence", "true"},
        {"acks", "all"},
        {"linger.ms", "20"}, /* fill batches: thousands of small records */
        {"batch.num.messages", "10000"},
        {"compression.type", "lz4"}, /* ticket text compresses well */
        {"message.timeout.ms", "120000"},
        {"message.max.bytes", max_msg},
        {"log_level", "4"},
    };
    for (size_t i = 0; i < sizeof(fixed) / sizeof(fixed[0]); i++)
        if (rd_kafka_conf_set(conf, fixed[i][0], fixed[i][1], why, sizeof(why))) {
            common_err_set(e, COMMON_USAGE, "%s", why);
            goto fail;
        }
    common_err_t pe;
    if (consumers_kafka_props_apply(conf, props, CONSUMERS_PROPS_PRODUCER, &pe)) {
        common_err_set(e, pe.code, "--kafka: %s", pe.message);
        goto fail;
    }
    p->max_msg = consumers_kafka_props_long(props, "message.max.bytes", PRODUCER_MAX_MSG);
    rd_kafka_conf_set_dr_msg_cb(conf, on_delivery);
    rd_kafka_conf_set_error_cb(conf, on_error);
    rd_kafka_conf_set_opaque(conf, p);
    if (!(p->rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, why, sizeof(why)))) {
        common_err_set(e, COMMON_USAGE, "%s", why);
        goto fail;
    }
    *out = p;
    return COMMON_OK;
fail:
    rd_kafka_conf_destroy(conf);
    consumers_producer_free(p);
    return COMMON_USAGE;
}

common_status_t consumers_producer_check_topic(consumers_producer_t *p, common_err_t *e) {
    rd_kafka_topic_t *rkt = rd_kafka_topic_new(p->rk, p->topic, NULL);
    rd_kafka_resp_err_t ke = RD_KAFKA_RESP_ERR_NO_ERROR;
    /* 1 s requests for up to 10 s, serving the error callback between them: a failed TLS
     * handshake or login shows there at once, while a request only times out */
    for (int attempt = 0; attempt < 10 && !p->fatal; attempt++) {
        const struct rd_kafka_metadata *md;
        ke = rd_kafka_metadata(p->rk, 0, rkt, &md, 1000);
        rd_kafka_poll(p->rk, 0);
        if (ke == RD_KAFKA_RESP_ERR__TIMED_OUT || ke == RD_KAFKA_RESP_ERR__TRANSPORT) continue;
        if (ke) break;
        ke = md->topic_cnt ? md->topics[0].err : RD_KAFKA_RESP_ERR__UNKNOWN_TOPIC;
        rd_kafka_metadata_destroy(md);
        if (ke != RD_KAFKA_RESP_ERR_LEADER_NOT_AVAILABLE) break;
        usleep(200 * 1000); /* a just auto-created topic has no leader for a moment */
    }
    rd_kafka_topic_destroy(rkt);
    if (p->fatal) return common_err_set(e, COMMON_FATAL, "%s", p->fatal_msg);
    if (!ke) return COMMON_OK;
    common_status_t code =
        ke == RD_KAFKA_RESP_ERR__TIMED_OUT || ke == RD_KAFKA_RESP_ERR__TRANSPORT ? COMMON_RETRY
        : ke == RD_KAFKA_RESP_ERR__UNKNOWN_TOPIC || ke == RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART
            ? COMMON_MISSING
            : COMMON_FATAL;
    return common_err_set(e, code, "topic %s on %s: %s", p->topic, p->brokers,
                          rd_kafka_err2str(ke));
}

/* The topic's max.message.bytes from DescribeConfigs: > 0, or 0 with why it is not known. */
static long topic_max_message_bytes(consumers_producer_t *p, char *why, size_t whylen) {
    char e[256];
    long v = 0;
    snprintf(why, whylen, "no answer in 15 s");
    rd_kafka_ConfigResource_t *res = rd_kafka_ConfigResource_new(RD_KAFKA_RESOURCE_TOPIC, p->topic);
    rd_kafka_AdminOptions_t *ao =
        rd_kafka_AdminOptions_new(p->rk, RD_KAFKA_ADMIN_OP_DESCRIBECONFIGS);
    rd_kafka_queue_t *q = rd_kafka_queue_new(p->rk);
    rd_kafka_AdminOptions_set_request_timeout(ao, 10000, e, sizeof(e));
    /* Any broker answers for a topic's configs; asking the one that leads its first partition
     * skips librdkafka's wait for a controller, which some brokers (librdkafka's mock
     * cluster behind `reclass dev-broker`) never name: a 10 s stall on every submit. */
    const rd_kafka_metadata_t *md = NULL;
    rd_kafka_topic_t *rkt = rd_kafka_topic_new(p->rk, p->topic, NULL);
    if (rkt && rd_kafka_metadata(p->rk, 0, rkt, &md, 5000) == RD_KAFKA_RESP_ERR_NO_ERROR && md &&
        md->topic_cnt == 1 && md->topics[0].partition_cnt > 0 &&
        md->topics[0].partitions[0].leader >= 0)
        rd_kafka_AdminOptions_set_broker(ao, md->topics[0].partitions[0].leader, e, sizeof(e));
    if (md) rd_kafka_metadata_destroy(md);
    if (rkt) rd_kafka_topic_destroy(rkt);
    rd_kafka_DescribeConfigs(p->rk, &res, 1, ao, q);
    rd_kafka_event_t *ev = rd_kafka_queue_poll(q, 15000);
    if (ev && rd_kafka_event_error(ev)) {
        snprintf(why, whylen, "%s", rd_kafka_event_error_string(ev));
    } else if (ev) {
        size_t n = 0, cn = 0;
        const rd_kafka_ConfigResource_t **rs = rd_kafka_DescribeConfigs_result_resources(
            rd_kafka_event_DescribeConfigs_result(ev), &n);
        const rd_kafka_ConfigEntry_t **ce = n ? rd_kafka_ConfigResource_configs(rs[0], &cn) : NULL;
        snprintf(why, whylen, "%s",
                 n && rd_kafka_ConfigResource_error(rs[0])
                     ? rd_kafka_ConfigResource_error_string(rs[0])
                     : "not among the topic's configs");
        for (size_t i = 0; i < cn && !v; i++) {
            const char *val = rd_kafka_ConfigEntry_value(ce[i]);
            if (strcmp(rd_kafka_ConfigEntry_name(ce[i]), "max.message.bytes") || !val) continue;
            char *end;
            errno = 0;
            long x = strtol(val, &end, 10);
            if (errno || end == val || *end || x <= 0)
                snprintf(why, whylen, "max.message.bytes '%s' is not a positive number", val);
            else
                v = x;
        }
    }
    if (ev) rd_kafka_event_destroy(ev);
    rd_kafka_queue_destroy(q);
    rd_kafka_AdminOptions_destroy(ao);
    rd_kafka_ConfigResource_destroy(res);
    return v;
}

size_t consumers_producer_record_limit(consumers_producer_t *p, int *reported, char *source,
                                       size_t sourcelen) {
    char why[256];
    long topic_max = topic_max_message_bytes(p, why, sizeof(why));
    *reported = topic_max > 0;
    if (topic_max > 0 && topic_max < p->max_msg) {
        snprintf(source, sourcelen, "topic %s's max.message.bytes", p->topic);
        return (size_t)topic_max;
    }
    if (topic_max > 0)
        snprintf(source, sourcelen, "the producer's message.max.bytes");
    else
        snprintf(source, sourcelen,
                 "the producer's message.max.bytes (%s does not report max.message.bytes of "
                 "topic %s: %s; a record over the broker's own limit fails at delivery)",
                 p->brokers, p->topic, why);
    return (size_t)p->max_msg;
}

common_status_t consumers_producer_send(consumers_producer_t *p, const char *key, void *buf,
                                        size_t len, const volatile sig_atomic_t *stop,
                                        common_err_t *e) {
    rd_kafka_resp_err_t ke;
    /* F_FREE: librdkafka frees buf once the message is done. */
    while ((ke = rd_kafka_producev(p->rk, RD_KAFKA_V_TOPIC(p->topic),
                                   RD_KAFKA_V_KEY(key, strlen(key)), RD_KAFKA_V_VALUE(buf, len),
                                   RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_FREE), RD_KAFKA_V_END)) ==
               RD_KAFKA_RESP_ERR__QUEUE_FULL &&
           !*stop)
        rd_kafka_poll(p->rk, 50);
    if (ke) {
        free(buf);
        return common_err_set(e, COMMON_FATAL, "cannot queue ticket %s: %s", key,
                              rd_kafka_err2str(ke));
    }
    rd_kafka_poll(p->rk, 0);
    return COMMON_OK;
}

long consumers_producer_wait(consumers_producer_t *p, int ms) {
    if (rd_kafka_outq_len(p->rk) > 0) rd_kafka_flush(p->rk, ms);
    return rd_kafka_outq_len(p->rk);
}

const consumers_producer_stats_t *consumers_producer_stats(const consumers_producer_t *p) {
    return &p->st;
}

common_status_t consumers_producer_check_retained(consumers_producer_t *p, common_err_t *e) {
    common_status_t st = COMMON_OK;
    if (p->out_of_memory)
        st = common_err_set(e, COMMON_FATAL, "out of memory tracking the delivered offsets");
    for (int32_t n = 0; !st && n < p->n_parts; n++) {
        const producer_part_t *sp = &p->parts[n];
        if (!sp->count) continue;
        int64_t low = 0, high = 0;
        rd_kafka_resp_err_t re =
            rd_kafka_query_watermark_offsets(p->rk, p->topic, n, &low, &high, 10000);
        if (!re && low <= sp->first_offset) continue;
        if (re) {
            st = common_err_set(e, COMMON_RETRY, "cannot check partition %d of %s is intact: %s", n,
                                p->topic, rd_kafka_err2str(re));
            break;
        }
        st = common_err_set(e, COMMON_FATAL,
                            "partition %d no longer holds the records at offsets %lld to %lld "
                            "(its earliest is now %lld): the broker deleted up to %lld of the "
                            "%ld tickets just delivered there",
                            n, (long long)sp->first_offset, (long long)low - 1, (long long)low,
                            (long long)(low - sp->first_offset), sp->count);
        common_err_detail(e, "retention or size limit; reclass dev-broker: --partition-mb");
    }
    return st;
}
