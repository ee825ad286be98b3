/* The length-sorting accumulator's property tests: thousands of random push/pop/clock
 * operations (seeded, both padded modes) checked against a model at every step, and
 * budget-filling batches near-uniform in length. Config, limits, priority: test_accum.c. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "worker/pipeline/accum.h"
#include "tests/lib/test_rng.h"

/* ---- property test against a model ---- */

typedef struct {
    int len;
    int64_t deadline;
    int seq;   /* push order */
    int state; /* 0 unused, 1 pending, 2 emitted */
} model_item_t;

typedef struct {
    long pops, batches, items_out, overdue_pops, drains, fulls, max_drain_pops;
} prop_stats_t;

static long model_pending_tokens(const model_item_t *m, int n) {
    long t = 0;
    for (int i = 0; i < n; i++)
        if (m[i].state == 1) t += m[i].len;
    return t;
}

/* Runs ops random operations on one random config; checks every invariant at every step. */
static void run_property(uint64_t seed, int padded, int ops, prop_stats_t *st) {
    rng_state = seed;
    worker_accum_cfg_t c = {0}; /* fields not drawn below (priority_step_ms) must not be garbage */
    c.padded = padded;
    c.max_len = rng_int(1, 4) == 1 ? rng_int(1, 16) : rng_int(16, 512);
    c.token_budget = c.max_len * rng_int(1, 8) + rng_int(0, c.max_len);
    c.max_wait_ms = rng_int(0, 3) == 0 ? 0 : rng_int(1, 200);
    c.max_pending_items = rng_int(1, 300);
    c.max_pending_tokens = c.token_budget + rng_int(0, 4 * c.token_budget);
    worker_accum_t *a;
    common_err_t err;
    assert_int_equal(worker_accum_init(&c, &a, &err), 0);

    int cap_items = ops + 1;
    model_item_t *m = calloc((size_t)cap_items, sizeof(*m));
    void **out = malloc((size_t)(c.max_pending_items + 1) * sizeof(void *));
    int *lens = malloc((size_t)(c.max_pending_items + 1) * sizeof(int));
    int n_items = 0, n_pending = 0;
    int64_t now = rng_int(0, 1000);
    int clustered = rng_int(0, 1);

    for (int op = 0; op < ops; op++) {
        int r = rng_int(0, 99);
        if (r < 50) { /* push */
            int len = clustered ? (rng_int(0, 9) < 8 ? rng_int(1, c.max_len / 8 + 1)
                                                     : rng_int(c.max_len * 7 / 8 + 1, c.max_len))
                                : rng_int(1, c.max_len);
            if (len > c.max_len) len = c.max_len;
            long tok = model_pending_tokens(m, n_items);
            int expect_full = n_pending >= c.max_pending_items || tok + len > c.max_pending_tokens;
            int rc = worker_accum_push(a, ptr_of(n_items), len, now);
            assert_int_equal(rc, expect_full ? COMMON_RETRY : COMMON_OK);
            if (rc == COMMON_OK) {
                m[n_items] = (model_item_t){len, now + c.max_wait_ms, n_items, 1};
                n_items++;
                n_pending++;
            } else {
                /* backoff contract: a refused producer can always pop something */
                st->fulls++;
                assert_int_equal(worker_accum_ready(a, now), 1);
            }
        } else if (r < 70) { /* clock advance (monotonic) */
            now += rng_int(0, 3) == 0 ? rng_int(0, 300) : rng_int(0, 10);
        } else { /* pop */
            int flush = rng_int(0, 9) == 0;
            int cap = rng_int(0, 4) == 0 ? rng_int(1, 3) : c.max_pending_items + 1;
            /* model view before the pop */
            long tok = model_pending_tokens(m, n_items);
            int oldest = -1;
            for (int i = 0; i < n_items; i++)
                if (m[i].state == 1 && (oldest < 0 || m[i].deadline < m[oldest].deadline))
                    oldest = i;
            int64_t min_dl = oldest < 0 ? INT64_MAX : m[oldest].deadline;
            assert_true(worker_accum_next_deadline(a) == min_dl);
            assert_int_equal(worker_accum_pending_items(a), n_pending);
            assert_int_equal(worker_accum_pending_tokens(a), tok);
            int expect_ready = n_pending > 0 && (tok >= c.token_budget || min_dl <= now ||
                                                 n_pending >= c.max_pending_items ||
                                                 tok + c.max_len > c.max_pending_tokens);
            assert_int_equal(worker_accum_ready(a, now), expect_ready);
            int overdue = oldest >= 0 && min_dl <= now;

            int n = worker_accum_pop(a, now, flush, out, lens, cap);
            st->pops++;
            if (n_pending == 0 || (!flush && !expect_ready)) {
                assert_int_equal(n, 0);
                continue;
            }
            assert_true(n >= 1);
            assert_true(n <= cap);
            st->batches++;
            st->items_out += n;
            /* each item pending before, once; lengths as pushed */
            int longest = 0, shortest = c.max_len + 1, has_oldest = 0;
            for (int i = 0; i < n; i++) {
                int id = id_of(out[i]);
                assert_true(id >= 0 && id < n_items);
                assert_int_equal(m[id].state, 1);
                assert_int_equal(lens[i], m[id].len);
                m[id].state = 2;
                n_pending--;
                if (lens[i] > longest) longest = lens[i];
                if (lens[i] < shortest) shortest = lens[i];
                has_oldest |= id == oldest;
            }
            long cost = worker_accum_cost(&c, lens, n);
            assert_true(cost <= c.token_budget);
            long sum = 0;
            for (int i = 0; i < n; i++)
                sum += lens[i];
            if (overdue) {
                st->overdue_pops++;
                assert_true(has_oldest); /* the overdue oldest first */
                assert_int_equal(id_of(out[0]), oldest);
                /* every overdue item left behind would not have fit */
                for (int i = 0; i < n_items; i++) {
                    if (m[i].state != 1 || m[i].deadline > now) continue;
                    int lg = m[i].len > longest ? m[i].len : longest;
                    long with = padded ? (long)(n + 1) * lg : sum + m[i].len;
                    assert_true(n == cap || with > c.token_budget);
                }
            } else {
                /* a run from the long end: nothing left is longer than the batch's shortest */
                for (int i = 0; i < n_items; i++)
                    if (m[i].state == 1) assert_true(m[i].len <= shortest);
            }
        }
        /* now and then: drain everything overdue by popping repeatedly at the same time */
        if (rng_int(0, 49) == 0) {
            int n_overdue = 0;
            for (int i = 0; i < n_items; i++)
                if (m[i].state == 1 && m[i].deadline <= now) n_overdue++;
            int pops = 0;
            while (worker_accum_next_deadline(a) <= now) {
                assert_int_equal(worker_accum_ready(a, now), 1);
                int n = worker_accum_pop(a, now, 0, out, lens, c.max_pending_items + 1);
                assert_true(n >= 1);
                for (int i = 0; i < n; i++) {
                    int id = id_of(out[i]);
                    assert_int_equal(m[id].state, 1);
                    m[id].state = 2;
                    n_pending--;
                }
                pops++;
                assert_true(pops <= n_overdue);
            }
            for (int i = 0; i < n_items; i++)
                if (m[i].state == 1) assert_true(m[i].deadline > now);
            st->drains++;
            if (pops > st->max_drain_pops) st->max_drain_pops = pops;
        }
    }
    /* shutdown: flush drains everything; every item out exactly once */
    int guard = 0;
    int n;
    while ((n = worker_accum_pop(a, now, 1, out, lens, c.max_pending_items + 1)) > 0) {
        assert_true(worker_accum_cost(&c, lens, n) <= c.token_budget);
        for (int i = 0; i < n; i++) {
            int id = id_of(out[i]);
            assert_int_equal(m[id].state, 1);
            m[id].state = 2;
            n_pending--;
        }
        assert_true(++guard <= n_items + 1);
    }
    assert_int_equal(n_pending, 0);
    assert_int_equal(worker_accum_pending_items(a), 0);
    assert_int_equal(worker_accum_pending_tokens(a), 0);
    for (int i = 0; i < n_items; i++)
        assert_int_equal(m[i].state, 2);
    free(m);
    free(out);
    free(lens);
    worker_accum_free(a);
}

