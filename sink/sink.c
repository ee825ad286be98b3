/* PostgreSQL sink. A write is one transaction:
 *   store the rows in ticket_results (one of the two paths below)
 *   add each job's count of tickets new to the table to this writer's own counter in
 *     job_progress (no other writer touches it: workers never wait on each other's progress),
 *     creating the job's job_info row on first sight (a prepared statement, arrays as bound
 *     parameters)
 *   batch telemetry -> batches
 *   COMMIT
 * then, in a statement of its own, stamps completed_at on the write's jobs whose summed
 * progress reached total (see migrations/006_progress.sql for why after COMMIT); a failure
 * there retries the whole write, which the upsert path makes harmless. Round trips: BEGIN,
 * the savepoint and the COPY target go as one message; the COPY takes two; progress,
 * batches, COMMIT and completion go as one pipeline (sink/commit.c).
 * Two paths for the rows, because redeliveries are rare but must be exact:
 *   fast:   binary COPY straight into ticket_results inside a savepoint; every row is new.
 *           The COPY names the month's partition when it has one: PostgreSQL then stores the
 *           rows a page at a time, not row by row (migrations/016_results_copy_target.sql).
 *           A ticket already stored (or twice in one write) raises unique_violation, and so
 *           does a row of a job first seen in an earlier month (the owner trigger refuses the
 *           default job_month, migrations/012_results_partitioned.sql): the savepoint is
 *           rolled back and the write takes
 *   upsert: binary COPY into reclass_staging (a temp table, ON COMMIT DELETE ROWS: per
 *           session, never WAL-logged), then INSERT ... SELECT DISTINCT ON the key ... ON
 *           CONFLICT DO UPDATE, counting per job only rows with writes = 1 (the version this
 *           statement inserted; an ON CONFLICT update adds one, also to a row that another
 *           writer inserted after this statement began).
 * After a fallback the sink stays on the upsert path (redeliveries come in runs after a
 * rebalance) until a write finds nothing already stored. Either way a redelivered ticket
 * updates its row and never counts twice, so a write whose COMMIT outcome was lost can simply
 * be retried. The fast path spends ~1/4 less server CPU per row than staging + INSERT SELECT
 * (tests/bench/RESULTS-sink.md). Values travel only through COPY and bound parameters. */
#include "sink/sink.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <libpq-fe.h>

#include "sink/copybin.h"
#include "sink/copybuf.h"
#include "sink/sink_conn.h"
#include "sink/sink_int.h"
#include "sink/pgutil.h"
#include "sink/tally.h"

/* Binary COPY: the field order and types of sink_fmt_results / sink_fmt_staging must match
 * these column lists exactly. The fast path's target (%s) is the month's partition
 * (ticket_results_copy_target) or ticket_results itself. */
static const char SQL_COPY_RESULTS[] =
    "COPY %s (job_id, ticket_id, tenant, label, label_id, confidence, top_k, tokens,"
    " truncated, model, \"partition\", \"offset\", enqueued_at) FROM STDIN (FORMAT binary)";

/* The fast path's opening, one message: the transaction, the savepoint, then the partition
 * its rows land in by default, or NULL: a COPY into it is stored a page at a time, one through
 * ticket_results a row at a time (migrations/016_results_copy_target.sql). */
static const char SQL_FAST_BEGIN[] =
    "BEGIN; SAVEPOINT reclass_fast; SELECT ticket_results_copy_target()";

static const char SQL_STAGING[] =
    "CREATE TEMP TABLE IF NOT EXISTS reclass_staging ("
    " job_id text COLLATE \"C\", ticket_id text COLLATE \"C\", tenant text, label text,"
    " label_id integer, confidence real, top_k jsonb, tokens integer, truncated boolean,"
    " \"partition\" integer, \"offset\" bigint, enqueued_at timestamptz) ON COMMIT DELETE ROWS";

static const char SQL_COPY_STAGING[] =
    "COPY reclass_staging (job_id, ticket_id, tenant, label, label_id, confidence, top_k,"
    " tokens, truncated, \"partition\", \"offset\", enqueued_at) FROM STDIN (FORMAT binary)";

#define STMT_UPSERT "reclass_upsert"

