/* libpq helpers shared by the sink and the migrator: connecting, mapping a failure to
 * COMMON_RETRY / COMMON_FATAL, and one-line error messages. */
#ifndef RECLASS_SINK_PGUTIL_H
#define RECLASS_SINK_PGUTIL_H

#include <stddef.h>

#include <libpq-fe.h>

#include "common/err.h"
#include "common/status.h"

/* Connects with conninfo (libpq key=value string or URL, passed through unchanged, so sslmode
 * and friends work), notices silenced, client_encoding UTF8, into *conn. COMMON_OK, else *conn
 * is NULL and e says why (secrets redacted): COMMON_USAGE for a malformed conninfo,
 * COMMON_RETRY when the server could not be reached. */
common_status_t sink_pg_connect(const char *conninfo, PGconn **conn, common_err_t *e);

/* COMMON_RETRY for a lost connection, admin/crash shutdown, serialization failure or deadlock;
 * COMMON_FATAL otherwise. res may be NULL (libpq could not even build a result). */
common_status_t sink_pg_classify(PGconn *conn, const PGresult *res);

/* 1 when sqlstate says the statement failed on the data it was given, so the same rows fail
 * again however often they are retried and other rows need not: class 22 (data exception),
 * 23 (integrity constraint violation), 54 (program limit exceeded, e.g. an index row too big). */
int sink_pg_data_error(const char *sqlstate);

/* 1 when res failed because the database lacks a migration: an undefined table (SQLSTATE
 * 42P01), column (42703) or function (42883). */
int sink_pg_unmigrated(const PGresult *res);

/* A failure as a common_err_t: how PostgreSQL's error fields map onto it. code as given (the
 * caller's, usually sink_pg_classify's); message "<step>: <server message> (SQLSTATE xxxxx)",
 * the line that names the failure; detail the server's DETAIL, then its CONTEXT after
 * "context: " (both are what was seen: the row, the function and line); hint its HINT (what to
 * do). No server message (a lost connection, libpq out of memory): message is "<step>:
 * <libpq's message>", detail and hint empty. Each field on one line, cut to its size. Returns
 * code. Where text is needed (a dead letter's reason, a log line): common_err_line. */
common_status_t sink_pg_err(common_err_t *e, common_status_t code, const char *step, PGconn *conn,
                            const PGresult *res);

/* The failure path of a statement: classifies it (COMMON_RETRY/COMMON_FATAL), fills e
 * (sink_pg_err) and clears res (which may be NULL). Returns the class. */
common_status_t sink_pg_fail(PGconn *conn, PGresult *res, const char *step, common_err_t *e);

/* Runs sql without parameters: COMMON_OK when it returned status want, else sink_pg_fail's
 * answer. The result is always cleared. */
common_status_t sink_pg_exec(PGconn *conn, const char *sql, ExecStatusType want, const char *step,
                             common_err_t *e);

/* Best-effort ROLLBACK when a transaction is open and the connection is still up. */
void sink_pg_rollback(PGconn *conn);

#endif
