/* The worker's judged write of a drift window (sink/drift_judge.c with the worker's judge,
 * worker/observe/drift_judge.c; migration 020) against the SQL judge in a real PostgreSQL
 * (tests/test_sink.sh starts one). Hour-long windows of eight tenants over the 30 hours
 * before this one from two workers, a pinned baseline; this hour's window written by worker A
 * (tenants c0-c5, c7 without history), then by worker B (c3-c6): the last writer of a tenant
 * judges the sum of both. Then the SQL judge (drift_status_refresh) judges the same windows:
 * every score, NULL, new and gone label, status, reference and tickets the same, and the
 * statuses the worker stored in drift_status are its judgments. drift_judged takes them when the
 * hour closes (here: worker B stops), at once for a window of a closed hour (a late worker C);
 * every model's windows of the hour, whichever model's worker closes it (022). The report
 * (drift_report_tenants, drift_report_worst) reads the same before and after the close. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>
#include <libpq-fe.h>

#include "sink/drift_judge.h"
#include "sink/migrate.h"
#include "sink/sink.h"
#include "worker/observe/drift_judge.h"

#define LABELS 15

static const char *db_url;
static PGconn *conn;
static sink_t *sink;
static const char *labels[LABELS] = {"lab00", "lab01", "lab02", "lab03", "lab04",
                                     "lab05", "lab06", "lab07", "lab08", "lab09",
                                     "lab10", "lab11", "lab12", "lab13", "lab20"};

static int setup(void **state) {
    (void)state;
    common_err_t e;
    int applied = 0;
    if (sink_migrate_ex(db_url, RECLASS_SOURCE_DIR "/migrations", NULL, &applied, &e) !=
            COMMON_OK ||
        sink_init(db_url, "mw", &sink, &e) != COMMON_OK) {
        common_err_print(stderr, &e);
        return -1;
    }
    conn = PQconnectdb(db_url);
    return PQstatus(conn) == CONNECTION_OK ? 0 : -1;
}

static int teardown(void **state) {
    (void)state;
    sink_free(sink);
    PQfinish(conn);
    return 0;
}

static void exec_ok(const char *sql) {
    PGresult *r = PQexec(conn, sql);
    if (PQresultStatus(r) != PGRES_COMMAND_OK && PQresultStatus(r) != PGRES_TUPLES_OK)
        fail_msg("%s: %s", sql, PQerrorMessage(conn));
    PQclear(r);
}

/* Worker wk's rows of this hour's window for tenants c<lo>..c<hi> (and c7 when with7). */
static void write_window(int64_t start, int wk, int lo, int hi, int with7,
                         worker_drift_judge_t *judge) {
    static int64_t counts[8][LABELS], hist[8][SINK_DRIFT_BINS];
    static char names[8][8];
    sink_drift_row_t rows[8];
    int n = 0;
    for (int k = 0; k < 8; k++) {
        if ((k < lo || k > hi) && !(k == 7 && with7)) continue;
        snprintf(names[n], sizeof(names[n]), "c%d", k);
        long tickets = 0;
        for (int l = 0; l < LABELS; l++) {
            int64_t c = (k * 3 + l * 5 + wk) % 7 == 0 ? 0 : (k + l + wk) % 9;
            if (l == 0) c += k % 2 ? 20 : 100;
            if (l == LABELS - 1) c = k == 2 ? 30 : 0; /* lab20: new in the window */
            if (l == 12 && k == 3) c += 80;           /* c3's lab12 jumps */
            if (k == 6)                               /* c6 as its history: twice an hour's mix */
                c = l == 0 ? 84 : l == 7 ? 64 : l == 12 ? 4 : 0;
            counts[n][l] = c;
            tickets += c;
        }
        for (int b = 0; b < SINK_DRIFT_BINS; b++)
            hist[n][b] = k == 6 ? (int64_t[]){0, 2, 0, 4, 4, 6, 14, 24, 36, 12}[b]
                                : (b + k + wk) % 6 + (b >= 7 ? 20 : 0);
        rows[n] = (sink_drift_row_t){.tenant = names[n],
                                     .tickets = tickets,
                                     .label_counts = counts[n],
                                     .hist = hist[n],
                                     .confidence_sum = 0.7 * (double)tickets,
                                     .tokens = 20 * tickets};
        n++;
    }
    char worker[8];
    snprintf(worker, sizeof(worker), "w%d", wk);
    sink_drift_t d = {.window_start_s = start,
                      .window_s = 3600,
                      .model = "mw",
                      .worker = worker,
                      .labels = labels,
                      .n_labels = LABELS,
                      .rows = rows,
                      .n_rows = n};
    common_err_t e;
    if (sink_write_drift_judged(sink, &d, worker_drift_judge_stored(judge),
                                worker_drift_judge_judged(judge), worker_drift_judge_rows, judge,
                                &e) != COMMON_OK)
        fail_msg("write: %s", e.message);
}

/* What `reclass drift report` reads of model mw's windows of this hour: 8 tenants with one
 * window each in window buckets, one hour bucket and one day bucket each; the worst list of
 * windows holds 8. */
