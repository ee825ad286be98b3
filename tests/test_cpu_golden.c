/* The CPU backend on the demo checkpoint against the Hugging Face golden outputs: every
 * argmax of the 5,500 CLINC150 test queries and the 501 rows of logits (within 2e-3), run
 * in packed batches of mixed lengths; plus the fused backend against the reference ops. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu/backend.h"
#include "gpu/model/model.h"
#include "tests/lib/cpu_blas_backend.h"
#include "tests/lib/ref_ops.h"
#include "tests/lib/backend_flight.h"

typedef struct {
    int32_t *ids; /* (len) */
    int len;
    char *pred;
    float *logits; /* (L) or NULL */
} golden_row_t;

static gpu_model_t *model;
static golden_row_t *rows;
static int n_rows;

static int setup(void **state) {
    common_err_t err;
    if (gpu_model_load(RECLASS_DEMO_MODEL, &model, &err) != 0) {
        fprintf(stderr, "load: %s\n", err.message);
        return -1;
    }
    FILE *f = fopen(RECLASS_FIXTURES "/golden_clinc150_test.jsonl", "r");
    if (!f) return -1;
    char *line = NULL;
    size_t cap = 0;
    int alloc = 0;
    while (getline(&line, &cap, f) > 0) {
        json_error_t je;
        json_t *o = json_loads(line, 0, &je);
        if (!o) return -1;
        if (n_rows == alloc) {
            alloc = alloc ? 2 * alloc : 1024;
            rows = realloc(rows, sizeof *rows * (size_t)alloc);
        }
        golden_row_t *r = &rows[n_rows++];
        json_t *ids = json_object_get(o, "ids"), *lg = json_object_get(o, "logits");
        r->len = (int)json_array_size(ids);
        r->ids = malloc(sizeof(int32_t) * (size_t)r->len);
        for (int i = 0; i < r->len; i++)
            r->ids[i] = (int32_t)json_integer_value(json_array_get(ids, (size_t)i));
        r->pred = strdup(json_string_value(json_object_get(o, "pred")));
        r->logits = NULL;
        if (lg) {
            r->logits = malloc(sizeof(float) * json_array_size(lg));
            for (size_t i = 0; i < json_array_size(lg); i++)
                r->logits[i] = (float)json_number_value(json_array_get(lg, i));
        }
        json_decref(o);
    }
    free(line);
    fclose(f);
    return n_rows == 5500 ? 0 : -1;
}

static int teardown(void **state) {
    for (int i = 0; i < n_rows; i++) {
        free(rows[i].ids);
        free(rows[i].pred);
        free(rows[i].logits);
    }
    free(rows);
    gpu_model_free(model);
    return 0;
}

/* max |a[i] - b[i]| over n logits. */
static double max_delta(const float *a, const float *b, size_t n) {
    double maxd = 0;
    for (size_t i = 0; i < n; i++)
        maxd = fmax(maxd, fabs((double)a[i] - b[i]));
    return maxd;
}

/* Runs rows [0, n) through the backend in batches of at most budget tokens (file order, so
 * lengths are mixed), logits (n, L). async: as the worker drives it, each batch submitted
 * before the previous one is collected (two in flight), then the out-of-turn refusals. */
