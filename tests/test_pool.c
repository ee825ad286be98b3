/* worker/pipeline/pool.c: every task runs once, a slot is never shared by two tasks running at
 * once, two callers may run jobs at the same time, a pool of one runs on the caller alone, and a
 * job started without waiting runs while its caller runs another one, each task once. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <cmocka.h>

#include "worker/pipeline/pool.h"

#define N_TASKS 5000

typedef struct {
    atomic_int runs[N_TASKS];
    atomic_int busy[32]; /* per slot: tasks running in it now */
    atomic_int bad_slot;
    int slots;
} job_t;

static void task(void *ctx, int t, int slot) {
    job_t *j = ctx;
    if (slot < 0 || slot >= j->slots || atomic_fetch_add(&j->busy[slot], 1) != 0)
        atomic_store(&j->bad_slot, 1);
    volatile int x = 0;
    for (int i = 0; i < 200 + (t % 7) * 100; i++)
        x += i;
    atomic_fetch_add(&j->runs[t], 1);
    if (slot >= 0 && slot < j->slots) atomic_fetch_sub(&j->busy[slot], 1);
}

static void check(job_t *j) {
    for (int t = 0; t < N_TASKS; t++)
        assert_int_equal(atomic_load(&j->runs[t]), 1);
    assert_int_equal(atomic_load(&j->bad_slot), 0);
}

static void test_each_task_once(void **state) {
    (void)state;
    for (int threads = 1; threads <= 4; threads += 3) {
        pl_pool_t *p;
        assert_int_equal(pl_pool_init(threads, &p), 0);
        assert_int_equal(pl_pool_slots(p), threads);
        for (int rep = 0; rep < 20; rep++) {
            job_t *j = calloc(1, sizeof(*j));
            j->slots = pl_pool_slots(p);
            pl_pool_run(p, N_TASKS, task, j);
            check(j);
            free(j);
        }
        pl_pool_run(p, 0, task, NULL); /* nothing to do: returns at once */
        pl_pool_free(p);
    }
}

typedef struct {
    pl_pool_t *p;
    job_t *j;
} caller_t;

static void *caller(void *arg) {
    caller_t *c = arg;
    for (int rep = 0; rep < 10; rep++) {
        for (int t = 0; t < N_TASKS; t++)
            atomic_store(&c->j->runs[t], 0);
        pl_pool_run(c->p, N_TASKS, task, c->j);
        check(c->j);
    }
    return NULL;
}

static void test_two_callers(void **state) {
    (void)state;
    pl_pool_t *p;
    assert_int_equal(pl_pool_init(3, &p), 0);
    caller_t c[2];
    pthread_t th[2];
    for (int i = 0; i < 2; i++) {
        c[i].p = p;
        c[i].j = calloc(1, sizeof(job_t));
        c[i].j->slots = pl_pool_slots(p);
        assert_int_equal(pthread_create(&th[i], NULL, caller, &c[i]), 0);
    }
    for (int i = 0; i < 2; i++) {
        pthread_join(th[i], NULL);
        free(c[i].j);
    }
    pl_pool_free(p);
    assert_true(pl_pool_cores() >= 1);
}

/* The poll thread's pattern: a job started, another run (or started and waited) meanwhile on
 * the same pool, then the first waited for; with one thread, everything runs in the wait. */
static void test_start_then_wait(void **state) {
    (void)state;
    for (int threads = 1; threads <= 4; threads += 3) {
        pl_pool_t *p;
        assert_int_equal(pl_pool_init(threads, &p), 0);
        for (int rep = 0; rep < 10; rep++) {
            job_t *a = calloc(1, sizeof(*a)), *b = calloc(1, sizeof(*b));
            a->slots = b->slots = pl_pool_slots(p);
            pl_job_t ja;
            pl_pool_start(p, &ja, N_TASKS, task, a);
            pl_pool_run(p, N_TASKS, task, b);
            check(b);
            pl_pool_wait(p, &ja);
            check(a);
            free(a);
            free(b);
        }
        pl_job_t none;
        pl_pool_start(p, &none, 0, task, NULL); /* nothing to do: the wait returns at once */
        pl_pool_wait(p, &none);
        pl_pool_free(p);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_each_task_once),
        cmocka_unit_test(test_two_callers),
        cmocka_unit_test(test_start_then_wait),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
