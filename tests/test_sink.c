/* PostgreSQL sink against a real server. Run through tests/test_sink.sh, which starts a
 * throwaway server (tests/lib/pg_tmp.sh) and passes RECLASS_TEST_DB (URL),
 * RECLASS_TEST_PGDIR (its directory) and RECLASS_TEST_PGTMP (the script, for restarts). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <libpq-fe.h>
#include <pthread.h>

#include "sink/migrate.h"
#include "sink/sink.h"
#include "tests/lib/sink_stats.h"

static const char *db_url;
static PGconn *check; /* the test's own connection for reading tables back */

static PGresult *q(const char *sql, int n, const char *const *params) {
    PGresult *res = PQexecParams(check, sql, n, NULL, params, NULL, NULL, 0);
    if (PQresultStatus(res) != PGRES_TUPLES_OK && PQresultStatus(res) != PGRES_COMMAND_OK)
        fail_msg("query failed: %s: %s", sql, PQresultErrorMessage(res));
    return res;
}

/* First column of the first row as a number (-1 when NULL / no row). */
static long q_long(const char *sql, const char *p1) {
    const char *params[1] = {p1};
    PGresult *res = q(sql, p1 ? 1 : 0, params);
    long v = (PQntuples(res) == 0 || PQgetisnull(res, 0, 0)) ? -1 : atol(PQgetvalue(res, 0, 0));
    PQclear(res);
    return v;
}

static long rows_of(const char *job) {
    return q_long("SELECT count(*) FROM ticket_results WHERE job_id = $1", job);
}
static long done_of(const char *job) {
    return q_long("SELECT done FROM jobs WHERE job_id = $1", job);
}
static long completed(const char *job) {
    return q_long("SELECT (completed_at IS NOT NULL)::int FROM jobs WHERE job_id = $1", job);
}
static long n_batches(void) {
    return q_long("SELECT count(*) FROM batches", NULL);
}

/* Rows i in [from, to) of job: ticket ids "t<i>", owned by the static name pool below. */
#define MAXROWS 4000
static char ids[MAXROWS][16];
static sink_result_t make_row(const char *job, int i, int total, const char *label) {
    snprintf(ids[i], sizeof ids[i], "t%d", i);
    sink_result_t r = {.job_id = job,
                       .tenant = "acme",
                       .ticket_id = ids[i],
                       .job_total = total,
                       .label = label,
                       .label_id = i % 7,
                       .confidence = 0.5f + (float)(i % 10) / 40.0f,
                       .top_k_json = "[{\"label\":\"x\",\"p\":0.9}]",
                       .tokens = 10 + i % 50,
                       .truncated = i % 13 == 0,
                       .partition = i % 3,
                       .offset = i,
                       .enqueued_at_ms = 1700000000000LL + i};
    return r;
}

static sink_result_t rows[MAXROWS];
static void fill(const char *job, int from, int to, int total, const char *label) {
    for (int i = from; i < to; i++)
        rows[i] = make_row(job, i, total, label);
}

static const sink_batch_t two_batches[2] = {{.tickets = 3,
                                             .real_tokens = 30,
                                             .padded_tokens = 36,
                                             .wait_ms = 1.5,
                                             .compute_ms = 2.25,
                                             .backend = "cpu",
                                             .device_used_bytes = 0,
                                             .arena_bytes = 4096,
                                             .encoder = 0,
                                             .device = -1,
                                             .worker = "host:1"},
                                            {.tickets = 5,
                                             .real_tokens = 50,
                                             .padded_tokens = 60,
                                             .wait_ms = 0.5,
                                             .compute_ms = 3.0,
                                             .backend = "cuda",
                                             .device_used_bytes = 1 << 20,
                                             .arena_bytes = 8192,
                                             .encoder = 1,
                                             .device = 3,
                                             .worker = "host:1"}};

static sink_t *open_sink(void) {
    sink_t *s = NULL;
    common_err_t e;
    int rc = sink_init(db_url, "test-model", &s, &e);
    if (rc != COMMON_OK) fail_msg("sink_init: %s", e.message);
    return s;
}

