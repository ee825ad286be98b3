/* Fixed-capacity drift windows (see worker/observe/drift.h). Tenants are found through an
 * open-addressing table (FNV-1a, linear probing) at most half full, so a lookup is O(1)
 * however many tenants a window sees; tenants past max_tenants never enter the table and
 * land in the "_other" row. */
#include "worker/observe/drift.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/err.h"

typedef struct {
    worker_drift_window_t w;
    int32_t *index;   /* (idx_cap) row of each hash slot, -1 = empty */
    uint32_t *folded; /* (fold_cap) hashes of tenants folded into "_other", 0 = empty */
} slot_t;

struct worker_drift {
    worker_drift_cfg_t cfg;
    slot_t slots[WORKER_DRIFT_SLOTS];
    int idx_cap;                    /* power of two >= 2 * (max_tenants + 1) */
    int fold_cap;                   /* power of two >= 2 * max(max_tenants + 1, 4096) */
    int open;                       /* slot of the open window, -1 = none */
    int closed[WORKER_DRIFT_SLOTS]; /* FIFO of closed slots, oldest at closed_head */
    int closed_head, n_closed;
    long dropped;
    size_t bytes;
    worker_drift_row_t *rows_mem; /* (SLOTS, max_tenants + 1) */
    int64_t *counts_mem;          /* (SLOTS, max_tenants + 1, num_labels) */
    int32_t *index_mem;           /* (SLOTS, idx_cap) */
    uint32_t *folded_mem;         /* (SLOTS, fold_cap) */
};

/* the folded tenants are counted exactly up to this many (or max_tenants + 1 when more) */
#define FOLD_COUNT_MIN 4096

static int idx_cap_for(int max_tenants) {
    int cap = 16;
    while ((size_t)cap < 2 * ((size_t)max_tenants + 1))
        cap *= 2;
    return cap;
}

static int fold_cap_for(int max_tenants) {
    return idx_cap_for(max_tenants < FOLD_COUNT_MIN ? FOLD_COUNT_MIN : max_tenants);
}

size_t worker_drift_bytes_for(const worker_drift_cfg_t *cfg) {
    size_t rows = (size_t)cfg->max_tenants + 1;
    return sizeof(struct worker_drift) + WORKER_DRIFT_SLOTS * rows * sizeof(worker_drift_row_t) +
           WORKER_DRIFT_SLOTS * rows * (size_t)cfg->num_labels * sizeof(int64_t) +
           WORKER_DRIFT_SLOTS * (size_t)idx_cap_for(cfg->max_tenants) * sizeof(int32_t) +
           WORKER_DRIFT_SLOTS * (size_t)fold_cap_for(cfg->max_tenants) * sizeof(uint32_t);
}

common_status_t worker_drift_init(const worker_drift_cfg_t *cfg, worker_drift_t **out,
                                  common_err_t *e) {
    *out = NULL;
    if (cfg->window_s < 1 || cfg->max_tenants < 1 || cfg->num_labels < 1)
        return common_err_set(e, COMMON_BUG,
                              "drift: window_s, max_tenants and num_labels must be >= 1");
    worker_drift_t *d = calloc(1, sizeof(*d));
    if (!d) return common_err_set(e, COMMON_FATAL, "drift: out of memory");
    d->cfg = *cfg;
    d->open = -1;
    size_t rows = (size_t)cfg->max_tenants + 1;
    d->idx_cap = idx_cap_for(cfg->max_tenants);
    d->fold_cap = fold_cap_for(cfg->max_tenants);
    d->rows_mem = calloc(WORKER_DRIFT_SLOTS * rows, sizeof(*d->rows_mem));
    d->counts_mem =
        calloc(WORKER_DRIFT_SLOTS * rows * (size_t)cfg->num_labels, sizeof(*d->counts_mem));
    d->index_mem = malloc(WORKER_DRIFT_SLOTS * (size_t)d->idx_cap * sizeof(*d->index_mem));
    d->folded_mem = malloc(WORKER_DRIFT_SLOTS * (size_t)d->fold_cap * sizeof(*d->folded_mem));
    if (!d->rows_mem || !d->counts_mem || !d->index_mem || !d->folded_mem) {
        common_err_set(e, COMMON_FATAL, "drift: out of memory for %d tenants x %d labels",
                       cfg->max_tenants, cfg->num_labels);
        common_err_hint(e, "lower --drift-max-tenants");
        worker_drift_free(d);
        return COMMON_FATAL;
    }
    d->bytes = worker_drift_bytes_for(cfg);
    for (int s = 0; s < WORKER_DRIFT_SLOTS; s++) {
        slot_t *sl = &d->slots[s];
        sl->w.rows = d->rows_mem + (size_t)s * rows;
        sl->w.window_s = cfg->window_s;
        sl->index = d->index_mem + (size_t)s * (size_t)d->idx_cap;
        sl->folded = d->folded_mem + (size_t)s * (size_t)d->fold_cap;
        for (size_t r = 0; r < rows; r++)
            sl->w.rows[r].label_counts =
                d->counts_mem + ((size_t)s * rows + r) * (size_t)cfg->num_labels;
    }
    *out = d;
    return COMMON_OK;
}

