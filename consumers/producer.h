/* The bulk producer of `reclass submit`: idempotent with acks=all (librdkafka's retries
 * neither lose nor duplicate a ticket), every delivery report counted, and the largest record
 * the topic takes known before anything is sent, so that a job goes out whole or not at all. */
#ifndef RECLASS_CONSUMERS_PRODUCER_H
#define RECLASS_CONSUMERS_PRODUCER_H

#include <signal.h>
#include <stddef.h>

#include "common/err.h"
#include "consumers/ticket.h"

typedef struct consumers_producer consumers_producer_t;

typedef struct {
    long delivered, failed;
    char first_error[256]; /* the first failed delivery's reason */
} consumers_producer_stats_t;

/* A producer to topic on brokers with the --kafka list props (NULL-ended, may be NULL; a
 * later KEY=VALUE wins). COMMON_OK; COMMON_USAGE with e naming the bad property;
 * COMMON_FATAL, out of memory. */
common_status_t consumers_producer_new(const char *brokers, const char *topic,
                                       const char *const *props, consumers_producer_t **out,
                                       common_err_t *e);
void consumers_producer_free(consumers_producer_t *p);

/* Fails fast on an unreachable cluster or a missing topic instead of after the message
 * timeout. COMMON_OK; with e: COMMON_RETRY, the cluster did not answer within 10 s;
 * COMMON_MISSING, no such topic (and the cluster does not create it); COMMON_FATAL, a failed
 * TLS handshake or login, or another error. */
common_status_t consumers_producer_check_topic(consumers_producer_t *p, common_err_t *e);

/* The largest record the producer may send to the topic: the smaller of the producer's
 * message.max.bytes (by default the text cap and room for the rest of a ticket) and the
 * topic's max.message.bytes (asked of the broker with DescribeConfigs). source gets what set
 * it, for a message; when the broker does not report the topic's limit (the dev broker does not
 * answer DescribeConfigs), *reported is 0, source says so and the producer's limit stands. */
size_t consumers_producer_record_limit(consumers_producer_t *p, int *reported, char *source,
                                       size_t sourcelen);

/* The most bytes ticket t can take in a record batch on the wire (key = ticket id, the Avro
 * value, Kafka's record and batch headers; before compression, so a bound). */
size_t consumers_producer_ticket_bytes(size_t text_len, size_t id_len, size_t job_len,
                                       size_t tenant_len);

/* Queues one record (buf is malloc'd; the producer owns it from here, also on failure),
 * waiting while the queue is full unless *stop is set. COMMON_OK, or COMMON_FATAL with e. */
common_status_t consumers_producer_send(consumers_producer_t *p, const char *key, void *buf,
                                        size_t len, const volatile sig_atomic_t *stop,
                                        common_err_t *e);

/* Serves delivery reports for up to ms; returns the records not yet reported. */
long consumers_producer_wait(consumers_producer_t *p, int ms);

const consumers_producer_stats_t *consumers_producer_stats(const consumers_producer_t *p);

/* After every report: a broker deletes a partition's oldest records once it holds more than
 * its retention allows, and tickets delivered and already gone would never be classified.
 * COMMON_OK when every partition still holds what it was given; else e describes the first
 * that does not: COMMON_FATAL, it lost delivered records (or memory ran out); COMMON_RETRY,
 * the broker did not say. */
common_status_t consumers_producer_check_retained(consumers_producer_t *p, common_err_t *e);

#endif
