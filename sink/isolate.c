/* sink_write: the arguments checked, one transaction, and when PostgreSQL refuses rows for
 * their data, those rows found without giving up the others.
 * A write refused as a whole (sink_write_once: COMMON_DATA) is first cleared of the rows whose
 * job another tenant owns (one query: the usual way a well-formed record is refused, and the
 * reason can then be said plainly); what is left is written again and, while refused, split in
 * halves, each its own transaction, until each refused row stands alone: k refused rows among n
 * cost about 2k log2(n/k) transactions, once. Classification is by SQLSTATE and constraint
 * name, never by message text. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sink/copybin.h"
#include "sink/pgutil.h"
#include "sink/sink_int.h"

/* the constraints of migrations/005_tenant.sql and 008_job_failures.sql */
#define CON_OWNER "ticket_results_job_owner"
#define CON_TOTAL "jobs_done_within_total"
#define CON_FIXED "job_total_fixed"

static const char SQL_OWNERS[] = "SELECT job_id, tenant, total FROM job_info"
                                 " WHERE job_id = ANY($1::text[])";

static int reject_add(sink_t *s, int row, const char *fmt, ...) {
    if (s->n_rejects == s->rejects_cap) {
        int cap = s->rejects_cap ? 2 * s->rejects_cap : 16;
        sink_reject_t *r = realloc(s->rejects, (size_t)cap * sizeof(*r));
        if (!r) return -1;
        s->rejects = r;
        s->rejects_cap = cap;
    }
    sink_reject_t *r = &s->rejects[s->n_rejects++];
    r->row = row;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->error, sizeof(r->error), fmt, ap);
    va_end(ap);
    return 0;
}

static int reject_owner(sink_t *s, int row, const sink_result_t *r) {
    return reject_add(s, row,
                      "job %s belongs to another tenant (a job id is owned by the tenant that "
                      "first stored it): send tenant %s's tickets under a job id of its own "
                      "(SQLSTATE 23000, " CON_OWNER ")",
                      r->job_id, r->tenant ? r->tenant : "(none)");
}

/* fixed < 0: another writer fixed it meanwhile, to a value this write did not read */
static int reject_total(sink_t *s, int row, const sink_result_t *r, int32_t fixed) {
    if (fixed < 0)
        return reject_add(s, row,
                          "job %s has another total (fixed by its first stored ticket) than this "
                          "ticket's job_total %d: every ticket of a job must carry the same "
                          "job_total; nothing of the job was changed (SQLSTATE 23514, " CON_FIXED
                          ")",
                          r->job_id, (int)r->job_total);
    return reject_add(s, row,
                      "job %s has the total %d (fixed by its first stored ticket) and this ticket "
                      "says job_total %d: every ticket of a job must carry the same job_total; "
                      "nothing of the job was changed (SQLSTATE 23514, " CON_FIXED ")",
                      r->job_id, (int)fixed, (int)r->job_total);
}

/* The total a job not stored yet takes from this write: the one most of its rows say (ties:
 * the smaller), so one odd ticket cannot fix it. */
static int32_t write_total(const sink_t *s, int n, const char *job) {
    int32_t best = 0;
    int best_n = 0;
    for (int i = 0; i < n; i++) {
        if (strcmp(s->work[i].job_id, job) != 0) continue;
        int32_t t = s->work[i].job_total;
        int c = 0;
        for (int k = 0; k < n; k++)
            c += strcmp(s->work[k].job_id, job) == 0 && s->work[k].job_total == t;
        if (c > best_n || (c == best_n && t < best)) best = t, best_n = c;
    }
    return best;
}

