#include "consumers/kafka_props.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <librdkafka/rdkafka.h>

#include "common/err.h"
#include "common/redact.h"

/* What the guarantees rest on (at-least-once: an offset is stored only after its row is
 * committed; one group, one protocol), so a --kafka list may not change it. enable.partition.eof,
 * auto.commit.interval.ms, group.instance.id, session and poll timeouts, TLS and SASL stay the
 * user's. */
static const struct {
    const char *key, *why;
} kafka_props_reserved[] = {
    {"bootstrap.servers", "set it with --brokers"},
    {"group.id", "set it with --group (the log and the metrics name that group)"},
    {"enable.auto.offset.store",
     "reclass stores an offset only after its row is committed (at-least-once)"},
    {"enable.auto.commit", "reclass commits the offsets it stored; without, none would be"},
    {"auto.offset.reset",
     "a new group reads from the earliest record: any other start skips or refuses tickets"},
    {"isolation.level", "only committed records are read (read_committed)"},
    {"partition.assignment.strategy",
     "every member of the group must use cooperative-sticky, or the group cannot form"},
    {"group.protocol", "the rebalance handling is written for the classic protocol"},
    {"enable.idempotence", "the producers are idempotent, so retries neither lose nor repeat"},
    {"acks", "a record counts as sent only once all in-sync replicas have it (acks=all)"},
    {"transactional.id", "reclass's producers are not transactional"},
};

/* The worker passes one --kafka list to its consumer and its producer: skip what only a
 * consumer understands rather than have librdkafka warn about it. */
static int kafka_props_consumer_only(const char *kv) {
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

common_status_t consumers_kafka_props_check(const char *const *props, common_err_t *e) {
    for (const char *const *p = props; p && *p; p++) {
        const char *eq = strchr(*p, '=');
        size_t klen = eq ? (size_t)(eq - *p) : strlen(*p);
        for (size_t i = 0; i < sizeof(kafka_props_reserved) / sizeof(kafka_props_reserved[0]); i++)
            if (strlen(kafka_props_reserved[i].key) == klen &&
                !strncmp(*p, kafka_props_reserved[i].key, klen))
                return common_err_set(e, COMMON_USAGE, "--kafka %s: reclass sets this itself: %s",
                                      kafka_props_reserved[i].key, kafka_props_reserved[i].why);
    }
    return COMMON_OK;
}

common_status_t consumers_kafka_props_apply(rd_kafka_conf_t *conf, const char *const *props,
                                            consumers_props_for_t who, common_err_t *e) {
    common_status_t st = consumers_kafka_props_check(props, e);
    if (st) return st;
    for (const char *const *p = props; p && *p; p++) {
        if (who == CONSUMERS_PROPS_PRODUCER && kafka_props_consumer_only(*p)) continue;
        const char *eq = strchr(*p, '=');
        if (!eq || eq == *p)
            return common_err_set(e, COMMON_USAGE, "Kafka property '%s': expected key=value", *p);
        char key[256], why[256];
        snprintf(key, sizeof(key), "%.*s", (int)(eq - *p), *p);
        if (rd_kafka_conf_set(conf, key, eq + 1, why, sizeof(why)) != RD_KAFKA_CONF_OK)
            return common_err_set(e, COMMON_USAGE, "Kafka property %s: %s", key,
                                  common_redact(why, why, sizeof(why)));
    }
    return COMMON_OK;
}

long consumers_kafka_props_long(const char *const *props, const char *key, long dflt) {
    size_t klen = strlen(key);
    long v = dflt;
    for (const char *const *p = props; p && *p; p++) {
        if (strncmp(*p, key, klen) != 0 || (*p)[klen] != '=') continue;
        char *end;
        errno = 0;
        long x = strtol(*p + klen + 1, &end, 10);
        if (!errno && end != *p + klen + 1 && *end == '\0') v = x;
    }
    return v;
}

long consumers_kafka_setting_long(const char *const *props, const char *key) {
    long dflt = -1;
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    char buf[64];
    size_t n = sizeof(buf);
    if (conf && rd_kafka_conf_get(conf, key, buf, &n) == RD_KAFKA_CONF_OK) {
        char *end;
        errno = 0;
        long x = strtol(buf, &end, 10);
        if (!errno && end != buf && *end == '\0') dflt = x;
    }
    if (conf) rd_kafka_conf_destroy(conf);
    return consumers_kafka_props_long(props, key, dflt);
}

const char *consumers_kafka_unrecoverable(int err) {
    if (err == RD_KAFKA_RESP_ERR__SSL)
        return "TLS with the broker failed (check --kafka security.protocol, ssl.ca.location "
               "and the broker's certificate)";
    if (err == RD_KAFKA_RESP_ERR__AUTHENTICATION)
        return "Kafka authentication failed (check --kafka sasl.mechanism, sasl.username and "
               "sasl.password)";
    return NULL;
}
