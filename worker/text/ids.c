#include "worker/text/ids.h"

#include <stdlib.h>

void worker_ids_free(worker_ids_t *ids) {
    if (!ids) return;
    free(ids->v);
    ids->v = NULL;
    ids->n = ids->cap = ids->n_full = ids->truncated = 0;
}

int worker_ids_reserve(worker_ids_t *ids, size_t need) {
    if (need > (size_t)0x7FFFFFFF) return -1;
    if ((size_t)ids->cap >= need) return 0;
    size_t cap = ids->cap ? (size_t)ids->cap : 64;
    while (cap < need)
        cap *= 2;
    if (cap > 0x7FFFFFFF) cap = 0x7FFFFFFF;
    int32_t *v = realloc(ids->v, cap * sizeof(int32_t));
    if (!v) return -1;
    ids->v = v;
    ids->cap = (int)cap;
    return 0;
}
