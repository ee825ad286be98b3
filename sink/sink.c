/* PostgreSQL sink. A write is one transaction:
 *   COPY rows -> reclass_staging (binary COPY, streamed in chunks; a temp table, ON COMMIT
 *     DELETE ROWS: per session, never WAL-logged)
 *   insert staging into ticket_results and add the count of new rows to jobs.done, stamping
 *     completed_at once done reaches total (one prepared statement, two variants below)
 *   COPY batch telemetry -> batches
 *   COMMIT
 * Two variants of the insert, because redeliveries are rare but must be exact:
 *   fast:   plain INSERT, every staged row counts as new. Inside a savepoint: a row that
 *           already exists (or a ticket twice in one write) raises unique_violation, the
 *           savepoint is rolled back and the write falls back to
 *   upsert: DISTINCT ON the key, INSERT ... ON CONFLICT DO UPDATE, and only rows with
 *           xmax = 0 (the version this statement inserted; an ON CONFLICT update sets xmax)
 *           count as new.
 * After a fallback the sink stays on the upsert variant (redeliveries come in runs after a
 * rebalance) until a write finds nothing already stored. Either way a redelivered ticket
 * updates its row and never counts twice, so a write whose COMMIT outcome was lost can simply
 * be retried. The fast variant skips the conflict pre-check, the sort and the per-row RETURNING
 * (~1/4 of the server's time per row, see tests/bench/RESULTS-sink.md). Values travel only
 * through COPY and bound parameters. */
#include "sink/sink.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <libpq-fe.h>

#include "sink/copybin.h"
#include "sink/copybuf.h"
#include "sink/pgutil.h"
#include "sink/sink_stats.h"

struct sink {
    PGconn *conn;
    char *conninfo;            /* owned copy: reconnect after a failed PQreset starts from it */
    char *model;               /* owned; recorded in every result row */
    sink_copybuf_t copy;       /* one chunk of binary COPY data; reused across writes */
    const sink_result_t *rows; /* the write in progress (the caller's) */
    const sink_batch_t *batches;
    long last_inserted;
    long last_rows;
    int upsert_mode; /* 1 after a redelivery: skip the fast variant (see the top comment) */
    long fallbacks;  /* writes whose fast variant hit an existing row */
};

static const char SQL_STAGING[] =
    "CREATE TEMP TABLE IF NOT EXISTS reclass_staging ("
    " job_id text COLLATE \"C\", ticket_id text COLLATE \"C\", tenant text, job_total integer,"
    " label text COLLATE \"C\","
    " label_id integer, confidence real, top_k jsonb, tokens integer, truncated boolean,"
    " \"partition\" integer, \"offset\" bigint, enqueued_ms bigint) ON COMMIT DELETE ROWS";

static const char SQL_COPY_STAGING[] =
    "COPY reclass_staging (job_id, ticket_id, tenant, job_total, label, label_id, confidence,"
    " top_k, tokens, truncated, \"partition\", \"offset\", enqueued_ms) FROM STDIN (FORMAT binary)";

static const char SQL_COPY_BATCHES[] =
    "COPY batches (tickets, real_tokens, padded_tokens, wait_ms, compute_ms, backend,"
    " device_used_bytes, arena_bytes) FROM STDIN (FORMAT binary)";

#define STMT_FAST   "reclass_insert"
#define STMT_UPSERT "reclass_upsert"

/* Shared tail of both variants: $1 = model; "up" yields (job_id, inserted) per stored row.
 * jobs rows are written from what "up" returned, so ticket rows are always locked before the
 * job row, and in job_id order: two workers on one job queue instead of deadlocking. */
#define SQL_INSERT_COLS                                                                            \
    "INSERT INTO ticket_results AS t (job_id, ticket_id, tenant, label, label_id, confidence,"     \
    " top_k, tokens, truncated, model, \"partition\", \"offset\", enqueued_at)"                    \
    " SELECT job_id, ticket_id, tenant, label, label_id, confidence, top_k, tokens, truncated,"    \
    " $1::text, \"partition\", \"offset\", CASE WHEN enqueued_ms > 0"                              \
    " THEN timestamptz 'epoch' + enqueued_ms * interval '1 millisecond' END"
