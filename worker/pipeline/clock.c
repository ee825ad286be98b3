/* The timed waits (a queue's counted too) and item destructor that every pipeline thread uses
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

void pl_queue_count(pl_stats_t *st, int q, int full, double since_s) {
    if (!st->first_record_s) return; /* waiting for the first record: no work yet */
    if (since_s < st->first_record_s) since_s = st->first_record_s;
    double dt = common_now_s() - since_s;
    pl_queue_stat_t *x = &st->queue[q];
    if (full) {
        x->pend_full++;
        x->pend_full_s += dt;
    } else {
        x->pend_empty++;
        x->pend_empty_s += dt;
    }
}

void pl_queue_wait(pl_stats_t *st, int q, int full, pthread_cond_t *cv, pthread_mutex_t *mu,
                   int64_t wake_ms) {
    double t0 = common_now_s();
    pl_wait_until_ms(cv, mu, wake_ms);
    pl_queue_count(st, q, full, t0);
}

void pl_queue_commit(pl_stats_t *st) {
    for (int i = 0; i < PL_Q_N; i++) {
        pl_queue_stat_t *q = &st->queue[i];
        q->full += q->pend_full;
        q->full_s += q->pend_full_s;
        q->empty += q->pend_empty;
        q->empty_s += q->pend_empty_s;
        q->pend_full = q->pend_empty = 0;
        q->pend_full_s = q->pend_empty_s = 0.0;
    }
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
