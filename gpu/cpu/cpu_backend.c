/* The fp32 CPU backend. A packed batch is cut into chunks of whole sequences; a thread takes
 * a chunk and runs the entire encoder on it with single-threaded GEMMs, so threads never
 * wait on each other inside a batch (BERT mixes tokens only within a sequence). Every
 * buffer is allocated at init, sized by the token budget; a chunk uses only the rows of its
 * own tokens. Projections run on gpu_cpu_gemm (weights packed at init) where the CPU has
 * AVX-512 or AVX2 + FMA (a sequence's logits then do not depend on its batch), else on
 * OpenBLAS sgemm. After the last layer's K/V projection only each
 * sequence's first token is carried on (the classifier reads nothing else). Tests run the
 * OpenBLAS path on any CPU through gpu_cpu_init_as (tests/lib/cpu_blas_backend.c). This
 * file sets up buffers and threads; the graph (gpu/graph.h) is set up by cpu_weights.c and
 * run by cpu_graph.c. */
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gpu/backend.h"
#include "gpu/cpu/cpu_backend.h"
#include "gpu/cpu/cpu_backend_int.h"
#include "gpu/cpu/cpu_gemm.h"
#include "gpu/cpu/cpu_gemm_bf16.h"
#include "gpu/cpu/cpu_kernels.h"

#define CPU_MAX_THREADS 256
/* Tokens per chunk x hidden: 1024 tokens at H = 256 measured best on a 2 MiB-L2 Xeon
 * (flat within ~5% from 512 to 2048); wider models get proportionally fewer tokens. */
#define CPU_CHUNK_TOKENS_X_H (1024 * 256)

extern const gpu_backend_ops_t gpu_cpu_backend_ops; /* below; gpu/backend.c finds it by name */

/* OpenBLAS's own threads would compete with ours for the same cores. */
extern void openblas_set_num_threads(int num_threads);

/* Threads pull chunks off the batch's list until none is left, so a thread that other
 * processes slow down simply takes fewer chunks. */
static void run_chunks(gpu_backend_t *be, cpu_worker_t *wk) {
    for (;;) {
        int i = atomic_fetch_add(&be->next_chunk, 1);
        if (i >= be->n_chunks) return;
        gpu_cpu_encode_range(be, be->batch, be->chunk_at[i], be->chunk_at[i + 1], wk);
    }
}

static void *worker_main(void *arg) {
    cpu_worker_t *wk = arg;
    gpu_backend_t *be = wk->be;
    unsigned seen = 0;
    for (;;) {
        pthread_mutex_lock(&be->mu);
        while (be->gen == seen && !be->stop)
            pthread_cond_wait(&be->cv_go, &be->mu);
        if (be->stop) {
            pthread_mutex_unlock(&be->mu);
            return NULL;
        }
        seen = be->gen;
        pthread_mutex_unlock(&be->mu);
        run_chunks(be, wk);
        pthread_mutex_lock(&be->mu);
        if (--be->pending == 0) pthread_cond_signal(&be->cv_done);
        pthread_mutex_unlock(&be->mu);
    }
}

/* Cuts the batch into runs of whole sequences of at most be->chunk tokens (a longer
 * sequence is a run of its own). Each run goes through the entire encoder at once, so its
 * activations stay in cache across layers; runs are also the unit threads share out, so
 * small batches are cut finer (about two runs per thread) to keep every thread busy. */
static void plan_chunks(gpu_backend_t *be, const gpu_batch_t *bt) {
    const int *cu = bt->cu_seqlens;
    int target = be->chunk;
    if (be->n_threads > 1) {
        int fair = bt->n_tokens / (2 * be->n_threads);
        if (fair < target) target = fair < 64 ? 64 : fair;
    }
    int n = 0, s = 0;
    while (s < bt->n_seqs) {
        be->chunk_at[n++] = s;
        int e = s + 1;
        while (e < bt->n_seqs && cu[e + 1] - cu[s] <= target)
            e++;
        s = e;
    }
    be->chunk_at[n] = bt->n_seqs;
    be->n_chunks = n;
    atomic_store(&be->next_chunk, 0);
}

