/* Shared by the CPU and CUDA golden tests: a backend's submit/collect used out of turn. */
#ifndef RECLASS_TESTS_BACKEND_FLIGHT_H
#define RECLASS_TESTS_BACKEND_FLIGHT_H

#include <stdio.h>

#include "gpu/backend.h"

/* A third submit, a forward with batches in flight and a collect with none are refused with
 * COMMON_BUG, and the backend still works after them. b: a valid batch; logits: (b->n_seqs, L).
 * Returns the number of broken rules (each printed). */
static inline int backend_flight_refusals(const gpu_backend_ops_t *ops, gpu_backend_t *be,
                                          const gpu_batch_t *b, float *logits) {
    common_err_t err;
    int bad = 0;
    if (ops->submit(be, b, &err) != 0 || ops->submit(be, b, &err) != 0)
        printf("flight: two submits refused: %s\n", err.message), bad++;
    if (ops->submit(be, b, &err) != COMMON_BUG) printf("flight: a third submit ran\n"), bad++;
    if (ops->forward(be, b, logits, &err) != COMMON_BUG)
        printf("flight: forward ran with batches in flight\n"), bad++;
    for (int i = 0; i < 2; i++)
        if (ops->collect(be, logits, &err) != 0)
            printf("flight: collect %d failed: %s\n", i, err.message), bad++;
    if (ops->collect(be, logits, &err) != COMMON_BUG)
        printf("flight: a collect with nothing in flight ran\n"), bad++;
    if (ops->forward(be, b, logits, &err) != 0)
        printf("flight: forward after the refusals failed: %s\n", err.message), bad++;
    return bad;
}

#endif
