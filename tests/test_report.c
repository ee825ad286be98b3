/* reclass report's device memory section against a real PostgreSQL (tests/test_sink.sh starts
 * one): a job whose worker ran two encoders, their gpu_memory samples interleaved in time, gets
 * a line per encoder in each chart (encoder 0's arena a flat line, not a zig-zag between the
 * two) and a summary row per encoder with its own arena, peak, allocations and flatness, and
 * the batches it ran during the job (its worker's, encoder's and device's batches rows; on the
 * cpu, no device in either table). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <libpq-fe.h>

#include "sink/migrate.h"
#include "worker/report/report.h"

static const char *db_url;
static PGconn *conn;

static void exec_ok(const char *sql) {
    PGresult *r = PQexec(conn, sql);
    ExecStatusType st = PQresultStatus(r);
    if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK)
        fail_msg("%s: %s", sql, PQerrorMessage(conn));
    PQclear(r);
}

static int setup(void **state) {
    (void)state;
    common_err_t e;
    int applied = 0;
    if (sink_migrate_ex(db_url, RECLASS_SOURCE_DIR "/migrations", NULL, &applied, &e)) {
        fprintf(stderr, "migrate: %s\n", e.message);
        return -1;
    }
    conn = PQconnectdb(db_url);
    return PQstatus(conn) == CONNECTION_OK ? 0 : -1;
}

static int teardown(void **state) {
    (void)state;
    PQfinish(conn);
    return 0;
}

/* The report of job as one string (the caller frees it). */
static char *report_of(const char *job) {
    char *html = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&html, &len);
    assert_non_null(f);
    common_err_t e;
    common_status_t rc = report_job_write(conn, job, f, &e);
    fclose(f);
    if (rc) fail_msg("report_job_write: %s", e.message);
    return html;
}

static int count_of(const char *s, const char *needle) {
    int n = 0;
    for (const char *p = strstr(s, needle); p; p = strstr(p + 1, needle))
        n++;
    return n;
}

/* The y coordinates of the points attribute after p: all equal (a flat line)? */
static int polyline_flat(const char *p) {
    p = strstr(p, "points=\"");
    assert_non_null(p);
    p += strlen("points=\"");
    double x, y, y0 = 0;
    int n = 0, used;
    while (sscanf(p, "%lf,%lf %n", &x, &y, &used) == 2) {
        if (n++ == 0) y0 = y;
        if (y != y0) return 0;
        p += used;
    }
    assert_true(n >= 2);
    return 1;
}

static void test_two_encoders_two_series(void **state) {
    (void)state;
    /* a finished job; its worker's two encoders sampled every 5 s, interleaved: encoder 0
     * (device 0) flat at 1 MiB, encoder 1 (device 1) at 2 MiB growing to 3 MiB with one
     * allocation after start-up at its last sample */
    exec_ok("INSERT INTO ticket_results (job_id, tenant, ticket_id, label, label_id, confidence,"
            " tokens, model) SELECT 'job-mem', 'acme', 't' || i, 'l', 0, 0.9, 7, 'm'"
            " FROM generate_series(1, 3) i");
    exec_ok("UPDATE job_info SET first_seen = now() - interval '60 seconds', total = 3,"
            " completed_at = now() WHERE job_id = 'job-mem'");
    exec_ok("INSERT INTO job_progress (job_id, writer, done) VALUES ('job-mem', 'w', 3)"
            " ON CONFLICT (job_id, writer) DO NOTHING");
    exec_ok("INSERT INTO gpu_memory (at, worker, backend, device_used_bytes, weights_bytes,"
            " arena_bytes, allocations_after_init, device, encoder)"
            " SELECT now() - interval '55 seconds' + (i * 5 + e) * interval '1 second', 'host:1',"
            " 'cuda', (4 + e) * 1048576, 22 * 1048576,"
            " CASE WHEN e = 1 AND i = 9 THEN 3 ELSE 1 + e END * 1048576,"
            " CASE WHEN e = 1 AND i = 9 THEN 1 ELSE 0 END, e, e"
            " FROM generate_series(0, 9) i, generate_series(0, 1) e");
    /* its batches: encoder 0 four of 3 tickets, encoder 1 two of 5; another worker's encoder 0
     * on device 0 at the same time, and a batch of encoder 0 before the job, are not its */
    exec_ok("INSERT INTO batches (at, tickets, real_tokens, padded_tokens, backend, worker,"
            " encoder, device) VALUES"
            " (now() - interval '50 seconds', 3, 30, 30, 'cuda', 'host:1', 0, 0),"
            " (now() - interval '40 seconds', 3, 30, 30, 'cuda', 'host:1', 0, 0),"
            " (now() - interval '30 seconds', 3, 30, 30, 'cuda', 'host:1', 0, 0),"
            " (now() - interval '20 seconds', 3, 30, 30, 'cuda', 'host:1', 0, 0),"
            " (now() - interval '45 seconds', 5, 50, 50, 'cuda', 'host:1', 1, 1),"
            " (now() - interval '25 seconds', 5, 50, 50, 'cuda', 'host:1', 1, 1),"
            " (now() - interval '35 seconds', 7, 70, 70, 'cuda', 'host:2', 0, 0),"
            " (now() - interval '1 hour', 11, 110, 110, 'cuda', 'host:1', 0, 0)");
    char *html = report_of("job-mem");
    const char *mem = strstr(html, "<h2>Device memory");
    assert_non_null(mem);
    /* two charts (arena, device used), a line each per encoder */
    assert_int_equal(count_of(mem, "<polyline"), 4);
    assert_int_equal(count_of(mem, ">encoder 0, device 0</text>"), 2);
    assert_int_equal(count_of(mem, ">encoder 1, device 1</text>"), 2);
    assert_true(polyline_flat(strstr(mem, "<polyline"))); /* encoder 0's arena */
    /* a row per encoder: worker, encoder, device, samples, weights, arena, arena peak, device
     * used peak, allocations after init, flat, batches, tickets */
    assert_non_null(strstr(mem,
                           "<tr><td>host:1</td><td>0</td><td>0</td><td>10</td>"
                           "<td>22.0 MiB</td><td>1.0 MiB</td><td>1.0 MiB</td>"
                           "<td>4.0 MiB</td><td>0</td><td>yes</td><td>4</td><td>12</td></tr>"));
    assert_non_null(strstr(mem, "<tr><td>host:1</td><td>1</td><td>1</td><td>10</td>"
                                "<td>22.0 MiB</td><td>2.0 MiB</td><td>3.0 MiB</td>"
                                "<td>5.0 MiB</td><td>1</td><td>no</td><td>2</td><td>10</td></tr>"));
    assert_non_null(strstr(mem, "at most <b>1</b> over 20 samples"));
    free(html);
}

