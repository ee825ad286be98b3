/* The --kafka KEY=VALUE list every Kafka client of reclass takes (the worker's consumer and
 * dead-letter producer, `reclass submit`'s producer): one reader of it, so that each client
 * applies and looks up the same settings the same way. A list is NULL-ended. */
#ifndef RECLASS_CONSUMERS_KAFKA_PROPS_H
#define RECLASS_CONSUMERS_KAFKA_PROPS_H

#include <stddef.h>

#include "common/err.h"

/* librdkafka's configuration object, declared (as librdkafka does) rather than included, so that
 * worker/ can check a --kafka list without including a librdkafka header */
typedef struct rd_kafka_conf_s rd_kafka_conf_t;

typedef enum {
    CONSUMERS_PROPS_ALL,      /* a consumer: every property */
    CONSUMERS_PROPS_PRODUCER, /* a producer: the consumer-only ones are skipped */
} consumers_props_for_t;

/* Refuses a key reclass sets itself because a guarantee rests on it (group.id,
 * enable.auto.commit, enable.auto.offset.store, auto.offset.reset, isolation.level,
 * partition.assignment.strategy, acks, enable.idempotence, ...): COMMON_OK, or COMMON_USAGE
 * with e naming the key and why. */
common_status_t consumers_kafka_props_check(const char *const *props, common_err_t *e);

/* Sets each KEY=VALUE of props (NULL-ended, may be NULL) on conf, in order (a later one
 * wins, as on the command line), refusing what consumers_kafka_props_check refuses.
 * COMMON_OK, or COMMON_USAGE with e naming the property. */
common_status_t consumers_kafka_props_apply(rd_kafka_conf_t *conf, const char *const *props,
                                            consumers_props_for_t who, common_err_t *e);

/* The value of the last KEY=... in props as a whole number, or dflt when absent or not a
 * number (librdkafka refuses such a value when the list is applied). */
long consumers_kafka_props_long(const char *const *props, const char *key, long dflt);

/* The value a client configured by props runs with, as a whole number: the last KEY=... in
 * props, else librdkafka's own default (read from a fresh configuration, never copied), else
 * -1 (an unknown key, or not a number). */
long consumers_kafka_setting_long(const char *const *props, const char *key);

/* For a client-wide error code from librdkafka's error callback: what to check when it is a
 * failed TLS handshake or authentication, which retrying does not heal (a wrong CA, password,
 * mechanism or protocol: the command stops at once, exit 1); NULL for any other error. */
const char *consumers_kafka_unrecoverable(int err);

#endif
