/* worker/classify/engine.c and driver.c on a fake backend: packing (ids, cu_seqlens, max_len), two
 * batches in flight and no third, collect order, the logits of each batch, compute time per batch
 * counted from the later of its submit and the previous batch's logits. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "worker/classify/driver.h"
#include "worker/classify/engine.h"

/* cmocka's fail_msg with what was seen, where a bare assert_true would say less. */
#define CHECK(cond, ...)                                                                           \
    do {                                                                                           \
        if (!(cond)) fail_msg(__VA_ARGS__);                                                        \
    } while (0)

/* The fake holds up to two batches; a sequence's logits are (first id, length). */
static struct {
    float q[2][8][2];
    int n[2], head, in_flight;
    gpu_batch_t last; /* the last batch submitted, as packed */
    int32_t ids[64], cu[9];
} fake;

static common_status_t fake_submit(gpu_backend_t *be, const gpu_batch_t *b, common_err_t *err) {
    if (fake.in_flight == 2) return COMMON_BUG;
    int s = (fake.head + fake.in_flight) % 2;
    for (int i = 0; i < b->n_seqs; i++) {
        fake.q[s][i][0] = (float)b->ids[b->cu_seqlens[i]];
        fake.q[s][i][1] = (float)(b->cu_seqlens[i + 1] - b->cu_seqlens[i]);
    }
    fake.n[s] = b->n_seqs;
    fake.in_flight++;
    memcpy(fake.ids, b->ids, sizeof(int32_t) * (size_t)b->n_tokens);
    memcpy(fake.cu, b->cu_seqlens, sizeof(int32_t) * (size_t)(b->n_seqs + 1));
    fake.last = *b;
    return 0;
}

static common_status_t fake_collect(gpu_backend_t *be, float *logits, common_err_t *err) {
    if (fake.in_flight == 0) return COMMON_BUG;
    memcpy(logits, fake.q[fake.head], sizeof(float) * 2 * (size_t)fake.n[fake.head]);
    fake.head ^= 1;
    fake.in_flight--;
    return 0;
}

static void fake_props(const gpu_backend_t *be, gpu_backend_props_t *p) {
    *p = (gpu_backend_props_t){
        .precision = "fp32", .token_budget = 16, .max_seqs = 4, .max_len = 16};
}

static void nap_ms(int ms) {
    struct timespec ts = {0, ms * 1000000L};
    nanosleep(&ts, NULL);
}

static void test_engine_on_fake_backend(void **state) {
    (void)state;
    static char *labels[2] = {"first-id", "length"};
    gpu_model_t model;
    memset(&model, 0, sizeof model);
    model.cfg.num_labels = 2;
    model.cfg.max_pos = 16;
    model.cfg.id2label = labels;
    gpu_backend_ops_t ops = {
        .name = "fake", .submit = fake_submit, .collect = fake_collect, .get_props = fake_props};
    cls_engine_t e;
    common_err_t err;
    CHECK(cls_engine_attach(&e, &model, &ops, (gpu_backend_t *)&fake, &err) == 0, "attach: %s",
          err.message);

    const int32_t a[] = {101, 7, 102}, b[] = {101, 102}, c[] = {101, 5, 6, 7, 102};
    const int32_t *seq1[] = {a, b, c}, *seq2[] = {c};
    const int lens1[] = {3, 2, 5}, lens2[] = {5};
    CHECK(cls_engine_submit(&e, seq1, lens1, 3, &err) == 0, "submit 1: %s", err.message);
    const int32_t want_cu[] = {0, 3, 5, 10};
    CHECK(fake.last.n_seqs == 3 && fake.last.n_tokens == 10 && fake.last.max_len == 5 &&
              memcmp(fake.cu, want_cu, sizeof want_cu) == 0 && fake.ids[3] == 101 &&
              fake.ids[5] == 101 && fake.ids[6] == 5,
          "packing: n %d tokens %d max_len %d", fake.last.n_seqs, fake.last.n_tokens,
          fake.last.max_len);
    nap_ms(20);
    CHECK(cls_engine_submit(&e, seq2, lens2, 1, &err) == 0, "submit 2: %s", err.message);
    CHECK(cls_engine_submit(&e, seq2, lens2, 1, &err) == COMMON_BUG, "a third batch ran");
    const int32_t *too_many[5] = {a, a, a, a, a};
    const int lens5[5] = {3, 3, 3, 3, 3};
    nap_ms(20);

    const cls_batch_t *r1, *r2;
    CHECK(cls_engine_collect(&e, &r1, &err) == 0, "collect 1: %s", err.message);
    CHECK(r1->n == 3 && r1->n_tokens == 10 && r1->longest == 5, "batch 1: n %d", r1->n);
    CHECK(r1->logits[0] == 101 && r1->logits[1] == 3 && r1->logits[3] == 2 && r1->logits[5] == 5,
          "batch 1 logits");
    CHECK(r1->compute_s == r1->t_ready - r1->t_submit && r1->compute_s >= 0.035,
          "batch 1 compute %.4f", r1->compute_s);
    double ready1 = r1->t_ready;
    cls_result_t res;
    cls_engine_score(&e, r1, 2, 2, &res);
    CHECK(res.label == 0 && res.k == 2 && res.top[1] == 1, "score: label %d", res.label);
    CHECK(strcmp(cls_engine_labels(&e)[res.label], "first-id") == 0, "labels");
    nap_ms(10);
    CHECK(cls_engine_collect(&e, &r2, &err) == 0, "collect 2: %s", err.message);
    /* batch 2 was submitted before batch 1's logits were in: its time starts there */
    CHECK(r2->n == 1 && r2->logits[0] == 101 && r2->logits[1] == 5, "batch 2 logits");
    CHECK(r2->compute_s == r2->t_ready - ready1 && r2->compute_s < r2->t_ready - r2->t_submit,
          "batch 2 compute %.4f (ready - submit %.4f)", r2->compute_s, r2->t_ready - r2->t_submit);
    CHECK(cls_engine_collect(&e, &r2, &err) == COMMON_BUG, "a collect with none in flight");
    CHECK(cls_engine_submit(&e, too_many, lens5, 5, &err) == COMMON_USAGE &&
              strstr(err.message, "capacity"),
          "5 sequences over max_seqs 4: %s", err.message);
    const int32_t *big[] = {c, c, c, c};
    const int lens_big[] = {5, 5, 5, 5};
    CHECK(cls_engine_submit(&e, big, lens_big, 4, &err) == COMMON_USAGE &&
              strstr(err.message, "token budget"),
          "20 tokens over the budget 16: %s", err.message);
    CHECK(cls_engine_forward(&e, seq2, lens2, 1, &r1, &err) == 0 && r1->n == 1 && e.in_flight == 0,
          "forward: %s", err.message);
    CHECK(cls_engine_submit(&e, seq2, lens2, 1, &err) == 0, "submit before close");
    cls_engine_close(&e); /* collects what is in flight */
    CHECK(fake.in_flight == 0, "close left %d batches on the backend", fake.in_flight);
}

