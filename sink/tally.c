#include "sink/tally.h"

#include <stdlib.h>
#include <string.h>

static int tally_cmp_rows(const void *a, const void *b) {
    const sink_result_t *x = *(const sink_result_t *const *)a,
                        *y = *(const sink_result_t *const *)b;
    int c = strcmp(x->job_id, y->job_id);
    return c ? c : strcmp(x->ticket_id, y->ticket_id);
}

int sink_tally_build(sink_tally_t *t, const sink_result_t *rows, int n) {
    t->n_jobs = 0;
    if (n > t->order_cap) {
        const sink_result_t **o = realloc(t->order, (size_t)n * sizeof(*o));
        if (!o) return -1;
        t->order = o;
        t->order_cap = n;
    }
    /* Writes usually hold one or a few jobs in long runs: skip the sort when already ordered. */
    int sorted = 1;
    for (int i = 0; i < n; i++) {
        t->order[i] = &rows[i];
        if (i > 0 && sorted && tally_cmp_rows(&t->order[i - 1], &t->order[i]) > 0) sorted = 0;
    }
    if (!sorted) qsort(t->order, (size_t)n, sizeof(*t->order), tally_cmp_rows);
    for (int i = 0; i < n; i++) {
        const sink_result_t *r = t->order[i];
        sink_job_t *j = t->n_jobs ? &t->jobs[t->n_jobs - 1] : NULL;
        if (!j || strcmp(j->job_id, r->job_id) != 0) {
            if (t->n_jobs == t->jobs_cap) {
                int cap = t->jobs_cap ? 2 * t->jobs_cap : 16;
                sink_job_t *nj = realloc(t->jobs, (size_t)cap * sizeof(*nj));
                if (!nj) return -1;
                t->jobs = nj;
                t->jobs_cap = cap;
            }
            j = &t->jobs[t->n_jobs++];
            *j = (sink_job_t){.job_id = r->job_id, .tenant = r->tenant, .total = r->job_total};
        }
        j->rows++;
        if (!j->tenant) j->tenant = r->tenant;
        if (r->job_total != j->total) j->total = -1; /* they disagree: job_total_check refuses */
    }
    return 0;
}

sink_job_t *sink_tally_find(const sink_tally_t *t, const char *job_id) {
    int lo = 0, hi = t->n_jobs - 1;
    while (lo <= hi) {
        int mid = lo + (hi - lo) / 2;
        int c = strcmp(t->jobs[mid].job_id, job_id);
        if (c == 0) return &t->jobs[mid];
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid - 1;
    }
    return NULL;
}

void sink_tally_free(sink_tally_t *t) {
    free(t->order);
    free(t->jobs);
    memset(t, 0, sizeof(*t));
}
