/* ModernBERT and DeBERTa-v3 on the CPU backend: their fixture classifiers
 * (tests/fixtures/models/{modernbert,deberta}-clinc150, made by make_models.py) against
 * Hugging Face's fp32 logits on CLINC150, the multilingual set and long inputs (ModernBERT up
 * to 4,096 tokens, DeBERTa to its 512): every argmax agrees, every stored logit within 2e-3.
 * Also: both config.json shapes of ModernBERT read alike, DeBERTa's relative rows are HF's
 * make_log_bucket_position to the bucket, and the CUDA backend refuses both with a message. */
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
#include "gpu/graph.h"
#include "gpu/cuda/cuda_backend.h"
#include "tests/lib/cpu_blas_backend.h"
#include "gpu/model/model.h"
#include "tests/lib/family_golden.h"

static const char *models_dir = RECLASS_FIXTURES "/models";
static const char *const models[] = {"modernbert-clinc150", "deberta-clinc150"};
static const char *const sets[] = {"clinc150_test", "multilingual", "long"};

static gpu_model_t *load(const char *name) {
    char dir[512];
    common_err_t err;
    gpu_model_t *m = NULL;
    snprintf(dir, sizeof dir, "%s/%s", models_dir, name);
    if (gpu_model_load(dir, &m, &err) != 0) fprintf(stderr, "load: %s\n", err.message);
    assert_non_null(m);
    return m;
}

/* A family's own knobs are its file's: they show in the graph it builds (w NULL: a plan). */
static gpu_graph_t *graph_of(const gpu_model_config_t *c, const gpu_model_weights_t *w) {
    common_err_t err;
    gpu_graph_t *g = NULL;
    if (gpu_graph_build(c, w, GPU_PREC_FP32, GPU_PREC_FP32, &g, &err) != 0)
        fail_msg("graph: %s", err.message);
    return g;
}

/* The op named name, batch ops or prelude. */
static const gpu_op_t *op_named(const gpu_graph_t *g, const char *name) {
    for (int i = 0; i < g->n_ops + g->n_prelude; i++) {
        const gpu_op_t *op = i < g->n_ops ? &g->op[i] : &g->prelude[i - g->n_ops];
        if (strcmp(op->name, name) == 0) return op;
    }
    fail_msg("no op %s", name);
    return NULL;
}

/* ModernBERT: GeGLU, a global layer every `every` from layer 0 (RoPE theta tg), the others
 * local (window, theta tl), pooling. */
static void check_modern(const gpu_model_config_t *c, int every, int window, float tg, float tl,
                         int mean) {
    assert_int_equal(c->family, GPU_FAMILY_MODERNBERT);
    assert_true(gpu_model_glu(c));
    assert_int_equal(gpu_model_ff1_rows(c), 2 * c->intermediate);
    gpu_graph_t *g = graph_of(c, NULL);
    assert_int_equal(op_named(g, "l0.ff1")->epi, GPU_EPI_GLU);
    for (int l = 0; l < c->layers; l++) {
        char n[32];
        snprintf(n, sizeof n, "l%d.attn", l);
        const gpu_op_t *a = op_named(g, n);
        const int global = l % every == 0;
        assert_int_equal(a->window, global ? 0 : window);
        assert_true(a->rope_theta == (global ? tg : tl));
    }
    assert_int_equal(op_named(g, "pool")->pool, mean ? GPU_POOL_MEAN : GPU_POOL_CLS);
    gpu_graph_free(g);
}

/* DeBERTa: l0's attention reads the relative rows (span, buckets, max) with c2p and p2c at
 * scale 3, and the relative embeddings' norm is there when rel_ln. */
static void check_deberta(const gpu_model_config_t *c, int span, int buckets, int max, int rel_ln) {
    assert_int_equal(c->family, GPU_FAMILY_DEBERTA_V2);
    assert_false(gpu_model_glu(c));
    gpu_graph_t *g = graph_of(c, NULL);
    const gpu_op_t *a = op_named(g, "l0.attn");
    assert_int_equal(a->rel_span, span);
    assert_int_equal(a->rel_buckets, buckets);
    assert_int_equal(a->rel_max_pos, max);
    assert_int_equal(a->scale_factor, 3);
    assert_true(a->w[0] >= 0 && a->w[1] >= 0); /* c2p, p2c */
    assert_int_equal(op_named(g, "rel.norm")->w[0] >= 0, rel_ln);
    gpu_graph_free(g);
}

