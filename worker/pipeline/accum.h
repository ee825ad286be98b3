/* The length-sorting accumulator: items (tokenized tickets) wait here until a batch is worth
 * forming. Batches are bounded by a token budget, not a count; an item never waits past its
 * deadline once the clock has passed it; pending items and tokens are bounded, and a full
 * accumulator tells the producer to back off (it never drops). Not thread-safe: the caller
 * holds its own lock. Time is passed in (milliseconds, any monotonic origin) so tests can
 * drive the clock. */
#ifndef RECLASS_WORKER_ACCUM_H
#define RECLASS_WORKER_ACCUM_H

#include <stddef.h>
#include <stdint.h>

#include "common/err.h"
#include "common/status.h"

typedef struct {
    int token_budget; /* a batch costs at most this many tokens */
    int padded;       /* 1: cost = n_items * longest (padded backend); 0: sum of lengths */
    int max_wait_ms;  /* the oldest pending item is emitted by arrival + max_wait_ms */
    int max_pending_items;
    long max_pending_tokens;
    int max_len; /* longest item accepted; a budget below it is a config error */
    /* An item of priority p (clamped to 0..WORKER_ACCUM_MAX_PRIORITY) is due p * priority_step_ms
     * earlier: it goes before lower priorities that arrived less than (p - q) steps before it,
     * never before those older than that (the age bound: no priority starves). 0 = ignored. */
    int priority_step_ms;
} worker_accum_cfg_t;

#define WORKER_ACCUM_MAX_PRIORITY 9

typedef struct worker_accum worker_accum_t;

/* COMMON_OK, or COMMON_USAGE with e saying what to fix (e.g. budget < max_len), COMMON_FATAL
 * out of memory. */
common_status_t worker_accum_init(const worker_accum_cfg_t *cfg, worker_accum_t **out,
                                  common_err_t *e);
void worker_accum_free(worker_accum_t *acc);

/* Adds an item; item is the caller's pointer, returned by pop; ownership stays with the caller.
 * COMMON_OK taken; COMMON_RETRY not taken (full: back off, pop a batch, try again);
 * COMMON_USAGE never fits (len <= 0 or len > max_len). */
common_status_t worker_accum_push(worker_accum_t *acc, void *item, int len, int64_t now_ms);
/* As worker_accum_push for an item of priority prio (higher first; see priority_step_ms). */
common_status_t worker_accum_push_prio(worker_accum_t *acc, void *item, int len, int prio,
                                       int64_t now_ms);

/* 1 when a batch should be formed now: a full budget's worth is pending, or the oldest
 * item's deadline has passed. */
int worker_accum_ready(const worker_accum_t *acc, int64_t now_ms);

/* Earliest deadline among pending items, or INT64_MAX when empty. */
int64_t worker_accum_next_deadline(const worker_accum_t *acc);

/* Forms one batch of similar lengths within budget, including every item whose deadline has
 * passed when they fit, and the overdue oldest one first. When the earliest due item has a
 * priority, it anchors the batch even before its deadline, and the pending items of its
 * priority or higher go first. With flush != 0 a batch is formed
 * even when not ready (drain at shutdown). Writes up to cap item pointers (and their lengths
 * when lens is non-NULL); returns the count, 0 when nothing is to be emitted. */
int worker_accum_pop(worker_accum_t *acc, int64_t now_ms, int flush, void **items, int *lens,
                     int cap);

/* worker_accum_pop within budget tokens (at most the configured budget) instead of the
 * configured budget, as a batch shared with other accumulators needs (worker/pipeline/fair.h);
 * an overdue oldest item that does not fit leaves the batch to the longest items that do.
 * Returns 0 when no pending item fits. */
int worker_accum_pop_budget(worker_accum_t *acc, int64_t now_ms, int flush, long budget,
                            void **items, int *lens, int cap);

int worker_accum_pending_items(const worker_accum_t *acc);
long worker_accum_pending_tokens(const worker_accum_t *acc);

/* Batch cost under the config's counting (padded or not). */
long worker_accum_cost(const worker_accum_cfg_t *cfg, const int *lens, int n);

#endif
