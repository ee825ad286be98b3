/* worker/observe/drift_score.c against the SQL judge in a real PostgreSQL (tests/test_sink.sh
 * starts one). (1) Its formulas (drift_compare, migrations 004/009): seeded random windows and
 * references, the edge cases among them (no labels, no tickets, a '{}' or NULL reference label
 * map, empty histograms, sparse windows), every score, its NULLs, the new and gone labels and
 * the status the same. (2) The judge itself (drift_status_refresh): tenants' windows of two
 * workers over hours, a pinned baseline, a tenant without history; C scores each newest window
 * (both workers' rows summed) against the reference the judge used (drift_reference, or the
 * pin) and equals what the judge stored in drift_judged. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <libpq-fe.h>

#include "sink/migrate.h"
#include "tests/lib/test_rng.h"
#include "worker/observe/drift_score.h"

#define CASES  400
#define LABELS 24 /* names lab00..lab23: byte order = any collation's order */

static const char *db_url;
static PGconn *conn;

static int setup(void **state) {
    (void)state;
    common_err_t e;
    int applied = 0;
    if (sink_migrate_ex(db_url, RECLASS_SOURCE_DIR "/migrations", NULL, &applied, &e) !=
        COMMON_OK) {
        common_err_print(stderr, &e);
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

typedef struct {
    char names[LABELS][8];
    worker_drift_label_t labels[LABELS];
    int64_t hist[WORKER_DRIFT_SCORE_BINS];
    worker_drift_dist_t d;
    int null_labels; /* the reference's NULL label map */
} dist_t;

/* A random distribution: each label present with probability 1/2 (none at all 1 in 8). */
static void random_dist(dist_t *x, int64_t max_count, int zero_hist) {
    memset(x, 0, sizeof(*x));
    int none = rng_int(0, 7) == 0, n = 0;
    int64_t sum = 0;
    for (int l = 0; !none && l < LABELS; l++) {
        if (rng_int(0, 1)) continue;
        snprintf(x->names[n], sizeof(x->names[n]), "lab%02d", l);
        x->labels[n] = (worker_drift_label_t){x->names[n], rng_int(1, (int)max_count)};
        sum += x->labels[n++].count;
    }
    for (int b = 0; b < WORKER_DRIFT_SCORE_BINS; b++)
        x->hist[b] = zero_hist ? 0 : rng_int(0, (int)max_count / 4);
    x->d = (worker_drift_dist_t){x->labels, n, x->hist, sum + rng_int(0, 3)};
}

/* jsonb of a label list ("NULL" for SQL NULL), bigint[] of a histogram */
static void labels_sql(const dist_t *x, int null_map, char *out, size_t cap) {
    if (null_map) {
        snprintf(out, cap, "NULL");
        return;
    }
    size_t o = (size_t)snprintf(out, cap, "'{");
    for (int i = 0; i < x->d.n_labels; i++)
        o += (size_t)snprintf(out + o, cap - o, "%s\"%s\": %lld", i ? ", " : "", x->labels[i].name,
                              (long long)x->labels[i].count);
    snprintf(out + o, cap - o, "}'::jsonb");
}

static void hist_sql(const int64_t *h, char *out, size_t cap) {
    size_t o = (size_t)snprintf(out, cap, "'{");
    for (int b = 0; b < WORKER_DRIFT_SCORE_BINS; b++)
        o += (size_t)snprintf(out + o, cap - o, "%s%lld", b ? "," : "", (long long)h[b]);
    snprintf(out + o, cap - o, "}'::bigint[]");
}

static void same_double(const PGresult *r, int col, int has, double v, int c) {
    if (PQgetisnull(r, 0, col)) {
        if (has) fail_msg("case %d column %s: SQL NULL, C %.17g", c, PQfname(r, col), v);
        return;
    }
    double want = strtod(PQgetvalue(r, 0, col), NULL);
    if (!has) fail_msg("case %d column %s: SQL %.17g, C NULL", c, PQfname(r, col), want);
    if (fabs(want - v) > 1e-9 * fmax(1.0, fabs(want)))
        fail_msg("case %d column %s: SQL %.17g, C %.17g", c, PQfname(r, col), want, v);
}

static void join_names(const dist_t *x, const int *idx, int n, char *out, size_t cap) {
    size_t o = 0;
    out[0] = '\0';
    for (int i = 0; i < n; i++)
        o += (size_t)snprintf(out + o, cap - o, "%s%s", i ? "," : "", x->labels[idx[i]].name);
}

static void test_scores_equal_sql(void **state) {
    (void)state;
    rng_state = 41;
    static dist_t cur, ref;
    int counts[WORKER_DRIFT_NO_BASELINE + 5] = {0};
    for (int c = 0; c < CASES; c++) {
        random_dist(&cur, rng_int(0, 3) ? 200 : 8, rng_int(0, 15) == 0);
        random_dist(&ref, 5000, rng_int(0, 15) == 0);
        int mode = rng_int(0, 9); /* 0: no reference tickets, 1: NULL label map, 2: '{}' */
        if (mode == 0) {
            ref.d.tickets = 0;
            ref.d.n_labels = 0;
            memset(ref.hist, 0, sizeof(ref.hist));
        }
        if (mode == 1 || (mode == 0 && rng_int(0, 1))) {
            ref.null_labels = 1;
            ref.d.labels = NULL;
            ref.d.n_labels = 0;
        }
        if (mode == 2) ref.d.n_labels = 0;
        char cl[1024], rl[1024], ch[256], rh[256], sql[3072];
        labels_sql(&cur, cur.d.n_labels == 0, cl, sizeof(cl)); /* the judge's nullif(.., '{}') */
        labels_sql(&ref, ref.null_labels, rl, sizeof(rl));
        hist_sql(cur.hist, ch, sizeof(ch));
        hist_sql(ref.hist, rh, sizeof(rh));
        snprintf(sql, sizeof(sql),
                 "SELECT label_psi, label_js, confidence_psi, confidence_js, low_confidence_share,"
                 " low_confidence_change, array_to_string(labels_new, ','),"
                 " array_to_string(labels_gone, ','), status"
                 " FROM drift_compare(%s, %s, %lld, %s, %s, %lld)",
                 cl, ch, (long long)cur.d.tickets, rl, rh, (long long)ref.d.tickets);
        PGresult *r = PQexec(conn, sql);
        if (PQresultStatus(r) != PGRES_TUPLES_OK || PQntuples(r) != 1)
            fail_msg("case %d: %s: %s", c, sql, PQerrorMessage(conn));
        int new_idx[LABELS], gone_idx[LABELS];
        worker_drift_score_t s;
        worker_drift_score(&cur.d, &ref.d, new_idx, gone_idx, &s);
        same_double(r, 0, s.has_label, s.label_psi, c);
        same_double(r, 1, s.has_label, s.label_js, c);
        same_double(r, 2, s.has_confidence, s.confidence_psi, c);
        same_double(r, 3, s.has_confidence, s.confidence_js, c);
        same_double(r, 4, s.has_low, s.low_share, c);
        same_double(r, 5, s.has_low_change, s.low_change, c);
        char got[512];
        join_names(&cur, new_idx, s.n_new, got, sizeof(got));
        if (strcmp(got, PQgetvalue(r, 0, 6)))
            fail_msg("case %d labels_new: SQL {%s}, C {%s}", c, PQgetvalue(r, 0, 6), got);
        join_names(&ref, gone_idx, s.n_gone, got, sizeof(got));
        if (strcmp(got, PQgetvalue(r, 0, 7)))
            fail_msg("case %d labels_gone: SQL {%s}, C {%s}", c, PQgetvalue(r, 0, 7), got);
        if (strcmp(worker_drift_status_name(s.status), PQgetvalue(r, 0, 8)))
            fail_msg("case %d status: SQL %s, C %s", c, PQgetvalue(r, 0, 8),
                     worker_drift_status_name(s.status));
        counts[s.status]++;
        PQclear(r);
    }
    /* the cases reach every status */
    for (int st = WORKER_DRIFT_NO_BASELINE; st <= WORKER_DRIFT_DRIFT; st++)
        if (!counts[st])
            fail_msg("no case ended %s", worker_drift_status_name((worker_drift_status_t)st));
}

/* "name:count,..." (name order) into x's labels; NULL or "" leaves none. */
static void parse_labels(dist_t *x, const char *s) {
    int n = 0;
    while (s && *s && n < LABELS) {
        const char *colon = strchr(s, ':');
        size_t len = (size_t)(colon - s);
        snprintf(x->names[n], sizeof(x->names[n]), "%.*s", (int)len, s);
        x->labels[n] = (worker_drift_label_t){x->names[n], strtoll(colon + 1, NULL, 10)};
        n++;
        s = strchr(colon, ',');
        s = s ? s + 1 : NULL;
    }
    x->d.labels = x->labels;
    x->d.n_labels = n;
}

static void parse_hist(dist_t *x, const char *s) {
    for (int b = 0; b < WORKER_DRIFT_SCORE_BINS; b++) {
        char *end;
        x->hist[b] = strtoll(s + 1, &end, 10); /* "{1,2,...}": past '{' or ',' */
        s = end;
    }
    x->d.hist = x->hist;
}

static void test_judge_equals_c(void **state) {
    (void)state;
    rng_state = 4141;
    /* 8 tenants, 10-minute windows over the last 9 hours, two workers; tenant c7 only now */
    PGresult *r = PQexec(
        conn,
        "INSERT INTO drift_windows (window_start, window_s, tenant, model, worker, tickets,"
        " label_counts, confidence_hist)"
        " SELECT date_trunc('hour', now()) - g * interval '10 minutes', 600, 'c' || k, 'mc',"
        "  'w' || wk, 40 + (k * 7 + g * 3 + wk) % 60,"
        "  jsonb_build_object('lab00', 40 + (g + k) % 9, 'lab' || lpad((1 + k % 11)::text, 2, '0'),"
        "   30 + wk + g % 3, 'lab12', CASE WHEN g < 3 AND k = 3 THEN 60 ELSE 1 + g % 4 END),"
        "  ARRAY[0, 1, 0, 2, (g + k) % 5, 3, 5 + wk, 10 + g % 7, 12 + k, 6]"
        " FROM generate_series(0, 54) g, generate_series(0, 7) k, generate_series(1, 2) wk"
        " WHERE k <> 7 OR g = 0");
    if (PQresultStatus(r) != PGRES_COMMAND_OK) fail_msg("%s", PQerrorMessage(conn));
    PQclear(r);
    r = PQexec(conn, "INSERT INTO drift_baselines (tenant, model, label_counts, confidence_hist,"
                     " tickets, source) VALUES ('c5', 'mc', '{\"lab00\": 500, \"lab05\": 300,"
                     " \"lab13\": 200}', '{0,0,0,0,100,100,200,300,200,100}', 1000, 'windows')");
    if (PQresultStatus(r) != PGRES_COMMAND_OK) fail_msg("%s", PQerrorMessage(conn));
    PQclear(r);
    /* judged twice: the references summed afresh, then moved a window on */
    for (int step = 0; step < 2; step++) {
        /* the next window of c0-c6 (c7's newest stays), as the one before it */
        r = PQexec(conn, step ? "INSERT INTO drift_windows (window_start, window_s, tenant, model,"
                                " worker, tickets, label_counts, confidence_hist)"
                                " SELECT window_start + interval '10 minutes', window_s, tenant,"
                                " model, worker, tickets, label_counts, confidence_hist"
                                " FROM drift_windows WHERE model = 'mc' AND tenant <> 'c7'"
                                " AND window_start = date_trunc('hour', now())"
                              : "SELECT 1");
        if (PQresultStatus(r) != PGRES_COMMAND_OK && PQresultStatus(r) != PGRES_TUPLES_OK)
            fail_msg("%s", PQerrorMessage(conn));
        PQclear(r);
        r = PQexec(conn, "SELECT drift_status_refresh('mc', now() - interval '1 day')");
        if (PQresultStatus(r) != PGRES_TUPLES_OK) fail_msg("%s", PQerrorMessage(conn));
        PQclear(r);
        /* each tenant's newest window summed over workers, its reference, the judge's row */
        r = PQexec(
            conn,
            "WITH s AS (SELECT tenant, window_start FROM drift_status WHERE model = 'mc'),"
            " cur AS (SELECT s.tenant, sum(w.tickets) AS n,"
            "  (SELECT string_agg(key || ':' || c, ',' ORDER BY key COLLATE \"C\") FROM ("
            "    SELECT e.key, sum(e.value::bigint) AS c FROM drift_windows x,"
            "    jsonb_each_text(x.label_counts) e WHERE x.tenant = s.tenant AND x.model = 'mc'"
            "    AND x.window_start = s.window_start GROUP BY 1 HAVING sum(e.value::bigint) <> 0) "
            "l)"
            "   AS lc,"
            "  ARRAY[sum(w.confidence_hist[1]), sum(w.confidence_hist[2]),"
            "   sum(w.confidence_hist[3]), sum(w.confidence_hist[4]), sum(w.confidence_hist[5]),"
            "   sum(w.confidence_hist[6]), sum(w.confidence_hist[7]), sum(w.confidence_hist[8]),"
            "   sum(w.confidence_hist[9]), sum(w.confidence_hist[10])]::text AS h"
            "  FROM s JOIN drift_windows w ON w.tenant = s.tenant AND w.model = 'mc'"
            "   AND w.window_start = s.window_start GROUP BY s.tenant, s.window_start)"
            " SELECT cur.tenant, cur.n, cur.lc, cur.h,"
            "  coalesce(p.tickets, CASE WHEN r.windows > 0 THEN r.tickets END),"
            "  (SELECT string_agg(key || ':' || value, ',' ORDER BY key COLLATE \"C\")"
            "   FROM jsonb_each_text(coalesce(p.label_counts, r.label_counts))),"
            "  coalesce(p.confidence_hist, r.confidence_hist)::text, p.id IS NOT NULL,"
            "  j.label_psi, j.label_js, j.confidence_psi, j.confidence_js,"
            "  j.low_confidence_share, j.low_confidence_change, array_to_string(j.labels_new, ','),"
            "  array_to_string(j.labels_gone, ','), j.status"
            " FROM cur JOIN drift_status s ON s.tenant = cur.tenant AND s.model = 'mc'"
            " LEFT JOIN drift_reference r ON r.tenant = cur.tenant AND r.model = 'mc'"
            "  AND r.ref_end = s.window_start"
            " LEFT JOIN LATERAL (SELECT * FROM drift_baselines z WHERE z.tenant = cur.tenant"
            "  AND z.model = 'mc' ORDER BY z.created_at DESC, z.id DESC LIMIT 1) p ON true"
            " JOIN drift_judged j ON j.tenant = cur.tenant AND j.model = 'mc'"
            "  AND j.window_start = s.window_start ORDER BY cur.tenant");
        if (PQresultStatus(r) != PGRES_TUPLES_OK) fail_msg("%s", PQerrorMessage(conn));
        assert_int_equal(PQntuples(r), 8);
        int seen[WORKER_DRIFT_DRIFT + 1] = {0};
        for (int i = 0; i < PQntuples(r); i++) {
            static dist_t cur, ref;
            memset(&cur, 0, sizeof(cur));
            memset(&ref, 0, sizeof(ref));
            cur.d.tickets = strtoll(PQgetvalue(r, i, 1), NULL, 10);
            parse_labels(&cur, PQgetvalue(r, i, 2));
            parse_hist(&cur, PQgetvalue(r, i, 3));
            int has_ref = !PQgetisnull(r, i, 4), pinned = PQgetvalue(r, i, 7)[0] == 't';
            if (has_ref) {
                ref.d.tickets = strtoll(PQgetvalue(r, i, 4), NULL, 10);
                parse_labels(&ref, PQgetvalue(r, i, 5));
                parse_hist(&ref, PQgetvalue(r, i, 6));
                /* a trailing reference naming no label is the NULL map; a pin's is '{}' */
                if (!pinned && ref.d.n_labels == 0) ref.d.labels = NULL;
            }
            int new_idx[LABELS], gone_idx[LABELS];
            worker_drift_score_t sc;
            worker_drift_score(&cur.d, has_ref ? &ref.d : NULL, new_idx, gone_idx, &sc);
            int c = step * 100 + i;
            char got[512];
#define SAME(col, has, v)                                                                          \
    do {                                                                                           \
        if (PQgetisnull(r, i, col) != !(has))                                                      \
            fail_msg("judge %d %s: NULL differs", c, PQfname(r, col));                             \
        if ((has) && fabs(strtod(PQgetvalue(r, i, col), NULL) - (v)) > 1e-9 * fmax(1.0, fabs(v)))  \
            fail_msg("judge %d %s: SQL %s, C %.17g", c, PQfname(r, col), PQgetvalue(r, i, col),    \
                     (double)(v));                                                                 \
    } while (0)
            SAME(8, sc.has_label, sc.label_psi);
            SAME(9, sc.has_label, sc.label_js);
            SAME(10, sc.has_confidence, sc.confidence_psi);
            SAME(11, sc.has_confidence, sc.confidence_js);
            SAME(12, sc.has_low, sc.low_share);
            SAME(13, sc.has_low_change, sc.low_change);
#undef SAME
            join_names(&cur, new_idx, sc.n_new, got, sizeof(got));
            if (strcmp(got, PQgetvalue(r, i, 14)))
                fail_msg("judge %d labels_new: SQL {%s}, C {%s}", c, PQgetvalue(r, i, 14), got);
            join_names(&ref, gone_idx, sc.n_gone, got, sizeof(got));
            if (strcmp(got, PQgetvalue(r, i, 15)))
                fail_msg("judge %d labels_gone: SQL {%s}, C {%s}", c, PQgetvalue(r, i, 15), got);
            if (strcmp(worker_drift_status_name(sc.status), PQgetvalue(r, i, 16)))
                fail_msg("judge %d status: SQL %s, C %s", c, PQgetvalue(r, i, 16),
                         worker_drift_status_name(sc.status));
            seen[sc.status]++;
        }
        PQclear(r);
        /* the data reaches a baseline-less tenant, a drifting one and calm ones */
        if (!seen[WORKER_DRIFT_NO_BASELINE] || !seen[WORKER_DRIFT_DRIFT] || !seen[WORKER_DRIFT_OK])
            fail_msg("step %d: statuses no_baseline %d, drift %d, ok %d: each expected", step,
                     seen[WORKER_DRIFT_NO_BASELINE], seen[WORKER_DRIFT_DRIFT],
                     seen[WORKER_DRIFT_OK]);
    }
}

int main(void) {
    db_url = getenv("RECLASS_TEST_DB");
    if (!db_url) {
        fprintf(stderr, "RECLASS_TEST_DB is not set (run through tests/test_sink.sh)\n");
        return 1;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_scores_equal_sql),
        cmocka_unit_test(test_judge_equals_c),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