/* The reason for a row refused alone; e: the refusal in PostgreSQL's words. */
static int reject_row(sink_t *s, int row, const sink_result_t *r, const common_err_t *e) {
    if (strcmp(s->fail_constraint, CON_OWNER) == 0) return reject_owner(s, row, r);
    if (strcmp(s->fail_constraint, CON_TOTAL) == 0)
        return reject_add(s, row,
                          "job %s would hold more distinct tickets than its job_total (%d): "
                          "every ticket of a job must carry the job's full count (SQLSTATE %s)",
                          r->job_id, (int)r->job_total, s->fail_state);
    if (strcmp(s->fail_constraint, CON_FIXED) == 0) return reject_total(s, row, r, -1);
    char line[COMMON_ERR_LINE_MAX];
    return reject_add(s, row, "PostgreSQL refused the row: %s", /* with its SQLSTATE */
                      common_err_line(e, line, sizeof line));
}

/* Rows of work[] whose job is owned by another tenant, or whose job_total is not the job's
 * (job_total_check), go to the rejects; the others are moved to the front. Returns the number
 * kept, or -1 with rc set. */
static int drop_foreign(sink_t *s, int n, common_status_t *rc, common_err_t *e) {
    const sink_tally_t *t = &s->tally; /* of the whole write: sink_write_once built it */
    sink_copybuf_t *b = &s->params;
    sink_copybuf_reset(b);
    sink_copybin_array(b, SINK_OID_TEXT, t->n_jobs, 0);
    for (int i = 0; i < t->n_jobs; i++)
        sink_copybin_text(b, t->jobs[i].job_id);
    if (b->oom) {
        *rc = common_err_set(e, COMMON_RETRY, "sink: out of memory for %d jobs", t->n_jobs);
        return -1;
    }
    const char *vals[1] = {b->data};
    int lens[1] = {(int)b->len}, fmts[1] = {1};
    PGresult *res = PQexecParams(s->conn, SQL_OWNERS, 1, NULL, vals, lens, fmts, 0);
    if (!res || PQresultStatus(res) != PGRES_TUPLES_OK) {
        /* a job id PostgreSQL cannot even compare (bad UTF-8): the split finds those rows */
        if (res && sink_pg_data_error(PQresultErrorField(res, PG_DIAG_SQLSTATE))) {
            PQclear(res);
            return n;
        }
        *rc = sink_pg_fail(s->conn, res, "read job owners", e);
        return -1;
    }
    int kept = 0;
    for (int i = 0; i < n; i++) {
        const sink_result_t *r = &s->work[i];
        const char *owner = NULL;
        int32_t fixed = 0;
        for (int k = 0; k < PQntuples(res); k++) /* a write holds a few jobs */
            if (strcmp(PQgetvalue(res, k, 0), r->job_id) == 0) {
                owner = PQgetisnull(res, k, 1) ? NULL : PQgetvalue(res, k, 1);
                fixed = (int32_t)atol(PQgetvalue(res, k, 2));
                break;
            }
        if (fixed <= 0) {
            const sink_job_t *j = sink_tally_find(t, r->job_id);
            if (j && j->total < 0) fixed = write_total(s, n, r->job_id);
        }
        int bad = 0;
        if (owner && (!r->tenant || strcmp(owner, r->tenant) != 0))
            bad = reject_owner(s, s->work_row[i], r) ? -1 : 1;
        else if (fixed > 0 && r->job_total != fixed)
            bad = reject_total(s, s->work_row[i], r, fixed) ? -1 : 1;
        if (bad < 0) {
            PQclear(res);
            *rc = common_err_set(e, COMMON_RETRY, "sink: out of memory listing refused rows");
            return -1;
        }
        if (bad) continue;
        s->work_row[kept] = s->work_row[i];
        s->work[kept++] = *r;
    }
    PQclear(res);
    return kept;
}

static int cmp_reject(const void *a, const void *b) {
    const sink_reject_t *x = a, *y = b;
    return (x->row > y->row) - (x->row < y->row);
}