void worker_drift_free(worker_drift_t *d) {
    if (!d) return;
    free(d->rows_mem);
    free(d->counts_mem);
    free(d->index_mem);
    free(d->folded_mem);
    free(d);
}

static uint32_t fnv1a(const char *s) {
    uint32_t h = 2166136261u;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 16777619u;
    return h;
}

static int64_t align_start(int64_t t, int window_s) {
    int64_t r = t % window_s;
    if (r < 0) r += window_s;
    return t - r;
}

/* Empties a slot's window for reuse; row pointers into the counts block are kept. */
static void slot_reset(worker_drift_t *d, slot_t *sl, int64_t start_s) {
    int T = d->cfg.max_tenants, L = d->cfg.num_labels;
    for (int r = 0; r <= T; r++) {
        worker_drift_row_t *row = &sl->w.rows[r];
        int64_t *lc = row->label_counts;
        memset(row, 0, sizeof(*row));
        row->label_counts = lc;
        memset(lc, 0, sizeof(*lc) * (size_t)L);
    }
    snprintf(sl->w.rows[T].tenant, WORKER_DRIFT_TENANT_MAX, "%s", WORKER_DRIFT_OTHER);
    sl->w.rows[T].overflow = 1;
    for (int i = 0; i < d->idx_cap; i++)
        sl->index[i] = -1;
    memset(sl->folded, 0, sizeof(*sl->folded) * (size_t)d->fold_cap);
    sl->w.n_rows = 0;
    sl->w.folded_tenants = 0;
    sl->w.folded_tickets = 0;
    sl->w.start_s = start_s;
}

/* Counts tenant (by its 32-bit hash) among the window's folded ones, once; the set holds
 * fold_cap / 2 hashes, past that the count stops growing (the log says "at least"). */
static void count_folded(worker_drift_t *d, slot_t *sl, uint32_t h) {
    if (h == 0) h = 1;
    uint32_t mask = (uint32_t)d->fold_cap - 1, i = h & mask;
    for (; sl->folded[i]; i = (i + 1) & mask)
        if (sl->folded[i] == h) return;
    if (2 * sl->w.folded_tenants >= d->fold_cap) return;
    sl->folded[i] = h;
    sl->w.folded_tenants++;
}

/* The row of tenant in the open slot: its own, a new one, or "_other" when full. */
static worker_drift_row_t *find_row(worker_drift_t *d, slot_t *sl, const char *tenant) {
    int T = d->cfg.max_tenants;
    size_t len = strlen(tenant);
    uint32_t h = fnv1a(tenant);
    /* a real tenant called "_other" shares the overflow row; so do names too long to keep */
    if (len >= WORKER_DRIFT_TENANT_MAX || !strcmp(tenant, WORKER_DRIFT_OTHER)) {
        count_folded(d, sl, h);
        return &sl->w.rows[T];
    }
    uint32_t mask = (uint32_t)d->idx_cap - 1, i = h & mask;
    for (;; i = (i + 1) & mask) {
        int32_t r = sl->index[i];
        if (r < 0) break;
        if (!strcmp(sl->w.rows[r].tenant, tenant)) return &sl->w.rows[r];
    }
    if (sl->w.n_rows >= T) {
        count_folded(d, sl, h);
        return &sl->w.rows[T];
    }
    int32_t r = sl->w.n_rows++;
    memcpy(sl->w.rows[r].tenant, tenant, len + 1);
    sl->index[i] = r;
    return &sl->w.rows[r];
}

