/* tokenizer.json -> hf_tok_t: the model, added tokens, post-processor and truncation here;
 * normalizers and pre-tokenizers in hf_load_parts.c. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/err.h"
#include "worker/text/hf/hf_load.h"

static int fail(hf_load_t *L, const char *what) {
    common_err_set(L->e, COMMON_USAGE, "%s: %s", L->name, what);
    return -1;
}

static int oom(hf_load_t *L) {
    common_err_set(L->e, COMMON_FATAL, "out of memory");
    return -1;
}

static void note_id(hf_load_t *L, int64_t id) {
    if (id + 1 > L->t->vocab_size) L->t->vocab_size = (int)(id + 1);
}

static int32_t token_id(hf_load_t *L, json_t *tok) {
    const char *s = json_string_value(tok);
    return s ? hf_map_get(&L->t->model.vocab, s, json_string_length(tok)) : -1;
}

static void byte_ids(hf_model_t *m) {
    for (int b = 0; b < 256; b++) {
        char k[8];
        snprintf(k, sizeof k, "<0x%02X>", b);
        m->byte_id[b] = hf_map_get(&m->vocab, k, 6);
    }
}

static int load_vocab_object(hf_load_t *L, json_t *vocab) {
    if (!json_is_object(vocab)) return fail(L, "model.vocab must be an object");
    const char *k;
    json_t *v;
    json_object_foreach(vocab, k, v) {
        json_int_t id = json_integer_value(v);
        if (!json_is_integer(v) || id < 0 || id > 0x7FFFFFFF)
            return fail(L, "model.vocab: ids must be non-negative integers");
        /* jansson keys are NUL-terminated: a token holding NUL cannot come through here */
        if (hf_map_put(&L->t->model.vocab, k, strlen(k), (int32_t)id) != 0) return oom(L);
        note_id(L, id);
    }
    return 0;
}

static int load_bpe(hf_load_t *L, json_t *mo) {
    hf_model_t *m = &L->t->model;
    if (!json_is_null(json_object_get(mo, "dropout")) && json_object_get(mo, "dropout"))
        return fail(L, "model BPE with dropout is not supported");
    const char *pre = json_string_value(json_object_get(mo, "continuing_subword_prefix"));
    const char *suf = json_string_value(json_object_get(mo, "end_of_word_suffix"));
    if (pre && *pre) return fail(L, "model BPE with continuing_subword_prefix is not supported");
    if (suf && *suf) return fail(L, "model BPE with end_of_word_suffix is not supported");
    if (load_vocab_object(L, json_object_get(mo, "vocab")) != 0) return -1;
    json_t *unk = json_object_get(mo, "unk_token");
    m->unk = json_is_string(unk) ? token_id(L, unk) : -1;
    m->fuse_unk = hf_json_flag(mo, "fuse_unk", 0);
    m->byte_fallback = hf_json_flag(mo, "byte_fallback", 0);
    m->ignore_merges = hf_json_flag(mo, "ignore_merges", 0);
    byte_ids(m);
    json_t *merges = json_object_get(mo, "merges");
    if (!json_is_array(merges)) return fail(L, "model.merges must be an array");
    size_t nm = json_array_size(merges), size = 16;
    while (size < nm * 2)
        size *= 2;
    m->mmask = (uint32_t)(size - 1);
    m->mkey = malloc(size * sizeof(uint64_t));
    m->mrank = malloc(size * sizeof(int32_t));
    m->mnew = malloc(size * sizeof(int32_t));
    if (!m->mkey || !m->mrank || !m->mnew) return oom(L);
    memset(m->mkey, 0xFF, size * sizeof(uint64_t));
    hf_buf_t cat = {0};
    for (size_t r = 0; r < nm; r++) {
        json_t *x = json_array_get(merges, r);
        const char *a, *b;
        size_t an, bn;
        if (json_is_array(x) && json_array_size(x) == 2 && json_is_string(json_array_get(x, 0)) &&
            json_is_string(json_array_get(x, 1))) {
            a = json_string_value(json_array_get(x, 0));
            an = json_string_length(json_array_get(x, 0));
            b = json_string_value(json_array_get(x, 1));
            bn = json_string_length(json_array_get(x, 1));
        } else if (json_is_string(x) && strchr(json_string_value(x), ' ')) { /* "a b" */
            a = json_string_value(x);
            const char *sp = strchr(a, ' ');
            an = (size_t)(sp - a);
            b = sp + 1;
            bn = json_string_length(x) - an - 1;
        } else {
            hf_buf_free(&cat);
            return fail(L, "model.merges: each merge must be [left, right] or \"left right\"");
        }
        int32_t ia = hf_map_get(&m->vocab, a, an), ib = hf_map_get(&m->vocab, b, bn);
        cat.n = 0;
        if (hf_buf_put(&cat, a, an) || hf_buf_put(&cat, b, bn)) {
            hf_buf_free(&cat);
            return oom(L);
        }
        int32_t in = hf_map_get(&m->vocab, cat.p, cat.n);
        if (ia < 0 || ib < 0 || in < 0) {
            hf_buf_free(&cat);
            common_err_set(L->e, COMMON_USAGE,
                           "%s: model.merges[%zu]: a token is not in the vocabulary", L->name, r);
            return -1;
        }
        hf_bpe_add_merge(m, ia, ib, (int32_t)r, in);
    }
    hf_buf_free(&cat);
    return 0;
}

