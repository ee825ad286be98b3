#include "sink/copybin.h"

#include <string.h>

static void put_be(unsigned char *p, uint64_t v, int bytes) {
    for (int i = bytes - 1; i >= 0; i--, v >>= 8)
        p[i] = (unsigned char)(v & 0xff);
}

static unsigned char *copybin_take(sink_copybuf_t *b, size_t n) {
    if (sink_copybuf_reserve(b, n) != 0) return NULL;
    unsigned char *p = (unsigned char *)b->data + b->len;
    b->len += n;
    return p;
}

void sink_copybin_header(sink_copybuf_t *b) {
    static const char sig[11] = "PGCOPY\n\377\r\n\0";
    unsigned char *p = copybin_take(b, 19);
    if (!p) return;
    memcpy(p, sig, 11);
    memset(p + 11, 0, 8); /* flags (no OIDs), header extension length */
}

void sink_copybin_trailer(sink_copybuf_t *b) {
    unsigned char *p = copybin_take(b, 2);
    if (p) put_be(p, 0xffff, 2);
}

void sink_copybin_row(sink_copybuf_t *b, int16_t n_fields) {
    unsigned char *p = copybin_take(b, 2);
    if (p) put_be(p, (uint16_t)n_fields, 2);
}

void sink_copybin_null(sink_copybuf_t *b) {
    unsigned char *p = copybin_take(b, 4);
    if (p) put_be(p, 0xffffffffu, 4);
}

/* prefix: bytes put before s inside the field (jsonb's version byte) */
static void copybin_bytes(sink_copybuf_t *b, const char *prefix, size_t np, const char *s) {
    if (!s) {
        sink_copybin_null(b);
        return;
    }
    size_t n = strlen(s);
    unsigned char *p = copybin_take(b, 4 + np + n);
    if (!p) return;
    put_be(p, (uint32_t)(np + n), 4);
    memcpy(p + 4, prefix, np);
    memcpy(p + 4 + np, s, n);
}

void sink_copybin_text(sink_copybuf_t *b, const char *s) {
    copybin_bytes(b, "", 0, s);
}

void sink_copybin_jsonb(sink_copybuf_t *b, const char *json) {
    copybin_bytes(b, "\1", 1, json); /* jsonb binary input: version 1, then the JSON text */
}

void sink_copybin_int2(sink_copybuf_t *b, int16_t v) {
    unsigned char *p = copybin_take(b, 6);
    if (!p) return;
    put_be(p, 2, 4);
    put_be(p + 4, (uint16_t)v, 2);
}

void sink_copybin_int4(sink_copybuf_t *b, int32_t v) {
    unsigned char *p = copybin_take(b, 8);
    if (!p) return;
    put_be(p, 4, 4);
    put_be(p + 4, (uint32_t)v, 4);
}

void sink_copybin_int8(sink_copybuf_t *b, int64_t v) {
    unsigned char *p = copybin_take(b, 12);
    if (!p) return;
    put_be(p, 8, 4);
    put_be(p + 4, (uint64_t)v, 8);
}

void sink_copybin_float4(sink_copybuf_t *b, float v) {
    uint32_t bits;
    memcpy(&bits, &v, 4);
    sink_copybin_int4(b, (int32_t)bits);
}

void sink_copybin_bool(sink_copybuf_t *b, int v) {
    unsigned char *p = copybin_take(b, 5);
    if (!p) return;
    put_be(p, 1, 4);
    p[4] = v ? 1 : 0;
}

/* PostgreSQL's timestamptz range in its binary form, microseconds since 2000-01-01 UTC:
 * [MIN_TIMESTAMP, END_TIMESTAMP) of its datatype/timestamp.h (4714-11-24 BC to 294277 AD). */
#define PG_TIMESTAMP_MIN_US (-211813488000000000LL)
#define PG_TIMESTAMP_END_US 9223371331200000000LL

void sink_copybin_timestamptz_ms(sink_copybuf_t *b, int64_t unix_ms) {
    const int64_t pg_epoch_ms = 946684800000LL; /* 2000-01-01T00:00:00Z in Unix ms */
    int64_t ms, us;
    /* Out of range, overflowing included, goes as the first value past the range: the server
     * refuses it (SQLSTATE 22008) and the sink isolates the row. Never a wrapped-around date,
     * never +-infinity (INT64_MAX/MIN, which the server would take). */
    if (__builtin_sub_overflow(unix_ms, pg_epoch_ms, &ms) || __builtin_mul_overflow(ms, 1000, &us))
        us = unix_ms < 0 ? PG_TIMESTAMP_MIN_US - 1 : PG_TIMESTAMP_END_US;
    else if (us < PG_TIMESTAMP_MIN_US)
        us = PG_TIMESTAMP_MIN_US - 1;
    else if (us >= PG_TIMESTAMP_END_US)
        us = PG_TIMESTAMP_END_US;
    sink_copybin_int8(b, us);
}

void sink_copybin_array(sink_copybuf_t *b, uint32_t elem_oid, int n, int has_null) {
    unsigned char *p = copybin_take(b, 20);
    if (!p) return;
    put_be(p, 1, 4); /* dimensions */
    put_be(p + 4, has_null ? 1 : 0, 4);
    put_be(p + 8, elem_oid, 4);
    put_be(p + 12, (uint32_t)n, 4);
    put_be(p + 16, 1, 4); /* lower bound */
}

void sink_copybin_params(const sink_copybuf_t *b, const size_t *off, int n, const char **vals,
                         int *lens, int *fmts) {
    for (int i = 0; i < n; i++) {
        vals[i] = b->data + off[i];
        lens[i] = (int)(off[i + 1] - off[i]);
        fmts[i] = 1;
    }
}
