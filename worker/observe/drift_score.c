/* The SQL judge's formulas in C (see worker/observe/drift_score.h). Each sum runs over the
 * union of the two distributions' bins, walked once in name order (both label lists sorted). */
#include "worker/observe/drift_score.h"

#include <math.h>
#include <stddef.h>
#include <string.h>

typedef struct {
    double psi, js;
    int scored;
} pair_score_t;

/* One bin's share of each side's total: its PSI term (smoothed over k bins) and JS terms. */
static void add_bin(pair_score_t *s, double cv, double rv, double nc, double nr, int k) {
    double p = cv / nc, q = rv / nr;
    double sp = (p + WORKER_DRIFT_EPS) / (1 + k * WORKER_DRIFT_EPS);
    double sq = (q + WORKER_DRIFT_EPS) / (1 + k * WORKER_DRIFT_EPS);
    s->psi += (sp - sq) * log(sp / sq);
    if (p > 0) s->js += 0.5 * p * log(2 * p / (p + q));
    if (q > 0) s->js += 0.5 * q * log(2 * q / (p + q));
}

/* Walks the union of cur's and ref's labels in name order: calls back per bin (cv, rv, the
 * indexes or -1), returns the union's size. */
typedef void (*bin_fn)(void *ctx, int ci, int ri);
static int walk_labels(const worker_drift_dist_t *cur, const worker_drift_dist_t *ref, bin_fn fn,
                       void *ctx) {
    int nc = cur->n_labels, nr = ref && ref->labels ? ref->n_labels : 0, i = 0, j = 0, k = 0;
    while (i < nc || j < nr) {
        int c = i >= nc ? 1 : j >= nr ? -1 : strcmp(cur->labels[i].name, ref->labels[j].name);
        if (fn) fn(ctx, c <= 0 ? i : -1, c >= 0 ? j : -1);
        i += c <= 0;
        j += c >= 0;
        k++;
    }
    return k;
}

typedef struct {
    const worker_drift_dist_t *cur, *ref;
    double nc, nr;
    int k;
    pair_score_t s;
    int *new_idx, *gone_idx, n_new, n_gone;
} label_ctx_t;

static void label_bin(void *ctx, int ci, int ri) {
    label_ctx_t *x = ctx;
    double cv = ci >= 0 ? (double)x->cur->labels[ci].count : 0;
    double rv = ri >= 0 ? (double)x->ref->labels[ri].count : 0;
    if (x->s.scored) add_bin(&x->s, cv, rv, x->nc, x->nr, x->k);
    if (ri < 0) x->new_idx[x->n_new++] = ci;
    /* expected in the window at the reference's share: at least 5 */
    if (ci < 0 && x->ref->tickets != 0 &&
        rv / (double)x->ref->tickets * (double)x->cur->tickets >= 5)
        x->gone_idx[x->n_gone++] = ri;
}

static double label_total(const worker_drift_dist_t *d) {
    double n = 0;
    for (int i = 0; d && d->labels && i < d->n_labels; i++)
        n += (double)d->labels[i].count;
    return n;
}

void worker_drift_score(const worker_drift_dist_t *cur, const worker_drift_dist_t *ref,
                        int *new_idx, int *gone_idx, worker_drift_score_t *out) {
    memset(out, 0, sizeof(*out));
    int has_ref = ref && ref->tickets != 0;
    /* labels: the union of both sides' names, scored when both hold labels */
    label_ctx_t x = {.cur = cur,
                     .ref = ref,
                     .nc = label_total(cur),
                     .nr = label_total(ref),
                     .new_idx = new_idx,
                     .gone_idx = gone_idx};
    x.k = walk_labels(cur, ref, NULL, NULL);
    x.s.scored = x.nc > 0 && x.nr > 0;
    walk_labels(cur, ref, label_bin, &x);
    out->has_label = x.s.scored && x.k > 0;
    out->label_psi = x.s.psi;
    out->label_js = x.s.js / log(2);
    /* new only against a reference's labels (NULL labels: none new); gone only with tickets */
    out->n_new = ref && ref->labels ? x.n_new : 0;
    out->n_gone = has_ref ? x.n_gone : 0;
    /* confidences: always the ten bins */
    double hc = 0, hr = 0, low = 0, low_ref = 0;
    for (int b = 0; b < WORKER_DRIFT_SCORE_BINS; b++) {
        hc += (double)cur->hist[b];
        hr += ref && ref->hist ? (double)ref->hist[b] : 0;
        if (b < 5) { /* confidence < 0.5 (drift_settings().low_confidence) */
            low += (double)cur->hist[b];
            low_ref += ref && ref->hist ? (double)ref->hist[b] : 0;
        }
    }
    pair_score_t cs = {.scored = hc > 0 && hr > 0};
    for (int b = 0; cs.scored && b < WORKER_DRIFT_SCORE_BINS; b++)
        add_bin(&cs, (double)cur->hist[b], (double)ref->hist[b], hc, hr, WORKER_DRIFT_SCORE_BINS);
    out->has_confidence = cs.scored;
    out->confidence_psi = cs.psi;
    out->confidence_js = cs.js / log(2);
    out->has_low = cur->tickets != 0;
    out->low_share = out->has_low ? low / (double)cur->tickets : 0;
    out->has_low_change = out->has_low && has_ref;
    out->low_change = out->has_low_change ? out->low_share - low_ref / (double)ref->tickets : 0;
    /* the status: the worse PSI of the two (SQL's greatest skips NULLs; none: ok) */
    int ref_bins = ref && ref->labels ? ref->n_labels : 0;
    double worst = -1;
    if (out->has_label) worst = out->label_psi;
    if (out->has_confidence && out->confidence_psi > worst) worst = out->confidence_psi;
    if (!has_ref)
        out->status = WORKER_DRIFT_NO_BASELINE;
    else if (cur->tickets <
             (int64_t)WORKER_DRIFT_MIN_TICKETS_PER_BIN * (ref_bins > 10 ? ref_bins : 10))
        out->status = WORKER_DRIFT_SPARSE;
    else if (worst >= WORKER_DRIFT_PSI_DRIFT)
        out->status = WORKER_DRIFT_DRIFT;
    else if (worst >= WORKER_DRIFT_PSI_WATCH)
        out->status = WORKER_DRIFT_WATCH;
    else
        out->status = WORKER_DRIFT_OK;
}

const char *worker_drift_status_name(worker_drift_status_t s) {
    static const char *const names[] = {"no_baseline", "sparse", "ok", "watch", "drift"};
    return (unsigned)s < sizeof(names) / sizeof(names[0]) ? names[s] : "no_baseline";
}
