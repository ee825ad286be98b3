/* A job's total and its failures against a real server (migrations/008_job_failures.sql): the
 * total fixed by the first stored ticket (a ticket saying another is refused, changes
 * nothing; the first write's odd ticket does not fix it), dead letters counted once per ticket
 * and never for a ticket with a result row, another tenant's not at all, done + failed never
 * past the total, completion once; a job across the end of a month keeps its partition; the
 * write's closing pipeline (progress, batches, COMMIT, completion: sink/commit.c) refusing a
 * row leaves it alone out, and losing its connection stores nothing and the retry counts once.
 * Run through tests/test_sink.sh. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <libpq-fe.h>

#include "sink/migrate.h"
#include "sink/owner.h"
#include "sink/pgutil.h"
#include "sink/sink.h"

static const char *db_url;
static PGconn *check; /* the test's own connection for reading tables back */

/* "done|failed|total|state" of a job. */
static const char *job_line(const char *job) {
    static char line[256];
    const char *p[1] = {job};
    PGresult *res =
        PQexecParams(check,
                     "SELECT done || '|' || failed || '|' || total || '|' || state ||"
                     " '|' || (completed_at IS NOT NULL)::int FROM jobs WHERE job_id = $1",
                     1, NULL, p, NULL, NULL, 0);
    if (PQresultStatus(res) != PGRES_TUPLES_OK) fail_msg("%s", PQresultErrorMessage(res));
    snprintf(line, sizeof line, "%s", PQntuples(res) ? PQgetvalue(res, 0, 0) : "(none)");
    PQclear(res);
    return line;
}

static char ids[64][16];
static sink_result_t row(const char *job, int i, int total) {
    snprintf(ids[i], sizeof ids[i], "t%d", i);
    return (sink_result_t){.job_id = job,
                           .tenant = "acme",
                           .ticket_id = ids[i],
                           .job_total = total,
                           .label = "l",
                           .confidence = 0.5f,
                           .top_k_json = "[]",
                           .tokens = 3,
                           .partition = 0,
                           .offset = i};
}

static sink_t *open_sink(void) {
    sink_t *s = NULL;
    common_err_t e;
    if (sink_init(db_url, "test-model", &s, &e) != COMMON_OK) fail_msg("%s", e.message);
    return s;
}

/* Writes rows; returns how many were refused, each reason checked for want. */
static int write_rows(sink_t *s, const sink_result_t *r, int n, const char *want) {
    common_err_t e;
    if (sink_write(s, r, n, NULL, 0, &e) != COMMON_OK) fail_msg("%s", e.message);
    const sink_reject_t *rj;
    int nr = sink_rejected(s, &rj);
    for (int k = 0; k < nr; k++)
        if (!want || !strstr(rj[k].error, want)) fail_msg("refused: %s", rj[k].error);
    return nr;
}

static void fail_one(sink_t *s, const char *job, const char *tenant, const char *ticket,
                     int64_t offset, int total, const char *reason) {
    sink_failure_t f = {.topic = "tickets", /* offsets: each test its own */
                        .partition = 1,
                        .offset = offset,
                        .job_id = job,
                        .tenant = tenant,
                        .ticket_id = ticket,
                        .job_total = total,
                        .reason = reason};
    common_err_t e;
    if (sink_write_failures(s, &f, 1, &e) != COMMON_OK) fail_msg("%s", e.message);
}

static void test_total_fixed_once(void **state) {
    (void)state;
    sink_t *s = open_sink();
    sink_result_t r[8];
    /* the first write: six say 8, one odd one says 2147483647: most of them fix it */
    for (int i = 0; i < 7; i++)
        r[i] = row("job-fixed", i, i == 3 ? 2147483647 : 8);
    assert_int_equal(write_rows(s, r, 7, "job job-fixed has the total 8"), 1);
    assert_string_equal(job_line("job-fixed"), "6|0|8|running|0");
    /* later: one saying 11 is refused and changes nothing, a redelivery saying 11 too */
    r[0] = row("job-fixed", 7, 11);
    r[1] = row("job-fixed", 0, 11);
    assert_int_equal(write_rows(s, r, 2, "job job-fixed has the total 8"), 2);
    assert_string_equal(job_line("job-fixed"), "6|0|8|running|0");
    /* the refused ones end as failures; t3's, recorded twice (re-read), counts once */
    fail_one(s, "job-fixed", "acme", "t3", 3, 2147483647, "total");
    fail_one(s, "job-fixed", "acme", "t3", 3, 2147483647, "total");
    fail_one(s, "job-fixed", "acme", "t0", 10, 11, "total"); /* t0 has a row: not failed */
    assert_string_equal(job_line("job-fixed"), "6|1|8|running|0");
    r[0] = row("job-fixed", 7, 8);
    assert_int_equal(write_rows(s, r, 1, NULL), 0);
    assert_string_equal(job_line("job-fixed"), "7|1|8|complete with failures|1");
    sink_free(s);
}

