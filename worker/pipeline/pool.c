/* The pipeline's worker pool (see worker/pipeline/pool.h). */
#include "worker/pipeline/pool.h"

#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <unistd.h>

struct pl_pool {
    pthread_mutex_t mu;
    pthread_cond_t cv_work;
    pl_job_t *head, *tail; /* jobs with tasks left to hand out, oldest first */
    int stop;
    int n_workers;
    pthread_t *th; /* (n_workers) */
};

/* Up to 31 workers + the caller: slots are bits of an unsigned. */
#define PL_POOL_MAX 32

int pl_pool_cores(void) {
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0) return CPU_COUNT(&set);
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}

/* Takes a task of j and runs it with mu released (mu held on entry and return). */
static void run_one(pl_pool_t *p, pl_job_t *j) {
    int task = j->next++;
    if (j->next == j->n) { /* nothing more to hand out: unlink */
        pl_job_t **pp = &p->head, *prev = NULL;
        while (*pp && *pp != j)
            prev = *pp, pp = &(*pp)->next_job;
        if (*pp) {
            *pp = j->next_job;
            if (p->tail == j) p->tail = prev;
        }
    }
    int slot = 0;
    while (j->slots & (1u << slot))
        slot++;
    j->slots |= 1u << slot;
    pthread_mutex_unlock(&p->mu);
    j->fn(j->ctx, task, slot);
    pthread_mutex_lock(&p->mu);
    j->slots &= ~(1u << slot);
    if (++j->done == j->n) pthread_cond_signal(&j->cv_done);
}

static void *worker_main(void *arg) {
    pl_pool_t *p = arg;
    pthread_mutex_lock(&p->mu);
    for (;;) {
        while (!p->head && !p->stop)
            pthread_cond_wait(&p->cv_work, &p->mu);
        if (p->stop) break;
        run_one(p, p->head);
    }
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

int pl_pool_init(int threads, pl_pool_t **out) {
    *out = NULL;
    if (threads < 1) threads = 1;
    if (threads > PL_POOL_MAX) threads = PL_POOL_MAX;
    pl_pool_t *p = calloc(1, sizeof(*p));
    if (!p) return -1;
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->cv_work, NULL);
    p->th = calloc((size_t)threads, sizeof(*p->th)); /* (threads - 1) used */
    if (!p->th) {
        pl_pool_free(p);
        return -1;
    }
    for (int i = 0; i < threads - 1; i++) {
        if (pthread_create(&p->th[i], NULL, worker_main, p) != 0) {
            pl_pool_free(p);
            return -1;
        }
        p->n_workers++;
    }
    *out = p;
    return 0;
}

void pl_pool_free(pl_pool_t *p) {
    if (!p) return;
    pthread_mutex_lock(&p->mu);
    p->stop = 1;
    pthread_cond_broadcast(&p->cv_work);
    pthread_mutex_unlock(&p->mu);
    for (int i = 0; i < p->n_workers; i++)
        pthread_join(p->th[i], NULL);
    free(p->th);
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->cv_work);
    free(p);
}

int pl_pool_slots(const pl_pool_t *p) {
    return p->n_workers + 1;
}

void pl_pool_start(pl_pool_t *p, pl_job_t *j, int n_tasks, pl_task_fn fn, void *ctx) {
    *j = (pl_job_t){.fn = fn, .ctx = ctx, .n = n_tasks > 0 ? n_tasks : 0};
    pthread_cond_init(&j->cv_done, NULL);
    if (j->n == 0 || p->n_workers == 0) return; /* the caller runs them all in pl_pool_wait */
    pthread_mutex_lock(&p->mu);
    if (p->tail)
        p->tail->next_job = j;
    else
        p->head = j;
    p->tail = j;
    if (j->n >= p->n_workers)
        pthread_cond_broadcast(&p->cv_work);
    else
        for (int i = 0; i < j->n; i++)
            pthread_cond_signal(&p->cv_work);
    pthread_mutex_unlock(&p->mu);
}

void pl_pool_wait(pl_pool_t *p, pl_job_t *j) {
    if (p->n_workers == 0) { /* never queued: no hand-off worth its wake-ups */
        for (; j->next < j->n; j->next++)
            j->fn(j->ctx, j->next, 0);
    } else {
        pthread_mutex_lock(&p->mu);
        while (j->next < j->n)
            run_one(p, j);
        while (j->done < j->n)
            pthread_cond_wait(&j->cv_done, &p->mu);
        pthread_mutex_unlock(&p->mu);
    }
    pthread_cond_destroy(&j->cv_done);
}

void pl_pool_run(pl_pool_t *p, int n_tasks, pl_task_fn fn, void *ctx) {
    if (n_tasks <= 0) return;
    if (p->n_workers == 0 || n_tasks == 1) { /* no hand-off worth its wake-ups */
        for (int i = 0; i < n_tasks; i++)
            fn(ctx, i, 0);
        return;
    }
    pl_job_t j;
    pl_pool_start(p, &j, n_tasks, fn, ctx);
    pl_pool_wait(p, &j);
}
