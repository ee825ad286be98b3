/* One text through a tokenizer.json pipeline, as tokenizers' encode(text) does it for a
 * single sequence: added tokens split off the raw text (those with normalized false), each
 * remaining piece normalized, added tokens split off the normalized pieces (normalized true),
 * pre-tokenizers, the model per word; then the post-processor's special tokens, truncation
 * keeping them. Per-thread scratch buffers keep the tokenizer itself immutable. */
#include <stdlib.h>
#include <string.h>

#include "common/tls.h"
#include "worker/text/hf/hf.h"
#include "worker/text/tokenizer_unicode.h"

typedef struct {
    hf_buf_t clean, n1, n2;
    hf_pieces_t p1, p2;
} scratch_t;

static void scratch_release(void *v) {
    scratch_t *s = v;
    hf_buf_free(&s->clean);
    hf_buf_free(&s->n1);
    hf_buf_free(&s->n2);
    hf_pieces_free(&s->p1);
    hf_pieces_free(&s->p2);
}

static common_tls_t scratch_tls = COMMON_TLS_INIT(scratch_t, scratch_release);

/* Code point before s + i (i > 0) and after s + i (i < n). */
static uint32_t cp_before(const char *s, size_t i) {
    size_t p = i - 1;
    while (p > 0 && ((uint8_t)s[p] & 0xC0) == 0x80)
        p--;
    uint32_t c;
    tok_utf8_decode((const uint8_t *)s + p, i - p, &c);
    return c;
}

static uint32_t cp_at(const char *s, size_t n, size_t i) {
    uint32_t c;
    tok_utf8_decode((const uint8_t *)s + i, n - i, &c);
    return c;
}

/* The leftmost-longest added token (of the normalized kind wanted) at or after *pos. */
static const hf_added_t *next_match(const hf_tok_t *t, int normalized, const char *s, size_t n,
                                    size_t *pos) {
    const uint8_t *first = t->added_first[normalized];
    for (size_t i = *pos; i < n; i++) {
        if (!first[(uint8_t)s[i]]) continue;
        const hf_added_t *best = NULL;
        for (int k = 0; k < t->n_added; k++) {
            const hf_added_t *a = &t->added[k];
            if (a->normalized != normalized || a->n == 0 || a->n > n - i || a->s[0] != s[i])
                continue;
            if ((!best || a->n > best->n) && memcmp(s + i, a->s, a->n) == 0) best = a;
        }
        if (best) {
            *pos = i;
            return best;
        }
    }
    return NULL;
}

typedef int (*piece_fn)(const hf_tok_t *t, scratch_t *sc, const char *s, size_t n, int first,
                        worker_ids_t *out);

/* find_matches + split_with_indices: the gaps go to fn, the tokens become their ids. */
static int split_added(const hf_tok_t *t, scratch_t *sc, int normalized, const char *s, size_t n,
                       int first, piece_fn fn, worker_ids_t *out) {
    size_t done = 0, at = 0;
    const hf_added_t *a;
    while ((a = next_match(t, normalized, s, n, &at)) != NULL) {
        size_t start = at, stop = at + a->n;
        at = stop; /* the next search starts after this match, kept or not */
        if (a->single_word && ((start > 0 && hf_is_word(cp_before(s, start))) ||
                               (stop < n && hf_is_word(cp_at(s, n, stop)))))
            continue;
        if (a->lstrip) {
            while (start > done && tok_uc_is_white_space(cp_before(s, start))) {
                size_t p = start - 1;
                while (p > 0 && ((uint8_t)s[p] & 0xC0) == 0x80)
                    p--;
                start = p;
            }
        }
        if (a->rstrip)
            while (stop < n && tok_uc_is_white_space(cp_at(s, n, stop))) {
                size_t p = stop + 1;
                while (p < n && ((uint8_t)s[p] & 0xC0) == 0x80)
                    p++;
                stop = p;
            }
        if (done < start && fn(t, sc, s + done, start - done, first && done == 0, out) != 0)
            return -1;
        if (hf_ids_push(out, a->id) != 0) return -1;
        done = stop;
    }
    if (done < n && fn(t, sc, s + done, n - done, first && done == 0, out) != 0) return -1;
    return 0;
}

