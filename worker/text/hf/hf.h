/* Hugging Face tokenizer.json tokenizers (the `tokenizers` 0.23 pipeline), internal to
 * worker/text: added tokens split off the raw text, normalizers, pre-tokenizers, one model
 * (WordPiece, BPE, Unigram), post-processor. Files by concern: hf_load.c and
 * hf_load_parts.c (tokenizer.json -> hf_tok_t), hf_norm.c (normalizers), hf_precompiled.c
 * (the Precompiled charsmap), hf_pretok.c (pre-tokenizers), hf_models.c (WordPiece, BPE,
 * Unigram), hf_encode.c (the pipeline, added tokens, truncation and special tokens),
 * hf_util.c (byte strings, piece lists, the string table). */
#ifndef RECLASS_WORKER_TEXT_HF_H
#define RECLASS_WORKER_TEXT_HF_H

#include <stddef.h>
#include <stdint.h>

#include "common/err.h"
#include "worker/text/ids.h"

/* A growable byte string. */
typedef struct {
    char *p;
    size_t n, cap;
} hf_buf_t;
int hf_buf_reserve(hf_buf_t *b, size_t need);
int hf_buf_put(hf_buf_t *b, const void *s, size_t n);
void hf_buf_free(hf_buf_t *b);

/* A piece of text: bytes [off, off + len) of a buffer; first: the piece begins the text (what
 * Metaspace's prepend_scheme "first" asks). */
typedef struct {
    uint32_t off, len;
    uint8_t first;
} hf_span_t;

typedef struct {
    hf_buf_t b;
    hf_span_t *s;
    size_t n, cap;
} hf_pieces_t;
int hf_pieces_add(hf_pieces_t *p, uint32_t off, uint32_t len, int first);
void hf_pieces_free(hf_pieces_t *p);

/* String -> value table (open addressing, keys copied into a pool). */
typedef struct {
    uint32_t hash, off, len;
    int32_t val; /* -1: the key is only a prefix (hf_unigram.c) */
    int32_t aux; /* per user: 1 = a proper prefix of some key (hf_unigram.c) */
} hf_map_slot_t;
typedef struct {
    hf_map_slot_t *slot;
    uint32_t mask, used;
    hf_buf_t pool;
} hf_map_t;
/* Later puts of the same key overwrite val (as a hash map filled in file order). */
int hf_map_put(hf_map_t *m, const char *k, size_t n, int32_t val);
hf_map_slot_t *hf_map_slot(hf_map_t *m, const char *k, size_t n, int create);
int32_t hf_map_get(const hf_map_t *m, const char *k, size_t n);
const hf_map_slot_t *hf_map_find(const hf_map_t *m, const char *k, size_t n);
void hf_map_free(hf_map_t *m);

/* Normalizers. A Sequence is flattened into the tokenizer's list. */
enum {
    HN_BERT,
    HN_LOWER,
    HN_NFC,
    HN_NFD,
    HN_NFKC,
    HN_NFKD,
    HN_STRIP_ACCENTS,
    HN_REPLACE,
    HN_STRIP,
    HN_PREPEND,
    HN_PRECOMPILED
};
typedef struct hf_precompiled hf_precompiled_t;
typedef struct {
    int kind;
    int clean, cjk, strip, lower; /* HN_BERT */
    int left, right;              /* HN_STRIP */
    char *pat;                    /* HN_REPLACE: the literal, or the character a regex repeats */
    size_t patn;
    int rep_min;   /* HN_REPLACE: 0 = literal; n = regex "<char>{n,}" ("+" is 1) */
    char *content; /* HN_REPLACE, HN_PREPEND */
    size_t contentn;
    hf_precompiled_t *pc;
} hf_norm_t;
int hf_norm_apply(const hf_norm_t *n, const char *s, size_t len, hf_buf_t *out);
void hf_norm_free(hf_norm_t *n);

/* NULL with e set: not a charsmap COMMON_USAGE (name stands for the file in its message), no
 * memory COMMON_FATAL. */
hf_precompiled_t *hf_precompiled_new(const uint8_t *blob, size_t n, const char *name,
                                     common_err_t *e);
int hf_precompiled_apply(const hf_precompiled_t *pc, const char *s, size_t len, hf_buf_t *out);
void hf_precompiled_free(hf_precompiled_t *pc);

