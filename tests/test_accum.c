/* The length-sorting accumulator: config errors, limits, deadlines, the overdue anchor and
 * priority within it. The property tests against a model: test_accum_property.c. */
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

static worker_accum_cfg_t cfg_default(void) {
    worker_accum_cfg_t c = {.token_budget = 1024,
                            .padded = 0,
                            .max_wait_ms = 50,
                            .max_pending_items = 100,
                            .max_pending_tokens = 4096,
                            .max_len = 512};
    return c;
}

/* ---- config ---- */

static void expect_config_error(worker_accum_cfg_t c, const char *needle) {
    worker_accum_t *a = (worker_accum_t *)0x1;
    common_err_t err;
    assert_int_equal(worker_accum_init(&c, &a, &err), COMMON_USAGE);
    assert_null(a);
    assert_non_null(strstr(err.message, needle));
}

static void test_config_errors(void **state) {
    worker_accum_cfg_t c = cfg_default();
    c.token_budget = 511; /* below one max-length item */
    expect_config_error(c, "token budget 511 is smaller than one longest item");
    c = cfg_default();
    c.token_budget = 0;
    expect_config_error(c, "token budget must be positive");
    c = cfg_default();
    c.max_len = 0;
    expect_config_error(c, "max_len must be positive");
    c = cfg_default();
    c.max_pending_items = 0;
    expect_config_error(c, "max pending items must be positive");
    c = cfg_default();
    c.max_pending_tokens = 1000;
    expect_config_error(c, "below the token budget");
    c = cfg_default();
    c.max_wait_ms = -1;
    expect_config_error(c, "max wait must be >= 0");
    c = cfg_default();
    c.padded = 2;
    expect_config_error(c, "padded must be 0 or 1");

    c = cfg_default();
    c.token_budget = 512; /* exactly one max-length item: fine */
    worker_accum_t *a = NULL;
    common_err_t err;
    assert_int_equal(worker_accum_init(&c, &a, &err), 0);
    assert_non_null(a);
    worker_accum_free(a);
}

static void test_invalid_and_cost(void **state) {
    worker_accum_cfg_t c = cfg_default();
    worker_accum_t *a;
    common_err_t err;
    assert_int_equal(worker_accum_init(&c, &a, &err), 0);
    assert_int_equal(worker_accum_push(a, ptr_of(0), 0, 0), COMMON_USAGE);
    assert_int_equal(worker_accum_push(a, ptr_of(0), -3, 0), COMMON_USAGE);
    assert_int_equal(worker_accum_push(a, ptr_of(0), 513, 0), COMMON_USAGE);
    assert_int_equal(worker_accum_pending_items(a), 0);
    assert_int_equal(worker_accum_ready(a, 1000000), 0);
    assert_true(worker_accum_next_deadline(a) == INT64_MAX);
    void *out[4];
    assert_int_equal(worker_accum_pop(a, 1000000, 1, out, NULL, 4), 0);
    int lens[] = {10, 30, 20};
    assert_int_equal(worker_accum_cost(&c, lens, 3), 60);
    c.padded = 1;
    assert_int_equal(worker_accum_cost(&c, lens, 3), 90);
    worker_accum_free(a);
}

/* Items limit and tokens limit both refuse; ready() is then 1 and a pop makes room. */
static void test_full_refuses_then_accepts(void **state) {
    worker_accum_cfg_t c = cfg_default();
    c.max_pending_items = 5;
    c.max_wait_ms = 1000;
    worker_accum_t *a;
    common_err_t err;
    assert_int_equal(worker_accum_init(&c, &a, &err), 0);
    for (int i = 0; i < 5; i++)
        assert_int_equal(worker_accum_push(a, ptr_of(i), 10, 0), 0);
    assert_int_equal(worker_accum_push(a, ptr_of(5), 10, 0), COMMON_RETRY);
    assert_int_equal(worker_accum_pending_items(a), 5);
    assert_int_equal(worker_accum_ready(a, 0), 1); /* 50 tokens, not overdue, but full */
    void *out[8];
    int lens[8];
    int n = worker_accum_pop(a, 0, 0, out, lens, 2); /* cap 2 */
    assert_int_equal(n, 2);
    assert_int_equal(worker_accum_push(a, ptr_of(5), 10, 0), COMMON_OK);
    worker_accum_free(a);

    c = cfg_default(); /* budget 1024, max pending tokens 4096, max_len 512 */
    c.max_wait_ms = 1000;
    assert_int_equal(worker_accum_init(&c, &a, &err), 0);
    for (int i = 0; i < 8; i++)
        assert_int_equal(worker_accum_push(a, ptr_of(i), 500, 0), 0);
    assert_int_equal(worker_accum_pending_tokens(a), 4000);
    assert_int_equal(worker_accum_push(a, ptr_of(8), 100, 0), COMMON_RETRY);
    assert_int_equal(worker_accum_push(a, ptr_of(8), 96, 0), COMMON_OK);
    assert_int_equal(worker_accum_push(a, ptr_of(9), 1, 0), COMMON_RETRY);
    n = worker_accum_pop(a, 0, 0, out, lens, 8);
    assert_int_equal(n, 2); /* 500 + 500 fill the 1024 budget; 96 would not fit */
    assert_int_equal(lens[0] + lens[1], 1000);
    assert_int_equal(worker_accum_push(a, ptr_of(9), 1, 0), COMMON_OK);
    worker_accum_free(a);
}

