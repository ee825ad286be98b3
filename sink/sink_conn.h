/* Internal to sink/: the connection of a sink, for sibling modules (sink/telemetry.c) that
 * issue their own statements between the sink's transactions (sink/drift_judge.c too). */
#ifndef RECLASS_SINK_CONN_H
#define RECLASS_SINK_CONN_H

#include <jansson.h>
#include <libpq-fe.h>

#include "sink/sink.h"

/* The sink's connection (owned by the sink), NULL when it has none. */
PGconn *sink_conn(sink_t *sink);

struct sink_drift_s;
/* A drift window's rows as the JSON array of row objects drift_windows' writes expand
 * (sink/telemetry.c); NULL when out of memory. The caller owns it (json_decref). */
json_t *sink_drift_rows_array(const struct sink_drift_s *d);

#endif
