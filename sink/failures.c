/* Dead letters counted against their jobs (migrations/008_job_failures.sql): one statement a
 * failure, each its own transaction (failures are rare; each is idempotent on its record, so a
 * retried call records nothing twice), then the completion stamp of their jobs. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include <libpq-fe.h>

#include "sink/pgutil.h"
#include "sink/sink_int.h"

/* $1 topic, $2 partition, $3 offset, $4 job, $5 tenant, $6 ticket, $7 job_total (NULL:
 * unknown), $8 reason. */
const char sink_sql_failure[] =
    "SELECT job_failure_record($1::text, $2::integer, $3::bigint, $4::text, $5::text, $6::text,"
    " $7::integer, $8::text)";

static const char SQL_COMPLETE_ONE[] = "SELECT job_complete(ARRAY[$1::text])";

/* One failure; bare: without the record's own words (ids PostgreSQL refused as data). */
static common_status_t record_one(sink_t *s, const sink_failure_t *f, int bare, common_err_t *e) {
    char part[16], off[24], total[16];
    snprintf(part, sizeof part, "%" PRId32, f->partition);
    snprintf(off, sizeof off, "%" PRId64, f->offset);
    snprintf(total, sizeof total, "%" PRId32, f->job_total);
    const char *v[8] = {f->topic ? f->topic : "",
                        part,
                        off,
                        bare ? NULL : f->job_id,
                        bare ? NULL : f->tenant,
                        bare ? NULL : f->ticket_id,
                        f->job_total > 0 && !bare ? total : NULL,
                        bare ? "the dead letter's reason could not be stored (see its headers)"
                             : (f->reason ? f->reason : "dead-lettered")};
    PGresult *res = PQexecPrepared(s->conn, SINK_STMT_FAILURE, 8, v, NULL, NULL, 0);
    if (res && PQresultStatus(res) == PGRES_TUPLES_OK) {
        PQclear(res);
        return COMMON_OK;
    }
    const char *st = res ? PQresultErrorField(res, PG_DIAG_SQLSTATE) : NULL;
    if (!bare && sink_pg_data_error(st)) {
        PQclear(res);
        return record_one(s, f, 1, e);
    }
    return sink_pg_fail(s->conn, res, "record a dead letter", e);
}

common_status_t sink_write_failures(sink_t *s, const sink_failure_t *f, int n, common_err_t *e) {
    if (!s || !s->conn || PQstatus(s->conn) != CONNECTION_OK)
        return common_err_set(e, COMMON_RETRY,
                              "sink_write_failures: connection to PostgreSQL is down");
    for (int i = 0; i < n; i++) {
        common_status_t rc = record_one(s, &f[i], 0, e);
        if (rc != COMMON_OK) return rc;
    }
    for (int i = 0; i < n; i++) {
        if (!f[i].job_id) continue;
        int seen = 0;
        for (int k = 0; k < i && !seen; k++)
            seen = f[k].job_id && strcmp(f[k].job_id, f[i].job_id) == 0;
        if (seen) continue;
        const char *v[1] = {f[i].job_id};
        PGresult *res = PQexecParams(s->conn, SQL_COMPLETE_ONE, 1, NULL, v, NULL, NULL, 0);
        if (res && PQresultStatus(res) == PGRES_TUPLES_OK) {
            PQclear(res);
            continue;
        }
        /* a job id PostgreSQL refuses was recorded as unknown: no job to complete */
        if (res && sink_pg_data_error(PQresultErrorField(res, PG_DIAG_SQLSTATE))) {
            PQclear(res);
            continue;
        }
        return sink_pg_fail(s->conn, res, "mark complete jobs", e);
    }
    return COMMON_OK;
}
