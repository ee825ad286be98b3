/* What the read-side commands (drift, report) share: connecting to PostgreSQL with a message
 * that says what to fix, and running one parameterised query. */
#ifndef RECLASS_WORKER_CLI_DB_H
#define RECLASS_WORKER_CLI_DB_H

#include <libpq-fe.h>

/* Connects to db for command cmd ("drift report"). Returns 0 with *conn set (the caller
 * PQfinish-es it), 2 when db is missing or malformed, 1 when the server cannot be reached;
 * the message is printed. */
int worker_cli_db_connect(const char *cmd, const char *db, PGconn **conn);

/* Runs sql with n text parameters (NULL entries are SQL NULL). Returns the tuples result (the
 * caller PQclear-s it), or NULL after printing "reclass CMD: <server message>"; *sqlstate
 * (when not NULL) gets the error's SQLSTATE, "" if none. */
PGresult *worker_cli_db_query(const char *cmd, PGconn *conn, const char *sql, int n,
                              const char *const *params, char sqlstate[6]);

/* PQgetvalue, or def when the value is NULL. */
const char *worker_cli_db_str(const PGresult *r, int row, int col, const char *def);

#endif
