/* Lanes and fair shares (worker/pipeline/fair.c): the most urgent lane first, tenants' shares
 * of encoded tokens by their weights while both are queued (one tenant 10x the other), the
 * per-tenant cap, random push/pop runs in which every item comes out exactly once within the
 * budget, and the smaller bulk batch beside an urgent lane on a synchronous backend. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "worker/pipeline/fair.h"
#include "tests/lib/test_rng.h"

typedef struct {
    int id, len, lane, tenant;
} it_t;

static const char *tenant_name(int t) {
    static char names[32][16];
    snprintf(names[t], sizeof(names[t]), "tenant-%d", t);
    return names[t];
}

static worker_fair_cfg_t cfg_of(int n_lanes, int items, long tokens, const char *weights) {
    worker_fair_cfg_t c = {.acc = {.token_budget = 1024,
                                   .padded = 0,
                                   .max_wait_ms = 50,
                                   .max_pending_items = items,
                                   .max_pending_tokens = tokens,
                                   .max_len = 128},
                           .n_lanes = n_lanes,
                           .tenant_max_tokens = tokens,
                           .weights = weights};
    return c;
}

/* Within one lane and tenant, priority 9 tickets go before priority 0 ones that arrived
 * earlier (worker/pipeline/accum.h: priority_step_ms); a lane still comes before priority. */
static void test_priority_within_lane(void **state) {
    (void)state;
    worker_fair_cfg_t c = cfg_of(2, 1000, 100000, NULL);
    c.acc.priority_step_ms = 100;
    worker_fair_t *f;
    common_err_t err;
    assert_int_equal(worker_fair_init(&c, &f, &err), 0);
    static it_t its[40];
    for (int i = 0; i < 20; i++) { /* 100 tokens each: 10 per batch */
        its[i] = (it_t){i, 100, 1, 0};
        assert_int_equal(worker_fair_push(f, &its[i], 100, 1, "t", 0, i), COMMON_OK);
    }
    for (int i = 20; i < 30; i++) {
        its[i] = (it_t){i, 100, 1, 0};
        assert_int_equal(worker_fair_push(f, &its[i], 100, 1, "t", 9, 100 + i), COMMON_OK);
    }
    its[30] = (it_t){30, 100, 0, 0}; /* urgent lane, no priority: still first, alone */
    assert_int_equal(worker_fair_push(f, &its[30], 100, 0, "t", 0, 150), COMMON_OK);
    void *out[64];
    int lens[64];
    int n = worker_fair_pop(f, 300, 0, out, lens, 64);
    assert_int_equal(n, 1);
    assert_int_equal(((it_t *)out[0])->id, 30);
    n = worker_fair_pop(f, 300, 0, out, lens, 64);
    assert_int_equal(n, 10); /* the 9s, though they arrived after the 0s */
    for (int k = 0; k < n; k++)
        assert_int_equal(((it_t *)out[k])->id, 20 + k);
    n = worker_fair_pop(f, 300, 0, out, lens, 64);
    assert_int_equal(n, 10); /* then the 0s in arrival order */
    for (int k = 0; k < n; k++)
        assert_int_equal(((it_t *)out[k])->id, k);
    worker_fair_free(f);
}

/* An urgent lane's items make a batch of their own at once, ahead of the bulk: not filled with
 * bulk tickets, not waiting for a budget's worth or a deadline. */
static void test_urgent_lane_first(void **state) {
    (void)state;
    worker_fair_cfg_t c = cfg_of(2, 1000, 100000, NULL);
    worker_fair_t *f;
    common_err_t err;
    assert_int_equal(worker_fair_init(&c, &f, &err), 0);
    static it_t its[300];
    for (int i = 0; i < 200; i++) { /* bulk first, long */
        its[i] = (it_t){i, 100, 1, 0};
        assert_int_equal(worker_fair_push(f, &its[i], 100, 1, "bulk", 0, 0), COMMON_OK);
    }
    for (int i = 200; i < 205; i++) { /* then a few short urgent ones */
        its[i] = (it_t){i, 20, 0, 1};
        assert_int_equal(worker_fair_push(f, &its[i], 20, 0, "urgent", 0, 10), COMMON_OK);
    }
    assert_int_equal(worker_fair_pending_lane(f, 0), 5);
    assert_int_equal(worker_fair_pending_lane(f, 1), 200);
    void *out[512];
    int lens[512];
    assert_int_equal(worker_fair_urgent_lane(f), 0);
    int n = worker_fair_pop(f, 11, 0, out, lens, 512);
    assert_int_equal(n, 5); /* the urgent ones alone */
    for (int i = 0; i < n; i++)
        assert_int_equal(((it_t *)out[i])->lane, 0);
    assert_int_equal(worker_fair_pending_lane(f, 0), 0);
    assert_int_equal(worker_fair_urgent_lane(f), -1);
    n = worker_fair_pop(f, 11, 0, out, lens, 512); /* then the bulk, a budget's worth */
    long sum = 0;
    for (int i = 0; i < n; i++) {
        assert_int_equal(((it_t *)out[i])->lane, 1);
        sum += lens[i];
    }
    assert_true(n > 5 && sum <= 1024);
    /* the bulk left is under a budget, none due before 10 + max_wait_ms: no batch yet ... */
    while (worker_fair_pending_items(f) > 5)
        assert_true(worker_fair_pop(f, 11, 1, out, lens, worker_fair_pending_items(f) - 5) > 0);
    assert_int_equal(worker_fair_ready(f, 12), 0);
    assert_int_equal(worker_fair_pop(f, 12, 0, out, lens, 512), 0);
    /* ... but one urgent ticket is a batch at once, alone */
    assert_int_equal(worker_fair_push(f, &its[205], 20, 0, "urgent", 0, 12), COMMON_OK);
    assert_int_equal(worker_fair_ready(f, 12), 1);
    assert_int_equal(worker_fair_pop(f, 12, 0, out, lens, 512), 1);
    assert_ptr_equal(out[0], &its[205]);
    assert_int_equal(worker_fair_pending_lane(f, 1), 5);
    assert_int_equal(worker_fair_push(f, &its[206], 10, 2, "x", 0, 0), COMMON_USAGE);
    worker_fair_free(f);
}