static void test_property_random(void **state) {
    prop_stats_t st = {0};
    for (int padded = 0; padded <= 1; padded++)
        for (uint64_t seed = 1; seed <= 40; seed++)
            run_property(seed * 7919 + (uint64_t)padded, padded, 5000, &st);
    print_message("property: 80 configs x 5000 ops: %ld pops, %ld batches, %ld items out, "
                  "%ld overdue-anchored, %ld FULL refusals, %ld drains (max %ld pops)\n",
                  st.pops, st.batches, st.items_out, st.overdue_pops, st.fulls, st.drains,
                  st.max_drain_pops);
    assert_true(st.overdue_pops > 100);
    assert_true(st.fulls > 100);
    assert_true(st.drains > 100);
}

/* Many items of lognormal-ish lengths: budget-filling batches are near-uniform in length. */
static void test_length_sorted_batches(void **state) {
    for (int padded = 0; padded <= 1; padded++) {
        rng_state = 42 + (uint64_t)padded;
        worker_accum_cfg_t c = {.token_budget = 8192,
                                .padded = padded,
                                .max_wait_ms = 1000000,
                                .max_pending_items = 20000,
                                .max_pending_tokens = 20000L * 512,
                                .max_len = 512};
        worker_accum_t *a;
        common_err_t err;
        assert_int_equal(worker_accum_init(&c, &a, &err), 0);
        long real = 0;
        for (int i = 0; i < 20000; i++) {
            /* sum of uniforms: bell-shaped around 90, tail to 512 */
            int len = rng_int(8, 60) + rng_int(0, 60) + (rng_int(0, 9) == 0 ? rng_int(0, 392) : 0);
            real += len;
            assert_int_equal(worker_accum_push(a, ptr_of(i), len, 0), 0);
        }
        void *out[8192];
        int lens[8192];
        int n, batches = 0, max_spread = 0;
        long spread_sum = 0, cost_sum = 0, items = 0;
        while ((n = worker_accum_pop(a, 0, 0, out, lens, 8192)) > 0 ||
               (n = worker_accum_pop(a, 0, 1, out, lens, 8192)) > 0) {
            int lo = 1 << 30, hi = 0;
            for (int i = 0; i < n; i++) {
                if (lens[i] < lo) lo = lens[i];
                if (lens[i] > hi) hi = lens[i];
            }
            if (hi - lo > max_spread) max_spread = hi - lo;
            spread_sum += hi - lo;
            cost_sum += worker_accum_cost(&c, lens, n);
            items += n;
            batches++;
        }
        assert_int_equal(items, 20000);
        double mean_spread = (double)spread_sum / batches;
        double fill = (double)cost_sum / ((double)batches * c.token_budget);
        double pad_waste = (double)cost_sum / real - 1.0;
        print_message("length-sorted (padded=%d): %d batches, spread mean %.2f max %d, budget "
                      "fill %.3f, padding overhead %.4f\n",
                      padded, batches, mean_spread, max_spread, fill, pad_waste);
        assert_true(mean_spread <= 4.0);
        assert_true(max_spread <= 32);
        assert_true(fill >= 0.95);
        assert_true(pad_waste <= 0.01);
        worker_accum_free(a);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_property_random),
        cmocka_unit_test(test_length_sorted_batches),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
