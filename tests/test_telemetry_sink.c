/* sink/telemetry against a real PostgreSQL (tests/test_sink.sh starts one): drift windows
 * upsert-add (counts, label maps, histograms, means), awkward names survive JSON, gpu_memory
 * rows with unknown totals as NULL, and missing tables reported as COMMON_FATAL. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>
#include <libpq-fe.h>

#include "sink/migrate.h"
#include "sink/sink.h"
#include "sink/telemetry.h"
#include "sink/drift_judge.h"
#include "worker/observe/drift_judge.h"

static const char *db_url;
static sink_t *sink;
static PGconn *check;

/* The single value of a query, as text ("" for NULL); the caller frees it. */
static char *q(const char *sql) {
    PGresult *r = PQexec(check, sql);
    if (PQresultStatus(r) != PGRES_TUPLES_OK || PQntuples(r) != 1)
        fail_msg("query failed: %s: %s", sql, PQerrorMessage(check));
    char *v = strdup(PQgetvalue(r, 0, 0));
    PQclear(r);
    return v;
}

static void expect(const char *sql, const char *want) {
    char *got = q(sql);
    if (strcmp(got, want)) fail_msg("%s\n  got  %s\n  want %s", sql, got, want);
    free(got);
}

static int setup(void **state) {
    (void)state;
    common_err_t e;
    int applied = 0;
    if (sink_migrate_ex(db_url, RECLASS_SOURCE_DIR "/migrations", NULL, &applied, &e)) {
        fprintf(stderr, "migrate: %s\n", e.message);
        return -1;
    }
    if (sink_init(db_url, "m1", &sink, &e)) {
        fprintf(stderr, "sink_init: %s\n", e.message);
        return -1;
    }
    check = PQconnectdb(db_url);
    return PQstatus(check) == CONNECTION_OK ? 0 : -1;
}

static int teardown(void **state) {
    (void)state;
    sink_free(sink);
    PQfinish(check);
    return 0;
}

static const char *labels[] = {"card_declined", "balance", "x\"y\\z"};

/* One window written as the worker writes it: judged in C (worker/observe/drift_judge.c) and
 * stored with its judgment (sink/drift_judge.c). */
static common_status_t write_window(const sink_drift_t *d, common_err_t *e) {
    worker_drift_judge_t *judge;
    common_status_t rc =
        worker_drift_judge_init(d->n_rows > 0 ? d->n_rows : 1, d->n_labels, d->labels, &judge, e);
    if (rc != COMMON_OK) return rc;
    rc = sink_write_drift_judged(sink, d, worker_drift_judge_stored(judge),
                                 worker_drift_judge_judged(judge), worker_drift_judge_rows, judge,
                                 e);
    worker_drift_judge_free(judge);
    return rc;
}

static void test_drift_upsert_adds(void **state) {
    (void)state;
    int64_t lc_a[3] = {2, 1, 0}, lc_o[3] = {0, 0, 5};
    int64_t h_a[SINK_DRIFT_BINS] = {0, 0, 0, 0, 0, 0, 0, 1, 0, 2};
    int64_t h_o[SINK_DRIFT_BINS] = {5};
    sink_drift_row_t rows[2] = {
        {.tenant = "o'brien \"q\" \xc3\xbc",
         .tickets = 3,
         .label_counts = lc_a,
         .hist = h_a,
         .confidence_sum = 2.7,
         .truncated = 1,
         .tokens = 30},
        {.tenant = "_other",
         .overflow = 1,
         .tickets = 5,
         .label_counts = lc_o,
         .hist = h_o,
         .confidence_sum = 0.25,
         .tokens = 50},
    };
    sink_drift_t d = {.window_start_s = 1700000040,
                      .window_s = 60,
                      .model = "m1",
                      .worker = "host:1",
                      .labels = labels,
                      .n_labels = 3,
                      .rows = rows,
                      .n_rows = 2};
    common_err_t e;
    assert_int_equal(write_window(&d, &e), COMMON_OK);
    expect("SELECT count(*) || ' ' || sum(tickets) FROM drift_windows", "2 8");
    expect("SELECT label_counts::text || ' ' || confidence_hist::text || ' ' || truncated || ' ' "
           "|| tokens || ' ' || round(mean_confidence::numeric, 3) FROM drift_windows WHERE "
           "tenant = 'o''brien \"q\" \xc3\xbc'",
           "{\"balance\": 1, \"card_declined\": 2} {0,0,0,0,0,0,0,1,0,2} 1 30 0.900");
    expect("SELECT overflow::text || ' ' || label_counts::text || ' ' || window_s || ' ' || "
           "extract(epoch FROM window_start)::bigint FROM drift_windows WHERE tenant = '_other'",
           "true {\"x\\\"y\\\\z\": 5} 60 1700000040");

    /* the same window, tenant, model and worker again (a restarted pod): everything adds */
    assert_int_equal(write_window(&d, &e), COMMON_OK);
    expect("SELECT count(*) || ' ' || sum(tickets) FROM drift_windows", "2 16");
    expect("SELECT label_counts::text || ' ' || confidence_hist::text || ' ' || truncated || ' ' "
           "|| tokens || ' ' || round(mean_confidence::numeric, 3) || ' ' || "
           "round(confidence_sum::numeric, 3) FROM drift_windows WHERE tenant LIKE 'o''brien%'",
           "{\"balance\": 2, \"card_declined\": 4} {0,0,0,0,0,0,0,2,0,4} 2 60 0.900 5.400");

    /* another worker: its own rows, the view sums them */
    d.worker = "host:2";
    d.n_rows = 1;
    assert_int_equal(write_window(&d, &e), COMMON_OK);
    expect("SELECT tickets || ' ' || workers FROM drift_by_window WHERE tenant LIKE 'o''brien%'",
           "9 2");
    /* nothing to write is not an error */
    d.n_rows = 0;
    assert_int_equal(write_window(&d, &e), COMMON_OK);
}

