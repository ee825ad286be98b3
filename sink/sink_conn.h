/* Internal to sink/: the connection of a sink, for sibling modules (sink/telemetry.c) that
 * issue their own statements between the sink's transactions. */
#ifndef RECLASS_SINK_CONN_H
#define RECLASS_SINK_CONN_H

#include <libpq-fe.h>

#include "sink/sink.h"

/* The sink's connection (owned by the sink), NULL when it has none. */
PGconn *sink_conn(sink_t *sink);

#endif
