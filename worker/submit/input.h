/* Tickets of a file for `reclass submit`: CSV with a header row, or JSON lines. Read twice
 * (once to count the job, once to send it), so it opens the file by path. */
#ifndef RECLASS_WORKER_SUBMIT_INPUT_H
#define RECLASS_WORKER_SUBMIT_INPUT_H

#include <stddef.h>

#include "common/err.h"

typedef struct worker_submit_input worker_submit_input_t;

typedef struct {
    const char *id;   /* ticket id: the id column/key, else the 1-based record number */
    const char *text; /* NUL-terminated */
    size_t text_len;
    long line; /* where the record starts, for messages */
} worker_submit_rec_t;

/* text_key/id_key: CSV column or JSON key; id_key NULL = "id" for JSONL when present, record
 * number otherwise. COMMON_OK, or COMMON_USAGE (unreadable file, unknown extension, missing
 * column) with e saying what to fix. */
common_status_t worker_submit_input_open(const char *path, const char *text_key, const char *id_key,
                                         worker_submit_input_t **out, common_err_t *e);

/* COMMON_OK: *rec filled (valid until the next call); COMMON_DONE: the end; COMMON_USAGE:
 * malformed input (e says where). */
common_status_t worker_submit_input_next(worker_submit_input_t *in, worker_submit_rec_t *rec,
                                         common_err_t *e);

void worker_submit_input_free(worker_submit_input_t *in);

/* What the counting pass learns of a file. */
typedef struct {
    long count, empty; /* tickets with text; records without (skipped) */
    /* the ticket with the most text + id bytes (the id goes out twice: key and value), which
     * the caller holds against the broker's record size limit before sending anything */
    size_t largest_text, largest_id;
    long largest_line;
} worker_submit_count_t;

/* Reads the whole file once into *out. COMMON_OK, or COMMON_USAGE with e naming the line of
 * the first refused record (a ticket id that is invalid or appears twice, a text over
 * CONSUMERS_TICKET_MAX_TEXT_BYTES), a file without tickets, or one over 2^31-1. */
common_status_t worker_submit_input_count(const char *path, const char *text_key,
                                          const char *id_key, worker_submit_count_t *out,
                                          common_err_t *e);

#endif