/* $1 = model. DISTINCT ON: the same ticket twice in one write would make ON CONFLICT touch a
 * row twice (an error); the higher offset wins. Sorting by the key also takes the row locks
 * in a stable order. job_month, the partition key (migrations/012_results_partitioned.sql), is
 * the month of the job's first record: a new job's is this transaction's, as the fast path's
 * COPY leaves it to the column's default. Returns per job: tickets new to the table, tickets
 * stored. */
static const char SQL_UPSERT[] =
    "WITH src AS ("
    "  SELECT DISTINCT ON (job_id, ticket_id) * FROM reclass_staging"
    "  ORDER BY job_id, ticket_id, \"offset\" DESC NULLS LAST"
    "), up AS ("
    "  INSERT INTO ticket_results AS t (job_id, ticket_id, tenant, label, label_id, confidence,"
    "    top_k, tokens, truncated, model, \"partition\", \"offset\", enqueued_at, job_month)"
    "  SELECT s.job_id, s.ticket_id, s.tenant, s.label, s.label_id, s.confidence, s.top_k,"
    "    s.tokens, s.truncated, $1::text, s.\"partition\", s.\"offset\", s.enqueued_at,"
    "    ticket_results_month(coalesce(j.first_seen, now()))"
    "  FROM src s LEFT JOIN job_info j ON j.job_id = s.job_id"
    "  ON CONFLICT (job_id, ticket_id, job_month) DO UPDATE SET"
    "    tenant = excluded.tenant, label = excluded.label, label_id = excluded.label_id,"
    "    confidence = excluded.confidence, top_k = excluded.top_k, tokens = excluded.tokens,"
    "    truncated = excluded.truncated, model = excluded.model,"
    "    \"partition\" = excluded.\"partition\", \"offset\" = excluded.\"offset\","
    "    enqueued_at = excluded.enqueued_at, classified_at = now(), writes = t.writes + 1"
    "  RETURNING t.job_id, (t.writes = 1) AS inserted"
    ") SELECT job_id, count(*) FILTER (WHERE inserted), count(*) FROM up GROUP BY job_id";

static common_status_t sink_prepare(sink_t *s, const char *name, const char *sql, int n_params,
                                    common_err_t *e) {
    PGresult *res = PQprepare(s->conn, name, sql, n_params, NULL);
    if (res && PQresultStatus(res) == PGRES_COMMAND_OK) {
        PQclear(res);
        return COMMON_OK;
    }
    if (!sink_pg_unmigrated(res)) return sink_pg_fail(s->conn, res, "prepare statements", e);
    common_status_t rc = sink_pg_fail(s->conn, res, "schema missing or outdated", e);
    common_err_hint(e, "run 'reclass migrate'");
    return rc;
}

/* Per-session state: a new connection has neither the temp table nor the statements.
 * COMMON_OK lets the caller commit Kafka offsets, so a commit must survive a server crash: with
 * synchronous_commit=off the server acknowledges before the WAL is written and a crash loses
 * those rows for good (their offsets are already committed). Stronger settings (remote_apply
 * etc.) are left alone. */
static common_status_t sink_session_setup(sink_t *s, common_err_t *e) {
    common_status_t rc = sink_pg_exec(s->conn,
                                      "SELECT set_config('synchronous_commit', 'on', false)"
                                      " WHERE current_setting('synchronous_commit') = 'off'",
                                      PGRES_TUPLES_OK, "set synchronous_commit", e);
    if (rc == COMMON_OK)
        rc = sink_pg_exec(s->conn, SQL_STAGING, PGRES_COMMAND_OK, "create staging table", e);
    if (rc == COMMON_OK) rc = sink_prepare(s, STMT_UPSERT, SQL_UPSERT, 1, e);
    if (rc == COMMON_OK) rc = sink_prepare(s, SINK_STMT_JOBS, sink_sql_jobs, 5, e);
    if (rc == COMMON_OK) rc = sink_prepare(s, SINK_STMT_COMPLETE, sink_sql_complete, 1, e);
    if (rc == COMMON_OK) rc = sink_prepare(s, SINK_STMT_FAILURE, sink_sql_failure, 8, e);
    return rc;
}

/* The model name goes into every row: one PostgreSQL cannot store would refuse them all. */
static common_status_t sink_check_model(sink_t *s, common_err_t *e) {
    const char *params[1] = {s->model};
    PGresult *res = PQexecParams(s->conn, "SELECT $1::text", 1, NULL, params, NULL, NULL, 0);
    if (res && PQresultStatus(res) == PGRES_TUPLES_OK) {
        PQclear(res);
        return COMMON_OK;
    }
    return sink_pg_fail(s->conn, res, "model name (recorded in every row)", e);
}