/* A bulk backlog fills what it may of the accumulator, or its tenant's cap; then an urgent
 * ticket (another tenant's, or the same tenant's) and a priority one of the bulk lane are still
 * admitted, the urgent one batched next, alone; the whole's bounds hold throughout. */
static void test_urgent_room(void **state) {
    (void)state;
    for (int same = 0; same < 2; same++) {
        worker_fair_cfg_t c = cfg_of(2, 1000, 8192, NULL); /* 8 budgets */
        c.acc.priority_step_ms = 100;
        c.tenant_max_tokens = same ? 4096 : 8192; /* same tenant: its cap binds first */
        worker_fair_t *f;
        common_err_t err;
        assert_int_equal(worker_fair_init(&c, &f, &err), 0);
        static it_t its[200];
        int i = 0;
        for (; i < 150; i++) {
            its[i] = (it_t){i, 100, 1, 0};
            if (worker_fair_push(f, &its[i], 100, 1, "bulk", 0, 0) != COMMON_OK) break;
        }
        assert_true(i < 150);                 /* the backlog is held back */
        assert_true(worker_fair_ready(f, 0)); /* a producer told FULL can pop */
        const char *t = same ? "bulk" : "urgent";
        its[i] = (it_t){i, 100, 0, 1};
        assert_int_equal(worker_fair_push(f, &its[i], 100, 0, t, 0, 1), COMMON_OK);
        its[i + 1] = (it_t){i + 1, 100, 1, 0}; /* the bulk lane's priority one */
        assert_int_equal(worker_fair_push(f, &its[i + 1], 100, 1, "bulk", 9, 1), COMMON_OK);
        void *out[64];
        int lens[64];
        assert_int_equal(worker_fair_pop(f, 1, 0, out, lens, 64), 1);
        assert_ptr_equal(out[0], &its[i]);
        assert_true(worker_fair_pop(f, 1, 0, out, lens, 64) > 0);
        assert_ptr_equal(out[0], &its[i + 1]); /* the priority one first, then the backlog */
        worker_fair_free(f);
    }
    /* the memory bound: urgent and bulk together never pass the whole's bounds */
    worker_fair_cfg_t c = cfg_of(2, 50, 8192, NULL);
    c.acc.priority_step_ms = 100;
    worker_fair_t *f;
    common_err_t err;
    assert_int_equal(worker_fair_init(&c, &f, &err), 0);
    static it_t its[400];
    int pushed = 0;
    for (int k = 0; k < 400; k++) {
        its[k] = (it_t){k, 1 + k % 128, k % 3 == 0 ? 0 : 1, k % 5};
        if (worker_fair_push(f, &its[k], its[k].len, its[k].lane, tenant_name(its[k].tenant),
                             k % 7 == 0 ? 9 : 0, 0) == COMMON_OK)
            pushed++;
        assert_true(worker_fair_pending_items(f) <= 50);
        assert_true(worker_fair_pending_tokens(f) <= 8192);
    }
    assert_true(pushed < 400 && worker_fair_pending_lane(f, 0) > 0);
    worker_fair_free(f);
}

/* Tenant 0 has ten times tenant 1's items, interleaved as they would arrive; while both are
 * queued, tenant 1's share of the tokens popped must be within 10% of its weight share. */
