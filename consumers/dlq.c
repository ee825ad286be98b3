#include "consumers/dlq.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <librdkafka/rdkafka.h>

#include "common/clock.h"
#include "common/err.h"
#include "consumers/kafka_props.h"

#define DLQ_BACKOFF_FIRST_MS 100
#define DLQ_BACKOFF_MAX_MS   30000

/* One dead letter from send to acknowledgement. It owns its value (librdkafka references it
 * while in flight: produced without F_COPY) and a master copy of its headers. */
typedef struct dlq_letter {
    int32_t partition; /* of the source record */
    int64_t offset;
    int64_t tag;
    void *key;
    size_t key_len;
    void *value;
    size_t len, orig_len;
    rd_kafka_headers_t *hdrs;
    int attempts, truncated;
    int64_t due_ms;
    char last_err[160];
    struct dlq_letter *next; /* in the retry list */
} dlq_letter_t;

struct consumers_dlq {
    rd_kafka_t *rk;
    char *topic;
    consumers_dlq_done_fn done;
    void *ctx;
    FILE *log;           /* NULL: quiet */
    dlq_letter_t *retry; /* waiting for their next attempt, unordered */
    long outstanding, waiting, delivered, truncated;
    int closing; /* in consumers_dlq_free: purged letters are not failures to report */
};

static void letter_free(dlq_letter_t *l) {
    if (!l) return;
    free(l->key);
    free(l->value);
    if (l->hdrs) rd_kafka_headers_destroy(l->hdrs);
    free(l);
}

static void retry_push(consumers_dlq_t *d, dlq_letter_t *l, int64_t due_ms) {
    l->due_ms = due_ms;
    l->next = d->retry;
    d->retry = l;
    d->waiting++;
}

/* Size refusals are not cured by waiting; everything else (a broker away, a leader moving, a
 * timeout) may be. */
static int size_refused(rd_kafka_resp_err_t e) {
    return e == RD_KAFKA_RESP_ERR_MSG_SIZE_TOO_LARGE ||
           e == RD_KAFKA_RESP_ERR_RECORD_LIST_TOO_LARGE || e == RD_KAFKA_RESP_ERR_INVALID_RECORD;
}

/* The letter's value becomes its head, with two headers saying what was cut and why. */
static void letter_truncate(dlq_letter_t *l) {
    char size[24];
    snprintf(size, sizeof(size), "%zu", l->orig_len);
    if (l->len > CONSUMERS_DLQ_TRUNCATED_BYTES) l->len = CONSUMERS_DLQ_TRUNCATED_BYTES;
    rd_kafka_header_add(l->hdrs, "reclass.truncated", -1, size, -1);
    rd_kafka_header_add(l->hdrs, "reclass.truncated.reason", -1, l->last_err, -1);
    l->truncated = 1;
}

/* A failed attempt: log it, then retry after a backoff or, past the bound, truncated at once. */
static void letter_failed(consumers_dlq_t *d, dlq_letter_t *l, rd_kafka_resp_err_t e) {
    l->attempts++;
    snprintf(l->last_err, sizeof(l->last_err), "%s", rd_kafka_err2str(e));
    int cut = !l->truncated && (size_refused(e) || l->attempts >= CONSUMERS_DLQ_FULL_ATTEMPTS);
    int64_t backoff = DLQ_BACKOFF_MAX_MS;
    if (l->attempts < 10 && (DLQ_BACKOFF_FIRST_MS << (l->attempts - 1)) < backoff)
        backoff = DLQ_BACKOFF_FIRST_MS << (l->attempts - 1);
    if (cut) {
        common_logf(d->log,
                    "dead letter of partition %" PRId32 " offset %" PRId64
                    " (%zu bytes) not accepted by %s: %s (attempt %d); sending its first %d bytes "
                    "instead, with headers reclass.truncated and reclass.truncated.reason\n",
                    l->partition, l->offset, l->orig_len, d->topic, l->last_err, l->attempts,
                    CONSUMERS_DLQ_TRUNCATED_BYTES);
        letter_truncate(l);
        retry_push(d, l, common_now_ms());
        return;
    }
    common_logf(d->log,
                "dead letter of partition %" PRId32 " offset %" PRId64
                " (%zu bytes%s) not accepted by %s: %s (attempt %d); retrying in %.1f s\n",
                l->partition, l->offset, l->len, l->truncated ? ", truncated" : "", d->topic,
                l->last_err, l->attempts, backoff / 1000.0);
    retry_push(d, l, common_now_ms() + backoff);
}

