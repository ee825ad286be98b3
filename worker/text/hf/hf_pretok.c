/* tokenizers' pre-tokenizers: each turns a list of pieces into a finer one, splitting by the
 * behaviours of NormalizedString::split (Removed, Isolated, MergedWithPrevious,
 * MergedWithNext, Contiguous); ByteLevel and Metaspace also rewrite the text. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

#include "worker/text/hf/hf.h"
#include "worker/text/tokenizer_unicode.h"

typedef struct {
    uint32_t a, b;
    int match;
} seg_t;

typedef struct {
    seg_t *v;
    size_t n, cap;
} segs_t;

static int seg_add(segs_t *s, uint32_t a, uint32_t b, int match) {
    if (s->n == s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 64;
        seg_t *v = realloc(s->v, cap * sizeof(*v));
        if (!v) return -1;
        s->v = v;
        s->cap = cap;
    }
    s->v[s->n++] = (seg_t){a, b, match};
    return 0;
}

static inline int cat_of(uint32_t c) {
    return (int)utf8proc_category((utf8proc_int32_t)c);
}
static inline int is_letter(uint32_t c) {
    if (c < 0x80) return (c | 32) >= 'a' && (c | 32) <= 'z';
    int k = cat_of(c);
    return k >= UTF8PROC_CATEGORY_LU && k <= UTF8PROC_CATEGORY_LO;
}
static inline int is_number(uint32_t c) {
    if (c < 0x80) return c >= '0' && c <= '9';
    int k = cat_of(c);
    return k >= UTF8PROC_CATEGORY_ND && k <= UTF8PROC_CATEGORY_NO;
}
/* Regex \w: alphabetic, marks, decimal digits, connector punctuation, joiners. */
int hf_is_word(uint32_t c) {
    if (c < 0x80) return is_letter(c) || (c >= '0' && c <= '9') || c == '_';
    int k = cat_of(c);
    return (k >= UTF8PROC_CATEGORY_LU && k <= UTF8PROC_CATEGORY_ND) || k == UTF8PROC_CATEGORY_NL ||
           k == UTF8PROC_CATEGORY_PC || c == 0x200C || c == 0x200D;
}

static inline int dec(const char *s, size_t n, size_t i, uint32_t *c) {
    return tok_utf8_decode((const uint8_t *)s + i, n - i, c);
}

/* Segments of s where each character for which pred holds is a match of its own. */
static int segs_by_char(const char *s, size_t n, int (*pred)(uint32_t), segs_t *g) {
    size_t run = 0;
    for (size_t i = 0; i < n;) {
        uint32_t c;
        int k = dec(s, n, i, &c);
        if (pred(c)) {
            if (run < i && seg_add(g, (uint32_t)run, (uint32_t)i, 0) != 0) return -1;
            if (seg_add(g, (uint32_t)i, (uint32_t)(i + k), 1) != 0) return -1;
            run = i + (size_t)k;
        }
        i += (size_t)k;
    }
    if (run < n && seg_add(g, (uint32_t)run, (uint32_t)n, 0) != 0) return -1;
    return 0;
}

static int segs_by_literal(const char *s, size_t n, const char *p, size_t pn, segs_t *g) {
    size_t run = 0;
    for (size_t i = 0; pn && i + pn <= n;) {
        if (memcmp(s + i, p, pn) == 0) {
            if (run < i && seg_add(g, (uint32_t)run, (uint32_t)i, 0) != 0) return -1;
            if (seg_add(g, (uint32_t)i, (uint32_t)(i + pn), 1) != 0) return -1;
            i += pn;
            run = i;
        } else {
            i++;
        }
    }
    if (run < n && seg_add(g, (uint32_t)run, (uint32_t)n, 0) != 0) return -1;
    return 0;
}

/* GPT-2's pattern, by hand: 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|
 * \s+(?!\S)|\s+ (every character is in some match). */
static int segs_bytelevel(const char *s, size_t n, segs_t *g) {
    size_t i = 0;
    while (i < n) {
        uint32_t c, c2;
        int k = dec(s, n, i, &c);
        size_t e = 0;
        if (c == '\'' && i + 1 < n) {
            char a = s[i + 1], b = i + 2 < n ? s[i + 2] : 0;
            if (a == 's' || a == 't' || a == 'm' || a == 'd')
                e = i + 2;
            else if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l'))
                e = i + 3;
        }
        if (!e) {
            size_t j = c == ' ' && i + 1 < n ? i + 1 : i;
            int k2 = dec(s, n, j, &c2);
            int cls = is_letter(c2) ? 1 : is_number(c2) ? 2 : tok_uc_is_white_space(c2) ? 0 : 3;
            if (cls) {
                e = j + (size_t)k2;
                while (e < n) {
                    int k3 = dec(s, n, e, &c2);
                    int c3 = is_letter(c2)               ? 1
                             : is_number(c2)             ? 2
                             : tok_uc_is_white_space(c2) ? 0
                                                         : 3;
                    if (c3 != cls) break;
                    e += (size_t)k3;
                }
            }
        }
        if (!e) { /* whitespace: leave the last one to the word after it */
            e = i + (size_t)k;
            size_t last = i;
            while (e < n) {
                int k3 = dec(s, n, e, &c2);
                if (!tok_uc_is_white_space(c2)) break;
                last = e;
                e += (size_t)k3;
            }
            if (e < n && last > i) e = last;
        }
        if (seg_add(g, (uint32_t)i, (uint32_t)e, 1) != 0) return -1;
        i = e;
    }
    return 0;
}