/* Not ready below budget before the deadline; ready at the deadline; padded cost counts. */
static void test_ready_budget_and_deadline(void **state) {
    worker_accum_cfg_t c = cfg_default();
    c.max_wait_ms = 50;
    worker_accum_t *a;
    common_err_t err;
    assert_int_equal(worker_accum_init(&c, &a, &err), 0);
    assert_int_equal(worker_accum_push(a, ptr_of(0), 100, 10), 0);
    assert_int_equal(worker_accum_push(a, ptr_of(1), 100, 20), 0);
    assert_true(worker_accum_next_deadline(a) == 60);
    assert_int_equal(worker_accum_ready(a, 59), 0);
    void *out[8];
    assert_int_equal(worker_accum_pop(a, 59, 0, out, NULL, 8), 0);
    assert_int_equal(worker_accum_ready(a, 60), 1);
    assert_int_equal(worker_accum_pop(a, 60, 0, out, NULL, 8), 2);
    /* a full budget's worth is ready at once */
    for (int i = 0; i < 4; i++)
        assert_int_equal(worker_accum_push(a, ptr_of(i), 200, 100), 0);
    assert_int_equal(worker_accum_ready(a, 100), 0);
    assert_int_equal(worker_accum_push(a, ptr_of(4), 224, 100), 0);
    assert_int_equal(worker_accum_ready(a, 100), 1);
    assert_int_equal(worker_accum_pop(a, 100, 0, out, NULL, 8), 5); /* 1024 exactly */
    worker_accum_free(a);

    c.padded = 1;
    assert_int_equal(worker_accum_init(&c, &a, &err), 0);
    assert_int_equal(worker_accum_push(a, ptr_of(0), 512, 0), 0);
    assert_int_equal(worker_accum_push(a, ptr_of(1), 10, 0), 0);
    assert_int_equal(worker_accum_push(a, ptr_of(2), 10, 0), 0);
    int lens[8];
    /* flush: 512 + 2 * 10 = 532 real tokens but padded 3 * 512 = 1536 > 1024 */
    assert_int_equal(worker_accum_pop(a, 0, 1, out, lens, 8), 2);
    assert_int_equal(lens[0], 512);
    assert_int_equal(lens[1], 10);
    assert_int_equal(worker_accum_pop(a, 0, 1, out, lens, 8), 1);
    worker_accum_free(a);
}

