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

#include "gpu/backend.h"
#include "gpu/model/model.h"
#include "gpu/cuda/nvml.h"
#include "worker/pipeline/accum.h"
#include "worker/classify/engine.h"
#include "worker/cli/cli.h"
#include "worker/text/tokenizer.h"
#include "worker/bench/workload.h"
#ifdef RECLASS_HAVE_CUDA
#include "gpu/cuda/cuda_backend.h"
#endif

typedef struct {
    const char *model_dir, *geometry, *backend, *precision, *workload;
    int labels, token_budget, threads, warmup, repeat;
    long tickets;
    uint64_t seed;
} bench_opts_t;

/* The options, set into o (the seed: into *seed). */
#define BENCH_N_OPTS 12
static void bench_opts(bench_opts_t *o, long *seed, cli_opt_t out[BENCH_N_OPTS + 1]) {
    const cli_opt_t t[] = {
        {"model", CLI_STR, &o->model_dir, 0, 0, NULL, "DIR", "Hugging Face checkpoint directory"},
        {"geometry", CLI_STR, &o->geometry, 0, 0, NULL, "NAME",
         "random weights of a named geometry: bert-tiny .. bert-large, distilbert-base,\n"
         "      roberta-base, xlmr-base, electra-small, electra-base"},
        {"labels", CLI_INT, &o->labels, 1, 100000, NULL, NULL,
         "classifier labels of a --geometry model (default 2)"},
        {"backend", CLI_STR, &o->backend, 0, 0, NULL, "B", "cpu or cuda (default cpu)"},
        {"workload", CLI_STR, &o->workload, 0, 0, NULL, "W",
         "tickets-mix (synthetic tickets, seeded), or a JSONL file of {\"ids\": [...]}\n"
         "      lines or of {\"text\": ...} lines (texts are tokenized inside every timed\n"
         "      pass) (required)"},
        {"token-budget", CLI_INT, &o->token_budget, 1, 1 << 24, NULL, NULL,
         "tokens per batch (default 8192 cpu, 32768 cuda)"},
        {"precision", CLI_STR, &o->precision, 0, 0, NULL, "P",
         "fp32 or bf16 (cpu; default fp32), fp16 or bf16 (cuda; default fp16)"},
        {"threads", CLI_INT, &o->threads, 0, 1024, NULL, NULL,
         "CPU threads (default: one per core)"},
        {"seed", CLI_LONG, seed, 0, INT32_MAX, NULL, "S",
         "seed of tickets-mix and of random weights (default 1)"},
        {"warmup", CLI_INT, &o->warmup, 0, 1000, NULL, NULL, "untimed passes first (default 1)"},
        {"repeat", CLI_INT, &o->repeat, 1, 1000, NULL, NULL,
         "timed passes; the median is reported (default 3)"},
        {"tickets", CLI_LONG, &o->tickets, 1, 10000000, NULL, NULL,
         "tickets in tickets-mix (default 20000)"},
        {NULL, CLI_FLAG, NULL, 0, 0, NULL, NULL, NULL},
    };
    _Static_assert(sizeof(t) / sizeof(t[0]) == BENCH_N_OPTS + 1, "BENCH_N_OPTS");
    memcpy(out, t, sizeof(t));
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

static int parse_opts(int argc, char **argv, bench_opts_t *o) {
    *o = (bench_opts_t){NULL, NULL, "cpu", NULL, NULL, 2, 0, 0, 1, 3, 20000, 1};
    long seed = 1;
    cli_opt_t opts[BENCH_N_OPTS + 1];
    bench_opts(o, &seed, opts);
    int rc = worker_cli_parse("bench", argc, argv, opts, usage, NULL);
    if (rc >= 0) return rc;
    o->seed = (uint64_t)seed;
    if (!o->model_dir == !o->geometry) {
        fprintf(stderr, "reclass bench: give exactly one of --model DIR or --geometry NAME\n");
        return 2;
    }
    if (!o->workload) {
        fprintf(stderr, "reclass bench: --workload FILE.jsonl or --workload tickets-mix is "
                        "required\n");
        return 2;
    }
    int cuda = strcmp(o->backend, "cuda") == 0;
    if (!o->precision) o->precision = cuda ? "fp16" : "fp32";
    if (!o->token_budget) o->token_budget = cuda ? 32768 : 8192;
    return -1;
}

typedef struct {
    cls_engine_t *eng;
    worker_workload_t *w;
    const worker_tok_t *tok; /* text workloads */
    worker_ids_t scratch;
    worker_accum_cfg_t acfg;
    worker_accum_t *acc;
    void **items;         /* (max_seqs) popped ticket indices + 1 */
    int *lens;            /* (max_seqs) */
    const int32_t **seqp; /* (max_seqs) */
    long batches, tokens; /* of the last pass */
    double flops;         /* of the last pass */
    double tok_seconds;   /* tokenization time of the last pass */
} bench_t;

/* One pass over the whole workload. Returns 0, or 1 with err set. */
static int bench_pass(bench_t *b, char *err, size_t errlen) {
    worker_workload_t *w = b->w;
    const gpu_model_config_t *cfg = &b->eng->model->cfg;
    double t0 = cls_now_s();
    if (w->is_text) {
        if (worker_workload_tokenize(w, b->tok, b->acfg.max_len, &b->scratch) != 0) {
            snprintf(err, errlen, "out of memory tokenizing the workload");
            return 1;
        }
    }
    b->tok_seconds = cls_now_s() - t0;
    if (!b->acc) { /* sized by the real token count, known after the first
                      tokenization */
        b->acfg.max_pending_items = (int)w->n;
        b->acfg.max_pending_tokens =
            w->off[w->n] > b->acfg.token_budget ? w->off[w->n] : b->acfg.token_budget;
        if (worker_accum_init(&b->acfg, &b->acc, err, errlen) != 0) return 1;
    }
    /* all tickets are present at once: the accumulator's long-end runs = sorted
     * batches */
    for (long i = 0; i < w->n; i++) {
        int len = (int)(w->off[i + 1] - w->off[i]);
        if (worker_accum_push(b->acc, (void *)(intptr_t)(i + 1), len, 0) != WORKER_ACCUM_OK) {
            snprintf(err, errlen, "ticket %ld (%d tokens) could not be batched", i + 1, len);
            return 1;
        }
    }
    b->batches = b->tokens = 0;
    b->flops = 0;
    int n;
    double attn = 4.0 * cfg->hidden * cfg->layers;
    while ((n = worker_accum_pop(b->acc, 0, 1, b->items, b->lens, b->eng->max_seqs)) > 0) {
        for (int i = 0; i < n; i++) {
            long t = (long)(intptr_t)b->items[i] - 1;
            b->seqp[i] = w->ids + w->off[t];
            b->tokens += b->lens[i];
            b->flops += attn * (double)b->lens[i] * b->lens[i];
        }
        /* as the worker does: this batch queued before the previous one's logits are taken */
        const cls_batch_t *done;
        if (cls_engine_submit(b->eng, b->seqp, b->lens, n, err, errlen) != 0) return 1;
        if (b->batches > 0 && cls_engine_collect(b->eng, &done, err, errlen) != 0) return 1;
        b->batches++;
    }
    const cls_batch_t *last;
    if (b->batches > 0 && cls_engine_collect(b->eng, &last, err, errlen) != 0) return 1;
    size_t params = gpu_model_param_count(cfg);
    /* table lookups cost no FLOPs; ELECTRA's projection (in the count) does */
    size_t emb = ((size_t)cfg->vocab_size + cfg->pos_rows + cfg->type_vocab + 2) * cfg->emb_size;
    b->flops += 2.0 * (double)(params - emb) * (double)b->tokens;
    return 0;
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

int worker_cmd_bench(int argc, char **argv) {
    bench_opts_t o;
    int prc = parse_opts(argc, argv, &o);
    if (prc >= 0) return prc;
    char err[512];
    gpu_model_t *model = NULL;
    if (o.model_dir) {
        if (gpu_model_load(o.model_dir, &model, err, sizeof err) != 0) {
            fprintf(stderr, "reclass bench: %s\n", err);
            return 2;
        }
    } else if (gpu_model_init_random(o.geometry, o.labels, o.seed, &model, err, sizeof err)) {
        fprintf(stderr, "reclass bench: --geometry: %s\n", err);
        return 2;
    }
    gpu_model_config_t cfg = model->cfg;
    int max_len = cfg.max_pos;
    int rc = 1;
    bench_t b;
    memset(&b, 0, sizeof b);
    worker_workload_t *w = NULL;
    worker_tok_t *tok = NULL;
    double *secs = NULL;
    gpu_nvml_t *nv = NULL; /* the board's energy counter, when there is one */
    gpu_nvml_window_t win; /* over the timed passes while win_on (its thread reads nv) */
    int win_on = 0;
    cls_engine_t eng;
    memset(&eng, 0, sizeof eng);

    if (strcmp(o.workload, "tickets-mix") == 0) {
        rc = worker_workload_tickets_mix(o.tickets, o.seed, max_len, cfg.vocab_size, &w, err,
                                         sizeof err);
    } else {
        rc = worker_workload_load(o.workload, max_len, cfg.vocab_size, &w, err, sizeof err);
    }
    if (rc != 0) {
        fprintf(stderr, "reclass bench: %s\n", err);
        gpu_model_free(model);
        return rc;
    }
    rc = 1;
    if (w->is_text) {
        if (!model->dir) {
            fprintf(stderr, "reclass bench: a {\"text\"} workload needs --model DIR (its "
                            "tokenizer); --geometry models have none: use {\"ids\"} lines\n");
            gpu_model_free(model);
            worker_workload_free(w);
            return 2;
        }
        if (worker_tok_load_dir(model->dir, cfg.vocab_size, &tok, err, sizeof err)) {
            fprintf(stderr, "reclass bench: %s\n", err);
            gpu_model_free(model);
            worker_workload_free(w);
            return 2;
        }
    }
    if (o.token_budget < max_len) {
        fprintf(stderr,
                "reclass bench: --token-budget %d is below the model's max length "
                "%d: raise "
                "it to at least %d\n",
                o.token_budget, max_len, max_len);
        rc = 2;
        goto out;
    }
    gpu_backend_opts_t bopts = {.token_budget = o.token_budget,
                                .max_len = max_len,
                                .threads = o.threads,
                                .precision = o.precision};
    int src = cls_engine_open(&eng, model, o.backend, &bopts, err, sizeof err);
    if (src != 0) {
        fprintf(stderr, "reclass bench: %s\n", err);
        rc = src;
        goto out;
    }
    b.eng = &eng;
    b.w = w;
    b.tok = tok;
    b.acfg = (worker_accum_cfg_t){.token_budget = o.token_budget,
                                  .padded = !eng.ops->padding_free,
                                  .max_wait_ms = 1 << 30, /* never overdue: pure length order */
                                  .max_len = max_len};
    b.items = malloc((size_t)eng.max_seqs * sizeof(void *));
    b.lens = malloc((size_t)eng.max_seqs * sizeof(int));
    b.seqp = malloc((size_t)eng.max_seqs * sizeof(*b.seqp));
    /* (3, repeat): wall, CPU, device (events) seconds per timed pass */
    secs = malloc(3 * (size_t)o.repeat * sizeof(double));
    if (!b.items || !b.lens || !b.seqp || !secs) {
        fprintf(stderr, "reclass bench: out of memory\n");
        goto out;
    }
    int is_cuda = strcmp(eng.ops->name, "cuda") == 0;
    size_t peak = 0;
    gpu_mem_stats_t ms = {0};
    for (int i = 0; i < o.warmup; i++) {
        if (bench_pass(&b, err, sizeof err) != 0) goto fail_pass;
    }
    /* The board's joules over the timed passes (NVML): at its power cap, tickets/s follow
     * joules per ticket, so the figure says how a speed compares with another program's. */
    int win_mhz = -1;
#ifdef RECLASS_HAVE_CUDA
    char pci[32];
    if (is_cuda && gpu_cuda_pci_bus_id(bopts.device, pci, sizeof pci) == 0 &&
        gpu_nvml_init(pci, &nv) == 0) {
        gpu_nvml_window_start(&win, nv);
        win_on = 1;
    }
#endif
    double tok_secs_sum = 0;
    for (int i = 0; i < o.repeat; i++) {
        double d0 = eng.ops->device_seconds ? eng.ops->device_seconds(eng.be) : 0;
        double t0 = cls_now_s(), c0 = bench_cpu_s();
        if (bench_pass(&b, err, sizeof err) != 0) goto fail_pass;
        secs[i] = cls_now_s() - t0;
        secs[o.repeat + i] = bench_cpu_s() - c0;
        secs[2 * o.repeat + i] = eng.ops->device_seconds ? eng.ops->device_seconds(eng.be) - d0 : 0;
        tok_secs_sum += b.tok_seconds;
        if (is_cuda && eng.ops->mem_stats && eng.ops->mem_stats(eng.be, &ms) == 0 &&
            ms.device_used > peak)
            peak = ms.device_used;
    }
    if (win_on) win_mhz = gpu_nvml_window_stop(&win), win_on = 0;
    double j_pass = nv && win.joules >= 0 ? win.joules / o.repeat : -1;
    double first = secs[0];
    double sec = median(secs, o.repeat);
    double cpu_sec = median(secs + o.repeat, o.repeat); /* sorts: secs[0] is the minimum */
    double dev_sec = eng.ops->device_seconds ? median(secs + 2 * o.repeat, o.repeat) : -1;
    double tflops = b.flops / sec / 1e12;
    /* The ceiling the issue defines: cuBLAS on the four layer GEMMs at M = budget in bf16,
     * FLOP-weighted (the matrix unit's best case for these shapes); and the same in the run's
     * precision. */
    double ceiling = -1, ceiling_run = -1;
#ifdef RECLASS_HAVE_CUDA
    if (is_cuda) {
        ceiling = gpu_cuda_layer_gemm_ceiling(bopts.device, o.token_budget, cfg.hidden,
                                              cfg.intermediate, "bf16", NULL);
        ceiling_run = strcmp(o.precision, "bf16") == 0
                          ? ceiling
                          : gpu_cuda_layer_gemm_ceiling(bopts.device, o.token_budget, cfg.hidden,
                                                        cfg.intermediate, o.precision, NULL);
    }
#endif
    const char *mname = model->name ? model->name : "model";
    char kern[256];
    printf("reclass bench: model %s (%d layers, hidden %d, %d labels), backend "
           "%s, precision %s%s%s\n",
           mname, cfg.layers, cfg.hidden, cfg.num_labels, eng.ops->name, o.precision,
           *cls_engine_kernels(&eng, kern, sizeof kern) ? ": " : "", kern);
    printf("workload %s: %ld tickets, %ld tokens (%ld truncated), %ld batches of "
           "<= %d tokens\n",
           o.workload, w->n, b.tokens, w->truncated, b.batches, o.token_budget);
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
               o.token_budget, ceiling, o.precision, ceiling_run, tflops, 100.0 * tflops / ceiling,
               100.0 * tflops / ceiling_run, o.precision);
    if (j_pass >= 0)
        printf("energy (NVML, the whole board): %.1f J per pass, %.2f mJ per ticket, %.0f W over "
               "the timed passes, SM clock median %d MHz\n",
               j_pass, 1e3 * j_pass / w->n, win.joules / win.seconds, win_mhz);
    printf("{\"backend\": \"%s\", \"precision\": \"%s\", \"model\": ", eng.ops->name, o.precision);
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
    if (is_cuda && eng.ops->mem_stats)
        /* peak: cudaMemGetInfo's used bytes (context, libraries, other processes included);
         * weights + arena: the one allocation reclass made */
        printf(", \"peak_device_bytes\": %zu, \"weights_bytes\": %zu, \"arena_bytes\": %zu", peak,
               ms.weights_bytes, ms.arena_bytes);
    else
        printf(", \"peak_device_bytes\": null");
    if (j_pass >= 0)
        printf(", \"joules_per_pass\": %.2f, \"watts\": %.1f, \"sm_mhz_median\": %d", j_pass,
               win.joules / win.seconds, win_mhz);
    else
        printf(", \"joules_per_pass\": null");
    if (dev_sec > 0)
        printf(", \"device_seconds\": %.6f, \"tickets_per_s_device\": %.2f", dev_sec,
               w->n / dev_sec);
    else
        printf(", \"device_seconds\": null");
    printf(", \"cpu_seconds\": %.6f", cpu_sec);
    printf(", \"token_budget\": %d, \"tokenize_seconds\": %.6f, \"repeat\": %d}\n", o.token_budget,
           tok_secs_sum / o.repeat, o.repeat);
    rc = fflush(stdout) == 0 ? 0 : 1;
    goto out;
fail_pass:
    fprintf(stderr, "reclass bench: backend %s failed: %s\n", eng.ops->name, err);
    rc = 1;
out:
    if (win_on) gpu_nvml_window_stop(&win); /* a failed pass: the sampler stops before nv goes */
    gpu_nvml_free(nv);
    free(secs);
    free(b.items);
    free(b.lens);
    free((void *)b.seqp);
    worker_ids_free(&b.scratch);
    worker_accum_free(b.acc);
    cls_engine_close(&eng);
    if (model) gpu_model_free(model);
    if (tok) worker_tok_free(tok);
    worker_workload_free(w);
    return rc;
}