static void test_failures_within_total(void **state) {
    (void)state;
    sink_t *s = open_sink();
    /* a job first seen through a failure: claimed by its tenant, with its total */
    fail_one(s, "job-f", "acme", "a", 101, 3, "trailing bytes");
    assert_string_equal(job_line("job-f"), "0|1|3|running|0");
    fail_one(s, "job-f", "intruder", "x", 102, 3, "another tenant"); /* not counted */
    fail_one(s, "job-f", "acme", NULL, 103, 0, "no ticket id");      /* one by itself */
    assert_string_equal(job_line("job-f"), "0|2|3|running|0");
    sink_result_t r[2] = {row("job-f", 0, 3), row("job-f", 1, 3)};
    /* done 1 + failed 2 = 3: complete; the 4th distinct ticket is one too many */
    assert_int_equal(write_rows(s, r, 1, NULL), 0);
    assert_string_equal(job_line("job-f"), "1|2|3|complete with failures|1");
    assert_int_equal(write_rows(s, r + 1, 1, "would hold more distinct tickets"), 1);
    fail_one(s, "job-f", "acme", "t1", 104, 3, "would hold more distinct tickets");
    assert_string_equal(job_line("job-f"), "1|2|3|complete with failures|1");
    /* a failure PostgreSQL cannot store as said (bad UTF-8) is recorded without its ids */
    fail_one(s, "job-\xff", "acme", "t", 105, 3, "bad");
    const char *p[1] = {"105"};
    PGresult *res = PQexecParams(check,
                                 "SELECT count(*) FROM job_failures WHERE \"offset\" = $1::bigint"
                                 " AND job_id IS NULL",
                                 1, NULL, p, NULL, NULL, 0);
    assert_string_equal(PQgetvalue(res, 0, 0), "1");
    PQclear(res);
    sink_free(s);
}

static void exec_ok(const char *sql) {
    PGresult *res = PQexec(check, sql);
    if (PQresultStatus(res) != PGRES_COMMAND_OK && PQresultStatus(res) != PGRES_TUPLES_OK)
        fail_msg("%s: %s", sql, PQresultErrorMessage(res));
    PQclear(res);
}

/* "rows|rows in the job's month" of a job. */
static const char *month_line(const char *job) {
    static char line[64];
    const char *p[1] = {job};
    PGresult *res = PQexecParams(
        check,
        "SELECT count(*) || '|' || count(*) FILTER (WHERE r.job_month ="
        " ticket_results_month(j.first_seen)) FROM ticket_results r JOIN job_info j USING (job_id)"
        " WHERE job_id = $1",
        1, NULL, p, NULL, NULL, 0);
    if (PQresultStatus(res) != PGRES_TUPLES_OK) fail_msg("%s", PQresultErrorMessage(res));
    snprintf(line, sizeof line, "%s", PQgetvalue(res, 0, 0));
    PQclear(res);
    return line;
}

/* A job first seen last month (migrations/012_results_partitioned.sql): its later tickets,
 * new ones and a redelivered one, go to its month's partition (the fast path's default month
 * is refused, the upsert path reads the job's) and each counts once. */
static void test_job_across_months(void **state) {
    (void)state;
    sink_t *s = open_sink();
    sink_result_t r[6];
    for (int i = 0; i < 3; i++)
        r[i] = row("job-months", i, 6);
    assert_int_equal(write_rows(s, r, 3, NULL), 0);
    exec_ok("SELECT ticket_results_partitions_ensure(now() - interval '2 months', now())");
    exec_ok("UPDATE job_info SET first_seen = date_trunc('month', now()) - interval '3 days'"
            " WHERE job_id = 'job-months'");
    exec_ok("UPDATE ticket_results SET job_month = ticket_results_month(date_trunc('month', now())"
            " - interval '3 days') WHERE job_id = 'job-months'");
    for (int i = 0; i < 3; i++)
        r[i] = row("job-months", 2 + i, 6); /* t2 again, t3, t4 */
    assert_int_equal(write_rows(s, r, 3, NULL), 0);
    assert_string_equal(month_line("job-months"), "5|5");
    assert_string_equal(job_line("job-months"), "5|0|6|running|0");
    r[0] = row("job-months", 5, 6);
    assert_int_equal(write_rows(s, r, 1, NULL), 0);
    assert_string_equal(month_line("job-months"), "6|6");
    assert_string_equal(job_line("job-months"), "6|0|6|complete|1");
    sink_free(s);
}