/* \w+|[^\w\s]+ kept: the whitespace between is the match that is removed. */
static int segs_whitespace(const char *s, size_t n, segs_t *g) {
    size_t i = 0;
    while (i < n) {
        uint32_t c;
        int k = dec(s, n, i, &c);
        int cls = hf_is_word(c) ? 1 : tok_uc_is_white_space(c) ? 0 : 2;
        size_t e = i + (size_t)k;
        while (e < n) {
            int k2 = dec(s, n, e, &c);
            if ((hf_is_word(c) ? 1 : tok_uc_is_white_space(c) ? 0 : 2) != cls) break;
            e += (size_t)k2;
        }
        if (seg_add(g, (uint32_t)i, (uint32_t)e, cls == 0) != 0) return -1;
        i = e;
    }
    return 0;
}

/* NormalizedString::split's folds, then the kept pieces into out (offsets in out->b). */
static int emit(const segs_t *g, int behavior, uint32_t base, int first, hf_pieces_t *out) {
    size_t n = g->n;
    seg_t *v = g->v;
    size_t m = 0;
    if (behavior == HB_MERGED_NEXT) {
        int prev = 0;
        size_t w = n; /* fold from the right, writing leftwards */
        for (size_t r = n; r-- > 0;) {
            seg_t x = v[r];
            if (x.match && !prev && w < n) {
                v[w].a = x.a;
            } else {
                v[--w] = (seg_t){x.a, x.b, 0};
            }
            prev = x.match;
        }
        memmove(v, v + w, (n - w) * sizeof(*v));
        m = n - w;
    } else if (behavior != HB_REMOVED) {
        int prev = 0;
        for (size_t r = 0; r < n; r++) {
            seg_t x = v[r];
            int merge = behavior == HB_CONTIGUOUS    ? x.match == prev && m > 0
                        : behavior == HB_MERGED_PREV ? x.match && !prev && m > 0
                                                     : 0;
            if (merge)
                v[m - 1].b = x.b;
            else
                v[m++] = (seg_t){x.a, x.b, 0};
            prev = x.match;
        }
    } else {
        m = n;
    }
    for (size_t r = 0; r < m; r++) {
        if (behavior == HB_REMOVED && v[r].match) continue;
        if (hf_pieces_add(out, base + v[r].a, v[r].b - v[r].a, first && v[r].a == 0) != 0)
            return -1;
    }
    return 0;
}

static int is_ws_pred(uint32_t c) {
    return tok_uc_is_white_space(c);
}
static int is_punct_pred(uint32_t c) {
    return tok_uc_is_punct(c);
}
static int is_numeric_pred(uint32_t c) {
    return is_number(c);
}

/* GPT-2's byte -> printable character table, as UTF-8. */
static char byte_tab[256][3];
static int byte_len[256];
static pthread_once_t byte_once = PTHREAD_ONCE_INIT;

static void byte_tab_init(void) {
    int extra = 0;
    for (int x = 0; x < 256; x++) {
        int keep = (x >= 33 && x <= 126) || (x >= 161 && x <= 172) || x >= 174;
        uint32_t c = keep ? (uint32_t)x : 256u + (uint32_t)extra++;
        byte_len[x] = tok_utf8_encode(c, byte_tab[x]);
    }
}

static inline const char *byte_char(uint8_t b, int *len) {
    *len = byte_len[b];
    return byte_tab[b];
}

static int bytelevel(const hf_pretok_t *p, const hf_pieces_t *in, hf_pieces_t *out) {
    pthread_once(&byte_once, byte_tab_init);
    segs_t g = {0};
    int rc = 0;
    for (size_t i = 0; i < in->n && rc == 0; i++) {
        const char *s = in->b.p + in->s[i].off;
        size_t n = in->s[i].len;
        hf_buf_t tmp = {0};
        if (p->prefix_space && (n == 0 || s[0] != ' ')) {
            if (hf_buf_put(&tmp, " ", 1) || hf_buf_put(&tmp, s, n)) {
                rc = -1;
                hf_buf_free(&tmp);
                break;
            }
            s = tmp.p;
            n = tmp.n;
        }
        g.n = 0;
        rc = p->use_regex ? segs_bytelevel(s, n, &g) : seg_add(&g, 0, (uint32_t)n, 1);
        for (size_t k = 0; k < g.n && rc == 0; k++) {
            uint32_t off = (uint32_t)out->b.n;
            for (uint32_t j = g.v[k].a; j < g.v[k].b && rc == 0; j++) {
                int bl;
                const char *u = byte_char((uint8_t)s[j], &bl);
                rc = hf_buf_put(&out->b, u, (size_t)bl);
            }
            if (rc == 0)
                rc = hf_pieces_add(out, off, (uint32_t)out->b.n - off, in->s[i].first && k == 0);
        }
        hf_buf_free(&tmp);
    }
    free(g.v);
    return rc;
}

