/* Per-op timing through the backend table (profile_ops, `reclass bench --profile-ops`): the
 * grouping of per-op totals into rows (gpu_op_times_group: ops alike in every layer in one
 * row, named without their layer, longest first), then each backend built here (cuda where a
 * device is) on bert-mini and the ModernBERT fixture: every batch op timed once per forward
 * (cuda) or once per chunk (cpu), no row named by a layer, the total the rows' sum. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu/backend.h"
#include "gpu/cuda/cuda_backend.h"

/* Two layers' qkv ops share a row; the rows come longest first; ops never run are left out. */
static void test_group(void **state) {
    (void)state;
    gpu_model_config_t cfg;
    assert_int_equal(gpu_model_geometry("bert-mini", 3, &cfg), 0);
    gpu_graph_t *g = NULL;
    common_err_t err;
    assert_int_equal(gpu_graph_build(&cfg, NULL, GPU_PREC_FP32, GPU_PREC_FP32, &g, &err), 0);
    double *ms = calloc((size_t)g->n_ops, sizeof(double));
    long *runs = calloc((size_t)g->n_ops, sizeof(long));
    double want_qkv = 0;
    int qkv_ops = 0;
    for (int i = 0; i < g->n_ops; i++) {
        runs[i] = i == 0 ? 0 : 3; /* the embedding never ran */
        ms[i] = i == 0 ? 0 : 1.0 + i;
        if (g->op[i].layer >= 0 && strstr(g->op[i].name, ".qkv")) want_qkv += ms[i], qkv_ops++;
    }
    assert_true(qkv_ops >= 2); /* every layer but the last, which projects k, v and q apart */
    gpu_op_times_t t;
    gpu_op_times_group(g, ms, runs, "test", &t);
    double sum = 0;
    int found = 0;
    for (int r = 0; r < t.n; r++) {
        printf("%-60s %4ld %8.2f\n", t.row[r].what, t.row[r].runs, t.row[r].ms);
        assert_true(strncmp(t.row[r].what, "l0.", 3) != 0 && strncmp(t.row[r].what, "l1.", 3) != 0);
        assert_null(strstr(t.row[r].what, "emb"));
        if (r > 0) assert_true(t.row[r].ms <= t.row[r - 1].ms);
        if (strncmp(t.row[r].what, "qkv:", 4) == 0) {
            found = 1;
            assert_int_equal(t.row[r].runs, 3 * qkv_ops);
            assert_true(t.row[r].ms == want_qkv);
        }
        sum += t.row[r].ms;
    }
    assert_true(found);
    assert_true(sum == t.total_ms);
    assert_string_equal(t.clock, "test");
    free(ms), free(runs);
    gpu_graph_free(g);
}

/* One backend on one model (a geometry's random weights, or a fixture's directory under
 * tests/fixtures/models): two forwards profiled; each op ran per forward (per chunk on the
 * cpu, which times each thread's ops). */
static void profile_backend(const char *backend, const char *geometry, const char *precision) {
    common_err_t err;
    const gpu_backend_ops_t *ops = gpu_backend_find(backend, &err);
    if (!ops) {
        printf("skip %s: %s\n", backend, err.message);
        return;
    }
    assert_non_null(ops->profile_ops);
    gpu_model_t *m = NULL;
    char dir[512];
    snprintf(dir, sizeof dir, "%s/models/%s", RECLASS_FIXTURES, geometry);
    assert_int_equal(strchr(geometry, '-') && strstr(geometry, "clinc150")
                         ? gpu_model_load(dir, &m, &err)
                         : gpu_model_init_random(geometry, 3, 7, &m, &err),
                     0);
    gpu_backend_opts_t o = {
        .token_budget = 256, .max_len = 128, .threads = 1, .precision = precision};
    gpu_backend_t *be = NULL;
    if (ops->init(m, &o, &be, &err) != 0) {
        printf("skip %s %s: %s\n", backend, geometry, err.message);
        gpu_model_free(m);
        return;
    }
    enum { NS = 3 };
    const int32_t cu[NS + 1] = {0, 40, 41, 100};
    int32_t ids[100];
    for (int i = 0; i < 100; i++)
        ids[i] = 1000 + (i * 37) % 1000;
    const gpu_batch_t b = {
        .ids = ids, .cu_seqlens = cu, .n_seqs = NS, .n_tokens = 100, .max_len = 59};
    float *logits = calloc((size_t)NS * m->cfg.num_labels, sizeof(float));
    assert_int_equal(ops->profile_ops(be, 1, NULL, &err), 0);
    for (int k = 0; k < 2; k++)
        assert_int_equal(ops->forward(be, &b, logits, &err), 0);
    gpu_op_times_t t;
    assert_int_equal(ops->profile_ops(be, 0, &t, &err), 0);
    printf("%s %s %s (%s):\n", backend, geometry, precision, t.clock);
    double sum = 0;
    long runs = 0;
    for (int r = 0; r < t.n; r++) {
        printf("  %-60s %4ld %8.3f\n", t.row[r].what, t.row[r].runs, t.row[r].ms);
        assert_true(t.row[r].runs > 0 && t.row[r].ms >= 0);
        assert_false(t.row[r].what[0] == 'l' && t.row[r].what[1] >= '0' && t.row[r].what[1] <= '9');
        sum += t.row[r].ms, runs += t.row[r].runs;
    }
    assert_true(t.n > 3 && t.total_ms > 0 && sum == t.total_ms);
    /* a forward over one chunk (cpu: one thread, 100 tokens) runs every op once */
    gpu_model_config_t cfg = m->cfg;
    gpu_graph_t *g = NULL;
    assert_int_equal(gpu_graph_build(&cfg, NULL, GPU_PREC_FP32, GPU_PREC_FP32, &g, &err), 0);
    assert_int_equal(runs, 2L * g->n_ops);
    gpu_graph_free(g);
    /* off again: forwards are no longer timed */
    assert_int_equal(ops->profile_ops(be, 1, NULL, &err), 0);
    assert_int_equal(ops->profile_ops(be, 0, NULL, &err), 0);
    assert_int_equal(ops->forward(be, &b, logits, &err), 0);
    assert_int_equal(ops->profile_ops(be, 0, &t, &err), 0);
    assert_int_equal(t.n, 0);
    free(logits);
    ops->free(be);
    gpu_model_free(m);
}

static void test_backends(void **state) {
    (void)state;
    profile_backend("cpu", "bert-mini", "fp32");
    profile_backend("cpu", "modernbert-clinc150", "fp32");
#ifdef RECLASS_HAVE_CUDA
    if (gpu_cuda_device_count() > 0) {
        profile_backend("cuda", "bert-mini", "fp16");
        profile_backend("cuda", "modernbert-clinc150", "fp16");
    }
#endif
}

int main(void) {
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_group),
                                       cmocka_unit_test(test_backends)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
