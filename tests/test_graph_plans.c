/* The graph of every family at every precision, built without weights (gpu/graph.h): its ops'
 * views fit their tensors, activations are written before they are read, and the memory plan
 * sizes the arena. (The ops' parity per backend: test_graph_ops.) */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>

#include "gpu/graph.h"
#include "gpu/model/model.h"

/* Every family's graph, at every precision, planned without weights: each op's views fit
 * their tensors (a linear's input k and output n columns, its weight (n, k) and bias (n)),
 * activations are written before they are read, and the plan sizes the arena. */
static void view_fits(const gpu_graph_t *g, const gpu_op_t *op, gpu_view_t v, int width) {
    if (v.t < 0 || v.t >= g->n_tensors || v.col < 0 || v.col + width > g->tensor[v.t].cols)
        fail_msg("%s: a view of %d columns from %d overruns tensor %d", op->name, width, v.col,
                 v.t);
}

static void test_every_family_plans(void **state) {
    (void)state;
    const char *const geoms[] = {"bert-mini",       "bert-large",     "distilbert-base",
                                 "roberta-base",    "xlmr-base",      "electra-small",
                                 "modernbert-base", "deberta-v3-base"};
    const gpu_precision_t precs[] = {GPU_PREC_FP32, GPU_PREC_FP16, GPU_PREC_BF16, GPU_PREC_FP8};
    common_err_t err;
    for (size_t gi = 0; gi < sizeof geoms / sizeof geoms[0]; gi++)
        for (size_t pi = 0; pi < sizeof precs / sizeof precs[0]; pi++) {
            gpu_model_config_t cfg;
            assert_int_equal(gpu_model_geometry(geoms[gi], 3, &cfg), 0);
            gpu_graph_t *g = NULL;
            assert_int_equal(gpu_graph_build(&cfg, NULL, precs[pi], GPU_PREC_FP16, &g, &err), 0);
            char *written = calloc((size_t)g->n_tensors, 1);
            for (int t = 0; t < g->n_tensors; t++)
                written[t] = g->tensor[t].cls == GPU_TENSOR_WEIGHT;
            for (int i = 0; i < g->n_prelude + g->n_ops; i++) {
                const gpu_op_t *op = i < g->n_prelude ? &g->prelude[i] : &g->op[i - g->n_prelude];
                if (op->kind == GPU_OP_LINEAR) {
                    view_fits(g, op, op->src[0], op->k);
                    view_fits(g, op, op->out, op->n);
                    assert_int_equal(g->tensor[op->w[0]].rows, op->n);
                    assert_int_equal(g->tensor[op->w[0]].cols, op->k);
                    if (op->w[1] >= 0) assert_int_equal(g->tensor[op->w[1]].cols, op->n);
                } else if (op->kind == GPU_OP_ATTENTION) {
                    for (int k = 0; k < 3; k++)
                        view_fits(g, op, op->src[k], op->heads * op->head_dim);
                    view_fits(g, op, op->out, op->heads * op->head_dim);
                } else if (op->kind != GPU_OP_EMBED) {
                    view_fits(g, op, op->src[0], op->n);
                    view_fits(g, op, op->out, op->n);
                } else {
                    view_fits(g, op, op->out, op->n);
                }
                for (int k = 0; k < 3; k++)
                    if (op->src[k].t >= 0 && !written[op->src[k].t])
                        fail_msg("%s %s: %s reads %s before any op writes it", geoms[gi],
                                 gpu_precision_name(precs[pi]), op->name,
                                 g->tensor[op->src[k].t].name);
                written[op->out.t] = 1;
            }
            assert_true(g->logits >= 0 && written[g->logits]);
            gpu_graph_plan_opts_t po = {.act_bytes = 2, .token_budget = 4096, .max_seqs = 256};
            gpu_graph_plan_t p;
            assert_int_equal(gpu_graph_plan(g, &po, &p), 0);
            assert_true(p.arena_bytes > (size_t)4096 * cfg.hidden * 2);
            assert_true(p.weights_bytes > 0);
            gpu_graph_plan_free(&p);
            free(written);
            gpu_graph_free(g);
        }
}

int main(void) {
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_every_family_plans)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