static void share_case(const char *weights, double want) {
    worker_fair_cfg_t c = cfg_of(1, 20000, 2000000, weights);
    worker_fair_t *f;
    common_err_t err;
    assert_int_equal(worker_fair_init(&c, &f, &err), 0);
    static it_t its[11000];
    int n_items = 0, left[2] = {0, 0};
    for (int i = 0; i < 11000; i++) {
        int t = i % 11 == 10 ? 1 : 0;
        int len = rng_int(4, 128);
        its[n_items] = (it_t){n_items, len, 0, t};
        assert_int_equal(worker_fair_push(f, &its[n_items], len, 0, tenant_name(t), 0, 0),
                         COMMON_OK);
        left[t]++;
        n_items++;
    }
    long tok[2] = {0, 0};
    void *out[1024];
    int lens[1024];
    while (left[0] > 0 && left[1] > 0) {
        int n = worker_fair_pop(f, 1, 1, out, lens, 1024);
        assert_true(n > 0);
        long b[2] = {0, 0}, sum = 0;
        for (int i = 0; i < n; i++) {
            it_t *x = out[i];
            b[x->tenant] += x->len;
            left[x->tenant]--;
            sum += lens[i];
        }
        assert_true(sum <= 1024);
        if (left[1] > 0) { /* both still queued after this batch */
            tok[0] += b[0];
            tok[1] += b[1];
        }
    }
    double share = (double)tok[1] / (double)(tok[0] + tok[1]);
    printf("weights %s: smaller tenant's share %.4f (weight share %.4f), %ld tokens\n",
           weights ? weights : "(none)", share, want, tok[0] + tok[1]);
    assert_true(tok[1] > 10000);
    assert_true(share >= want * 0.9 && share <= want * 1.1);
    worker_fair_free(f);
}

static void test_shares_by_weight(void **state) {
    (void)state;
    rng_state = 7;
    share_case(NULL, 0.5);
    share_case("tenant-0=1,tenant-1=3", 0.75);
    share_case("tenant-0=3,tenant-1=1", 0.25);
}

static void test_tenant_cap(void **state) {
    (void)state;
    worker_fair_cfg_t c = cfg_of(1, 1000, 100000, NULL);
    c.tenant_max_tokens = 2048;
    worker_fair_t *f;
    common_err_t err;
    assert_int_equal(worker_fair_init(&c, &f, &err), 0);
    assert_int_equal(worker_fair_tenant_cap(f), 2048);
    static it_t its[100];
    int i = 0;
    while (worker_fair_push(f, &its[i], 100, 0, "giant", 0, 0) == COMMON_OK)
        i++;
    assert_int_equal(i, 20); /* 20 * 100 <= 2048 < 21 * 100 */
    /* another tenant still gets in, and a refused producer can always pop */
    assert_int_equal(worker_fair_push(f, &its[i], 100, 0, "small", 0, 0), COMMON_OK);
    assert_true(worker_fair_ready(f, 0));
    void *out[64];
    assert_true(worker_fair_pop(f, 0, 0, out, NULL, 64) > 0);
    assert_int_equal(worker_fair_push(f, &its[i + 1], 100, 0, "giant", 0, 0), COMMON_OK);
    worker_fair_free(f);
    /* below one budget the cap is raised to it: a tenant can always fill a batch */
    c.tenant_max_tokens = 10;
    assert_int_equal(worker_fair_init(&c, &f, &err), 0);
    assert_int_equal(worker_fair_tenant_cap(f), 1024);
    worker_fair_free(f);
}

/* Random pushes, pops and clock steps over 3 lanes and 12 tenants (more than have a class of
 * their own): every item comes out exactly once, batches within budget, lanes in order. */
static void test_random_exactly_once(void **state) {
    (void)state;
    rng_state = 42;
    for (int round = 0; round < 20; round++) {
        worker_fair_cfg_t c = cfg_of(3, 400, 20000, "tenant-1=5,tenant-3=2");
        c.tenant_max_tokens = rng_int(1024, 8000);
        worker_fair_t *f;
        common_err_t err;
        assert_int_equal(worker_fair_init(&c, &f, &err), 0);
        enum { N = 3000 };
        static it_t its[N];
        static int seen[N];
        memset(seen, 0, sizeof(seen));
        int pushed = 0, popped = 0;
        int64_t now = 0;
        void *out[1024];
        int lens[1024];
        while (popped < N) {
            int op = rng_int(0, 9);
            if (op < 6 && pushed < N) {
                int len = rng_int(1, 128), lane = rng_int(0, 2), t = rng_int(0, 11);
                its[pushed] = (it_t){pushed, len, lane, t};
                int rc = worker_fair_push(f, &its[pushed], len, lane, tenant_name(t), 0, now);
                if (rc == COMMON_OK)
                    pushed++;
                else
                    assert_int_equal(rc, COMMON_RETRY);
            } else if (op < 9 || pushed == N) {
                int flush = pushed == N;
                int n = worker_fair_pop(f, now, flush, out, lens, rng_int(1, 1024));
                long sum = 0;
                int lane = 0;
                for (int i = 0; i < n; i++) {
                    it_t *x = out[i];
                    assert_int_equal(seen[x->id], 0);
                    seen[x->id] = 1;
                    assert_int_equal(lens[i], x->len);
                    assert_true(x->lane >= lane); /* a batch goes from urgent to bulk */
                    /* a lane more urgent than the last goes alone */
                    if (i > 0 && ((it_t *)out[0])->lane < 2) assert_int_equal(x->lane, lane);
                    lane = x->lane;
                    sum += x->len;
                }
                assert_true(sum <= 1024);
                popped += n;
                if (flush) assert_true(n > 0 || popped == N);
            } else {
                now += rng_int(0, 60);
            }
        }
        assert_int_equal(worker_fair_pending_items(f), 0);
        assert_int_equal(worker_fair_pending_tokens(f), 0);
        worker_fair_free(f);
    }
}

