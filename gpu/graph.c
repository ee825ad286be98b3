/* The graph's names, its check against a backend and its memory plan (gpu/graph.h). The
 * builders are the families' (gpu/families). */
#include "gpu/graph.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu/model/fp8.h"

static const char *const prec_names[GPU_PREC_COUNT] = {[GPU_PREC_FP32] = "fp32",
                                                       [GPU_PREC_FP16] = "fp16",
                                                       [GPU_PREC_BF16] = "bf16",
                                                       [GPU_PREC_FP8] = "fp8"};

const char *gpu_precision_name(gpu_precision_t p) {
    return (unsigned)p < GPU_PREC_COUNT ? prec_names[p] : "?";
}

int gpu_precision_parse(const char *name, gpu_precision_t *out) {
    for (int p = 0; name && p < GPU_PREC_COUNT; p++)
        if (strcmp(name, prec_names[p]) == 0) {
            *out = (gpu_precision_t)p;
            return 0;
        }
    return -1;
}

static const char *const kind_names[GPU_OP_COUNT] = {[GPU_OP_EMBED] = "embed",
                                                     [GPU_OP_NORM] = "norm",
                                                     [GPU_OP_LINEAR] = "linear",
                                                     [GPU_OP_ATTENTION] = "attention",
                                                     [GPU_OP_POOL] = "pool"};

int gpu_op_rel_row(const gpu_op_t *op, int rel) {
    int bucket = rel;
    if (op->rel_buckets > 0 && op->rel_max_pos > 0) {
        /* make_log_bucket_position, in fp32 as torch evaluates it */
        const int mid = op->rel_buckets / 2, sign = (rel > 0) - (rel < 0);
        const int abs_pos = rel < mid && rel > -mid ? mid - 1 : abs(rel);
        if (abs_pos > mid) {
            const float den = logf((float)((double)(op->rel_max_pos - 1) / mid));
            const float lp =
                ceilf(logf((float)abs_pos / (float)mid) / den * (float)(mid - 1)) + (float)mid;
            bucket = (int)lp * sign;
        }
    }
    const int row = bucket + op->rel_span;
    return row < 0 ? 0 : row > 2 * op->rel_span - 1 ? 2 * op->rel_span - 1 : row;
}

const char *gpu_op_kind_name(gpu_op_kind_t k) {
    return (unsigned)k < GPU_OP_COUNT ? kind_names[k] : "?";
}

const char *gpu_op_describe(const gpu_op_t *op, char *buf, size_t len) {
    char what[96] = "";
    switch (op->kind) {
    case GPU_OP_LINEAR:
        snprintf(what, sizeof what, " (%d x %d%s%s%s)", op->n, op->k,
                 op->epi == GPU_EPI_RESIDUAL ? ", +residual"
                 : op->epi == GPU_EPI_GLU    ? ", glu "
                 : op->epi == GPU_EPI_ACT    ? ", "
                                             : "",
                 op->epi == GPU_EPI_ACT || op->epi == GPU_EPI_GLU ? gpu_model_act_name(op->act)
                                                                  : "",
                 "");
        break;
    case GPU_OP_ATTENTION: {
        int n = snprintf(what, sizeof what, " (%d heads x %d", op->heads, op->head_dim);
        if (op->window > 0)
            n += snprintf(what + n, sizeof what - (size_t)n, ", window %d", op->window);
        if (op->rope_theta > 0)
            n += snprintf(what + n, sizeof what - (size_t)n, ", rope %g", (double)op->rope_theta);
        if (op->w[0] >= 0 || op->w[1] >= 0)
            n += snprintf(what + n, sizeof what - (size_t)n, ", disentangled%s%s",
                          op->w[0] >= 0 ? " c2p" : "", op->w[1] >= 0 ? " p2c" : "");
        snprintf(what + n, sizeof what - (size_t)n, ")");
        break;
    }
    case GPU_OP_POOL:
        snprintf(what, sizeof what, " (%s)", op->pool == GPU_POOL_MEAN ? "mean" : "cls");
        break;
    case GPU_OP_NORM:
        if (op->w[0] < 0) snprintf(what, sizeof what, " (copy)");
        break;
    default:
        break;
    }
    snprintf(buf, len, "%s: %s%s %s", op->name, gpu_op_kind_name(op->kind), what,
             gpu_precision_name(op->prec));
    return buf;
}

