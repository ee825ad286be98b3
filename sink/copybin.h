/* Builder for PostgreSQL COPY ... FROM STDIN (FORMAT binary) data: a header, then per row a
 * field count and length-prefixed big-endian values, then a trailer. Nothing is escaped (text
 * goes through byte for byte) and the server skips text-to-number parsing. The column types
 * must match the target's exactly (int4 vs int8, real vs double), or the server rejects the
 * COPY: the sink's staging table is defined next to its writer for that reason. */
#ifndef RECLASS_SINK_COPYBIN_H
#define RECLASS_SINK_COPYBIN_H

#include <stdint.h>

#include "sink/copybuf.h"

void sink_copybin_header(sink_copybuf_t *b);
void sink_copybin_trailer(sink_copybuf_t *b);
void sink_copybin_row(sink_copybuf_t *b, int16_t n_fields);

void sink_copybin_text(sink_copybuf_t *b, const char *s);     /* NULL -> SQL NULL */
void sink_copybin_jsonb(sink_copybuf_t *b, const char *json); /* NULL -> SQL NULL */
void sink_copybin_int2(sink_copybuf_t *b, int16_t v);
void sink_copybin_int4(sink_copybuf_t *b, int32_t v);
void sink_copybin_int8(sink_copybuf_t *b, int64_t v);
void sink_copybin_float4(sink_copybuf_t *b, float v);
void sink_copybin_bool(sink_copybuf_t *b, int v);
void sink_copybin_null(sink_copybuf_t *b);
/* timestamptz from Unix milliseconds (binary form: microseconds since 2000-01-01 UTC); a
 * value outside PostgreSQL's range is written so that the server refuses it (22008) */
void sink_copybin_timestamptz_ms(sink_copybuf_t *b, int64_t unix_ms);

/* A one-dimensional array in binary parameter form: the header, then n elements written with
 * the functions above (an array element is encoded exactly like a COPY field). elem_oid is the
 * element type's OID and must match the parameter's declared type (e.g. $1::text[]). */
#define SINK_OID_TEXT   25
#define SINK_OID_INT2   21
#define SINK_OID_INT4   23
#define SINK_OID_INT8   20
#define SINK_OID_FLOAT4 700
void sink_copybin_array(sink_copybuf_t *b, uint32_t elem_oid, int n, int has_null);

/* n arrays written one after another into b, array i from off[i] to off[i + 1], as binary
 * parameters for libpq (PQsendQueryParams, PQsendQueryPrepared): vals, lens and fmts, n of each.
 * vals point into b: valid until b is written again. */
void sink_copybin_params(const sink_copybuf_t *b, const size_t *off, int n, const char **vals,
                         int *lens, int *fmts);

#endif