static void expect_write(sink_t *s, int from, int to, const sink_batch_t *b, int nb) {
    common_err_t e;
    int rc = sink_write(s, rows + from, to - from, b, nb, &e);
    if (rc != COMMON_OK) fail_msg("sink_write rc %d: %s", rc, e.message);
}

static void test_write_counts_and_completion(void **state) {
    sink_t *s = open_sink();
    long b0 = n_batches();
    char id0[24]; /* the batches rows before this test's */
    snprintf(id0, sizeof id0, "%ld", q_long("SELECT coalesce(max(id), 0) FROM batches", NULL));
    fill("job-count", 0, 1000, 1000, "billing");
    expect_write(s, 0, 600, two_batches, 2);
    assert_int_equal(sink_last_inserted(s), 600);
    assert_int_equal(rows_of("job-count"), 600);
    assert_int_equal(done_of("job-count"), 600);
    assert_int_equal(completed("job-count"), 0);
    assert_int_equal(n_batches(), b0 + 2);
    expect_write(s, 600, 1000, two_batches, 1);
    assert_int_equal(rows_of("job-count"), 1000);
    assert_int_equal(done_of("job-count"), 1000);
    assert_int_equal(completed("job-count"), 1);
    assert_int_equal(q_long("SELECT total FROM jobs WHERE job_id = $1", "job-count"), 1000);
    assert_int_equal(n_batches(), b0 + 3);
    /* the model comes from sink_init, the rest from the record */
    assert_int_equal(q_long("SELECT count(*) FROM ticket_results WHERE job_id = $1 AND model ="
                            " 'test-model' AND tenant = 'acme' AND label = 'billing'",
                            "job-count"),
                     1000);
    assert_int_equal(q_long("SELECT count(*) FROM ticket_results WHERE job_id = $1 AND"
                            " enqueued_at = timestamptz 'epoch' + (1700000000000 + \"offset\")"
                            " * interval '1 ms'",
                            "job-count"),
                     1000);
    assert_int_equal(q_long("SELECT count(*) FROM batches WHERE backend = 'cuda' AND"
                            " compute_ms = 3 AND device_used_bytes = 1048576",
                            NULL),
                     1);
    /* each batch names its worker (as gpu_memory does), encoder and device; a batch of the
     * host (cpu) has no device */
    assert_int_equal(q_long("SELECT count(*) FILTER (WHERE encoder = 0 AND device IS NULL)"
                            " * 10 + count(*) FILTER (WHERE encoder = 1 AND device = 3)"
                            " FROM batches WHERE id > $1::bigint AND worker = 'host:1'",
                            id0),
                     21);
    /* nothing to write is not an error and touches nothing */
    common_err_t e;
    assert_int_equal(sink_write(s, NULL, 0, NULL, 0, &e), COMMON_OK);
    sink_free(s);
}

