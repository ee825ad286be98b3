#include "consumers/dlq.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct consumers_dlq {
    rd_kafka_t *rk;
    char *topic;
    consumers_dlq_done_fn done;
    void *ctx;
    long outstanding;
    long delivered;
};

static int produce(consumers_dlq_t *d, const void *key, size_t key_len, const void *val,
                   size_t val_len, rd_kafka_headers_t *hdrs, void *opaque, char *err,
                   size_t errlen) {
    /* producev takes hdrs on success only */
    rd_kafka_resp_err_t re = rd_kafka_producev(
        d->rk, RD_KAFKA_V_TOPIC(d->topic), RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY),
        RD_KAFKA_V_KEY(key, key_len), RD_KAFKA_V_VALUE((void *)val, val_len),
        RD_KAFKA_V_HEADERS(hdrs), RD_KAFKA_V_OPAQUE(opaque), RD_KAFKA_V_END);
    if (re) {
        snprintf(err, errlen, "dead letter to %s: %s", d->topic, rd_kafka_err2str(re));
        rd_kafka_headers_destroy(hdrs);
        return -1;
    }
    d->outstanding++;
    return 0;
}

static void dr_cb(rd_kafka_t *rk, const rd_kafka_message_t *m, void *opaque) {
    consumers_dlq_t *d = opaque;
    d->outstanding--;
    if (!m->err) {
        d->delivered++;
        if (d->done) d->done(d->ctx, m->_private);
        return;
    }
    /* never lose a dead letter: its source offset stays unstored until it is in Kafka */
    fprintf(stderr, "reclass run: dead letter delivery failed (%s), producing it again\n",
            rd_kafka_err2str(m->err));
    rd_kafka_headers_t *h = NULL, *copy = NULL;
    if (rd_kafka_message_headers(m, &h) == RD_KAFKA_RESP_ERR_NO_ERROR)
        copy = rd_kafka_headers_copy(h);
    char e[256];
    if (produce(d, m->key, m->key_len, m->payload, m->len, copy, m->_private, e, sizeof(e)))
        fprintf(stderr, "reclass run: %s\n", e);
}

/* The worker passes one --kafka list to its consumer and this producer: skip what only a
 * consumer understands rather than have librdkafka warn about it. */
static int consumer_only(const char *kv) {
    static const char *prefixes[] = {"session.timeout.ms",
                                     "heartbeat.interval.ms",
                                     "max.poll.interval.ms",
                                     "auto.offset.reset",
                                     "group.",
                                     "fetch.",
                                     "enable.auto.",
                                     "auto.commit.",
                                     "partition.assignment.strategy",
                                     "isolation.level",
                                     "queued.",
                                     "enable.partition.eof",
                                     "check.crcs"};
    for (size_t i = 0; i < sizeof(prefixes) / sizeof(prefixes[0]); i++)
        if (!strncmp(kv, prefixes[i], strlen(prefixes[i]))) return 1;
    return 0;
}

int consumers_dlq_init(const char *brokers, const char *topic, const char *const *extra,
                       consumers_dlq_done_fn done, void *ctx, consumers_dlq_t **out, char *err,
                       size_t errlen) {
    *out = NULL;
    consumers_dlq_t *d = calloc(1, sizeof(*d));
    if (!d || !(d->topic = strdup(topic))) {
        free(d);
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    d->done = done;
    d->ctx = ctx;
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    char e[256];
    const char *kv[][2] = {{"bootstrap.servers", brokers},
                           {"acks", "all"},
                           {"enable.idempotence", "true"},
                           {"linger.ms", "5"},
                           {"client.id", "reclass-dlq"}};
    for (size_t i = 0; i < sizeof(kv) / sizeof(kv[0]); i++) {
        if (rd_kafka_conf_set(conf, kv[i][0], kv[i][1], e, sizeof(e)) != RD_KAFKA_CONF_OK) {
            snprintf(err, errlen, "dead-letter producer %s: %s", kv[i][0], e);
            goto fail;
        }
    }
    for (const char *const *p = extra; p && *p; p++) {
        if (consumer_only(*p)) continue;
        const char *eq = strchr(*p, '=');
        char key[256];
        if (!eq) {
            snprintf(err, errlen, "Kafka property '%s': expected key=value", *p);
            goto fail;
        }
        snprintf(key, sizeof(key), "%.*s", (int)(eq - *p), *p);
        if (rd_kafka_conf_set(conf, key, eq + 1, e, sizeof(e)) != RD_KAFKA_CONF_OK) {
            snprintf(err, errlen, "Kafka property %s: %s", key, e);
            goto fail;
        }
    }
    rd_kafka_conf_set_opaque(conf, d);
    rd_kafka_conf_set_dr_msg_cb(conf, dr_cb);
    d->rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, e, sizeof(e));
    if (!d->rk) {
        snprintf(err, errlen, "dead-letter producer: %s", e);
        goto fail;
    }
    *out = d;
    return 0;
fail:
    rd_kafka_conf_destroy(conf);
    free(d->topic);
    free(d);
    return -1;
}

int consumers_dlq_send(consumers_dlq_t *d, const rd_kafka_message_t *src, const char *error,
                       void *opaque, char *err, size_t errlen) {
    rd_kafka_headers_t *h = rd_kafka_headers_new(4);
    char part[16], off[24];
    snprintf(part, sizeof(part), "%" PRId32, src->partition);
    snprintf(off, sizeof(off), "%" PRId64, src->offset);
    const char *src_topic = src->rkt ? rd_kafka_topic_name(src->rkt) : "";
    rd_kafka_header_add(h, "reclass.error", -1, error, -1);
    rd_kafka_header_add(h, "reclass.source.topic", -1, src_topic, -1);
    rd_kafka_header_add(h, "reclass.source.partition", -1, part, -1);
    rd_kafka_header_add(h, "reclass.source.offset", -1, off, -1);
    return produce(d, src->key, src->key_len, src->payload, src->len, h, opaque, err, errlen);
}

int consumers_dlq_poll(consumers_dlq_t *d, int timeout_ms) {
    return rd_kafka_poll(d->rk, timeout_ms);
}

long consumers_dlq_outstanding(const consumers_dlq_t *d) {
    return d->outstanding;
}

long consumers_dlq_delivered(const consumers_dlq_t *d) {
    return d->delivered;
}

int consumers_dlq_flush(consumers_dlq_t *d, int timeout_ms) {
    rd_kafka_flush(d->rk, timeout_ms);
    return d->outstanding > 0 ? -1 : 0;
}

void consumers_dlq_free(consumers_dlq_t *d) {
    if (!d) return;
    if (d->rk) rd_kafka_destroy(d->rk);
    free(d->topic);
    free(d);
}

const char *consumers_dlq_topic(const consumers_dlq_t *d) {
    return d->topic;
}
