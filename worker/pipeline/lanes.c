/* The poll thread's lane holds (see worker/pipeline/pipeline_int.h). */
#include <limits.h>
#include <stdio.h>

#include "worker/pipeline/pipeline_int.h"

/* Lanes: while tickets of a lane wait or are in flight, the less urgent lanes' topics are held
 * (consumers_consumer_hold_above); released as soon as the lane has none. */
void pl_hold_lanes(pl_t *pl) {
    int n = consumers_consumer_n_lanes(pl->poll.consumer);
    if (n < 2) return;
    int prio = INT_MAX;
    for (int l = 0; l < n && prio == INT_MAX; l++)
        if (atomic_load_explicit(&worker_metrics.lane_live[l], memory_order_relaxed) > 0)
            prio = consumers_consumer_lane_priority(pl->poll.consumer, l);
    if (consumers_consumer_hold_above(pl->poll.consumer, prio) < 0)
        fprintf(stderr, "reclass run: could not hold or release the less urgent lanes\n");
}
