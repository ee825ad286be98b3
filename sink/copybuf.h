/* Builder for PostgreSQL COPY ... FROM STDIN text-format data: fields separated by tabs, rows
 * ended by newlines, NULL as \N, and backslash, tab, newline and carriage return inside text
 * escaped so any string round-trips byte for byte. The buffer grows to its high-water mark
 * and is reused across writes (reset keeps the memory). */
#ifndef RECLASS_SINK_COPYBUF_H
#define RECLASS_SINK_COPYBUF_H

#include <stddef.h>
#include <stdint.h>

typedef struct {
    char *data; /* (len) bytes of COPY text, not NUL-terminated */
    size_t len;
    size_t cap;
    int row_fields; /* fields written on the current row: a tab goes before all but the first */
    int oom;        /* set when a grow failed; everything after it is dropped */
} sink_copybuf_t;

void sink_copybuf_init(sink_copybuf_t *b);
void sink_copybuf_free(sink_copybuf_t *b);
void sink_copybuf_reset(sink_copybuf_t *b);

void sink_copybuf_text(sink_copybuf_t *b, const char *s); /* NULL -> SQL NULL */
void sink_copybuf_int(sink_copybuf_t *b, int64_t v);
void sink_copybuf_float(sink_copybuf_t *b, double v); /* %.9g: a float (real) round-trips exactly */
void sink_copybuf_bool(sink_copybuf_t *b, int v);
void sink_copybuf_null(sink_copybuf_t *b);
void sink_copybuf_end_row(sink_copybuf_t *b);

#endif
