/* Internals the tokenizer's files share (worker/text/tokenizer.c the facade,
 * worker/text/wordpiece.c encodes, worker/text/tokenizer_vocab.c loads the vocabulary): the
 * vocabulary's hash table and the special tokens. */
#ifndef RECLASS_WORKER_TOKENIZER_INT_H
#define RECLASS_WORKER_TOKENIZER_INT_H

#include <stdint.h>
#include <string.h>

#include "worker/text/tokenizer.h"

/* Special tokens HF registers as added tokens: matched verbatim in the raw text (before
 * normalization, case-sensitive) and emitted as their own id. */
enum { SP_UNK, SP_SEP, SP_CLS, SP_PAD, SP_MASK, SP_N };
static const char *const sp_names[SP_N] = {"[UNK]", "[SEP]", "[CLS]", "[PAD]", "[MASK]"};
static const int sp_lens[SP_N] = {5, 5, 5, 5, 6};
/* Code points past Unicode stand for a matched special token inside the general path. */
#define SP_SENTINEL 0x110000u

typedef struct {
    uint32_t hash;
    uint32_t off; /* key bytes at pool + off */
    uint16_t len;
    uint8_t cont; /* 1: a "##" continuation piece, key stored without the "##" */
    int32_t id;   /* -1: empty slot */
} tok_slot_t;

struct hf_tok;

struct worker_tok {
    struct hf_tok *hf; /* a tokenizer.json pipeline (worker/text/hf/); NULL: the fields below */
    char *pool;        /* (file bytes) the vocab file, keys point into it */
    tok_slot_t *slots; /* (mask + 1) open addressing, load <= 1/2 */
    uint32_t mask;
    int vocab_size; /* lines in vocab.txt */
    int max_key;    /* longest key in bytes ("##" excluded): bounds the longest-match search */
    int lower, strip, cjk; /* worker_tok_config_t: lower-case, strip accents, space CJK */
    int32_t sp_id[SP_N];   /* -1 when the vocab lacks it */
    int32_t ascii_id[128]; /* single-character words (punctuation), -1 = [UNK] */
};

static inline uint32_t key_hash(int cont, const char *s, int n) {
    uint32_t h = cont ? 0x9747b28cu : 2166136261u; /* FNV-1a, seeded apart per table */
    for (int i = 0; i < n; i++)
        h = (h ^ (uint8_t)s[i]) * 16777619u;
    return h ^ (h >> 15);
}

static inline int32_t tok_lookup(const worker_tok_t *t, int cont, const char *s, int n) {
    uint32_t h = key_hash(cont, s, n);
    for (uint32_t i = h & t->mask;; i = (i + 1) & t->mask) {
        const tok_slot_t *e = &t->slots[i];
        if (e->id < 0) return -1;
        if (e->hash == h && e->len == n && e->cont == cont && memcmp(t->pool + e->off, s, n) == 0)
            return e->id;
    }
}

/* worker_tok_init on a vocab.txt already in memory (pool: len bytes plus a NUL, malloc'ed; the
 * tokenizer owns it from here, on failure too). name stands for the file in e's message. */
common_status_t tok_init_pool(char *pool, size_t len, const char *name,
                              const worker_tok_config_t *opts, worker_tok_t **out, common_err_t *e);

/* BERT WordPiece of a vocab.txt tokenizer: worker_tok_encode_path's vocab.txt half. */
int tok_wordpiece_encode(const worker_tok_t *t, const char *text, size_t len, int max_len,
                         worker_ids_t *out, int force_general);

/* Fills the byte classes of the ASCII path once per process (worker_tok_init calls it). */
void tok_ascii_init(void);

#endif