#define SQL_JOBS_TAIL                                                                              \
    "), fresh AS ("                                                                                \
    "  SELECT job_id, (count(*) FILTER (WHERE inserted))::integer AS n FROM up GROUP BY job_id"    \
    "), job_src AS ("                                                                              \
    "  SELECT job_id, max(tenant) AS tenant, max(job_total) AS total FROM reclass_staging"         \
    "  GROUP BY job_id"                                                                            \
    "), jobs_up AS ("                                                                              \
    "  INSERT INTO jobs AS j (job_id, tenant, total, done, completed_at)"                          \
    "  SELECT s.job_id, s.tenant, s.total, f.n,"                                                   \
    "    CASE WHEN s.total > 0 AND f.n >= s.total THEN now() END"                                  \
    "  FROM job_src s JOIN fresh f USING (job_id)"                                                 \
    "  ORDER BY s.job_id"                                                                          \
    "  ON CONFLICT (job_id) DO UPDATE SET"                                                         \
    "    done = j.done + excluded.done, total = excluded.total,"                                   \
    "    tenant = COALESCE(j.tenant, excluded.tenant), updated_at = now(),"                        \
    "    completed_at = COALESCE(j.completed_at, CASE WHEN excluded.total > 0"                     \
    "      AND j.done + excluded.done >= excluded.total THEN now() END)"                           \
    "  RETURNING 1"                                                                                \
    ") SELECT (SELECT count(*) FROM up WHERE inserted), (SELECT count(*) FROM up)"

static const char SQL_FAST[] = "WITH up AS (" SQL_INSERT_COLS " FROM reclass_staging"
                               " RETURNING t.job_id, true AS inserted" SQL_JOBS_TAIL;

/* DISTINCT ON: the same ticket twice in one write would make ON CONFLICT touch a row twice
 * (an error); the higher offset wins. */
static const char SQL_UPSERT[] =
    "WITH src AS ("
    "  SELECT DISTINCT ON (job_id, ticket_id) * FROM reclass_staging"
    "  ORDER BY job_id, ticket_id, \"offset\" DESC NULLS LAST"
    "), up AS (" SQL_INSERT_COLS " FROM src"
    "  ON CONFLICT (job_id, ticket_id) DO UPDATE SET"
    "    tenant = excluded.tenant, label = excluded.label, label_id = excluded.label_id,"
    "    confidence = excluded.confidence, top_k = excluded.top_k, tokens = excluded.tokens,"
    "    truncated = excluded.truncated, model = excluded.model,"
    "    \"partition\" = excluded.\"partition\", \"offset\" = excluded.\"offset\","
    "    enqueued_at = excluded.enqueued_at, classified_at = now()"
    "  RETURNING t.job_id, (t.xmax = 0) AS inserted" SQL_JOBS_TAIL;

/* Per-session state: a new connection has neither the temp table nor the statement.
 * SINK_OK lets the caller commit Kafka offsets, so a commit must survive a server crash: with
 * synchronous_commit=off the server acknowledges before the WAL is written and a crash loses
 * those rows for good (their offsets are already committed). Stronger settings (remote_apply
 * etc.) are left alone. */
static int sink_session_setup(sink_t *s, char *err, size_t errlen) {
    int rc = sink_pg_exec(s->conn,
                          "SELECT set_config('synchronous_commit', 'on', false)"
                          " WHERE current_setting('synchronous_commit') = 'off'",
                          PGRES_TUPLES_OK, "set synchronous_commit", err, errlen);
    if (rc != SINK_OK) return rc;
    rc = sink_pg_exec(s->conn, SQL_STAGING, PGRES_COMMAND_OK, "create staging table", err, errlen);
    if (rc != SINK_OK) return rc;
    PGresult *res = PQprepare(s->conn, STMT_UPSERT, SQL_UPSERT, 1, NULL);
    if (res && PQresultStatus(res) == PGRES_COMMAND_OK) {
        PQclear(res);
        res = PQprepare(s->conn, STMT_FAST, SQL_FAST, 1, NULL);
        if (res && PQresultStatus(res) == PGRES_COMMAND_OK) {
            PQclear(res);
            return SINK_OK;
        }
    }
    rc = sink_pg_classify(s->conn, res);
    const char *st = res ? PQresultErrorField(res, PG_DIAG_SQLSTATE) : NULL;
    if (st && (strcmp(st, "42P01") == 0 || strcmp(st, "42703") == 0))
        sink_pg_errmsg(err, errlen, "schema missing or outdated (run 'reclass migrate')", s->conn,
                       res);
    else
        sink_pg_errmsg(err, errlen, "prepare upsert", s->conn, res);
    PQclear(res);
    return rc;
}

