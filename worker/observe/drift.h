/* Host-side drift statistics of `reclass run`: per time window and tenant (one model per
 * worker), the count per label, a 10-bin confidence histogram, the confidence sum, truncated
 * texts and tokens. Flushed to PostgreSQL (drift_windows) when a window closes.
 *
 * Fixed capacity, allocated once by worker_drift_init and never grown: max_tenants rows per
 * window plus one "_other" row that aggregates every further tenant (and tenant names longer
 * than WORKER_DRIFT_TENANT_MAX - 1 bytes); WORKER_DRIFT_SLOTS windows (the open one and the
 * closed ones waiting for the database). When every slot holds a closed window that could not
 * be written, the oldest is dropped (counted) rather than memory growing. The whole footprint
 * is worker_drift_bytes_for(): at most WORKER_DRIFT_SLOTS * (288 + 8 * num_labels) bytes per
 * tenant (a 256-byte row, its label counts, <= 32 bytes of hash slots; the slots of the folded
 * set are sized for at least 4,096 tenants), 7.3 MB for the default 4,096 tenants, 20 labels.
 *
 * A window whose tenants did not all fit says so: folded_tenants (distinct 32-bit name hashes,
 * counted up to max(4096, max_tenants + 1)) and folded_tickets, and every row of it is flagged
 * overflow (a tenant folded here and named on another worker sums partially over workers).
 *
 * Drift is approximate statistics: a ticket redelivered after a crash is counted again. Exact
 * per-ticket results are in ticket_results.
 *
 * Not thread-safe: one thread (the pipeline's sink thread) owns it. */
#ifndef RECLASS_WORKER_DRIFT_H
#define RECLASS_WORKER_DRIFT_H

#include <stddef.h>
#include <stdint.h>

#include "common/err.h"

#define WORKER_DRIFT_BINS        10
#define WORKER_DRIFT_TENANT_MAX  128 /* bytes with the NUL */
#define WORKER_DRIFT_SLOTS       4
#define WORKER_DRIFT_OTHER       "_other"
#define WORKER_DRIFT_MAX_TENANTS 4096 /* default tenants per window (--drift-max-tenants) */

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
    int n_rows;         /* named rows in use; once closed, also the "_other" row (last) when used */
    int folded_tenants; /* distinct tenants counted in "_other" */
    long folded_tickets;      /* their tickets */
    worker_drift_row_t *rows; /* (max_tenants + 1) */
} worker_drift_window_t;

typedef struct {
    int window_s;    /* >= 1 */
    int max_tenants; /* >= 1 */
    int num_labels;  /* >= 1 */
} worker_drift_cfg_t;

typedef struct worker_drift worker_drift_t;

/* Allocates everything the structure will ever use. COMMON_OK, or with e: COMMON_BUG a setting
 * below 1 (its callers give the defaults), COMMON_FATAL out of memory. */
common_status_t worker_drift_init(const worker_drift_cfg_t *cfg, worker_drift_t **out,
                                  common_err_t *e);
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
/* Bytes init allocates for cfg (the structure's whole footprint), for the help text and log. */
size_t worker_drift_bytes_for(const worker_drift_cfg_t *cfg);
/* Bytes allocated by init (the structure's whole footprint). */
size_t worker_drift_bytes(const worker_drift_t *d);
/* The open window (tests, /metrics); NULL when nothing was counted since the last close. */
const worker_drift_window_t *worker_drift_open(const worker_drift_t *d);

#endif
