/* The length-sorting accumulator (worker/pipeline/accum.h).
 *
 * Pending items live in a pool of slots allocated once at init (max_pending_items). Each slot
 * is on two doubly linked lists: its length's bucket and the global list, both kept sorted by
 * deadline (insertion walks back from the tail, O(1) when the clock is monotonic). A bitmap of
 * non-empty buckets lets a batch walk outward in length from an anchor item without touching
 * empty lengths, so a pop costs O(batch + max_len/64) whatever the number pending.
 *
 * Batch policy. Overdue (the earliest deadline has passed): the anchor is the item with the
 * earliest deadline; then other overdue items nearest in length are added while they fit;
 * then any items nearest in length fill the rest of the budget. Not overdue: the anchor is
 * the longest item and the batch is the run of next-longest items that fits: short items
 * accumulate into batches of their own until their deadline.
 *
 * Priority moves an item's deadline earlier (accum.h: priority_step_ms), so the lists keep
 * the order in which items are due; an item is linked after the last pending one of its
 * priority (in its bucket and globally), since a priority's deadlines rise with the clock, so
 * a burst of urgent items does not walk a backlog of lower ones each (only the first). When the
 * earliest due item has a priority, it anchors the batch at once, and the items of its
 * priority or higher (by their buckets' heads) are taken before any lower one. */
#include "worker/pipeline/accum.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NIL -1

typedef struct {
    void *item;
    int len;
    int prio;         /* 0..WORKER_ACCUM_MAX_PRIORITY */
    int64_t deadline; /* arrival + max_wait_ms - prio * priority_step_ms */
    int bprev, bnext; /* neighbours in the length bucket, deadline order */
    int aprev, anext; /* neighbours in the global list, deadline order */
} slot_t;

typedef struct {
    int head, tail;
} list_t;

struct worker_accum {
    worker_accum_cfg_t cfg;
    slot_t *slot;       /* (max_pending_items) */
    int free_head;      /* free slots chained through anext */
    list_t *bucket;     /* (max_len + 1) by length; index 0 unused */
    int *blast;         /* (max_len + 1, MAX_PRIORITY + 1): as last, per bucket */
    uint64_t *nonempty; /* (words) bit l set when bucket l holds an item */
    int words;
    list_t all; /* every pending item, earliest deadline first */
    /* the last item pushed of each priority while pending, else NIL: a priority's deadlines
     * rise with the clock, so a new one goes at most a few items after it (no walk past a
     * backlog of lower priorities) */
    int last[WORKER_ACCUM_MAX_PRIORITY + 1];
    int n_items;
    long n_tokens;
};

/* ---- bitmap of non-empty lengths ---- */

static void bit_set(worker_accum_t *a, int l) {
    a->nonempty[l >> 6] |= (uint64_t)1 << (l & 63);
}

static void bit_clear(worker_accum_t *a, int l) {
    a->nonempty[l >> 6] &= ~((uint64_t)1 << (l & 63));
}

/* Smallest non-empty length >= l, or 0 when none. */
static int len_next_ge(const worker_accum_t *a, int l) {
    if (l > a->cfg.max_len) return 0;
    if (l < 1) l = 1;
    int w = l >> 6;
    uint64_t m = a->nonempty[w] & (~(uint64_t)0 << (l & 63));
    for (;;) {
        if (m) return (w << 6) + __builtin_ctzll(m);
        if (++w >= a->words) return 0;
        m = a->nonempty[w];
    }
}

/* Largest non-empty length <= l, or 0 when none. */
static int len_prev_le(const worker_accum_t *a, int l) {
    if (l < 1) return 0;
    if (l > a->cfg.max_len) l = a->cfg.max_len;
    int w = l >> 6;
    int sh = 63 - (l & 63);
    uint64_t m = a->nonempty[w] & (~(uint64_t)0 >> sh);
    for (;;) {
        if (m) return (w << 6) + 63 - __builtin_clzll(m);
        if (--w < 0) return 0;
        m = a->nonempty[w];
    }
}

/* ---- lists ---- */

