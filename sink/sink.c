/* PostgreSQL sink. A write is one transaction:
 *   COPY rows -> reclass_staging (temp, ON COMMIT DELETE ROWS: per session, never WAL-logged)
 *   one prepared statement: upsert staging into ticket_results, count the rows that were new
 *     (xmax = 0 on a row version this statement inserted; an ON CONFLICT update sets xmax),
 *     add those counts to jobs.done and stamp completed_at once done reaches total
 *   COPY batch telemetry -> batches
 *   COMMIT
 * A redelivered ticket therefore updates its row but never counts twice, so a write whose
 * COMMIT outcome was lost can simply be retried. Values travel only through COPY and bound
 * parameters. */
#include "sink/sink.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <libpq-fe.h>

#include "sink/copybuf.h"
#include "sink/pgutil.h"
#include "sink/sink_stats.h"

struct sink {
    PGconn *conn;
    char *conninfo;            /* owned copy: reconnect after a failed PQreset starts from it */
    char *model;               /* owned; recorded in every result row */
    sink_copybuf_t rows_copy;  /* COPY text of the rows being written; reused */
    sink_copybuf_t batch_copy; /* COPY text of the batch telemetry; reused */
    long last_inserted;
    long last_rows;
};

static const char SQL_STAGING[] =
    "CREATE TEMP TABLE IF NOT EXISTS reclass_staging ("
    " job_id text, ticket_id text, tenant text, job_total integer, label text,"
    " label_id integer, confidence real, top_k jsonb, tokens integer, truncated boolean,"
    " \"partition\" integer, \"offset\" bigint, enqueued_ms bigint) ON COMMIT DELETE ROWS";

static const char SQL_COPY_STAGING[] =
    "COPY reclass_staging (job_id, ticket_id, tenant, job_total, label, label_id, confidence,"
    " top_k, tokens, truncated, \"partition\", \"offset\", enqueued_ms) FROM STDIN";

static const char SQL_COPY_BATCHES[] =
    "COPY batches (tickets, real_tokens, padded_tokens, wait_ms, compute_ms, backend,"
    " device_used_bytes, arena_bytes) FROM STDIN";

#define STMT_UPSERT "reclass_upsert"

/* DISTINCT ON: the same ticket twice in one write would make ON CONFLICT touch a row twice
 * (an error); the higher offset wins. Sorting by the key also takes row locks in a stable
 * order, so two workers writing one job cannot deadlock on ticket_results, and jobs rows are
 * inserted in job_id order for the same reason. $1 = model. */
static const char SQL_UPSERT[] =
    "WITH src AS ("
    "  SELECT DISTINCT ON (job_id, ticket_id) * FROM reclass_staging"
    "  ORDER BY job_id, ticket_id, \"offset\" DESC NULLS LAST"
    "), up AS ("
    "  INSERT INTO ticket_results AS t (job_id, ticket_id, tenant, label, label_id, confidence,"
    "    top_k, tokens, truncated, model, \"partition\", \"offset\", enqueued_at)"
    "  SELECT job_id, ticket_id, tenant, label, label_id, confidence, top_k, tokens, truncated,"
    "    $1::text, \"partition\", \"offset\","
    "    CASE WHEN enqueued_ms > 0"
    "      THEN timestamptz 'epoch' + enqueued_ms * interval '1 millisecond' END"
    "  FROM src"
    "  ON CONFLICT (job_id, ticket_id) DO UPDATE SET"
    "    tenant = excluded.tenant, label = excluded.label, label_id = excluded.label_id,"
    "    confidence = excluded.confidence, top_k = excluded.top_k, tokens = excluded.tokens,"
    "    truncated = excluded.truncated, model = excluded.model,"
    "    \"partition\" = excluded.\"partition\", \"offset\" = excluded.\"offset\","
    "    enqueued_at = excluded.enqueued_at, classified_at = now()"
    "  RETURNING t.job_id, (t.xmax = 0) AS inserted"
    "), fresh AS ("
    "  SELECT job_id, (count(*) FILTER (WHERE inserted))::integer AS n FROM up GROUP BY job_id"
    "), job_src AS ("
    "  SELECT job_id, max(tenant) AS tenant, max(job_total) AS total FROM src GROUP BY job_id"
    "), jobs_up AS ("
    "  INSERT INTO jobs AS j (job_id, tenant, total, done, completed_at)"
    "  SELECT s.job_id, s.tenant, s.total, f.n,"
    "    CASE WHEN s.total > 0 AND f.n >= s.total THEN now() END"
    "  FROM job_src s JOIN fresh f USING (job_id)"
    "  ORDER BY s.job_id"
    "  ON CONFLICT (job_id) DO UPDATE SET"
    "    done = j.done + excluded.done, total = excluded.total,"
    "    tenant = COALESCE(j.tenant, excluded.tenant), updated_at = now(),"
    "    completed_at = COALESCE(j.completed_at, CASE WHEN excluded.total > 0"
    "      AND j.done + excluded.done >= excluded.total THEN now() END)"
    "  RETURNING 1"
    ") SELECT (SELECT count(*) FROM up WHERE inserted), (SELECT count(*) FROM up)";

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
        return SINK_OK;
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
    sink_copybuf_init(&s->rows_copy);
    sink_copybuf_init(&s->batch_copy);
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
    sink_copybuf_free(&s->rows_copy);
    sink_copybuf_free(&s->batch_copy);
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