static common_status_t cpu_run(gpu_backend_t *be, const gpu_batch_t *batch, float *logits,
                               common_err_t *err) {
    gpu_backend_opts_t o = be->opts;
    o.max_len = be->max_len;
    o.max_seqs = be->max_seqs;
    if (gpu_batch_check(batch, &be->m->cfg, &o, err) != 0) return err->code;
    be->batch = batch;
    if (be->g->logits >= 0) be->tp[be->g->logits] = logits; /* written in the caller's rows */
    plan_chunks(be, batch);
    if (be->n_threads > 1) {
        pthread_mutex_lock(&be->mu);
        be->pending = be->n_threads - 1;
        be->gen++;
        pthread_cond_broadcast(&be->cv_go);
        pthread_mutex_unlock(&be->mu);
    }
    run_chunks(be, &be->w[0]);
    if (be->n_threads > 1) {
        pthread_mutex_lock(&be->mu);
        while (be->pending > 0)
            pthread_cond_wait(&be->cv_done, &be->mu);
        pthread_mutex_unlock(&be->mu);
    }
    return COMMON_OK;
}

static common_status_t cpu_forward(gpu_backend_t *be, const gpu_batch_t *batch, float *logits,
                                   common_err_t *err) {
    if (gpu_flight_idle(&be->flight, err) != 0) return err->code;
    return cpu_run(be, batch, logits, err);
}

static common_status_t cpu_submit(gpu_backend_t *be, const gpu_batch_t *batch, common_err_t *err) {
    const int slot = gpu_flight_slot(&be->flight, err);
    if (slot < 0) return err->code;
    common_status_t rc = cpu_run(be, batch, be->flight_logits[slot], err);
    if (rc == 0) gpu_flight_push(&be->flight, slot, batch->n_seqs);
    return rc;
}

static common_status_t cpu_collect(gpu_backend_t *be, float *logits, common_err_t *err) {
    int n_seqs;
    const int slot = gpu_flight_pop(&be->flight, &n_seqs, err);
    if (slot < 0) return err->code;
    memcpy(logits, be->flight_logits[slot],
           sizeof(float) * (size_t)n_seqs * (size_t)be->m->cfg.num_labels);
    return COMMON_OK;
}

static int cpu_mem_stats(gpu_backend_t *be, gpu_mem_stats_t *st) {
    memset(st, 0, sizeof *st);
    st->weights_bytes = be->m->blob_floats * sizeof(float);
    st->weights_bytes += (be->packed_floats + be->fp8_w_floats) * sizeof(float);
    st->weights_bytes += be->packed16_elems * sizeof(uint16_t);
    st->arena_bytes = be->arena_bytes;
    st->device_used = 0;
    st->allocations_after_init = 0; /* forward never allocates */
    return 0;
}

static void cpu_free(gpu_backend_t *be) {
    if (!be) return;
    if (be->w) {
        pthread_mutex_lock(&be->mu);
        be->stop = 1;
        pthread_cond_broadcast(&be->cv_go);
        pthread_mutex_unlock(&be->mu);
        for (int i = 1; i <= be->started; i++)
            pthread_join(be->w[i].th, NULL);
        for (int i = 0; i < be->n_threads; i++) {
            free(be->w[i].scratch);
            free(be->w[i].xq);
            free(be->w[i].op_s);
            free(be->w[i].op_runs);
        }
        free(be->w);
    }
    pthread_mutex_destroy(&be->mu);
    pthread_cond_destroy(&be->cv_go);
    pthread_cond_destroy(&be->cv_done);
    gpu_cpu_graph_free(be);
    free(be->chunk_at);
    free(be->flight_logits[0]);
    free(be->flight_logits[1]);
    free(be);
}

static int online_cores(void) {
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0) return CPU_COUNT(&set);
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}