/* Hands the letter to librdkafka, or back to the retry list when it cannot take it now. */
static void letter_produce(consumers_dlq_t *d, dlq_letter_t *l) {
    rd_kafka_headers_t *h = rd_kafka_headers_copy(l->hdrs);
    rd_kafka_resp_err_t e =
        rd_kafka_producev(d->rk, RD_KAFKA_V_TOPIC(d->topic), RD_KAFKA_V_KEY(l->key, l->key_len),
                          RD_KAFKA_V_VALUE(l->value, l->len), RD_KAFKA_V_HEADERS(h),
                          RD_KAFKA_V_OPAQUE(l), RD_KAFKA_V_END);
    if (!e) return;
    rd_kafka_headers_destroy(h); /* producev takes the headers on success only */
    if (e == RD_KAFKA_RESP_ERR__QUEUE_FULL)
        retry_push(d, l,
                   common_now_ms() + DLQ_BACKOFF_FIRST_MS); /* not an attempt: nothing was sent */
    else
        letter_failed(d, l, e);
}

static void dr_cb(rd_kafka_t *rk, const rd_kafka_message_t *m, void *opaque) {
    consumers_dlq_t *d = opaque;
    dlq_letter_t *l = m->_private;
    if (m->err && d->closing) {
        retry_push(d, l, 0);
        return;
    }
    if (m->err) {
        letter_failed(d, l, m->err);
        return;
    }
    d->outstanding--;
    d->delivered++;
    d->truncated += l->truncated;
    if (d->done) d->done(d->ctx, l->partition, l->offset, l->tag);
    letter_free(l);
}

/* The largest record the consumer configured by extra can fetch. */
static long fetchable_bytes(const char *const *extra) {
    long receive = consumers_kafka_setting_long(extra, "receive.message.max.bytes");
    long fetch = consumers_kafka_setting_long(extra, "fetch.max.bytes");
    long max = receive > fetch ? receive : fetch;
    return max > 1000000000L ? 1000000000L : max; /* librdkafka's ceiling */
}

common_status_t consumers_dlq_init(const char *brokers, const char *topic, const char *const *extra,
                                   consumers_dlq_done_fn done, void *ctx, FILE *log,
                                   consumers_dlq_t **out, common_err_t *e) {
    *out = NULL;
    consumers_dlq_t *d = calloc(1, sizeof(*d));
    if (!d || !(d->topic = strdup(topic))) {
        free(d);
        return common_err_set(e, COMMON_FATAL, "out of memory");
    }
    d->done = done;
    d->ctx = ctx;
    d->log = log;
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    char why[256], max_bytes[24];
    snprintf(max_bytes, sizeof(max_bytes), "%ld", fetchable_bytes(extra));
    const char *kv[][2] = {{"bootstrap.servers", brokers},   {"acks", "all"},
                           {"enable.idempotence", "true"},   {"linger.ms", "5"},
                           {"message.max.bytes", max_bytes}, {"client.id", "reclass-dlq"}};
    common_status_t st = COMMON_OK;
    for (size_t i = 0; !st && i < sizeof(kv) / sizeof(kv[0]); i++)
        if (rd_kafka_conf_set(conf, kv[i][0], kv[i][1], why, sizeof(why)) != RD_KAFKA_CONF_OK)
            st = common_err_set(e, COMMON_USAGE, "dead-letter producer %s: %s", kv[i][0], why);
    if (!st) st = consumers_kafka_props_apply(conf, extra, CONSUMERS_PROPS_PRODUCER, e);
    if (st) goto fail;
    rd_kafka_conf_set_opaque(conf, d);
    rd_kafka_conf_set_dr_msg_cb(conf, dr_cb);
    d->rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, why, sizeof(why));
    if (!d->rk) {
        st = common_err_set(e, COMMON_USAGE, "dead-letter producer: %s", why);
        goto fail;
    }
    *out = d;
    return COMMON_OK;
fail:
    rd_kafka_conf_destroy(conf);
    free(d->topic);
    free(d);
    return st;
}

