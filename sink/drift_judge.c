/* A drift window written with its judgment (see sink/drift_judge.h). Lists travel as jsonb
 * parameters (tenants, labels, rows, judgments): one statement per step whatever the number of
 * tenants, and no value in the SQL text. */
#include "sink/drift_judge.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>
#include <libpq-fe.h>

#include "sink/pgutil.h"
#include "sink/sink_conn.h"

/* $1 model, $2 window start (unix s): the window's writers take turns; the judged windows of
 * the hours before this one into drift_judged */
static const char SQL_LOCK[] =
    "SELECT drift_window_lock($1::text, to_timestamp($2::bigint)),"
    " drift_judged_close($1::text, date_trunc('hour', to_timestamp($2::bigint), 'UTC'))";
/* $1 model, $2 unix s */
static const char SQL_CLOSE[] = "SELECT drift_judged_close($1::text, to_timestamp($2::bigint))";
/* $1 window start, $2 model, $3 tenants (jsonb array): the window's stored rows of each */
static const char SQL_OTHERS[] =
    "SELECT t.i, w.tickets, w.overflow, w.label_counts, w.confidence_hist"
    " FROM jsonb_array_elements_text($3::jsonb) WITH ORDINALITY t(name, i)"
    " JOIN drift_windows w ON w.window_start = to_timestamp($1::bigint)"
    " AND w.tenant = t.name AND w.model = $2::text";
/* $1 model, $2 tenants, $3 the window's hour (unix s), $4 labels (jsonb array): the
 * references stored for that hour and label list */
static const char SQL_REFS[] =
    "SELECT t.i, s.ref_tickets, s.ref_hist, s.ref_counts, s.ref_pinned, s.ref_name"
    " FROM jsonb_array_elements_text($2::jsonb) WITH ORDINALITY t(name, i)"
    " JOIN drift_status s ON s.tenant = t.name AND s.model = $1::text"
    " WHERE s.ref_end = to_timestamp($3::bigint)"
    " AND s.ref_labels = ARRAY(SELECT jsonb_array_elements_text($4::jsonb))";
/* the same for the tenants given, summed afresh and stored */
static const char SQL_REFRESH[] =
    "SELECT t.i, f.ref_tickets, f.ref_hist, f.ref_counts, f.ref_pinned, f.ref_name"
    " FROM jsonb_array_elements_text($2::jsonb) WITH ORDINALITY t(name, i)"
    " JOIN drift_reference_refresh($1::text, to_timestamp($3::bigint),"
    " ARRAY(SELECT jsonb_array_elements_text($4::jsonb)),"
    " ARRAY(SELECT jsonb_array_elements_text($2::jsonb))) f ON f.tenant = t.name";
/* $1 window start, $2 window_s, $3 model, $4 worker, $5 rows with their judgments (jsonb
 * array). On conflict (a restarted pod keeps its hostname:pid) the counts add, label by label
 * and bin by bin, and the judgment is replaced; a newer status is never replaced by an older one. A
 * window of an hour already closed (drift_judged_close's mark past it: a late worker, a stopped
 * worker's hour) stores its judgments in drift_judged at once. */
