/* The poll thread's lanes: holds, the overflow pushed most urgent first, backpressure (see
 * worker/pipeline/pipeline_int.h). */
#include <limits.h>
#include <stdio.h>

#include "common/err.h"
#include "worker/pipeline/pipeline_int.h"

/* Lanes: while tickets of a lane wait or are in flight, the less urgent lanes' topics are held
 * (consumers_consumer_hold_above); released as soon as the lane has none. A backlog
 * (poll.bp_hold) holds every lane but the most urgent one, which is still read. */
void pl_hold_lanes(pl_t *pl) {
    int n = consumers_consumer_n_lanes(pl->poll.consumer);
    if (n < 2) return;
    int prio = INT_MAX;
    for (int l = 0; l < n && prio == INT_MAX; l++)
        if (atomic_load_explicit(&worker_metrics.lane_live[l], memory_order_relaxed) > 0)
            prio = consumers_consumer_lane_priority(pl->poll.consumer, l);
    int first = consumers_consumer_lane_priority(pl->poll.consumer, 0);
    if (pl->poll.bp_hold && first < prio) prio = first;
    if (consumers_consumer_hold_above(pl->poll.consumer, prio) < 0)
        common_logf(stderr, "could not hold or release the less urgent lanes\n");
}

/* Pushes the overflow items the accumulator takes, in order, those of the lanes more urgent
 * than the last first (the room a batch frees goes to them); one refused (its tenant at its
 * cap) does not keep those of other tenants or lanes behind it waiting. Returns 1 when some
 * remain. */
int pl_drain_overflow(pl_t *pl) {
    if (!pl->poll.ovf_head) return 0;
    int64_t now = common_now_ms();
    int pushed = 0, urgent = 0;
    const int bulk = consumers_consumer_n_lanes(pl->poll.consumer) - 1; /* the least urgent */
    pthread_mutex_lock(&pl->q.mu);
    pl_item_t *last = NULL;
    for (int pass = bulk > 0 ? 0 : 1; pass < 2; pass++) {
        pl_item_t **pp = &pl->poll.ovf_head;
        last = NULL;
        while (*pp) {
            pl_item_t *it = *pp;
            if (pass == 0 && it->lane >= bulk) {
                last = it;
                pp = &it->next;
                continue;
            }
            it->arrived_ms = now;
            int prio = it->t.has_priority ? it->t.priority : 0;
            if (worker_fair_push(pl->q.acc, it, it->n_ids, it->lane, it->t.tenant, prio, now) !=
                COMMON_OK) {
                last = it;
                pp = &it->next;
                continue;
            }
            *pp = it->next;
            it->next = NULL;
            pl->poll.ovf_n--;
            pushed = 1;
            urgent |= pass == 0;
        }
    }
    pl->poll.ovf_tail = last;
    if (pushed) pthread_cond_signal(&pl->q.cv_enc);
    if (urgent) pthread_cond_signal(&pl->q.cv_room); /* an encoder waiting for room takes it */
    pthread_mutex_unlock(&pl->q.mu);
    return pl->poll.ovf_head != NULL;
}

/* Backpressure (poll thread, each turn): a full accumulator or a database that is down pauses
 * every partition, resumed once half the accumulator is free. With several lanes a backlog
 * pauses the less urgent lanes only: the most urgent one is still read (into the overflow,
 * whose room it takes first), up to PL_OVERFLOW_URGENT_MAX records. */
void pl_backpressure(pl_t *pl, int full, int sink_down, int pending) {
    int lanes_only = !sink_down && consumers_consumer_n_lanes(pl->poll.consumer) > 1 &&
                     pl->poll.ovf_n < PL_OVERFLOW_URGENT_MAX;
    if ((full && !lanes_only) || sink_down) {
        if (!consumers_consumer_paused(pl->poll.consumer) &&
            consumers_consumer_pause(pl->poll.consumer) == 0) {
            pl->poll.pauses++;
            worker_metrics_add(&worker_metrics.pauses, 1);
        }
    } else if (full) {
        if (!pl->poll.bp_hold) {
            pl->poll.bp_hold = 1;
            pl_hold_lanes(pl);
            pl->poll.pauses++;
            worker_metrics_add(&worker_metrics.pauses, 1);
        }
    } else if (pending < pl->ses.acc.max_pending_items / 2) {
        if (consumers_consumer_paused(pl->poll.consumer))
            consumers_consumer_resume(pl->poll.consumer);
        if (pl->poll.bp_hold) {
            pl->poll.bp_hold = 0;
            pl_hold_lanes(pl);
        }
    }
}
