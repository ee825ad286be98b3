/* Telemetry on the sink's connection (migrations/003_telemetry.sql): the drift window's rows
 * (written by sink/drift_judge.c), the drift statuses read for /metrics, GPU memory rows. Each is
 * one autocommitted statement with bound parameters, issued by the thread that owns the sink
 * between result transactions; a failure never touches results. Returns COMMON_OK, COMMON_RETRY
 * (connection lost: the caller reconnects when it suits it) or COMMON_FATAL (e.g. the telemetry
 * tables are missing: 'reclass migrate'). */
#ifndef RECLASS_SINK_TELEMETRY_H
#define RECLASS_SINK_TELEMETRY_H

#include <stddef.h>
#include <stdint.h>

#include "sink/sink.h"

#define SINK_DRIFT_BINS 10

typedef struct {
    const char *tenant;
    int overflow; /* 1: the row aggregates tenants beyond the worker's capacity ("_other") */
    long tickets;
    const int64_t *label_counts; /* (n_labels) */
    const int64_t *hist;         /* (SINK_DRIFT_BINS) confidence histogram */
    double confidence_sum;
    long truncated;
    int64_t tokens;
} sink_drift_row_t;

typedef struct sink_drift_s {
    int64_t window_start_s; /* unix seconds */
    int window_s;
    const char *model;
    const char *worker;        /* hostname:pid */
    const char *const *labels; /* (n_labels) label names, index = label id */
    int n_labels;
    const sink_drift_row_t *rows; /* (n_rows) */
    int n_rows;
} sink_drift_t;
/* A window is written with its judgment: sink/drift_judge.h. */

typedef struct {
    const char *worker;
    const char *backend;
    const char *precision;
    int64_t device_total_bytes; /* < 0: unknown (NULL) */
    int64_t device_used_bytes;
    int64_t weights_bytes;
    int64_t arena_bytes;
    int64_t allocations_after_init;
    int token_budget;
    int device;  /* the encoder's device (a CUDA ordinal); < 0: the host (cpu), stored NULL */
    int encoder; /* the encoder within its worker, 0 .. N-1 */
} sink_gpu_memory_t;

/* Inserts one gpu_memory row (one encoder's, migrations/019_gpu_memory_device.sql) stamped
 * now(). */
common_status_t sink_write_gpu_memory(sink_t *sink, const sink_gpu_memory_t *row, common_err_t *e);

/* After a window is written (judged: sink/drift_judge.h): each tenant's newest status of model
 * since since_s (unix seconds) read from drift_status worst first: fn gets at most max_rows
 * tenants with their level (3 drift, 2 watch, 1 ok, 0 not judged: sparse or no baseline),
 * highest level first, then count_fn the number of tenants per status (drift, watch, ok,
 * sparse, no_baseline) over all of them. */
typedef void (*sink_drift_status_fn)(void *ctx, const char *tenant, int level);
typedef void (*sink_drift_count_fn)(void *ctx, const char *status, long tenants);
common_status_t sink_drift_status(sink_t *sink, const char *model, int64_t since_s, int max_rows,
                                  sink_drift_status_fn fn, sink_drift_count_fn count_fn, void *ctx,
                                  common_err_t *e);

#endif