size_t gpu_graph_rows(const gpu_graph_t *g, int t, int token_budget, int max_seqs) {
    const gpu_tensor_t *x = &g->tensor[t];
    return x->rows_kind == GPU_ROWS_TOKENS ? (size_t)token_budget
           : x->rows_kind == GPU_ROWS_SEQS ? (size_t)max_seqs
                                           : (size_t)x->rows;
}

common_status_t gpu_graph_check(const gpu_graph_t *g, const char *backend,
                                int (*supports_op)(const gpu_graph_t *g, const gpu_op_t *op),
                                common_err_t *err) {
    if (!supports_op) return COMMON_OK;
    for (int i = 0; i < g->n_prelude + g->n_ops; i++) {
        const gpu_op_t *op = i < g->n_prelude ? &g->prelude[i] : &g->op[i - g->n_prelude];
        if (supports_op(g, op)) continue;
        char d[160];
        return common_err_set(
            err, COMMON_USAGE, "the %s backend lacks %s (%s): use another precision or backend",
            backend, gpu_op_describe(op, d, sizeof d), gpu_model_family_name(g->cfg.family));
    }
    return COMMON_OK;
}

int gpu_graph_norm_feeds_fp8(const gpu_graph_t *g, int i) {
    if (i < 0 || i + 1 >= g->n_ops) return 0;
    const gpu_op_t *op = &g->op[i], *next = op + 1;
    return op->kind == GPU_OP_NORM && op->w[0] >= 0 && op->n % 8 == 0 && op->out.col == 0 &&
           g->tensor[op->out.t].cols == op->n && next->kind == GPU_OP_LINEAR &&
           next->prec == GPU_PREC_FP8 && next->src[0].t == op->out.t && next->src[0].col == 0 &&
           next->k == op->n && g->tensor[next->out.t].rows_kind == g->tensor[op->out.t].rows_kind;
}

/* 1 when op b reads the whole rows op a writes (one tensor, column 0, a's n columns). */
static int whole_rows(const gpu_graph_t *g, const gpu_op_t *a, const gpu_op_t *b) {
    return a->out.t >= 0 && a->out.t == b->src[0].t && a->out.col == 0 && b->src[0].col == 0 &&
           g->tensor[a->out.t].cols == a->n;
}

float gpu_graph_fp8_static_scale(const gpu_graph_t *g, int i) {
    if (i < 2 || i >= g->n_ops) return 0.0f;
    const gpu_op_t *op = &g->op[i], *p = op - 1, *ln = op - 2;
    if (op->kind != GPU_OP_LINEAR || op->prec != GPU_PREC_FP8 || p->kind != GPU_OP_LINEAR ||
        p->epi != GPU_EPI_ACT || p->act == GPU_ACT_TANH || p->w[0] < 0 || p->n != op->k ||
        !whole_rows(g, p, op) || ln->kind != GPU_OP_NORM || ln->w[0] < 0 || ln->w[1] < 0 ||
        ln->n != p->k || !whole_rows(g, ln, p))
        return 0.0f;
    const float *ga = g->tensor[ln->w[0]].data, *be = g->tensor[ln->w[1]].data;
    const float *w = g->tensor[p->w[0]].data, *b = p->w[1] >= 0 ? g->tensor[p->w[1]].data : NULL;
    if (!ga || !be || !w || (p->w[1] >= 0 && !b)) return 1.0f;
    return gpu_fp8_act_bound_scale(ga, be, ln->n, w, b, p->n);
}

void gpu_graph_free(gpu_graph_t *g) {
    if (!g) return;
    free(g->tensor);
    free(g->prelude);
    free(g->op);
    free(g);
}

/* ---- the memory plan ---- */

