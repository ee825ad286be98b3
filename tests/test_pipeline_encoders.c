/* Several encoders in one worker (`reclass run --encoders N`), in-process against the embedded
 * Kafka and a throwaway PostgreSQL (tests/lib/pipe_mock.h): two encoders share the one
 * accumulator, both run batches, every ticket becomes exactly one row; an encoder whose backend
 * fails mid-job stops, and the other re-runs its batches in flight (exact rows, the job done
 * once, offsets committed to the end, exit 0); a lone encoder's failure stops the worker as
 * before, and a restart finishes the job exactly.
 *
 * The backend is the cpu backend behind a test double (this file's): linked with
 * -Wl,--wrap=gpu_backend_find, the session finds a copy of the cpu table whose submit and
 * forward fail (COMMON_FATAL, as a device fault does) on the k-th batch of one instance, the
 * instances numbered in the order they were opened (encoder 0 first). */
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "gpu/backend.h"
#include "tests/lib/pipe_mock.h"
#include "worker/observe/metrics.h"
#include "worker/pipeline/pipeline.h"

#define MAX_INSTANCES 8

const gpu_backend_ops_t *__real_gpu_backend_find(const char *name, common_err_t *err);

static const gpu_backend_ops_t *real;
static gpu_backend_ops_t faulty;
static gpu_backend_t *inst[MAX_INSTANCES]; /* by opening order */
static atomic_int n_inst;
static atomic_int batches[MAX_INSTANCES];
static int fail_inst = -1, fail_at; /* instance fail_inst fails its fail_at-th batch on */

static void double_reset(int instance, int at) {
    atomic_store(&n_inst, 0);
    for (int i = 0; i < MAX_INSTANCES; i++) {
        inst[i] = NULL;
        atomic_store(&batches[i], 0);
    }
    fail_inst = instance;
    fail_at = at;
}

static common_status_t faulty_init(const gpu_model_t *m, const gpu_backend_opts_t *o,
                                   gpu_backend_t **out, common_err_t *err) {
    common_status_t rc = real->init(m, o, out, err);
    if (!rc) {
        int i = atomic_fetch_add(&n_inst, 1);
        assert_true(i < MAX_INSTANCES);
        inst[i] = *out;
    }
    return rc;
}

/* COMMON_FATAL for the batch that is be's fail_at-th and every later one */
static common_status_t faulty_batch(gpu_backend_t *be, common_err_t *err) {
    for (int i = 0; i < atomic_load(&n_inst); i++) {
        if (inst[i] != be) continue;
        int k = atomic_fetch_add(&batches[i], 1) + 1;
        if (i == fail_inst && k >= fail_at)
            return common_err_set(err, COMMON_FATAL, "injected fault on batch %d of instance %d", k,
                                  i);
    }
    return COMMON_OK;
}

static common_status_t faulty_submit(gpu_backend_t *be, const gpu_batch_t *b, common_err_t *err) {
    common_status_t rc = faulty_batch(be, err);
    return rc ? rc : real->submit(be, b, err);
}

static common_status_t faulty_forward(gpu_backend_t *be, const gpu_batch_t *b, float *logits,
                                      common_err_t *err) {
    common_status_t rc = faulty_batch(be, err);
    return rc ? rc : real->forward(be, b, logits, err);
}

const gpu_backend_ops_t *__wrap_gpu_backend_find(const char *name, common_err_t *err) {
    const gpu_backend_ops_t *ops = __real_gpu_backend_find(name, err);
    if (!ops || strcmp(ops->name, "cpu")) return ops;
    real = ops;
    faulty = *ops;
    faulty.init = faulty_init;
    faulty.submit = faulty_submit;
    faulty.forward = faulty_forward;
    faulty.init_graph = NULL;
    return &faulty;
}

static long rows(const char *job) {
    return db_long("SELECT count(*) FROM ticket_results WHERE job_id=$1", job);
}

static void assert_job_exact(const char *job, const char *topic, const char *group, int n) {
    assert_int_equal(rows(job), n);
    assert_int_equal(db_long("SELECT done FROM jobs WHERE job_id=$1", job), n);
    assert_int_equal(
        db_long("SELECT count(*) FROM jobs WHERE job_id=$1 AND completed_at IS NOT NULL", job), 1);
    assert_int_equal(group_lag(topic, group), 0);
}

