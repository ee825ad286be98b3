/* Per-code-point Unicode properties as Hugging Face's BERT normalizer and pre-tokenizer see
 * them (tokenizers 0.23). utf8proc supplies the tables; where HF's own (older or different)
 * tables disagree, tokenizer_unicode.c carries the exceptions. Internal to the tokenizer. */
#ifndef RECLASS_WORKER_TOKENIZER_UNICODE_H
#define RECLASS_WORKER_TOKENIZER_UNICODE_H

#include <stddef.h>
#include <stdint.h>

/* Longest canonical (NFD) decomposition of one code point, with headroom. */
#define TOK_UC_MAX_DECOMP 8

/* What the "clean text" and CJK steps do with a code point. */
enum { TOK_CP_KEEP = 0, TOK_CP_DROP = 1, TOK_CP_SPACE = 2, TOK_CP_CJK = 3 };

int tok_uc_clean_class(uint32_t cp);
/* Writes the full canonical decomposition of cp (cp itself when it has none); returns the
 * count. The caller applies canonical ordering across code points. */
int tok_uc_decompose(uint32_t cp, uint32_t out[TOK_UC_MAX_DECOMP]);
int tok_uc_ccc(uint32_t cp);
/* Nonspacing mark (Mn): dropped when stripping accents. */
int tok_uc_is_mn(uint32_t cp);
uint32_t tok_uc_lower(uint32_t cp);
/* Splitting classes of the pre-tokenizer. */
int tok_uc_is_ws(uint32_t cp);
/* Unicode White_Space, what Rust's char::is_whitespace and regex \s test (tokenizers' Strip,
 * WhitespaceSplit, added tokens' lstrip/rstrip, ByteLevel's regex). */
static inline int tok_uc_is_white_space(uint32_t c) {
    return (c >= 0x9 && c <= 0xD) || c == 0x20 || c == 0x85 || c == 0xA0 || c == 0x1680 ||
           (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F ||
           c == 0x205F || c == 0x3000;
}
int tok_uc_is_punct(uint32_t cp);

/* Strict UTF-8 decoding of one code point at s (n bytes left, n >= 1). Returns the bytes
 * consumed; *cp = 0xFFFD for an invalid byte, which then consumes only that byte, so a valid
 * character after it is never swallowed (Python's errors="replace" keeps it as well). */
static inline int tok_utf8_decode(const uint8_t *s, size_t n, uint32_t *cp) {
    uint8_t b = s[0];
    if (b < 0x80) {
        *cp = b;
        return 1;
    }
    if (b >= 0xC2 && b <= 0xDF && n >= 2 && (s[1] & 0xC0) == 0x80) {
        *cp = ((uint32_t)(b & 0x1F) << 6) | (s[1] & 0x3F);
        return 2;
    }
    if (b >= 0xE0 && b <= 0xEF && n >= 3 && (s[1] & 0xC0) == 0x80 && (s[2] & 0xC0) == 0x80) {
        uint32_t c = ((uint32_t)(b & 0x0F) << 12) | ((uint32_t)(s[1] & 0x3F) << 6) | (s[2] & 0x3F);
        if (c >= 0x800 && (c < 0xD800 || c > 0xDFFF)) {
            *cp = c;
            return 3;
        }
    }
    if (b >= 0xF0 && b <= 0xF4 && n >= 4 && (s[1] & 0xC0) == 0x80 && (s[2] & 0xC0) == 0x80 &&
        (s[3] & 0xC0) == 0x80) {
        uint32_t c = ((uint32_t)(b & 0x07) << 18) | ((uint32_t)(s[1] & 0x3F) << 12) |
                     ((uint32_t)(s[2] & 0x3F) << 6) | (s[3] & 0x3F);
        if (c >= 0x10000 && c <= 0x10FFFF) {
            *cp = c;
            return 4;
        }
    }
    *cp = 0xFFFD;
    return 1;
}

static inline int tok_utf8_encode(uint32_t c, char *o) {
    if (c < 0x80) {
        o[0] = (char)c;
        return 1;
    }
    if (c < 0x800) {
        o[0] = (char)(0xC0 | (c >> 6));
        o[1] = (char)(0x80 | (c & 0x3F));
        return 2;
    }
    if (c < 0x10000) {
        o[0] = (char)(0xE0 | (c >> 12));
        o[1] = (char)(0x80 | ((c >> 6) & 0x3F));
        o[2] = (char)(0x80 | (c & 0x3F));
        return 3;
    }
    o[0] = (char)(0xF0 | (c >> 18));
    o[1] = (char)(0x80 | ((c >> 12) & 0x3F));
    o[2] = (char)(0x80 | ((c >> 6) & 0x3F));
    o[3] = (char)(0x80 | (c & 0x3F));
    return 4;
}

/* Appends a code point that the NFD step produced, keeping each run of non-starters sorted
 * by combining class (the canonical ordering; stable, so equal classes keep their order). */
static inline size_t tok_uc_push_ordered(uint32_t *cp, size_t n, uint32_t c) {
    int ccc = tok_uc_ccc(c);
    size_t j = n;
    if (ccc)
        while (j > 0 && tok_uc_ccc(cp[j - 1]) > ccc) {
            cp[j] = cp[j - 1];
            j--;
        }
    cp[j] = c;
    return n + 1;
}

#endif