static size_t align_up(size_t n) {
    return (n + GPU_GRAPH_ALIGN - 1) / GPU_GRAPH_ALIGN * GPU_GRAPH_ALIGN;
}

/* Bytes of a weight element as the ops reading tensor t run: the widest of them. */
static size_t weight_elem(const gpu_graph_t *g, int t) {
    if (g->tensor[t].fp32) return 4;
    size_t e = 0;
    for (int i = 0; i < g->n_prelude + g->n_ops; i++) {
        const gpu_op_t *op = i < g->n_prelude ? &g->prelude[i] : &g->op[i - g->n_prelude];
        for (int j = 0; j < GPU_OP_W; j++) {
            if (op->w[j] != t) continue;
            size_t b = op->prec == GPU_PREC_FP32 ? 4 : op->prec == GPU_PREC_FP8 ? 1 : 2;
            /* biases and norm parameters are read beside fp32 math */
            if (op->kind != GPU_OP_LINEAR || j != 0) b = op->prec == GPU_PREC_FP32 ? 4 : 2;
            if (b > e) e = b;
        }
    }
    return e;
}

/* Columns of view v (src[j], or the output for j < 0) that op reads or writes. */
static int view_cols(const gpu_op_t *op, int j) {
    switch (op->kind) {
    case GPU_OP_LINEAR:
        return j < 0 ? op->n : op->k;
    case GPU_OP_ATTENTION:
        return op->heads * op->head_dim;
    default:
        return op->n;
    }
}

static int reads(const gpu_op_t *op, int t) {
    for (int j = 0; j < GPU_OP_SRC; j++)
        if (op->src[j].t == t) return 1;
    return op->kind == GPU_OP_LINEAR && op->epi == GPU_EPI_RESIDUAL && op->out.t == t;
}

/* Whether op i's write of columns [c0, c1) of t leaves no older value of t to read: every
 * read of t until t's next write that covers those columns reads inside them. */
static int overwrites(const gpu_graph_t *g, int i, int t, int c0, int c1) {
    for (int j = i + 1; j < g->n_ops; j++) {
        const gpu_op_t *op = &g->op[j];
        for (int s = 0; s < GPU_OP_SRC; s++)
            if (op->src[s].t == t &&
                (op->src[s].col < c0 || op->src[s].col + view_cols(op, s) > c1))
                return 0;
        if (op->out.t == t && op->kind == GPU_OP_LINEAR && op->epi == GPU_EPI_RESIDUAL &&
            (op->out.col < c0 || op->out.col + view_cols(op, -1) > c1))
            return 0;
        if (op->out.t == t && !reads(op, t) && op->out.col <= c0 &&
            op->out.col + view_cols(op, -1) >= c1)
            return 1;
    }
    return 1;
}

/* The live ranges of activation t: [from, to] op pairs, a range from each write that leaves
 * no older value to read, to the last op that touches t before the next. Up to cap. */
static int live_ranges(const gpu_graph_t *g, int t, int (*r)[2], int cap) {
    int n = 0;
    for (int i = 0; i < g->n_ops; i++) {
        const gpu_op_t *op = &g->op[i];
        const int rd = reads(op, t), wr = op->out.t == t;
        if (!rd && !wr) continue;
        const int fresh =
            wr && !rd && overwrites(g, i, t, op->out.col, op->out.col + view_cols(op, -1));
        if (n == 0 || (fresh && n < cap)) {
            r[n][0] = r[n][1] = i, n++;
        } else {
            r[n - 1][1] = i;
        }
    }
    return n;
}

#define GPU_GRAPH_RANGES 64 /* live ranges kept per tensor; past it the last one stretches */

