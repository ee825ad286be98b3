/* The agreement gate of tests/lib/family_golden.h (what test_gpu_golden applies to fp16 and
 * bf16) on the CPU: it passes flips on thin fp32 margins and fails a flip on a wide one, a low
 * agreement and a large |delta logit|; below the floor, thin flips pass while they are at
 * most half the rows at risk. First on a synthetic set, then on a fixture's real
 * fp32 logits: rounding-sized noise (every |delta| <= d) must pass, one wrong row must not. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu/backend.h"
#include "gpu/model/model.h"
#include "tests/lib/family_golden.h"

static char *labels3[] = {"a", "b", "c"};

/* rows: HF's fp32 logits; HF's argmax is each row's pred. */
static void synthetic_set(fg_set_t *s, fg_row_t *rows, float (*lg)[3], int n) {
    for (int r = 0; r < n; r++) {
        int b = 0;
        for (int j = 1; j < 3; j++)
            if (lg[r][j] > lg[r][b]) b = j;
        rows[r] = (fg_row_t){.pred = labels3[b], .logits = lg[r]};
    }
    s->rows = rows;
    s->n = n;
}

static void test_synthetic(void **state) {
    (void)state;
    gpu_model_t m = {.cfg = {.num_labels = 3, .id2label = labels3}};
    /* fp32: a thin margin (0.03) on row 0, wide ones (2.0) elsewhere. */
    float fp32[4][3] = {
        {1.00f, 0.97f, 0.0f}, {2.0f, 0.0f, -1.0f}, {0.0f, 2.0f, 0.0f}, {-1.0f, 0.0f, 2.0f}};
    fg_row_t rows[4];
    fg_set_t set;
    synthetic_set(&set, rows, fp32, 4);
    char why[256];
    const double d = 0.05; /* fp16's max |delta logit| bound */
    /* the reduced precision flips row 0 within rounding: passes at 75% agreement */
    float thin[4][3] = {
        {0.98f, 0.99f, 0.0f}, {2.0f, 0.0f, -1.0f}, {0.0f, 2.0f, 0.0f}, {-1.0f, 0.0f, 2.0f}};
    fg_score_t sc = fg_compare(&m, &set, &thin[0][0]);
    fg_flips_t fl = fg_flips(&m, &set, &thin[0][0], &fp32[0][0], d);
    assert_int_equal(fl.flips, 1);
    assert_int_equal(fl.thick, 0);
    assert_true(fg_gate(&sc, &fl, 0.75, d, why, sizeof why));
    /* row 1 flipped on a 2.0 margin (a wrong row, not rounding): fails at the same agreement,
     * though the goldens store only row 0's logits, so the delta bound cannot see it */
    float wide[4][3] = {
        {1.00f, 0.97f, 0.0f}, {2.0f, 2.04f, -1.0f}, {0.0f, 2.0f, 0.0f}, {-1.0f, 0.0f, 2.0f}};
    for (int r = 1; r < 4; r++)
        rows[r].logits = NULL;
    sc = fg_compare(&m, &set, &wide[0][0]);
    fl = fg_flips(&m, &set, &wide[0][0], &fp32[0][0], d);
    assert_int_equal(fl.thick, 1);
    assert_int_equal(fl.first_thick, 1);
    assert_true(sc.max_delta <= d);
    assert_false(fg_gate(&sc, &fl, 0.75, d, why, sizeof why));
    printf("  refused: %s\n", why);
    assert_non_null(strstr(why, "margin"));
    /* the percentage and the delta bound still stand on their own */
    synthetic_set(&set, rows, fp32, 4);
    sc = fg_compare(&m, &set, &thin[0][0]);
    fl = fg_flips(&m, &set, &thin[0][0], &fp32[0][0], d);
    assert_false(fg_gate(&sc, &fl, 0.999, d, why, sizeof why));
    assert_non_null(strstr(why, "agreement"));
    float far[4][3] = {
        {1.00f, 0.97f, 0.0f}, {2.0f, 0.0f, -0.9f}, {0.0f, 2.0f, 0.0f}, {-1.0f, 0.0f, 2.0f}};
    sc = fg_compare(&m, &set, &far[0][0]);
    fl = fg_flips(&m, &set, &far[0][0], &fp32[0][0], d);
    assert_false(fg_gate(&sc, &fl, 0.75, d, why, sizeof why));
    assert_non_null(strstr(why, "delta"));
}

/* Below the floor on thin flips: rounding when at most half the rows at risk (fp32 margin
 * below 2d) flipped, a systematic error when more did. */