static void sink_format_rows(sink_copybuf_t *b, const sink_result_t *rows, int n) {
    sink_copybuf_reset(b);
    for (int i = 0; i < n; i++) {
        const sink_result_t *r = &rows[i];
        sink_copybuf_text(b, r->job_id);
        sink_copybuf_text(b, r->ticket_id);
        sink_copybuf_text(b, r->tenant);
        sink_copybuf_int(b, r->job_total);
        sink_copybuf_text(b, r->label);
        sink_copybuf_int(b, r->label_id);
        sink_copybuf_float(b, r->confidence);
        sink_copybuf_text(b, r->top_k_json);
        sink_copybuf_int(b, r->tokens);
        sink_copybuf_bool(b, r->truncated);
        sink_copybuf_int(b, r->partition);
        sink_copybuf_int(b, r->offset);
        sink_copybuf_int(b, r->enqueued_at_ms);
        sink_copybuf_end_row(b);
    }
}

static void sink_format_batches(sink_copybuf_t *b, const sink_batch_t *bs, int n) {
    sink_copybuf_reset(b);
    for (int i = 0; i < n; i++) {
        sink_copybuf_int(b, bs[i].tickets);
        sink_copybuf_int(b, bs[i].real_tokens);
        sink_copybuf_int(b, bs[i].padded_tokens);
        sink_copybuf_float(b, bs[i].wait_ms);
        sink_copybuf_float(b, bs[i].compute_ms);
        sink_copybuf_text(b, bs[i].backend ? bs[i].backend : "unknown");
        sink_copybuf_int(b, bs[i].device_used_bytes);
        sink_copybuf_int(b, bs[i].arena_bytes);
        sink_copybuf_end_row(b);
    }
}

/* Streams one COPY FROM STDIN and collects its outcome; the connection is left ready for the
 * next command whatever happens. */
static int sink_copy_in(PGconn *conn, const char *sql, const sink_copybuf_t *b, const char *step,
                        char *err, size_t errlen) {
    PGresult *res = PQexec(conn, sql);
    if (!res || PQresultStatus(res) != PGRES_COPY_IN) {
        int rc = sink_pg_classify(conn, res);
        sink_pg_errmsg(err, errlen, step, conn, res);
        PQclear(res);
        return rc;
    }
    PQclear(res);
    const size_t chunk = 1 << 20;
    int sent = 1;
    for (size_t off = 0; off < b->len && sent == 1; off += chunk) {
        size_t n = b->len - off < chunk ? b->len - off : chunk;
        sent = PQputCopyData(conn, b->data + off, (int)n);
    }
    int ended = PQputCopyEnd(conn, sent == 1 ? NULL : "reclass: client send failed");
    int rc = SINK_OK;
    if (sent != 1 || ended != 1) {
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

static int sink_write_tx(sink_t *s, int n_rows, int n_batches, char *err, size_t errlen) {
    int rc = sink_pg_exec(s->conn, "BEGIN", PGRES_COMMAND_OK, "begin", err, errlen);
    if (rc != SINK_OK) return rc;
    if (n_rows > 0) {
        rc = sink_copy_in(s->conn, SQL_COPY_STAGING, &s->rows_copy, "copy results", err, errlen);
        if (rc != SINK_OK) return rc;
        const char *params[1] = {s->model};
        PGresult *res = PQexecPrepared(s->conn, STMT_UPSERT, 1, params, NULL, NULL, 0);
        if (!res || PQresultStatus(res) != PGRES_TUPLES_OK || PQntuples(res) != 1) {
            rc = sink_pg_classify(s->conn, res);
            sink_pg_errmsg(err, errlen, "upsert results", s->conn, res);
            PQclear(res);
            return rc;
        }
        s->last_inserted = atol(PQgetvalue(res, 0, 0));
        s->last_rows = atol(PQgetvalue(res, 0, 1));
        PQclear(res);
    }
    if (n_batches > 0) {
        rc = sink_copy_in(s->conn, SQL_COPY_BATCHES, &s->batch_copy, "copy batches", err, errlen);
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
    /* Formatted before BEGIN so the transaction stays open only for the server's work. */
    sink_format_rows(&s->rows_copy, rows, n_rows);
    sink_format_batches(&s->batch_copy, batches, n_batches);
    if (s->rows_copy.oom || s->batch_copy.oom) {
        snprintf(err, errlen, "sink_write: out of memory formatting %d rows", n_rows);
        return SINK_RETRY;
    }
    rc = sink_write_tx(s, n_rows, n_batches, err, errlen);
    if (rc != SINK_OK) {
        sink_pg_rollback(s->conn);
        s->last_inserted = 0;
        s->last_rows = 0;
    }
    return rc;
}