static void link_sorted(worker_accum_t *a, int s) {
    slot_t *S = a->slot;
    list_t *b = &a->bucket[S[s].len];
    /* bucket: after its last of this priority, or back from the tail past later deadlines
     * (ties keep arrival order) */
    int *bl = &a->blast[S[s].len * (WORKER_ACCUM_MAX_PRIORITY + 1) + S[s].prio];
    int p = *bl;
    if (p != NIL && S[p].deadline <= S[s].deadline) {
        while (S[p].bnext != NIL && S[S[p].bnext].deadline <= S[s].deadline)
            p = S[p].bnext;
    } else {
        p = b->tail;
        while (p != NIL && S[p].deadline > S[s].deadline)
            p = S[p].bprev;
    }
    *bl = s;
    S[s].bprev = p;
    S[s].bnext = p == NIL ? b->head : S[p].bnext;
    if (p == NIL)
        b->head = s;
    else
        S[p].bnext = s;
    if (S[s].bnext == NIL)
        b->tail = s;
    else
        S[S[s].bnext].bprev = s;
    bit_set(a, S[s].len);

    p = a->last[S[s].prio];
    if (p != NIL && S[p].deadline <= S[s].deadline) {
        while (S[p].anext != NIL && S[S[p].anext].deadline <= S[s].deadline)
            p = S[p].anext;
    } else {
        p = a->all.tail;
        while (p != NIL && S[p].deadline > S[s].deadline)
            p = S[p].aprev;
    }
    a->last[S[s].prio] = s;
    S[s].aprev = p;
    S[s].anext = p == NIL ? a->all.head : S[p].anext;
    if (p == NIL)
        a->all.head = s;
    else
        S[p].anext = s;
    if (S[s].anext == NIL)
        a->all.tail = s;
    else
        S[S[s].anext].aprev = s;
}

static void unlink_slot(worker_accum_t *a, int s) {
    slot_t *S = a->slot;
    list_t *b = &a->bucket[S[s].len];
    if (S[s].bprev == NIL)
        b->head = S[s].bnext;
    else
        S[S[s].bprev].bnext = S[s].bnext;
    if (S[s].bnext == NIL)
        b->tail = S[s].bprev;
    else
        S[S[s].bnext].bprev = S[s].bprev;
    if (b->head == NIL) bit_clear(a, S[s].len);

    if (a->last[S[s].prio] == s) a->last[S[s].prio] = NIL;
    int *bl = &a->blast[S[s].len * (WORKER_ACCUM_MAX_PRIORITY + 1) + S[s].prio];
    if (*bl == s) *bl = NIL;
    if (S[s].aprev == NIL)
        a->all.head = S[s].anext;
    else
        S[S[s].aprev].anext = S[s].anext;
    if (S[s].anext == NIL)
        a->all.tail = S[s].aprev;
    else
        S[S[s].anext].aprev = S[s].aprev;

    a->n_items--;
    a->n_tokens -= S[s].len;
    S[s].item = NULL;
    S[s].anext = a->free_head;
    a->free_head = s;
}

/* ---- public ---- */

common_status_t worker_accum_init(const worker_accum_cfg_t *cfg, worker_accum_t **out,
                                  common_err_t *e) {
    *out = NULL;
    if (cfg->max_len <= 0) {
        return common_err_set(e, COMMON_USAGE, "max_len must be positive (got %d)", cfg->max_len);
    }
    if (cfg->token_budget <= 0) {
        return common_err_set(e, COMMON_USAGE, "token budget must be positive (got %d)",
                              cfg->token_budget);
    }
    if (cfg->token_budget < cfg->max_len) {
        common_err_set(e, COMMON_USAGE,
                       "token budget %d is smaller than one longest item (%d tokens)",
                       cfg->token_budget, cfg->max_len);
        common_err_hint(e, "raise the token budget to at least %d or lower the maximum length",
                        cfg->max_len);
        return COMMON_USAGE;
    }
    if (cfg->max_wait_ms < 0) {
        return common_err_set(e, COMMON_USAGE, "max wait must be >= 0 ms (got %d)",
                              cfg->max_wait_ms);
    }
    if (cfg->priority_step_ms < 0) {
        return common_err_set(e, COMMON_USAGE, "priority step must be >= 0 ms (got %d)",
                              cfg->priority_step_ms);
    }
    if (cfg->max_pending_items <= 0) {
        return common_err_set(e, COMMON_USAGE, "max pending items must be positive (got %d)",
                              cfg->max_pending_items);
    }
    if (cfg->max_pending_tokens < cfg->token_budget) {
        common_err_set(e, COMMON_USAGE, "max pending tokens %ld is below the token budget %d",
                       cfg->max_pending_tokens, cfg->token_budget);
        common_err_detail(e, "a full batch could never accumulate");
        common_err_hint(e, "raise it to at least %d", cfg->token_budget);
        return COMMON_USAGE;
    }
    if (cfg->padded != 0 && cfg->padded != 1) {
        return common_err_set(e, COMMON_USAGE, "padded must be 0 or 1 (got %d)", cfg->padded);
    }
    worker_accum_t *a = calloc(1, sizeof(*a));
    if (!a) goto oom;
    a->cfg = *cfg;
    a->words = cfg->max_len / 64 + 1;
    a->slot = malloc((size_t)cfg->max_pending_items * sizeof(slot_t));
    a->bucket = malloc((size_t)(cfg->max_len + 1) * sizeof(list_t));
    a->blast = malloc((size_t)(cfg->max_len + 1) * (WORKER_ACCUM_MAX_PRIORITY + 1) * sizeof(int));
    a->nonempty = calloc((size_t)a->words, sizeof(uint64_t));
    if (!a->slot || !a->bucket || !a->blast || !a->nonempty) {
        worker_accum_free(a);
        goto oom;
    }
    for (int l = 0; l <= cfg->max_len; l++)
        a->bucket[l].head = a->bucket[l].tail = NIL;
    for (int i = 0; i < (cfg->max_len + 1) * (WORKER_ACCUM_MAX_PRIORITY + 1); i++)
        a->blast[i] = NIL;
    for (int s = 0; s < cfg->max_pending_items; s++) {
        a->slot[s].item = NULL;
        a->slot[s].anext = s + 1 < cfg->max_pending_items ? s + 1 : NIL;
    }
    a->free_head = 0;
    a->all.head = a->all.tail = NIL;
    for (int p = 0; p <= WORKER_ACCUM_MAX_PRIORITY; p++)
        a->last[p] = NIL;
    *out = a;
    return 0;
oom:
    return common_err_set(e, COMMON_USAGE, "out of memory for an accumulator of %d items",
                          cfg->max_pending_items);
}