int consumers_dlq_send_copy(consumers_dlq_t *d, const char *topic, int32_t partition,
                            int64_t offset, const void *key, size_t key_len, const void *value,
                            size_t len, const char *error, const char *job_id, const char *tenant,
                            int64_t tag) {
    dlq_letter_t *l = calloc(1, sizeof(*l));
    if (!l) return -1;
    *l = (dlq_letter_t){.partition = partition,
                        .offset = offset,
                        .tag = tag,
                        .len = len,
                        .orig_len = len,
                        .key_len = key ? key_len : 0};
    l->hdrs = rd_kafka_headers_new(8);
    l->value = malloc(len ? len : 1);
    l->key = malloc(l->key_len ? l->key_len : 1);
    if (!l->hdrs || !l->value || !l->key) {
        letter_free(l);
        return -1;
    }
    if (len) memcpy(l->value, value, len);
    if (l->key_len) memcpy(l->key, key, l->key_len);
    if (!key) {
        free(l->key);
        l->key = NULL;
    }
    char part[16], off[24];
    snprintf(part, sizeof(part), "%" PRId32, partition);
    snprintf(off, sizeof(off), "%" PRId64, offset);
    rd_kafka_header_add(l->hdrs, "reclass.error", -1, error, -1);
    rd_kafka_header_add(l->hdrs, "reclass.source.topic", -1, topic ? topic : "", -1);
    rd_kafka_header_add(l->hdrs, "reclass.source.partition", -1, part, -1);
    rd_kafka_header_add(l->hdrs, "reclass.source.offset", -1, off, -1);
    if (job_id) rd_kafka_header_add(l->hdrs, "reclass.job_id", -1, job_id, -1);
    if (tenant) rd_kafka_header_add(l->hdrs, "reclass.tenant", -1, tenant, -1);
    d->outstanding++;
    letter_produce(d, l);
    return 0;
}

int consumers_dlq_send(consumers_dlq_t *d, const consumers_record_t *rec, const char *error,
                       int64_t tag) {
    const rd_kafka_message_t *src = (const rd_kafka_message_t *)rec; /* consumer.c's record */
    return consumers_dlq_send_copy(d, src->rkt ? rd_kafka_topic_name(src->rkt) : "", src->partition,
                                   src->offset, src->key, src->key_len, src->payload, src->len,
                                   error, NULL, NULL, tag);
}

int consumers_dlq_poll(consumers_dlq_t *d, int timeout_ms) {
    int served = rd_kafka_poll(d->rk, d->retry ? 0 : timeout_ms);
    if (!d->retry) return served;
    int64_t now = common_now_ms();
    dlq_letter_t *due = NULL, **pp = &d->retry;
    while (*pp) { /* take the due ones out first: producing may put letters back */
        dlq_letter_t *l = *pp;
        if (l->due_ms <= now) {
            *pp = l->next;
            l->next = due;
            due = l;
            d->waiting--;
        } else {
            pp = &l->next;
        }
    }
    while (due) {
        dlq_letter_t *l = due;
        due = l->next;
        l->next = NULL;
        letter_produce(d, l);
    }
    return served + rd_kafka_poll(d->rk, timeout_ms);
}

long consumers_dlq_outstanding(const consumers_dlq_t *d) {
    return d->outstanding;
}

long consumers_dlq_waiting(const consumers_dlq_t *d) {
    return d->waiting;
}

long consumers_dlq_delivered(const consumers_dlq_t *d) {
    return d->delivered;
}

long consumers_dlq_truncated(const consumers_dlq_t *d) {
    return d->truncated;
}

common_status_t consumers_dlq_fatal(consumers_dlq_t *d, common_err_t *e) {
    char why[256];
    rd_kafka_resp_err_t code = rd_kafka_fatal_error(d->rk, why, sizeof(why));
    if (!code) return COMMON_OK;
    return common_err_set(e, COMMON_FATAL, "dead-letter producer: %s", why);
}

int consumers_dlq_flush(consumers_dlq_t *d, int timeout_ms) {
    int64_t until = common_now_ms() + timeout_ms;
    while (d->outstanding > 0 && common_now_ms() < until)
        consumers_dlq_poll(d, 50);
    return d->outstanding > 0 ? -1 : 0;
}

void consumers_dlq_free(consumers_dlq_t *d) {
    if (!d) return;
    d->closing = 1;
    if (d->rk) {
        /* the purged letters come back through dr_cb as failures, into the retry list */
        rd_kafka_purge(d->rk, RD_KAFKA_PURGE_F_QUEUE | RD_KAFKA_PURGE_F_INFLIGHT);
        rd_kafka_poll(d->rk, 0);
        rd_kafka_destroy(d->rk);
    }
    while (d->retry) {
        dlq_letter_t *l = d->retry;
        d->retry = l->next;
        letter_free(l);
    }
    free(d->topic);
    free(d);
}

const char *consumers_dlq_topic(const consumers_dlq_t *d) {
    return d->topic;
}