static int load_unigram(hf_load_t *L, json_t *mo) {
    hf_model_t *m = &L->t->model;
    json_t *vocab = json_object_get(mo, "vocab"), *unk = json_object_get(mo, "unk_id");
    if (!json_is_array(vocab) || json_array_size(vocab) == 0)
        return fail(L, "model.vocab must be a non-empty array of [piece, score]");
    if (!json_is_integer(unk)) return fail(L, "model Unigram without unk_id is not supported");
    size_t n = json_array_size(vocab);
    if (json_integer_value(unk) < 0 || (size_t)json_integer_value(unk) >= n)
        return fail(L, "model.unk_id is outside the vocabulary");
    m->unk = (int32_t)json_integer_value(unk);
    m->byte_fallback = hf_json_flag(mo, "byte_fallback", 0);
    m->score = malloc(n * sizeof(double));
    if (!m->score) return oom(L);
    m->n_vocab = (int)n;
    double min = 1e300;
    for (size_t i = 0; i < n; i++) {
        json_t *x = json_array_get(vocab, i);
        json_t *p = json_array_get(x, 0), *s = json_array_get(x, 1);
        if (!json_is_string(p) || !json_is_number(s))
            return fail(L, "model.vocab: each entry must be [piece, score]");
        m->score[i] = json_number_value(s);
        if (m->score[i] < min) min = m->score[i];
        if (hf_map_put(&m->vocab, json_string_value(p), json_string_length(p), (int32_t)i) != 0)
            return oom(L);
    }
    note_id(L, (int64_t)n - 1);
    m->unk_score = min - 10.0; /* K_UNK_PENALTY */
    byte_ids(m);
    return hf_unigram_prepare(m) == 0 ? 0 : oom(L);
}