static const gpu_backend_ops_t *cpu_table; /* NULL: the "cpu" table of gpu_backend_find */
static void classify_all_as(int budget, int threads, int n, float *logits, int async) {
    common_err_t err;
    gpu_backend_opts_t o = {.token_budget = budget, .threads = threads};
    const gpu_backend_ops_t *ops = cpu_table ? cpu_table : gpu_backend_find("cpu", &err);
    assert_non_null(ops);
    gpu_backend_t *be;
    assert_int_equal(ops->init(model, &o, &be, &err), 0);
    gpu_backend_props_t props; /* what it settled: fp32, packed, budget / 2 sequences */
    ops->get_props(be, &props);
    assert_string_equal(props.precision, "fp32");
    assert_int_equal(props.padded, 0);
    assert_int_equal(props.token_budget, budget);
    assert_int_equal(props.max_seqs, budget / 2);
    assert_int_equal(props.max_len, model->cfg.max_pos);
    int32_t *ids = malloc(sizeof(int32_t) * (size_t)budget);
    int32_t *cu = malloc(sizeof(int32_t) * (size_t)(budget + 1));
    int i = 0, batches = 0, prev_first = -1;
    while (i < n) {
        int s = 0, t = 0, mx = 0, first = i;
        cu[0] = 0;
        while (i < n && t + rows[i].len <= budget) {
            memcpy(ids + t, rows[i].ids, sizeof(int32_t) * (size_t)rows[i].len);
            t += rows[i].len;
            if (rows[i].len > mx) mx = rows[i].len;
            cu[++s] = t;
            i++;
        }
        assert_true(s > 0);
        gpu_batch_t b = {.ids = ids, .cu_seqlens = cu, .n_seqs = s, .n_tokens = t, .max_len = mx};
        int rc = async ? ops->submit(be, &b, &err)
                       : ops->forward(be, &b, logits + (size_t)first * model->cfg.num_labels, &err);
        if (!rc && prev_first >= 0) /* ids and cu are already refilled: submit copied them */
            rc = ops->collect(be, logits + (size_t)prev_first * model->cfg.num_labels, &err);
        if (rc) fprintf(stderr, "forward: %s\n", err.message);
        assert_int_equal(rc, 0);
        prev_first = async ? first : -1;
        batches++;
    }
    if (prev_first >= 0) {
        assert_int_equal(
            ops->collect(be, logits + (size_t)prev_first * model->cfg.num_labels, &err), 0);
        gpu_batch_t b = {.ids = ids, .cu_seqlens = cu, .n_seqs = 1, .n_tokens = 2, .max_len = 2};
        cu[0] = 0, cu[1] = 2, ids[0] = 101, ids[1] = 102;
        float *lg = malloc(sizeof(float) * (size_t)model->cfg.num_labels);
        assert_int_equal(backend_flight_refusals(ops, be, &b, lg), 0);
        free(lg);
    }
    gpu_mem_stats_t st;
    assert_int_equal(ops->mem_stats(be, &st), 0);
    assert_int_equal(st.allocations_after_init, 0);
    printf("  budget %d threads %d: %d rows in %d batches\n", budget, threads, n, batches);
    free(ids);
    free(cu);
    ops->free(be);
}

static void classify_all(int budget, int threads, int n, float *logits) {
    classify_all_as(budget, threads, n, logits, 0);
}

static int argmax(const float *v, int n) {
    int b = 0;
    for (int i = 1; i < n; i++)
        if (v[i] > v[b]) b = i;
    return b;
}

static void test_golden(void **state) {
    int L = model->cfg.num_labels;
    assert_int_equal(L, 151);
    float *lg = malloc(sizeof(float) * (size_t)n_rows * L);
    classify_all_as(2048, 0, n_rows, lg, 1); /* submit/collect, two batches in flight */
    int agree = 0, with_logits = 0;
    double maxd = 0;
    for (int r = 0; r < n_rows; r++) {
        const float *v = lg + (size_t)r * L;
        if (strcmp(model->cfg.id2label[argmax(v, L)], rows[r].pred) == 0) agree++;
        if (!rows[r].logits) continue;
        with_logits++;
        for (int j = 0; j < L; j++) {
            double d = fabs((double)v[j] - rows[r].logits[j]);
            if (d > maxd) maxd = d;
        }
    }
    printf("golden: argmax agreement %d/%d, logits rows %d, max |delta| %.3g\n", agree, n_rows,
           with_logits, maxd);
    assert_int_equal(agree, n_rows);
    assert_int_equal(with_logits, 500); /* every 11th row: the fixture holds 500 */
    assert_true(maxd <= 2e-3);
    free(lg);
}

/* Other batch shapes and thread counts must give the same answers: packing and the split
 * across threads may not change a sequence's result. */
static void test_packing_invariance(void **state) {
    int L = model->cfg.num_labels, n = 1200;
    float *a = malloc(sizeof(float) * (size_t)n * L), *b = malloc(sizeof(float) * (size_t)n * L);
    classify_all(4096, 1, n, a);
    classify_all(100, 3, n, b);
    double maxd = max_delta(a, b, (size_t)n * L);
    printf("packing: max |delta| between budget 4096/1 thread and 100/3 threads %.3g\n", maxd);
    assert_true(maxd <= 1e-4);
    free(a);
    free(b);
}

/* The OpenBLAS path (what CPUs without AVX-512 run) gives the same answers as the packed
 * AVX-512 GEMM path. */
static void test_blas_path(void **state) {
    int L = model->cfg.num_labels, n = 1200;
    float *a = malloc(sizeof(float) * (size_t)n * L), *b = malloc(sizeof(float) * (size_t)n * L);
    classify_all(2048, 2, n, a);
    cpu_table = test_cpu_blas_backend();
    classify_all(2048, 2, n, b);
    cpu_table = NULL;
    double maxd = max_delta(a, b, (size_t)n * L);
    printf("OpenBLAS path vs default path: max |delta| %.3g\n", maxd);
    assert_true(maxd <= 1e-4);
    free(a);
    free(b);
}

