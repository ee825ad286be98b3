/* The worker's judge of a drift window (migrations/020_drift_worker_judge.sql): each tenant's
 * row plus what the database holds of the window (other workers' rows) scored against the
 * reference stored for the window's hour, with worker/observe/drift_score.c. The callback that
 * sink_write_drift_judged calls between reading and writing.
 *
 * Allocated once for max_rows rows of n_labels labels: the buffers the sink fills and reads
 * (stored, judged) and the judge's own (labels in name order, the new and gone label ids). */
#ifndef RECLASS_WORKER_DRIFT_JUDGE_H
#define RECLASS_WORKER_DRIFT_JUDGE_H

#include "common/err.h"
#include "sink/drift_judge.h"

typedef struct worker_drift_judge worker_drift_judge_t;

/* labels: (n_labels) names by id, kept by the caller. COMMON_OK, or COMMON_FATAL out of
 * memory. */
common_status_t worker_drift_judge_init(int max_rows, int n_labels, const char *const *labels,
                                        worker_drift_judge_t **out, common_err_t *e);
void worker_drift_judge_free(worker_drift_judge_t *j);

/* The buffers of sink_write_drift_judged: (max_rows) each. */
sink_drift_stored_t *worker_drift_judge_stored(worker_drift_judge_t *j);
sink_drift_judged_t *worker_drift_judge_judged(worker_drift_judge_t *j);

/* A sink_drift_judge_fn (ctx: the worker_drift_judge_t). */
void worker_drift_judge_rows(void *ctx, const sink_drift_t *d, const sink_drift_stored_t *stored,
                             sink_drift_judged_t *judged);

#endif
