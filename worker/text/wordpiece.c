/* BERT WordPiece as Hugging Face tokenizers 0.23 does it (BertNormalizer, BertPreTokenizer,
 * WordPiece, BertProcessing, and the special tokens it registers as added tokens).
 *
 * Two paths produce the same ids: a byte loop for printable-ASCII texts (the bulk of
 * support tickets), and a general path that decodes UTF-8 into code points, normalizes them
 * (clean, CJK spacing, NFD with canonical ordering, accent stripping, lower case) and then
 * pre-tokenizes. The ASCII path hands the text to the general one as soon as it sees a byte
 * it cannot handle. The vocabulary and its lookup table: worker/text/tokenizer_vocab.c. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/tls.h"
#include "worker/text/tokenizer_int.h"
#include "worker/text/tokenizer_unicode.h"

#define TOK_MAX_WORD_CHARS 100 /* longer words become [UNK], as HF's max_input_chars_per_word */

/* ASCII byte classes for the fast path. */
enum { AC_WORD = 0, AC_SPACE, AC_PUNCT, AC_BRACKET, AC_SLOW };
static uint8_t ascii_class[256];
static pthread_once_t ascii_once = PTHREAD_ONCE_INIT;

static void ascii_class_init(void) {
    for (int b = 0; b < 256; b++) {
        uint8_t c;
        if (b >= 0x80 || b == 0x7F || (b < 0x20 && b != '\t' && b != '\n' && b != '\r'))
            c = AC_SLOW; /* non-ASCII, or a control that cleaning drops (joining words) */
        else if (b == ' ' || b == '\t' || b == '\n' || b == '\r')
            c = AC_SPACE;
        else if (b == '[')
            c = AC_BRACKET;
        else if (tok_uc_is_punct((uint32_t)b))
            c = AC_PUNCT;
        else
            c = AC_WORD;
        ascii_class[b] = c;
    }
}

void tok_ascii_init(void) {
    pthread_once(&ascii_once, ascii_class_init);
}

/* Callers reserve one id per input unit beforehand, so pushes never reallocate. */
static inline void push(worker_ids_t *out, int32_t id) {
    out->v[out->n++] = id;
}

static inline int is_cont_byte(char c) {
    return ((uint8_t)c & 0xC0) == 0x80;
}

/* Greedy longest-match-first over n bytes of one normalized word (<= 100 chars). */
static void wordpiece(const worker_tok_t *t, const char *w, int n, worker_ids_t *out) {
    int32_t id = t->sp_id[SP_UNK];
    if (n == 1 && (uint8_t)w[0] < 0x80) {
        int32_t a = t->ascii_id[(uint8_t)w[0]];
        push(out, a >= 0 ? a : id);
        return;
    }
    int mark = out->n, start = 0;
    while (start < n) {
        int end = n;
        if (end - start > t->max_key) {
            end = start + t->max_key;
            while (end > start && is_cont_byte(w[end]))
                end--;
        }
        int32_t got = -1;
        while (end > start) {
            got = tok_lookup(t, start > 0, w + start, end - start);
            if (got >= 0) break;
            do
                end--;
            while (end > start && is_cont_byte(w[end]));
        }
        if (got < 0) { /* one unmatched piece makes the whole word [UNK] */
            out->n = mark;
            push(out, id);
            return;
        }
        push(out, got);
        start = end;
    }
}

static inline int match_special(const worker_tok_t *t, const char *s, size_t left) {
    for (int k = 0; k < SP_N; k++)
        if (t->sp_id[k] >= 0 && left >= (size_t)sp_lens[k] &&
            memcmp(s, sp_names[k], sp_lens[k]) == 0)
            return k;
    return -1;
}

/* Returns 1 when done, 0 when the text needs the general path. */
static int encode_ascii(const worker_tok_t *t, const char *text, size_t len, worker_ids_t *out) {
    char w[TOK_MAX_WORD_CHARS];
    int wn = 0; /* word length so far; only the first 100 bytes are kept */
    const int lower = t->lower;
    for (size_t i = 0; i <= len; i++) {
        uint8_t b = i < len ? (uint8_t)text[i] : ' ';
        uint8_t c = ascii_class[b];
        if (c == AC_WORD) {
            if (wn < TOK_MAX_WORD_CHARS) w[wn] = (char)(lower && b >= 'A' && b <= 'Z' ? b + 32 : b);
            wn++;
            continue;
        }
        if (c == AC_SLOW) return 0;
        if (wn) {
            if (wn > TOK_MAX_WORD_CHARS)
                push(out, t->sp_id[SP_UNK]);
            else
                wordpiece(t, w, wn, out);
            wn = 0;
        }
        if (c == AC_SPACE) continue;
        if (c == AC_BRACKET) {
            int k = match_special(t, text + i, len - i);
            if (k >= 0) {
                push(out, t->sp_id[k]);
                i += sp_lens[k] - 1;
                continue;
            }
        }
        int32_t a = t->ascii_id[b];
        push(out, a >= 0 ? a : t->sp_id[SP_UNK]);
    }
    return 1;
}

/* Per-thread code point buffer of the general path: the tokenizer itself stays immutable and
 * shareable, and a worker thread reuses one buffer across all its texts. */
typedef struct {
    uint32_t *cp; /* (cap) */
    size_t cap;
} tok_scratch_t;
static void scratch_release(void *p) {
    free(((tok_scratch_t *)p)->cp);
}

static common_tls_t scratch_tls = COMMON_TLS_INIT(tok_scratch_t, scratch_release);