static void test_drift_duplicate_label_names(void **state) {
    (void)state;
    const char *dup[] = {"same", "same"};
    int64_t lc[2] = {1, 2}, h[SINK_DRIFT_BINS] = {0, 0, 0, 0, 0, 3};
    sink_drift_row_t row = {.tenant = "dup", .tickets = 3, .label_counts = lc, .hist = h};
    sink_drift_t d = {.window_start_s = 60,
                      .window_s = 60,
                      .model = "m1",
                      .worker = "w",
                      .labels = dup,
                      .n_labels = 2,
                      .rows = &row,
                      .n_rows = 1};
    common_err_t e;
    assert_int_equal(write_window(&d, &e), COMMON_OK);
    expect("SELECT label_counts::text FROM drift_windows WHERE tenant = 'dup'", "{\"same\": 3}");
}

static void test_gpu_memory_rows(void **state) {
    (void)state;
    sink_gpu_memory_t g = {.worker = "host:1",
                           .backend = "cuda",
                           .precision = "fp16",
                           .device_total_bytes = -1,
                           .device_used_bytes = 3000000000LL,
                           .weights_bytes = 22000000,
                           .arena_bytes = 900000000,
                           .allocations_after_init = 0,
                           .token_budget = 16384};
    common_err_t e;
    assert_int_equal(sink_write_gpu_memory(sink, &g, &e), COMMON_OK);
    g.device_total_bytes = 150000000000LL;
    g.precision = NULL;
    assert_int_equal(sink_write_gpu_memory(sink, &g, &e), COMMON_OK);
    expect("SELECT count(*) FILTER (WHERE device_total_bytes IS NULL AND \"precision\" = 'fp16') "
           "|| ' ' || count(*) FILTER (WHERE device_total_bytes = 150000000000 AND \"precision\" "
           "IS NULL) || ' ' || sum(device_used_bytes) || ' ' || max(token_budget) FROM gpu_memory",
           "1 1 6000000000 16384");
    /* a second encoder's row names its device and encoder */
    g.device = 1;
    g.encoder = 3;
    assert_int_equal(sink_write_gpu_memory(sink, &g, &e), COMMON_OK);
    expect("SELECT string_agg(device || ':' || encoder, ' ' ORDER BY device, encoder) "
           "FROM gpu_memory",
           "0:0 0:0 1:3");
    /* a backend without devices (the cpu) runs on the host: no device, as its batches rows */
    g.backend = "cpu";
    g.device = -1;
    g.encoder = 0;
    assert_int_equal(sink_write_gpu_memory(sink, &g, &e), COMMON_OK);
    expect("SELECT count(*) FILTER (WHERE device IS NULL) || ' ' || count(*) FROM gpu_memory"
           " WHERE backend = 'cpu'",
           "1 1");
}

static void test_missing_tables_fatal(void **state) {
    (void)state;
    PQclear(PQexec(check, "ALTER TABLE gpu_memory RENAME TO gpu_memory_away"));
    sink_gpu_memory_t g = {.worker = "w", .backend = "cpu"};
    common_err_t e;
    assert_int_equal(sink_write_gpu_memory(sink, &g, &e), COMMON_FATAL);
    assert_non_null(strstr(e.message, "gpu_memory"));
    assert_non_null(strstr(e.hint, "003_telemetry.sql")); /* what to do about it */
    PQclear(PQexec(check, "ALTER TABLE gpu_memory_away RENAME TO gpu_memory"));
    assert_int_equal(sink_write_gpu_memory(sink, &g, &e), COMMON_OK);
}

/* A full disk (SQLSTATE 53100, raised here by a trigger as the server would) is something an
 * operator fixes while the worker waits: retried, and never blamed on a missing migration. */
