/* tokenizers' normalizers on UTF-8 text (valid: hf_tok_encode sanitizes its input first).
 * Each writes its result into out (cleared first). */
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

#include "worker/text/hf/hf.h"
#include "worker/text/tokenizer_unicode.h"

static inline int dec(const char *s, size_t len, size_t i, uint32_t *c) {
    return tok_utf8_decode((const uint8_t *)s + i, len - i, c);
}

static inline int put_cp(hf_buf_t *o, uint32_t c) {
    char u[4];
    return hf_buf_put(o, u, (size_t)tok_utf8_encode(c, u));
}

/* Per-character lower case as Rust's char::to_lowercase (U+0130 alone becomes two). */
static int put_lower(hf_buf_t *o, uint32_t c) {
    if (c == 0x130) return put_cp(o, 'i') || put_cp(o, 0x307);
    return put_cp(o, c < 0x80 ? (c >= 'A' && c <= 'Z' ? c + 32 : c) : tok_uc_lower(c));
}

static int is_mark(uint32_t c) {
    utf8proc_category_t k = utf8proc_category((utf8proc_int32_t)c);
    return k == UTF8PROC_CATEGORY_MN || k == UTF8PROC_CATEGORY_MC || k == UTF8PROC_CATEGORY_ME;
}

/* BertNormalizer: clean_text, handle_chinese_chars, strip_accents (NFD, then drop Mn),
 * lowercase, in that order. */
static int bert(const hf_norm_t *nm, const char *s, size_t len, hf_buf_t *out) {
    uint32_t *cp = malloc((2 * len + 8) * sizeof(uint32_t));
    if (!cp) return -1;
    size_t n = 0;
    for (size_t i = 0; i < len;) {
        uint32_t c;
        i += dec(s, len, i, &c);
        int k = tok_uc_clean_class(c);
        if (nm->clean && k == TOK_CP_DROP) continue;
        if (nm->clean && k == TOK_CP_SPACE) c = ' ';
        if (nm->cjk && k == TOK_CP_CJK) {
            cp[n++] = ' ';
            cp[n++] = c;
            cp[n++] = ' ';
        } else {
            cp[n++] = c;
        }
    }
    int rc = 0;
    out->n = 0;
    if (nm->strip) { /* NFD with canonical ordering */
        uint32_t *d2 = malloc((TOK_UC_MAX_DECOMP * n + 8) * sizeof(uint32_t));
        if (!d2) {
            free(cp);
            return -1;
        }
        size_t m = 0;
        for (size_t i = 0; i < n; i++) {
            uint32_t d[TOK_UC_MAX_DECOMP];
            int nd = cp[i] < 0x80 ? (d[0] = cp[i], 1) : tok_uc_decompose(cp[i], d);
            for (int k = 0; k < nd; k++)
                m = tok_uc_push_ordered(d2, m, d[k]);
        }
        free(cp);
        cp = d2;
        n = m;
    }
    for (size_t i = 0; i < n && rc == 0; i++) {
        uint32_t c = cp[i];
        if (nm->strip && c >= 0x80 && tok_uc_is_mn(c)) continue;
        rc = nm->lower ? put_lower(out, c) : put_cp(out, c);
    }
    free(cp);
    return rc;
}

static int unicode_form(int kind, const char *s, size_t len, hf_buf_t *out) {
    int opt = UTF8PROC_STABLE;
    if (kind == HN_NFC || kind == HN_NFKC)
        opt |= UTF8PROC_COMPOSE;
    else
        opt |= UTF8PROC_DECOMPOSE;
    if (kind == HN_NFKC || kind == HN_NFKD) opt |= UTF8PROC_COMPAT;
    out->n = 0;
    if (len == 0) return 0;
    utf8proc_uint8_t *r = NULL;
    utf8proc_ssize_t n = utf8proc_map((const utf8proc_uint8_t *)s, (utf8proc_ssize_t)len, &r,
                                      (utf8proc_option_t)opt);
    if (n < 0) return -1;
    int rc = hf_buf_put(out, r, (size_t)n);
    free(r);
    return rc;
}

/* Replace: every leftmost, non-overlapping match of the pattern, left to right. */
static int replace(const hf_norm_t *nm, const char *s, size_t len, hf_buf_t *out) {
    out->n = 0;
    size_t i = 0, pn = nm->patn;
    while (i < len) {
        if (pn && len - i >= pn && memcmp(s + i, nm->pat, pn) == 0) {
            size_t j = i + pn;
            int reps = 1;
            if (nm->rep_min)
                while (len - j >= pn && memcmp(s + j, nm->pat, pn) == 0)
                    j += pn, reps++;
            if (reps >= (nm->rep_min ? nm->rep_min : 1)) {
                if (hf_buf_put(out, nm->content, nm->contentn) != 0) return -1;
                i = j;
                continue;
            }
            if (hf_buf_put(out, s + i, j - i) != 0) return -1; /* too short a run */
            i = j;
            continue;
        }
        if (hf_buf_put(out, s + i, 1) != 0) return -1;
        i++;
    }
    return 0;
}

static int strip(const hf_norm_t *nm, const char *s, size_t len, hf_buf_t *out) {
    size_t a = 0, b = len;
    while (nm->left && a < b) {
        uint32_t c;
        int k = dec(s, len, a, &c);
        if (!tok_uc_is_white_space(c)) break;
        a += (size_t)k;
    }
    while (nm->right && b > a) {
        size_t p = b - 1;
        while (p > a && ((uint8_t)s[p] & 0xC0) == 0x80)
            p--;
        uint32_t c;
        dec(s, b, p, &c);
        if (!tok_uc_is_white_space(c)) break;
        b = p;
    }
    out->n = 0;
    return hf_buf_put(out, s + a, b - a);
}

int hf_norm_apply(const hf_norm_t *nm, const char *s, size_t len, hf_buf_t *out) {
    out->n = 0;
    switch (nm->kind) {
    case HN_BERT:
        return bert(nm, s, len, out);
    case HN_LOWER:
        for (size_t i = 0; i < len;) {
            uint32_t c;
            i += dec(s, len, i, &c);
            if (put_lower(out, c) != 0) return -1;
        }
        return 0;
    case HN_NFC:
    case HN_NFD:
    case HN_NFKC:
    case HN_NFKD:
        return unicode_form(nm->kind, s, len, out);
    case HN_STRIP_ACCENTS:
        for (size_t i = 0; i < len;) {
            uint32_t c;
            int k = dec(s, len, i, &c);
            if (!is_mark(c) && hf_buf_put(out, s + i, (size_t)k) != 0) return -1;
            i += (size_t)k;
        }
        return 0;
    case HN_REPLACE:
        return replace(nm, s, len, out);
    case HN_STRIP:
        return strip(nm, s, len, out);
    case HN_PREPEND:
        if (len && hf_buf_put(out, nm->content, nm->contentn) != 0) return -1;
        return hf_buf_put(out, s, len);
    case HN_PRECOMPILED:
        return hf_precompiled_apply(nm->pc, s, len, out);
    }
    return -1;
}

void hf_norm_free(hf_norm_t *nm) {
    free(nm->pat);
    free(nm->content);
    hf_precompiled_free(nm->pc);
}