static float *alloc_floats(size_t n, size_t *total) {
    size_t bytes = ((n ? n : 1) * sizeof(float) + 63) / 64 * 64;
    *total += bytes;
    return aligned_alloc(64, bytes);
}

/* Why precision bf16 cannot run this model here (err set, COMMON_USAGE), or COMMON_OK. */
static common_status_t bf16_unfit(const gpu_model_config_t *c, int blas_only, common_err_t *err) {
    int longest = c->intermediate > c->hidden ? c->intermediate : c->hidden;
    if (c->emb_size > longest) longest = c->emb_size;
    if (gpu_cpu_bf16_best() == GPU_CPU_BF16_NONE)
        common_err_set(err, COMMON_USAGE,
                       "precision bf16 on the cpu backend needs AVX2 and FMA: use fp32");
    else if (blas_only)
        common_err_set(err, COMMON_USAGE,
                       "precision bf16 runs on the packed kernels, not OpenBLAS");
    else if (c->hidden % GPU_CPU_GEMM_NR != 0 || longest > GPU_CPU_BF16_MAX_K)
        common_err_set(err, COMMON_USAGE,
                       "precision bf16 on the cpu backend needs hidden a multiple of %d and widths "
                       "<= %d (this model: hidden %d, intermediate %d): use fp32",
                       GPU_CPU_GEMM_NR, GPU_CPU_BF16_MAX_K, c->hidden, c->intermediate);
    else
        return COMMON_OK;
    return COMMON_USAGE;
}

common_status_t gpu_cpu_init_as(const gpu_model_t *m, const gpu_backend_opts_t *opts, int blas_only,
                                gpu_backend_t **out, common_err_t *err) {
    return gpu_cpu_init_graph_as(m, NULL, opts, blas_only, out, err);
}

