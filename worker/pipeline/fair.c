/* Lanes and fair shares over per-class accumulators (worker/pipeline/fair.h). */
#include "worker/pipeline/fair.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "worker/cli/cli.h"

#define SLOTS (WORKER_FAIR_TENANTS + 1) /* the last one is "_other" */
#define OTHER WORKER_FAIR_TENANTS

typedef struct {
    char name[257]; /* the tenant bound to the slot; "" = free */
    int weight;
    int items; /* held in every lane (its tokens: each lane's class, sub[lane][slot]) */
} slot_t;

struct worker_fair {
    worker_fair_cfg_t cfg;
    worker_fair_weights_t w;
    long tenant_cap;
    long plain_budget;   /* tokens of a batch without urgent records (plain_budget_of) */
    long reserve_tokens; /* room the plainer records leave to each more urgent rank (room_of) */
    int reserve_items;
    long cap_reserve; /* of a class's cap, left by priority 0 to the priorities above it */
    worker_accum_t *sub[WORKER_FAIR_MAX_LANES][SLOTS];
    long deficit[WORKER_FAIR_MAX_LANES][SLOTS];
    int credited[WORKER_FAIR_MAX_LANES][SLOTS]; /* this turn's quantum is added */
    int rr[WORKER_FAIR_MAX_LANES];              /* whose turn it is */
    int lane_items[WORKER_FAIR_MAX_LANES];
    slot_t slot[SLOTS];
    int n_items;
    long n_tokens;
};

common_status_t worker_fair_weights_parse(const char *s, worker_fair_weights_t *out,
                                          common_err_t *e) {
    worker_fair_weights_t tmp, *w = out ? out : &tmp;
    w->n = 0;
    const char *p = s;
    while (*p) {
        const char *end = strchr(p, ',');
        size_t n = end ? (size_t)(end - p) : strlen(p);
        const char *eq = memchr(p, '=', n);
        if (!eq || eq == p) {
            return common_err_set(e, COMMON_USAGE, "--tenant-weight '%.*s': give TENANT=WEIGHT",
                                  (int)n, p);
        }
        size_t tn = (size_t)(eq - p);
        char num[32];
        size_t vn = n - tn - 1;
        long v = 0;
        if (tn > 256 || vn == 0 || vn >= sizeof(num)) {
            return common_err_set(e, COMMON_USAGE,
                                  "--tenant-weight '%.*s': tenant up to 256 bytes, then =WEIGHT",
                                  (int)n, p);
        }
        memcpy(num, eq + 1, vn);
        num[vn] = 0;
        if (worker_cli_long(num, 1, WORKER_FAIR_MAX_WEIGHT, &v)) {
            return common_err_set(e, COMMON_USAGE,
                                  "--tenant-weight '%.*s': the weight must be an integer in 1..%d",
                                  (int)n, p, WORKER_FAIR_MAX_WEIGHT);
        }
        if (w->n == WORKER_FAIR_MAX_WEIGHTS) {
            return common_err_set(e, COMMON_USAGE, "--tenant-weight: at most %d tenants",
                                  WORKER_FAIR_MAX_WEIGHTS);
        }
        memcpy(w->name[w->n], p, tn);
        w->name[w->n][tn] = 0;
        w->weight[w->n++] = (int)v;
        p += n;
        if (*p == ',') p++;
    }
    return COMMON_OK;
}

/* The room kept for the more urgent records (fair.h: admission), decided here alone: one token
 * budget (an urgent batch's worth), at most an equal share of the whole with the plainest
 * records, who keep room for one longest item; the same share of the items; and of a class's
 * cap, the same tokens, short of one longest item. */
