/* Dead-letter producer: records that fail decoding or validation are copied, unchanged (key
 * and value), to a dead-letter topic with headers naming the error and where they came from:
 *   reclass.error, reclass.source.topic, reclass.source.partition, reclass.source.offset.
 * A dead letter counts as handled (its source offset may be stored) only once Kafka
 * acknowledged it; a failed delivery is produced again. */
#ifndef RECLASS_CONSUMERS_DLQ_H
#define RECLASS_CONSUMERS_DLQ_H

#include <stddef.h>
#include <stdint.h>

#include <librdkafka/rdkafka.h>

typedef struct consumers_dlq consumers_dlq_t;

/* Called from consumers_dlq_poll/flush (the caller's thread) once a dead letter is in Kafka;
 * opaque is what consumers_dlq_send got. */
typedef void (*consumers_dlq_done_fn)(void *ctx, void *opaque);

/* extra: librdkafka properties "key=value", NULL-ended (may be NULL). */
int consumers_dlq_init(const char *brokers, const char *topic, const char *const *extra,
                       consumers_dlq_done_fn done, void *ctx, consumers_dlq_t **out, char *err,
                       size_t errlen);

/* Queues src (a consumed record) as a dead letter. Returns 0, or -1 with err (queue full:
 * poll and retry). */
int consumers_dlq_send(consumers_dlq_t *d, const rd_kafka_message_t *src, const char *error,
                       void *opaque, char *err, size_t errlen);

/* Serves delivery reports; returns how many were served. */
int consumers_dlq_poll(consumers_dlq_t *d, int timeout_ms);

/* Dead letters queued and not yet acknowledged. */
long consumers_dlq_outstanding(const consumers_dlq_t *d);
/* Dead letters acknowledged since init. */
long consumers_dlq_delivered(const consumers_dlq_t *d);

/* Waits up to timeout_ms for every dead letter to be acknowledged; 0 when none is left. */
int consumers_dlq_flush(consumers_dlq_t *d, int timeout_ms);

void consumers_dlq_free(consumers_dlq_t *d);

const char *consumers_dlq_topic(const consumers_dlq_t *d);

#endif