static void test_configs(void **state) {
    (void)state;
    gpu_model_t *m = load("modernbert-clinc150");
    const gpu_model_config_t *c = &m->cfg;
    check_modern(c, 2, 8, 160000.0f, 10000.0f, 1);
    assert_int_equal(c->max_pos, 8192);
    assert_int_equal(c->pos_rows, 0);
    assert_int_equal(c->act, GPU_ACT_GELU);
    assert_int_equal(c->head_act, GPU_ACT_GELU);
    assert_int_equal(c->num_labels, 151);
    gpu_model_free(m);
    m = load("deberta-clinc150");
    c = &m->cfg;
    check_deberta(c, 16, 16, 64, 1);
    assert_int_equal(c->max_pos, 512);
    assert_int_equal(c->pos_rows, 0);
    assert_int_equal(c->type_vocab, 0);
    /* share_att_key: layer 0's relative keys go through its own K projection */
    gpu_graph_t *g = graph_of(c, &m->w);
    assert_true(g->tensor[op_named(g, "l0.pos_k")->w[0]].data == m->w.layer[0].k_w);
    gpu_graph_free(g);
    gpu_model_free(m);
}

static common_status_t parse(const char *json, gpu_model_config_t *c, common_err_t *err) {
    return gpu_model_parse_config(json, strlen(json), "config.json", c, err);
}

#define MB_HEAD                                                                                    \
    "{\"architectures\": [\"ModernBertForSequenceClassification\"], \"vocab_size\": 100, "         \
    "\"hidden_size\": 64, \"num_hidden_layers\": 4, \"num_attention_heads\": 2, "                  \
    "\"intermediate_size\": 96, \"max_position_embeddings\": 8192, \"num_labels\": 3, "

/* The published shape and transformers 5's describe the same model. */
static void test_config_shapes(void **state) {
    (void)state;
    common_err_t err;
    gpu_model_config_t a, b, d;
    assert_int_equal(parse(MB_HEAD "\"global_rope_theta\": 160000.0, \"local_rope_theta\": 10000.0,"
                                   " \"global_attn_every_n_layers\": 3, \"local_attention\": 128,"
                                   " \"classifier_pooling\": \"mean\"}",
                           &a, &err),
                     0);
    assert_int_equal(
        parse(MB_HEAD
              "\"layer_types\": [\"full_attention\", \"sliding_attention\", "
              "\"sliding_attention\", \"full_attention\"], \"rope_parameters\": "
              "{\"full_attention\": {\"rope_type\": \"default\", \"rope_theta\": 160000.0}, "
              "\"sliding_attention\": {\"rope_type\": \"default\", \"rope_theta\": "
              "10000.0}}, \"local_attention\": 128, \"classifier_pooling\": \"mean\"}",
              &b, &err),
        0);
    assert_int_equal(parse(MB_HEAD "\"classifier_pooling\": \"cls\"}", &d, &err), 0);
    const gpu_model_config_t *cs[3] = {&a, &b, &d};
    for (int i = 0; i < 3; i++) {
        check_modern(cs[i], 3, 64, 160000.0f, 10000.0f, i < 2);
        assert_int_equal(cs[i]->max_pos, 8192);
    }
    for (int i = 0; i < 3; i++) {
        for (int j = 0; j < cs[i]->num_labels; j++)
            free(cs[i]->id2label[j]);
        free(cs[i]->id2label);
    }
    assert_int_not_equal(parse(MB_HEAD
                               "\"layer_types\": [\"sliding_attention\", \"full_attention\", "
                               "\"full_attention\", \"full_attention\"]}",
                               &a, &err),
                         0);
    printf("  refused: %s\n", err.message);
    assert_non_null(strstr(err.message, "layer_types"));
    assert_int_not_equal(parse(MB_HEAD "\"rope_scaling\": {\"rope_type\": \"yarn\"}}", &a, &err),
                         0);
    assert_non_null(strstr(err.message, "rope_scaling"));
    assert_int_not_equal(parse(MB_HEAD "\"classifier_pooling\": \"max\"}", &a, &err), 0);
    /* DeBERTa's older "p2c|c2p" string, without share_att_key (the layers' own relative
     * projections: 2 (H^2 + H) parameters more than with it) and without the norm */
#define DEB                                                                                        \
    "{\"architectures\": [\"DebertaV2ForSequenceClassification\"], \"vocab_size\": 100, "          \
    "\"hidden_size\": 64, \"num_hidden_layers\": 1, \"num_attention_heads\": 1, "                  \
    "\"intermediate_size\": 64, \"max_position_embeddings\": 512, \"type_vocab_size\": 0, "        \
    "\"relative_attention\": true, \"pos_att_type\": \"p2c|c2p\", \"position_buckets\": 256, "     \
    "\"num_labels\": 2"
    assert_int_equal(parse(DEB "}", &a, &err), 0);
    assert_int_equal(parse(DEB ", \"share_att_key\": true}", &b, &err), 0);
#undef DEB
    check_deberta(&a, 256, 256, 512, 0);
    assert_int_equal(a.pos_rows, 512);
    assert_int_equal(gpu_model_param_count(&a) - gpu_model_param_count(&b), 2 * (64 * 64 + 64));
    for (int j = 0; j < a.num_labels; j++)
        free(a.id2label[j]), free(b.id2label[j]);
    free(a.id2label), free(b.id2label);
}

