/* worker/drift: fixed capacity (no allocation after init, whatever the tenants), overflow into
 * "_other", histograms that sum to the tickets, window roll-over and bounded pending windows. */
#include <malloc.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "worker/observe/drift.h"

#define L 151

static worker_drift_t *mk(int window_s, int max_tenants) {
    worker_drift_cfg_t c = {.window_s = window_s, .max_tenants = max_tenants, .num_labels = L};
    worker_drift_t *d = NULL;
    common_err_t err;
    assert_int_equal(worker_drift_init(&c, &d, &err), 0);
    assert_non_null(d);
    return d;
}

static long row_hist_sum(const worker_drift_row_t *r) {
    long s = 0;
    for (int b = 0; b < WORKER_DRIFT_BINS; b++)
        s += r->hist[b];
    return s;
}

static long row_label_sum(const worker_drift_row_t *r) {
    long s = 0;
    for (int l = 0; l < L; l++)
        s += r->label_counts[l];
    return s;
}

/* 1,000 tenants x 100 tickets in one window: the heap in use does not move by one byte, 64
 * tenants get rows, the other 936 land in "_other", nothing is lost; the window says how many
 * tenants and tickets were folded and flags every row (sums over workers may be partial). */
static void test_fixed_capacity_1000_tenants(void **state) {
    (void)state;
    worker_drift_t *d = mk(60, 64);
    size_t bytes = worker_drift_bytes(d);
    char names[1000][16];
    for (int t = 0; t < 1000; t++)
        snprintf(names[t], sizeof(names[t]), "tenant-%04d", t);
    struct mallinfo2 before = mallinfo2();
    for (int k = 0; k < 100; k++)
        for (int t = 0; t < 1000; t++)
            worker_drift_add(d, 1200 + (k % 30), names[t], (t + k) % L, (float)((t % 10) / 10.0),
                             k == 0, 10 + t % 7);
    struct mallinfo2 after = mallinfo2();
    assert_int_equal(after.uordblks, before.uordblks); /* no allocation, no free */
    assert_int_equal(after.hblkhd, before.hblkhd);     /* nor mmapped blocks */
    assert_int_equal(worker_drift_bytes(d), bytes);
    worker_drift_cfg_t cfg = {.window_s = 60, .max_tenants = 64, .num_labels = L};
    assert_int_equal(worker_drift_bytes_for(&cfg), bytes);

    const worker_drift_window_t *open = worker_drift_open(d);
    assert_non_null(open);
    assert_int_equal(open->n_rows, 64);                 /* named rows: the capacity, not 1,000 */
    assert_int_equal(worker_drift_tick(d, 1259, 0), 0); /* still inside [1200, 1260) */
    assert_int_equal(worker_drift_tick(d, 1260, 0), 1);
    const worker_drift_window_t *w = worker_drift_oldest(d);
    assert_non_null(w);
    assert_int_equal(w->start_s, 1200);
    assert_int_equal(w->window_s, 60);
    assert_int_equal(w->n_rows, 65);
    long total = 0, truncated = 0;
    for (int i = 0; i < w->n_rows; i++) {
        const worker_drift_row_t *r = &w->rows[i];
        total += r->tickets;
        truncated += r->truncated;
        assert_int_equal(row_hist_sum(r), r->tickets);
        assert_int_equal(row_label_sum(r), r->tickets);
        if (i < 64) {
            assert_int_equal(r->overflow, 1);
            assert_string_equal(r->tenant, names[i]); /* first come, first served */
            assert_int_equal(r->tickets, 100);
        }
    }
    const worker_drift_row_t *other = &w->rows[64];
    assert_string_equal(other->tenant, WORKER_DRIFT_OTHER);
    assert_int_equal(other->overflow, 1);
    assert_int_equal(other->tickets, 936 * 100);
    assert_int_equal(w->folded_tenants, 936);
    assert_int_equal(w->folded_tickets, 936 * 100);
    assert_int_equal(total, 100000);
    assert_int_equal(truncated, 1000);
    worker_drift_pop(d);
    assert_null(worker_drift_oldest(d));
    assert_int_equal(worker_drift_dropped(d), 0);
    worker_drift_free(d);
}