static void reserve_of(worker_fair_t *f) {
    const worker_accum_cfg_t *c = &f->cfg.acc;
    const int ranks = 1 + (f->cfg.n_lanes > 1) + (c->priority_step_ms > 0);
    f->reserve_tokens = f->reserve_items = 0;
    f->cap_reserve = 0;
    if (ranks == 1) return;
    long r = c->max_pending_tokens / ranks;
    if (r > c->token_budget) r = c->token_budget;
    if (r > (c->max_pending_tokens - c->max_len) / (ranks - 1))
        r = (c->max_pending_tokens - c->max_len) / (ranks - 1);
    f->reserve_tokens = r;
    f->reserve_items =
        (int)((double)c->max_pending_items * (double)r / (double)c->max_pending_tokens);
    if (c->priority_step_ms > 0)
        f->cap_reserve = r < f->tenant_cap - c->max_len ? r : f->tenant_cap - c->max_len;
}

/* The token budget of a batch that holds no urgent lane's records, decided here alone. A
 * backend that runs a batch inside its submit (the cpu's: gpu_backend_props_t.synchronous)
 * keeps the encoder thread there to the batch's end, so an urgent record that arrives meanwhile
 * waits for the rest of that batch (the whole budget: some 0.15 s of bert-mini on two cores).
 * With a lane more urgent than the last configured, such a backend's plainer batches hold
 * 1/PLAIN_SHARE of the budget, never less than one longest item: the wait is a fraction of a
 * batch, and the urgent lane's own batches keep the whole budget. Configured, not "urgent
 * records seen lately": the first urgent record after a quiet spell would wait a whole batch,
 * and those records are the urgent tail; what the smaller batches cost the bulk is measured by
 * tests/bench/lanes_bench.sh (its bulk-alone worker has no urgent lane). A backend that queues its
 * batches on a device runs one in milliseconds and wants big ones for its matrix units: the whole
 * budget. Half, not a quarter: `reclass bench` on bert-mini at 2 threads spent 10-20% more CPU
 * on 1024-token batches than on 4096 (the backend cuts them into 256-token chunks, two a thread), a
 * few % on 2048, and the bulk must keep 90% of its rate beside the urgent lane. */
#define PLAIN_SHARE 2

static long plain_budget_of(const worker_fair_cfg_t *c) {
    const long whole = c->acc.token_budget;
    if (!c->synchronous || c->n_lanes < 2) return whole;
    long b = whole / PLAIN_SHARE;
    return b < c->acc.max_len ? c->acc.max_len : b; /* max_len <= whole: accum_init */
}

/* How many ranks of reserve a record leaves free: 0 in a lane more urgent than the last; in
 * the last lane, one for the urgent lanes, and one more at priority 0 for the priorities. */
static int ranks_above(const worker_fair_t *f, int lane, int prio) {
    if (lane < f->cfg.n_lanes - 1) return 0;
    return (f->cfg.n_lanes > 1) + (prio <= 0 && f->cfg.acc.priority_step_ms > 0);
}

common_status_t worker_fair_init(const worker_fair_cfg_t *cfg, worker_fair_t **out,
                                 common_err_t *e) {
    *out = NULL;
    if (cfg->n_lanes < 1 || cfg->n_lanes > WORKER_FAIR_MAX_LANES)
        return common_err_set(e, COMMON_USAGE, "%d lanes: give 1 to %d", cfg->n_lanes,
                              WORKER_FAIR_MAX_LANES);
    worker_fair_t *f = calloc(1, sizeof(*f));
    if (!f) return common_err_set(e, COMMON_FATAL, "out of memory");
    f->cfg = *cfg;
    common_status_t st;
    if (cfg->weights && (st = worker_fair_weights_parse(cfg->weights, &f->w, e)) != COMMON_OK) {
        free(f);
        return st;
    }
    f->tenant_cap =
        cfg->tenant_max_tokens > 0 ? cfg->tenant_max_tokens : cfg->acc.max_pending_tokens / 2;
    /* below one longest item the tenant could never be served; below a budget, never fill one */
    if (f->tenant_cap < cfg->acc.token_budget) f->tenant_cap = cfg->acc.token_budget;
    f->plain_budget = plain_budget_of(cfg);
    reserve_of(f);
    for (int l = 0; l < cfg->n_lanes; l++)
        for (int s = 0; s < SLOTS; s++)
            if ((st = worker_accum_init(&cfg->acc, &f->sub[l][s], e)) != COMMON_OK) {
                worker_fair_free(f);
                return st;
            }
    snprintf(f->slot[OTHER].name, sizeof(f->slot[OTHER].name), "_other");
    f->slot[OTHER].weight = 1;
    *out = f;
    return COMMON_OK;
}