void worker_accum_free(worker_accum_t *acc) {
    if (!acc) return;
    free(acc->slot);
    free(acc->bucket);
    free(acc->blast);
    free(acc->nonempty);
    free(acc);
}

common_status_t worker_accum_push(worker_accum_t *acc, void *item, int len, int64_t now_ms) {
    return worker_accum_push_prio(acc, item, len, 0, now_ms);
}

common_status_t worker_accum_push_prio(worker_accum_t *acc, void *item, int len, int prio,
                                       int64_t now_ms) {
    if (len <= 0 || len > acc->cfg.max_len) return COMMON_USAGE;
    if (acc->n_items >= acc->cfg.max_pending_items ||
        acc->n_tokens + len > acc->cfg.max_pending_tokens)
        return COMMON_RETRY;
    int s = acc->free_head;
    acc->free_head = acc->slot[s].anext;
    acc->slot[s].item = item;
    acc->slot[s].len = len;
    if (prio < 0 || acc->cfg.priority_step_ms == 0) prio = 0;
    if (prio > WORKER_ACCUM_MAX_PRIORITY) prio = WORKER_ACCUM_MAX_PRIORITY;
    acc->slot[s].prio = prio;
    acc->slot[s].deadline =
        now_ms + acc->cfg.max_wait_ms - (int64_t)prio * acc->cfg.priority_step_ms;
    link_sorted(acc, s);
    acc->n_items++;
    acc->n_tokens += len;
    return COMMON_OK;
}

int64_t worker_accum_next_deadline(const worker_accum_t *acc) {
    return acc->all.head == NIL ? INT64_MAX : acc->slot[acc->all.head].deadline;
}

/* Ready also when a push could be refused (no free slot, or a longest item would not fit
 * the token limit): a producer told FULL can always pop a non-empty batch. */
int worker_accum_ready(const worker_accum_t *acc, int64_t now_ms) {
    if (acc->n_items == 0) return 0;
    if (acc->n_tokens >= acc->cfg.token_budget) return 1;
    if (acc->slot[acc->all.head].deadline <= now_ms) return 1;
    if (acc->n_items >= acc->cfg.max_pending_items) return 1;
    if (acc->n_tokens + acc->cfg.max_len > acc->cfg.max_pending_tokens) return 1;
    return 0;
}

int worker_accum_pending_items(const worker_accum_t *acc) {
    return acc->n_items;
}

long worker_accum_pending_tokens(const worker_accum_t *acc) {
    return acc->n_tokens;
}

long worker_accum_cost(const worker_accum_cfg_t *cfg, const int *lens, int n) {
    long sum = 0;
    int longest = 0;
    for (int i = 0; i < n; i++) {
        sum += lens[i];
        if (lens[i] > longest) longest = lens[i];
    }
    return cfg->padded ? (long)n * longest : sum;
}

/* The batch being formed. */
typedef struct {
    void **items;
    int *lens;
    int cap;
    int n;
    long sum;
    int longest;
    long budget; /* tokens this batch may cost */
} batch_t;