/* The default capacity: 4,096 tenants in one window each get their own row, none is folded or
 * flagged; the footprint is what the help text states (4 x (sizeof row + 8 x labels + hash
 * slots) per tenant). */
static void test_default_capacity_4096(void **state) {
    (void)state;
    worker_drift_t *d = mk(60, WORKER_DRIFT_MAX_TENANTS);
    char name[32];
    for (int t = 0; t < WORKER_DRIFT_MAX_TENANTS; t++) {
        snprintf(name, sizeof(name), "tenant%05d", t);
        worker_drift_add(d, 1200, name, t % L, 0.9f, 0, 10);
    }
    assert_int_equal(worker_drift_tick(d, 1260, 0), 1);
    const worker_drift_window_t *w = worker_drift_oldest(d);
    assert_int_equal(w->n_rows, WORKER_DRIFT_MAX_TENANTS);
    assert_int_equal(w->folded_tenants, 0);
    assert_int_equal(w->folded_tickets, 0);
    for (int i = 0; i < w->n_rows; i++) {
        assert_int_equal(w->rows[i].overflow, 0);
        assert_int_equal(w->rows[i].tickets, 1);
    }
    assert_int_equal(sizeof(worker_drift_row_t), 256);
    size_t per = WORKER_DRIFT_SLOTS * (288 + 8 * (size_t)L);
    assert_true(worker_drift_bytes(d) <= (size_t)(WORKER_DRIFT_MAX_TENANTS + 1) * per + 4096);
    assert_true(worker_drift_bytes(d) > (size_t)WORKER_DRIFT_MAX_TENANTS * (per - 64));
    worker_drift_free(d);
}

/* Bins: [i/10, (i+1)/10), 1.0 in the last; out-of-range and NaN clamp. */
static void test_histogram_bins(void **state) {
    (void)state;
    worker_drift_t *d = mk(10, 4);
    const float c[] = {0.0f, 0.05f, 0.1f, 0.55f, 0.95f, 0.999f, 1.0f, 1.5f, -0.2f, NAN};
    const int want_bin[] = {0, 0, 1, 5, 9, 9, 9, 9, 0, 0};
    int n = (int)(sizeof(c) / sizeof(c[0]));
    for (int i = 0; i < n; i++)
        worker_drift_add(d, 100, "acme", 3, c[i], 0, 5);
    worker_drift_add(d, 100, "acme", L, 0.5f, 0, 5); /* label out of range: ignored */
    worker_drift_add(d, 100, "acme", -1, 0.5f, 0, 5);
    assert_int_equal(worker_drift_tick(d, 100, 1), 1); /* final closes the open window */
    const worker_drift_window_t *w = worker_drift_oldest(d);
    assert_int_equal(w->n_rows, 1);
    const worker_drift_row_t *r = &w->rows[0];
    int64_t want[WORKER_DRIFT_BINS] = {0};
    for (int i = 0; i < n; i++)
        want[want_bin[i]]++;
    for (int b = 0; b < WORKER_DRIFT_BINS; b++)
        assert_int_equal(r->hist[b], want[b]);
    assert_int_equal(r->tickets, n);
    assert_int_equal(row_hist_sum(r), n);
    assert_int_equal(r->label_counts[3], n);
    assert_int_equal(r->tokens, 5 * n);
    double sum = 0;
    for (int i = 0; i < n; i++) {
        double x = isfinite(c[i]) ? c[i] : 0;
        sum += x < 0 ? 0 : x > 1 ? 1 : x;
    }
    assert_true(fabs(r->confidence_sum - sum) < 1e-6);
    worker_drift_free(d);
}

/* Windows are aligned to multiples of window_s and close when time passes their end, on an
 * add or on a tick; a quiet period queues nothing. */
