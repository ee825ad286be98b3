/* BERT and the families that share its layers and differ only in what the loader normalises
 * away with BERT's generic rules (their config keys in gpu/model/model_config.c, their tensor
 * names as rows of gpu/model/model_weights.c: names, the position offset, DistilBERT's missing
 * token types): embeddings (ELECTRA: projected from E to H), post-norm layers, the head on the
 * first token. */
#include "gpu/families/family.h"

static void build(gpu_gb_t *b) {
    const gpu_model_config_t *c = &b->g->cfg;
    const gpu_model_weights_t *w = b->w;
    const int H = c->hidden, E = c->emb_size;
    int x = gpu_gb_embed(b, 1, 1);
    if (E != H) {
        const int pw = gpu_gb_weight(b, "emb.proj.w", w ? w->emb_proj_w : NULL, H, E, 0);
        const int pb = gpu_gb_weight(b, "emb.proj.b", w ? w->emb_proj_b : NULL, 1, H, 0);
        const int e = x;
        x = gpu_gb_act(b, "x", GPU_ROWS_TOKENS, H);
        gpu_gb_linear(b, "emb.proj", -1, gpu_gb_prec(b), gpu_gb_view(x, 0), gpu_gb_view(e, 0), pw,
                      pb, H, E, GPU_EPI_BIAS, c->act);
    }
    const int first = gpu_gb_postnorm_layers(b, x, NULL, NULL);
    gpu_gb_head(b, first, -1, -1, c->head_act);
}

/* The head's activation is the family's: ElectraClassificationHead applies
 * get_activation("gelu") whatever hidden_act says. */
#define BERT_ROW(sym, fam, arch, name, act)                                                        \
    const gpu_family_t sym = {{fam, arch, name, act, NULL, NULL, NULL}, build}
BERT_ROW(gpu_family_bert, GPU_FAMILY_BERT, "BertForSequenceClassification", "bert", GPU_ACT_TANH);
BERT_ROW(gpu_family_distilbert, GPU_FAMILY_DISTILBERT, "DistilBertForSequenceClassification",
         "distilbert", GPU_ACT_RELU);
BERT_ROW(gpu_family_roberta, GPU_FAMILY_ROBERTA, "RobertaForSequenceClassification", "roberta",
         GPU_ACT_TANH);
BERT_ROW(gpu_family_xlm_roberta, GPU_FAMILY_XLM_ROBERTA, "XLMRobertaForSequenceClassification",
         "xlm-roberta", GPU_ACT_TANH);
BERT_ROW(gpu_family_electra, GPU_FAMILY_ELECTRA, "ElectraForSequenceClassification", "electra",
         GPU_ACT_GELU);