int gpu_graph_place(const gpu_graph_t *g, const size_t *bytes, size_t *offset, size_t *total) {
    const size_t nt = (size_t)g->n_tensors;
    int(*rg)[GPU_GRAPH_RANGES][2] = calloc(nt ? nt : 1, sizeof *rg);
    int *nr = calloc(nt ? nt : 1, sizeof *nr), *placed = calloc(nt ? nt : 1, sizeof *placed);
    int n_placed = 0;
    *total = 0;
    if (!rg || !nr || !placed) {
        free(rg), free(nr), free(placed);
        return -1;
    }
    for (int t = 0; t < g->n_tensors; t++)
        if (g->tensor[t].cls == GPU_TENSOR_ACT && bytes[t])
            nr[t] = live_ranges(g, t, rg[t], GPU_GRAPH_RANGES);
    for (int i = 0; i < g->n_prelude; i++) /* what the prelude touches stays apart (nr 0) */
        for (int j = -1; j < GPU_OP_SRC; j++) {
            const int t = j < 0 ? g->prelude[i].out.t : g->prelude[i].src[j].t;
            if (t >= 0) nr[t] = 0;
        }
    /* first fit, largest first: the lowest offset clear of every placed tensor that is live
     * at an op where t is */
    for (;;) {
        int t = -1;
        for (int u = 0; u < g->n_tensors; u++)
            if (g->tensor[u].cls == GPU_TENSOR_ACT && bytes[u] && offset[u] == (size_t)-1 &&
                (t < 0 || bytes[u] > bytes[t]))
                t = u;
        if (t < 0) break;
        size_t at = 0;
        for (int moved = 1; moved;) {
            moved = 0;
            for (int k = 0; k < n_placed; k++) {
                const int u = placed[k];
                int clash = nr[t] == 0 || nr[u] == 0; /* untouched: kept apart */
                for (int a = 0; a < nr[t] && !clash; a++)
                    for (int b = 0; b < nr[u] && !clash; b++)
                        clash = rg[t][a][0] <= rg[u][b][1] && rg[u][b][0] <= rg[t][a][1];
                if (clash && at < offset[u] + align_up(bytes[u]) &&
                    offset[u] < at + align_up(bytes[t])) {
                    at = offset[u] + align_up(bytes[u]);
                    moved = 1;
                }
            }
        }
        offset[t] = at;
        placed[n_placed++] = t;
        if (at + align_up(bytes[t]) > *total) *total = at + align_up(bytes[t]);
    }
    free(rg), free(nr), free(placed);
    return 0;
}

int gpu_graph_plan(const gpu_graph_t *g, const gpu_graph_plan_opts_t *o, gpu_graph_plan_t *p) {
    memset(p, 0, sizeof *p);
    p->offset = calloc((size_t)g->n_tensors, sizeof *p->offset);
    p->bytes = calloc((size_t)g->n_tensors, sizeof *p->bytes);
    p->op_bytes = calloc((size_t)(g->n_ops > 0 ? g->n_ops : 1), sizeof *p->op_bytes);
    if (!p->offset || !p->bytes || !p->op_bytes) {
        gpu_graph_plan_free(p);
        return -1;
    }
    size_t cur = 0;
    for (int t = 0; t < g->n_tensors; t++) {
        const gpu_tensor_t *x = &g->tensor[t];
        const size_t elems = gpu_graph_rows(g, t, o->token_budget, o->max_seqs) * (size_t)x->cols;
        if (x->cls == GPU_TENSOR_WEIGHT) {
            p->weights_bytes += align_up(elems * weight_elem(g, t));
            continue;
        }
        const size_t e = x->fp32 || x->cls == GPU_TENSOR_LOGITS ? 4 : o->act_bytes;
        p->offset[t] = cur;
        p->bytes[t] = elems * e;
        cur += align_up(p->bytes[t]);
    }
    p->arena_bytes = cur;
    /* each tensor's bytes go to the first op that writes it */
    char *seen = calloc((size_t)g->n_tensors, 1);
    if (!seen) {
        gpu_graph_plan_free(p);
        return -1;
    }
    for (int i = 0; i < g->n_ops; i++) {
        const int t = g->op[i].out.t;
        if (t >= 0 && !seen[t]) p->op_bytes[i] = align_up(p->bytes[t]), seen[t] = 1;
    }
    free(seen);
    return 0;
}

void gpu_graph_plan_free(gpu_graph_plan_t *p) {
    free(p->offset);
    free(p->bytes);
    free(p->op_bytes);
    memset(p, 0, sizeof *p);
}
