/* reclass bench: encoder throughput on a workload, with the production batching
 * policy (length-sorted, token-budgeted batches formed by the accumulator).
 *
 * A pass = (tokenize, for a {"text"} workload) + form every batch + run every
 * forward. The first --warmup passes are untimed; then --repeat timed passes;
 * the reported seconds is their median. Batches go to the backend as the worker
 * sends them (each submitted before the previous one is collected); a pass ends
 * with the last batch's logits in host memory. Human-readable lines come first;
 * the last line is one JSON object. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/err.h"
#include "common/clock.h"
#include "worker/bench/workload.h"
#include "worker/classify/driver.h"
#include "worker/classify/session.h"
#include "worker/cli/cli.h"

typedef struct {
    cls_settings_t set;
    const char *workload;
    int warmup, repeat;
    long tickets;
    int profile_ops;
} bench_opts_t;

/* The options, set into o (the seed: into *seed): its own rows, then the shared
 * classification settings. */
#define BENCH_N_OWN  9
#define BENCH_SET    (CLI_SET_BACKEND | CLI_SET_PRECISION | CLI_SET_TOKEN_BUDGET | CLI_SET_THREADS)
#define BENCH_N_OPTS (BENCH_N_OWN + 4)
static void bench_opts(bench_opts_t *o, long *seed, cli_opt_t out[BENCH_N_OPTS + 1]) {
    const cli_opt_t t[] = {
        worker_cli_opt_model(&o->set.model_dir, 0, 0, NULL),
        worker_cli_opt_geometry(&o->set.geometry),
        worker_cli_opt_labels(&o->set.labels),
        {"workload", CLI_STR, &o->workload, 0, 0, NULL, "W",
         "tickets-mix (synthetic tickets, seeded), or a JSONL file of {\"ids\": [...]}\n"
         "      lines or of {\"text\": ...} lines (texts are tokenized inside every timed\n"
         "      pass) (required)",
         NULL},
        {"seed", CLI_LONG, seed, 0, INT32_MAX, NULL, "S",
         "seed of tickets-mix and of random weights", "1"},
        {"warmup", CLI_INT, &o->warmup, 0, 1000, NULL, NULL, "untimed passes first", "1"},
        {"repeat", CLI_INT, &o->repeat, 1, 1000, NULL, NULL, "timed passes; the median is reported",
         "3"},
        {"tickets", CLI_LONG, &o->tickets, 1, 10000000, NULL, NULL, "tickets in tickets-mix",
         "20000"},
        {"profile-ops", CLI_FLAG, &o->profile_ops, 0, 0, NULL, NULL,
         "one more pass after the timed ones with every op timed (cuda: device time between\n"
         "      ops; cpu: each thread's time in each op, summed): a table of the ops alike in\n"
         "      every layer, their milliseconds and share, and \"op_times\" in the JSON",
         NULL},
    };
    _Static_assert(sizeof(t) / sizeof(t[0]) == BENCH_N_OWN, "BENCH_N_OWN");
    memcpy(out, t, sizeof(t));
    int n = BENCH_N_OWN + worker_cli_settings_opts(&o->set, BENCH_SET, 0, out + BENCH_N_OWN);
    out[n] = (cli_opt_t){NULL, CLI_FLAG, NULL, 0, 0, NULL, NULL, NULL, NULL};
}

static void usage(FILE *f) {
    fprintf(
        f, "usage: reclass bench (--model DIR | --geometry NAME [--labels N])\n"
           "                     --backend cpu|cuda --workload FILE.jsonl|tickets-mix [options]\n\n"
           "Measures tickets/s and tokens/s of the encoder on a workload batched like the\n"
           "worker does (length-sorted, token-budgeted). The last output line is JSON.\n\n"
           "options:\n");
    bench_opts_t o;
    long seed;
    cli_opt_t opts[BENCH_N_OPTS + 1];
    bench_opts(&o, &seed, opts);
    worker_cli_print_opts(f, opts);
}