int sink_init(const char *conninfo, const char *model, sink_t **out, char *err, size_t errlen) {
    *out = NULL;
    sink_t *s = calloc(1, sizeof(*s));
    if (!s || !(s->conninfo = strdup(conninfo ? conninfo : "")) ||
        !(s->model = strdup(model ? model : ""))) {
        snprintf(err, errlen, "sink: out of memory");
        sink_free(s);
        return SINK_FATAL;
    }
    sink_copybuf_init(&s->copy);
    int rc;
    s->conn = sink_pg_connect(s->conninfo, &rc, err, errlen);
    if (rc == SINK_OK) rc = sink_session_setup(s, err, errlen);
    if (rc != SINK_OK) {
        sink_free(s);
        return rc;
    }
    *out = s;
    return SINK_OK;
}

int sink_reconnect(sink_t *s, char *err, size_t errlen) {
    if (!s) {
        snprintf(err, errlen, "sink_reconnect: no sink");
        return SINK_FATAL;
    }
    if (s->conn) {
        PQreset(s->conn);
    } else {
        int rc;
        s->conn = sink_pg_connect(s->conninfo, &rc, err, errlen);
        if (rc != SINK_OK) return rc;
    }
    if (PQstatus(s->conn) != CONNECTION_OK) {
        sink_pg_errmsg(err, errlen, "reconnect to PostgreSQL", s->conn, NULL);
        return SINK_RETRY;
    }
    return sink_session_setup(s, err, errlen);
}

void sink_free(sink_t *s) {
    if (!s) return;
    if (s->conn) PQfinish(s->conn);
    sink_copybuf_free(&s->copy);
    free(s->conninfo);
    free(s->model);
    free(s);
}

long sink_last_inserted(const sink_t *s) {
    return s ? s->last_inserted : 0;
}

long sink_last_rows(const sink_t *s) {
    return s ? s->last_rows : 0;
}

long sink_fallbacks(const sink_t *s) {
    return s ? s->fallbacks : 0;
}

/* Field order and types match SQL_STAGING / SQL_COPY_STAGING exactly (binary COPY). */
static void sink_fmt_rows(sink_copybuf_t *b, const void *items, int from, int to) {
    const sink_result_t *rows = items;
    for (int i = from; i < to; i++) {
        const sink_result_t *r = &rows[i];
        sink_copybin_row(b, 13);
        sink_copybin_text(b, r->job_id);
        sink_copybin_text(b, r->ticket_id);
        sink_copybin_text(b, r->tenant);
        sink_copybin_int4(b, r->job_total);
        sink_copybin_text(b, r->label);
        sink_copybin_int4(b, r->label_id);
        sink_copybin_float4(b, r->confidence);
        sink_copybin_jsonb(b, r->top_k_json);
        sink_copybin_int4(b, r->tokens);
        sink_copybin_bool(b, r->truncated);
        sink_copybin_int4(b, r->partition);
        sink_copybin_int8(b, r->offset);
        sink_copybin_int8(b, r->enqueued_at_ms);
    }
}

/* Field order and types match the batches table (migrations/001_init.sql). */
static void sink_fmt_batches(sink_copybuf_t *b, const void *items, int from, int to) {
    const sink_batch_t *bs = items;
    for (int i = from; i < to; i++) {
        sink_copybin_row(b, 8);
        sink_copybin_int4(b, bs[i].tickets);
        sink_copybin_int8(b, bs[i].real_tokens);
        sink_copybin_int8(b, bs[i].padded_tokens);
        sink_copybin_float4(b, (float)bs[i].wait_ms);
        sink_copybin_float4(b, (float)bs[i].compute_ms);
        sink_copybin_text(b, bs[i].backend ? bs[i].backend : "unknown");
        sink_copybin_int8(b, bs[i].device_used_bytes);
        sink_copybin_int8(b, bs[i].arena_bytes);
    }
}