static void test_weights_parse(void **state) {
    (void)state;
    worker_fair_weights_t w;
    common_err_t err;
    assert_int_equal(worker_fair_weights_parse("a=1,b=1000", &w, &err), 0);
    assert_int_equal(w.n, 2);
    assert_string_equal(w.name[1], "b");
    assert_int_equal(w.weight[1], 1000);
    const char *bad[] = {"a", "=3", "a=0", "a=1001", "a=x", "a=1,b", NULL};
    for (int i = 0; bad[i]; i++) {
        assert_int_equal(worker_fair_weights_parse(bad[i], NULL, &err), COMMON_USAGE);
        assert_non_null(strstr(err.message, "--tenant-weight"));
    }
}

/* A backend that runs a batch inside its submit (synchronous), with an urgent lane configured:
 * a batch of the plainer lanes holds half of the budget, so an urgent record that arrives while
 * one runs waits half a batch at most, and the urgent lane's batch keeps the whole
 * budget. One lane, or a backend that queues its batches and runs them while the host goes on:
 * the whole budget, as before. A budget's worth is ready at once either way. */
static void test_sync_plain_budget(void **state) {
    (void)state;
    const struct {
        int lanes, sync;
        long plain; /* the bulk batch's budget (cfg_of: 1024, longest item 128) */
    } cases[] = {{2, 1, 512}, {3, 1, 512}, {1, 1, 1024}, {2, 0, 1024}, {1, 0, 1024}};
    for (size_t k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
        worker_fair_cfg_t c = cfg_of(cases[k].lanes, 1000, 100000, NULL);
        c.synchronous = cases[k].sync;
        worker_fair_t *f;
        common_err_t err;
        assert_int_equal(worker_fair_init(&c, &f, &err), 0);
        assert_int_equal(worker_fair_plain_budget(f), cases[k].plain);
        static it_t its[60];
        const int bulk = cases[k].lanes - 1;
        for (int i = 0; i < 6; i++) { /* 600 tokens, due at 50: a plain budget's worth or not */
            its[i] = (it_t){i, 100, bulk, 0};
            assert_int_equal(worker_fair_push(f, &its[i], 100, bulk, "bulk", 0, 0), COMMON_OK);
        }
        assert_int_equal(worker_fair_ready(f, 0), cases[k].plain <= 600);
        for (int i = 6; i < 40; i++) {
            its[i] = (it_t){i, 100, bulk, 0};
            assert_int_equal(worker_fair_push(f, &its[i], 100, bulk, "bulk", 0, 0), COMMON_OK);
        }
        void *out[64];
        int lens[64];
        long sum = 0;
        int n = worker_fair_pop(f, 0, 0, out, lens, 64);
        for (int i = 0; i < n; i++)
            sum += lens[i];
        assert_true(sum <= cases[k].plain && sum > cases[k].plain - 100); /* filled to it */
        if (cases[k].lanes > 1) { /* the urgent lane's batch: the whole budget */
            for (int i = 40; i < 60; i++) {
                its[i] = (it_t){i, 100, 0, 1};
                assert_int_equal(worker_fair_push(f, &its[i], 100, 0, "urgent", 0, 1), COMMON_OK);
            }
            n = worker_fair_pop(f, 1, 0, out, lens, 64);
            assert_int_equal(n, 10);
            for (int i = 0; i < n; i++)
                assert_int_equal(((it_t *)out[i])->lane, 0);
        }
        worker_fair_free(f);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_urgent_lane_first), cmocka_unit_test(test_shares_by_weight),
        cmocka_unit_test(test_tenant_cap),        cmocka_unit_test(test_random_exactly_once),
        cmocka_unit_test(test_weights_parse),     cmocka_unit_test(test_priority_within_lane),
        cmocka_unit_test(test_urgent_room),       cmocka_unit_test(test_sync_plain_budget),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