static const char SQL_WRITE[] =
    "WITH r AS MATERIALIZED (SELECT * FROM jsonb_to_recordset($5::jsonb) AS x(tenant text,"
    "  overflow boolean, tickets bigint, label_counts jsonb, confidence_hist integer[],"
    "  confidence_sum double precision, truncated integer, tokens bigint,"
    "  status text, label_psi double precision,"
    "   label_js double precision, confidence_psi double precision,"
    "   confidence_js double precision, low_share double precision,"
    "   low_change double precision, labels_new text[], labels_gone text[], reference text,"
    "   ref_tickets bigint, judged_tickets bigint, judged_overflow boolean)),"
    " w AS (INSERT INTO drift_windows AS d (window_start, window_s, tenant, model, worker,"
    "  overflow, tickets, label_counts, confidence_hist, confidence_sum, mean_confidence,"
    "  truncated, tokens, status, label_psi, label_js, confidence_psi, confidence_js,"
    "  low_confidence_share, low_confidence_change, labels_new, labels_gone, reference,"
    "  ref_tickets, judged_tickets, judged_overflow, judged_at)"
    "  SELECT to_timestamp($1::bigint), $2::integer, r.tenant, $3::text, $4::text, r.overflow,"
    "   r.tickets, r.label_counts, r.confidence_hist, r.confidence_sum,"
    "   (r.confidence_sum / NULLIF(r.tickets, 0))::real, r.truncated, r.tokens, r.status,"
    "   r.label_psi, r.label_js, r.confidence_psi, r.confidence_js, r.low_share, r.low_change,"
    "   r.labels_new, r.labels_gone, r.reference, r.ref_tickets, r.judged_tickets,"
    "   r.judged_overflow, now() FROM r"
    "  ON CONFLICT (window_start, tenant, model, worker) DO UPDATE SET"
    "   tickets = d.tickets + excluded.tickets,"
    "   label_counts = drift_labels_add(d.label_counts, excluded.label_counts),"
    "   confidence_hist = ARRAY(SELECT a + b FROM unnest(d.confidence_hist,"
    "    excluded.confidence_hist) WITH ORDINALITY AS u(a, b, i) ORDER BY i),"
    "   confidence_sum = d.confidence_sum + excluded.confidence_sum,"
    "   mean_confidence = ((d.confidence_sum + excluded.confidence_sum)"
    "    / NULLIF(d.tickets + excluded.tickets, 0))::real,"
    "   overflow = d.overflow OR excluded.overflow, truncated = d.truncated + excluded.truncated,"
    "   tokens = d.tokens + excluded.tokens, updated_at = now(), status = excluded.status,"
    "   label_psi = excluded.label_psi, label_js = excluded.label_js,"
    "   confidence_psi = excluded.confidence_psi, confidence_js = excluded.confidence_js,"
    "   low_confidence_share = excluded.low_confidence_share,"
    "   low_confidence_change = excluded.low_confidence_change,"
    "   labels_new = excluded.labels_new, labels_gone = excluded.labels_gone,"
    "   reference = excluded.reference, ref_tickets = excluded.ref_tickets,"
    "   judged_tickets = excluded.judged_tickets, judged_overflow = excluded.judged_overflow,"
    "   judged_at = excluded.judged_at"
    "  RETURNING 1),"
    " s AS (INSERT INTO drift_status AS s (tenant, model, window_start, window_s, tickets,"
    "  status, level, label_psi, confidence_psi, reference, overflow)"
    "  SELECT r.tenant, $3::text, to_timestamp($1::bigint), $2::integer, r.judged_tickets,"
    "   r.status, drift_level(r.status), r.label_psi, r.confidence_psi, r.reference,"
    "   r.judged_overflow FROM r ORDER BY r.tenant"
    "  ON CONFLICT (tenant, model) DO UPDATE SET window_start = excluded.window_start,"
    "   window_s = excluded.window_s, tickets = excluded.tickets, status = excluded.status,"
    "   level = excluded.level, label_psi = excluded.label_psi,"
    "   confidence_psi = excluded.confidence_psi, reference = excluded.reference,"
    "   overflow = excluded.overflow, updated_at = now()"
    "  WHERE excluded.window_start >= s.window_start RETURNING 1),"
    " l AS (SELECT drift_judged_store(array_agg(ROW(to_timestamp($1::bigint), r.tenant,"
    "   $3::text, $2::integer, r.judged_tickets, r.status, drift_rank(r.status), r.label_psi,"
    "   r.label_js, r.confidence_psi, r.confidence_js, r.low_share, r.low_change,"
    "   r.labels_new, r.labels_gone, r.reference, r.ref_tickets, r.judged_overflow,"
    "   now())::drift_judged)) AS n"
    "  FROM r WHERE to_timestamp($1::bigint) < drift_rollup_done_before('drift_judged')"
    "  HAVING count(*) > 0)"
    " SELECT (SELECT count(*) FROM w) + (SELECT count(*) FROM s) + coalesce((SELECT n FROM l), 0)";

