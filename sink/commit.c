/* The closing statements of a write, queued as one libpq pipeline and read back after one
 * round trip: this writer's job progress (sink/progress.c), the batch telemetry, COMMIT, then
 * the completion stamp, which must follow COMMIT (migrations/006_progress.sql). PostgreSQL runs
 * them in order and, after an error, skips the rest up to the pipeline's Sync: a refused
 * statement leaves the transaction uncommitted exactly as when each waited for the one before
 * (COPY cannot join a pipeline, so the rows go before it). */
#include <libpq-fe.h>

#include "sink/copybin.h"
#include "sink/pgutil.h"
#include "sink/sink_int.h"

/* $1..$11: one array a column, element i of each being batch i. Not prepared: a statement
 * prepared on batches would make a session's set-up wait for whoever locks that table, and
 * planning it once a write costs nothing next to the rows. */
static const char SQL_BATCHES[] =
    "INSERT INTO batches (tickets, real_tokens, padded_tokens, wait_ms, compute_ms, backend,"
    " device_used_bytes, arena_bytes, encoder, device, worker)"
    " SELECT * FROM unnest($1::integer[], $2::bigint[], $3::bigint[], $4::real[], $5::real[],"
    " $6::text[], $7::bigint[], $8::bigint[], $9::smallint[], $10::smallint[], $11::text[])";

#define SINK_BATCH_ARRAYS 11

/* The batches' arrays in s->copy (free once the rows are stored). */
static common_status_t sink_batches_send(sink_t *s, int n, common_err_t *e) {
    const sink_batch_t *x = s->batches;
    sink_copybuf_t *b = &s->copy;
    sink_copybuf_reset(b);
    size_t off[SINK_BATCH_ARRAYS + 1];
    int has_host = 0, has_anon = 0; /* a batch run on no device, or of no worker: NULLs */
    for (int i = 0; i < n; i++) {
        has_host |= x[i].device < 0;
        has_anon |= !x[i].worker;
    }
    off[0] = b->len;
    sink_copybin_array(b, SINK_OID_INT4, n, 0);
    for (int i = 0; i < n; i++)
        sink_copybin_int4(b, x[i].tickets);
    off[1] = b->len;
    sink_copybin_array(b, SINK_OID_INT8, n, 0);
    for (int i = 0; i < n; i++)
        sink_copybin_int8(b, x[i].real_tokens);
    off[2] = b->len;
    sink_copybin_array(b, SINK_OID_INT8, n, 0);
    for (int i = 0; i < n; i++)
        sink_copybin_int8(b, x[i].padded_tokens);
    off[3] = b->len;
    sink_copybin_array(b, SINK_OID_FLOAT4, n, 0);
    for (int i = 0; i < n; i++)
        sink_copybin_float4(b, (float)x[i].wait_ms);
    off[4] = b->len;
    sink_copybin_array(b, SINK_OID_FLOAT4, n, 0);
    for (int i = 0; i < n; i++)
        sink_copybin_float4(b, (float)x[i].compute_ms);
    off[5] = b->len;
    sink_copybin_array(b, SINK_OID_TEXT, n, 0);
    for (int i = 0; i < n; i++)
        sink_copybin_text(b, x[i].backend ? x[i].backend : "unknown");
    off[6] = b->len;
    sink_copybin_array(b, SINK_OID_INT8, n, 0);
    for (int i = 0; i < n; i++)
        sink_copybin_int8(b, x[i].device_used_bytes);
    off[7] = b->len;
    sink_copybin_array(b, SINK_OID_INT8, n, 0);
    for (int i = 0; i < n; i++)
        sink_copybin_int8(b, x[i].arena_bytes);
    off[8] = b->len;
    sink_copybin_array(b, SINK_OID_INT2, n, 0);
    for (int i = 0; i < n; i++)
        sink_copybin_int2(b, (int16_t)x[i].encoder);
    off[9] = b->len;
    sink_copybin_array(b, SINK_OID_INT2, n, has_host);
    for (int i = 0; i < n; i++) {
        if (x[i].device < 0)
            sink_copybin_null(b);
        else
            sink_copybin_int2(b, (int16_t)x[i].device);
    }
    off[10] = b->len;
    sink_copybin_array(b, SINK_OID_TEXT, n, has_anon);
    for (int i = 0; i < n; i++)
        sink_copybin_text(b, x[i].worker); /* NULL: SQL NULL */
    off[11] = b->len;
    if (b->oom) return common_err_set(e, COMMON_RETRY, "batches: out of memory for %d rows", n);
    const char *vals[SINK_BATCH_ARRAYS];
    int lens[SINK_BATCH_ARRAYS], fmts[SINK_BATCH_ARRAYS];
    sink_copybin_params(b, off, SINK_BATCH_ARRAYS, vals, lens, fmts);
    if (PQsendQueryParams(s->conn, SQL_BATCHES, SINK_BATCH_ARRAYS, NULL, vals, lens, fmts, 0))
        return COMMON_OK;
    return sink_pg_err(e, sink_pg_classify(s->conn, NULL), "insert batches", s->conn, NULL);
}