common_status_t sink_init(const char *conninfo, const char *model, sink_t **out, common_err_t *e) {
    *out = NULL;
    sink_t *s = calloc(1, sizeof(*s));
    if (!s || !(s->conninfo = strdup(conninfo ? conninfo : "")) ||
        !(s->model = strdup(model ? model : ""))) {
        sink_free(s);
        return common_err_set(e, COMMON_FATAL, "sink: out of memory");
    }
    /* one counter row per sink: writers of one process (sink_bench, tests) count apart too */
    static atomic_long n_sinks;
    char host[256] = "";
    if (gethostname(host, sizeof(host) - 1) != 0) snprintf(host, sizeof(host), "unknown");
    snprintf(s->writer, sizeof(s->writer), "%s:%ld:%ld", host, (long)getpid(),
             atomic_fetch_add(&n_sinks, 1));
    common_status_t rc = sink_pg_connect(s->conninfo, &s->conn, e);
    if (rc == COMMON_OK) rc = sink_check_model(s, e);
    if (rc == COMMON_OK) rc = sink_session_setup(s, e);
    if (rc != COMMON_OK) {
        sink_free(s);
        return rc;
    }
    *out = s;
    return COMMON_OK;
}

common_status_t sink_reconnect(sink_t *s, common_err_t *e) {
    if (!s) return common_err_set(e, COMMON_FATAL, "sink_reconnect: no sink");
    if (s->conn) {
        PQreset(s->conn);
    } else {
        common_status_t rc = sink_pg_connect(s->conninfo, &s->conn, e);
        if (rc != COMMON_OK) return rc;
    }
    if (PQstatus(s->conn) != CONNECTION_OK)
        return sink_pg_err(e, COMMON_RETRY, "reconnect to PostgreSQL", s->conn, NULL);
    return sink_session_setup(s, e);
}

void sink_free(sink_t *s) {
    if (!s) return;
    if (s->conn) PQfinish(s->conn);
    sink_copybuf_free(&s->copy);
    sink_copybuf_free(&s->params);
    sink_tally_free(&s->tally);
    free(s->rejects);
    free(s->work);
    free(s->work_row);
    free(s->conninfo);
    free(s->model);
    free(s);
}

PGconn *sink_conn(sink_t *s) {
    return s ? s->conn : NULL;
}

typedef void (*sink_fmt_fn)(const sink_t *s, sink_copybuf_t *b, int from, int to);

static void sink_fmt_enqueued(sink_copybuf_t *b, int64_t ms) {
    if (ms > 0)
        sink_copybin_timestamptz_ms(b, ms);
    else
        sink_copybin_null(b);
}

/* One result row; model != NULL for ticket_results (13 columns), NULL for the staging table
 * (12: the upsert adds the model). Column order follows the COPY column lists. */
static void sink_fmt_row(sink_copybuf_t *b, const sink_result_t *r, const char *model) {
    sink_copybin_row(b, model ? 13 : 12);
    sink_copybin_text(b, r->job_id);
    sink_copybin_text(b, r->ticket_id);
    sink_copybin_text(b, r->tenant);
    sink_copybin_text(b, r->label);
    sink_copybin_int4(b, r->label_id);
    sink_copybin_float4(b, r->confidence);
    sink_copybin_jsonb(b, r->top_k_json);
    sink_copybin_int4(b, r->tokens);
    sink_copybin_bool(b, r->truncated);
    if (model) sink_copybin_text(b, model);
    sink_copybin_int4(b, r->partition);
    sink_copybin_int8(b, r->offset);
    sink_fmt_enqueued(b, r->enqueued_at_ms);
}

static void sink_fmt_results(const sink_t *s, sink_copybuf_t *b, int from, int to) {
    for (int i = from; i < to; i++)
        sink_fmt_row(b, s->tally.order[i], s->model);
}

static void sink_fmt_staging(const sink_t *s, sink_copybuf_t *b, int from, int to) {
    for (int i = from; i < to; i++)
        sink_fmt_row(b, &s->rows[i], NULL);
}

