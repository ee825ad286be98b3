/* The Precompiled normalizer: SentencePiece's normalization rules (e.g. nmt_nfkc) compiled
 * into a double-array trie over UTF-8 keys plus a blob of NUL-terminated replacements, as
 * the spm_precompiled crate reads and applies them. The text goes by extended grapheme
 * clusters: a cluster under 6 bytes is looked up whole, otherwise (or when that misses) each
 * character alone; a lookup takes the trie's shortest matching prefix and replaces the whole
 * key with it, exactly as tokenizers does. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

#include "common/err.h"
#include "worker/text/hf/hf.h"
#include "worker/text/tokenizer_unicode.h"

struct hf_precompiled {
    uint32_t *unit; /* (n_unit) the double array */
    size_t n_unit;
    char *norm; /* (n_norm + 1) replacements, NUL-terminated each */
    size_t n_norm;
};

static inline int has_leaf(uint32_t u) {
    return (u >> 8) & 1;
}
static inline uint32_t value(uint32_t u) {
    return u & ((1u << 31) - 1);
}
static inline uint32_t label(uint32_t u) {
    return u & ((1u << 31) | 0xFF);
}
static inline uint32_t offset(uint32_t u) {
    return (u >> 10) << ((u & (1u << 9)) >> 6);
}

hf_precompiled_t *hf_precompiled_new(const uint8_t *blob, size_t n, const char *name,
                                     common_err_t *e) {
    if (n < 4) goto bad;
    uint32_t trie_size = (uint32_t)blob[0] | (uint32_t)blob[1] << 8 | (uint32_t)blob[2] << 16 |
                         (uint32_t)blob[3] << 24;
    if (trie_size % 4 || trie_size > n - 4 || trie_size == 0) goto bad;
    hf_precompiled_t *pc = calloc(1, sizeof(*pc));
    if (!pc) goto oom;
    pc->n_unit = trie_size / 4;
    pc->unit = malloc(trie_size);
    pc->n_norm = n - 4 - trie_size;
    pc->norm = malloc(pc->n_norm + 1);
    if (!pc->unit || !pc->norm) {
        hf_precompiled_free(pc);
        goto oom;
    }
    for (size_t i = 0; i < pc->n_unit; i++) {
        const uint8_t *p = blob + 4 + 4 * i;
        pc->unit[i] =
            (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
    }
    memcpy(pc->norm, blob + 4 + trie_size, pc->n_norm);
    pc->norm[pc->n_norm] = 0;
    return pc;
bad:
    common_err_set(
        e, COMMON_USAGE,
        "%s: normalizer Precompiled: precompiled_charsmap is not a SentencePiece charsmap", name);
    return NULL;
oom:
    common_err_set(e, COMMON_FATAL, "out of memory");
    return NULL;
}

void hf_precompiled_free(hf_precompiled_t *pc) {
    if (!pc) return;
    free(pc->unit);
    free(pc->norm);
    free(pc);
}

/* The replacement for the shortest key that prefixes s[0..n), or NULL. An index outside the
 * array (a malformed charsmap) is a miss. */
static const char *transform(const hf_precompiled_t *pc, const char *s, size_t n, size_t *outn) {
    size_t pos = 0;
    uint32_t u = pc->unit[0];
    pos ^= offset(u);
    for (size_t i = 0; i < n; i++) {
        uint8_t c = (uint8_t)s[i];
        if (c == 0) break;
        pos ^= c;
        if (pos >= pc->n_unit) return NULL;
        u = pc->unit[pos];
        if (label(u) != c) return NULL;
        pos ^= offset(u);
        if (has_leaf(u)) {
            if (pos >= pc->n_unit) return NULL;
            size_t at = value(pc->unit[pos]);
            if (at >= pc->n_norm) return NULL;
            *outn = strlen(pc->norm + at);
            return pc->norm + at;
        }
    }
    return NULL;
}

int hf_precompiled_apply(const hf_precompiled_t *pc, const char *s, size_t len, hf_buf_t *out) {
    out->n = 0;
    size_t i = 0;
    utf8proc_int32_t state = 0;
    while (i < len) {
        /* One extended grapheme cluster [i, j). */
        uint32_t c, prev;
        size_t j = i + (size_t)tok_utf8_decode((const uint8_t *)s + i, len - i, &prev);
        state = 0;
        while (j < len) {
            int k = tok_utf8_decode((const uint8_t *)s + j, len - j, &c);
            if (utf8proc_grapheme_break_stateful((utf8proc_int32_t)prev, (utf8proc_int32_t)c,
                                                 &state))
                break;
            prev = c;
            j += (size_t)k;
        }
        size_t rn;
        const char *r = j - i < 6 ? transform(pc, s + i, j - i, &rn) : NULL;
        if (r) {
            if (hf_buf_put(out, r, rn) != 0) return -1;
        } else {
            for (size_t p = i; p < j;) {
                int k = tok_utf8_decode((const uint8_t *)s + p, j - p, &c);
                r = transform(pc, s + p, (size_t)k, &rn);
                if (hf_buf_put(out, r ? r : s + p, r ? rn : (size_t)k) != 0) return -1;
                p += (size_t)k;
            }
        }
        i = j;
    }
    return 0;
}
