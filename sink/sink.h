/* PostgreSQL sink (libpq). One transaction per write: results COPYed into a staging table and
 * upserted into ticket_results (ON CONFLICT (job_id, ticket_id) DO UPDATE), job progress
 * counted only for rows new to the table (redelivery never double-counts), one batches row per
 * encoder batch. The caller stores Kafka offsets only after sink_write returned COMMON_OK, and of
 * the rows sink_rejected lists only once their dead letters are in Kafka. */
#ifndef RECLASS_SINK_H
#define RECLASS_SINK_H

#include <stddef.h>
#include <stdint.h>

#include "common/err.h"
#include "common/status.h"

typedef struct sink sink_t; /* one connection; not thread-safe */

typedef struct {
    const char *job_id;
    const char *tenant;
    const char *ticket_id;
    int32_t job_total; /* tickets in the job, from the record */
    const char *label;
    int label_id;
    float confidence;
    const char *top_k_json; /* JSON array, e.g. [{"label":"x","p":0.91},...] */
    int tokens;             /* tokens fed to the encoder ([CLS]/[SEP] included) */
    int truncated;          /* 1 when the text was cut to the model's max length */
    int32_t partition;
    int64_t offset;
    int64_t enqueued_at_ms; /* from the record; 0 when unknown */
} sink_result_t;

typedef struct {
    int tickets;
    long real_tokens;
    long padded_tokens; /* tickets * longest: what a padded encoder would have spent */
    double wait_ms;     /* oldest item's wait in the accumulator */
    double compute_ms;  /* backend time: from the batch's start (its submit, or the previous
                         * batch's logits if later) to its own logits in host memory */
    const char *backend;
    int64_t device_used_bytes; /* GPU memory telemetry; 0 on cpu */
    int64_t arena_bytes;
    int encoder; /* the encoder that ran it, 0 .. N-1 within its worker */
    int device;  /* the device it ran on (a CUDA ordinal); < 0: the host (cpu), stored NULL */
    const char *worker; /* hostname:pid, as its gpu_memory rows (migration 023); NULL: none */
} sink_batch_t;

/* Every sink function answers a common_status_t: COMMON_OK; COMMON_RETRY, the connection was
 * lost or a serialization failure: reconnect and retry the write; COMMON_FATAL, a bug or a schema
 * mismatch: retrying will not help; COMMON_USAGE, a connection string that does not parse, or a
 * job of another tenant: the user's to fix. Other than COMMON_OK, e says what failed (a
 * PostgreSQL failure as sink_pg_err maps it: sink/pgutil.h). */

/* conninfo: a libpq conninfo string or URL (sslmode etc. pass through unchanged).
 * model: recorded in every result row. */
common_status_t sink_init(const char *conninfo, const char *model, sink_t **out, common_err_t *e);

/* Writes rows and batch telemetry in one transaction. Returns COMMON_OK once committed.
 * A row PostgreSQL refuses for its data (SQLSTATE class 22 data exception, 23 integrity
 * constraint violation, e.g. a job owned by another tenant or more tickets than job_total, 54
 * program limit exceeded) never fails the write: the write is split until the refused rows are
 * found, every other row is stored, and COMMON_OK comes back with the refused ones listed by
 * sink_rejected. Only connection and server failures answer COMMON_RETRY. */
common_status_t sink_write(sink_t *sink, const sink_result_t *rows, int n_rows,
                           const sink_batch_t *batches, int n_batches, common_err_t *e);

/* A row of the last sink_write that is not stored, and why (what to fix, with the SQLSTATE). */
typedef struct {
    int row; /* index into that write's rows */
    char error[480];
} sink_reject_t;

/* The rows the last sink_write left out (in row order); *out is valid until the next write. */
int sink_rejected(const sink_t *sink, const sink_reject_t **out);

/* A ticket that ends as a dead letter instead of a result row (migrations/008_job_failures.sql):
 * where its record is, what it said of itself (NULL / 0 where it could not be read) and why. */
typedef struct {
    const char *topic;
    int32_t partition;
    int64_t offset;
    const char *job_id, *tenant, *ticket_id;
    int32_t job_total;
    const char *reason; /* the dead letter's reclass.error */
} sink_failure_t;

/* Records the failures (each one idempotent on its record: a re-read counts once), then stamps
 * completed_at on their jobs where done + failed reached the total. Identifiers PostgreSQL
 * cannot store (bad UTF-8, NUL) are recorded as unknown. COMMON_OK, COMMON_RETRY (connection:
 * reconnect and call again) or COMMON_FATAL. */
common_status_t sink_write_failures(sink_t *sink, const sink_failure_t *f, int n, common_err_t *e);

/* Re-establishes the connection (one attempt; the caller backs off between attempts). */
common_status_t sink_reconnect(sink_t *sink, common_err_t *e);

void sink_free(sink_t *sink);

#endif