/* Remembers why a statement of the write failed (sink_write_once tells data errors apart). */
static void sink_note_failure(sink_t *s, const PGresult *res) {
    const char *st = res ? PQresultErrorField(res, PG_DIAG_SQLSTATE) : NULL;
    const char *con = res ? PQresultErrorField(res, PG_DIAG_CONSTRAINT_NAME) : NULL;
    snprintf(s->fail_state, sizeof(s->fail_state), "%s", st ? st : "");
    snprintf(s->fail_constraint, sizeof(s->fail_constraint), "%s", con ? con : "");
}

common_status_t sink_fail(sink_t *s, PGresult *res, const char *step, common_err_t *e) {
    sink_note_failure(s, res);
    return sink_pg_fail(s->conn, res, step, e);
}

/* Rows per chunk: the server parses one chunk while the next one is formatted. */
#define SINK_COPY_CHUNK 1024

/* Streams items [0, n) through one COPY FROM STDIN (binary) and collects its outcome; the
 * connection is left ready for the next command whatever happens. *sqlstate (6 bytes) gets
 * the server's error code, "" when there is none. */
static common_status_t sink_copy_in(sink_t *s, const char *sql, sink_fmt_fn fmt, int n,
                                    const char *step, char *sqlstate, common_err_t *e) {
    PGconn *conn = s->conn;
    sqlstate[0] = 0;
    PGresult *res = PQexec(conn, sql);
    if (!res || PQresultStatus(res) != PGRES_COPY_IN) {
        return sink_pg_fail(conn, res, step, e);
    }
    PQclear(res);
    sink_copybuf_t *b = &s->copy;
    int sent = 1, oom = 0;
    sink_copybuf_reset(b);
    sink_copybin_header(b);
    for (int from = 0; from < n && sent == 1; from += SINK_COPY_CHUNK) {
        int to = n - from < SINK_COPY_CHUNK ? n : from + SINK_COPY_CHUNK;
        fmt(s, b, from, to);
        if (to == n) sink_copybin_trailer(b);
        if (b->oom) {
            oom = 1;
            break;
        }
        sent = PQputCopyData(conn, b->data, (int)b->len);
        sink_copybuf_reset(b);
    }
    int ended = PQputCopyEnd(conn, sent == 1 && !oom ? NULL : "reclass: client aborted the COPY");
    common_status_t rc = COMMON_OK;
    if (oom)
        rc = common_err_set(e, COMMON_RETRY, "%s: out of memory formatting %d rows", step, n);
    else if (sent != 1 || ended != 1)
        rc = sink_pg_err(e, sink_pg_classify(conn, NULL), step, conn, NULL);
    /* Drain every result; a COPY_IN here means the end marker never got through, so there is
     * nothing more to wait for on this connection. */
    while ((res = PQgetResult(conn)) != NULL) {
        ExecStatusType st = PQresultStatus(res);
        if (st != PGRES_COMMAND_OK && rc == COMMON_OK) {
            const char *code = PQresultErrorField(res, PG_DIAG_SQLSTATE);
            if (code) snprintf(sqlstate, 6, "%s", code);
            sink_note_failure(s, res);
            rc = sink_pg_err(e, sink_pg_classify(conn, res), step, conn, res);
        }
        PQclear(res);
        if (st == PGRES_COPY_IN || st == PGRES_COPY_BOTH) {
            if (rc == COMMON_OK) rc = COMMON_RETRY;
            break;
        }
    }
    return rc;
}

/* Upsert path: staging, then the prepared upsert; fills each job's fresh count. */
static common_status_t sink_upsert_rows(sink_t *s, int n_rows, common_err_t *e) {
    char st[6];
    common_status_t rc = sink_copy_in(s, SQL_COPY_STAGING, sink_fmt_staging, n_rows,
                                      "copy results (staging)", st, e);
    if (rc != COMMON_OK) return rc;
    const char *params[1] = {s->model};
    PGresult *res = PQexecPrepared(s->conn, STMT_UPSERT, 1, params, NULL, NULL, 0);
    if (!res || PQresultStatus(res) != PGRES_TUPLES_OK) {
        return sink_fail(s, res, "upsert results", e);
    }
    s->last_inserted = s->last_rows = 0;
    for (int i = 0; i < PQntuples(res); i++) {
        sink_job_t *j = sink_tally_find(&s->tally, PQgetvalue(res, i, 0));
        long fresh = atol(PQgetvalue(res, i, 1));
        if (j) j->fresh = (int32_t)fresh;
        s->last_inserted += fresh;
        s->last_rows += atol(PQgetvalue(res, i, 2));
    }
    PQclear(res);
    return COMMON_OK;
}

