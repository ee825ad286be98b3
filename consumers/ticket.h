/* One ticket of a bulk job, as carried by one Kafka message (Avro record, key = ticket_id). */
#ifndef RECLASS_CONSUMERS_TICKET_H
#define RECLASS_CONSUMERS_TICKET_H

#include <stddef.h>
#include <stdint.h>

#include "common/err.h"

/* job_id, tenant, ticket_id: keys of PostgreSQL rows, so bounded and strict UTF-8 */
#define CONSUMERS_TICKET_MAX_ID_BYTES 256
/* text: well above Kafka's default 1 MiB message; the tokenizer reads at most max_len tokens */
#define CONSUMERS_TICKET_MAX_TEXT_BYTES (4 * 1024 * 1024)

typedef struct {
    char *job_id;    /* owned */
    char *tenant;    /* owned */
    char *ticket_id; /* owned */
    char *text;      /* owned, NUL-terminated */
    size_t text_len;
    int32_t job_total;      /* tickets in the job */
    int64_t enqueued_at_ms; /* timestamp-millis */
    int32_t priority;
    int has_priority;
    int32_t partition; /* where it came from; -1 before it was consumed */
    int64_t offset;
} consumers_ticket_t;

void consumers_ticket_free(consumers_ticket_t *t); /* frees the strings, not t */

/* The rule every identifier (job_id, tenant, ticket_id) obeys, checked where tickets are made
 * (`reclass submit`, the encoder) and where they arrive (the decoder): 1 to
 * CONSUMERS_TICKET_MAX_ID_BYTES bytes of strict UTF-8 (shortest forms, no UTF-16 surrogates,
 * nothing above U+10FFFF) without NUL. PostgreSQL refuses anything else in a text column, and
 * one such row would fail the COPY of every ticket in its batch. COMMON_OK, or COMMON_USAGE
 * with e naming field and, for bad UTF-8, the offset (detail: the bytes) of the first bad
 * sequence. */
common_status_t consumers_ticket_check_id(const char *field, const char *s, size_t n,
                                          common_err_t *e);

/* enqueued_at, Unix milliseconds, as the sink can store it: 0 (unknown, stored as NULL) up to
 * the last millisecond of PostgreSQL's timestamptz (294276-12-31 23:59:59.999 UTC). */
#define CONSUMERS_TICKET_MAX_ENQUEUED_MS 9224318015999999LL
/* COMMON_OK, or COMMON_USAGE with e saying what the field must hold. */
common_status_t consumers_ticket_check_enqueued(int64_t ms, common_err_t *e);

/* Length of the longest prefix of s[0..n) that is strict UTF-8 (n when all of it is). */
size_t consumers_utf8_valid_prefix(const char *s, size_t n);

#endif
