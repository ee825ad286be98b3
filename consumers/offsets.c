#include "consumers/offsets.h"

#include <stdlib.h>
#include <string.h>

/* Consumed offsets of one partition in arrival (= increasing) order; [head, n) are the ones
 * not yet released. done[i] says whether offs[i] is committed. */
typedef struct {
    int64_t epoch; /* 0 = not assigned */
    int64_t *offs; /* (cap) */
    uint8_t *done; /* (cap) */
    size_t head, n, cap;
    int64_t last_consumed; /* -1 before the first */
    int64_t prefix_end;    /* next offset after the committed prefix, -1 when none yet */
    int64_t reported;      /* prefix_end last returned by storable() */
    long pending;          /* consumed and not committed */
} part_t;

struct consumers_offsets {
    part_t *parts; /* (n_parts) indexed by partition id */
    int32_t n_parts;
    int64_t next_epoch; /* epochs are unique across partitions and reassignments */
};

int consumers_offsets_init(consumers_offsets_t **out) {
    *out = calloc(1, sizeof(**out));
    if (!*out) return -1;
    (*out)->next_epoch = 1;
    return 0;
}

void consumers_offsets_free(consumers_offsets_t *t) {
    if (!t) return;
    for (int32_t i = 0; i < t->n_parts; i++) {
        free(t->parts[i].offs);
        free(t->parts[i].done);
    }
    free(t->parts);
    free(t);
}

static part_t *part_get(const consumers_offsets_t *t, int32_t partition) {
    if (partition < 0 || partition >= t->n_parts) return NULL;
    return &t->parts[partition];
}

static void part_reset(part_t *p) {
    p->head = p->n = 0;
    p->last_consumed = -1;
    p->prefix_end = -1;
    p->reported = -1;
    p->pending = 0;
}

int64_t consumers_offsets_assign(consumers_offsets_t *t, int32_t partition) {
    if (partition < 0) return -1;
    if (partition >= t->n_parts) {
        int32_t n = partition + 1;
        part_t *np = realloc(t->parts, (size_t)n * sizeof(*np));
        if (!np) return -1;
        memset(np + t->n_parts, 0, (size_t)(n - t->n_parts) * sizeof(*np));
        t->parts = np;
        t->n_parts = n;
    }
    part_t *p = &t->parts[partition];
    part_reset(p);
    p->epoch = t->next_epoch++;
    return p->epoch;
}

int consumers_offsets_revoke(consumers_offsets_t *t, int32_t partition) {
    part_t *p = part_get(t, partition);
    if (!p || !p->epoch) return 0;
    int dropped = (int)p->pending;
    part_reset(p);
    p->epoch = 0;
    return dropped;
}

int64_t consumers_offsets_epoch(const consumers_offsets_t *t, int32_t partition) {
    part_t *p = part_get(t, partition);
    return p ? p->epoch : 0;
}

int consumers_offsets_consumed(consumers_offsets_t *t, int32_t partition, int64_t epoch,
                               int64_t offset) {
    part_t *p = part_get(t, partition);
    if (!p || !p->epoch || p->epoch != epoch || offset < 0 || offset <= p->last_consumed) return -1;
    if (p->n == p->cap) {
        if (p->head > 0) { /* slide the live window down instead of growing */
            memmove(p->offs, p->offs + p->head, (p->n - p->head) * sizeof(*p->offs));
            memmove(p->done, p->done + p->head, p->n - p->head);
            p->n -= p->head;
            p->head = 0;
        }
        if (p->n == p->cap) {
            size_t cap = p->cap ? p->cap * 2 : 256;
            int64_t *o = realloc(p->offs, cap * sizeof(*o));
            if (!o) return -1;
            p->offs = o;
            uint8_t *d = realloc(p->done, cap);
            if (!d) return -1;
            p->done = d;
            p->cap = cap;
        }
    }
    p->offs[p->n] = offset;
    p->done[p->n] = 0;
    p->n++;
    p->last_consumed = offset;
    p->pending++;
    return 0;
}

int consumers_offsets_committed(consumers_offsets_t *t, int32_t partition, int64_t epoch,
                                int64_t offset) {
    part_t *p = part_get(t, partition);
    if (!p || !p->epoch || p->epoch != epoch) return 0;
    size_t lo = p->head, hi = p->n; /* offs[head, n) is sorted: binary search */
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (p->offs[mid] < offset)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo == p->n || p->offs[lo] != offset || p->done[lo]) return 0;
    p->done[lo] = 1;
    p->pending--;
    return 1;
}

int64_t consumers_offsets_storable(consumers_offsets_t *t, int32_t partition) {
    part_t *p = part_get(t, partition);
    if (!p || !p->epoch) return -1;
    while (p->head < p->n && p->done[p->head]) {
        p->prefix_end = p->offs[p->head] + 1;
        p->head++;
    }
    if (p->head == p->n) p->head = p->n = 0;
    if (p->prefix_end < 0 || p->prefix_end == p->reported) return -1;
    p->reported = p->prefix_end;
    return p->prefix_end;
}

int32_t consumers_offsets_partition_of_epoch(const consumers_offsets_t *t, int64_t epoch) {
    for (int32_t i = 0; epoch > 0 && i < t->n_parts; i++)
        if (t->parts[i].epoch == epoch) return i;
    return -1;
}

long consumers_offsets_pending(const consumers_offsets_t *t, int32_t partition) {
    if (partition >= 0) {
        part_t *p = part_get(t, partition);
        return p ? p->pending : 0;
    }
    long sum = 0;
    for (int32_t i = 0; i < t->n_parts; i++)
        sum += t->parts[i].pending;
    return sum;
}

int consumers_offsets_partitions(const consumers_offsets_t *t, int32_t *parts, int cap) {
    int n = 0;
    for (int32_t i = 0; i < t->n_parts; i++) {
        if (!t->parts[i].epoch) continue;
        if (n < cap) parts[n] = i;
        n++;
    }
    return n;
}
