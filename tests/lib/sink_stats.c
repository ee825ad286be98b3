#include "tests/lib/sink_stats.h"

#include "sink/sink_int.h"

long sink_last_inserted(const sink_t *s) {
    return s ? s->last_inserted : 0;
}

long sink_last_rows(const sink_t *s) {
    return s ? s->last_rows : 0;
}

long sink_fallbacks(const sink_t *s) {
    return s ? s->fallbacks : 0;
}