static common_status_t parse_opts(int argc, char **argv, bench_opts_t *o) {
    *o = (bench_opts_t){0};
    long seed = 0;
    cli_opt_t opts[BENCH_N_OPTS + 1];
    bench_opts(o, &seed, opts);
    common_status_t rc = worker_cli_parse("bench", argc, argv, opts, usage, NULL);
    if (rc) return rc;
    o->set.seed = (uint64_t)seed;
    if (!o->set.model_dir == !o->set.geometry) {
        common_logf(stderr, "give exactly one of --model DIR or --geometry NAME\n");
        return COMMON_USAGE;
    }
    if (!o->workload) {
        common_logf(stderr, "--workload FILE.jsonl or --workload tickets-mix is "
                            "required\n");
        return COMMON_USAGE;
    }
    return COMMON_OK;
}

typedef struct {
    cls_session_t *ses;
    worker_workload_t *w;
    worker_ids_t scratch;
    worker_accum_cfg_t acfg;
    worker_accum_t *acc;
    cls_driver_t drv;
    long batches, tokens; /* of the last pass */
    double flops;         /* of the last pass */
    double tok_seconds;   /* tokenization time of the last pass */
} bench_t;

static const int32_t *bench_ids(void *ctx, void *item) {
    const worker_workload_t *w = ((bench_t *)ctx)->w;
    return w->ids + w->off[(intptr_t)item - 1];
}

/* Counts a collected batch's tokens and attention FLOPs (its logits are dropped). */
static common_status_t bench_done(void *ctx, void *const *items, const int *lens, int n,
                                  const cls_batch_t *bt, common_err_t *err) {
    bench_t *b = ctx;
    const gpu_model_config_t *cfg = &b->ses->model->cfg;
    double attn = 4.0 * cfg->hidden * cfg->layers;
    for (int i = 0; i < n; i++) {
        b->tokens += lens[i];
        b->flops += attn * (double)lens[i] * lens[i];
    }
    b->batches++;
    return COMMON_OK;
}

/* One pass over the whole workload. COMMON_OK, or err's code. */
static common_status_t bench_pass(bench_t *b, common_err_t *err) {
    worker_workload_t *w = b->w;
    const gpu_model_config_t *cfg = &b->ses->model->cfg;
    double t0 = common_now_s();
    if (w->is_text) {
        if (worker_workload_tokenize(w, b->ses->tok, b->acfg.max_len, &b->scratch) != 0)
            return common_err_set(err, COMMON_FATAL, "out of memory tokenizing the workload");
    }
    b->tok_seconds = common_now_s() - t0;
    if (!b->acc) { /* sized by the real token count, known after the first tokenization */
        b->acfg.max_pending_items = (int)w->n;
        b->acfg.max_pending_tokens =
            w->off[w->n] > b->acfg.token_budget ? w->off[w->n] : b->acfg.token_budget;
        common_status_t st = worker_accum_init(&b->acfg, &b->acc, err);
        if (st != COMMON_OK) return st;
    }
    /* all tickets are present at once: the accumulator's long-end runs = sorted batches */
    for (long i = 0; i < w->n; i++) {
        int len = (int)(w->off[i + 1] - w->off[i]);
        if (worker_accum_push(b->acc, (void *)(intptr_t)(i + 1), len, 0) != COMMON_OK)
            return common_err_set(err, COMMON_FATAL, "ticket %ld (%d tokens) could not be batched",
                                  i + 1, len);
    }
    b->batches = b->tokens = 0;
    b->flops = 0;
    int n;
    while ((n = cls_driver_step(&b->drv, b->acc, 0, 1, err)) > 0)
        ;
    if (n < 0) return err->code;
    common_status_t st = cls_driver_finish(&b->drv, err);
    if (st) return st;
    size_t params = gpu_model_param_count(cfg);
    /* table lookups cost no FLOPs; ELECTRA's projection (in the count) does */
    size_t emb = ((size_t)cfg->vocab_size + cfg->pos_rows + cfg->type_vocab + 2) * cfg->emb_size;
    b->flops += 2.0 * (double)(params - emb) * (double)b->tokens;
    return COMMON_OK;
}