static void report_sees_hour(const char *when) {
    static const char *const q[] = {
        "SELECT count(*) || ' ' || sum(buckets) FROM drift_report_tenants('window',"
        " date_trunc('hour', now()), NULL, 'mw')",
        "SELECT count(*) || ' ' || sum(buckets) FROM drift_report_tenants('hour',"
        " date_trunc('hour', now()), NULL, 'mw')",
        "SELECT count(*) || ' ' || sum(buckets) FROM drift_report_tenants('day',"
        " date_trunc('day', now()), NULL, 'mw')",
        "SELECT count(*) || ' ' || count(*) FROM drift_report_worst('window',"
        " date_trunc('hour', now()), NULL, 'mw', 100)",
        "SELECT count(*) || ' ' || count(*) FROM drift_report_worst('hour',"
        " date_trunc('hour', now()), NULL, 'mw', 100)",
    };
    for (size_t i = 0; i < sizeof q / sizeof q[0]; i++) {
        PGresult *r = PQexec(conn, q[i]);
        if (PQresultStatus(r) != PGRES_TUPLES_OK) fail_msg("%s: %s", q[i], PQerrorMessage(conn));
        if (strcmp(PQgetvalue(r, 0, 0), "8 8") != 0)
            fail_msg("%s: %s gave %s, want 8 8", when, q[i], PQgetvalue(r, 0, 0));
        PQclear(r);
    }
}