/* golden_rel_rows.json: HF's rows for every distance of the fixture's buckets and of
 * deberta-v3-base's (256 buckets over 512). */
static void test_rel_rows(void **state) {
    (void)state;
    char path[512];
    snprintf(path, sizeof path, "%s/deberta-clinc150/golden_rel_rows.json", models_dir);
    json_error_t je;
    json_t *root = json_load_file(path, 0, &je);
    assert_non_null(root);
    size_t i;
    json_t *e;
    int checked = 0;
    json_array_foreach(root, i, e) {
        gpu_op_t c = {.kind = GPU_OP_ATTENTION};
        c.rel_buckets = (int)json_integer_value(json_object_get(e, "position_buckets"));
        c.rel_max_pos = (int)json_integer_value(json_object_get(e, "max_relative_positions"));
        c.rel_span = c.rel_buckets > 0 ? c.rel_buckets : c.rel_max_pos;
        const int from = (int)json_integer_value(json_object_get(e, "from"));
        json_t *rows = json_object_get(e, "rows");
        for (size_t k = 0; k < json_array_size(rows); k++) {
            const int want = (int)json_integer_value(json_array_get(rows, k));
            const int got = gpu_op_rel_row(&c, from + (int)k);
            if (got != want)
                fail_msg("buckets %d / %d, distance %d: row %d, HF %d", c.rel_buckets,
                         c.rel_max_pos, from + (int)k, got, want);
            checked++;
        }
    }
    printf("  %d distances: every relative row is HF's\n", checked);
    assert_true(checked > 30000);
    json_decref(root);
}

