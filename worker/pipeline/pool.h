/* The pipeline's worker pool: a fixed set of threads that help run parallel-for jobs. A job is
 * n tasks; the thread that runs it works on its own tasks too and returns when every task is
 * done, so results land in the caller's arrays in the caller's order. Several threads (the
 * poll thread's decoding, the encoder scoring) may run jobs at once: idle workers take tasks
 * from the oldest job first. */
#ifndef RECLASS_WORKER_PIPELINE_POOL_H
#define RECLASS_WORKER_PIPELINE_POOL_H

#include <pthread.h>
#include <stdint.h>

typedef struct pl_pool pl_pool_t;

/* Runs task `task` of a job; slot (0 .. pl_pool_slots - 1) is unique among the threads running
 * tasks of this job at any moment: an index into per-thread scratch the job's owner holds. */
typedef void (*pl_task_fn)(void *ctx, int task, int slot);

/* threads: how many threads work on a job at most, the caller's included (threads - 1 are
 * started; 1 = the caller alone, no thread). 0, or -1 when threads cannot be started. */
int pl_pool_init(int threads, pl_pool_t **out);
void pl_pool_free(pl_pool_t *p);

/* Scratch slots a job's owner needs: the workers' plus its own. */
int pl_pool_slots(const pl_pool_t *p);

/* Runs fn(ctx, 0 .. n_tasks - 1, slot) and returns when all are done. */
void pl_pool_run(pl_pool_t *p, int n_tasks, pl_task_fn fn, void *ctx);

/* A job started without waiting for it: the workers take its tasks while the caller goes on;
 * pl_pool_wait then runs what is left on the calling thread and returns when all are done.
 * The job's storage is the caller's until pl_pool_wait returns; its fields are the pool's. */
typedef struct pl_job {
    pl_task_fn fn;
    void *ctx;
    int n, next, done; /* tasks; the next to hand out; finished */
    unsigned slots;    /* bit i: slot i is in use on this job */
    pthread_cond_t cv_done;
    struct pl_job *next_job;
} pl_job_t;
void pl_pool_start(pl_pool_t *p, pl_job_t *j, int n_tasks, pl_task_fn fn, void *ctx);
void pl_pool_wait(pl_pool_t *p, pl_job_t *j);

/* The cores this process may run on (sched_getaffinity), at least 1: the default of
 * --threads. */
int pl_pool_cores(void);

#endif
