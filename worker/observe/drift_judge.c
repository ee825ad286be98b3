/* The worker's judge of a drift window (see worker/observe/drift_judge.h). */
#include "worker/observe/drift_judge.h"

#include <stdlib.h>
#include <string.h>

#include "worker/observe/drift_score.h"

_Static_assert(WORKER_DRIFT_SCORE_BINS == SINK_DRIFT_BINS, "drift histogram bins differ");

struct worker_drift_judge {
    int max_rows, n_labels;
    const char *const *labels;
    int *by_name;                    /* (n_labels) label ids in name order (strcmp) */
    sink_drift_stored_t *stored;     /* (max_rows) */
    sink_drift_judged_t *judged;     /* (max_rows) */
    int64_t *counts;                 /* (max_rows, 2, n_labels) stored sums and references */
    int *ids;                        /* (max_rows, 2, n_labels) new and gone label ids */
    worker_drift_label_t *cur, *ref; /* (n_labels) one row's distributions */
    int *cur_id, *ref_id;            /* (n_labels) the label id of each entry */
    int *idx;                        /* (n_labels) drift_score's new / gone indexes */
};

static const char *const *g_names; /* qsort's context: the labels by id */
static int cmp_name(const void *a, const void *b) {
    const char *x = g_names[*(const int *)a], *y = g_names[*(const int *)b];
    return strcmp(x ? x : "", y ? y : "");
}

common_status_t worker_drift_judge_init(int max_rows, int n_labels, const char *const *labels,
                                        worker_drift_judge_t **out, common_err_t *e) {
    worker_drift_judge_t *j = calloc(1, sizeof(*j));
    size_t R = (size_t)max_rows, L = (size_t)n_labels;
    if (j) {
        j->max_rows = max_rows;
        j->n_labels = n_labels;
        j->labels = labels;
        j->by_name = malloc(L * sizeof(*j->by_name));
        j->stored = calloc(R, sizeof(*j->stored));
        j->judged = calloc(R, sizeof(*j->judged));
        j->counts = calloc(R * 2 * L, sizeof(*j->counts));
        j->ids = calloc(R * 2 * L, sizeof(*j->ids));
        j->cur = calloc(L, sizeof(*j->cur));
        j->ref = calloc(L, sizeof(*j->ref));
        j->cur_id = calloc(L, sizeof(*j->cur_id));
        j->ref_id = calloc(L, sizeof(*j->ref_id));
        j->idx = calloc(L, sizeof(*j->idx));
    }
    if (!j || !j->by_name || !j->stored || !j->judged || !j->counts || !j->ids || !j->cur ||
        !j->ref || !j->cur_id || !j->ref_id || !j->idx) {
        worker_drift_judge_free(j);
        *out = NULL;
        return common_err_set(e, COMMON_FATAL, "drift judge: out of memory");
    }
    for (int l = 0; l < n_labels; l++)
        j->by_name[l] = l;
    g_names = labels; /* once, at start-up, on one thread */
    qsort(j->by_name, L, sizeof(*j->by_name), cmp_name);
    for (size_t r = 0; r < R; r++) {
        j->stored[r].counts = j->counts + r * 2 * L;
        j->stored[r].ref_counts = j->counts + (r * 2 + 1) * L;
    }
    *out = j;
    return COMMON_OK;
}

void worker_drift_judge_free(worker_drift_judge_t *j) {
    if (!j) return;
    free(j->by_name);
    free(j->stored);
    free(j->judged);
    free(j->counts);
    free(j->ids);
    free(j->cur);
    free(j->ref);
    free(j->cur_id);
    free(j->ref_id);
    free(j->idx);
    free(j);
}

sink_drift_stored_t *worker_drift_judge_stored(worker_drift_judge_t *j) {
    return j->stored;
}

sink_drift_judged_t *worker_drift_judge_judged(worker_drift_judge_t *j) {
    return j->judged;
}

/* The labels of counts (by id) with a count other than 0, in name order (a name given to two
 * ids counts once, summed), into out / out_id; returns how many. */
static int by_name(const worker_drift_judge_t *j, const int64_t *a, const int64_t *b,
                   worker_drift_label_t *out, int *out_id) {
    int n = 0;
    for (int k = 0; k < j->n_labels; k++) {
        int l = j->by_name[k];
        int64_t c = a[l] + (b ? b[l] : 0);
        const char *name = j->labels[l] ? j->labels[l] : "";
        if (n > 0 && !strcmp(out[n - 1].name, name)) {
            out[n - 1].count += c;
            continue;
        }
        out[n] = (worker_drift_label_t){name, c};
        out_id[n++] = l;
    }
    int m = 0; /* the SQL sums leave out labels summing to 0 */
    for (int k = 0; k < n; k++)
        if (out[k].count != 0) {
            out[m] = out[k];
            out_id[m++] = out_id[k];
        }
    return m;
}

void worker_drift_judge_rows(void *ctx, const sink_drift_t *d, const sink_drift_stored_t *stored,
                             sink_drift_judged_t *judged) {
    worker_drift_judge_t *j = ctx;
    for (int i = 0; i < d->n_rows && i < j->max_rows; i++) {
        const sink_drift_row_t *row = &d->rows[i];
        const sink_drift_stored_t *st = &stored[i];
        int64_t hist[SINK_DRIFT_BINS];
        for (int b = 0; b < SINK_DRIFT_BINS; b++)
            hist[b] = row->hist[b] + st->hist[b];
        worker_drift_dist_t cur = {.labels = j->cur,
                                   .n_labels =
                                       by_name(j, row->label_counts, st->counts, j->cur, j->cur_id),
                                   .hist = hist,
                                   .tickets = row->tickets + st->tickets};
        worker_drift_dist_t ref = {.labels = j->ref,
                                   .n_labels = by_name(j, st->ref_counts, NULL, j->ref, j->ref_id),
                                   .hist = st->ref_hist,
                                   .tickets = st->ref_tickets};
        /* a trailing reference naming no label is the SQL's NULL label map */
        if (!st->ref_pinned && ref.n_labels == 0) ref.labels = NULL;
        int *new_ids = j->ids + (size_t)i * 2 * (size_t)j->n_labels;
        int *gone_ids = new_ids + j->n_labels;
        worker_drift_score_t sc;
        /* new_idx needs cur's count, gone_idx ref's: both <= n_labels */
        worker_drift_score(&cur, st->ref_tickets >= 0 ? &ref : NULL, new_ids, j->idx, &sc);
        for (int k = 0; k < sc.n_new; k++)
            new_ids[k] = j->cur_id[new_ids[k]];
        for (int k = 0; k < sc.n_gone; k++)
            gone_ids[k] = j->ref_id[j->idx[k]];
        judged[i] = (sink_drift_judged_t){.status = worker_drift_status_name(sc.status),
                                          .label_psi = sc.label_psi,
                                          .label_js = sc.label_js,
                                          .confidence_psi = sc.confidence_psi,
                                          .confidence_js = sc.confidence_js,
                                          .low_share = sc.low_share,
                                          .low_change = sc.low_change,
                                          .has_label = sc.has_label,
                                          .has_confidence = sc.has_confidence,
                                          .has_low = sc.has_low,
                                          .has_low_change = sc.has_low_change,
                                          .tickets = cur.tickets,
                                          .overflow = row->overflow || st->overflow,
                                          .labels_new = new_ids,
                                          .n_new = sc.n_new,
                                          .labels_gone = gone_ids,
                                          .n_gone = sc.n_gone};
    }
}
