/* What the sink tests and sink_bench read of a sink beyond sink/sink.h (tests/lib/sink_stats.c,
 * on the sink's internals): the product has none of it. */
#ifndef RECLASS_TESTS_LIB_SINK_STATS_H
#define RECLASS_TESTS_LIB_SINK_STATS_H

#include "sink/sink.h"

/* Of the rows in the last committed sink_write: how many were new to ticket_results (the rest
 * were redeliveries, updated in place and not counted in jobs.done). */
long sink_last_inserted(const sink_t *sink);
long sink_last_rows(const sink_t *sink);

/* Writes so far that met an already-stored ticket on the fast path and were redone as an
 * upsert (redeliveries; a telemetry counter). */
long sink_fallbacks(const sink_t *sink);

#endif
