/* worker_tok_load_dir: which tokenizer a checkpoint directory carries. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/err.h"
#include "worker/text/hf/hf.h"
#include "worker/text/tokenizer_int.h"

static char *join(const char *dir, const char *file) {
    size_t n = strlen(dir) + strlen(file) + 2;
    char *p = malloc(n);
    if (p) snprintf(p, n, "%s/%s", dir, file);
    return p;
}

/* A tokenizer.json that is exactly BERT's (BertNormalizer with clean_text, BertPreTokenizer,
 * WordPiece with "##" and 100 characters, [CLS] $A [SEP], the bracketed special tokens as its
 * only added tokens, dense ids) runs on the vocab.txt tokenizer, whose printable-ASCII path
 * is ~10x faster than the general pipeline. Returns 1 with *out built, 0 when hf is not of
 * that shape, -1 on error. */
static int bert_fast(const hf_tok_t *hf, const char *name, worker_tok_t **out, common_err_t *e) {
    const hf_model_t *m = &hf->model;
    if (hf->n_norm != 1 || hf->norm[0].kind != HN_BERT || !hf->norm[0].clean || hf->n_pre != 1 ||
        hf->pre[0].kind != HP_BERT || m->kind != HM_WORDPIECE || m->prefixn != 2 ||
        memcmp(m->prefix, "##", 2) != 0 || m->max_chars != 100 || hf->max_len != 0 ||
        hf->n_prefix != 1 || hf->n_suffix != 1)
        return 0;
    int32_t sp[SP_N];
    int n_sp = 0;
    for (int k = 0; k < SP_N; k++) {
        sp[k] = hf_map_get(&m->vocab, sp_names[k], (size_t)sp_lens[k]);
        n_sp += sp[k] >= 0;
    }
    if (sp[SP_UNK] < 0 || sp[SP_UNK] != m->unk || hf->prefix[0] != sp[SP_CLS] ||
        hf->suffix[0] != sp[SP_SEP] || sp[SP_CLS] < 0 || sp[SP_SEP] < 0 || hf->n_added != n_sp)
        return 0;
    for (int i = 0; i < hf->n_added; i++) {
        const hf_added_t *a = &hf->added[i];
        if (a->normalized || a->lstrip || a->rstrip || a->single_word ||
            hf_map_get(&m->vocab, a->s, a->n) != a->id)
            return 0;
        int known = 0;
        for (int k = 0; k < SP_N; k++)
            known |= a->n == (size_t)sp_lens[k] && memcmp(a->s, sp_names[k], a->n) == 0;
        if (!known) return 0;
    }
    /* vocab.txt's text: one token a line in id order; every id present, no token that the
     * line format would change (a newline inside, whitespace at the end). */
    int n = hf->vocab_size;
    const char **tok = calloc((size_t)n, sizeof(*tok));
    uint32_t *tlen = calloc((size_t)n, sizeof(*tlen));
    size_t bytes = 0;
    int ok = tok && tlen, seen = 0;
    for (uint32_t i = 0; ok && i <= m->vocab.mask; i++) {
        const hf_map_slot_t *e = &m->vocab.slot[i];
        if (e->len == UINT32_MAX || e->val < 0) continue;
        const char *s = m->vocab.pool.p + e->off;
        char last = e->len ? s[e->len - 1] : 0;
        if (e->val >= n || tok[e->val] || memchr(s, '\n', e->len) || last == ' ' || last == '\t' ||
            last == '\r' || last == '\v' || last == '\f') {
            ok = 0;
            break;
        }
        tok[e->val] = s;
        tlen[e->val] = e->len;
        bytes += e->len + 1;
        seen++;
    }
    char *pool = ok && seen == n ? malloc(bytes + 1) : NULL;
    if (pool) {
        size_t p = 0;
        for (int i = 0; i < n; i++) {
            memcpy(pool + p, tok[i], tlen[i]);
            p += tlen[i];
            pool[p++] = '\n';
        }
        pool[p] = 0;
    }
    free(tok);
    free(tlen);
    if (!pool) return ok && seen == n ? (common_err_set(e, COMMON_FATAL, "out of memory"), -1) : 0;
    worker_tok_config_t tc = {.lower = hf->norm[0].lower,
                              .strip_accents = hf->norm[0].strip,
                              .chinese_chars = hf->norm[0].cjk};
    return tok_init_pool(pool, bytes, name, &tc, out, e) == COMMON_OK ? 1 : -1;
}

common_status_t worker_tok_load_dir(const char *dir, int vocab_size, worker_tok_t **out,
                                    common_err_t *e) {
    *out = NULL;
    char *json = join(dir, "tokenizer.json");
    if (!json) return common_err_set(e, COMMON_FATAL, "out of memory");
    if (access(json, F_OK) != 0) { /* an old BERT checkpoint: vocab.txt + tokenizer_config.json */
        free(json);
        worker_tok_config_t tc;
        common_status_t rc = worker_tok_config_read(dir, &tc, e);
        if (rc != COMMON_OK) return rc;
        tc.vocab_size = vocab_size;
        char *vocab = join(dir, "vocab.txt");
        if (!vocab) return common_err_set(e, COMMON_FATAL, "out of memory");
        rc = worker_tok_init(vocab, &tc, out, e);
        free(vocab);
        return rc;
    }
    hf_tok_t *hf = NULL;
    common_status_t rc = hf_tok_load_file(json, &hf, e);
    if (rc == COMMON_OK && vocab_size > 0 && hf->vocab_size > vocab_size) {
        rc = common_err_set(e, COMMON_USAGE, "%s has ids up to %d, config.json's vocab_size is %d",
                            json, hf->vocab_size - 1, vocab_size);
        common_err_detail(e, "the extra ids have no embedding");
        common_err_hint(e, "use the tokenizer the checkpoint was trained with");
    }
    if (rc == COMMON_OK) {
        int fast = bert_fast(hf, json, out, e);
        if (fast != 0) {
            free(json);
            hf_tok_free(hf);
            return fast > 0 ? COMMON_OK : e->code;
        }
    }
    free(json);
    worker_tok_t *t = rc == COMMON_OK ? calloc(1, sizeof(*t)) : NULL;
    if (rc == COMMON_OK && !t) rc = common_err_set(e, COMMON_FATAL, "out of memory");
    if (rc != COMMON_OK) {
        hf_tok_free(hf);
        return rc;
    }
    t->hf = hf;
    *out = t;
    return COMMON_OK;
}