static void test_redelivery_never_double_counts(void **state) {
    sink_t *s = open_sink();
    fill("job-redo", 0, 800, 1200, "first"); /* 800 of a 1200-ticket job */
    expect_write(s, 0, 800, NULL, 0);
    PGresult *r0 = q("SELECT completed_at::text FROM jobs WHERE job_id = 'job-redo'", 0, NULL);
    char first_completed[64];
    snprintf(first_completed, sizeof first_completed, "%s", PQgetvalue(r0, 0, 0));
    PQclear(r0);
    assert_int_equal(sink_fallbacks(s), 0);
    /* the same tickets again (a redelivery after a rebalance), re-labelled */
    fill("job-redo", 0, 800, 1200, "second");
    expect_write(s, 0, 800, NULL, 0);
    assert_int_equal(sink_fallbacks(s), 1); /* the fast insert met stored rows */
    assert_int_equal(sink_last_inserted(s), 0);
    assert_int_equal(sink_last_rows(s), 800);
    assert_int_equal(rows_of("job-redo"), 800);
    assert_int_equal(done_of("job-redo"), 800);
    assert_int_equal(q_long("SELECT count(*) FROM ticket_results WHERE job_id = $1 AND"
                            " label = 'second'",
                            "job-redo"),
                     800);
    r0 = q("SELECT completed_at::text FROM jobs WHERE job_id = 'job-redo'", 0, NULL);
    assert_string_equal(PQgetvalue(r0, 0, 0), first_completed);
    PQclear(r0);
    /* half old, half new, and one ticket twice in the same write */
    fill("job-redo", 0, 1200, 1200, "third");
    rows[1200] = rows[5]; /* duplicate inside one write: must not trip ON CONFLICT */
    expect_write(s, 400, 1201, NULL, 0);
    assert_int_equal(sink_last_inserted(s), 400);
    assert_int_equal(rows_of("job-redo"), 1200);
    assert_int_equal(done_of("job-redo"), 1200);
    assert_int_equal(completed("job-redo"), 1);
    sink_free(s);
    /* a fresh sink, a fresh job, one ticket twice in the write: the fast insert trips on its
     * own duplicate, the upsert keeps one (the higher offset) and counts it once */
    s = open_sink();
    fill("job-dup", 0, 100, 100, "d");
    rows[100] = rows[7];
    rows[100].offset = 1000;
    rows[100].label = "later";
    expect_write(s, 0, 101, NULL, 0);
    assert_int_equal(sink_fallbacks(s), 1);
    assert_int_equal(sink_last_inserted(s), 100);
    assert_int_equal(rows_of("job-dup"), 100);
    assert_int_equal(done_of("job-dup"), 100);
    assert_int_equal(q_long("SELECT \"offset\" FROM ticket_results WHERE job_id = 'job-dup' AND"
                            " ticket_id = $1 AND label = 'later'",
                            "t7"),
                     1000);
    /* all new again: back on the fast path */
    fill("job-dup2", 0, 50, 50, "d");
    expect_write(s, 0, 50, NULL, 0);
    fill("job-dup3", 0, 50, 50, "d");
    expect_write(s, 0, 50, NULL, 0);
    assert_int_equal(sink_fallbacks(s), 1);
    assert_int_equal(done_of("job-dup3"), 50);
    sink_free(s);
}

static void test_text_survives_copy(void **state) {
    static const char *const nasty[] = {
        "tab\there",    "new\nline",       "cr\rlf\r\n",       "back\\slash\\",        "\\N",
        "\\.",          "quote'single",    "quote\"double",    "unicode é ü 日本語 🎫", "",
        " lead trail ", "mixed\t\\n\n\\t", "semi;colon,comma", "\\\\double\\\\"};
    const int n = (int)(sizeof(nasty) / sizeof(nasty[0]));
    sink_result_t r[16];
    char tids[16][64], jobs[16][32];
    for (int i = 0; i < n; i++) {
        snprintf(tids[i], sizeof tids[i], "%s#%d", nasty[i], i);
        /* a job belongs to one tenant: one job per tenant */
        snprintf(jobs[i], sizeof jobs[i], "job\ttext\\é#%d", i);
        r[i] = make_row(jobs[i], i, 1, nasty[i]);
        r[i].ticket_id = tids[i];
        r[i].tenant = nasty[(i + 1) % n];
        r[i].top_k_json = "[{\"label\":\"a\\tb\\\\c\\n\\\"d\\\" é\",\"p\":0.25}]";
        r[i].confidence = 1.0f / 3.0f + (float)i * 1e-7f;
        r[i].enqueued_at_ms = i == 0 ? 0 : 1234567890123LL;
    }
    sink_t *s = open_sink();
    common_err_t e;
    int rc = sink_write(s, r, n, NULL, 0, &e);
    if (rc != COMMON_OK) fail_msg("sink_write: %s", e.message);
    for (int i = 0; i < n; i++) {
        const char *p[2] = {jobs[i], tids[i]};
        PGresult *res = q("SELECT label, tenant, confidence::text, top_k->0->>'label',"
                          " (enqueued_at IS NULL)::int,"
                          " extract(epoch FROM enqueued_at) * 1000"
                          " FROM ticket_results WHERE job_id = $1 AND ticket_id = $2",
                          2, p);
        assert_int_equal(PQntuples(res), 1);
        assert_string_equal(PQgetvalue(res, 0, 0), nasty[i]);
        assert_string_equal(PQgetvalue(res, 0, 1), nasty[(i + 1) % n]);
        assert_true(strtof(PQgetvalue(res, 0, 2), NULL) == r[i].confidence);
        assert_string_equal(PQgetvalue(res, 0, 3), "a\tb\\c\n\"d\" é");
        assert_int_equal(atoi(PQgetvalue(res, 0, 4)), i == 0);
        if (i > 0) assert_int_equal(atoll(PQgetvalue(res, 0, 5)), 1234567890123LL);
        PQclear(res);
        assert_int_equal(done_of(jobs[i]), 1);
        assert_int_equal(completed(jobs[i]), 1);
    }
    sink_free(s);
}

