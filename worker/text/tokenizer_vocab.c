/* The vocabulary of the tokenizer: vocab.txt read once into a pool, its tokens in an
 * open-addressing table (worker/text/tokenizer_int.h), the special tokens' ids. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/err.h"
#include "common/file.h"
#include "worker/text/hf/hf.h"
#include "worker/text/tokenizer_int.h"

/* Later duplicates win, as in HF's vocab loader (a hash map filled in file order). */
static void tok_insert(worker_tok_t *t, int cont, uint32_t off, int n, int32_t id) {
    const char *s = t->pool + off;
    uint32_t h = key_hash(cont, s, n);
    for (uint32_t i = h & t->mask;; i = (i + 1) & t->mask) {
        tok_slot_t *e = &t->slots[i];
        if (e->id < 0) {
            *e = (tok_slot_t){h, off, (uint16_t)n, (uint8_t)cont, id};
            if (n > t->max_key) t->max_key = n;
            return;
        }
        if (e->hash == h && e->len == n && e->cont == cont && memcmp(t->pool + e->off, s, n) == 0) {
            e->id = id;
            return;
        }
    }
}

common_status_t worker_tok_init(const char *vocab_path, const worker_tok_config_t *opts,
                                worker_tok_t **out, common_err_t *e) {
    *out = NULL;
    if (!vocab_path) /* a checkpoint whose vocabulary is in tokenizer.json alone */
        return common_err_set(e, COMMON_USAGE,
                              "the checkpoint has no vocab.txt (only tokenizer.json), which the "
                              "WordPiece tokenizer needs");
    size_t len = 0;
    char *pool = common_file_read(vocab_path, 0, &len, e);
    if (!pool) return e->code;
    return tok_init_pool(pool, len, vocab_path, opts, out, e);
}

common_status_t tok_init_pool(char *pool, size_t len, const char *vocab_path,
                              const worker_tok_config_t *opts, worker_tok_t **out,
                              common_err_t *e) {
    common_status_t rc;
    static const worker_tok_config_t uncased = {.lower = 1, .strip_accents = 1, .chinese_chars = 1};
    if (!opts) opts = &uncased;
    tok_ascii_init();
    *out = NULL;
    worker_tok_t *t = calloc(1, sizeof(*t));
    if (!t) {
        free(pool);
        return common_err_set(e, COMMON_FATAL, "out of memory");
    }
    t->pool = pool;
    int lines = 0;
    for (size_t i = 0; i < len; i++)
        lines += t->pool[i] == '\n';
    if (len > 0 && t->pool[len - 1] != '\n') lines++;
    if (lines == 0) {
        rc = common_err_set(e, COMMON_USAGE, "%s: empty vocabulary", vocab_path);
        worker_tok_free(t);
        return rc;
    }
    if (opts->vocab_size > 0 && lines > opts->vocab_size) {
        rc = common_err_set(e, COMMON_USAGE, "%s has %d tokens, config.json's vocab_size is %d",
                            vocab_path, lines, opts->vocab_size);
        common_err_detail(e, "the extra ids have no embedding");
        common_err_hint(e, "use the vocab.txt the checkpoint was trained with");
        worker_tok_free(t);
        return rc;
    }
    uint32_t size = 1024;
    while (size < (uint32_t)lines * 2)
        size *= 2;
    t->mask = size - 1;
    t->slots = malloc(sizeof(tok_slot_t) * size);
    if (!t->slots) {
        rc = common_err_set(e, COMMON_FATAL, "out of memory");
        worker_tok_free(t);
        return rc;
    }
    for (uint32_t i = 0; i < size; i++)
        t->slots[i].id = -1;
    t->lower = opts->lower != 0;
    t->strip = opts->strip_accents != 0;
    t->cjk = opts->chinese_chars != 0;
    t->vocab_size = lines;

    size_t pos = 0;
    for (int id = 0; id < lines; id++) {
        size_t end = pos;
        while (end < len && t->pool[end] != '\n')
            end++;
        size_t stop = end; /* HF trims trailing whitespace (and so "\r") off each line */
        while (stop > pos && (t->pool[stop - 1] == ' ' || t->pool[stop - 1] == '\t' ||
                              t->pool[stop - 1] == '\r' || t->pool[stop - 1] == '\v' ||
                              t->pool[stop - 1] == '\f'))
            stop--;
        int n = (int)(stop - pos);
        if (n > 0xFFFF) {
            rc = common_err_set(e, COMMON_USAGE, "%s: line %d is too long for a token", vocab_path,
                                id + 1);
            worker_tok_free(t);
            return rc;
        }
        if (n >= 2 && t->pool[pos] == '#' && t->pool[pos + 1] == '#')
            tok_insert(t, 1, (uint32_t)pos + 2, n - 2, id);
        tok_insert(t, 0, (uint32_t)pos, n, id);
        pos = end + 1;
    }
    for (int s = 0; s < SP_N; s++)
        t->sp_id[s] = tok_lookup(t, 0, sp_names[s], sp_lens[s]);
    for (int s = SP_UNK; s <= SP_CLS; s++)
        if (t->sp_id[s] < 0) {
            rc = common_err_set(e, COMMON_USAGE, "%s: special token %s not found", vocab_path,
                                sp_names[s]);
            worker_tok_free(t);
            return rc;
        }
    for (int b = 0; b < 128; b++) {
        char c = (char)(t->lower && b >= 'A' && b <= 'Z' ? b + 32 : b);
        t->ascii_id[b] = tok_lookup(t, 0, &c, 1);
    }
    *out = t;
    return COMMON_OK;
}

void worker_tok_free(worker_tok_t *tok) {
    if (!tok) return;
    hf_tok_free(tok->hf);
    free(tok->slots);
    free(tok->pool);
    free(tok);
}

int worker_tok_vocab_size(const worker_tok_t *tok) {
    return tok->hf ? tok->hf->vocab_size : tok->vocab_size;
}
