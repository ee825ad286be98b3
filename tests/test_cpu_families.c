/* The CPU backend on the fixture classifier of each family (DistilBERT, RoBERTa, XLM-R,
 * ELECTRA: tests/fixtures/models/) against Hugging Face's fp32 logits, on the CLINC150 test
 * set and the multilingual set: every argmax agrees and every stored logit is within 2e-3.
 * The golden token ids go straight to the backend, so this tests the encoder alone. Also:
 * each family's config is read as the loader should (family, activations, position offset,
 * embedding size), and the fused backend agrees with the reference ops. */
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
#include "tests/lib/cpu_blas_backend.h"
#include "tests/lib/ref_ops.h"
#include "gpu/model/model.h"
#include "tests/lib/family_golden.h"

/* The fixtures, or argv[1]'s directory of models made the same way. */
static const char *models_dir = RECLASS_FIXTURES "/models";

/* The "cpu" table as the product finds it (AVX-512 GEMMs where the CPU has them). */
static const gpu_backend_ops_t *cpu_ops(void) {
    common_err_t err;
    const gpu_backend_ops_t *ops = gpu_backend_find("cpu", &err);
    assert_non_null(ops);
    return ops;
}

static gpu_model_t *load(const char *name) {
    char dir[512];
    common_err_t err;
    gpu_model_t *m = NULL;
    snprintf(dir, sizeof dir, "%s/%s", models_dir, name);
    if (gpu_model_load(dir, &m, &err) != 0) fprintf(stderr, "load: %s\n", err.message);
    assert_non_null(m);
    return m;
}

/* What each fixture's config.json must turn into. */
static void test_configs(void **state) {
    (void)state;
    static const struct {
        const char *name;
        gpu_model_family_t family;
        gpu_act_t act, head_act;
        int emb, pos_offset, max_pos, type_vocab;
    } want[FG_N_MODELS] = {
        {"distilbert-clinc150", GPU_FAMILY_DISTILBERT, GPU_ACT_GELU, GPU_ACT_RELU, 128, 0, 512, 1},
        {"roberta-clinc150", GPU_FAMILY_ROBERTA, GPU_ACT_GELU_TANH, GPU_ACT_TANH, 128, 2, 512, 1},
        {"xlmr-clinc150", GPU_FAMILY_XLM_ROBERTA, GPU_ACT_RELU, GPU_ACT_TANH, 128, 2, 512, 1},
        {"electra-clinc150", GPU_FAMILY_ELECTRA, GPU_ACT_GELU, GPU_ACT_GELU, 64, 0, 512, 2},
    };
    for (int i = 0; i < FG_N_MODELS; i++) {
        gpu_model_t *m = load(want[i].name);
        const gpu_model_config_t *c = &m->cfg;
        printf("  %-20s %s, act %s, head %s, E %d, H %d, positions %d from %d\n", want[i].name,
               gpu_model_family_name(c->family), gpu_model_act_name(c->act),
               gpu_model_act_name(c->head_act), c->emb_size, c->hidden, c->max_pos, c->pos_offset);
        assert_int_equal(c->family, want[i].family);
        assert_int_equal(c->act, want[i].act);
        assert_int_equal(c->head_act, want[i].head_act);
        assert_int_equal(c->emb_size, want[i].emb);
        assert_int_equal(c->hidden, 128);
        assert_int_equal(c->pos_offset, want[i].pos_offset);
        assert_int_equal(c->max_pos, want[i].max_pos);
        assert_int_equal(c->type_vocab, want[i].type_vocab);
        assert_int_equal(c->num_labels, 151);
        assert_int_equal(c->emb_size != c->hidden, m->w.emb_proj_w != NULL);
        if (c->family == GPU_FAMILY_DISTILBERT) /* no token types: the zero row */
            for (int j = 0; j < c->emb_size; j++)
                assert_true(m->w.type_emb[j] == 0.0f);
        gpu_model_free(m);
    }
}