static int load_model(hf_load_t *L, json_t *mo) {
    hf_model_t *m = &L->t->model;
    const char *ty = json_string_value(json_object_get(mo, "type"));
    if (!ty) return fail(L, "\"model\" must be an object with a \"type\"");
    if (strcmp(ty, "WordPiece") == 0) {
        m->kind = HM_WORDPIECE;
        if (load_vocab_object(L, json_object_get(mo, "vocab")) != 0) return -1;
        json_t *p = json_object_get(mo, "continuing_subword_prefix");
        m->prefix = p ? hf_json_strdup(p, &m->prefixn) : strdup("##");
        if (!p) m->prefixn = 2;
        json_t *mc = json_object_get(mo, "max_input_chars_per_word");
        m->max_chars = json_is_integer(mc) ? (int)json_integer_value(mc) : 100;
        m->unk = token_id(L, json_object_get(mo, "unk_token"));
        if (!m->prefix) return fail(L, "model.continuing_subword_prefix must be a string");
        if (m->unk < 0) return fail(L, "model.unk_token is not in the vocabulary");
        return 0;
    }
    if (strcmp(ty, "BPE") == 0) {
        m->kind = HM_BPE;
        return load_bpe(L, mo);
    }
    if (strcmp(ty, "Unigram") == 0) {
        m->kind = HM_UNIGRAM;
        return load_unigram(L, mo);
    }
    common_err_set(L->e, COMMON_USAGE, "%s: model \"%s\" is not supported", L->name, ty);
    return -1;
}

static int load_added(hf_load_t *L, json_t *list) {
    hf_tok_t *t = L->t;
    size_t n = json_array_size(list);
    t->added = calloc(n ? n : 1, sizeof(*t->added));
    if (!t->added) return oom(L);
    for (size_t i = 0; i < n; i++) {
        json_t *o = json_array_get(list, i);
        json_t *id = json_object_get(o, "id");
        hf_added_t *a = &t->added[t->n_added];
        a->s = hf_json_strdup(json_object_get(o, "content"), &a->n);
        if (!a->s || !json_is_integer(id) || json_integer_value(id) < 0 ||
            json_integer_value(id) > 0x7FFFFFFF) {
            free(a->s);
            return fail(L, "added_tokens: each needs \"id\" and \"content\"");
        }
        t->n_added++;
        a->id = (int32_t)json_integer_value(id);
        note_id(L, a->id);
        a->single_word = (uint8_t)hf_json_flag(o, "single_word", 0);
        a->lstrip = (uint8_t)hf_json_flag(o, "lstrip", 0);
        a->rstrip = (uint8_t)hf_json_flag(o, "rstrip", 0);
        a->normalized = (uint8_t)hf_json_flag(o, "normalized", !hf_json_flag(o, "special", 0));
    }
    return 0;
}

/* A normalized added token is matched in its normalized form (tokenizers caches it). */
static int normalize_added(hf_load_t *L) {
    hf_tok_t *t = L->t;
    hf_buf_t a = {0}, b = {0};
    for (int i = 0; i < t->n_added; i++) {
        hf_added_t *x = &t->added[i];
        if (!x->normalized || t->n_norm == 0) continue;
        const char *s = x->s;
        size_t n = x->n;
        hf_buf_t *o = &a, *other = &b;
        for (int k = 0; k < t->n_norm; k++) {
            if (hf_norm_apply(&t->norm[k], s, n, o) != 0) goto oom;
            s = o->p;
            n = o->n;
            hf_buf_t *z = o;
            o = other;
            other = z;
        }
        char *c = malloc(n + 1);
        if (!c) goto oom;
        memcpy(c, s, n);
        c[n] = 0;
        free(x->s);
        x->s = c;
        x->n = n;
    }
    for (int i = 0; i < t->n_added; i++)
        if (t->added[i].n) t->added_first[t->added[i].normalized][(uint8_t)t->added[i].s[0]] = 1;
    hf_buf_free(&a);
    hf_buf_free(&b);
    return 0;
oom:
    hf_buf_free(&a);
    hf_buf_free(&b);
    return oom(L);
}

/* The post-processor's ids count in vocab_size: config.json's must cover them. */
static int push_id(hf_load_t *L, int32_t **v, int *n, int32_t id) {
    note_id(L, id);
    int32_t *x = realloc(*v, sizeof(int32_t) * (size_t)(*n + 1));
    if (!x) return -1;
    x[(*n)++] = id;
    *v = x;
    return 0;
}