/* The fused backend against the unfused reference ops (gpu_ref_forward). */
static void test_backend_vs_ref(void **state) {
    int L = model->cfg.num_labels, n = 400;
    float *a = malloc(sizeof(float) * (size_t)n * L), *b = malloc(sizeof(float) * (size_t)n * L);
    classify_all(1024, 2, n, a);
    int total = 0;
    for (int r = 0; r < n; r++)
        total += rows[r].len;
    int32_t *ids = malloc(sizeof(int32_t) * (size_t)total), *cu = malloc(sizeof(int32_t) * (n + 1));
    cu[0] = 0;
    for (int r = 0; r < n; r++) {
        memcpy(ids + cu[r], rows[r].ids, sizeof(int32_t) * (size_t)rows[r].len);
        cu[r + 1] = cu[r] + rows[r].len;
    }
    assert_int_equal(gpu_ref_forward(model, ids, cu, n, b), 0);
    double maxd = max_delta(a, b, (size_t)n * L);
    printf("backend vs gpu_ref_forward: max |delta| %.3g over %d rows\n", maxd, n);
    assert_true(maxd <= 1e-4);
    free(a);
    free(b);
    free(ids);
    free(cu);
}

/* Long sequences (the attention GEMM path, chunks of one sequence) against the reference:
 * golden ids glued together into lengths up to the model's 512 positions. */
static void test_long_vs_ref(void **state) {
    common_err_t err;
    int lens[] = {40, 100, 200, 333, 512, 64, 31}, ns = 7, total = 0;
    for (int s = 0; s < ns; s++)
        total += lens[s];
    int32_t *ids = malloc(sizeof(int32_t) * (size_t)total), cu[8] = {0};
    int r = 0, k = 0;
    for (int s = 0; s < ns; s++) {
        cu[s + 1] = cu[s] + lens[s];
        for (int t = 0; t < lens[s]; t++) {
            ids[cu[s] + t] = rows[r].ids[k];
            if (++k == rows[r].len) k = 0, r++;
        }
    }
    int L = model->cfg.num_labels;
    float *a = malloc(sizeof(float) * ns * L), *b = malloc(sizeof(float) * ns * L);
    const gpu_backend_ops_t *ops = gpu_backend_find("cpu", &err);
    gpu_backend_t *be;
    gpu_backend_opts_t o = {.token_budget = 2048, .threads = 2};
    assert_int_equal(ops->init(model, &o, &be, &err), 0);
    gpu_batch_t bt = {
        .ids = ids, .cu_seqlens = cu, .n_seqs = ns, .n_tokens = total, .max_len = 512};
    assert_int_equal(ops->forward(be, &bt, a, &err), 0);
    assert_int_equal(gpu_ref_forward(model, ids, cu, ns, b), 0);
    double maxd = max_delta(a, b, (size_t)ns * L);
    printf("long sequences (31..512 tokens) vs gpu_ref_forward: max |delta| %.3g\n", maxd);
    assert_true(maxd <= 1e-4);
    ops->free(be);
    free(ids);
    free(a);
    free(b);
}