static uint32_t *scratch_get(size_t need) {
    tok_scratch_t *s = common_tls_get(&scratch_tls);
    if (!s) return NULL;
    if (s->cap < need) {
        size_t cap = s->cap ? s->cap : 1024;
        while (cap < need)
            cap *= 2;
        uint32_t *cp = realloc(s->cp, cap * sizeof(uint32_t));
        if (!cp) return NULL;
        s->cp = cp;
        s->cap = cap;
    }
    return s->cp;
}

/* Normalizes the whole text into code points (the BertNormalizer steps in HF's order). The
 * output holds at most 2 code points per input byte (NFD expands one character to at most 4
 * code points, from at least 2 bytes; CJK spacing turns 3 bytes into 3). */
static size_t normalize(const worker_tok_t *t, const char *text, size_t len, uint32_t *cp) {
    const uint8_t *s = (const uint8_t *)text;
    size_t n = 0;
    for (size_t i = 0; i < len;) {
        uint32_t c;
        if (s[i] == '[') {
            int k = match_special(t, text + i, len - i);
            if (k >= 0) {
                cp[n++] = SP_SENTINEL + (uint32_t)k;
                i += sp_lens[k];
                continue;
            }
        }
        i += tok_utf8_decode(s + i, len - i, &c);
        switch (tok_uc_clean_class(c)) {
        case TOK_CP_DROP:
            continue;
        case TOK_CP_SPACE:
            cp[n++] = ' ';
            continue;
        case TOK_CP_CJK:
            if (!t->cjk) break; /* tokenize_chinese_chars false: an ordinary character */
            cp[n++] = ' ';
            if (t->strip) {
                uint32_t d[TOK_UC_MAX_DECOMP];
                int nd = tok_uc_decompose(c, d);
                for (int k = 0; k < nd; k++)
                    n = tok_uc_push_ordered(cp, n, d[k]);
            } else {
                cp[n++] = c;
            }
            cp[n++] = ' ';
            continue;
        default:
            break;
        }
        if (c < 0x80 || !t->strip) { /* NFD belongs to accent stripping alone */
            if (c == 0x130 && t->lower) {
                /* The one character whose lower case is two code points (i + combining dot
                 * above), written here since the pass below works in place; with accent
                 * stripping NFD splits it the same way. */
                cp[n++] = 'i';
                cp[n++] = 0x307;
            } else {
                cp[n++] = c;
            }
            continue;
        }
        uint32_t d[TOK_UC_MAX_DECOMP];
        int nd = tok_uc_decompose(c, d);
        for (int k = 0; k < nd; k++)
            n = tok_uc_push_ordered(cp, n, d[k]);
    }
    if (!t->lower && !t->strip) return n;
    size_t m = 0; /* strip accents (Mn) after ordering, then lower-case */
    for (size_t i = 0; i < n; i++) {
        uint32_t c = cp[i];
        if (c >= SP_SENTINEL) {
            cp[m++] = c;
        } else if (c < 0x80) {
            cp[m++] = t->lower && c >= 'A' && c <= 'Z' ? c + 32 : c;
        } else if (t->strip && tok_uc_is_mn(c)) {
            continue;
        } else {
            cp[m++] = t->lower ? tok_uc_lower(c) : c;
        }
    }
    return m;
}

static int encode_general(const worker_tok_t *t, const char *text, size_t len, worker_ids_t *out) {
    uint32_t *cp = scratch_get(2 * len + 8);
    if (!cp) return -1;
    size_t n = normalize(t, text, len, cp);
    if (worker_ids_reserve(out, n + 2) != 0) return -1;
    char w[4 * TOK_MAX_WORD_CHARS];
    int wb = 0, wc = 0; /* word bytes kept, word chars seen */
    for (size_t i = 0; i <= n; i++) {
        uint32_t c = i < n ? cp[i] : ' ';
        int ws = c < SP_SENTINEL && tok_uc_is_ws(c);
        int punct = c < SP_SENTINEL && !ws && tok_uc_is_punct(c);
        if (c < SP_SENTINEL && !ws && !punct) {
            if (wc < TOK_MAX_WORD_CHARS) wb += tok_utf8_encode(c, w + wb);
            wc++;
            continue;
        }
        if (wc) {
            if (wc > TOK_MAX_WORD_CHARS)
                push(out, t->sp_id[SP_UNK]);
            else
                wordpiece(t, w, wb, out);
            wb = wc = 0;
        }
        if (ws) continue;
        if (c >= SP_SENTINEL) {
            push(out, t->sp_id[c - SP_SENTINEL]);
            continue;
        }
        char pw[4];
        wordpiece(t, pw, tok_utf8_encode(c, pw), out);
    }
    return 0;
}

int tok_wordpiece_encode(const worker_tok_t *t, const char *text, size_t len, int max_len,
                         worker_ids_t *out, int force_general) {
    out->n = 0;
    out->n_full = 0;
    out->truncated = 0;
    /* Every id consumes at least one input byte on the ASCII path. */
    if (worker_ids_reserve(out, len + 2) != 0) return -1;
    push(out, t->sp_id[SP_CLS]);
    if (force_general || !encode_ascii(t, text, len, out)) {
        out->n = 1;
        if (encode_general(t, text, len, out) != 0) return -1;
    }
    push(out, t->sp_id[SP_SEP]);
    out->n_full = out->n;
    if (max_len > 0) {
        if (max_len < 2) max_len = 2; /* [CLS] and [SEP] always stay */
        if (out->n > max_len) {
            out->v[max_len - 1] = t->sp_id[SP_SEP];
            out->n = max_len;
            out->truncated = 1;
        }
    }
    return 0;
}
