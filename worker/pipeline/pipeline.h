/* `reclass run`: the job pipeline, Kafka in, PostgreSQL out, nothing lost, nothing twice.
 *
 * Three threads share one lock:
 *   poll (the caller's thread): consumes, decodes, tokenizes, pushes into the length-sorting
 *     accumulator; undecodable records go to the dead-letter topic; pauses the partitions when
 *     the accumulator is full or PostgreSQL is down, while it keeps polling;
 *   encoder: pops token-budgeted batches (when ready or at the oldest item's deadline), runs
 *     the backend, turns logits into label, confidence and top-k;
 *   sink: writes the results of one or more batches per transaction; only after COMMIT are
 *     their offsets marked committed and the contiguous committed prefix stored to Kafka.
 *     A lost connection pauses consumption and retries the same rows after reconnecting
 *     with exponential backoff.
 * On revocation the revoked partitions' committed prefix is stored and their in-flight work is
 * dropped from offset tracking (rows may still be written: the upsert makes that harmless).
 * SIGTERM/SIGINT or --idle-exit: stop fetching, finish in-flight batches, store and commit
 * offsets, leave the group, exit 0.
 * Telemetry (worker/pipeline/telemetry.c): every thread bumps the atomics of
 * worker/observe/metrics.h, served by --http-port (/healthz /readyz /metrics); the sink thread also
 * owns the drift windows (worker/observe/drift.h) and writes them and the gpu_memory rows between
 * result transactions. */
#ifndef RECLASS_WORKER_PIPELINE_H
#define RECLASS_WORKER_PIPELINE_H

#include "worker/cli/config.h"

/* Runs until signalled, idle (cfg->idle_exit_s) or a fatal error. Returns the exit code:
 * 0 clean, 1 runtime failure, 2 configuration error (message on stderr). */
int worker_pipeline_run(const worker_run_cfg_t *cfg);

/* What one run did (the exit JSON line, as numbers). */
typedef struct {
    long tickets;      /* rows committed */
    long dead_letters; /* delivered to the dead-letter topic */
    long truncated;
    long batches;
    long revoked_partitions; /* partitions taken away by rebalances (or at close) */
    long dropped_in_flight;  /* uncommitted records of revoked partitions left unstored */
    double seconds;          /* first record to last commit */
    double encoder_seconds;
    double non_encoder_share;
} worker_pipeline_stats_t;

/* worker_pipeline_run that also reports its statistics (stats may be NULL). */
int worker_pipeline_run_ex(const worker_run_cfg_t *cfg, worker_pipeline_stats_t *stats);

#endif
