#include "sink/owner.h"

#include <stdio.h>
#include <string.h>

#include <libpq-fe.h>

#include "sink/pgutil.h"
#include "sink/sink.h"

common_status_t sink_job_owner_check(const char *conninfo, const char *job_id, const char *tenant,
                                     char *err, size_t errlen) {
    common_status_t rc;
    PGconn *conn = sink_pg_connect(conninfo, &rc, err, errlen);
    if (!conn) return rc;
    const char *params[1] = {job_id};
    PGresult *res = PQexecParams(conn, "SELECT tenant FROM jobs WHERE job_id = $1", 1, NULL, params,
                                 NULL, NULL, 0);
    if (!res || PQresultStatus(res) != PGRES_TUPLES_OK) {
        const char *st = res ? PQresultErrorField(res, PG_DIAG_SQLSTATE) : NULL;
        rc = sink_pg_fail(conn, res,
                          st && strcmp(st, "42P01") == 0
                              ? "job owner: schema missing (run 'reclass migrate')"
                              : "job owner",
                          err, errlen);
        PQfinish(conn);
        /* a database that answers but cannot say (not migrated, no grant) is the user's to fix */
        return rc == COMMON_FATAL ? COMMON_USAGE : rc;
    }
    /* a job stored before tenants owned jobs (no tenant) goes to the first one that writes */
    rc = COMMON_OK;
    if (PQntuples(res) == 1 && !PQgetisnull(res, 0, 0) &&
        strcmp(PQgetvalue(res, 0, 0), tenant) != 0) {
        snprintf(err, errlen,
                 "job id %s belongs to another tenant (a job id is owned by the tenant that first "
                 "stored it): submit under a job id of your own",
                 job_id);
        rc = COMMON_USAGE;
    }
    PQclear(res);
    PQfinish(conn);
    return rc;
}