static int pair_id(hf_load_t *L, json_t *pair, int32_t *id) {
    json_t *v = json_array_get(pair, 1);
    if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) > 0x7FFFFFFF)
        return fail(L, "post_processor: cls and sep must be [token, id]");
    *id = (int32_t)json_integer_value(v);
    return 0;
}

static int load_post(hf_load_t *L, json_t *o) {
    hf_tok_t *t = L->t;
    if (!o || json_is_null(o)) return 0;
    const char *ty = json_string_value(json_object_get(o, "type"));
    if (!ty) return fail(L, "post_processor without \"type\"");
    if (strcmp(ty, "Sequence") == 0) {
        size_t i;
        json_t *x;
        json_array_foreach(json_object_get(o, "processors"), i, x) if (load_post(L, x)) return -1;
        return 0;
    }
    if (strcmp(ty, "ByteLevel") == 0) return 0; /* offsets only */
    if (t->n_prefix || t->n_suffix) return fail(L, "post_processor: two add special tokens");
    if (strcmp(ty, "BertProcessing") == 0 || strcmp(ty, "RobertaProcessing") == 0) {
        int32_t cls, sep;
        if (pair_id(L, json_object_get(o, "cls"), &cls) ||
            pair_id(L, json_object_get(o, "sep"), &sep))
            return -1;
        if (push_id(L, &t->prefix, &t->n_prefix, cls) || push_id(L, &t->suffix, &t->n_suffix, sep))
            return oom(L);
        return 0;
    }
    if (strcmp(ty, "TemplateProcessing") == 0) {
        json_t *single = json_object_get(o, "single"), *sp = json_object_get(o, "special_tokens");
        int seen_a = 0;
        size_t i;
        json_t *x;
        if (!json_is_array(single)) return fail(L, "post_processor: template \"single\" missing");
        json_array_foreach(single, i, x) {
            json_t *seq = json_object_get(x, "Sequence"), *st = json_object_get(x, "SpecialToken");
            if (seq) {
                const char *which = json_string_value(json_object_get(seq, "id"));
                if (seen_a || !which || strcmp(which, "A") != 0)
                    return fail(L, "post_processor: a single template must hold $A once");
                seen_a = 1;
                continue;
            }
            const char *name = json_string_value(json_object_get(st, "id"));
            json_t *ids = json_object_get(json_object_get(sp, name ? name : ""), "ids");
            if (!name || !json_is_array(ids))
                return fail(L, "post_processor: a template special token is not in special_tokens");
            size_t k;
            json_t *idv;
            json_array_foreach(ids, k, idv) {
                if (!json_is_integer(idv) || json_integer_value(idv) < 0 ||
                    json_integer_value(idv) > 0x7FFFFFFF)
                    return fail(L, "post_processor: ids must be non-negative integers");
                int32_t id = (int32_t)json_integer_value(idv);
                if (seen_a ? push_id(L, &t->suffix, &t->n_suffix, id)
                           : push_id(L, &t->prefix, &t->n_prefix, id))
                    return oom(L);
            }
        }
        if (!seen_a) return fail(L, "post_processor: a single template must hold $A once");
        return 0;
    }
    common_err_set(L->e, COMMON_USAGE, "%s: post_processor \"%s\" is not supported", L->name, ty);
    return -1;
}

static int load_truncation(hf_load_t *L, json_t *o) {
    if (!o || json_is_null(o)) return 0;
    const char *dir = json_string_value(json_object_get(o, "direction"));
    json_t *stride = json_object_get(o, "stride"), *max = json_object_get(o, "max_length");
    if (dir && strcmp(dir, "Right") != 0) return fail(L, "truncation to the left is not supported");
    if (json_integer_value(stride) != 0)
        return fail(L, "truncation with a stride is not supported");
    if (!json_is_integer(max) || json_integer_value(max) <= 0)
        return fail(L, "truncation.max_length must be a positive integer");
    L->t->max_len = (int)json_integer_value(max);
    return 0;
}