common_status_t gpu_cpu_init_graph_as(const gpu_model_t *m, gpu_graph_t *g,
                                      const gpu_backend_opts_t *opts, int blas_only,
                                      gpu_backend_t **out, common_err_t *err) {
    *out = NULL;
    const gpu_model_config_t *c = &m->cfg;
    gpu_precision_t prec;
    if (!gpu_backend_precision(&gpu_cpu_backend_ops, opts->precision) ||
        gpu_precision_parse(gpu_backend_precision(&gpu_cpu_backend_ops, opts->precision), &prec) !=
            0) {
        common_err_set(err, COMMON_USAGE,
                       "the cpu backend runs fp32, bf16 or fp8 (its FP8 reference), not '%s'",
                       opts->precision);
        gpu_graph_free(g);
        return COMMON_USAGE;
    }
    if (prec == GPU_PREC_BF16 && bf16_unfit(c, blas_only, err)) {
        gpu_graph_free(g);
        return err->code;
    }
    if (opts->token_budget <= 0) {
        common_err_set(err, COMMON_USAGE, "token budget %d must be positive", opts->token_budget);
        gpu_graph_free(g);
        return COMMON_USAGE;
    }
    if (opts->max_len > c->max_pos) {
        common_err_set(err, COMMON_USAGE, "max_len %d exceeds the model's %d positions",
                       opts->max_len, c->max_pos);
        gpu_graph_free(g);
        return COMMON_USAGE;
    }
    if (opts->threads < 0 || opts->threads > CPU_MAX_THREADS) {
        common_err_set(err, COMMON_USAGE, "threads %d outside 0..%d", opts->threads,
                       CPU_MAX_THREADS);
        gpu_graph_free(g);
        return COMMON_USAGE;
    }
    gpu_backend_t *be = calloc(1, sizeof *be);
    if (!be) {
        gpu_graph_free(g);
        return common_err_set(err, COMMON_FATAL, "out of memory");
    }
    be->g = g;
    pthread_mutex_init(&be->mu, NULL);
    pthread_cond_init(&be->cv_go, NULL);
    pthread_cond_init(&be->cv_done, NULL);
    be->m = m;
    be->opts = *opts;
    be->max_len = opts->max_len > 0 ? opts->max_len : c->max_pos;
    be->max_seqs = gpu_backend_max_seqs(opts->token_budget, opts->max_seqs);
    be->chunk = CPU_CHUNK_TOKENS_X_H / c->hidden;
    if (be->chunk < 64) be->chunk = 64;
    be->blas_only = blas_only;
    be->prec = prec;
    be->n_threads = opts->threads > 0 ? opts->threads : online_cores();
    if (be->n_threads > CPU_MAX_THREADS) be->n_threads = CPU_MAX_THREADS;
    for (int i = 0; i < 2; i++)
        be->flight_logits[i] = aligned_alloc(
            64, ((size_t)be->max_seqs * (size_t)c->num_labels * sizeof(float) + 63) / 64 * 64);
    be->w = calloc((size_t)be->n_threads, sizeof *be->w);
    be->chunk_at = calloc((size_t)be->max_seqs + 1, sizeof *be->chunk_at);
    if (!be->flight_logits[0] || !be->flight_logits[1] || !be->w || !be->chunk_at) {
        common_err_set(err, COMMON_FATAL, "out of memory");
        cpu_free(be);
        return COMMON_FATAL;
    }
    if (gpu_cpu_graph_setup(be, err) != 0) {
        cpu_free(be);
        return err->code;
    }
    for (int i = 0; i < be->n_threads; i++) {
        be->w[i].be = be;
        be->w[i].id = i;
        be->w[i].scratch = alloc_floats(be->scratch_floats, &be->arena_bytes);
        be->w[i].xq = be->xq_floats ? alloc_floats(be->xq_floats, &be->arena_bytes) : NULL;
        be->w[i].op_s = calloc((size_t)be->g->n_ops + 1, sizeof(double));
        be->w[i].op_runs = calloc((size_t)be->g->n_ops + 1, sizeof(long));
        if (!be->w[i].scratch || (be->xq_floats && !be->w[i].xq) || !be->w[i].op_s ||
            !be->w[i].op_runs) {
            common_err_set(err, COMMON_FATAL, "out of memory");
            cpu_free(be);
            return COMMON_FATAL;
        }
    }
    /* Our threads split the batch; OpenBLAS's own would only fight them for the cores. */
    gpu_cpu_blas_init();
    openblas_set_num_threads(1);
    for (int i = 1; i < be->n_threads; i++) {
        if (pthread_create(&be->w[i].th, NULL, worker_main, &be->w[i]) != 0) {
            common_err_set(err, COMMON_FATAL, "cannot start CPU worker thread %d", i);
            cpu_free(be);
            return COMMON_FATAL;
        }
        be->started = i;
    }
    *out = be;
    return COMMON_OK;
}

/* The table's kernels entry: which kernels run the projections at precision on this CPU, e.g.
 * "bf16 projections on amx-bf16 tiles, fp32 accumulation"; where bf16 is not on AMX, why not. */
static void cpu_kernels(const char *precision, char *buf, size_t n) {
    if (!precision || strcmp(precision, "bf16") != 0) {
        const char *k = gpu_cpu_gemm_kernel_name();
        const int fp8 = precision && strcmp(precision, "fp8") == 0;
        snprintf(buf, n, "%sfp32 projections on %s",
                 fp8 ? "E4M3-rounded inputs and weights (the FP8 reference) on " : "",
                 strcmp(k, "none") ? k : "OpenBLAS sgemm");
        return;
    }
    gpu_cpu_bf16_isa_t isa = gpu_cpu_bf16_best();
    if (isa == GPU_CPU_BF16_NONE) {
        snprintf(buf, n, "bf16 unavailable (no AVX2 + FMA)");
        return;
    }
    snprintf(
        buf, n,
        "bf16 projections on %s%s, fp32 accumulation (LayerNorm, softmax, GELU, head in fp32)%s%s",
        gpu_cpu_bf16_isa_name(isa), isa == GPU_CPU_BF16_AMX ? " tiles" : "",
        isa == GPU_CPU_BF16_AMX ? "" : "; not AMX: ", gpu_cpu_bf16_why_not_amx());
}