static common_status_t migrate_hint(PGconn *conn, PGresult *res, const char *step,
                                    common_err_t *e) {
    if (!sink_pg_unmigrated(res)) return sink_pg_fail(conn, res, step, e);
    common_status_t rc = sink_pg_fail(conn, res, "drift tables missing or outdated", e);
    common_err_hint(e, "apply migrations/020_drift_worker_judge.sql with 'reclass migrate'");
    return rc;
}

/* "{1,2,3}" into out[0..n); missing elements 0. */
static void parse_array(const char *s, int64_t *out, int n) {
    memset(out, 0, sizeof(*out) * (size_t)n);
    if (*s == '{') s++;
    for (int k = 0; k < n && *s && *s != '}'; k++) {
        char *end;
        out[k] = strtoll(s, &end, 10);
        s = *end == ',' ? end + 1 : end;
    }
}

static int label_id(const sink_drift_t *d, const char *name) {
    for (int l = 0; l < d->n_labels; l++)
        if (d->labels && d->labels[l] && !strcmp(d->labels[l], name)) return l;
    return -1;
}

/* Adds a stored row (SQL_OTHERS' columns) to its tenant's sum. */
static void add_stored(const sink_drift_t *d, sink_drift_stored_t *st, PGresult *res, int i) {
    st->tickets += strtoll(PQgetvalue(res, i, 1), NULL, 10);
    st->overflow |= PQgetvalue(res, i, 2)[0] == 't';
    json_t *lc = json_loads(PQgetvalue(res, i, 3), 0, NULL);
    const char *key;
    json_t *v;
    json_object_foreach(lc, key, v) {
        int l = label_id(d, key);
        if (l >= 0) st->counts[l] += json_integer_value(v);
    }
    json_decref(lc);
    int64_t h[SINK_DRIFT_BINS];
    parse_array(PQgetvalue(res, i, 4), h, SINK_DRIFT_BINS);
    for (int b = 0; b < SINK_DRIFT_BINS; b++)
        st->hist[b] += h[b];
}

/* A reference row (SQL_REFS' columns) into its tenant's; stale[row] cleared. */
static void set_ref(const sink_drift_t *d, sink_drift_stored_t *st, PGresult *res, int i) {
    st->ref_tickets = PQgetisnull(res, i, 1) ? -1 : strtoll(PQgetvalue(res, i, 1), NULL, 10);
    parse_array(PQgetvalue(res, i, 2), st->ref_hist, SINK_DRIFT_BINS);
    parse_array(PQgetvalue(res, i, 3), st->ref_counts, d->n_labels);
    st->ref_pinned = PQgetvalue(res, i, 4)[0] == 't';
    snprintf(st->ref_name, sizeof(st->ref_name), "%s", PQgetvalue(res, i, 5));
}

static json_t *names_json(const sink_drift_t *d, const int *ids, int n) {
    json_t *a = json_array();
    for (int k = 0; a && k < n; k++)
        json_array_append_new(a,
                              json_string(d->labels && d->labels[ids[k]] ? d->labels[ids[k]] : ""));
    return a;
}

static json_t *num_or_null(int has, double v) {
    return has ? json_real(v) : json_null();
}

/* The rows with their judgments as one JSON array of objects (sink/telemetry.c's row objects
 * and the judgment's fields); NULL when out of memory. */
