/* What the read-side commands (drift, report) share: connecting to PostgreSQL with a message
 * that says what to fix, and running one parameterised query. */
#ifndef RECLASS_WORKER_CLI_DB_H
#define RECLASS_WORKER_CLI_DB_H

#include <libpq-fe.h>

#include "common/status.h"

/* Connects to db. COMMON_OK with *conn set (the caller PQfinish-es it), COMMON_USAGE when db
 * is missing or malformed, another status when the server cannot be reached; the message is
 * printed (common_logf). */
common_status_t worker_cli_db_connect(const char *db, PGconn **conn);

/* Runs sql with n text parameters (NULL entries are SQL NULL). Returns the tuples result (the
 * caller PQclear-s it), or NULL after printing the server's message (common_logf); *sqlstate
 * (when not NULL) gets the error's SQLSTATE, "" if none. */
PGresult *worker_cli_db_query(PGconn *conn, const char *sql, int n, const char *const *params,
                              char sqlstate[6]);

/* PQgetvalue, or def when the value is NULL. */
const char *worker_cli_db_str(const PGresult *r, int row, int col, const char *def);

#endif
