#include "sink/copybuf.h"

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
    b->oom = 0;
}

int sink_copybuf_reserve(sink_copybuf_t *b, size_t extra) {
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