/* Metaspace's "first" asks whether a piece starts at offset 0 of the original text; pieces are
 * tracked exactly only as the added tokens cut them, so a pre-tokenizer splitting before it, or
 * a normalizer that can insert or drop characters at a normalized piece's start, is refused. */
static int check_first(hf_load_t *L) {
    const hf_tok_t *t = L->t;
    int norm_added = 0, shifting = 0;
    for (int i = 0; i < t->n_added; i++)
        norm_added |= t->added[i].normalized;
    for (int i = 0; i < t->n_norm; i++)
        shifting |= t->norm[i].kind != HN_NFC && t->norm[i].kind != HN_NFD &&
                    t->norm[i].kind != HN_NFKC && t->norm[i].kind != HN_NFKD &&
                    t->norm[i].kind != HN_LOWER;
    for (int i = 0; i < t->n_pre; i++) {
        if (t->pre[i].kind != HP_METASPACE || t->pre[i].prepend != HM_FIRST) continue;
        if (i > 0)
            return fail(L, "pre_tokenizer Metaspace with prepend_scheme \"first\" after another "
                           "pre-tokenizer is not supported");
        if (norm_added && shifting)
            return fail(L, "pre_tokenizer Metaspace with prepend_scheme \"first\", normalized "
                           "added tokens and this normalizer is not supported");
    }
    return 0;
}

static common_status_t from_root(json_t *root, const char *name, hf_tok_t **out, common_err_t *e) {
    hf_tok_t *t = calloc(1, sizeof(*t));
    hf_load_t L = {t, name, e};
    int rc = -1;
    if (!t) {
        oom(&L);
        goto out;
    }
    if (!json_is_object(root)) {
        fail(&L, "not a tokenizer.json object");
        goto out;
    }
    if (load_model(&L, json_object_get(root, "model")) ||
        load_added(&L, json_object_get(root, "added_tokens")) ||
        hf_load_normalizer(&L, json_object_get(root, "normalizer")) ||
        hf_load_pretokenizer(&L, json_object_get(root, "pre_tokenizer")) ||
        load_post(&L, json_object_get(root, "post_processor")) ||
        load_truncation(&L, json_object_get(root, "truncation")) || normalize_added(&L) ||
        check_first(&L))
        goto out;
    rc = 0;
out:
    json_decref(root);
    if (rc != 0) {
        hf_tok_free(t);
        return e->code;
    }
    *out = t;
    return COMMON_OK;
}

common_status_t hf_tok_load_json(const char *text, size_t len, const char *name, hf_tok_t **out,
                                 common_err_t *e) {
    *out = NULL;
    json_error_t jerr;
    json_t *root = json_loadb(text, len, 0, &jerr);
    if (!root)
        return common_err_set(e, COMMON_USAGE, "%s: invalid JSON at line %d: %s", name, jerr.line,
                              jerr.text);
    return from_root(root, name, out, e);
}

common_status_t hf_tok_load_file(const char *path, hf_tok_t **out, common_err_t *e) {
    *out = NULL;
    json_error_t jerr;
    json_t *root = json_load_file(path, 0, &jerr);
    if (!root)
        return common_err_set(e, COMMON_USAGE, "%s: invalid JSON at line %d: %s", path, jerr.line,
                              jerr.text);
    return from_root(root, path, out, e);
}

void hf_tok_free(hf_tok_t *t) {
    if (!t) return;
    for (int i = 0; i < t->n_norm; i++)
        hf_norm_free(&t->norm[i]);
    free(t->norm);
    for (int i = 0; i < t->n_pre; i++)
        hf_pretok_free(&t->pre[i]);
    free(t->pre);
    hf_model_free(&t->model);
    for (int i = 0; i < t->n_added; i++)
        free(t->added[i].s);
    free(t->added);
    free(t->prefix);
    free(t->suffix);
    free(t);
}