static int metaspace(const hf_pretok_t *p, const hf_pieces_t *in, hf_pieces_t *out) {
    segs_t g = {0};
    int rc = 0;
    hf_buf_t tmp = {0};
    for (size_t i = 0; i < in->n && rc == 0; i++) {
        const char *s = in->b.p + in->s[i].off;
        size_t n = in->s[i].len;
        tmp.n = 0;
        for (size_t j = 0; j < n && rc == 0; j++)
            rc = s[j] == ' ' ? hf_buf_put(&tmp, p->repl, (size_t)p->repl_n)
                             : hf_buf_put(&tmp, s + j, 1);
        if (rc) break;
        int starts = tmp.n >= (size_t)p->repl_n && memcmp(tmp.p, p->repl, (size_t)p->repl_n) == 0;
        int pre =
            !starts && (p->prepend == HM_ALWAYS || (p->prepend == HM_FIRST && in->s[i].first));
        uint32_t base = (uint32_t)out->b.n;
        if (pre) rc = hf_buf_put(&out->b, p->repl, (size_t)p->repl_n);
        if (!rc) rc = hf_buf_put(&out->b, tmp.p, tmp.n);
        if (rc) break;
        uint32_t len = (uint32_t)out->b.n - base;
        g.n = 0;
        if (p->split)
            rc = segs_by_literal(out->b.p + base, len, p->repl, (size_t)p->repl_n, &g) ||
                 emit(&g, HB_MERGED_NEXT, base, in->s[i].first, out);
        else
            rc = hf_pieces_add(out, base, len, in->s[i].first);
    }
    hf_buf_free(&tmp);
    free(g.v);
    return rc;
}

static int splitter(const hf_pretok_t *p, const char *s, size_t n, segs_t *g, int pass) {
    switch (p->kind) {
    case HP_BERT:
        return pass == 0 ? segs_by_char(s, n, is_ws_pred, g) : segs_by_char(s, n, is_punct_pred, g);
    case HP_WSSPLIT:
        return segs_by_char(s, n, is_ws_pred, g);
    case HP_WHITESPACE:
        return segs_whitespace(s, n, g);
    case HP_PUNCT:
        return segs_by_char(s, n, is_punct_pred, g);
    case HP_DIGITS:
        return segs_by_char(s, n, is_numeric_pred, g);
    case HP_SPLIT:
        return segs_by_literal(s, n, p->pat, p->patn, g);
    }
    return -1;
}

static int behavior_of(const hf_pretok_t *p, int pass) {
    switch (p->kind) {
    case HP_BERT:
        return pass == 0 ? HB_REMOVED : HB_ISOLATED;
    case HP_WSSPLIT:
        return HB_REMOVED;
    case HP_WHITESPACE:
        return HB_REMOVED;
    case HP_DIGITS:
        return p->individual ? HB_ISOLATED : HB_CONTIGUOUS;
    default:
        return p->behavior;
    }
}

static int split_pass(const hf_pretok_t *p, const hf_pieces_t *in, hf_pieces_t *out, int pass) {
    segs_t g = {0};
    int rc = hf_buf_put(&out->b, in->b.p, in->b.n);
    for (size_t i = 0; i < in->n && rc == 0; i++) {
        g.n = 0;
        rc = splitter(p, in->b.p + in->s[i].off, in->s[i].len, &g, pass);
        if (rc) break;
        if (p->kind == HP_SPLIT && p->invert)
            for (size_t k = 0; k < g.n; k++)
                g.v[k].match = !g.v[k].match;
        rc = emit(&g, behavior_of(p, pass), in->s[i].off, in->s[i].first, out);
    }
    free(g.v);
    return rc;
}

int hf_pretok_apply(const hf_pretok_t *p, const hf_pieces_t *in, hf_pieces_t *out) {
    out->n = 0;
    out->b.n = 0;
    if (p->kind == HP_BYTELEVEL) return bytelevel(p, in, out);
    if (p->kind == HP_METASPACE) return metaspace(p, in, out);
    if (p->kind != HP_BERT) return split_pass(p, in, out, 0);
    hf_pieces_t mid = {0};
    int rc = split_pass(p, in, &mid, 0);
    if (rc == 0) rc = split_pass(p, &mid, out, 1);
    hf_pieces_free(&mid);
    return rc;
}

void hf_pretok_free(hf_pretok_t *p) {
    free(p->pat);
}
