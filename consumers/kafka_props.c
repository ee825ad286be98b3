#include "consumers/kafka_props.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <librdkafka/rdkafka.h>

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

int consumers_kafka_props_apply(rd_kafka_conf_t *conf, const char *const *props,
                                consumers_props_for_t who, char *err, size_t errlen) {
    for (const char *const *p = props; p && *p; p++) {
        if (who == CONSUMERS_PROPS_PRODUCER && kafka_props_consumer_only(*p)) continue;
        const char *eq = strchr(*p, '=');
        if (!eq || eq == *p) {
            snprintf(err, errlen, "Kafka property '%s': expected key=value", *p);
            return -1;
        }
        char key[256], e[256];
        snprintf(key, sizeof(key), "%.*s", (int)(eq - *p), *p);
        if (rd_kafka_conf_set(conf, key, eq + 1, e, sizeof(e)) != RD_KAFKA_CONF_OK) {
            snprintf(err, errlen, "Kafka property %s: %s", key, e);
            return -1;
        }
    }
    return 0;
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