static void test_worker_judge_equals_sql(void **state) {
    (void)state;
    exec_ok("INSERT INTO drift_windows (window_start, window_s, tenant, model, worker, tickets,"
            " label_counts, confidence_hist)"
            " SELECT date_trunc('hour', now()) - g * interval '1 hour', 3600, 'c' || k, 'mw',"
            "  'w' || wk, 40 + (k * 7 + g * 3 + wk) % 60,"
            "  jsonb_build_object('lab00', 40 + (g + k) % 9, 'lab' || lpad((1 + k % 11)::text,"
            "   2, '0'), 30 + wk + g % 3, 'lab12', CASE WHEN g < 3 AND k = 3 THEN 60"
            "   ELSE 1 + g % 4 END),"
            "  ARRAY[0, 1, 0, 2, (g + k) % 5, 3, 5 + wk, 10 + g % 7, 12 + k, 6]"
            " FROM generate_series(1, 30) g, generate_series(0, 6) k, generate_series(1, 2) wk");
    exec_ok("INSERT INTO drift_baselines (tenant, model, label_counts, confidence_hist,"
            " tickets, source) VALUES ('c5', 'mw', '{\"lab00\": 500, \"lab05\": 300,"
            " \"lab13\": 200}', '{0,0,0,0,100,100,200,300,200,100}', 1000, 'windows')");
    int64_t start = (int64_t)time(NULL) / 3600 * 3600;
    worker_drift_judge_t *judge;
    common_err_t e;
    assert_int_equal(worker_drift_judge_init(8, LABELS, labels, &judge, &e), COMMON_OK);
    write_window(start, 1, 0, 5, 1, judge); /* worker A */
    write_window(start, 2, 3, 6, 0, judge); /* worker B: c3-c5 judged over both */
    /* the hour not closed: no judged row of it yet */
    PGresult *r = PQexec(conn, "SELECT count(*) FROM drift_judged WHERE model = 'mw'"
                               " AND window_start = date_trunc('hour', now())");
    assert_string_equal(PQgetvalue(r, 0, 0), "0");
    PQclear(r);
    /* the report reads the open hour's judgments from the windows: the same before the close */
    report_sees_hour("open hour");
    /* another model's worker judged a window of the same hour: the close stores it too */
    exec_ok("INSERT INTO drift_windows (window_start, window_s, tenant, model, worker, tickets,"
            " label_counts, confidence_hist, status, labels_new, labels_gone, reference,"
            " judged_tickets, judged_overflow, judged_at) VALUES (date_trunc('hour', now()),"
            " 3600, 'z0', 'mz', 'wz', 5, '{\"a\": 5}', ARRAY[0, 0, 0, 0, 0, 0, 0, 0, 0, 5],"
            " 'no_baseline', '{}', '{}', 'none', 5, false, now())");
    /* B stops: the hour's judgments stored, each tenant's last (c3-c5: B's, over both) */
    assert_int_equal(sink_drift_judged_close(sink, "mw", start + 3600, &e), COMMON_OK);
    report_sees_hour("closed hour");
    r = PQexec(conn, "SELECT count(*) FROM drift_judged WHERE model = 'mz'");
    assert_string_equal(PQgetvalue(r, 0, 0), "1");
    PQclear(r);
    r = PQexec(conn,
               "SELECT count(*) FROM drift_judged j JOIN drift_windows w"
               " ON w.window_start = j.window_start AND w.tenant = j.tenant AND w.model = 'mw'"
               " AND w.judged_at = j.judged_at WHERE j.model = 'mw'"
               " AND j.window_start = date_trunc('hour', now())"
               " AND w.judged_at = (SELECT max(x.judged_at) FROM drift_windows x"
               "  WHERE x.window_start = w.window_start AND x.tenant = w.tenant)");
    assert_string_equal(PQgetvalue(r, 0, 0), "8");
    PQclear(r);
    /* a window written after its hour closed (a late worker) stores its judgments at once */
    write_window(start, 3, 6, 6, 0, judge);
    r = PQexec(conn, "SELECT count(*) FROM drift_judged j JOIN drift_windows w"
                     " ON w.window_start = j.window_start AND w.tenant = j.tenant"
                     " AND w.worker = 'w3' AND w.judged_at = j.judged_at WHERE j.model = 'mw'");
    assert_string_equal(PQgetvalue(r, 0, 0), "1");
    PQclear(r);
    worker_drift_judge_free(judge);
    /* the worker's: each tenant's row judged last, and its status; then the SQL judge's */
    r = PQexec(conn,
               "CREATE TEMP TABLE mine AS SELECT DISTINCT ON (w.tenant) w.*, s.status AS s_status,"
               " s.tickets AS s_tickets, s.label_psi AS s_label_psi FROM drift_windows w"
               " JOIN drift_status s ON s.tenant = w.tenant AND s.model = w.model"
               "  AND s.window_start = w.window_start"
               " WHERE w.model = 'mw' AND w.window_start = date_trunc('hour', now())"
               " ORDER BY w.tenant, w.judged_at DESC");
    if (PQresultStatus(r) != PGRES_COMMAND_OK) fail_msg("%s", PQerrorMessage(conn));
    PQclear(r);
    exec_ok("SELECT drift_status_refresh('mw', date_trunc('hour', now()) - interval '1 s')");
    static const char *const cols[] = {"status",
                                       "label_psi",
                                       "label_js",
                                       "confidence_psi",
                                       "confidence_js",
                                       "low_confidence_share",
                                       "low_confidence_change",
                                       "labels_new",
                                       "labels_gone",
                                       "reference",
                                       "ref_tickets",
                                       "judged_tickets"};
    r = PQexec(conn, "SELECT m.tenant, m.status, j.status, m.label_psi, j.label_psi, m.label_js,"
                     " j.label_js, m.confidence_psi, j.confidence_psi, m.confidence_js,"
                     " j.confidence_js, m.low_confidence_share, j.low_confidence_share,"
                     " m.low_confidence_change, j.low_confidence_change, m.labels_new::text,"
                     " j.labels_new::text, m.labels_gone::text, j.labels_gone::text, m.reference,"
                     " j.reference, m.ref_tickets, j.ref_tickets, m.judged_tickets, j.tickets,"
                     " m.s_status = m.status AND m.s_tickets = m.judged_tickets"
                     "  AND m.s_label_psi IS NOT DISTINCT FROM m.label_psi"
                     " FROM mine m JOIN drift_judged j ON j.tenant = m.tenant AND j.model = 'mw'"
                     "  AND j.window_start = m.window_start ORDER BY m.tenant");
    if (PQresultStatus(r) != PGRES_TUPLES_OK) fail_msg("%s", PQerrorMessage(conn));
    assert_int_equal(PQntuples(r), 8);
    int drift = 0, ok = 0, none = 0;
    for (int i = 0; i < PQntuples(r); i++) {
        const char *t = PQgetvalue(r, i, 0);
        for (int c = 0; c < 12; c++) {
            int a = 1 + 2 * c, b = a + 1;
            if (PQgetisnull(r, i, a) != PQgetisnull(r, i, b))
                fail_msg("%s %s: worker %s, SQL %s", t, cols[c],
                         PQgetisnull(r, i, a) ? "NULL" : PQgetvalue(r, i, a),
                         PQgetisnull(r, i, b) ? "NULL" : PQgetvalue(r, i, b));
            const char *x = PQgetvalue(r, i, a), *y = PQgetvalue(r, i, b);
            int num = c >= 1 && c <= 6;
            if (num ? fabs(strtod(x, NULL) - strtod(y, NULL)) >
                          1e-9 * fmax(1.0, fabs(strtod(y, NULL)))
                    : strcmp(x, y) != 0)
                fail_msg("%s %s: worker %s, SQL %s", t, cols[c], x, y);
        }
        if (PQgetvalue(r, i, 25)[0] != 't') fail_msg("%s: drift_status is not its judgment", t);
        drift += !strcmp(PQgetvalue(r, i, 1), "drift") || !strcmp(PQgetvalue(r, i, 1), "watch");
        ok += !strcmp(PQgetvalue(r, i, 1), "ok");
        none += !strcmp(PQgetvalue(r, i, 1), "no_baseline");
    }
    PQclear(r);
    if (!drift || !ok || !none)
        fail_msg("statuses drift/watch %d, ok %d, no_baseline %d: each expected", drift, ok, none);
}

int main(void) {
    db_url = getenv("RECLASS_TEST_DB");
    if (!db_url) {
        fprintf(stderr, "RECLASS_TEST_DB is not set (run through tests/test_sink.sh)\n");
        return 1;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_worker_judge_equals_sql),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