static void test_floor_at_risk(void **state) {
    (void)state;
    gpu_model_t m = {.cfg = {.num_labels = 3, .id2label = labels3}};
    enum { N = 10, THIN = 4 };
    float fp32[N][3], low[N][3];
    for (int r = 0; r < N; r++) { /* rows 0..3: margin 0.03; the others 2.0 */
        const float top = r < THIN ? 1.00f : 2.0f, second = r < THIN ? 0.97f : 0.0f;
        fp32[r][0] = top, fp32[r][1] = second, fp32[r][2] = -1.0f;
    }
    fg_row_t rows[N];
    fg_set_t set;
    synthetic_set(&set, rows, fp32, N);
    char why[256];
    const double d = 0.05;
    for (int flipped = 1; flipped <= 3; flipped++) {
        memcpy(low, fp32, sizeof low);
        for (int r = 0; r < flipped; r++)
            low[r][0] = 0.98f, low[r][1] = 0.99f;
        fg_score_t sc = fg_compare(&m, &set, &low[0][0]);
        fg_flips_t fl = fg_flips(&m, &set, &low[0][0], &fp32[0][0], d);
        assert_int_equal(fl.at_risk, THIN);
        assert_int_equal(fl.flips, flipped);
        assert_int_equal(fl.thick, 0);
        const int ok = fg_gate(&sc, &fl, 0.999, d, why, sizeof why);
        printf("  %d of %d rows at risk flipped: %s\n", flipped, THIN, ok ? "rounding" : why);
        assert_int_equal(ok, 2 * flipped <= THIN);
        if (!ok) assert_non_null(strstr(why, "agreement"));
    }
}

/* xorshift noise in [-d, d] */
static float noise(uint64_t *s, float d) {
    *s ^= *s << 13, *s ^= *s >> 7, *s ^= *s << 17;
    return d * (2.0f * (float)(*s >> 40) / 16777216.0f - 1.0f);
}

static void test_fixture_noise(void **state) {
    (void)state;
    char dir[512];
    common_err_t err;
    snprintf(dir, sizeof dir, "%s/models/distilbert-clinc150", RECLASS_FIXTURES);
    gpu_model_t *m = NULL;
    assert_int_equal(gpu_model_load(dir, &m, &err), 0);
    fg_set_t set;
    assert_int_equal(fg_load(dir, "multilingual", &set, &err), 0);
    const size_t L = (size_t)m->cfg.num_labels, n = (size_t)set.n;
    float *fp32 = malloc(sizeof(float) * n * L), *low = malloc(sizeof(float) * n * L);
    assert_non_null(fp32);
    assert_non_null(low);
    const gpu_backend_ops_t *ops = gpu_backend_find("cpu", &err);
    gpu_backend_opts_t o = {.token_budget = 4096, .threads = 0};
    assert_int_equal(fg_run(ops, m, &o, &set, fp32, &err), 0);
    /* a precision whose every logit is off by up to d, the worst case the delta bound allows */
    const float d = 0.25f;
    uint64_t seed = 0x9E3779B97F4A7C15ull;
    for (size_t i = 0; i < n * L; i++)
        low[i] = fp32[i] + noise(&seed, d);
    char why[256];
    fg_score_t sc = fg_compare(m, &set, low);
    fg_flips_t fl = fg_flips(m, &set, low, fp32, d);
    printf("  noise +-%.2f: %d flips, widest fp32 margin %.3f (bound %.2f), agreement %.3f%%\n", d,
           fl.flips, fl.widest, fl.bound, 100.0 * sc.agree / sc.rows);
    assert_true(fl.flips > 0); /* the test means something: noise this size does flip rows */
    assert_int_equal(fl.thick, 0);
    assert_true(fg_gate(&sc, &fl, 0.9, d + 1e-3, why, sizeof why));
    /* one row answered as another label (a wrong sequence's logits, a stale slot): fails */
    size_t r = 0;
    while (r < n) {
        const float *v = fp32 + r * L;
        int a = 0, b = 0;
        for (size_t j = 1; j < L; j++)
            if (v[j] > v[a]) a = (int)j;
        b = a == 0 ? 1 : 0;
        for (size_t j = 0; j < L; j++)
            if ((int)j != a && v[j] < v[b]) b = (int)j;  /* the least likely label */
        if (v[a] - v[b] > 4.0f && !set.rows[r].logits) { /* a row the delta bound cannot see */
            float t = low[r * L + a];
            low[r * L + a] = low[r * L + b], low[r * L + b] = t;
            break;
        }
        r++;
    }
    assert_true(r < n);
    sc = fg_compare(m, &set, low);
    fl = fg_flips(m, &set, low, fp32, d);
    assert_false(fg_gate(&sc, &fl, 0.9, d + 1e-3, why, sizeof why));
    printf("  one swapped row: %s\n", why);
    assert_non_null(strstr(why, "margin"));
    /* fp16's bound on this set: enough rows at risk that the CUDA path's 3 thin flips
     * (99.894%, the widest fp32 margin 0.0041) are rounding, not an error */
    fl = fg_flips(m, &set, fp32, fp32, 0.05);
    printf("  rows at risk at fp16's bound 0.05: %d of %zu\n", fl.at_risk, n);
    assert_true(fl.at_risk >= 6);
    free(fp32);
    free(low);
    fg_free(&set);
    gpu_model_free(m);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_synthetic),
        cmocka_unit_test(test_floor_at_risk),
        cmocka_unit_test(test_fixture_noise),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