/* A cpu worker's encoders run on no device: gpu_memory and batches both leave it NULL, and its
 * batches are found by worker and encoder alone. */
static void test_cpu_encoders_batches(void **state) {
    (void)state;
    exec_ok("INSERT INTO ticket_results (job_id, tenant, ticket_id, label, label_id, confidence,"
            " tokens, model) SELECT 'job-cpu', 'acme', 't' || i, 'l', 0, 0.9, 7, 'm'"
            " FROM generate_series(1, 4) i");
    exec_ok("UPDATE job_info SET first_seen = now() - interval '2 hours', total = 4,"
            " completed_at = now() - interval '2 hours' + interval '30 seconds'"
            " WHERE job_id = 'job-cpu'");
    exec_ok("INSERT INTO job_progress (job_id, writer, done) VALUES ('job-cpu', 'w', 4)"
            " ON CONFLICT (job_id, writer) DO NOTHING");
    exec_ok("INSERT INTO gpu_memory (at, worker, backend, device_used_bytes, weights_bytes,"
            " arena_bytes, allocations_after_init, device, encoder)"
            " SELECT now() - interval '2 hours' + (i * 10 + e) * interval '1 second', 'cpu:1',"
            " 'cpu', 0, 1048576, 1048576, 0, NULL, e"
            " FROM generate_series(0, 3) i, generate_series(0, 1) e");
    exec_ok("INSERT INTO batches (at, tickets, real_tokens, padded_tokens, backend, worker,"
            " encoder, device) SELECT now() - interval '2 hours' + (10 + e) * interval '1 second',"
            " 1 + e, 7, 7, 'cpu', 'cpu:1', e, NULL FROM generate_series(0, 1) e, "
            "generate_series(1, 3)");
    char *html = report_of("job-cpu");
    const char *mem = strstr(html, "<h2>Device memory");
    assert_non_null(mem);
    assert_non_null(strstr(mem, "<tr><td>cpu:1</td><td>0</td><td>-</td><td>4</td>"));
    assert_non_null(strstr(mem, "<td>yes</td><td>3</td><td>3</td></tr>"));
    assert_non_null(strstr(mem, "<tr><td>cpu:1</td><td>1</td><td>-</td><td>4</td>"));
    assert_non_null(strstr(mem, "<td>yes</td><td>3</td><td>6</td></tr>"));
    free(html);
}

int main(void) {
    db_url = getenv("RECLASS_TEST_DB");
    if (!db_url) {
        fprintf(stderr, "RECLASS_TEST_DB not set (run through tests/test_sink.sh)\n");
        return 1;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_two_encoders_two_series),
        cmocka_unit_test(test_cpu_encoders_batches),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
