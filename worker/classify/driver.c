#include "worker/classify/driver.h"

#include <stdlib.h>
#include <string.h>

#include "common/err.h"
#include "common/status.h"

common_status_t cls_driver_init(cls_driver_t *d, cls_engine_t *eng, cls_driver_ids_fn ids,
                                cls_driver_done_fn done, void *ctx, common_err_t *err) {
    memset(d, 0, sizeof(*d));
    d->eng = eng, d->ids = ids, d->done = done, d->ctx = ctx;
    size_t cap = (size_t)eng->max_seqs;
    int ok = (d->seqp = malloc(cap * sizeof(*d->seqp))) != NULL;
    for (int i = 0; i < 2; i++) {
        ok = (d->items[i] = malloc(cap * sizeof(void *))) && ok;
        ok = (d->lens[i] = malloc(cap * sizeof(int))) && ok;
    }
    if (ok) return COMMON_OK;
    cls_driver_free(d);
    return common_err_set(err, COMMON_FATAL, "out of memory for %zu-sequence batches", cap);
}

void cls_driver_free(cls_driver_t *d) {
    if (d->in_flight) cls_engine_drain(d->eng);
    free((void *)d->seqp);
    for (int i = 0; i < 2; i++) {
        free(d->items[i]);
        free(d->lens[i]);
    }
    memset(d, 0, sizeof(*d));
}

common_status_t cls_driver_finish(cls_driver_t *d, common_err_t *err) {
    if (!d->in_flight) return COMMON_OK;
    int s = d->cur ^ 1;
    const cls_batch_t *b;
    d->in_flight = 0;
    common_status_t st = cls_engine_collect(d->eng, &b, err);
    return st ? st : d->done(d->ctx, d->items[s], d->lens[s], d->n[s], b, err);
}

int cls_driver_step(cls_driver_t *d, worker_accum_t *acc, int64_t now_ms, int flush,
                    common_err_t *err) {
    int s = d->cur;
    int n = worker_accum_pop(acc, now_ms, flush, d->items[s], d->lens[s], d->eng->max_seqs);
    if (n == 0) return 0;
    d->n[s] = n;
    for (int i = 0; i < n; i++)
        d->seqp[i] = d->ids(d->ctx, d->items[s][i]);
    /* queued before the previous batch's logits are taken: the device works meanwhile */
    if (cls_engine_submit(d->eng, d->seqp, d->lens[s], n, err) != 0) return -1;
    int prev = d->in_flight;
    d->cur ^= 1;
    d->in_flight = 1;
    if (prev) { /* collect the batch before this one, whose slot the next step reuses */
        const cls_batch_t *b;
        if (cls_engine_collect(d->eng, &b, err) != 0) return -1;
        if (d->done(d->ctx, d->items[d->cur], d->lens[d->cur], d->n[d->cur], b, err)) return -1;
    }
    return n;
}