/* work[from, to) was refused (refused = 1) or is still to be tried. */
static common_status_t split(sink_t *s, int from, int to, int refused, long *inserted, long *stored,
                             common_err_t *e) {
    int n = to - from;
    if (!refused) {
        common_status_t rc = sink_write_once(s, s->work + from, n, NULL, 0, e);
        if (rc == COMMON_OK) {
            *inserted += s->last_inserted;
            *stored += s->last_rows;
        }
        if (rc != COMMON_DATA) return rc;
    }
    if (n == 1) {
        if (reject_row(s, s->work_row[from], &s->work[from], e) == 0) return COMMON_OK;
        return common_err_set(e, COMMON_RETRY, "sink: out of memory listing refused rows");
    }
    int mid = from + n / 2;
    common_status_t rc = split(s, from, mid, 0, inserted, stored, e);
    return rc == COMMON_OK ? split(s, mid, to, 0, inserted, stored, e) : rc;
}

common_status_t sink_isolate(sink_t *s, const sink_result_t *rows, int n, common_err_t *e) {
    if (n > s->work_cap) {
        sink_result_t *w = realloc(s->work, (size_t)n * sizeof(*w));
        int *wr = w ? realloc(s->work_row, (size_t)n * sizeof(*wr)) : NULL;
        if (w) s->work = w;
        if (wr) s->work_row = wr;
        if (!w || !wr) return common_err_set(e, COMMON_RETRY, "sink: out of memory for %d rows", n);
        s->work_cap = n;
    }
    for (int i = 0; i < n; i++) {
        s->work[i] = rows[i];
        s->work_row[i] = i;
    }
    s->n_rejects = 0;
    common_status_t rc = COMMON_OK;
    int kept = drop_foreign(s, n, &rc, e);
    if (kept < 0) return rc;
    long inserted = 0, stored = 0;
    rc = kept == 0 ? COMMON_OK : split(s, 0, kept, kept == n, &inserted, &stored, e);
    s->last_inserted = inserted;
    s->last_rows = stored;
    /* rows in row order, as sink_rejected promises (the owner pass came first) */
    if (s->n_rejects > 1) qsort(s->rejects, (size_t)s->n_rejects, sizeof(*s->rejects), cmp_reject);
    return rc;
}

static common_status_t sink_validate(const sink_result_t *rows, int n_rows,
                                     const sink_batch_t *batches, int n_batches, common_err_t *e) {
    if (n_rows < 0 || n_batches < 0 || (n_rows > 0 && !rows) || (n_batches > 0 && !batches))
        return common_err_set(e, COMMON_FATAL,
                              "sink_write: invalid arguments (n_rows %d, n_batches %d)", n_rows,
                              n_batches);
    for (int i = 0; i < n_rows; i++) {
        /* a job belongs to one tenant (migrations/005_tenant.sql): a row names its own */
        const char *missing = !rows[i].job_id      ? "job_id"
                              : !rows[i].ticket_id ? "ticket_id"
                              : !rows[i].tenant    ? "tenant"
                              : !rows[i].label     ? "label"
                                                   : NULL;
        if (missing)
            return common_err_set(e, COMMON_FATAL, "sink_write: row %d has no %s", i, missing);
    }
    return COMMON_OK;
}

common_status_t sink_write(sink_t *s, const sink_result_t *rows, int n_rows,
                           const sink_batch_t *batches, int n_batches, common_err_t *e) {
    if (!s) return common_err_set(e, COMMON_FATAL, "sink_write: no sink");
    s->n_rejects = 0;
    common_status_t rc = sink_validate(rows, n_rows, batches, n_batches, e);
    if (rc != COMMON_OK) return rc;
    rc = sink_write_once(s, rows, n_rows, batches, n_batches, e);
    if (rc != COMMON_DATA) return rc;
    rc = sink_isolate(s, rows, n_rows, e);
    if (rc == COMMON_OK && n_batches > 0) {
        long inserted = s->last_inserted, stored = s->last_rows;
        rc = sink_write_once(s, NULL, 0, batches, n_batches, e);
        s->last_inserted = inserted;
        s->last_rows = stored;
    }
    return rc == COMMON_DATA ? COMMON_FATAL : rc;
}

int sink_rejected(const sink_t *s, const sink_reject_t **out) {
    *out = s ? s->rejects : NULL;
    return s ? s->n_rejects : 0;
}
