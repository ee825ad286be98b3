#include "worker/classify/result.h"

#include <math.h>
#include <stdint.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The original selection: k passes, each the first unused label with the highest logit. The
 * answer for rows holding NaN, which have no order for score_insert to keep. */
static void score_select(const float *logits, int L, int k, cls_result_t *r) {
    for (int i = 0; i < k; i++) {
        int best = -1;
        for (int j = 0; j < L; j++) {
            int used = 0;
            for (int q = 0; q < i && !used; q++)
                used = r->top[q] == j;
            if (!used && (best < 0 || logits[j] > logits[best])) best = j;
        }
        r->top[i] = best;
    }
}

/* The same order in one pass (rows without NaN): each label goes in after every kept one with
 * a logit at least its own, so equal logits keep label order; most labels fall at or below the
 * k-th kept logit and are passed over at one compare. */
static void score_insert(const float *logits, int L, int k, cls_result_t *r) {
    int n = 0;
    for (int j = 0; j < L && k > 0; j++) {
        const float x = logits[j];
        if (n == k && !(x > logits[r->top[k - 1]])) continue;
        int at = n < k ? n : k - 1; /* the last slot is dropped when full */
        while (at > 0 && x > logits[r->top[at - 1]]) {
            r->top[at] = r->top[at - 1];
            at--;
        }
        r->top[at] = j;
        if (n < k) n++;
    }
}

void cls_score(const float *logits, int num_labels, int top_k, cls_result_t *r) {
    const int L = num_labels;
    int k = top_k < L ? top_k : L;
    if (k > CLS_TOP_MAX) k = CLS_TOP_MAX;
    if (k < 0) k = 0;
    int arg = 0, nan = 0;
    for (int j = 1; j < L; j++)
        if (logits[j] > logits[arg]) arg = j;
    const double mx = logits[arg];
    double z = 0;
    for (int j = 0; j < L; j++) {
        z += exp((double)logits[j] - mx);
        nan |= logits[j] != logits[j];
    }
    /* ties keep the lower id first, so top[0] is the arg-max */
    if (nan)
        score_select(logits, L, k, r);
    else
        score_insert(logits, L, k, r);
    for (int i = 0; i < k; i++)
        r->p[i] = (float)(exp((double)logits[r->top[i]] - mx) / z);
    r->k = k;
    r->label = arg;
    r->confidence = (float)(1.0 / z); /* exp(0) / z */
}

void cls_buf_free(cls_buf_t *b) {
    free(b->s);
    memset(b, 0, sizeof(*b));
}

static int buf_reserve(cls_buf_t *b, size_t more) {
    if (b->oom) return -1;
    if (b->len + more + 1 <= b->cap) return 0;
    size_t cap = b->cap ? b->cap : 256;
    while (cap < b->len + more + 1)
        cap *= 2;
    char *s = realloc(b->s, cap);
    if (!s) {
        b->oom = 1;
        return -1;
    }
    b->s = s, b->cap = cap;
    return 0;
}

static void buf_put(cls_buf_t *b, const char *s, size_t n) {
    if (buf_reserve(b, n)) return;
    memcpy(b->s + b->len, s, n);
    b->len += n;
    b->s[b->len] = '\0';
}

void cls_buf_puts(cls_buf_t *b, const char *s) {
    buf_put(b, s, strlen(s));
}

static void buf_printf(cls_buf_t *b, const char *fmt, ...) {
    char tmp[64];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (n > 0) buf_put(b, tmp, (size_t)n < sizeof tmp ? (size_t)n : sizeof tmp - 1);
}

void cls_json_string(cls_buf_t *b, const char *s) {
    buf_put(b, "\"", 1);
    const unsigned char *p = (const unsigned char *)s;
    for (;;) {
        /* the run of bytes that go as they are, in one copy */
        const unsigned char *run = p;
        while (*p >= 0x20 && *p != '"' && *p != '\\')
            p++;
        if (p > run) buf_put(b, (const char *)run, (size_t)(p - run));
        if (!*p) break;
        if (*p == '"' || *p == '\\') {
            char e[2] = {'\\', (char)*p};
            buf_put(b, e, 2);
        } else {
            buf_printf(b, "\\u%04x", *p);
        }
        p++;
    }
    buf_put(b, "\"", 1);
}

static uint64_t pow10u(int s) {
    uint64_t v = 1;
    while (s-- > 0)
        v *= 10;
    return v;
}

/* The 9 significant digits of x in [1e-10, 1e9) as printf rounds them (the exact binary value,
 * half to even), in d; returns the decimal exponent of d[0]. x = m 2^e exactly, so
 * m 10^s 2^e (s = 8 - exponent, at most 18) fits 128 bits and is cut at its binary point. */
