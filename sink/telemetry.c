/* Drift and GPU memory rows (see sink/telemetry.h). A drift window's rows travel as one jsonb
 * parameter (sink_drift_rows_array's array of row objects, expanded by jsonb_to_recordset in
 * sink/drift_judge.c): one statement whatever the number of tenants, and the values never
 * touch the SQL text. */
#include "sink/telemetry.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include <jansson.h>
#include <libpq-fe.h>

#include "sink/pgutil.h"
#include "sink/sink_conn.h"

static const char SQL_GPU[] =
    "INSERT INTO gpu_memory (worker, backend, \"precision\", device_total_bytes,"
    " device_used_bytes, weights_bytes, arena_bytes, allocations_after_init, token_budget,"
    " device, encoder)"
    " VALUES ($1, $2, $3, $4::bigint, $5::bigint, $6::bigint, $7::bigint, $8::bigint,"
    " $9::integer, $10::integer, $11::integer)";

static common_status_t exec_params(sink_t *sink, const char *sql, int n, const char *const *vals,
                                   const char *step, common_err_t *e) {
    PGconn *conn = sink_conn(sink);
    if (!conn || PQstatus(conn) != CONNECTION_OK)
        return common_err_set(e, COMMON_RETRY, "%s: not connected to PostgreSQL", step);
    PGresult *res = PQexecParams(conn, sql, n, NULL, vals, NULL, NULL, 0);
    if (res && PQresultStatus(res) == PGRES_COMMAND_OK) {
        PQclear(res);
        return COMMON_OK;
    }
    if (!sink_pg_unmigrated(res)) return sink_pg_fail(conn, res, step, e);
    common_status_t rc = sink_pg_fail(conn, res, "telemetry tables missing or outdated", e);
    common_err_hint(e, "apply migrations/003_telemetry.sql with 'reclass migrate'");
    return rc;
}

json_t *sink_drift_rows_array(const sink_drift_t *d) {
    json_t *arr = json_array();
    int ok = arr != NULL;
    for (int i = 0; ok && i < d->n_rows; i++) {
        const sink_drift_row_t *r = &d->rows[i];
        json_t *o = json_object(), *lc = json_object(), *h = json_array();
        ok = o && lc && h;
        for (int l = 0; ok && l < d->n_labels; l++) {
            if (!r->label_counts[l]) continue;
            const char *name = d->labels && d->labels[l] ? d->labels[l] : "";
            /* two ids with one name (a sloppy config.json) add up rather than overwrite */
            json_t *prev = json_object_get(lc, name);
            json_int_t n = r->label_counts[l] + (prev ? json_integer_value(prev) : 0);
            ok = json_object_set_new(lc, name, json_integer(n)) == 0;
        }
        for (int b = 0; ok && b < SINK_DRIFT_BINS; b++)
            ok = json_array_append_new(h, json_integer(r->hist[b])) == 0;
        if (ok)
            ok = !json_object_set_new(o, "tenant", json_string(r->tenant ? r->tenant : "")) &&
                 !json_object_set_new(o, "overflow", json_boolean(r->overflow)) &&
                 !json_object_set_new(o, "tickets", json_integer(r->tickets)) &&
                 !json_object_set_new(o, "confidence_sum", json_real(r->confidence_sum)) &&
                 !json_object_set_new(o, "truncated", json_integer(r->truncated)) &&
                 !json_object_set_new(o, "tokens", json_integer(r->tokens));
        if (ok) {
            ok = !json_object_set_new(o, "label_counts", lc) &&
                 !json_object_set_new(o, "confidence_hist", h);
            lc = h = NULL; /* owned by o now, even on failure */
        }
        if (ok) {
            ok = !json_array_append_new(arr, o);
            o = NULL;
        }
        json_decref(o);
        json_decref(lc);
        json_decref(h);
    }
    if (ok) return arr;
    json_decref(arr);
    return NULL;
}

common_status_t sink_write_gpu_memory(sink_t *sink, const sink_gpu_memory_t *g, common_err_t *e) {
    char num[8][24];
    snprintf(num[0], sizeof(num[0]), "%" PRId64, g->device_total_bytes);
    snprintf(num[1], sizeof(num[1]), "%" PRId64, g->device_used_bytes);
    snprintf(num[2], sizeof(num[2]), "%" PRId64, g->weights_bytes);
    snprintf(num[3], sizeof(num[3]), "%" PRId64, g->arena_bytes);
    snprintf(num[4], sizeof(num[4]), "%" PRId64, g->allocations_after_init);
    snprintf(num[5], sizeof(num[5]), "%d", g->token_budget);
    snprintf(num[6], sizeof(num[6]), "%d", g->device);
    snprintf(num[7], sizeof(num[7]), "%d", g->encoder);
    const char *vals[11] = {g->worker ? g->worker : "",
                            g->backend ? g->backend : "",
                            g->precision,
                            g->device_total_bytes < 0 ? NULL : num[0],
                            num[1],
                            num[2],
                            num[3],
                            num[4],
                            num[5],
                            g->device < 0 ? NULL : num[6],
                            num[7]};
    return exec_params(sink, SQL_GPU, 11, vals, "write gpu_memory", e);
}

/* $1 model, $2 unix seconds, $3 rows: the worst first, whatever the tenant's name (the alert must
 * see any of them) */
static const char SQL_DRIFT_WORST[] =
    "SELECT tenant, level FROM drift_status WHERE model = $1::text"
    " AND window_start >= to_timestamp($2::bigint)"
    " ORDER BY level DESC, window_start DESC, tenant LIMIT $3::integer";
static const char SQL_DRIFT_COUNTS[] =
    "SELECT status, count(*) FROM drift_status WHERE model = $1::text"
    " AND window_start >= to_timestamp($2::bigint) GROUP BY status ORDER BY status";

common_status_t sink_drift_status(sink_t *sink, const char *model, int64_t since_s, int max_rows,
                                  sink_drift_status_fn fn, sink_drift_count_fn count_fn, void *ctx,
                                  common_err_t *e) {
    PGconn *conn = sink_conn(sink);
    if (!conn || PQstatus(conn) != CONNECTION_OK)
        return common_err_set(e, COMMON_RETRY, "read drift status: not connected to PostgreSQL");
    char since[24], lim[16];
    snprintf(since, sizeof(since), "%" PRId64, since_s);
    snprintf(lim, sizeof(lim), "%d", max_rows);
    const char *vals[3] = {model, since, lim};
    static const char *const sql[2] = {SQL_DRIFT_WORST, SQL_DRIFT_COUNTS};
    static const char *const step[2] = {"read drift status", "count drift status"};
    for (int q = 0; q < 2; q++) {
        PGresult *res = PQexecParams(conn, sql[q], q == 0 ? 3 : 2, NULL, vals, NULL, NULL, 0);
        if (!res || PQresultStatus(res) != PGRES_TUPLES_OK) {
            if (!sink_pg_unmigrated(res)) return sink_pg_fail(conn, res, step[q], e);
            common_status_t rc = sink_pg_fail(conn, res, "drift_status missing", e);
            common_err_hint(e, "apply migrations/009_drift_rollups.sql with 'reclass migrate'");
            return rc;
        }
        for (int i = 0; i < PQntuples(res); i++) {
            if (q == 0) fn(ctx, PQgetvalue(res, i, 0), atoi(PQgetvalue(res, i, 1)));
            if (q == 1) count_fn(ctx, PQgetvalue(res, i, 0), atol(PQgetvalue(res, i, 1)));
        }
        PQclear(res);
    }
    return COMMON_OK;
}