static void test_failed_write_leaves_nothing(void **state) {
    sink_t *s = open_sink();
    long b0 = n_batches();
    common_err_t e;
    /* (1) the COPY refuses a row (bad JSON in the last one): that row alone is left out */
    fill("job-json", 0, 100, 99, "x");
    rows[99].top_k_json = "[{not json";
    int rc = sink_write(s, rows, 100, two_batches, 2, &e);
    assert_int_equal(rc, COMMON_OK);
    const sink_reject_t *rj;
    assert_int_equal(sink_rejected(s, &rj), 1);
    assert_int_equal(rj[0].row, 99);
    assert_non_null(strstr(rj[0].error, "SQLSTATE 22P02"));
    assert_non_null(strstr(rj[0].error, "json"));
    assert_int_equal(rows_of("job-json"), 99);
    assert_int_equal(done_of("job-json"), 99);
    assert_int_equal(completed("job-json"), 1);
    assert_int_equal(n_batches(), b0 + 2);
    b0 += 2;
    /* (2) the rows and progress went in, then the batches INSERT violates a CHECK (in the
     * closing pipeline, before COMMIT): all of it rolls back */
    fill("job-fail", 0, 100, 100, "x");
    sink_batch_t bad = two_batches[0];
    bad.tickets = -1;
    rc = sink_write(s, rows, 100, &bad, 1, &e);
    assert_int_equal(rc, COMMON_FATAL); /* telemetry is ours: a refused batches row is a bug */
    assert_non_null(strstr(e.message, "insert batches"));
    assert_int_equal(rows_of("job-fail"), 0);
    assert_int_equal(done_of("job-fail"), -1);
    assert_int_equal(n_batches(), b0);
    /* (3) rejected before anything is sent */
    rows[3].ticket_id = NULL;
    assert_int_equal(sink_write(s, rows, 100, NULL, 0, &e), COMMON_FATAL);
    assert_string_equal(e.message, "sink_write: row 3 has no ticket_id");
    assert_int_equal(sink_write(s, rows, -1, NULL, 0, &e), COMMON_FATAL);
    /* (4) the same sink still works afterwards */
    fill("job-fail", 0, 100, 100, "x");
    expect_write(s, 0, 100, two_batches, 2);
    assert_int_equal(rows_of("job-fail"), 100);
    assert_int_equal(done_of("job-fail"), 100);
    assert_int_equal(n_batches(), b0 + 2);
    sink_free(s);
}

/* The poison table: for every column of ticket_results and jobs a value PostgreSQL refuses,
 * each in one write between good rows. Every refused row is listed with its SQLSTATE (or the
 * reason the sink names), every good row is stored and counted once, redelivered or not.
 * Columns no value of the sink's row can make invalid: truncated (a C int becomes a boolean),
 * model (checked once, at sink_init), classified_at and jobs' done, first_seen, completed_at,
 * updated_at (the server's own). */
static char long_id[4001];
static const struct {
    const char *column, *want;
} poison_cases[] = {
    {"job_id", "SQLSTATE 22021"}, /* invalid UTF-8 */
    {"job_id", "SQLSTATE 54000"}, /* 4000 random bytes: over the btree index row limit */
    {"ticket_id", "SQLSTATE 22021"},
    {"tenant", "SQLSTATE 22021"},
    {"label", "SQLSTATE 22021"},
    {"label_id", "SQLSTATE 23514"},   /* -1 */
    {"confidence", "SQLSTATE 23514"}, /* NaN */
    {"confidence", "SQLSTATE 23514"}, /* 1.5 */
    {"top_k", "SQLSTATE 22P02"},      /* not JSON */
    {"top_k", "SQLSTATE 22P02"},      /* NaN is not JSON */
    {"tokens", "SQLSTATE 23514"},
    {"partition", "SQLSTATE 23514"},
    {"offset", "SQLSTATE 23514"},
    {"enqueued_at", "SQLSTATE 22008"}, /* 9,300,000,000,000,000 ms */
    {"enqueued_at", "SQLSTATE 22008"}, /* INT64_MAX ms: never 1969 */
    {"jobs.tenant", "belongs to another tenant"},
    {"jobs.total", "job_total"},
};
#define N_POISON ((int)(sizeof(poison_cases) / sizeof(poison_cases[0])))