/* Two encoders, no fault: both take batches from the one accumulator; the job is exact. */
static void test_two_encoders_exactly_n(void **state) {
    const int n = 1500;
    produce_job("e1", "job-enc2", n);
    worker_run_cfg_t cfg;
    common_err_t e;
    cfg_for(&cfg, "e1", "ge1", 4);
    cfg.encoders = 2;
    cfg.cls.threads = 2;
    cfg.cls.token_budget = 512; /* many batches */
    double_reset(-1, 0);
    char id0[24]; /* the batches rows before this run's */
    snprintf(id0, sizeof id0, "%ld", db_long("SELECT coalesce(max(id), 0) FROM batches", NULL));
    worker_pipeline_stats_t st;
    assert_int_equal(worker_pipeline_run_ex(&cfg, &st, &e), 0);
    assert_int_equal(atomic_load(&n_inst), 2);
    fprintf(stderr, "encoder 0: %d batches, encoder 1: %d batches\n", atomic_load(&batches[0]),
            atomic_load(&batches[1]));
    assert_true(atomic_load(&batches[0]) > 0);
    assert_true(atomic_load(&batches[1]) > 0);
    assert_int_equal(atomic_load(&batches[0]) + atomic_load(&batches[1]), st.batches);
    assert_int_equal(atomic_load(&worker_metrics.encoders_up), 2);
    assert_true(atomic_load(&worker_metrics.mem[1].arena_bytes) > 0);
    assert_job_exact("job-enc2", "e1", "ge1", n);
    /* a gpu_memory row per encoder at each sample, each encoder's arena flat; the cpu runs on
     * no device */
    assert_int_equal(db_long("SELECT count(DISTINCT encoder) FROM gpu_memory WHERE device IS NULL"
                             " AND arena_bytes > 0",
                             NULL),
                     2);
    assert_int_equal(db_long("SELECT max(c) FROM (SELECT count(DISTINCT arena_bytes) AS c"
                             " FROM gpu_memory GROUP BY worker, encoder) t",
                             NULL),
                     1);
    /* a batches row per batch, naming the encoder that ran it; the cpu runs on no device */
    assert_int_equal(db_long("SELECT count(*) FROM batches WHERE id > $1::bigint AND encoder = 0"
                             " AND device IS NULL",
                             id0),
                     atomic_load(&batches[0]));
    assert_int_equal(db_long("SELECT count(*) FROM batches WHERE id > $1::bigint AND encoder = 1"
                             " AND device IS NULL",
                             id0),
                     atomic_load(&batches[1]));
    /* each batches row is its encoder's, as gpu_memory names it: worker, encoder, device */
    assert_int_equal(
        db_long("SELECT count(*) FROM batches b WHERE b.id > $1::bigint AND NOT EXISTS"
                " (SELECT FROM gpu_memory g WHERE g.worker = b.worker"
                " AND g.encoder = b.encoder AND g.device IS NOT DISTINCT FROM b.device)",
                id0),
        0);
}

/* Encoder 0's backend fails on its third batch: encoder 1 runs the batches it held, and
 * the rest of the job; nothing is lost or stored twice, and the worker ends cleanly. */
static void test_encoder_fault_rerun_elsewhere(void **state) {
    const int n = 1500;
    produce_job("e2", "job-fault", n);
    worker_run_cfg_t cfg;
    common_err_t e;
    cfg_for(&cfg, "e2", "ge2", 4);
    cfg.encoders = 2;
    cfg.cls.threads = 2;
    cfg.cls.token_budget = 512;
    double_reset(0, 3);
    char id0[24];
    snprintf(id0, sizeof id0, "%ld", db_long("SELECT coalesce(max(id), 0) FROM batches", NULL));
    assert_int_equal(worker_pipeline_run(&cfg, &e), 0);
    fprintf(stderr, "encoder 0: %d batches (the 3rd failed), encoder 1: %d batches\n",
            atomic_load(&batches[0]), atomic_load(&batches[1]));
    assert_int_equal(atomic_load(&batches[0]), 3); /* stopped at its fault */
    assert_true(atomic_load(&batches[1]) > 0);
    assert_int_equal(atomic_load(&worker_metrics.encoders_up), 1);
    assert_job_exact("job-fault", "e2", "ge2", n);
    /* the batches say who ran what: encoder 0 the ones before its fault (the one or two it
     * held then went to encoder 1), encoder 1 every other, every ticket in one of them */
    long ran0 = db_long("SELECT count(*) FROM batches WHERE id > $1::bigint AND encoder = 0", id0);
    assert_true(ran0 >= 0 && ran0 <= 2);
    assert_int_equal(
        db_long("SELECT count(*) FROM batches WHERE id > $1::bigint AND encoder = 1", id0),
        atomic_load(&batches[1]));
    assert_int_equal(db_long("SELECT sum(tickets) FROM batches WHERE id > $1::bigint", id0), n);
}

/* The only encoder fails: the worker stops non-zero without storing what it did not write;
 * a restart finishes the job exactly. */
static void test_last_encoder_fault_stops(void **state) {
    const int n = 1500;
    produce_job("e3", "job-last", n);
    worker_run_cfg_t cfg;
    common_err_t e;
    cfg_for(&cfg, "e3", "ge3", 4);
    cfg.cls.token_budget = 512;
    double_reset(0, 3);
    assert_int_equal(worker_pipeline_run(&cfg, &e), COMMON_FATAL);
    assert_true(rows("job-last") < n);
    assert_true(group_lag("e3", "ge3") > 0);
    double_reset(-1, 0);
    assert_int_equal(worker_pipeline_run(&cfg, &e), 0);
    assert_job_exact("job-last", "e3", "ge3", n);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_two_encoders_exactly_n),
        cmocka_unit_test(test_encoder_fault_rerun_elsewhere),
        cmocka_unit_test(test_last_encoder_fault_stops),
    };
    return cmocka_run_group_tests(tests, pipe_setup, pipe_teardown);
}