static int words(const hf_tok_t *t, scratch_t *sc, const char *s, size_t n, int first,
                 worker_ids_t *out) {
    hf_pieces_t *a = &sc->p1, *b = &sc->p2;
    a->b.n = 0;
    a->n = 0;
    if (hf_buf_put(&a->b, s, n) != 0 || hf_pieces_add(a, 0, (uint32_t)n, first) != 0) return -1;
    for (int i = 0; i < t->n_pre; i++) {
        if (hf_pretok_apply(&t->pre[i], a, b) != 0) return -1;
        hf_pieces_t *x = a;
        a = b;
        b = x;
    }
    const hf_model_t *m = &t->model;
    for (size_t i = 0; i < a->n; i++) {
        const char *w = a->b.p + a->s[i].off;
        size_t wn = a->s[i].len;
        int rc = m->kind == HM_WORDPIECE ? hf_wordpiece_encode(m, w, wn, out)
                 : m->kind == HM_BPE     ? hf_bpe_encode(m, w, wn, out)
                                         : hf_unigram_encode(m, w, wn, out);
        if (rc != 0) return -1;
    }
    return 0;
}

static int normalized_piece(const hf_tok_t *t, scratch_t *sc, const char *s, size_t n, int first,
                            worker_ids_t *out) {
    hf_buf_t *x = &sc->n1, *y = &sc->n2;
    if (t->n_norm) {
        for (int i = 0; i < t->n_norm; i++) {
            if (hf_norm_apply(&t->norm[i], s, n, x) != 0) return -1;
            s = x->p;
            n = x->n;
            hf_buf_t *z = x;
            x = y;
            y = z;
        }
        /* s now lives in y's buffer; words() copies it before the next normalization. */
    }
    if (n == 0) return 0;
    return split_added(t, sc, 1, s, n, first, words, out);
}

/* Invalid UTF-8 becomes U+FFFD, one per bad byte (as tokenizer.c's decoder). */
static int sanitize(const char *text, size_t len, hf_buf_t *o, const char **s) {
    size_t i = 0;
    while (i < len && (uint8_t)text[i] < 0x80)
        i++;
    for (size_t j = i; j < len;) {
        uint32_t c;
        int k = tok_utf8_decode((const uint8_t *)text + j, len - j, &c);
        if (c == 0xFFFD && k == 1) break;
        j += (size_t)k;
        i = j;
    }
    if (i == len) {
        *s = text;
        return 0;
    }
    o->n = 0;
    if (hf_buf_put(o, text, i) != 0) return -1;
    for (size_t j = i; j < len;) {
        uint32_t c;
        int k = tok_utf8_decode((const uint8_t *)text + j, len - j, &c);
        char u[4];
        if (hf_buf_put(o, u, (size_t)tok_utf8_encode(c, u)) != 0) return -1;
        j += (size_t)k;
    }
    *s = o->p;
    return 0;
}

int hf_tok_encode(const hf_tok_t *t, const char *text, size_t len, int max_len, worker_ids_t *out) {
    out->n = out->n_full = out->truncated = 0;
    scratch_t *sc = common_tls_get(&scratch_tls);
    const char *s;
    if (!sc || sanitize(text, len, &sc->clean, &s) != 0) return -1;
    if (worker_ids_reserve(out, (size_t)(t->n_prefix + t->n_suffix) + 16) != 0) return -1;
    for (int i = 0; i < t->n_prefix; i++)
        out->v[out->n++] = t->prefix[i];
    size_t n = s == text ? len : sc->clean.n;
    if (n && split_added(t, sc, 0, s, n, 1, normalized_piece, out) != 0) return -1;
    if (t->max_len > 0 && (max_len <= 0 || max_len > t->max_len)) max_len = t->max_len;
    int specials = t->n_prefix + t->n_suffix;
    if (max_len > 0 && max_len < specials) max_len = specials; /* the special tokens stay */
    int total = out->n + t->n_suffix;
    out->n_full = total;
    if (max_len > 0 && total > max_len) {
        out->n = max_len - t->n_suffix;
        out->truncated = 1;
    }
    if (worker_ids_reserve(out, (size_t)out->n + (size_t)t->n_suffix) != 0) return -1;
    for (int i = 0; i < t->n_suffix; i++)
        out->v[out->n++] = t->suffix[i];
    return 0;
}