static void poison_row(sink_result_t *r, int c) {
    switch (c) {
    case 0:
        r->job_id = "job-\xff";
        break;
    case 1:
        r->job_id = long_id;
        break;
    case 2:
        r->ticket_id = "t\xc3\x28";
        break;
    case 3:
        r->tenant = "ac\xc3\x28me";
        break;
    case 4:
        r->label = "l\xed\xa0\x80";
        break;
    case 5:
        r->label_id = -1;
        break;
    case 6:
        r->confidence = __builtin_nanf("");
        break;
    case 7:
        r->confidence = 1.5f;
        break;
    case 8:
        r->top_k_json = "[{not json";
        break;
    case 9:
        r->top_k_json = "[{\"label\":\"x\",\"p\":NaN}]";
        break;
    case 10:
        r->tokens = -1;
        break;
    case 11:
        r->partition = -1;
        break;
    case 12:
        r->offset = -1;
        break;
    case 13:
        r->enqueued_at_ms = 9300000000000000LL;
        break;
    case 14:
        r->enqueued_at_ms = INT64_MAX;
        break;
    case 15:
        r->job_id = "job-owned";
        r->ticket_id = "t0";
        break; /* another tenant's job */
    case 16:
        r->job_id = "job-small";
        r->ticket_id = "t9";
        r->job_total = 2;
        break; /* a 3rd */
    }
}

static void test_poison_table(void **state) {
    unsigned x = 12345;
    for (int i = 0; i < 4000; i++) { /* incompressible printable bytes */
        x = x * 1103515245u + 12345u;
        long_id[i] = (char)('!' + (x >> 16) % 90);
    }
    sink_t *s = open_sink();
    /* another tenant's job, and a job already at its total */
    sink_result_t pre[3];
    char pre_ids[3][8];
    for (int i = 0; i < 3; i++) {
        snprintf(pre_ids[i], sizeof pre_ids[i], "t%d", i);
        pre[i] = make_row(i == 0 ? "job-owned" : "job-small", i, i == 0 ? 1 : 2, "theirs");
        pre[i].ticket_id = pre_ids[i];
        if (i == 0) pre[i].tenant = "other";
    }
    common_err_t e;
    assert_int_equal(sink_write(s, pre, 3, NULL, 0, &e), COMMON_OK);
    /* good, poison, good, good, poison, ...: ticket ids "t<i>" of job-poison */
    const int n = 3 * N_POISON + 1, good = n - N_POISON;
    for (int i = 0; i < n; i++) {
        rows[i] = make_row("job-poison", i, good, "ok");
        if (i % 3 == 1) poison_row(&rows[i], i / 3);
    }
    long b0 = n_batches();
    for (int pass = 0; pass < 2; pass++) { /* the second: all of it redelivered */
        int rc = sink_write(s, rows, n, two_batches, 1, &e);
        if (rc != COMMON_OK) fail_msg("sink_write rc %d: %s", rc, e.message);
        const sink_reject_t *rj;
        int nr = sink_rejected(s, &rj);
        for (int k = 0; k < nr && k < N_POISON; k++) {
            int c = (rj[k].row - 1) / 3;
            if (rj[k].row % 3 != 1 || !strstr(rj[k].error, poison_cases[c].want))
                fail_msg("pass %d: row %d (%s) refused with: %s", pass, rj[k].row,
                         rj[k].row % 3 == 1 ? poison_cases[c].column : "a good row", rj[k].error);
        }
        assert_int_equal(nr, N_POISON);
        assert_int_equal(rows_of("job-poison"), good);
        assert_int_equal(done_of("job-poison"), good);
        assert_int_equal(completed("job-poison"), 1);
        assert_int_equal(n_batches(), b0 + pass + 1); /* telemetry written once a write */
    }
    /* the other tenant's job and row are untouched; the full job got nothing more */
    assert_int_equal(q_long("SELECT count(*) FROM ticket_results WHERE job_id = 'job-owned' AND"
                            " tenant = 'other' AND label = 'theirs'",
                            NULL),
                     1);
    assert_int_equal(done_of("job-owned"), 1);
    assert_int_equal(rows_of("job-small"), 2);
    assert_int_equal(done_of("job-small"), 2);
    assert_int_equal(q_long("SELECT count(*) FROM jobs WHERE length(job_id) > 1000", NULL), 0);
    sink_free(s);
}