/* When the oldest is overdue the batch is built around it, not around the longest. */
static void test_overdue_anchor(void **state) {
    worker_accum_cfg_t c = cfg_default();
    worker_accum_t *a;
    common_err_t err;
    assert_int_equal(worker_accum_init(&c, &a, &err), 0);
    assert_int_equal(worker_accum_push(a, ptr_of(0), 30, 0), 0); /* oldest, short */
    assert_int_equal(worker_accum_push(a, ptr_of(1), 500, 10), 0);
    assert_int_equal(worker_accum_push(a, ptr_of(2), 500, 10), 0);
    assert_int_equal(worker_accum_push(a, ptr_of(3), 32, 10), 0);
    assert_int_equal(worker_accum_push(a, ptr_of(4), 28, 10), 0);
    void *out[8];
    int lens[8];
    /* 1090 tokens pending: ready by budget, not overdue: longest run first */
    int n = worker_accum_pop(a, 10, 0, out, lens, 8);
    assert_int_equal(n, 2);
    assert_int_equal(lens[0], 500);
    assert_int_equal(lens[1], 500);
    assert_int_equal(worker_accum_push(a, ptr_of(5), 400, 20), 0);
    assert_int_equal(worker_accum_push(a, ptr_of(6), 400, 20), 0);
    assert_int_equal(worker_accum_push(a, ptr_of(7), 400, 20), 0);
    n = worker_accum_pop(a, 50, 0, out, lens, 8); /* item 0 overdue at 50 */
    assert_true(n >= 1);
    assert_int_equal(id_of(out[0]), 0);
    /* the other two short items are nearest in length and fit */
    int have3 = 0, have4 = 0;
    for (int i = 0; i < n; i++) {
        have3 |= id_of(out[i]) == 3;
        have4 |= id_of(out[i]) == 4;
    }
    assert_true(have3 && have4);
    worker_accum_free(a);

    /* neighbours nearest in length first: 390 (distance 90) before 200 (distance 100) */
    c.token_budget = 700;
    c.max_pending_tokens = 2048;
    assert_int_equal(worker_accum_init(&c, &a, &err), 0);
    assert_int_equal(worker_accum_push(a, ptr_of(0), 300, 0), 0);
    assert_int_equal(worker_accum_push(a, ptr_of(1), 200, 40), 0);
    assert_int_equal(worker_accum_push(a, ptr_of(2), 390, 40), 0);
    n = worker_accum_pop(a, 50, 0, out, lens, 8);
    assert_int_equal(n, 2);
    assert_int_equal(id_of(out[0]), 0);
    assert_int_equal(id_of(out[1]), 2);
    worker_accum_free(a);
}

/* ---- priority within the accumulator (accum.h: priority_step_ms) ---- */

#define STEP 100 /* ms per priority step */

/* Random lengths, both cost modes: priority 9 tickets that arrived after priority 0 ones go
 * first; priority 0 tickets only fill the room that no waiting priority 9 one fits. */
static void test_priority_first(void **state) {
    (void)state;
    for (int padded = 0; padded <= 1; padded++)
        for (uint64_t seed = 1; seed <= 20; seed++) {
            rng_state = seed;
            worker_accum_cfg_t c = cfg_default();
            c.padded = padded;
            c.priority_step_ms = STEP;
            c.max_pending_tokens = 1 << 20;
            worker_accum_t *a;
            common_err_t err;
            assert_int_equal(worker_accum_init(&c, &a, &err), 0);
            int prio[100], len[100], done[100] = {0};
            for (int i = 0; i < 100; i++) { /* 60 of priority 0, then 40 of priority 9 */
                prio[i] = i < 60 ? 0 : 9;
                len[i] = rng_int(1, c.max_len);
                assert_int_equal(worker_accum_push_prio(a, ptr_of(i), len[i], prio[i], i * 5), 0);
            }
            int64_t now = 600; /* everything is overdue: a backlog */
            int seen0 = 0;
            void *out[100];
            int lens[100], n, left9 = 40;
            while ((n = worker_accum_pop(a, now, 0, out, lens, 100)) > 0) {
                int l9[101], n9 = 0, has0 = 0;
                for (int k = 0; k < n; k++) {
                    int id = id_of(out[k]);
                    done[id] = 1;
                    if (prio[id] == 0)
                        has0 = 1;
                    else
                        l9[n9++] = len[id];
                }
                left9 -= n9;
                /* 0s only fill the room the 9s left: no waiting 9 fits beside this batch's 9s */
                if (has0)
                    for (int i = 60; i < 100; i++) {
                        if (done[i]) continue;
                        l9[n9] = len[i];
                        assert_true(worker_accum_cost(&c, l9, n9 + 1) > c.token_budget);
                    }
                seen0 |= has0;
                now++;
            }
            assert_int_equal(left9, 0);
            assert_true(seen0);
            assert_int_equal(worker_accum_pending_items(a), 0);
            worker_accum_free(a);
        }
}

/* Same lengths: the order is exact. 9s first, then 0s in arrival order; a 9 that arrived
 * more than 9 steps after a 0 (past the age bound) goes after it. */