/* Moves the open window to the closed FIFO; the "_other" row, when used, becomes the row
 * right after the named ones so readers see rows[0..n_rows) only. */
static void close_open(worker_drift_t *d) {
    if (d->open < 0) return;
    slot_t *sl = &d->slots[d->open];
    int T = d->cfg.max_tenants;
    if (sl->w.rows[T].tickets > 0) {
        sl->w.folded_tickets = sl->w.rows[T].tickets;
        /* every sum of this window may be partial over workers: flag them all */
        for (int r = 0; r < sl->w.n_rows; r++)
            sl->w.rows[r].overflow = 1;
        if (sl->w.n_rows < T) { /* swap the structs: label_counts pointers travel along */
            worker_drift_row_t tmp = sl->w.rows[sl->w.n_rows];
            sl->w.rows[sl->w.n_rows] = sl->w.rows[T];
            sl->w.rows[T] = tmp;
        }
        sl->w.n_rows++;
    }
    d->closed[(d->closed_head + d->n_closed) % WORKER_DRIFT_SLOTS] = d->open;
    d->n_closed++;
    d->open = -1;
}

static int slot_in_use(const worker_drift_t *d, int s) {
    if (s == d->open) return 1;
    for (int k = 0; k < d->n_closed; k++)
        if (d->closed[(d->closed_head + k) % WORKER_DRIFT_SLOTS] == s) return 1;
    return 0;
}

static void open_window(worker_drift_t *d, int64_t start_s) {
    if (d->n_closed == WORKER_DRIFT_SLOTS) { /* the database is behind: lose the oldest */
        worker_drift_pop(d);
        d->dropped++;
    }
    int s = 0;
    while (slot_in_use(d, s))
        s++;
    slot_reset(d, &d->slots[s], start_s);
    d->open = s;
}

void worker_drift_add(worker_drift_t *d, int64_t now_s, const char *tenant, int label_id,
                      float confidence, int truncated, int tokens) {
    if (!d || label_id < 0 || label_id >= d->cfg.num_labels) return;
    int64_t start = align_start(now_s, d->cfg.window_s);
    /* a clock stepping back counts into the open window rather than reopening an old one */
    if (d->open >= 0 && start > d->slots[d->open].w.start_s) close_open(d);
    if (d->open < 0) open_window(d, start);
    slot_t *sl = &d->slots[d->open];
    worker_drift_row_t *row = find_row(d, sl, tenant ? tenant : "");
    double c = isfinite(confidence) ? confidence : 0.0;
    if (c < 0) c = 0;
    if (c > 1) c = 1;
    int bin = (int)(c * WORKER_DRIFT_BINS);
    if (bin >= WORKER_DRIFT_BINS) bin = WORKER_DRIFT_BINS - 1;
    row->tickets++;
    row->truncated += truncated != 0;
    row->tokens += tokens;
    row->confidence_sum += c;
    row->hist[bin]++;
    row->label_counts[label_id]++;
}

int worker_drift_tick(worker_drift_t *d, int64_t now_s, int final) {
    if (!d) return 0;
    if (d->open >= 0 &&
        (final || align_start(now_s, d->cfg.window_s) > d->slots[d->open].w.start_s))
        close_open(d);
    return d->n_closed;
}

const worker_drift_window_t *worker_drift_oldest(const worker_drift_t *d) {
    if (!d || d->n_closed == 0) return NULL;
    return &d->slots[d->closed[d->closed_head]].w;
}

void worker_drift_pop(worker_drift_t *d) {
    if (!d || d->n_closed == 0) return;
    d->closed_head = (d->closed_head + 1) % WORKER_DRIFT_SLOTS;
    d->n_closed--;
}

long worker_drift_dropped(const worker_drift_t *d) {
    return d ? d->dropped : 0;
}

size_t worker_drift_bytes(const worker_drift_t *d) {
    return d ? d->bytes : 0;
}

const worker_drift_window_t *worker_drift_open(const worker_drift_t *d) {
    return d && d->open >= 0 ? &d->slots[d->open].w : NULL;
}
