/* Host-side drift statistics of `reclass run`: per time window and tenant (one model per
 * worker), the count per label, a 10-bin confidence histogram, the confidence sum, truncated
 * texts and tokens. Flushed to PostgreSQL (drift_windows) when a window closes.
 *
 * Fixed capacity, allocated once by worker_drift_init and never grown: max_tenants rows per
 * window plus one "_other" row that aggregates every further tenant (and tenant names longer
 * than WORKER_DRIFT_TENANT_MAX - 1 bytes); WORKER_DRIFT_SLOTS windows (the open one and the
 * closed ones waiting for the database). When every slot holds a closed window that could not
 * be written, the oldest is dropped (counted) rather than memory growing.
 *
 * Drift is approximate statistics: a ticket redelivered after a crash is counted again. Exact
 * per-ticket results are in ticket_results.
 *
 * Not thread-safe: one thread (the pipeline's sink thread) owns it. */
#ifndef RECLASS_WORKER_DRIFT_H
#define RECLASS_WORKER_DRIFT_H

#include <stddef.h>
#include <stdint.h>

#define WORKER_DRIFT_BINS       10
#define WORKER_DRIFT_TENANT_MAX 128 /* bytes with the NUL */
#define WORKER_DRIFT_SLOTS      4
#define WORKER_DRIFT_OTHER      "_other"

typedef struct {
    char tenant[WORKER_DRIFT_TENANT_MAX];
    int overflow; /* 1 for the "_other" row */
    long tickets;
    long truncated;
    int64_t tokens;
    double confidence_sum;
    int64_t hist[WORKER_DRIFT_BINS]; /* bin i: confidence in [i/10, (i+1)/10), 1.0 in bin 9 */
    int64_t *label_counts;           /* (num_labels) */
} worker_drift_row_t;

typedef struct {
    int64_t start_s; /* unix seconds, a multiple of window_s */
    int window_s;
    int n_rows; /* named rows in use; once closed, also the "_other" row (last) when used */
    worker_drift_row_t *rows; /* (max_tenants + 1) */
} worker_drift_window_t;

typedef struct {
    int window_s;    /* >= 1 */
    int max_tenants; /* >= 1 */
    int num_labels;  /* >= 1 */
} worker_drift_cfg_t;

typedef struct worker_drift worker_drift_t;

/* Allocates everything the structure will ever use. 0, or -1 with err. */
int worker_drift_init(const worker_drift_cfg_t *cfg, worker_drift_t **out, char *err,
                      size_t errlen);
void worker_drift_free(worker_drift_t *d);

/* Counts one classified ticket at unix time now_s. A time past the open window closes it
 * first. tenant may be NULL (counted as ""); label_id outside 0..num_labels-1 is ignored. */
void worker_drift_add(worker_drift_t *d, int64_t now_s, const char *tenant, int label_id,
                      float confidence, int truncated, int tokens);

/* Closes the open window when now_s is past its end (call regularly: a quiet window must
 * still be flushed). final != 0 closes it regardless (shutdown). Empty windows are never
 * queued. Returns the number of closed windows waiting. */
int worker_drift_tick(worker_drift_t *d, int64_t now_s, int final);

/* The oldest closed window waiting to be written, or NULL. Valid until worker_drift_pop. */
const worker_drift_window_t *worker_drift_oldest(const worker_drift_t *d);
/* Frees the oldest closed window's slot (after it was written). */
void worker_drift_pop(worker_drift_t *d);

/* Closed windows dropped because every slot was taken. */
long worker_drift_dropped(const worker_drift_t *d);
/* Bytes allocated by init (the structure's whole footprint). */
size_t worker_drift_bytes(const worker_drift_t *d);
/* The open window (tests, /metrics); NULL when nothing was counted since the last close. */
const worker_drift_window_t *worker_drift_open(const worker_drift_t *d);

#endif
