#include "worker/cli/db.h"

#include <stdio.h>
#include <string.h>

#include "common/err.h"
#include "sink/pgutil.h"
#include "sink/sink.h"

common_status_t worker_cli_db_connect(const char *db, PGconn **conn) {
    *conn = NULL;
    if (!db || !*db) {
        common_logf(stderr, "no database: pass --db URL or set RECLASS_DB\n");
        return COMMON_USAGE;
    }
    common_status_t rc = COMMON_OK;
    char err[1024];
    *conn = sink_pg_connect(db, &rc, err, sizeof err);
    if (*conn) return COMMON_OK;
    common_logf(stderr, "%s\n", err);
    return rc; /* COMMON_USAGE: a connection string to fix; else exit 1 */
}

PGresult *worker_cli_db_query(PGconn *conn, const char *sql, int n, const char *const *params,
                              char sqlstate[6]) {
    if (sqlstate) sqlstate[0] = 0;
    PGresult *r = PQexecParams(conn, sql, n, NULL, params, NULL, NULL, 0);
    if (r && PQresultStatus(r) == PGRES_TUPLES_OK) return r;
    const char *st = r ? PQresultErrorField(r, PG_DIAG_SQLSTATE) : NULL;
    if (sqlstate) snprintf(sqlstate, 6, "%s", st ? st : "");
    char err[1024];
    sink_pg_errmsg(err, sizeof err, "query", conn, r);
    const char *hint = sink_pg_unmigrated(r) ? " (run reclass migrate --db URL)" : "";
    common_logf(stderr, "%s%s\n", err, hint);
    PQclear(r);
    return NULL;
}

const char *worker_cli_db_str(const PGresult *r, int row, int col, const char *def) {
    return PQgetisnull(r, row, col) ? def : PQgetvalue(r, row, col);
}