/* PostgreSQL's error fields onto common_err_t (sink_pg_err): the message names the failure and
 * its SQLSTATE, DETAIL and CONTEXT are the detail, HINT the hint; the one-line form of
 * dead-letter reasons and log lines is common_err_line's. */
static void test_pg_err_fields(void **state) {
    (void)state;
    PGresult *res = PQexec(check, "DO $$BEGIN RAISE EXCEPTION 'boom' USING DETAIL = 'row 7', "
                                  "HINT = 'fix row 7'; END$$");
    assert_int_equal(PQresultStatus(res), PGRES_FATAL_ERROR);
    common_err_t e;
    assert_int_equal(sink_pg_err(&e, COMMON_FATAL, "probe", check, res), COMMON_FATAL);
    assert_int_equal(e.code, COMMON_FATAL);
    assert_string_equal(e.message, "probe: boom (SQLSTATE P0001)");
    assert_string_equal(e.detail, "row 7; context: PL/pgSQL function inline_code_block line 1 "
                                  "at RAISE");
    assert_string_equal(e.hint, "fix row 7");
    char line[COMMON_ERR_LINE_MAX];
    assert_string_equal(common_err_line(&e, line, sizeof line),
                        "probe: boom (SQLSTATE P0001) (row 7; context: PL/pgSQL function "
                        "inline_code_block line 1 at RAISE); fix row 7");
    PQclear(res);
}

/* `reclass submit --db`'s owner check: a new job or the tenant's own is fine, another
 * tenant's is refused with a hint, naming neither that tenant nor its data. */
static void test_owner_check(void **state) {
    (void)state;
    sink_t *s = open_sink();
    sink_result_t r[1] = {row("job-owned", 0, 2)}; /* tenant acme */
    assert_int_equal(write_rows(s, r, 1, NULL), 0);
    sink_free(s);
    common_err_t e;
    assert_int_equal(sink_job_owner_check(db_url, "job-owned", "acme", &e), COMMON_OK);
    assert_int_equal(sink_job_owner_check(db_url, "job-unseen", "zeta", &e), COMMON_OK);
    assert_int_equal(sink_job_owner_check(db_url, "job-owned", "zeta", &e), COMMON_USAGE);
    assert_int_equal(e.code, COMMON_USAGE);
    assert_non_null(strstr(e.message, "job id job-owned belongs to another tenant"));
    assert_null(strstr(e.message, "acme"));
    assert_string_equal(e.hint, "submit under a job id of your own");
}

static long q_long(const char *sql) {
    PGresult *res = PQexec(check, sql);
    if (PQresultStatus(res) != PGRES_TUPLES_OK) fail_msg("%s", PQresultErrorMessage(res));
    long v = atol(PQgetvalue(res, 0, 0));
    PQclear(res);
    return v;
}

static void check_exec(const char *sql) {
    PGresult *res = PQexec(check, sql);
    if (PQresultStatus(res) != PGRES_COMMAND_OK) fail_msg("%s", PQresultErrorMessage(res));
    PQclear(res);
}

static const sink_batch_t one_batch = {
    .tickets = 5, .real_tokens = 15, .padded_tokens = 20, .backend = "cpu"};

/* The jobs statement, queued in the closing pipeline after the rows' COPY, refuses a row
 * (another total): that row alone is left out, the others, their count and the batch stored. */