/* What the pipeline's statements answer, in the order queued. */
typedef struct {
    const char *step;
    ExecStatusType want;
    int rows_refusable; /* its error may be the rows' (fail_state noted: COMMON_DATA) */
} sink_queued_t;

/* Reads the answers of the n statements queued and the Sync: the first error wins (those after
 * it come back PGRES_PIPELINE_ABORTED). A connection lost on the way ends the reading, leaving
 * the pipeline to the reconnect (PQreset leaves pipeline mode). */
static common_status_t sink_pipeline_collect(sink_t *s, const sink_queued_t *q, int n,
                                             common_err_t *e) {
    PGconn *conn = s->conn;
    common_status_t rc = COMMON_OK;
    for (int i = 0; i <= n; i++) {
        PGresult *res = PQgetResult(conn);
        if (!res) {
            if (rc == COMMON_OK)
                rc = sink_pg_err(e, sink_pg_classify(conn, NULL), i < n ? q[i].step : "sync", conn,
                                 NULL);
            return rc;
        }
        ExecStatusType st = PQresultStatus(res);
        ExecStatusType want = i < n ? q[i].want : PGRES_PIPELINE_SYNC;
        if (st != want && st != PGRES_PIPELINE_ABORTED && rc == COMMON_OK) {
            if (i < n && q[i].rows_refusable)
                rc = sink_fail(s, res, q[i].step, e);
            else
                rc = sink_pg_fail(conn, res, i < n ? q[i].step : "sync", e);
            res = NULL;
        }
        PQclear(res);
        if (PQstatus(conn) != CONNECTION_OK) return rc == COMMON_OK ? COMMON_RETRY : rc;
        /* each statement's answer ends with a NULL; the Sync's does not */
        if (i < n && (res = PQgetResult(conn)) != NULL) {
            PQclear(res);
            if (rc == COMMON_OK)
                rc = common_err_set(e, COMMON_RETRY, "%s: unexpected second result", q[i].step);
        }
    }
    if (!PQexitPipelineMode(conn) && rc == COMMON_OK)
        rc = sink_pg_err(e, sink_pg_classify(conn, NULL), "leave pipeline mode", conn, NULL);
    return rc;
}

common_status_t sink_commit_pipelined(sink_t *s, int n_rows, int n_batches, common_err_t *e) {
    PGconn *conn = s->conn;
    if (!PQenterPipelineMode(conn))
        return sink_pg_err(e, sink_pg_classify(conn, NULL), "enter pipeline mode", conn, NULL);
    sink_queued_t q[4];
    int n = 0;
    common_status_t rc = COMMON_OK;
    if (n_rows > 0 && (rc = sink_progress_send(s, e)) == COMMON_OK)
        q[n++] = (sink_queued_t){"update jobs", PGRES_COMMAND_OK, 1};
    /* telemetry is ours, not the records': a refused batches row is a bug */
    if (rc == COMMON_OK && n_batches > 0 && (rc = sink_batches_send(s, n_batches, e)) == COMMON_OK)
        q[n++] = (sink_queued_t){"insert batches", PGRES_COMMAND_OK, 0};
    if (rc == COMMON_OK) {
        /* deferred constraints (a job's owner) are checked here */
        if (PQsendQueryParams(conn, "COMMIT", 0, NULL, NULL, NULL, NULL, 0))
            q[n++] = (sink_queued_t){"commit", PGRES_COMMAND_OK, 1};
        else
            rc = sink_pg_err(e, sink_pg_classify(conn, NULL), "commit", conn, NULL);
    }
    if (rc == COMMON_OK && n_rows > 0 && (rc = sink_progress_complete_send(s, e)) == COMMON_OK)
        q[n++] = (sink_queued_t){"mark complete jobs", PGRES_TUPLES_OK, 0};
    if (rc == COMMON_OK) {
        if (PQpipelineSync(conn)) return sink_pipeline_collect(s, q, n, e);
        rc = sink_pg_err(e, sink_pg_classify(conn, NULL), "pipeline sync", conn, NULL);
    }
    /* A statement could not be queued (out of memory, a lost connection): read back what was,
     * before COMMIT or not at all, so the caller can roll back on a usable connection. */
    if (PQstatus(conn) == CONNECTION_OK && PQpipelineSync(conn)) {
        common_err_t ignored;
        for (int i = 0; i < n; i++)
            q[i].rows_refusable = 0;
        (void)sink_pipeline_collect(s, q, n, &ignored);
    }
    return rc;
}