typedef void (*sink_fmt_fn)(sink_copybuf_t *b, const void *items, int from, int to);

/* Rows per chunk: the server parses one chunk while the next one is formatted. */
#define SINK_COPY_CHUNK 1024

/* Streams items [0, n) through one COPY FROM STDIN (binary) and collects its outcome; the
 * connection is left ready for the next command whatever happens. */
static int sink_copy_in(PGconn *conn, const char *sql, sink_copybuf_t *b, sink_fmt_fn fmt,
                        const void *items, int n, const char *step, char *err, size_t errlen) {
    PGresult *res = PQexec(conn, sql);
    if (!res || PQresultStatus(res) != PGRES_COPY_IN) {
        int rc = sink_pg_classify(conn, res);
        sink_pg_errmsg(err, errlen, step, conn, res);
        PQclear(res);
        return rc;
    }
    PQclear(res);
    int sent = 1, oom = 0;
    sink_copybuf_reset(b);
    sink_copybin_header(b);
    for (int from = 0; from < n && sent == 1; from += SINK_COPY_CHUNK) {
        int to = n - from < SINK_COPY_CHUNK ? n : from + SINK_COPY_CHUNK;
        fmt(b, items, from, to);
        if (to == n) sink_copybin_trailer(b);
        if (b->oom) {
            oom = 1;
            break;
        }
        sent = PQputCopyData(conn, b->data, (int)b->len);
        sink_copybuf_reset(b);
    }
    int ended = PQputCopyEnd(conn, sent == 1 && !oom ? NULL : "reclass: client aborted the COPY");
    int rc = SINK_OK;
    if (oom) {
        snprintf(err, errlen, "%s: out of memory formatting %d rows", step, n);
        rc = SINK_RETRY;
    } else if (sent != 1 || ended != 1) {
        rc = sink_pg_classify(conn, NULL);
        sink_pg_errmsg(err, errlen, step, conn, NULL);
    }
    /* Drain every result; a COPY_IN here means the end marker never got through, so there is
     * nothing more to wait for on this connection. */
    while ((res = PQgetResult(conn)) != NULL) {
        ExecStatusType st = PQresultStatus(res);
        if (st != PGRES_COMMAND_OK && rc == SINK_OK) {
            rc = sink_pg_classify(conn, res);
            sink_pg_errmsg(err, errlen, step, conn, res);
        }
        PQclear(res);
        if (st == PGRES_COPY_IN || st == PGRES_COPY_BOTH) {
            if (rc == SINK_OK) rc = SINK_RETRY;
            break;
        }
    }
    return rc;
}

static int sink_validate(const sink_result_t *rows, int n_rows, const sink_batch_t *batches,
                         int n_batches, char *err, size_t errlen) {
    if (n_rows < 0 || n_batches < 0 || (n_rows > 0 && !rows) || (n_batches > 0 && !batches)) {
        snprintf(err, errlen, "sink_write: invalid arguments (n_rows %d, n_batches %d)", n_rows,
                 n_batches);
        return SINK_FATAL;
    }
    for (int i = 0; i < n_rows; i++) {
        const char *missing = !rows[i].job_id      ? "job_id"
                              : !rows[i].ticket_id ? "ticket_id"
                              : !rows[i].label     ? "label"
                                                   : NULL;
        if (missing) {
            snprintf(err, errlen, "sink_write: row %d has no %s", i, missing);
            return SINK_FATAL;
        }
    }
    return SINK_OK;
}

/* Runs one variant; on success fills the counters. *sqlstate gets the error's SQLSTATE (or
 * "") so the caller can tell a unique violation from anything else. */