/* The driver (worker/classify/driver.c): batches go to the backend one ahead of their results,
 * every item comes back exactly once with its own logits, finish hands over the last batch. */
typedef struct {
    int32_t ids[6][4]; /* item i: {101, i, 102} (length 3) */
    int seen[6], batches, in_flight_at_done;
} drv_ctx_t;

static const int32_t *drv_ids(void *ctx, void *item) {
    return ((drv_ctx_t *)ctx)->ids[(intptr_t)item - 1];
}

static common_status_t drv_done(void *ctx, void *const *items, const int *lens, int n,
                                const cls_batch_t *b, common_err_t *err) {
    drv_ctx_t *c = ctx;
    for (int i = 0; i < n; i++) {
        int it = (int)(intptr_t)items[i] - 1;
        assert_int_equal(lens[i], 3);
        assert_int_equal((int)b->logits[2 * i], 101); /* the fake: (first id, length) */
        assert_int_equal((int)b->logits[2 * i + 1], 3);
        c->seen[it]++;
    }
    c->batches++;
    c->in_flight_at_done = fake.in_flight;
    return 0;
}

static void test_driver_hands_back_every_item(void **state) {
    (void)state;
    static char *labels[2] = {"first-id", "length"};
    gpu_model_t model;
    memset(&model, 0, sizeof model);
    model.cfg.num_labels = 2;
    model.cfg.max_pos = 16;
    model.cfg.id2label = labels;
    memset(&fake, 0, sizeof fake);
    gpu_backend_ops_t ops = {
        .name = "fake", .submit = fake_submit, .collect = fake_collect, .get_props = fake_props};
    cls_engine_t e;
    common_err_t err;
    assert_int_equal(cls_engine_attach(&e, &model, &ops, (gpu_backend_t *)&fake, &err), 0);
    worker_accum_cfg_t acfg = {.token_budget = 6, /* two items of 3 tokens per batch */
                               .max_wait_ms = 0,
                               .max_pending_items = 8,
                               .max_pending_tokens = 64,
                               .max_len = 3};
    worker_accum_t *acc;
    assert_int_equal(worker_accum_init(&acfg, &acc, &err), 0);
    drv_ctx_t c;
    memset(&c, 0, sizeof c);
    for (int i = 0; i < 6; i++) {
        c.ids[i][0] = 101, c.ids[i][1] = i, c.ids[i][2] = 102;
        assert_int_equal(worker_accum_push(acc, (void *)(intptr_t)(i + 1), 3, 0), COMMON_OK);
    }
    cls_driver_t d;
    assert_int_equal(cls_driver_init(&d, &e, drv_ids, drv_done, &c, &err), 0);
    assert_int_equal(cls_driver_step(&d, acc, 1, 1, &err), 2);
    assert_int_equal(c.batches, 0); /* the first batch stays on the device */
    assert_int_equal(cls_driver_step(&d, acc, 1, 1, &err), 2);
    assert_int_equal(c.batches, 1);
    assert_int_equal(c.in_flight_at_done, 1); /* the next batch was queued before */
    assert_int_equal(cls_driver_step(&d, acc, 1, 1, &err), 2);
    assert_int_equal(cls_driver_step(&d, acc, 1, 1, &err), 0); /* nothing left */
    assert_int_equal(c.batches, 2);
    assert_int_equal(cls_driver_finish(&d, &err), 0);
    assert_int_equal(c.batches, 3);
    for (int i = 0; i < 6; i++)
        assert_int_equal(c.seen[i], 1);
    assert_int_equal(fake.in_flight, 0);
    cls_driver_free(&d);
    worker_accum_free(acc);
    cls_engine_close(&e);
}

int main(void) {
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_engine_on_fake_backend),
                                       cmocka_unit_test(test_driver_hands_back_every_item)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