void worker_fair_free(worker_fair_t *f) {
    if (!f) return;
    for (int l = 0; l < WORKER_FAIR_MAX_LANES; l++)
        for (int s = 0; s < SLOTS; s++)
            worker_accum_free(f->sub[l][s]);
    free(f);
}

static int weight_of(const worker_fair_t *f, const char *tenant) {
    for (int i = 0; i < f->w.n; i++)
        if (!strcmp(f->w.name[i], tenant)) return f->w.weight[i];
    return 1;
}

/* The tenant's slot: its own, a free one (bound now), or "_other". */
static int slot_for(worker_fair_t *f, const char *tenant) {
    int free_s = -1;
    for (int s = 0; s < WORKER_FAIR_TENANTS; s++) {
        if (f->slot[s].items > 0 && !strcmp(f->slot[s].name, tenant)) return s;
        if (f->slot[s].items == 0 && free_s < 0) free_s = s;
    }
    if (free_s < 0 || strlen(tenant) >= sizeof(f->slot[0].name)) return OTHER;
    slot_t *sl = &f->slot[free_s];
    snprintf(sl->name, sizeof(sl->name), "%s", tenant);
    sl->weight = weight_of(f, tenant);
    for (int l = 0; l < f->cfg.n_lanes; l++) { /* a new tenant starts with a clean turn */
        f->deficit[l][free_s] = 0;
        f->credited[l][free_s] = 0;
    }
    return free_s;
}

common_status_t worker_fair_push(worker_fair_t *f, void *item, int len, int lane,
                                 const char *tenant, int prio, int64_t now_ms) {
    if (len <= 0 || len > f->cfg.acc.max_len || lane < 0 || lane >= f->cfg.n_lanes)
        return COMMON_USAGE;
    const int above = ranks_above(f, lane, prio);
    if (f->n_items >= f->cfg.acc.max_pending_items - above * f->reserve_items ||
        f->n_tokens + len > f->cfg.acc.max_pending_tokens - above * f->reserve_tokens)
        return COMMON_RETRY;
    int s = slot_for(f, tenant ? tenant : "");
    long cap = prio <= 0 ? f->tenant_cap - f->cap_reserve : f->tenant_cap;
    if (worker_accum_pending_tokens(f->sub[lane][s]) + len > cap) return COMMON_RETRY;
    common_status_t rc = worker_accum_push_prio(f->sub[lane][s], item, len, prio, now_ms);
    if (rc != COMMON_OK) return rc;
    f->slot[s].items++;
    f->lane_items[lane]++;
    f->n_items++;
    f->n_tokens += len;
    return COMMON_OK;
}

int64_t worker_fair_next_deadline(const worker_fair_t *f) {
    int64_t d = INT64_MAX;
    for (int l = 0; l < f->cfg.n_lanes; l++)
        for (int s = 0; s < SLOTS; s++) {
            int64_t x = worker_accum_next_deadline(f->sub[l][s]);
            if (x < d) d = x;
        }
    return d;
}

int worker_fair_urgent_lane(const worker_fair_t *f) {
    for (int l = 0; l < f->cfg.n_lanes - 1; l++)
        if (f->lane_items[l] > 0) return l;
    return -1;
}

int worker_fair_ready(const worker_fair_t *f, int64_t now_ms) {
    const worker_accum_cfg_t *c = &f->cfg.acc;
    if (f->n_items == 0) return 0;
    if (worker_fair_urgent_lane(f) >= 0) return 1;
    if (f->n_tokens >= f->plain_budget) return 1; /* no urgent lane's records: see above */
    /* the plainest record's bounds (ranks_above at most 2) */
    const int above = ranks_above(f, f->cfg.n_lanes - 1, 0);
    if (f->n_items >= c->max_pending_items - above * f->reserve_items) return 1;
    if (f->n_tokens + c->max_len > c->max_pending_tokens - above * f->reserve_tokens) return 1;
    for (int l = 0; l < f->cfg.n_lanes; l++)
        for (int s = 0; s < SLOTS; s++) {
            long held = worker_accum_pending_tokens(f->sub[l][s]);
            if (held > 0 && held + c->max_len > f->tenant_cap - f->cap_reserve) return 1;
        }
    return worker_fair_next_deadline(f) <= now_ms;
}