/* A model name PostgreSQL cannot store would refuse every row: refused at start instead. */
static void test_init_refuses_bad_model(void **state) {
    sink_t *s = NULL;
    common_err_t e;
    assert_int_equal(sink_init(db_url, "model-\xff", &s, &e), COMMON_FATAL);
    assert_null(s);
    assert_non_null(strstr(e.message, "model name"));
}

static void test_init_errors(void **state) {
    sink_t *s = (sink_t *)1;
    common_err_t e;
    assert_int_equal(sink_init("host=127.0.0.1 port", "m", &s, &e), COMMON_USAGE);
    assert_null(s);
    s = (sink_t *)1;
    /* port 1 on loopback: nothing listens, connection refused */
    assert_int_equal(
        sink_init("postgresql://postgres@127.0.0.1:1/reclass?connect_timeout=2", "m", &s, &e),
        COMMON_RETRY);
    assert_null(s);
    /* a database without the schema: fatal, and the message says what to run */
    PQclear(q("CREATE DATABASE reclass_empty", 0, NULL));
    char url[512];
    snprintf(url, sizeof url, "%s", db_url);
    char *slash = strrchr(url, '/');
    snprintf(slash + 1, sizeof url - (size_t)(slash + 1 - url), "reclass_empty");
    assert_int_equal(sink_init(url, "m", &s, &e), COMMON_FATAL);
    assert_null(s);
    assert_non_null(strstr(e.message, "schema missing or outdated"));
    assert_string_equal(e.hint, "run 'reclass migrate'");
    /* conninfo (not URL) form passes through too */
    const char *port = strrchr(db_url, ':') + 1;
    char kv[256];
    snprintf(kv, sizeof kv, "host=127.0.0.1 port=%d user=postgres dbname=reclass sslmode=disable",
             atoi(port));
    assert_int_equal(sink_init(kv, "m", &s, &e), COMMON_OK);
    sink_free(s);
    sink_free(NULL);
}

/* Kill the sink's backend from outside (what a DBA or a failover does). */
static void test_terminated_backend_retries(void **state) {
    /* a URL parameter passes through untouched and names this sink's backend */
    char url[512];
    snprintf(url, sizeof url, "%s?application_name=reclass-term-test", db_url);
    sink_t *s = NULL;
    common_err_t e;
    assert_int_equal(sink_init(url, "m", &s, &e), COMMON_OK);
    fill("job-term", 0, 400, 400, "t");
    expect_write(s, 0, 200, NULL, 0);
    assert_int_equal(q_long("SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity"
                            " WHERE application_name = 'reclass-term-test'",
                            NULL),
                     1);
    int rc = sink_write(s, rows + 200, 200, NULL, 0, &e);
    assert_int_equal(rc, COMMON_RETRY);
    assert_int_equal(rows_of("job-term"), 200);
    assert_int_equal(sink_reconnect(s, &e), COMMON_OK);
    expect_write(s, 200, 400, NULL, 0);
    assert_int_equal(rows_of("job-term"), 400);
    assert_int_equal(done_of("job-term"), 400);
    assert_int_equal(completed("job-term"), 1);
    sink_free(s);
}

static int pg_ctl(const char *what) {
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "bash '%s' %s '%s'", getenv("RECLASS_TEST_PGTMP"), what,
             getenv("RECLASS_TEST_PGDIR"));
    return system(cmd);
}

