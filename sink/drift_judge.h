/* One drift window written with its judgment (migrations/020_drift_worker_judge.sql): the worker
 * judges in C, the database stores. In one transaction: the window's lock (its writers take
 * turns, so the last one reads every earlier writer's committed rows), once an hour the judged
 * windows of the hours before into drift_judged (drift_judged_close), the rows stored of the
 * window for the worker's tenants (other workers', or this worker's before a restart) summed,
 * the references stored for the window's hour (those missing or of another hour refreshed:
 * drift_reference_refresh), the caller's judge, then one statement: the window's rows with
 * their scores, their hour roll-up (trigger) and every tenant's status (and the judgments in
 * drift_judged when the window's hour is already closed).
 * Returns COMMON_OK, COMMON_RETRY (connection lost) or COMMON_FATAL (e.g. not migrated). */
#ifndef RECLASS_SINK_DRIFT_JUDGE_H
#define RECLASS_SINK_DRIFT_JUDGE_H

#include <stdint.h>

#include "sink/telemetry.h"

/* What the database holds for one row's tenant, by label id of the window's label list. */
typedef struct {
    /* the window's rows stored before this write, summed (0 tickets: none) */
    int64_t tickets;
    int overflow;
    int64_t hist[SINK_DRIFT_BINS];
    int64_t *counts; /* (n_labels), the caller's; names outside the label list left out */
    /* the reference of the window's hour: ref_tickets < 0 none (no_baseline) */
    int64_t ref_tickets;
    int64_t ref_hist[SINK_DRIFT_BINS];
    int64_t *ref_counts; /* (n_labels), the caller's */
    int ref_pinned;      /* a pinned baseline: its label map is never NULL */
    char ref_name[128];  /* 'trailing 7 days', 'baseline N (...)', 'none' */
} sink_drift_stored_t;

/* One row's judgment: drift_judged's columns; has_* 0 stores NULL. */
typedef struct {
    const char *status; /* "drift", "watch", "ok", "sparse", "no_baseline" */
    double label_psi, label_js, confidence_psi, confidence_js, low_share, low_change;
    int has_label, has_confidence, has_low, has_low_change;
    int64_t tickets; /* the window summed over its writers */
    int overflow;
    const int *labels_new; /* (n_new) label ids */
    int n_new;
    const int *labels_gone; /* (n_gone) label ids */
    int n_gone;
} sink_drift_judged_t;

/* Judges every row of d from stored (n_rows) into judged (n_rows). */
typedef void (*sink_drift_judge_fn)(void *ctx, const sink_drift_t *d,
                                    const sink_drift_stored_t *stored, sink_drift_judged_t *judged);

/* stored and judged: n_rows each, the caller's (their counts buffers too). */
common_status_t sink_write_drift_judged(sink_t *sink, const sink_drift_t *d,
                                        sink_drift_stored_t *stored, sink_drift_judged_t *judged,
                                        sink_drift_judge_fn judge, void *ctx, common_err_t *e);

/* The judged windows of model before before_s (unix s) into drift_judged now rather than at
 * their hour's close (drift_judged_close): a worker that stops, for its last hour. */
common_status_t sink_drift_judged_close(sink_t *sink, const char *model, int64_t before_s,
                                        common_err_t *e);

#endif