/* Takes up to allow tokens of class (lane, s) into items[n..cap); returns the tokens taken and
 * adds the count to *n. */
static long take(worker_fair_t *f, int lane, int s, int64_t now_ms, long allow, void **items,
                 int *lens, int *n, int cap) {
    worker_accum_t *a = f->sub[lane][s];
    long before = worker_accum_pending_tokens(a);
    int k =
        worker_accum_pop_budget(a, now_ms, 1, allow, items + *n, lens ? lens + *n : NULL, cap - *n);
    long tok = before - worker_accum_pending_tokens(a);
    *n += k;
    f->slot[s].items -= k;
    f->lane_items[lane] -= k;
    f->n_items -= k;
    f->n_tokens -= tok;
    return tok;
}

int worker_fair_pop(worker_fair_t *f, int64_t now_ms, int flush, void **items, int *lens, int cap) {
    if (cap <= 0 || f->n_items == 0) return 0;
    if (!flush && !worker_fair_ready(f, now_ms)) return 0;
    const long quantum = f->cfg.acc.max_len;
    const int padded = f->cfg.acc.padded;
    const int urgent = worker_fair_urgent_lane(f);
    long remaining = urgent >= 0 ? f->cfg.acc.token_budget : f->plain_budget;
    int n = 0;
    const int lanes = urgent >= 0 ? urgent + 1 : f->cfg.n_lanes; /* an urgent lane goes alone */
    for (int l = 0; l < lanes && remaining > 0 && n < cap; l++) {
        int idle = 0; /* turns in a row that took nothing: a whole round of them ends the lane */
        while (f->lane_items[l] > 0 && remaining > 0 && n < cap && idle <= SLOTS) {
            int s = f->rr[l];
            if (worker_accum_pending_items(f->sub[l][s]) == 0) {
                f->deficit[l][s] = 0;
                f->credited[l][s] = 0;
                f->rr[l] = (s + 1) % SLOTS;
                idle++;
                continue;
            }
            if (!f->credited[l][s]) {
                long cap_d = 2 * quantum * f->slot[s].weight; /* no hoarding across batches */
                f->deficit[l][s] += quantum * f->slot[s].weight;
                if (f->deficit[l][s] > cap_d) f->deficit[l][s] = cap_d;
                f->credited[l][s] = 1;
            }
            long allow = remaining < f->deficit[l][s] ? remaining : f->deficit[l][s];
            int n0 = n;
            long tok = take(f, l, s, now_ms, allow, items, lens, &n, cap);
            f->deficit[l][s] -= tok;
            if (!padded) remaining -= tok;
            if (padded && n > n0) return n; /* one class per padded batch */
            idle = n > n0 ? 0 : idle + 1;
            int emptied = worker_accum_pending_items(f->sub[l][s]) == 0;
            if (emptied) f->deficit[l][s] = 0;
            if (!emptied && n > n0 && (remaining < f->deficit[l][s] || n == cap))
                break; /* the batch, not the deficit, ended this turn: it goes on next batch */
            f->credited[l][s] = 0;
            f->rr[l] = (s + 1) % SLOTS;
        }
    }
    return n;
}

int worker_fair_pending_items(const worker_fair_t *f) {
    return f->n_items;
}

long worker_fair_pending_tokens(const worker_fair_t *f) {
    return f->n_tokens;
}

int worker_fair_pending_lane(const worker_fair_t *f, int lane) {
    return lane >= 0 && lane < f->cfg.n_lanes ? f->lane_items[lane] : 0;
}

long worker_fair_plain_budget(const worker_fair_t *f) {
    return f->plain_budget;
}

long worker_fair_tenant_cap(const worker_fair_t *f) {
    return f->tenant_cap;
}
