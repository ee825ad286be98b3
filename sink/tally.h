/* Per-write job tally: the distinct jobs of one sink_write, in job_id byte order (the order
 * their jobs rows are locked in, so concurrent writers never deadlock on them), with the
 * job's total and tenant from the records and how many of its tickets were new. */
#ifndef RECLASS_SINK_TALLY_H
#define RECLASS_SINK_TALLY_H

#include <stdint.h>

#include "sink/sink.h"

typedef struct {
    const char *job_id; /* borrowed from the caller's rows */
    const char *tenant; /* first non-NULL tenant among the job's rows */
    int32_t total;      /* the job_total its rows say; -1 when they disagree */
    int32_t rows;       /* rows of this job in the write */
    int32_t fresh;      /* of those, tickets new to ticket_results (set by the writer) */
} sink_job_t;

typedef struct {
    /* (order_cap) row pointers sorted by (job_id, ticket_id): the fast path COPYs in this
     * order, so concurrent writers take row locks in one order (no deadlocks) and btree
     * inserts land near each other */
    const sink_result_t **order;
    int order_cap;
    sink_job_t *jobs; /* (n_jobs) distinct jobs, sorted by job_id; capacity jobs_cap */
    int n_jobs, jobs_cap;
} sink_tally_t;

/* Rebuilds the tally for rows; fresh starts at 0. Memory grows to the high-water mark and is
 * reused. Returns 0, or -1 when out of memory. */
int sink_tally_build(sink_tally_t *t, const sink_result_t *rows, int n);

/* The job with this id, or NULL. */
sink_job_t *sink_tally_find(const sink_tally_t *t, const char *job_id);

void sink_tally_free(sink_tally_t *t);

#endif
