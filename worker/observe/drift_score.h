/* A drift window's scores against its reference, computed in C with the formulas of the SQL
 * judge (migrations/004_drift.sql drift_compare, 013's drift_status_refresh): the PSI (smoothed
 * by drift_settings().eps over the union of bins) and the Jensen-Shannon divergence (base 2,
 * unsmoothed) of the label mix and of the 10-bin confidence histogram, the low-confidence share
 * (bins 0-4) and its change, the labels new in the window and gone from it, and the status.
 * tests/test_drift_score.c holds it equal to drift_compare on the same distributions and to
 * what the judge stores for a window and the reference it used.
 *
 * Pure: no allocation, no I/O; the caller owns every buffer. */
#ifndef RECLASS_WORKER_DRIFT_SCORE_H
#define RECLASS_WORKER_DRIFT_SCORE_H

#include <stdint.h>

#define WORKER_DRIFT_SCORE_BINS 10

/* drift_settings() of migration 004 */
#define WORKER_DRIFT_PSI_WATCH           0.1
#define WORKER_DRIFT_PSI_DRIFT           0.25
#define WORKER_DRIFT_EPS                 1e-4
#define WORKER_DRIFT_MIN_TICKETS_PER_BIN 10

typedef struct {
    const char *name;
    int64_t count;
} worker_drift_label_t;

/* A distribution: its labels sorted by name (strcmp: byte order, as COLLATE "C"), names
 * distinct, counts > 0 (the SQL sums drop labels summing to 0); its confidence histogram; its
 * tickets. A reference's labels NULL is the SQL's NULL label map (a trailing reference whose
 * windows name no label: no label is new against it); non-NULL with none is '{}' (a pinned
 * baseline's: every label of the window is new). */
typedef struct {
    const worker_drift_label_t *labels; /* (n_labels) */
    int n_labels;
    const int64_t *hist; /* (WORKER_DRIFT_SCORE_BINS) */
    int64_t tickets;
} worker_drift_dist_t;

/* drift_level's order: 0 no_baseline, 1 sparse, then ok, watch, drift */
typedef enum {
    WORKER_DRIFT_NO_BASELINE = 0,
    WORKER_DRIFT_SPARSE,
    WORKER_DRIFT_OK,
    WORKER_DRIFT_WATCH,
    WORKER_DRIFT_DRIFT,
} worker_drift_status_t;

/* The SQL's NULLs: a has_ flag of 0 means the value is NULL. */
typedef struct {
    double label_psi, label_js;           /* has_label: both sides hold labels */
    double confidence_psi, confidence_js; /* has_confidence: both histograms hold tickets */
    int has_label, has_confidence;
    double low_share;  /* has_low: the window has tickets */
    double low_change; /* has_low_change: and the reference too */
    int has_low, has_low_change;
    worker_drift_status_t status;
    int n_new;  /* labels in the window, none in the reference: new_idx (cur's indexes) */
    int n_gone; /* none in the window where the reference expects >= 5: gone_idx (ref's) */
} worker_drift_score_t;

/* Scores cur against ref (NULL: no reference: no_baseline). new_idx holds room for
 * cur->n_labels indexes, gone_idx for ref->n_labels; both come back in name order. */
void worker_drift_score(const worker_drift_dist_t *cur, const worker_drift_dist_t *ref,
                        int *new_idx, int *gone_idx, worker_drift_score_t *out);

/* "drift", "watch", "ok", "sparse", "no_baseline" */
const char *worker_drift_status_name(worker_drift_status_t s);

#endif