static void reopen_check(void) {
    PQfinish(check);
    check = PQconnectdb(db_url);
    assert_int_equal(PQstatus(check), CONNECTION_OK);
}

static void test_server_restart_between_writes(void **state) {
    sink_t *s = open_sink();
    fill("job-restart", 0, 3000, 3000, "r");
    expect_write(s, 0, 1000, two_batches, 1);
    /* (1) the server restarts between two writes */
    assert_int_equal(pg_ctl("restart"), 0);
    common_err_t e;
    int rc = sink_write(s, rows + 1000, 1000, two_batches, 1, &e);
    assert_int_equal(rc, COMMON_RETRY);
    assert_int_equal(sink_reconnect(s, &e), COMMON_OK);
    expect_write(s, 1000, 2000, two_batches, 1);
    reopen_check();
    assert_int_equal(rows_of("job-restart"), 2000);
    assert_int_equal(done_of("job-restart"), 2000);
    /* (2) the server is down for a while: writes and reconnects keep saying retry */
    assert_int_equal(pg_ctl("stop"), 0);
    assert_int_equal(sink_write(s, rows + 2000, 1000, NULL, 0, &e), COMMON_RETRY);
    assert_int_equal(sink_reconnect(s, &e), COMMON_RETRY);
    assert_int_equal(sink_write(s, rows + 2000, 1000, NULL, 0, &e), COMMON_RETRY);
    assert_int_equal(pg_ctl("restart"), 0);
    assert_int_equal(sink_reconnect(s, &e), COMMON_OK);
    /* the caller retries the whole write, including rows that may have landed: idempotent */
    expect_write(s, 1500, 3000, NULL, 0);
    reopen_check();
    assert_int_equal(rows_of("job-restart"), 3000);
    assert_int_equal(done_of("job-restart"), 3000);
    assert_int_equal(completed("job-restart"), 1);
    sink_free(s);
}

/* Two workers writing overlapping tickets of one job at once (a rebalance that redelivers
 * while the old owner is still writing): every ticket counted exactly once. */
typedef struct {
    int reverse;
    int retries;
    common_err_t e;
    int rc;
} writer_arg_t;

static sink_result_t conc_rows[2000];
static char conc_ids[2000][16];

static void *writer(void *p) {
    writer_arg_t *a = p;
    sink_t *s = NULL;
    a->rc = sink_init(db_url, "m", &s, &a->e);
    if (a->rc != COMMON_OK) return NULL;
    for (int g = 0; g < 8 && a->rc == COMMON_OK; g++) {
        int grp = a->reverse ? 7 - g : g;
        /* groups of 500 with a 250 stride: neighbours overlap by half */
        int from = grp * 250, n = grp == 7 ? 250 : 500;
        for (int tries = 0; tries < 20; tries++) {
            a->rc = sink_write(s, conc_rows + from, n, NULL, 0, &a->e);
            if (a->rc != COMMON_RETRY) break;
            a->retries++;
            sink_reconnect(s, &a->e);
        }
    }
    sink_free(s);
    return NULL;
}

static void test_concurrent_writers_count_once(void **state) {
    for (int i = 0; i < 2000; i++) {
        snprintf(conc_ids[i], sizeof conc_ids[i], "c%d", i);
        conc_rows[i] = make_row("job-conc", 0, 2000, "c");
        conc_rows[i].ticket_id = conc_ids[i];
    }
    writer_arg_t a = {.reverse = 0}, b = {.reverse = 1};
    pthread_t ta, tb;
    assert_int_equal(pthread_create(&ta, NULL, writer, &a), 0);
    assert_int_equal(pthread_create(&tb, NULL, writer, &b), 0);
    pthread_join(ta, NULL);
    pthread_join(tb, NULL);
    if (a.rc != COMMON_OK) fail_msg("writer a: %s", a.e.message);
    if (b.rc != COMMON_OK) fail_msg("writer b: %s", b.e.message);
    assert_int_equal(rows_of("job-conc"), 2000);
    assert_int_equal(done_of("job-conc"), 2000);
    assert_int_equal(completed("job-conc"), 1);
}