static common_status_t cpu_init(const gpu_model_t *m, const gpu_backend_opts_t *opts,
                                gpu_backend_t **out, common_err_t *err) {
    return gpu_cpu_init_as(m, opts, 0, out, err);
}

static common_status_t cpu_init_graph(const gpu_model_t *m, gpu_graph_t *g,
                                      const gpu_backend_opts_t *opts, gpu_backend_t **out,
                                      common_err_t *err) {
    return gpu_cpu_init_graph_as(m, g, opts, 0, out, err);
}

static common_status_t cpu_read_tensor(gpu_backend_t *be, int t, size_t rows, float *out,
                                       common_err_t *err) {
    if (t < 0 || t >= be->g->n_tensors ||
        rows > gpu_graph_rows(be->g, t, be->opts.token_budget, be->max_seqs)) {
        return common_err_set(err, COMMON_BUG, "no tensor %d of %zu rows in this graph", t, rows);
    }
    memcpy(out, be->tp[t], sizeof(float) * rows * (size_t)be->g->tensor[t].cols);
    return COMMON_OK;
}

static void cpu_get_props(const gpu_backend_t *be, gpu_backend_props_t *p) {
    *p = (gpu_backend_props_t){.precision =
                                   gpu_backend_precision(&gpu_cpu_backend_ops, be->opts.precision),
                               .token_budget = be->opts.token_budget,
                               .max_seqs = be->max_seqs,
                               .max_len = be->max_len,
                               .padded = 0,
                               .synchronous = 1}; /* cpu_submit runs the batch */
}

/* The table's profile_ops: each thread times its ops (cpu_graph.c); the totals are summed
 * over the threads, so a row is thread-seconds, not the batch's wall time. */
static common_status_t cpu_profile_ops(gpu_backend_t *be, int on, gpu_op_times_t *out,
                                       common_err_t *err) {
    const int n = be->g->n_ops;
    if (be->flight.n > 0) {
        return common_err_set(err, COMMON_BUG, "profile_ops: collect the batches in flight first");
    }
    be->prof = on;
    if (on) {
        for (int t = 0; t < be->n_threads; t++) {
            memset(be->w[t].op_s, 0, sizeof(double) * (size_t)n);
            memset(be->w[t].op_runs, 0, sizeof(long) * (size_t)n);
        }
        return COMMON_OK;
    }
    if (!out) return COMMON_OK;
    /* worker 0's arrays take the sums (profiling is off: no thread writes them now) */
    for (int t = 1; t < be->n_threads; t++)
        for (int i = 0; i < n; i++) {
            be->w[0].op_s[i] += be->w[t].op_s[i], be->w[0].op_runs[i] += be->w[t].op_runs[i];
            be->w[t].op_s[i] = 0, be->w[t].op_runs[i] = 0;
        }
    for (int i = 0; i < n; i++)
        be->w[0].op_s[i] *= 1e3;
    gpu_op_times_group(be->g, be->w[0].op_s, be->w[0].op_runs,
                       "thread-milliseconds: each thread's wall time in the op, summed over "
                       "the threads; an op runs once per chunk of sequences",
                       out);
    return COMMON_OK;
}

static const char *const cpu_precisions[] = {"fp32", "bf16", "fp8", NULL};

const gpu_backend_ops_t gpu_cpu_backend_ops = {
    .name = "cpu",
    .init = cpu_init,
    .forward = cpu_forward,
    .mem_stats = cpu_mem_stats,
    .free = cpu_free,
    .submit = cpu_submit,
    .collect = cpu_collect,
    .get_props = cpu_get_props,
    .precisions = cpu_precisions,
    .kernels = cpu_kernels,
    .supports_op = gpu_cpu_supports_op,
    .init_graph = cpu_init_graph,
    .read_tensor = cpu_read_tensor,
    .profile_ops = cpu_profile_ops,
};