static int digits9(float x, char d[9]) {
    uint32_t bits;
    memcpy(&bits, &x, sizeof bits);
    const uint64_t m = (bits & 0x7fffffu) | 0x800000u; /* normal: x >= 1e-10 */
    const int e = (int)((bits >> 23) & 0xff) - 150;
    int x10 = (int)floor(log10((double)x));               /* may be one off near a power of ten */
    const uint64_t lo = 100000000ULL, hi = 1000000000ULL; /* 9 digits: [1e8, 1e9) */
    uint64_t q;
    for (;;) {
        const unsigned __int128 n = (unsigned __int128)m * pow10u(8 - x10);
        const unsigned __int128 f = e >= 0 ? n << e : n >> -e;
        if (f < lo || f >= hi) {
            x10 += f < lo ? -1 : 1;
            continue;
        }
        q = (uint64_t)f;
        if (e < 0) {
            const unsigned __int128 r = n & (((unsigned __int128)1 << -e) - 1),
                                    half = (unsigned __int128)1 << (-e - 1);
            if (r > half || (r == half && (q & 1))) q++;
        }
        break;
    }
    if (q == hi) q = lo, x10++;
    for (int i = 8; i >= 0; i--, q /= 10)
        d[i] = (char)('0' + q % 10);
    return x10;
}

/* "%.9g" (printf's %g: no trailing zeros, exponent form below 1e-4) without printf's
 * arbitrary-precision path, for the probabilities a result holds; other values go to
 * snprintf. tests/test_classify_result.c compares the two. */
void cls_json_number(cls_buf_t *b, float x) {
    if (buf_reserve(b, 32)) return;
    char *p = b->s + b->len;
    if (!(x >= 1e-10f && x < 1e9f)) {
        int n = snprintf(p, 32, "%.9g", (double)x); /* at most 15 bytes: "-1.23456789e-38" */
        if (n > 0 && n < 32) b->len += (size_t)n;
        b->s[b->len] = '\0';
        return;
    }
    char d[9];
    const int x10 = digits9(x, d);
    int nd = 9; /* significant digits once trailing zeros go */
    while (nd > 1 && d[nd - 1] == '0')
        nd--;
    if (x10 < -4) { /* d.dddde-XX */
        *p++ = d[0];
        if (nd > 1) *p++ = '.';
        memcpy(p, d + 1, (size_t)nd - 1);
        p += nd - 1;
        *p++ = 'e';
        *p++ = '-';
        *p++ = (char)('0' + -x10 / 10);
        *p++ = (char)('0' + -x10 % 10);
    } else if (x10 >= 0) { /* ddd.dddd */
        memcpy(p, d, (size_t)x10 + 1);
        p += x10 + 1;
        if (nd > x10 + 1) {
            *p++ = '.';
            memcpy(p, d + x10 + 1, (size_t)(nd - x10 - 1));
            p += nd - x10 - 1;
        }
    } else { /* 0.000ddd */
        *p++ = '0';
        *p++ = '.';
        for (int i = 0; i < -x10 - 1; i++)
            *p++ = '0';
        memcpy(p, d, (size_t)nd);
        p += nd;
    }
    b->len = (size_t)(p - b->s);
    b->s[b->len] = '\0';
}

void cls_json_top_k(cls_buf_t *b, const cls_result_t *r, const char *const *labels) {
    buf_put(b, "[", 1);
    for (int i = 0; i < r->k; i++) {
        cls_buf_puts(b, i ? ", {\"label\": " : "{\"label\": ");
        cls_json_string(b, labels[r->top[i]]);
        cls_buf_puts(b, ", \"p\": ");
        cls_json_number(b, r->p[i]);
        buf_put(b, "}", 1);
    }
    buf_put(b, "]", 1);
}

void cls_json_line(cls_buf_t *b, const cls_result_t *r, const char *const *labels, int tokens,
                   int truncated, const float *logits, int num_labels) {
    cls_buf_puts(b, "{\"label\": ");
    cls_json_string(b, labels[r->label]);
    cls_buf_puts(b, ", \"confidence\": ");
    cls_json_number(b, r->confidence);
    cls_buf_puts(b, ", \"top_k\": ");
    cls_json_top_k(b, r, labels);
    buf_printf(b, ", \"tokens\": %d, \"truncated\": %s", tokens, truncated ? "true" : "false");
    if (logits) {
        cls_buf_puts(b, ", \"logits\": [");
        for (int j = 0; j < num_labels; j++)
            buf_printf(b, j ? ", %.9g" : "%.9g", (double)logits[j]);
        buf_put(b, "]", 1);
    }
    cls_buf_puts(b, "}\n");
}