/* Two tenants' writers create the same new job at once (disjoint ticket ids): one owns it,
 * every row of the other is refused, none of them stored or counted. */
typedef struct {
    const char *tenant;
    sink_result_t rows[300];
    char ids[300][16];
    int rc, refused;
    common_err_t e;
} race_arg_t;

static void *race_writer(void *p) {
    race_arg_t *a = p;
    sink_t *s = NULL;
    a->rc = sink_init(db_url, "m", &s, &a->e);
    for (int tries = 0; a->rc == COMMON_OK && tries < 20; tries++) {
        a->rc = sink_write(s, a->rows, 300, NULL, 0, &a->e);
        if (a->rc != COMMON_RETRY) break;
        sink_reconnect(s, &a->e);
    }
    const sink_reject_t *rj;
    a->refused = sink_rejected(s, &rj);
    sink_free(s);
    return NULL;
}

static void test_two_tenants_race_for_a_job(void **state) {
    static race_arg_t a = {.tenant = "red"}, b = {.tenant = "blue"};
    race_arg_t *w[2] = {&a, &b};
    for (int k = 0; k < 2; k++)
        for (int i = 0; i < 300; i++) {
            snprintf(w[k]->ids[i], sizeof w[k]->ids[i], "%s%d", w[k]->tenant, i);
            w[k]->rows[i] = make_row("job-race", 0, 300, "r");
            w[k]->rows[i].ticket_id = w[k]->ids[i];
            w[k]->rows[i].tenant = w[k]->tenant;
        }
    pthread_t ta, tb;
    assert_int_equal(pthread_create(&ta, NULL, race_writer, &a), 0);
    assert_int_equal(pthread_create(&tb, NULL, race_writer, &b), 0);
    pthread_join(ta, NULL);
    pthread_join(tb, NULL);
    if (a.rc != COMMON_OK) fail_msg("writer red: %s", a.e.message);
    if (b.rc != COMMON_OK) fail_msg("writer blue: %s", b.e.message);
    PGresult *r = q("SELECT tenant FROM jobs WHERE job_id = 'job-race'", 0, NULL);
    assert_int_equal(PQntuples(r), 1);
    int red = strcmp(PQgetvalue(r, 0, 0), "red") == 0;
    PQclear(r);
    assert_int_equal(red ? a.refused : b.refused, 0);
    assert_int_equal(red ? b.refused : a.refused, 300);
    assert_int_equal(rows_of("job-race"), 300);
    assert_int_equal(done_of("job-race"), 300);
    assert_int_equal(q_long("SELECT count(DISTINCT tenant) FROM ticket_results WHERE job_id ="
                            " 'job-race'",
                            NULL),
                     1);
}

static int group_setup(void **state) {
    db_url = getenv("RECLASS_TEST_DB");
    if (!db_url || !getenv("RECLASS_TEST_PGDIR") || !getenv("RECLASS_TEST_PGTMP")) {
        fprintf(stderr, "test_sink: run me through tests/test_sink.sh (needs a server)\n");
        return -1;
    }
    int applied = -1;
    common_err_t e;
    if (sink_migrate_ex(db_url, RECLASS_SOURCE_DIR "/migrations", NULL, &applied, &e) !=
            COMMON_OK ||
        applied < 1) {
        fprintf(stderr, "test_sink: migrate: %s\n", e.message);
        return -1;
    }
    check = PQconnectdb(db_url);
    return PQstatus(check) == CONNECTION_OK ? 0 : -1;
}

static int group_teardown(void **state) {
    PQfinish(check);
    return 0;
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_write_counts_and_completion),
        cmocka_unit_test(test_redelivery_never_double_counts),
        cmocka_unit_test(test_text_survives_copy),
        cmocka_unit_test(test_failed_write_leaves_nothing),
        cmocka_unit_test(test_poison_table),
        cmocka_unit_test(test_init_refuses_bad_model),
        cmocka_unit_test(test_init_errors),
        cmocka_unit_test(test_terminated_backend_retries),
        cmocka_unit_test(test_concurrent_writers_count_once),
        cmocka_unit_test(test_two_tenants_race_for_a_job),
        cmocka_unit_test(test_server_restart_between_writes),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