static void test_window_rollover(void **state) {
    (void)state;
    worker_drift_t *d = mk(10, 8);
    worker_drift_add(d, 103, "a", 1, 0.9f, 0, 4);
    worker_drift_add(d, 109, "b", 2, 0.8f, 1, 4);
    assert_int_equal(worker_drift_tick(d, 109, 0), 0);
    worker_drift_add(d, 110, "a", 1, 0.7f, 0, 4); /* new window: the first one closes */
    const worker_drift_window_t *w = worker_drift_oldest(d);
    assert_non_null(w);
    assert_int_equal(w->start_s, 100);
    assert_int_equal(w->n_rows, 2);
    assert_string_equal(w->rows[0].tenant, "a");
    assert_string_equal(w->rows[1].tenant, "b");
    assert_int_equal(w->rows[1].truncated, 1);
    worker_drift_pop(d);
    assert_int_equal(worker_drift_open(d)->start_s, 110);
    assert_int_equal(worker_drift_tick(d, 119, 0), 0);
    assert_int_equal(worker_drift_tick(d, 135, 0), 1); /* closed by time alone */
    assert_int_equal(worker_drift_oldest(d)->start_s, 110);
    assert_int_equal(worker_drift_oldest(d)->rows[0].tickets, 1);
    worker_drift_pop(d);
    assert_int_equal(worker_drift_tick(d, 500, 0), 0); /* nothing counted: nothing queued */
    assert_int_equal(worker_drift_tick(d, 500, 1), 0);
    assert_null(worker_drift_open(d));
    /* a clock stepping back counts into the open window */
    worker_drift_add(d, 600, "a", 1, 0.5f, 0, 4);
    worker_drift_add(d, 590, "a", 1, 0.5f, 0, 4);
    assert_int_equal(worker_drift_tick(d, 600, 1), 1);
    assert_int_equal(worker_drift_oldest(d)->start_s, 600);
    assert_int_equal(worker_drift_oldest(d)->rows[0].tickets, 2);
    worker_drift_free(d);
}

/* The database is down: closed windows wait in the fixed slots; one more drops the oldest. */
static void test_pending_windows_bounded(void **state) {
    (void)state;
    worker_drift_t *d = mk(1, 2);
    for (int t = 0; t < WORKER_DRIFT_SLOTS + 3; t++)
        worker_drift_add(d, 1000 + t, "x", 0, 0.5f, 0, 2);
    worker_drift_tick(d, 2000, 0);
    assert_int_equal(worker_drift_dropped(d), 3);
    int n = 0;
    for (const worker_drift_window_t *w; (w = worker_drift_oldest(d)) != NULL; n++) {
        assert_int_equal(w->start_s, 1000 + 3 + n); /* the newest survive, in order */
        worker_drift_pop(d);
    }
    assert_int_equal(n, WORKER_DRIFT_SLOTS);
    worker_drift_free(d);
}

/* Names: NULL counts as "", over-long names and a tenant called "_other" share the overflow
 * row, which comes last. */
static void test_tenant_names(void **state) {
    (void)state;
    worker_drift_t *d = mk(60, 4);
    char longname[300];
    memset(longname, 'x', sizeof(longname) - 1);
    longname[sizeof(longname) - 1] = '\0';
    worker_drift_add(d, 0, NULL, 0, 0.5f, 0, 2);
    worker_drift_add(d, 0, longname, 0, 0.5f, 0, 2);
    worker_drift_add(d, 0, "_other", 0, 0.5f, 0, 2);
    worker_drift_add(d, 0, "b", 0, 0.5f, 0, 2);
    worker_drift_tick(d, 0, 1);
    const worker_drift_window_t *w = worker_drift_oldest(d);
    assert_int_equal(w->n_rows, 3);
    assert_string_equal(w->rows[0].tenant, "");
    assert_string_equal(w->rows[1].tenant, "b");
    assert_string_equal(w->rows[2].tenant, "_other");
    assert_int_equal(w->rows[2].overflow, 1);
    assert_int_equal(w->rows[2].tickets, 2);
    worker_drift_free(d);
}

static void test_init_errors(void **state) {
    (void)state;
    worker_drift_cfg_t c = {.window_s = 0, .max_tenants = 4, .num_labels = 2};
    worker_drift_t *d = (worker_drift_t *)1;
    common_err_t err;
    assert_int_equal(worker_drift_init(&c, &d, &err), COMMON_BUG);
    assert_null(d);
    assert_non_null(strstr(err.message, "window_s"));
    worker_drift_free(NULL);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fixed_capacity_1000_tenants),
        cmocka_unit_test(test_default_capacity_4096),
        cmocka_unit_test(test_histogram_bins),
        cmocka_unit_test(test_window_rollover),
        cmocka_unit_test(test_pending_windows_bounded),
        cmocka_unit_test(test_tenant_names),
        cmocka_unit_test(test_init_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