static int batch_fits(const worker_accum_t *a, const batch_t *b, int len) {
    if (b->n >= b->cap) return 0;
    if (a->cfg.padded) {
        int longest = len > b->longest ? len : b->longest;
        return (long)(b->n + 1) * longest <= b->budget;
    }
    return b->sum + len <= b->budget;
}

static void batch_take(worker_accum_t *a, batch_t *b, int s) {
    b->items[b->n] = a->slot[s].item;
    if (b->lens) b->lens[b->n] = a->slot[s].len;
    b->n++;
    b->sum += a->slot[s].len;
    if (a->slot[s].len > b->longest) b->longest = a->slot[s].len;
    unlink_slot(a, s);
}

/* Which items a growing batch takes first: those whose deadline is at most cut and whose
 * priority is at least min_prio (only: 0 = any item). */
typedef struct {
    int only;
    int64_t cut;
    int min_prio;
} want_t;

/* The nearest non-empty bucket at or beyond cursor in one direction whose head qualifies
 * (heads carry a bucket's earliest deadline). */
static int walk_find(const worker_accum_t *a, int cursor, int up, const want_t *w) {
    for (;;) {
        int l = up ? len_next_ge(a, cursor) : len_prev_le(a, cursor);
        if (l == 0) return 0;
        const slot_t *h = &a->slot[a->bucket[l].head];
        if (!w->only || (h->deadline <= w->cut && h->prio >= w->min_prio)) return l;
        cursor = up ? l + 1 : l - 1;
    }
}

/* Adds items outward in length from anchor_len, nearest length first, while they fit.
 * A direction stops at its first item that does not fit, except (w->only, unpadded,
 * downward) where a shorter wanted item may still fit: every wanted item that fits goes. */
static void batch_grow(worker_accum_t *a, batch_t *b, int anchor_len, const want_t *w) {
    int down = anchor_len, up = anchor_len + 1;
    int down_on = 1, up_on = 1;
    while (b->n < b->cap && (down_on || up_on)) {
        int ld = down_on ? walk_find(a, down, 0, w) : 0;
        int lu = up_on ? walk_find(a, up, 1, w) : 0;
        if (!ld) down_on = 0;
        if (!lu) up_on = 0;
        if (!ld && !lu) break;
        int go_down = ld && (!lu || anchor_len - ld <= lu - anchor_len);
        int l = go_down ? ld : lu;
        if (batch_fits(a, b, l)) {
            batch_take(a, b, a->bucket[l].head);
            if (go_down)
                down = l;
            else
                up = l;
        } else if (go_down && w->only && !a->cfg.padded) {
            down = l - 1;
        } else if (go_down) {
            down_on = 0;
        } else {
            up_on = 0;
        }
    }
}

int worker_accum_pop(worker_accum_t *acc, int64_t now_ms, int flush, void **items, int *lens,
                     int cap) {
    return worker_accum_pop_budget(acc, now_ms, flush, acc->cfg.token_budget, items, lens, cap);
}

int worker_accum_pop_budget(worker_accum_t *acc, int64_t now_ms, int flush, long budget,
                            void **items, int *lens, int cap) {
    if (cap <= 0 || acc->n_items == 0) return 0;
    if (!flush && !worker_accum_ready(acc, now_ms)) return 0;
    if (budget > acc->cfg.token_budget) budget = acc->cfg.token_budget;
    batch_t b = {items, lens, cap, 0, 0, 0, budget};
    int oldest = acc->all.head;
    const slot_t *o = &acc->slot[oldest];
    if ((o->deadline <= now_ms || o->prio > 0) && batch_fits(acc, &b, o->len)) {
        int anchor_len = o->len;
        /* its priority and higher first (any deadline when it has a priority), then the
         * overdue, then the nearest in length */
        want_t first = {1, o->prio > 0 ? INT64_MAX : now_ms, o->prio};
        want_t overdue = {1, now_ms, 0}, any = {0, 0, 0};
        batch_take(acc, &b, oldest);
        batch_grow(acc, &b, anchor_len, &first);
        if (first.min_prio > 0) batch_grow(acc, &b, anchor_len, &overdue);
        batch_grow(acc, &b, anchor_len, &any);
    } else {
        /* the longest item that fits (the whole budget fits any item: init checks it) */
        int anchor_len =
            len_prev_le(acc, budget < acc->cfg.max_len ? (int)budget : acc->cfg.max_len);
        if (anchor_len == 0) return 0;
        want_t any = {0, 0, 0};
        batch_take(acc, &b, acc->bucket[anchor_len].head);
        batch_grow(acc, &b, anchor_len, &any);
    }
    return b.n;
}
