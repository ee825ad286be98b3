/* Fuzz target: the text of a checkpoint's config.json and tokenizer_config.json through the
 * parsers (the model loader's gpu_model_parse_config, the tokenizer's worker_tok_config_parse). An
 * accepted config must describe a model the loader can lay out: every label named, dimensions that
 * fit the backends' int arithmetic, a usable LayerNorm epsilon. */
#include <math.h>
#include <stdint.h>

#include "gpu/graph.h"
#include "gpu/model/model.h"
#include "tests/fuzz/fuzz_util.h"
#include "worker/text/tok_config.h"

/* Small models also through their graph (a plan, no weights): what a family's own knobs
 * make of the ops the backends run. */
#define GRAPH_MAX_LAYERS 64

static void check_graph(const gpu_model_config_t *c) {
    common_err_t err;
    gpu_graph_t *g = NULL;
    FUZZ_CHECK(gpu_graph_build(c, NULL, GPU_PREC_FP32, GPU_PREC_FP32, &g, &err) == 0);
    for (int i = 0; i < g->n_ops; i++) {
        const gpu_op_t *op = &g->op[i];
        if (op->kind != GPU_OP_ATTENTION) continue;
        FUZZ_CHECK(op->window >= 0 && op->rope_theta >= 0 && op->scale_factor >= 1);
        FUZZ_CHECK(op->heads * op->head_dim == c->hidden);
        if (op->rope_theta > 0) FUZZ_CHECK(op->head_dim % 2 == 0 && isfinite(op->rope_theta));
        if (op->w[0] < 0 && op->w[1] < 0) continue;
        FUZZ_CHECK(op->rel_span > 0);
        /* every distance reads a row of the table */
        for (int d = -3 * op->rel_span; d <= 3 * op->rel_span; d += op->rel_span / 4 + 1) {
            const int r = gpu_op_rel_row(op, d);
            FUZZ_CHECK(r >= 0 && r < 2 * op->rel_span);
        }
    }
    gpu_graph_free(g);
}

static void check_config(const gpu_model_config_t *c) {
    FUZZ_CHECK(c->vocab_size > 0 && c->hidden > 0 && c->layers > 0 && c->heads > 0);
    const int own = c->family == GPU_FAMILY_MODERNBERT || c->family == GPU_FAMILY_DEBERTA_V2;
    FUZZ_CHECK(c->intermediate > 0 && c->max_pos > 0 && c->type_vocab >= (own ? 0 : 1));
    FUZZ_CHECK(c->emb_size > 0 && c->emb_size <= c->hidden);
    /* RoPE (ModernBERT) and relative-only DeBERTa have no position table */
    FUZZ_CHECK(c->pos_offset >= 0 &&
               (c->max_pos == c->pos_rows - c->pos_offset || (own && c->pos_rows == 0)));
    FUZZ_CHECK((unsigned)c->family < GPU_FAMILY_COUNT);
    FUZZ_CHECK(c->hidden % c->heads == 0);
    FUZZ_CHECK(c->num_labels > 0 && c->id2label);
    for (int i = 0; i < c->num_labels; i++)
        FUZZ_CHECK(c->id2label[i] != NULL);
    FUZZ_CHECK(isfinite(c->ln_eps) && c->ln_eps > 0.0f);
    /* The loader sizes its weight blob from the parameter count: it must not wrap. The shared
     * slices in 128 bits, which the count holds (the family's own come on top), and the count
     * within the loader's bound. */
    unsigned __int128 H = (unsigned)c->hidden, I = (unsigned)c->intermediate;
    unsigned __int128 L = (unsigned)c->num_labels, E = (unsigned)c->emb_size;
    unsigned __int128 F = (unsigned)gpu_model_ff1_rows(c);
    unsigned __int128 emb = ((unsigned __int128)(unsigned)c->vocab_size + (unsigned)c->pos_rows +
                             (unsigned)c->type_vocab) *
                                E +
                            2 * E + (E != H ? H * E + H : 0);
    unsigned __int128 layer = 4 * H * H + 4 * H + F * H + F + H * I + H + 4 * H;
    unsigned __int128 shared = emb + (unsigned)c->layers * layer + H * H + H + L * H + L;
    const size_t count = gpu_model_param_count(c);
    FUZZ_CHECK(shared <= count && count <= ((size_t)1 << 33));
    if (c->layers <= GRAPH_MAX_LAYERS) check_graph(c);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    common_err_t err;
    gpu_model_t *m = calloc(1, sizeof(*m));
    FUZZ_CHECK(m != NULL);
    if (gpu_model_parse_config((const char *)data, size, "config.json", &m->cfg, &err) == 0)
        check_config(&m->cfg);
    else
        FUZZ_CHECK(err.message[0] && m->cfg.id2label == NULL);
    gpu_model_free(m); /* frees the labels as it does for a loaded model */

    worker_tok_config_t tok;
    err.message[0] = '\0';
    if (worker_tok_config_parse((const char *)data, size, "tokenizer_config.json", &tok, &err) == 0)
        FUZZ_CHECK((tok.lower == 0 || tok.lower == 1) &&
                   (tok.strip_accents == 0 || tok.strip_accents == 1) &&
                   (tok.chinese_chars == 0 || tok.chinese_chars == 1));
    else
        FUZZ_CHECK(err.message[0]);
    return 0;
}