/* Batches the instance cannot hold are refused before any work, with a reason. */
static void test_refusals(void **state) {
    common_err_t err;
    const gpu_backend_ops_t *ops = &*gpu_backend_find("cpu", &err);
    gpu_backend_t *be;
    gpu_backend_opts_t o = {.token_budget = 16, .max_len = 8, .max_seqs = 2, .threads = 2};
    assert_int_equal(ops->init(model, &o, &be, &err), 0);
    int32_t ids[32] = {101, 2129, 102, 101, 2129, 2052, 102, 101, 102};
    int32_t cu_ok[] = {0, 3, 7};
    float lg[3 * 151];
    gpu_batch_t b = {.ids = ids, .cu_seqlens = cu_ok, .n_seqs = 2, .n_tokens = 7, .max_len = 4};
    assert_int_equal(ops->forward(be, &b, lg, &err), 0);
    int32_t cu3[] = {0, 3, 7, 9};
    gpu_batch_t b3 = {.ids = ids, .cu_seqlens = cu3, .n_seqs = 3, .n_tokens = 9, .max_len = 4};
    err.message[0] = 0;
    assert_int_equal(ops->forward(be, &b3, lg, &err), COMMON_USAGE);
    assert_int_equal(err.code, COMMON_USAGE);
    assert_non_null(strstr(err.message, "capacity"));
    int32_t cu_long[] = {0, 20};
    gpu_batch_t bl = {
        .ids = ids, .cu_seqlens = cu_long, .n_seqs = 1, .n_tokens = 20, .max_len = 20};
    err.message[0] = 0;
    assert_int_equal(ops->forward(be, &bl, lg, &err), COMMON_USAGE);
    assert_non_null(strstr(err.message, "budget"));
    ids[1] = 999999;
    err.message[0] = 0;
    assert_int_equal(ops->forward(be, &b, lg, &err), COMMON_USAGE);
    assert_non_null(strstr(err.message, "vocabulary"));
    ops->free(be);
    /* options the backend refuses are the caller's to fix: a usage error, as the CLI exits */
    gpu_backend_opts_t bad = {.token_budget = 64, .precision = "fp16"};
    assert_int_equal(ops->init(model, &bad, &be, &err), COMMON_USAGE);
    assert_non_null(strstr(err.message, "fp32"));
    gpu_backend_opts_t many = {.token_budget = 64, .threads = 100000};
    assert_int_equal(ops->init(model, &many, &be, &err), COMMON_USAGE);
    assert_non_null(strstr(err.message, "threads"));
}

/* A random model of a named geometry runs and is deterministic in its seed. */
static void test_random_model(void **state) {
    common_err_t err;
    gpu_model_t *r1, *r2;
    assert_int_equal(gpu_model_init_random("bert-tiny", 5, 42, &r1, &err), 0);
    assert_int_equal(gpu_model_init_random("bert-tiny", 5, 42, &r2, &err), 0);
    assert_int_equal(r1->blob_floats, r2->blob_floats);
    assert_memory_equal(r1->w.word_emb, r2->w.word_emb, sizeof(float) * 1000);
    assert_true(r1->w.layer[1].ln1_g[3] == 1.0f && r1->w.layer[1].ln1_b[3] == 0.0f);
    double s = 0, s2 = 0;
    size_t n = (size_t)r1->cfg.vocab_size * r1->cfg.hidden;
    for (size_t i = 0; i < n; i++) {
        s += r1->w.word_emb[i];
        s2 += (double)r1->w.word_emb[i] * r1->w.word_emb[i];
    }
    assert_true(fabs(s / n) < 1e-3 && fabs(sqrt(s2 / n) - 0.02) < 1e-3);
    assert_string_equal(r1->cfg.id2label[4], "LABEL_4");
    gpu_model_config_t base;
    assert_int_equal(gpu_model_geometry("bert-base", 2, &base), 0);
    assert_int_equal(gpu_model_param_count(&base), 109483778); /* HF bert-base-uncased, 2 labels */
    assert_int_not_equal(gpu_model_geometry("bert-huge", 2, &base), 0);
    gpu_model_t *none = (gpu_model_t *)1;
    assert_int_not_equal(gpu_model_init_random("bert-huge", 2, 1, &none, &err), 0);
    assert_null(none);
    assert_non_null(strstr(err.message, "bert-huge"));
    /* Forward on the random model through backend and reference. */
    int32_t ids[] = {101, 7, 8, 102, 101, 5, 6, 7, 8, 9, 102}, cu[] = {0, 4, 11};
    float a[10], b[10];
    const gpu_backend_ops_t *ops = gpu_backend_find("cpu", &err);
    gpu_backend_t *be;
    gpu_backend_opts_t o = {.token_budget = 64};
    assert_int_equal(ops->init(r1, &o, &be, &err), 0);
    gpu_batch_t bt = {.ids = ids, .cu_seqlens = cu, .n_seqs = 2, .n_tokens = 11, .max_len = 7};
    assert_int_equal(ops->forward(be, &bt, a, &err), 0);
    assert_int_equal(gpu_ref_forward(r1, ids, cu, 2, b), 0);
    for (int i = 0; i < 10; i++)
        assert_true(fabs(a[i] - b[i]) < 1e-5);
    ops->free(be);
    gpu_model_free(r1);
    gpu_model_free(r2);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_golden),       cmocka_unit_test(test_packing_invariance),
        cmocka_unit_test(test_blas_path),    cmocka_unit_test(test_backend_vs_ref),
        cmocka_unit_test(test_long_vs_ref),  cmocka_unit_test(test_refusals),
        cmocka_unit_test(test_random_model),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
