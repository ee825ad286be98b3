/* worker/observe/drift_score.c against the SQL judge's formulas (drift_compare, migrations
 * 004/009; test_drift_scale holds the judge equal to it) in a real PostgreSQL (tests/test_sink.sh
 * starts one): seeded random windows and references, the edge cases among them (no labels,
 * no tickets, a '{}' or NULL reference label map, empty histograms, sparse windows), every
 * score, its NULLs, the new and gone labels and the status the same. */
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
    char err[1024];
    int applied = 0;
    if (sink_migrate_ex(db_url, RECLASS_SOURCE_DIR "/migrations", NULL, &applied, err,
                        sizeof(err))) {
        fprintf(stderr, "migrate: %s\n", err);
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
        o += (size_t)snprintf(out + o, cap - o, "%s\"%s\": %lld", i ? ", " : "",
                              x->labels[i].name, (long long)x->labels[i].count);
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

int main(void) {
    db_url = getenv("RECLASS_TEST_DB");
    if (!db_url) {
        fprintf(stderr, "RECLASS_TEST_DB is not set (run through tests/test_sink.sh)\n");
        return 1;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_scores_equal_sql),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
