/* Job progress (migrations/006_progress.sql): a write's new tickets counted in its writer's
 * own job_progress row, and after COMMIT the completion stamp. Both are queued on the write's
 * closing pipeline (sink/commit.c), which collects their results. */
#include <stdio.h>

#include <libpq-fe.h>

#include "sink/copybin.h"
#include "sink/pgutil.h"
#include "sink/sink_int.h"

/* $1 job ids (sorted), $2 tenants, $3 totals (-1: the write's tickets disagree), $4 new
 * tickets per job, $5 writer. The job_info row is created once and its total set once, by the
 * first ticket stored (job_total_check refuses a ticket that says another: it runs over every
 * job of the write before anything else, an InitPlan of ins); the count goes to this writer's
 * own row, unless it would take the job past its total (job_progress_guard). A total <= 0
 * means unknown (migrations/006_progress.sql, 008_job_failures.sql). */
const char sink_sql_jobs[] =
    "WITH u AS (SELECT * FROM unnest($1::text[], $2::text[], $3::integer[], $4::integer[])"
    "   AS u(job_id, tenant, total, n)"
    "), chk AS (SELECT bool_and(job_total_check(job_id, total)) AS ok FROM u"
    "), ins AS (INSERT INTO job_info (job_id, tenant, total)"
    "   SELECT job_id, tenant, total FROM u WHERE (SELECT ok FROM chk)"
    "   ORDER BY job_id ON CONFLICT (job_id) DO NOTHING"
    "), upd AS (UPDATE job_info j SET total = greatest(j.total, u.total),"
    "   tenant = COALESCE(j.tenant, u.tenant), updated_at = now() FROM u"
    "   WHERE j.job_id = u.job_id AND (SELECT ok FROM chk)"
    "   AND ((j.total <= 0 AND u.total > 0) OR (j.tenant IS NULL AND u.tenant IS NOT NULL)))"
    " INSERT INTO job_progress AS p (job_id, writer, done)"
    " SELECT job_id, $5::text, n FROM u WHERE n > 0"
    "   AND job_progress_guard(job_id, (n + job_done(u.job_id))::bigint, total)"
    " ORDER BY job_id"
    " ON CONFLICT (job_id, writer) DO UPDATE SET done = p.done + excluded.done,"
    "   updated_at = now()";

/* $1 job ids, after COMMIT: completed_at is set once, by whichever writer first sees done +
 * failed reach total (the row lock re-checks completed_at IS NULL). */
const char sink_sql_complete[] = "SELECT job_complete($1::text[])";

/* The jobs statement's four arrays, built in one buffer (offsets first: it may move); the
 * first of them is the completion statement's too. */
common_status_t sink_progress_send(sink_t *s, common_err_t *e) {
    const sink_tally_t *t = &s->tally;
    sink_copybuf_t *b = &s->params;
    sink_copybuf_reset(b);
    size_t off[5];
    int has_null_tenant = 0;
    for (int i = 0; i < t->n_jobs; i++)
        has_null_tenant |= t->jobs[i].tenant == NULL;
    off[0] = b->len;
    sink_copybin_array(b, SINK_OID_TEXT, t->n_jobs, 0);
    for (int i = 0; i < t->n_jobs; i++)
        sink_copybin_text(b, t->jobs[i].job_id);
    off[1] = b->len;
    sink_copybin_array(b, SINK_OID_TEXT, t->n_jobs, has_null_tenant);
    for (int i = 0; i < t->n_jobs; i++)
        sink_copybin_text(b, t->jobs[i].tenant);
    off[2] = b->len;
    sink_copybin_array(b, SINK_OID_INT4, t->n_jobs, 0);
    for (int i = 0; i < t->n_jobs; i++)
        sink_copybin_int4(b, t->jobs[i].total);
    off[3] = b->len;
    sink_copybin_array(b, SINK_OID_INT4, t->n_jobs, 0);
    for (int i = 0; i < t->n_jobs; i++)
        sink_copybin_int4(b, t->jobs[i].fresh);
    off[4] = b->len;
    s->params_ids_len = off[1] - off[0];
    if (b->oom)
        return common_err_set(e, COMMON_RETRY, "jobs: out of memory for %d jobs", t->n_jobs);
    /* Each element is length-prefixed, so the values themselves are never written into the
     * SQL text. */
    const char *vals[5];
    int lens[5], fmts[5];
    sink_copybin_params(b, off, 4, vals, lens, fmts);
    vals[4] = s->writer, lens[4] = 0, fmts[4] = 0;
    if (PQsendQueryPrepared(s->conn, SINK_STMT_JOBS, 5, vals, lens, fmts, 0)) return COMMON_OK;
    return sink_pg_err(e, sink_pg_classify(s->conn, NULL), "update jobs", s->conn, NULL);
}

common_status_t sink_progress_complete_send(sink_t *s, common_err_t *e) {
    const char *vals[1] = {s->params.data}; /* its first array: the write's job ids */
    int lens[1] = {(int)s->params_ids_len}, fmts[1] = {1};
    if (PQsendQueryPrepared(s->conn, SINK_STMT_COMPLETE, 1, vals, lens, fmts, 0)) return COMMON_OK;
    return sink_pg_err(e, sink_pg_classify(s->conn, NULL), "mark complete jobs", s->conn, NULL);
}
