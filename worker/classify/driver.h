/* The batch driver `classify` and `bench` share: token-budgeted batches popped from the
 * accumulator go through the engine with the device one batch ahead of the host, which hands
 * the results of the batch before to the caller's done callback while the next one runs.
 * (`run`'s encoder thread, worker/pipeline/encode.c, keeps its own loop: it pops under the
 * pipeline's lock and waits on the sink's room.) */
#ifndef RECLASS_WORKER_CLASSIFY_DRIVER_H
#define RECLASS_WORKER_CLASSIFY_DRIVER_H

#include <stddef.h>
#include <stdint.h>

#include "worker/classify/engine.h"
#include "worker/pipeline/accum.h"

/* The token ids of an item the caller pushed into the accumulator. */
typedef const int32_t *(*cls_driver_ids_fn)(void *ctx, void *item);
/* A collected batch: items[i]'s logits are row i of b. COMMON_OK, or another status with err
 * set (the driver stops). */
typedef common_status_t (*cls_driver_done_fn)(void *ctx, void *const *items, const int *lens, int n,
                                              const cls_batch_t *b, common_err_t *err);

typedef struct {
    cls_engine_t *eng; /* not owned */
    cls_driver_ids_fn ids;
    cls_driver_done_fn done;
    void *ctx;
    void **items[2];      /* (max_seqs) each: the items of the batch in each slot */
    int *lens[2];         /* (max_seqs) each: their lengths */
    int n[2];             /* items per slot */
    int cur;              /* the slot the next batch goes to */
    int in_flight;        /* 1 while the batch in slot cur ^ 1 awaits collect */
    const int32_t **seqp; /* (max_seqs) the ids of the batch being submitted */
} cls_driver_t;

/* 0, or COMMON_FATAL with err set (out of memory). */
common_status_t cls_driver_init(cls_driver_t *d, cls_engine_t *eng, cls_driver_ids_fn ids,
                                cls_driver_done_fn done, void *ctx, common_err_t *err);
/* Collects what is still in flight (results dropped) and frees the buffers. */
void cls_driver_free(cls_driver_t *d);

/* Pops one batch from acc at now_ms (flush: even when none is due) and submits it, then
 * hands the batch before it, if any, to done. Returns the items popped (0: none, and nothing
 * is collected), or -1 with err set. */
int cls_driver_step(cls_driver_t *d, worker_accum_t *acc, int64_t now_ms, int flush,
                    common_err_t *err);
/* Hands the batch in flight, if any, to done. COMMON_OK, or err's code. */
common_status_t cls_driver_finish(cls_driver_t *d, common_err_t *err);

#endif
