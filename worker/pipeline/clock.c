/* The timed waits and item destructor that every pipeline thread uses
 * (worker/pipeline/pipeline_int.h). */
#include <stdlib.h>
#include <time.h>

#include "worker/pipeline/pipeline_int.h"

void pl_timedwait_ms(pthread_cond_t *cv, pthread_mutex_t *mu, int ms) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_nsec += (long)(ms % 1000) * 1000000L;
    ts.tv_sec += (time_t)(ms / 1000) + ts.tv_nsec / 1000000000L;
    ts.tv_nsec %= 1000000000L;
    pthread_cond_timedwait(cv, mu, &ts);
}

void pl_wait_until_ms(pthread_cond_t *cv, pthread_mutex_t *mu, int64_t wake_ms) {
    int64_t dt = wake_ms - common_now_ms();
    if (dt > PL_RECHECK_MS) dt = PL_RECHECK_MS; /* re-check flags regularly */
    if (dt < 1) dt = 1;
    pl_timedwait_ms(cv, mu, (int)dt);
}

void pl_item_free(pl_item_t *it) {
    if (!it) return;
    if (it->live)
        atomic_fetch_sub_explicit(&worker_metrics.lane_live[it->lane], 1, memory_order_relaxed);
    consumers_ticket_free(&it->t);
    free(it->ids);
    free(it->top_k_json);
    free(it->key);
    free(it->value);
    free(it->dlq_error);
    free(it);
}