/* Pre-tokenizers; a Sequence is flattened. Split behaviours as tokenizers names them. */
enum { HB_REMOVED, HB_ISOLATED, HB_MERGED_PREV, HB_MERGED_NEXT, HB_CONTIGUOUS };
enum {
    HP_BERT,
    HP_BYTELEVEL,
    HP_METASPACE,
    HP_WHITESPACE,
    HP_WSSPLIT,
    HP_SPLIT,
    HP_PUNCT,
    HP_DIGITS
};
enum { HM_ALWAYS, HM_FIRST, HM_NEVER };
typedef struct {
    int kind;
    int prefix_space, use_regex; /* HP_BYTELEVEL */
    char repl[8];                /* HP_METASPACE: the replacement character's UTF-8 */
    int repl_n, prepend, split;
    int behavior, invert; /* HP_SPLIT, HP_PUNCT */
    char *pat;            /* HP_SPLIT: a literal string */
    size_t patn;
    int individual; /* HP_DIGITS */
} hf_pretok_t;
/* Regex \w (Unicode): added tokens' single_word, the Whitespace pre-tokenizer. */
int hf_is_word(uint32_t c);
/* in (its buffer and spans) -> out (cleared first). */
int hf_pretok_apply(const hf_pretok_t *p, const hf_pieces_t *in, hf_pieces_t *out);
void hf_pretok_free(hf_pretok_t *p);

/* Models. */
enum { HM_WORDPIECE, HM_BPE, HM_UNIGRAM };
typedef struct {
    int kind;
    hf_map_t vocab;
    int32_t unk; /* -1: none */
    /* WordPiece */
    char *prefix;
    size_t prefixn;
    int max_chars;
    /* BPE: (left id, right id) -> rank, merged id */
    uint64_t *mkey; /* (mmask + 1) keys, UINT64_MAX empty */
    int32_t *mrank, *mnew;
    uint32_t mmask;
    int fuse_unk, byte_fallback, ignore_merges;
    int32_t byte_id[256]; /* "<0xXX>" ids for byte fallback, -1 when absent */
    /* Unigram */
    double *score; /* (n_vocab) */
    int n_vocab;
    double unk_score;
    int max_key;
} hf_model_t;
int hf_wordpiece_encode(const hf_model_t *m, const char *w, size_t n, worker_ids_t *out);
int hf_bpe_encode(const hf_model_t *m, const char *w, size_t n, worker_ids_t *out);
int hf_unigram_encode(const hf_model_t *m, const char *w, size_t n, worker_ids_t *out);
/* Unigram: marks the prefixes of every piece so that the lattice stops early. */
int hf_unigram_prepare(hf_model_t *m);
int hf_bpe_add_merge(hf_model_t *m, int32_t a, int32_t b, int32_t rank, int32_t id);
void hf_model_free(hf_model_t *m);

typedef struct {
    char *s;
    size_t n; /* content (normalized form for a normalized token) */
    int32_t id;
    uint8_t single_word, lstrip, rstrip, normalized;
} hf_added_t;

typedef struct hf_tok {
    hf_norm_t *norm;
    int n_norm;
    hf_pretok_t *pre;
    int n_pre;
    hf_model_t model;
    hf_added_t *added;
    int n_added;
    uint8_t added_first[2][256]; /* [normalized][byte]: some added token starts with it */
    int32_t *prefix, *suffix;    /* the post-processor's ids around the sequence */
    int n_prefix, n_suffix;
    int vocab_size; /* the highest id (model or added token) + 1 */
    int max_len;    /* the file's truncation.max_length; 0: none */
} hf_tok_t;

/* A tokenizer.json's text (len bytes; name stands for the file in e's message) -> *out. Every
 * feature the file asks for and this code lacks is a COMMON_USAGE error naming it; no memory
 * COMMON_FATAL. */
common_status_t hf_tok_load_json(const char *text, size_t len, const char *name, hf_tok_t **out,
                                 common_err_t *e);
common_status_t hf_tok_load_file(const char *path, hf_tok_t **out, common_err_t *e);
int hf_tok_encode(const hf_tok_t *t, const char *text, size_t len, int max_len, worker_ids_t *out);
void hf_tok_free(hf_tok_t *t);

static inline int hf_ids_push(worker_ids_t *ids, int32_t id) {
    if (ids->n >= ids->cap && worker_ids_reserve(ids, (size_t)ids->n + 1) != 0) return -1;
    ids->v[ids->n++] = id;
    return 0;
}

#endif
