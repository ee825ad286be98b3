/* One ticket of a bulk job, as carried by one Kafka message (Avro record, key = ticket_id). */
#ifndef RECLASS_CONSUMERS_TICKET_H
#define RECLASS_CONSUMERS_TICKET_H

#include <stddef.h>
#include <stdint.h>

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

#endif
