#include "sink/copybuf.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void sink_copybuf_init(sink_copybuf_t *b) {
    memset(b, 0, sizeof(*b));
}

void sink_copybuf_free(sink_copybuf_t *b) {
    free(b->data);
    memset(b, 0, sizeof(*b));
}

void sink_copybuf_reset(sink_copybuf_t *b) {
    b->len = 0;
    b->row_fields = 0;
    b->oom = 0;
}

static int copybuf_reserve(sink_copybuf_t *b, size_t extra) {
    if (b->oom) return -1;
    if (b->len + extra <= b->cap) return 0;
    size_t cap = b->cap ? b->cap : 64 * 1024;
    while (cap < b->len + extra)
        cap *= 2;
    char *p = realloc(b->data, cap);
    if (!p) {
        b->oom = 1;
        return -1;
    }
    b->data = p;
    b->cap = cap;
    return 0;
}

/* The separator is reserved together with the field so a field is written whole or not. */
static char *copybuf_field(sink_copybuf_t *b, size_t max_bytes) {
    if (copybuf_reserve(b, max_bytes + 1) != 0) return NULL;
    if (b->row_fields++ > 0) b->data[b->len++] = '\t';
    return b->data + b->len;
}

void sink_copybuf_null(sink_copybuf_t *b) {
    char *p = copybuf_field(b, 2);
    if (!p) return;
    p[0] = '\\';
    p[1] = 'N';
    b->len += 2;
}

void sink_copybuf_text(sink_copybuf_t *b, const char *s) {
    if (!s) {
        sink_copybuf_null(b);
        return;
    }
    size_t n = strlen(s);
    char *out = copybuf_field(b, 2 * n); /* worst case: every byte escaped */
    if (!out) return;
    char *o = out;
    const char *run = s; /* start of the bytes not yet copied */
    for (const char *p = s; *p; p++) {
        char esc;
        switch (*p) {
        case '\\':
            esc = '\\';
            break;
        case '\t':
            esc = 't';
            break;
        case '\n':
            esc = 'n';
            break;
        case '\r':
            esc = 'r';
            break;
        default:
            continue;
        }
        memcpy(o, run, (size_t)(p - run));
        o += p - run;
        *o++ = '\\';
        *o++ = esc;
        run = p + 1;
    }
    size_t tail = strlen(run);
    memcpy(o, run, tail);
    o += tail;
    b->len += (size_t)(o - out);
}

void sink_copybuf_int(sink_copybuf_t *b, int64_t v) {
    char *p = copybuf_field(b, 24);
    if (!p) return;
    b->len += (size_t)snprintf(p, 24, "%" PRId64, v);
}

void sink_copybuf_float(sink_copybuf_t *b, double v) {
    char *p = copybuf_field(b, 32);
    if (!p) return;
    const char *s = isnan(v) ? "NaN" : isinf(v) ? (v > 0 ? "Infinity" : "-Infinity") : NULL;
    if (s)
        b->len += (size_t)snprintf(p, 32, "%s", s);
    else
        b->len += (size_t)snprintf(p, 32, "%.9g", v);
}

void sink_copybuf_bool(sink_copybuf_t *b, int v) {
    char *p = copybuf_field(b, 1);
    if (!p) return;
    p[0] = v ? 't' : 'f';
    b->len += 1;
}

void sink_copybuf_end_row(sink_copybuf_t *b) {
    if (copybuf_reserve(b, 1) != 0) return;
    b->data[b->len++] = '\n';
    b->row_fields = 0;
}
