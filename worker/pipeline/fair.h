/* Lanes and fair shares: the accumulator of `reclass run` as one length-sorting accumulator
 * (worker/pipeline/accum.h) per class, a class being a lane (a topic priority, 0 = the most
 * urgent) and a tenant. Bounds (items, tokens) are the whole's, plus a cap on the tokens one
 * class holds (a tenant in one lane), so a giant job cannot take the whole window.
 *
 * Admission: the whole's bounds are the memory bound, max_pending_items and max_pending_tokens,
 * never passed. Within them, a more urgent record always finds room that a backlog of plainer
 * ones cannot take: records of the last lane leave a reserve (one token budget and the same
 * share of the items; less when the bounds are tight, fair.c: reserve_of) to the lanes more
 * urgent than it, and its records of priority 0 leave one more to its priorities above 0 (with
 * priority on: priority_step_ms > 0). Within a class, records of priority 0 leave the same
 * tokens of the class's cap to the higher priorities. So a bulk backlog that fills the
 * accumulator, or its tenant's cap, never keeps an urgent ticket (or a priority one) out of it.
 *
 * A lane more urgent than the last one does not wait for a batch to fill: while one has items,
 * a batch is ready at once and holds that lane alone (its own tickets, at most the budget), so
 * it is encoded and written ahead of the bulk. Otherwise a batch is filled from the most urgent
 * lane that has items, then, while it has room, from the next lanes. Within a lane, tenants take
 * turns by deficit round robin weighted in tokens: each turn adds quantum * weight tokens (quantum
 * = the longest item) to a tenant's deficit, and the tenant's longest (or overdue) items are taken
 * while they fit both its deficit and the batch. So among tenants that have items queued, each gets
 * weight / sum(weights) of the encoded tokens. When the batch ends a turn, the turn goes on in the
 * next batch.
 *
 * On a backend that runs a batch inside its submit (the cpu's), a batch without urgent records
 * holds half of the budget while a lane more urgent than the last is configured, so an urgent
 * record waits for half a batch at most (worker_fair_plain_budget).
 *
 * The first WORKER_FAIR_TENANTS tenants with items queued get a class of their own; further
 * tenants share the class "_other" (weight 1) until a class is empty again. On a padded
 * backend (cost = items * longest) a batch holds one class. Not thread-safe: the caller holds
 * its own lock; time is passed in, as for accum.h. */
#ifndef RECLASS_WORKER_FAIR_H
#define RECLASS_WORKER_FAIR_H

#include <stddef.h>
#include <stdint.h>

#include "worker/pipeline/accum.h"

#define WORKER_FAIR_MAX_LANES   8
#define WORKER_FAIR_TENANTS     8  /* classes of their own; then "_other" */
#define WORKER_FAIR_MAX_WEIGHTS 64 /* entries of --tenant-weight */
#define WORKER_FAIR_MAX_WEIGHT  1000

typedef struct {
    int n;
    char name[WORKER_FAIR_MAX_WEIGHTS][257];
    int weight[WORKER_FAIR_MAX_WEIGHTS];
} worker_fair_weights_t;

/* Parses "T=W,T=W" (W in 1..WORKER_FAIR_MAX_WEIGHT) into out (NULL: only check it). COMMON_OK,
 * or COMMON_USAGE with e saying what to fix. */
common_status_t worker_fair_weights_parse(const char *s, worker_fair_weights_t *out,
                                          common_err_t *e);

typedef struct {
    worker_accum_cfg_t acc; /* budget, waits and the whole's bounds */
    int n_lanes;            /* 1..WORKER_FAIR_MAX_LANES */
    long tenant_max_tokens; /* tokens one tenant may hold in a lane; 0 = half of
                             * max_pending_tokens */
    const char *weights;    /* "T=W,..." or NULL: every tenant weighs 1 */
    int synchronous;        /* the backend runs a batch inside its submit (its props:
                             * gpu_backend_props_t.synchronous): see worker_fair_plain_budget */
} worker_fair_cfg_t;

typedef struct worker_fair worker_fair_t;

/* COMMON_OK, or COMMON_USAGE (lanes, weights or the accumulator's settings) or COMMON_FATAL (no
 * memory) with e set. */
common_status_t worker_fair_init(const worker_fair_cfg_t *cfg, worker_fair_t **out,
                                 common_err_t *e);
void worker_fair_free(worker_fair_t *f);

/* COMMON_OK, COMMON_RETRY (full: the whole, or this tenant at its cap in this lane, for a
 * record of this lane and priority (see Admission above): pop, then try again)
 * or COMMON_USAGE (len out of range, or lane outside 0..n_lanes-1). prio: the item's priority
 * within its class (worker_accum_push_prio; a tenant's turn still comes by its share). */
common_status_t worker_fair_push(worker_fair_t *f, void *item, int len, int lane,
                                 const char *tenant, int prio, int64_t now_ms);

/* As worker_accum_ready, over everything held; also 1 when a push could be refused for a
 * tenant's cap (a producer told FULL can always pop a non-empty batch), and whenever
 * worker_fair_urgent_lane has one. */
int worker_fair_ready(const worker_fair_t *f, int64_t now_ms);
int64_t worker_fair_next_deadline(const worker_fair_t *f);

/* Forms the next batch as described above (flush: even when not ready). Returns the count. */
int worker_fair_pop(worker_fair_t *f, int64_t now_ms, int flush, void **items, int *lens, int cap);

/* The lane the next batch holds alone: the most urgent one with items when it is more urgent
 * than the last lane; -1 when there is none (or one lane only). */
int worker_fair_urgent_lane(const worker_fair_t *f);

int worker_fair_pending_items(const worker_fair_t *f);
long worker_fair_pending_tokens(const worker_fair_t *f);
int worker_fair_pending_lane(const worker_fair_t *f, int lane);
/* The token budget of a batch without an urgent lane's records in it (the whole budget, or
 * less: fair.c, plain_budget_of). */
long worker_fair_plain_budget(const worker_fair_t *f);
/* The cap in tokens per tenant as configured (0 resolved). */
long worker_fair_tenant_cap(const worker_fair_t *f);

#endif