/* The profiled pass (--profile-ops): COMMON_OK with *t filled, or err's code. */
static common_status_t bench_profile(bench_t *b, gpu_op_times_t *t, double *wall_ms,
                                     common_err_t *err) {
    const cls_engine_t *e = &b->ses->eng;
    if (!e->ops->profile_ops)
        return common_err_set(err, COMMON_USAGE,
                              "the %s backend cannot time its ops (--profile-ops)", e->ops->name);
    common_status_t st = e->ops->profile_ops(e->be, 1, NULL, err);
    if (st) return st;
    const double t0 = common_now_s();
    if ((st = bench_pass(b, err)) != COMMON_OK) {
        common_err_t ignored;
        e->ops->profile_ops(e->be, 0, NULL, &ignored);
        return st;
    }
    *wall_ms = 1e3 * (common_now_s() - t0);
    return e->ops->profile_ops(e->be, 0, t, err);
}

static void print_op_times(const gpu_op_times_t *t, double wall_ms) {
    printf("per-op time, one profiled pass after the timed ones (%s); the pass took %.1f ms "
           "of wall time:\n",
           t->clock, wall_ms);
    printf("  %-60s %8s %10s %7s\n", "op (alike in every layer)", "runs", "ms", "share");
    for (int i = 0; i < t->n; i++)
        printf("  %-60s %8ld %10.2f %6.1f%%%s\n", t->row[i].what, t->row[i].runs, t->row[i].ms,
               t->total_ms > 0 ? 100.0 * t->row[i].ms / t->total_ms : 0.0,
               t->row[i].ms == 0 && t->row[i].runs > 0 ? " (fused into the op before)" : "");
    printf("  %-60s %8s %10.2f %6.1f%%\n", "total", "", t->total_ms, 100.0);
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Sorts v in place and returns its median. */

static double median(double *v, int n) {
    qsort(v, (size_t)n, sizeof(double), cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* CPU seconds of the whole process (every thread): on a shared machine this moves less with
 * other load than the wall clock does. */
static double bench_cpu_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

common_status_t worker_cmd_bench(int argc, char **argv) {
    bench_opts_t o;
    common_status_t rc = parse_opts(argc, argv, &o);
    if (rc) return rc;
    common_err_t err;
    cls_session_t ses;
    if ((rc = cls_session_open(&ses, &o.set, 0, &err))) {
        common_err_print(stderr, &err);
        return rc;
    }
    const gpu_model_t *model = ses.model;
    const gpu_model_config_t cfg = model->cfg;
    const int max_len = ses.props.max_len;
    cls_engine_t *const e = &ses.eng;
    bench_t b;
    memset(&b, 0, sizeof b);
    worker_workload_t *w = NULL;
    double *secs = NULL;
    gpu_op_times_t *opt = NULL; /* --profile-ops: the profiled pass's per-op times */
    double prof_wall_ms = 0;
    int win_on = 0; /* the backend's energy window is open (energy_start) */

    if (strcmp(o.workload, "tickets-mix") == 0)
        rc = worker_workload_tickets_mix(o.tickets, o.set.seed, max_len, cfg.vocab_size, &w, &err);
    else
        rc = worker_workload_load(o.workload, max_len, cfg.vocab_size, &w, &err);
    if (rc) {
        common_err_print(stderr, &err);
        goto out;
    }
    if (w->is_text && (rc = cls_session_load_tokenizer(&ses, &err))) {
        common_err_print(stderr, &err);
        goto out;
    }
    rc = COMMON_FATAL;
    b.ses = &ses;
    b.w = w;
    b.acfg = ses.acc;
    b.acfg.max_wait_ms = 1 << 30; /* never overdue: pure length order */
    /* (3, repeat): wall, CPU, device (events) seconds per timed pass */
    secs = malloc(3 * (size_t)o.repeat * sizeof(double));
    if (!secs || cls_driver_init(&b.drv, e, bench_ids, bench_done, &b, &err)) {
        common_logf(stderr, "out of memory\n");
        goto out;
    }
    const char *precision = ses.props.precision;
    const int budget = ses.props.token_budget;
    size_t peak = 0;
    gpu_mem_stats_t ms = {0};
    for (int i = 0; i < o.warmup; i++) {
        if (bench_pass(&b, &err) != 0) goto fail_pass;
    }
    /* The board's joules over the timed passes (NVML): at its power cap, tickets/s follow
     * joules per ticket, so the figure says how a speed compares with another program's. */
    int win_mhz = -1;
    double win_j = -1, win_s = 0;
    win_on = e->ops->energy_start && e->ops->energy_start(e->be) == 0;
    double tok_secs_sum = 0;
    for (int i = 0; i < o.repeat; i++) {
        double d0 = e->ops->device_seconds ? e->ops->device_seconds(e->be) : 0;
        double t0 = common_now_s(), c0 = bench_cpu_s();
        if (bench_pass(&b, &err) != 0) goto fail_pass;
        secs[i] = common_now_s() - t0;
        secs[o.repeat + i] = bench_cpu_s() - c0;
        secs[2 * o.repeat + i] = e->ops->device_seconds ? e->ops->device_seconds(e->be) - d0 : 0;
        tok_secs_sum += b.tok_seconds;
        if (e->ops->mem_stats && e->ops->mem_stats(e->be, &ms) == 0 && ms.device_used > peak)
            peak = ms.device_used;
    }
    if (win_on) win_j = e->ops->energy_stop(e->be, &win_s, &win_mhz), win_on = 0;
    if (o.profile_ops) { /* after the timed passes, so that they stay clean */
        if (!(opt = calloc(1, sizeof *opt))) {
            common_logf(stderr, "out of memory\n");
            goto out;
        }
        if (bench_profile(&b, opt, &prof_wall_ms, &err) != 0) goto fail_pass;
    }
    double j_pass = win_j >= 0 ? win_j / o.repeat : -1;
    double first = secs[0];
    double sec = median(secs, o.repeat);
    double cpu_sec = median(secs + o.repeat, o.repeat); /* sorts: secs[0] is the minimum */
    double dev_sec = e->ops->device_seconds ? median(secs + 2 * o.repeat, o.repeat) : -1;
    double tflops = b.flops / sec / 1e12;
    /* The ceiling the issue defines: cuBLAS on the four layer GEMMs at M = budget in bf16,
     * FLOP-weighted (the matrix unit's best case for these shapes); and the same in the run's
     * precision. */
    double ceiling = -1, ceiling_run = -1;
    if (e->ops->gemm_ceiling) {
        ceiling = e->ops->gemm_ceiling(e->be, budget, "bf16", &err);
        if (ceiling > 0)
            ceiling_run = strcmp(precision, "bf16") == 0
                              ? ceiling
                              : e->ops->gemm_ceiling(e->be, budget, precision, &err);
        if (ceiling <= 0 || ceiling_run <= 0) { /* the report goes on without it */
            char line[800];
            common_logf(stderr, "no GEMM ceiling: %s\n", common_err_line(&err, line, sizeof line));
        }
    }
    const char *mname = model->name ? model->name : "model";
    char kern[256];
    common_logf(stdout,
                "model %s (%d layers, hidden %d, %d labels), backend "
                "%s, precision %s%s%s\n",
                mname, cfg.layers, cfg.hidden, cfg.num_labels, e->ops->name, precision,
                *cls_session_kernels(&ses, kern, sizeof kern) ? ": " : "", kern);
    printf("workload %s: %ld tickets, %ld tokens (%ld truncated), %ld batches of "
           "<= %d tokens\n",
           o.workload, w->n, b.tokens, w->truncated, b.batches, budget);
    printf("passes: %d warm-up, %d timed; seconds min %.4f median %.4f max %.4f "
           "(first %.4f)\n",
           o.warmup, o.repeat, secs[0], sec, secs[o.repeat - 1], first);
    if (w->is_text)
        printf("tokenization inside each timed pass: %.4f s on average (%.1f%% of "
               "the pass)\n",
               tok_secs_sum / o.repeat, 100.0 * tok_secs_sum / o.repeat / sec);
    printf("throughput: %.1f tickets/s, %.0f tokens/s, %.3f TFLOP/s achieved\n", w->n / sec,
           b.tokens / sec, tflops);
    if (dev_sec > 0)
        printf("device time per pass (events before each forward's input copy and after its "
               "logits copy): median %.4f s = %.1f%% of the wall time; %.1f tickets/s by it\n",
               dev_sec, 100.0 * dev_sec / sec, w->n / dev_sec);
    printf("CPU time per pass (all threads of this process): %.4f s median, %.1f tickets per "
           "CPU-second\n",
           cpu_sec, w->n / cpu_sec);
    if (ceiling > 0)
        printf("GEMM ceiling (cuBLAS, the four layer GEMMs at M = %d, FLOP-weighted): bf16 %.1f "
               "TFLOP/s, %s %.1f; achieved %.1f TFLOP/s (2 x params per token + attention) = "
               "%.1f%% of the bf16 ceiling, %.1f%% of the %s one\n",
               budget, ceiling, precision, ceiling_run, tflops, 100.0 * tflops / ceiling,
               100.0 * tflops / ceiling_run, precision);
    if (j_pass >= 0)
        printf("energy (NVML, the whole board): %.1f J per pass, %.2f mJ per ticket, %.0f W over "
               "the timed passes, SM clock median %d MHz\n",
               j_pass, 1e3 * j_pass / w->n, win_j / win_s, win_mhz);
    if (opt) print_op_times(opt, prof_wall_ms);
    printf("{\"backend\": \"%s\", \"precision\": \"%s\", \"model\": ", e->ops->name, precision);
    cls_buf_t js = {0};
    cls_json_string(&js, mname);
    fputs(js.oom ? "null" : js.s, stdout);
    cls_buf_free(&js);
    printf(", \"tickets\": %ld, \"tokens\": %ld, \"batches\": %ld, \"seconds\": "
           "%.6f, "
           "\"tickets_per_s\": %.2f, \"tokens_per_s\": %.1f, "
           "\"gemm_tflops_achieved\": %.6g",
           w->n, b.tokens, b.batches, sec, w->n / sec, b.tokens / sec, tflops);
    if (ceiling > 0)
        printf(", \"gemm_ceiling_tflops\": %.6g, \"share_of_ceiling\": %.4f, "
               "\"gemm_ceiling_tflops_run_precision\": %.6g, \"share_of_ceiling_run_precision\": "
               "%.4f",
               ceiling, tflops / ceiling, ceiling_run, tflops / ceiling_run);
    else
        printf(", \"gemm_ceiling_tflops\": null, \"share_of_ceiling\": null");
    if (ms.device_total > 0) /* a device that reports its memory */
        /* peak: cudaMemGetInfo's used bytes (context, libraries, other processes included);
         * weights + arena: the one allocation reclass made */
        printf(", \"peak_device_bytes\": %zu, \"weights_bytes\": %zu, \"arena_bytes\": %zu", peak,
               ms.weights_bytes, ms.arena_bytes);
    else
        printf(", \"peak_device_bytes\": null");
    if (j_pass >= 0)
        printf(", \"joules_per_pass\": %.2f, \"watts\": %.1f, \"sm_mhz_median\": %d", j_pass,
               win_j / win_s, win_mhz);
    else
        printf(", \"joules_per_pass\": null");
    if (dev_sec > 0)
        printf(", \"device_seconds\": %.6f, \"tickets_per_s_device\": %.2f", dev_sec,
               w->n / dev_sec);
    else
        printf(", \"device_seconds\": null");
    printf(", \"cpu_seconds\": %.6f", cpu_sec);
    for (int i = 0; opt && i < opt->n; i++) {
        cls_buf_t os = {0};
        cls_json_string(&os, opt->row[i].what);
        printf("%s{\"op\": %s, \"runs\": %ld, \"ms\": %.4f}", i ? ", " : ", \"op_times\": [",
               os.oom ? "null" : os.s, opt->row[i].runs, opt->row[i].ms);
        cls_buf_free(&os);
    }
    if (opt)
        printf("%s, \"op_times_total_ms\": %.4f", opt->n ? "]" : ", \"op_times\": []",
               opt->total_ms);
    printf(", \"token_budget\": %d, \"tokenize_seconds\": %.6f, \"repeat\": %d}\n", budget,
           tok_secs_sum / o.repeat, o.repeat);
    rc = fflush(stdout) == 0 ? 0 : 1;
    goto out;
fail_pass : {
    char line[800];
    common_logf(stderr, "backend %s failed: %s\n", e->ops->name,
                common_err_line(&err, line, sizeof line));
    rc = err.code;
}
out:
    if (win_on) e->ops->energy_stop(e->be, &win_s, &win_mhz); /* a failed pass */
    free(opt);
    free(secs);
    worker_ids_free(&b.scratch);
    cls_driver_free(&b.drv);
    worker_accum_free(b.acc);
    cls_session_close(&ses);
    worker_workload_free(w);
    return rc;
}
