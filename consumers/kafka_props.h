/* The --kafka KEY=VALUE list every Kafka client of reclass takes (the worker's consumer and
 * dead-letter producer, `reclass submit`'s producer): one reader of it, so that each client
 * applies and looks up the same settings the same way. A list is NULL-ended. */
#ifndef RECLASS_CONSUMERS_KAFKA_PROPS_H
#define RECLASS_CONSUMERS_KAFKA_PROPS_H

#include <stddef.h>

typedef struct rd_kafka_conf_s rd_kafka_conf_t; /* as librdkafka/rdkafka.h declares it */

typedef enum {
    CONSUMERS_PROPS_ALL,      /* a consumer: every property */
    CONSUMERS_PROPS_PRODUCER, /* a producer: the consumer-only ones are skipped */
} consumers_props_for_t;

/* Sets each KEY=VALUE of props (NULL-ended, may be NULL) on conf, in order (a later one
 * wins, as on the command line). Returns 0, or -1 with one line in err naming the property. */
int consumers_kafka_props_apply(rd_kafka_conf_t *conf, const char *const *props,
                                consumers_props_for_t who, char *err, size_t errlen);

/* The value of the last KEY=... in props as a whole number, or dflt when absent or not a
 * number (librdkafka refuses such a value when the list is applied). */
long consumers_kafka_props_long(const char *const *props, const char *key, long dflt);

#endif
