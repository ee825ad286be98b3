#include "sink/owner.h"

#include <stdio.h>
#include <string.h>

#include <libpq-fe.h>

#include "sink/pgutil.h"
#include "sink/sink.h"

common_status_t sink_job_owner_check(const char *conninfo, const char *job_id, const char *tenant,
                                     common_err_t *e) {
    PGconn *conn;
    common_status_t rc = sink_pg_connect(conninfo, &conn, e);
    if (rc != COMMON_OK) return rc;
    const char *params[1] = {job_id};
    PGresult *res = PQexecParams(conn, "SELECT tenant FROM jobs WHERE job_id = $1", 1, NULL, params,
                                 NULL, NULL, 0);
    if (!res || PQresultStatus(res) != PGRES_TUPLES_OK) {
        rc = sink_pg_classify(conn, res);
        /* a database that answers but cannot say (not migrated, no grant) is the user's to fix */
        if (rc == COMMON_FATAL) rc = COMMON_USAGE;
        const int unmigrated = sink_pg_unmigrated(res);
        sink_pg_err(e, rc, unmigrated ? "job owner: schema missing" : "job owner", conn, res);
        if (unmigrated) common_err_hint(e, "run 'reclass migrate'");
        PQclear(res);
        PQfinish(conn);
        return rc;
    }
    /* a job stored before tenants owned jobs (no tenant) goes to the first one that writes */
    rc = COMMON_OK;
    if (PQntuples(res) == 1 && !PQgetisnull(res, 0, 0) &&
        strcmp(PQgetvalue(res, 0, 0), tenant) != 0) {
        common_err_set(e, COMMON_USAGE,
                       "job id %s belongs to another tenant (a job id is owned by the tenant that "
                       "first stored it)",
                       job_id);
        common_err_hint(e, "submit under a job id of your own");
        rc = COMMON_USAGE;
    }
    PQclear(res);
    PQfinish(conn);
    return rc;
}