static void test_disk_full_retried(void **state) {
    (void)state;
    PQclear(PQexec(check, "CREATE FUNCTION disk_full() RETURNS trigger LANGUAGE plpgsql AS "
                          "$$BEGIN RAISE EXCEPTION 'could not extend file' USING ERRCODE = "
                          "'disk_full'; END$$"));
    PQclear(PQexec(check, "CREATE TRIGGER disk_full_now BEFORE INSERT ON gpu_memory FOR EACH ROW "
                          "EXECUTE FUNCTION disk_full()"));
    sink_gpu_memory_t g = {.worker = "w", .backend = "cpu"};
    common_err_t e;
    assert_int_equal(sink_write_gpu_memory(sink, &g, &e), COMMON_RETRY);
    char line[COMMON_ERR_LINE_MAX];
    common_err_line(&e, line, sizeof line);
    assert_non_null(strstr(e.message, "53100"));
    assert_null(strstr(line, "003_telemetry"));
    assert_null(strstr(line, "migrat"));
    PQclear(PQexec(check, "DROP TRIGGER disk_full_now ON gpu_memory"));
    assert_int_equal(sink_write_gpu_memory(sink, &g, &e), COMMON_OK);
}

typedef struct {
    int n;
    char first[32];
    int first_level;
    long drift, no_baseline;
} status_seen_t;

static void seen_status(void *ctx, const char *tenant, int level) {
    status_seen_t *s = ctx;
    if (s->n++ == 0) {
        snprintf(s->first, sizeof(s->first), "%s", tenant);
        s->first_level = level;
    }
}

static void seen_count(void *ctx, const char *status, long tenants) {
    status_seen_t *s = ctx;
    if (!strcmp(status, "drift")) s->drift = tenants;
    if (!strcmp(status, "no_baseline")) s->no_baseline = tenants;
}

/* 500 tenants in one window (each its own row, rolled up by hour and by day once a later day
 * is written); the last one by name drifts from its pinned baseline. The worker's judge
 * (worker/observe/drift_judge.c) judges all 500 as the window is written; the read-back gives the
 * drifting tenant first whatever its name (it was cut off alphabetically before migration 009) and
 * counts every status. */
static void test_drift_status_worst_first(void **state) {
    (void)state;
    enum { T = 500 };
    static char names[T][16];
    static sink_drift_row_t rows[T];
    static int64_t lc[3] = {150, 50, 0}, hist[SINK_DRIFT_BINS] = {0, 0, 0, 0, 0, 0, 0, 0, 100, 100};
    for (int t = 0; t < T; t++) {
        snprintf(names[t], sizeof(names[t]), "t%03d", t);
        rows[t] = (sink_drift_row_t){.tenant = names[t],
                                     .tickets = 200,
                                     .label_counts = lc,
                                     .hist = hist,
                                     .confidence_sum = 180,
                                     .tokens = 2000};
    }
    int64_t start = (int64_t)time(NULL) / 60 * 60;
    sink_drift_t d = {.window_start_s = start,
                      .window_s = 60,
                      .model = "m2",
                      .worker = "w1",
                      .labels = labels,
                      .n_labels = 3,
                      .rows = rows,
                      .n_rows = T};
    common_err_t e;
    PQclear(PQexec(check,
                   "INSERT INTO drift_baselines (tenant, model, label_counts, confidence_hist,"
                   " tickets, source) VALUES ('t499', 'm2', '{\"balance\": 1000}',"
                   " '{0,0,0,0,0,0,0,0,500,500}', 1000, 'windows')"));
    /* the window judged as the worker writes it (020) */
    assert_int_equal(write_window(&d, &e), COMMON_OK);
    status_seen_t seen = {0};
    assert_int_equal(sink_drift_status(sink, "m2", start, 64, seen_status, seen_count, &seen, &e),
                     COMMON_OK);
    assert_int_equal(seen.n, 64);
    assert_string_equal(seen.first, "t499");
    assert_int_equal(seen.first_level, 3);
    assert_int_equal(seen.drift, 1);
    assert_int_equal(seen.no_baseline, T - 1);
    expect("SELECT count(*) FROM drift_status WHERE model = 'm2'", "500");
    /* hours and days take whole hours and days (020): the window reaches its hour when a
     * later hour is written, its day when a later day is */
    expect("SELECT count(*) FROM drift_hourly WHERE model = 'm2'", "0");
    expect("SELECT count(*) FROM drift_daily WHERE model = 'm2'", "0");
    d.window_start_s = start + 86400;
    assert_int_equal(write_window(&d, &e), COMMON_OK);
    expect("SELECT count(*) || ' ' || sum(tickets) FROM drift_hourly WHERE model = 'm2'",
           "500 100000");
    expect("SELECT count(*) || ' ' || sum(tickets) FROM drift_daily WHERE model = 'm2'",
           "500 100000");
}

int main(void) {
    db_url = getenv("RECLASS_TEST_DB");
    if (!db_url) {
        fprintf(stderr, "RECLASS_TEST_DB is not set (run through tests/test_sink.sh)\n");
        return 1;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_drift_upsert_adds),
        cmocka_unit_test(test_drift_duplicate_label_names),
        cmocka_unit_test(test_gpu_memory_rows),
        cmocka_unit_test(test_missing_tables_fatal),
        cmocka_unit_test(test_disk_full_retried),
        cmocka_unit_test(test_drift_status_worst_first),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