static char *judged_json(const sink_drift_t *d, const sink_drift_stored_t *st,
                         const sink_drift_judged_t *j) {
    json_t *arr = sink_drift_rows_array(d);
    for (int i = 0; arr && i < d->n_rows; i++) {
        const sink_drift_judged_t *x = &j[i];
        json_t *o = json_pack(
            "{s:s, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:s, s:o, s:I, s:b}", "status",
            x->status, "label_psi", num_or_null(x->has_label, x->label_psi), "label_js",
            num_or_null(x->has_label, x->label_js), "confidence_psi",
            num_or_null(x->has_confidence, x->confidence_psi), "confidence_js",
            num_or_null(x->has_confidence, x->confidence_js), "low_share",
            num_or_null(x->has_low, x->low_share), "low_change",
            num_or_null(x->has_low_change, x->low_change), "labels_new",
            names_json(d, x->labels_new, x->n_new), "labels_gone",
            names_json(d, x->labels_gone, x->n_gone), "reference", st[i].ref_name, "ref_tickets",
            st[i].ref_tickets < 0 ? json_null() : json_integer(st[i].ref_tickets), "judged_tickets",
            (json_int_t)x->tickets, "judged_overflow", x->overflow);
        int bad = !o || json_object_update(json_array_get(arr, (size_t)i), o);
        json_decref(o);
        if (bad) {
            json_decref(arr);
            return NULL;
        }
    }
    char *s = arr ? json_dumps(arr, JSON_COMPACT) : NULL;
    json_decref(arr);
    return s;
}

/* Runs a statement returning rows; each row to fn. */
typedef void (*row_fn)(const sink_drift_t *d, sink_drift_stored_t *st, PGresult *res, int i);
static common_status_t query(PGconn *conn, const char *sql, int n, const char *const *vals,
                             const sink_drift_t *d, sink_drift_stored_t *stored, row_fn fn,
                             const int *rows_of, const char *step, common_err_t *e) {
    PGresult *res = PQexecParams(conn, sql, n, NULL, vals, NULL, NULL, 0);
    if (!res || PQresultStatus(res) != PGRES_TUPLES_OK) return migrate_hint(conn, res, step, e);
    for (int i = 0; fn && i < PQntuples(res); i++) {
        long k = atol(PQgetvalue(res, i, 0)) - 1;
        int row = rows_of ? rows_of[k] : (int)k;
        if (row >= 0 && row < d->n_rows) fn(d, &stored[row], res, i);
    }
    PQclear(res);
    return COMMON_OK;
}

/* The tenants of rows (stale: those with ref_tickets == -2 only) as a JSON array, and the
 * row of each (rows_of, n_rows). */
static char *tenants_json(const sink_drift_t *d, const sink_drift_stored_t *st, int stale,
                          int *rows_of, int *n) {
    json_t *a = json_array();
    *n = 0;
    for (int i = 0; a && i < d->n_rows; i++) {
        if (stale && st[i].ref_tickets != -2) continue;
        json_array_append_new(a, json_string(d->rows[i].tenant ? d->rows[i].tenant : ""));
        rows_of[(*n)++] = i;
    }
    char *s = a ? json_dumps(a, JSON_COMPACT) : NULL;
    json_decref(a);
    return s;
}