/* Every family, both golden sets: 100% argmax agreement, max |delta| <= 2e-3. */
static void run_goldens(const gpu_backend_ops_t *ops, int budget) {
    common_err_t err;
    for (int i = 0; i < FG_N_MODELS; i++) {
        gpu_model_t *m = load(fg_models[i]);
        char dir[512];
        snprintf(dir, sizeof dir, "%s/%s", models_dir, fg_models[i]);
        for (int s = 0; s < FG_N_SETS; s++) {
            fg_set_t set;
            if (fg_load(dir, fg_sets[s], &set, &err)) fprintf(stderr, "%s\n", err.message);
            assert_true(set.n > 0);
            float *lg = malloc(sizeof(float) * (size_t)set.n * (size_t)m->cfg.num_labels);
            assert_non_null(lg);
            gpu_backend_opts_t o = {.token_budget = budget, .threads = 0};
            if (fg_run(ops, m, &o, &set, lg, &err)) fprintf(stderr, "run: %s\n", err.message);
            fg_score_t sc = fg_compare(m, &set, lg);
            printf("  %-20s %-14s rows %5d, argmax agreement %5d/%d (%.2f%%), logit rows %4d, "
                   "max |delta| %.3g\n",
                   fg_models[i], fg_sets[s], sc.rows, sc.agree, sc.rows, 100.0 * sc.agree / sc.rows,
                   sc.logit_rows, sc.max_delta);
            assert_int_equal(sc.agree, sc.rows);
            assert_true(sc.logit_rows > 0);
            assert_true(sc.max_delta <= 2e-3);
            free(lg);
            fg_free(&set);
        }
        gpu_model_free(m);
    }
}

static void test_goldens(void **state) {
    (void)state;
    run_goldens(cpu_ops(), 4096);
}

/* The OpenBLAS path (what a CPU without AVX-512 runs) on the same goldens. */
static void test_goldens_blas(void **state) {
    (void)state;
    run_goldens(test_cpu_blas_backend(), 2048);
}

/* The fused backend against the plain reference ops on the first rows of each family. */
static void test_backend_vs_ref(void **state) {
    (void)state;
    common_err_t err;
    for (int i = 0; i < FG_N_MODELS; i++) {
        gpu_model_t *m = load(fg_models[i]);
        char dir[512];
        snprintf(dir, sizeof dir, "%s/%s", models_dir, fg_models[i]);
        fg_set_t set;
        assert_int_equal(fg_load(dir, "multilingual", &set, &err), 0);
        const int n = set.n < 64 ? set.n : 64;
        int total = 0;
        for (int r = 0; r < n; r++)
            total += set.rows[r].len;
        int32_t *ids = malloc(sizeof(int32_t) * (size_t)total);
        int32_t *cu = malloc(sizeof(int32_t) * (size_t)(n + 1));
        cu[0] = 0;
        for (int r = 0; r < n; r++) {
            memcpy(ids + cu[r], set.rows[r].ids, sizeof(int32_t) * (size_t)set.rows[r].len);
            cu[r + 1] = cu[r] + set.rows[r].len;
        }
        size_t L = (size_t)m->cfg.num_labels;
        float *ref = malloc(sizeof(float) * (size_t)n * L);
        float *got = malloc(sizeof(float) * (size_t)n * L);
        assert_int_equal(gpu_ref_forward(m, ids, cu, n, ref), 0);
        gpu_backend_opts_t o = {.token_budget = total, .threads = 1};
        gpu_backend_t *be;
        assert_int_equal(cpu_ops()->init(m, &o, &be, &err), 0);
        gpu_batch_t b = {.ids = ids, .cu_seqlens = cu, .n_seqs = n, .n_tokens = total};
        for (int r = 0; r < n; r++)
            if (cu[r + 1] - cu[r] > b.max_len) b.max_len = cu[r + 1] - cu[r];
        assert_int_equal(cpu_ops()->forward(be, &b, got, &err), 0);
        double maxd = 0;
        for (size_t j = 0; j < (size_t)n * L; j++)
            maxd = fmax(maxd, fabs((double)got[j] - ref[j]));
        printf("  %-20s backend vs reference ops: %d rows, max |delta| %.3g\n", fg_models[i], n,
               maxd);
        assert_true(maxd <= 1e-4);
        cpu_ops()->free(be);
        free(ids);
        free(cu);
        free(ref);
        free(got);
        fg_free(&set);
        gpu_model_free(m);
    }
}

int main(int argc, char **argv) {
    if (argc > 1) models_dir = argv[1];
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_configs),
        cmocka_unit_test(test_goldens),
        cmocka_unit_test(test_goldens_blas),
        cmocka_unit_test(test_backend_vs_ref),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