static void test_priority_order_and_age_bound(void **state) {
    (void)state;
    worker_accum_cfg_t c = cfg_default(); /* budget 1024: 10 items of 100 per batch */
    c.priority_step_ms = STEP;
    c.max_pending_tokens = 1 << 20;
    worker_accum_t *a;
    common_err_t err;
    assert_int_equal(worker_accum_init(&c, &a, &err), 0);
    for (int i = 0; i < 20; i++)
        assert_int_equal(worker_accum_push_prio(a, ptr_of(i), 100, 0, i), 0);
    for (int i = 20; i < 30; i++)
        assert_int_equal(worker_accum_push_prio(a, ptr_of(i), 100, 9, 100 + i), 0);
    void *out[16];
    int lens[16];
    int n = worker_accum_pop(a, 200, 0, out, lens, 16);
    assert_int_equal(n, 10);
    for (int k = 0; k < n; k++)
        assert_int_equal(id_of(out[k]), 20 + k);
    for (int b = 0; b < 2; b++) {
        n = worker_accum_pop(a, 200, 0, out, lens, 16);
        assert_int_equal(n, 10);
        for (int k = 0; k < n; k++)
            assert_int_equal(id_of(out[k]), b * 10 + k);
    }
    /* a 9 pushed less than 9 steps after a 0 passes it; one pushed later does not */
    assert_int_equal(worker_accum_push_prio(a, ptr_of(0), 512, 0, 1000), 0);
    assert_int_equal(worker_accum_push_prio(a, ptr_of(1), 512, 9, 1000 + 9 * STEP - 1), 0);
    n = worker_accum_pop(a, 5000, 0, out, lens, 1);
    assert_int_equal(n, 1);
    assert_int_equal(id_of(out[0]), 1);
    assert_int_equal(worker_accum_pop(a, 5000, 0, out, lens, 1), 1);
    assert_int_equal(worker_accum_push_prio(a, ptr_of(0), 512, 0, 6000), 0);
    assert_int_equal(worker_accum_push_prio(a, ptr_of(1), 512, 9, 6000 + 9 * STEP + 1), 0);
    n = worker_accum_pop(a, 9000, 0, out, lens, 1);
    assert_int_equal(n, 1);
    assert_int_equal(id_of(out[0]), 0);
    assert_int_equal(worker_accum_pop(a, 9000, 0, out, lens, 1), 1);
    worker_accum_free(a);
}

/* A flood of priority 9 tickets, more than a batch each millisecond, does not starve a
 * priority 0 one: it goes before every 9 that arrived more than 9 steps after it. */
static void test_priority_no_starvation(void **state) {
    (void)state;
    worker_accum_cfg_t c = cfg_default(); /* 10 items of 100 per batch */
    c.priority_step_ms = STEP;
    c.max_pending_items = 40000;
    c.max_pending_tokens = 40000L * 100;
    worker_accum_t *a;
    common_err_t err;
    assert_int_equal(worker_accum_init(&c, &a, &err), 0);
    assert_int_equal(worker_accum_push_prio(a, ptr_of(0), 100, 0, 0), 0);
    int id = 1, low_at = -1;
    static int64_t pushed_at[3000 * 11 + 1];
    pushed_at[0] = 0;
    void *out[16];
    int lens[16];
    for (int64_t t = 0; t < 3000 && low_at < 0; t++) {
        for (int k = 0; k < 11; k++, id++) {
            pushed_at[id] = t;
            assert_int_equal(worker_accum_push_prio(a, ptr_of(id), 100, 9, t), 0);
        }
        int n = worker_accum_pop(a, t, 0, out, lens, 16);
        for (int k = 0; k < n; k++) {
            int x = id_of(out[k]);
            if (x == 0)
                low_at = (int)t;
            else
                assert_true(low_at >= 0 || pushed_at[x] <= 9 * STEP); /* age bound */
        }
    }
    assert_true(low_at >= 0);
    worker_accum_free(a);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_config_errors),
        cmocka_unit_test(test_invalid_and_cost),
        cmocka_unit_test(test_full_refuses_then_accepts),
        cmocka_unit_test(test_ready_budget_and_deadline),
        cmocka_unit_test(test_overdue_anchor),
        cmocka_unit_test(test_priority_first),
        cmocka_unit_test(test_priority_order_and_age_bound),
        cmocka_unit_test(test_priority_no_starvation),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