static void run_goldens(const gpu_backend_ops_t *ops, int budget) {
    common_err_t err;
    for (size_t i = 0; i < sizeof models / sizeof models[0]; i++) {
        gpu_model_t *m = load(models[i]);
        char dir[512];
        snprintf(dir, sizeof dir, "%s/%s", models_dir, models[i]);
        for (size_t s = 0; s < sizeof sets / sizeof sets[0]; s++) {
            fg_set_t set;
            if (fg_load(dir, sets[s], &set, &err)) fprintf(stderr, "%s\n", err.message);
            assert_true(set.n > 0);
            float *lg = malloc(sizeof(float) * (size_t)set.n * (size_t)m->cfg.num_labels);
            assert_non_null(lg);
            gpu_backend_opts_t o = {.token_budget = budget, .threads = 0};
            if (fg_run(ops, m, &o, &set, lg, &err)) fail_msg("run: %s", err.message);
            fg_score_t sc = fg_compare(m, &set, lg);
            printf("  %-20s %-14s rows %5d, argmax agreement %5d/%d (%.2f%%), logit rows %4d, "
                   "max |delta| %.3g\n",
                   models[i], sets[s], sc.rows, sc.agree, sc.rows, 100.0 * sc.agree / sc.rows,
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

static const gpu_backend_ops_t *cpu_ops(void) {
    common_err_t err;
    const gpu_backend_ops_t *ops = gpu_backend_find("cpu", &err);
    assert_non_null(ops);
    return ops;
}

static void test_goldens(void **state) {
    (void)state;
    run_goldens(cpu_ops(), 8192);
}

static void test_goldens_blas(void **state) {
    (void)state;
    run_goldens(test_cpu_blas_backend(), 4096);
}

/* ModernBERT's other pooling, cls: the same weights, HF's logits with classifier_pooling
 * "cls" (golden_cls_pooling.jsonl). */
static void test_cls_pooling(void **state) {
    (void)state;
    char dir[512];
    common_err_t err;
    gpu_model_t *m = load("modernbert-clinc150");
    snprintf(dir, sizeof dir, "%s/modernbert-clinc150", models_dir);
    /* its config.json with classifier_pooling "cls": the family's own knobs of that config */
    char path[600], *json = NULL;
    snprintf(path, sizeof path, "%s/config.json", dir);
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    json = calloc(1, 1 << 20);
    assert_non_null(json);
    const size_t len = fread(json, 1, (1 << 20) - 1, f);
    fclose(f);
    char *mean = strstr(json, "\"mean\"");
    assert_non_null(mean);
    memcpy(mean, "\"cls\" ", 6);
    gpu_model_config_t cls;
    assert_int_equal(gpu_model_parse_config(json, len, path, &cls, &err), 0);
    check_modern(&cls, 2, 8, 160000.0f, 10000.0f, 0);
    memcpy(m->cfg.own, cls.own, sizeof cls.own);
    for (int j = 0; j < cls.num_labels; j++)
        free(cls.id2label[j]);
    free(cls.id2label);
    free(json);
    fg_set_t set;
    assert_int_equal(fg_load(dir, "cls_pooling", &set, &err), 0);
    float *lg = malloc(sizeof(float) * (size_t)set.n * (size_t)m->cfg.num_labels);
    assert_non_null(lg);
    gpu_backend_opts_t o = {.token_budget = 8192, .threads = 0};
    assert_int_equal(fg_run(cpu_ops(), m, &o, &set, lg, &err), 0);
    fg_score_t sc = fg_compare(m, &set, lg);
    printf("  cls pooling: %d/%d argmax agreement, max |delta| %.3g over %d rows\n", sc.agree,
           sc.rows, sc.max_delta, sc.logit_rows);
    assert_int_equal(sc.agree, sc.rows);
    assert_int_equal(sc.logit_rows, sc.rows);
    assert_true(sc.max_delta <= 2e-3);
    free(lg);
    fg_free(&set);
    gpu_model_free(m);
}

/* The named geometries of both families carry the published configs. */
static void test_geometries(void **state) {
    (void)state;
    gpu_model_config_t c;
    assert_int_equal(gpu_model_geometry("modernbert-base", 4, &c), 0);
    assert_true(c.layers == 22 && c.max_pos == 8192 && c.pos_rows == 0);
    check_modern(&c, 3, 64, 160000.0f, 10000.0f, 1);
    assert_int_equal(gpu_model_ff1_rows(&c), 2304);
    printf("  modernbert-base: %zu parameters\n", gpu_model_param_count(&c));
    assert_int_equal(gpu_model_geometry("deberta-v3-base", 4, &c), 0);
    assert_true(c.pos_rows == 0 && c.max_pos == 512 && c.vocab_size == 128100);
    check_deberta(&c, 256, 256, 512, 1);
    printf("  deberta-v3-base: %zu parameters\n", gpu_model_param_count(&c));
}

/* The CUDA backend runs both families on the encoder graph: it has a launcher for every op of
 * their graphs (gpu_cuda_graph_plan, no device needed), and where there is no device its
 * init says that, not that it lacks the family. */
static void test_cuda_graph(void **state) {
    (void)state;
    common_err_t err;
    const gpu_backend_ops_t *cuda = gpu_backend_find("cuda", &err);
    if (!cuda) {
        printf("  built without CUDA: %s\n", err.message);
        return;
    }
#ifdef RECLASS_HAVE_CUDA
    for (size_t i = 0; i < sizeof models / sizeof models[0]; i++) {
        gpu_model_t *m = load(models[i]);
        size_t w = 0, total = 0;
        int rc = gpu_cuda_graph_plan(&m->cfg, "fp16", 8192, 0, 0, &w, &total, &err);
        printf("  %s on cuda: %s\n", models[i], rc ? err.message : "every op has a launcher");
        assert_int_equal(rc, 0);
        if (gpu_cuda_device_count() == 0) {
            gpu_backend_opts_t o = {.token_budget = 8192, .precision = "fp16"};
            gpu_backend_t *be = NULL;
            assert_int_not_equal(cuda->init(m, &o, &be, &err), 0);
            assert_null(be);
            assert_non_null(strstr(err.message, "no CUDA device"));
        }
        gpu_model_free(m);
    }
#endif
}

int main(int argc, char **argv) {
    if (argc > 1) models_dir = argv[1];
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_configs),      cmocka_unit_test(test_config_shapes),
        cmocka_unit_test(test_rel_rows),     cmocka_unit_test(test_goldens),
        cmocka_unit_test(test_goldens_blas), cmocka_unit_test(test_geometries),
        cmocka_unit_test(test_cls_pooling),  cmocka_unit_test(test_cuda_graph),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
