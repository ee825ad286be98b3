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
    common_err_t e;
    common_status_t rc = sink_pg_connect(db, conn, &e);
    if (rc != COMMON_OK) common_err_print(stderr, &e);
    return rc; /* COMMON_USAGE: a connection string to fix; else exit 1 */
}

PGresult *worker_cli_db_query(PGconn *conn, const char *sql, int n, const char *const *params,
                              char sqlstate[6]) {
    if (sqlstate) sqlstate[0] = 0;
    PGresult *r = PQexecParams(conn, sql, n, NULL, params, NULL, NULL, 0);
    if (r && PQresultStatus(r) == PGRES_TUPLES_OK) return r;
    const char *st = r ? PQresultErrorField(r, PG_DIAG_SQLSTATE) : NULL;
    if (sqlstate) snprintf(sqlstate, 6, "%s", st ? st : "");
    common_err_t e;
    sink_pg_err(&e, sink_pg_classify(conn, r), "query", conn, r);
    if (sink_pg_unmigrated(r)) common_err_hint(&e, "run reclass migrate --db URL");
    common_err_print(stderr, &e);
    PQclear(r);
    return NULL;
}

const char *worker_cli_db_str(const PGresult *r, int row, int col, const char *def) {
    return PQgetisnull(r, row, col) ? def : PQgetvalue(r, row, col);
}