static void test_pipeline_refusal_isolates_row(void **state) {
    (void)state;
    sink_t *s = open_sink();
    sink_result_t r[5];
    for (int i = 0; i < 5; i++)
        r[i] = row("job-pipe", i, 10);
    assert_int_equal(write_rows(s, r, 5, NULL), 0);
    long b0 = q_long("SELECT count(*) FROM batches");
    for (int i = 0; i < 5; i++)
        r[i] = row("job-pipe", 5 + i, i == 2 ? 11 : 10);
    common_err_t e;
    assert_int_equal(sink_write(s, r, 5, &one_batch, 1, &e), COMMON_OK);
    const sink_reject_t *rj;
    assert_int_equal(sink_rejected(s, &rj), 1);
    assert_int_equal(rj[0].row, 2);
    assert_non_null(strstr(rj[0].error, "job job-pipe has the total 10"));
    assert_string_equal(job_line("job-pipe"), "9|0|10|running|0");
    assert_int_equal(q_long("SELECT count(*) FROM batches"), b0 + 1);
    sink_free(s);
}

typedef struct {
    sink_t *s;
    const sink_result_t *r;
    int n, rc;
} pipe_write_t;

static void *pipe_writer(void *arg) {
    pipe_write_t *w = arg;
    common_err_t e;
    w->rc = sink_write(w->s, w->r, w->n, &one_batch, 1, &e);
    return NULL;
}

/* The connection dies while the closing pipeline waits (its batches INSERT behind a lock):
 * nothing of the write is stored, and after the reconnect the same rows count once. */
static void test_pipeline_connection_lost_retries(void **state) {
    (void)state;
    char url[512];
    snprintf(url, sizeof url, "%s?application_name=reclass-pipe-test", db_url);
    sink_t *s = NULL;
    common_err_t e;
    assert_int_equal(sink_init(url, "test-model", &s, &e), COMMON_OK);
    sink_result_t r[6];
    for (int i = 0; i < 6; i++)
        r[i] = row("job-lost", i, 6);
    long b0 = q_long("SELECT count(*) FROM batches");
    check_exec("BEGIN");
    check_exec("LOCK TABLE batches IN EXCLUSIVE MODE");
    pipe_write_t w = {.s = s, .r = r, .n = 6};
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, pipe_writer, &w), 0);
    long waiting = 0;
    for (int k = 0; k < 300 && !waiting; k++) {
        usleep(20000);
        waiting = q_long("SELECT count(*) FROM pg_stat_activity WHERE application_name ="
                         " 'reclass-pipe-test' AND wait_event_type = 'Lock'");
    }
    assert_int_equal(waiting, 1);
    assert_int_equal(q_long("SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity"
                            " WHERE application_name = 'reclass-pipe-test'"),
                     1);
    pthread_join(t, NULL);
    check_exec("COMMIT");
    assert_int_equal(w.rc, COMMON_RETRY);
    assert_string_equal(job_line("job-lost"), "(none)");
    assert_int_equal(q_long("SELECT count(*) FROM ticket_results WHERE job_id = 'job-lost'"), 0);
    assert_int_equal(sink_reconnect(s, &e), COMMON_OK);
    assert_int_equal(sink_write(s, r, 6, &one_batch, 1, &e), COMMON_OK);
    assert_string_equal(job_line("job-lost"), "6|0|6|complete|1");
    assert_int_equal(q_long("SELECT count(*) FROM ticket_results WHERE job_id = 'job-lost'"), 6);
    assert_int_equal(q_long("SELECT count(*) FROM batches"), b0 + 1);
    sink_free(s);
}

static int group_setup(void **state) {
    (void)state;
    db_url = getenv("RECLASS_TEST_DB");
    if (!db_url) {
        fprintf(stderr, "test_sink_jobs: run me through tests/test_sink.sh (needs a server)\n");
        return -1;
    }
    int applied = -1;
    common_err_t e;
    if (sink_migrate_ex(db_url, RECLASS_SOURCE_DIR "/migrations", NULL, &applied, &e) !=
        COMMON_OK) {
        fprintf(stderr, "test_sink_jobs: migrate: %s\n", e.message);
        return -1;
    }
    check = PQconnectdb(db_url);
    return PQstatus(check) == CONNECTION_OK ? 0 : -1;
}

static int group_teardown(void **state) {
    (void)state;
    PQfinish(check);
    return 0;
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_total_fixed_once),
        cmocka_unit_test(test_failures_within_total),
        cmocka_unit_test(test_job_across_months),
        cmocka_unit_test(test_pg_err_fields),
        cmocka_unit_test(test_owner_check),
        cmocka_unit_test(test_pipeline_refusal_isolates_row),
        cmocka_unit_test(test_pipeline_connection_lost_retries),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