static int sink_exec_insert(sink_t *s, const char *stmt, char *sqlstate, char *err, size_t errlen) {
    const char *params[1] = {s->model};
    PGresult *res = PQexecPrepared(s->conn, stmt, 1, params, NULL, NULL, 0);
    sqlstate[0] = 0;
    if (!res || PQresultStatus(res) != PGRES_TUPLES_OK || PQntuples(res) != 1) {
        const char *st = res ? PQresultErrorField(res, PG_DIAG_SQLSTATE) : NULL;
        if (st) snprintf(sqlstate, 6, "%s", st);
        int rc = sink_pg_classify(s->conn, res);
        sink_pg_errmsg(err, errlen, "insert results", s->conn, res);
        PQclear(res);
        return rc;
    }
    s->last_inserted = atol(PQgetvalue(res, 0, 0));
    s->last_rows = atol(PQgetvalue(res, 0, 1));
    PQclear(res);
    return SINK_OK;
}

static int sink_insert_rows(sink_t *s, int n_rows, char *err, size_t errlen) {
    char st[6];
    if (!s->upsert_mode) {
        int rc = sink_pg_exec(s->conn, "SAVEPOINT reclass_fast", PGRES_COMMAND_OK, "savepoint", err,
                              errlen);
        if (rc != SINK_OK) return rc;
        rc = sink_exec_insert(s, STMT_FAST, st, err, errlen);
        if (rc == SINK_OK)
            return sink_pg_exec(s->conn, "RELEASE SAVEPOINT reclass_fast", PGRES_COMMAND_OK,
                                "release savepoint", err, errlen);
        if (strcmp(st, "23505") != 0) return rc; /* not a redelivery: a real failure */
        rc = sink_pg_exec(s->conn, "ROLLBACK TO SAVEPOINT reclass_fast", PGRES_COMMAND_OK,
                          "rollback to savepoint", err, errlen);
        if (rc != SINK_OK) return rc;
        s->upsert_mode = 1;
        s->fallbacks++;
        return sink_exec_insert(s, STMT_UPSERT, st, err, errlen);
    }
    int rc = sink_exec_insert(s, STMT_UPSERT, st, err, errlen);
    /* all new and no duplicates: the redelivery run is over */
    if (rc == SINK_OK && s->last_inserted == n_rows) s->upsert_mode = 0;
    return rc;
}

static int sink_write_tx(sink_t *s, int n_rows, int n_batches, char *err, size_t errlen) {
    int rc = sink_pg_exec(s->conn, "BEGIN", PGRES_COMMAND_OK, "begin", err, errlen);
    if (rc != SINK_OK) return rc;
    if (n_rows > 0) {
        rc = sink_copy_in(s->conn, SQL_COPY_STAGING, &s->copy, sink_fmt_rows, s->rows, n_rows,
                          "copy results", err, errlen);
        if (rc != SINK_OK) return rc;
        rc = sink_insert_rows(s, n_rows, err, errlen);
        if (rc != SINK_OK) return rc;
    }
    if (n_batches > 0) {
        rc = sink_copy_in(s->conn, SQL_COPY_BATCHES, &s->copy, sink_fmt_batches, s->batches,
                          n_batches, "copy batches", err, errlen);
        if (rc != SINK_OK) return rc;
    }
    return sink_pg_exec(s->conn, "COMMIT", PGRES_COMMAND_OK, "commit", err, errlen);
}

int sink_write(sink_t *s, const sink_result_t *rows, int n_rows, const sink_batch_t *batches,
               int n_batches, char *err, size_t errlen) {
    if (!s) {
        snprintf(err, errlen, "sink_write: no sink");
        return SINK_FATAL;
    }
    int rc = sink_validate(rows, n_rows, batches, n_batches, err, errlen);
    if (rc != SINK_OK) return rc;
    s->last_inserted = 0;
    s->last_rows = 0;
    if (n_rows == 0 && n_batches == 0) return SINK_OK;
    if (!s->conn || PQstatus(s->conn) != CONNECTION_OK) {
        snprintf(err, errlen, "sink_write: connection to PostgreSQL is down (reconnect first)");
        return SINK_RETRY;
    }
    s->rows = rows;
    s->batches = batches;
    rc = sink_write_tx(s, n_rows, n_batches, err, errlen);
    s->rows = NULL; /* the caller's, valid for this call only */
    s->batches = NULL;
    if (rc != SINK_OK) {
        sink_pg_rollback(s->conn);
        s->last_inserted = 0;
        s->last_rows = 0;
    }
    return rc;
}