static common_status_t write_judged(PGconn *conn, const sink_drift_t *d,
                                    sink_drift_stored_t *stored, sink_drift_judged_t *judged,
                                    sink_drift_judge_fn judge, void *ctx, int *rows_of,
                                    common_err_t *e) {
    char start[24], hour[24], win[16];
    int64_t h = d->window_start_s - d->window_start_s % 3600;
    snprintf(start, sizeof(start), "%" PRId64, d->window_start_s);
    snprintf(hour, sizeof(hour), "%" PRId64, h);
    snprintf(win, sizeof(win), "%d", d->window_s);
    const char *model = d->model ? d->model : "";
    for (int i = 0; i < d->n_rows; i++) {
        sink_drift_stored_t *st = &stored[i];
        st->tickets = 0;
        st->overflow = 0;
        memset(st->hist, 0, sizeof(st->hist));
        memset(st->counts, 0, sizeof(*st->counts) * (size_t)d->n_labels);
        st->ref_tickets = -2; /* not read yet */
    }
    json_t *lj = json_array();
    for (int l = 0; lj && l < d->n_labels; l++)
        json_array_append_new(lj, json_string(d->labels && d->labels[l] ? d->labels[l] : ""));
    char *labels = lj ? json_dumps(lj, JSON_COMPACT) : NULL;
    json_decref(lj);
    int n = 0;
    char *tenants = tenants_json(d, stored, 0, rows_of, &n), *stale = NULL, *rows = NULL;
    common_status_t rc = COMMON_OK;
    if (!labels || !tenants) {
        rc = common_err_set(e, COMMON_FATAL, "drift window: out of memory");
        goto out;
    }
    const char *lock[2] = {model, start};
    rc = query(conn, SQL_LOCK, 2, lock, d, stored, NULL, NULL, "lock drift window", e);
    const char *others[3] = {start, model, tenants};
    if (rc == COMMON_OK)
        rc = query(conn, SQL_OTHERS, 3, others, d, stored, add_stored, NULL,
                   "read the drift window's stored rows", e);
    const char *refs[4] = {model, tenants, hour, labels};
    if (rc == COMMON_OK)
        rc = query(conn, SQL_REFS, 4, refs, d, stored, set_ref, NULL, "read drift references", e);
    if (rc != COMMON_OK) goto out;
    stale = tenants_json(d, stored, 1, rows_of, &n);
    if (!stale) {
        rc = common_err_set(e, COMMON_FATAL, "drift window: out of memory");
        goto out;
    }
    refs[1] = stale;
    if (n > 0)
        rc = query(conn, SQL_REFRESH, 4, refs, d, stored, set_ref, rows_of,
                   "refresh drift references (drift_reference_refresh)", e);
    if (rc != COMMON_OK) goto out;
    judge(ctx, d, stored, judged);
    rows = judged_json(d, stored, judged);
    if (!rows) {
        rc = common_err_set(e, COMMON_FATAL, "drift window: out of memory");
        goto out;
    }
    const char *w[5] = {start, win, model, d->worker ? d->worker : "", rows};
    rc = query(conn, SQL_WRITE, 5, w, d, stored, NULL, NULL, "write the judged drift window", e);
out:
    free(labels);
    free(tenants);
    free(stale);
    free(rows);
    return rc;
}

common_status_t sink_write_drift_judged(sink_t *sink, const sink_drift_t *d,
                                        sink_drift_stored_t *stored, sink_drift_judged_t *judged,
                                        sink_drift_judge_fn judge, void *ctx, common_err_t *e) {
    if (!d || d->n_rows == 0) return COMMON_OK;
    PGconn *conn = sink_conn(sink);
    if (!conn || PQstatus(conn) != CONNECTION_OK)
        return common_err_set(e, COMMON_RETRY, "write drift window: not connected to PostgreSQL");
    int *rows_of = malloc(sizeof(*rows_of) * (size_t)d->n_rows);
    if (!rows_of) return common_err_set(e, COMMON_FATAL, "drift window: out of memory");
    common_status_t rc = sink_pg_exec(conn, "BEGIN", PGRES_COMMAND_OK, "begin drift window", e);
    if (rc == COMMON_OK) rc = write_judged(conn, d, stored, judged, judge, ctx, rows_of, e);
    if (rc == COMMON_OK)
        rc = sink_pg_exec(conn, "COMMIT", PGRES_COMMAND_OK, "commit drift window", e);
    if (rc != COMMON_OK) sink_pg_rollback(conn);
    free(rows_of);
    return rc;
}

common_status_t sink_drift_judged_close(sink_t *sink, const char *model, int64_t before_s,
                                        common_err_t *e) {
    PGconn *conn = sink_conn(sink);
    if (!conn || PQstatus(conn) != CONNECTION_OK)
        return common_err_set(e, COMMON_RETRY, "close drift hour: not connected to PostgreSQL");
    char before[24];
    snprintf(before, sizeof(before), "%" PRId64, before_s);
    const char *vals[2] = {model, before};
    PGresult *res = PQexecParams(conn, SQL_CLOSE, 2, NULL, vals, NULL, NULL, 0);
    if (!res || PQresultStatus(res) != PGRES_TUPLES_OK)
        return migrate_hint(conn, res, "store judged drift windows (drift_judged_close)", e);
    PQclear(res);
    return COMMON_OK;
}