/* Opens the transaction and stores the rows: the fast path, or the upsert path when the sink
 * is on it or the fast path met a row already stored. */
static common_status_t sink_begin_store_rows(sink_t *s, int n_rows, common_err_t *e) {
    if (s->upsert_mode) {
        common_status_t rc = sink_pg_exec(s->conn, "BEGIN", PGRES_COMMAND_OK, "begin", e);
        if (rc == COMMON_OK) rc = sink_upsert_rows(s, n_rows, e);
        /* all new and no duplicates: the redelivery run is over */
        if (rc == COMMON_OK && s->last_inserted == n_rows) s->upsert_mode = 0;
        return rc;
    }
    /* one result per statement; PQexec keeps the last, or the error that ended the message */
    PGresult *res = PQexec(s->conn, SQL_FAST_BEGIN);
    if (!res || PQresultStatus(res) != PGRES_TUPLES_OK)
        return sink_fail(s, res, "begin (copy target)", e);
    /* a name from the catalog, quoted as regclass output quotes it; copy_sql holds the SQL
     * above with PostgreSQL's longest qualified name */
    const int part = PQntuples(res) == 1 && !PQgetisnull(res, 0, 0);
    snprintf(s->copy_sql, sizeof(s->copy_sql), SQL_COPY_RESULTS,
             part ? PQgetvalue(res, 0, 0) : "ticket_results");
    PQclear(res);
    char st[6];
    common_status_t rc =
        sink_copy_in(s, s->copy_sql, sink_fmt_results, n_rows, "copy results", st, e);
    if (rc == COMMON_OK) {
        /* the savepoint stays open: COMMIT ends it with the transaction, one statement less */
        for (int i = 0; i < s->tally.n_jobs; i++)
            s->tally.jobs[i].fresh = s->tally.jobs[i].rows;
        s->last_inserted = s->last_rows = n_rows;
        return COMMON_OK;
    }
    if (strcmp(st, "23505") != 0) return rc; /* not a redelivery: a real failure */
    rc = sink_pg_exec(s->conn, "ROLLBACK TO SAVEPOINT reclass_fast", PGRES_COMMAND_OK,
                      "rollback to savepoint", e);
    if (rc != COMMON_OK) return rc;
    s->upsert_mode = 1;
    s->fallbacks++;
    return sink_upsert_rows(s, n_rows, e);
}

static common_status_t sink_write_tx(sink_t *s, int n_rows, int n_batches, common_err_t *e) {
    common_status_t rc = n_rows > 0 ? sink_begin_store_rows(s, n_rows, e)
                                    : sink_pg_exec(s->conn, "BEGIN", PGRES_COMMAND_OK, "begin", e);
    if (rc != COMMON_OK) return rc;
    return sink_commit_pipelined(s, n_rows, n_batches, e);
}

common_status_t sink_write_once(sink_t *s, const sink_result_t *rows, int n_rows,
                                const sink_batch_t *batches, int n_batches, common_err_t *e) {
    s->last_inserted = 0;
    s->last_rows = 0;
    s->fail_state[0] = 0;
    s->fail_constraint[0] = 0;
    if (n_rows == 0 && n_batches == 0) return COMMON_OK;
    if (!s->conn || PQstatus(s->conn) != CONNECTION_OK)
        return common_err_set(e, COMMON_RETRY,
                              "sink_write: connection to PostgreSQL is down (reconnect first)");
    if (sink_tally_build(&s->tally, rows, n_rows) != 0)
        return common_err_set(e, COMMON_RETRY, "sink_write: out of memory for %d rows", n_rows);
    s->rows = rows;
    s->batches = batches;
    common_status_t rc = sink_write_tx(s, n_rows, n_batches, e);
    s->rows = NULL; /* the caller's, valid for this call only */
    s->batches = NULL;
    if (rc != COMMON_OK) {
        sink_pg_rollback(s->conn);
        s->last_inserted = 0;
        s->last_rows = 0;
        if (rc == COMMON_FATAL && sink_pg_data_error(s->fail_state)) rc = COMMON_DATA;
    }
    return rc;
}
