/* Dead-letter producer: records that fail decoding or validation are copied, unchanged (key
 * and value), to a dead-letter topic with headers naming the error and where they came from:
 *   reclass.error, reclass.source.topic, reclass.source.partition, reclass.source.offset,
 * and reclass.job_id, reclass.tenant when the record said them (its job counts it as failed:
 * migrations/008_job_failures.sql).
 * A dead letter counts as handled (its source offset may be stored) only once Kafka
 * acknowledged it. Nothing is ever dropped:
 *  - the producer's message.max.bytes is at least what the consumer can fetch
 *    (receive.message.max.bytes and fetch.max.bytes of the same --kafka list, librdkafka's
 *    defaults 100,000,000 and 52,428,800), so any record the worker read can be sent back;
 *  - a failed delivery is logged with its cause and sent again after a backoff (0.1 s
 *    doubling to 30 s);
 *  - a dead letter the dead-letter topic refuses for its size (the broker's or topic's
 *    message.max.bytes), or that failed CONSUMERS_DLQ_FULL_ATTEMPTS times, is replaced by a
 *    truncated one: its first CONSUMERS_DLQ_TRUNCATED_BYTES bytes, the same headers, plus
 *    reclass.truncated (the original value's size in bytes) and reclass.truncated.reason
 *    (the last delivery error). The source record is still in its topic at the offset the
 *    headers name. A truncated dead letter is retried, with the same backoff, until it lands.
 * One thread owns a consumers_dlq_t (send, poll, flush, free): the delivery reports run in it. */
#ifndef RECLASS_CONSUMERS_DLQ_H
#define RECLASS_CONSUMERS_DLQ_H

#include <stddef.h>
#include <stdio.h>
#include <stdint.h>

#include "common/err.h"
#include "consumers/consumer.h" /* consumers_record_t */

#define CONSUMERS_DLQ_FULL_ATTEMPTS   5
#define CONSUMERS_DLQ_TRUNCATED_BYTES 65536

typedef struct consumers_dlq consumers_dlq_t;

/* Called from consumers_dlq_poll/flush (the owner's thread) once the dead letter of the record
 * at (partition, offset) is in Kafka; tag is what consumers_dlq_send got. */
typedef void (*consumers_dlq_done_fn)(void *ctx, int32_t partition, int64_t offset, int64_t tag);

/* extra: librdkafka properties "key=value", NULL-ended (may be NULL); consumer-only ones are
 * skipped. log: a line per refused or truncated letter (the CLI: stderr); NULL: quiet.
 * COMMON_OK; COMMON_USAGE with e naming the bad property; COMMON_FATAL, out of memory. */
common_status_t consumers_dlq_init(const char *brokers, const char *topic, const char *const *extra,
                                   consumers_dlq_done_fn done, void *ctx, FILE *log,
                                   consumers_dlq_t **out, common_err_t *e);

/* Takes src (a consumed record; copied, the caller keeps it) as a dead letter; error is its
 * reclass.error header (for a record the codec refused: common_err_line of the codec's error).
 * Never waits: a full local queue or a failed produce call keeps the letter for a later poll.
 * Returns 0, or -1 only when out of memory. */
int consumers_dlq_send(consumers_dlq_t *d, const consumers_record_t *src, const char *error,
                       int64_t tag);

/* The same for a record kept as its parts after it was consumed: topic, partition, offset, key
 * (may be NULL) and value, copied; job_id and tenant (NULL: not known) become headers. */
int consumers_dlq_send_copy(consumers_dlq_t *d, const char *topic, int32_t partition,
                            int64_t offset, const void *key, size_t key_len, const void *value,
                            size_t len, const char *error, const char *job_id, const char *tenant,
                            int64_t tag);

/* Serves delivery reports and sends the letters whose retry is due; returns the number of
 * delivery reports served. */
int consumers_dlq_poll(consumers_dlq_t *d, int timeout_ms);

/* Dead letters taken and not yet acknowledged (in librdkafka or waiting for a retry). */
long consumers_dlq_outstanding(const consumers_dlq_t *d);
/* Of those, the ones waiting for a retry (a backlog the caller may want to stop reading for). */
long consumers_dlq_waiting(const consumers_dlq_t *d);
/* Dead letters acknowledged since init; truncated ones among them. */
long consumers_dlq_delivered(const consumers_dlq_t *d);
long consumers_dlq_truncated(const consumers_dlq_t *d);

/* COMMON_FATAL with e when the producer hit a fatal error (it can send nothing more), else
 * COMMON_OK. */
common_status_t consumers_dlq_fatal(consumers_dlq_t *d, common_err_t *e);

/* Polls up to timeout_ms for every dead letter to be acknowledged; 0 when none is left. */
int consumers_dlq_flush(consumers_dlq_t *d, int timeout_ms);

/* Frees everything; dead letters not yet acknowledged are dropped (their source offsets were
 * never stored, so the records are read again by the next owner). */
void consumers_dlq_free(consumers_dlq_t *d);

const char *consumers_dlq_topic(const consumers_dlq_t *d);

#endif
