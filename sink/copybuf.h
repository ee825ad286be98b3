/* Growable byte buffer for COPY data (see sink/copybin.h for the binary format writer). It
 * grows to its high-water mark and is reused across writes: reset keeps the memory. */
#ifndef RECLASS_SINK_COPYBUF_H
#define RECLASS_SINK_COPYBUF_H

#include <stddef.h>

typedef struct {
    char *data; /* (len) bytes of COPY data */
    size_t len;
    size_t cap;
    int oom; /* set when a grow failed; everything after it is dropped */
} sink_copybuf_t;

void sink_copybuf_init(sink_copybuf_t *b);
void sink_copybuf_free(sink_copybuf_t *b);
void sink_copybuf_reset(sink_copybuf_t *b);

/* Room for extra more bytes: 0, or -1 (and oom set) when the buffer cannot grow. */
int sink_copybuf_reserve(sink_copybuf_t *b, size_t extra);

#endif
