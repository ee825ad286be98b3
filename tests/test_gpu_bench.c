/* gpu_bench: the CUDA encoder's throughput on the tickets-mix workload, with the numbers
 * reclass bench does not print: the cuBLAS ceiling of the four layer GEMMs at the budget,
 * the share of it reached end to end, and where the rest goes (per-phase GPU time). It can
 * write the workload as JSONL ({"ids": [...]}) so tests/bench/torch_gpu_peer.py runs the
 * very same tickets. Not a CTest test (it needs a GPU and minutes); device_run.sh runs it.
 *
 * gpu_bench [--geometry bert-base] [--labels 140] [--precision fp16] [--tickets 20000]
 *           [--seed 1] [--budgets 8192,16384,32768] [--repeat 3] [--workload-out FILE]
 *           [--att-bench 1] (each attention kernel alone)
 *           [--gemm-bench 1] (each projection alone, cuBLASLt, X cold in L2)
 *           [--pace-us N] (sleep N us after each batch: with the GPU idle between batches the
 *           board stays under its power cap, so the profiled GPU time shows what the cap costs)
 *           [--energy S] (tests/bench/gpu_energy.c: each piece alone for S seconds, joules per
 *           unit of work from NVML; the timed passes always report joules per pass) */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gpu/backend.h"
#include "gpu/model/model.h"
#include "worker/bench/workload.h"
#include "worker/classify/engine.h"
#include "worker/pipeline/accum.h"

#ifndef RECLASS_HAVE_CUDA
int main(void) {
    printf("SKIP: built without CUDA\n");
    return 77;
}
#else
#include "gpu/cuda/cuda_backend.h"
#include "tests/lib/cuda_test_api.h"
#include "tests/bench/gpu_energy.h"
#include "gpu/cuda/nvml.h"

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

typedef struct {
    int n_batches;
    int *first, *count;   /* (n_batches) into order */
    long *order;          /* (tickets) ticket indices, batch after batch */
    const int32_t **seqp; /* (budget / 2) the ids of a batch's tickets */
    int *lens;            /* (budget / 2) */
} batches_t;

/* The batches the worker's accumulator makes when every ticket is present at once
 * (length-sorted, token-budgeted). 0, or -1 with err set. */
static int make_batches(const worker_workload_t *w, int budget, int max_len, batches_t *b,
                        common_err_t *err) {
    long total = w->off[w->n];
    worker_accum_cfg_t ac = {.token_budget = budget,
                             .max_wait_ms = 1 << 30, /* never overdue: pure length order */
                             .max_pending_items = (int)w->n,
                             .max_pending_tokens = total > budget ? total : budget,
                             .max_len = max_len};
    worker_accum_t *acc = NULL;
    if (worker_accum_init(&ac, &acc, err) != COMMON_OK) return -1;
    b->first = malloc(sizeof(int) * (size_t)w->n);
    b->count = malloc(sizeof(int) * (size_t)w->n);
    b->order = malloc(sizeof(long) * (size_t)w->n);
    b->seqp = malloc(sizeof(*b->seqp) * (size_t)(budget / 2));
    b->lens = malloc(sizeof(int) * (size_t)(budget / 2));
    void **items = malloc(sizeof(void *) * (size_t)(budget / 2));
    b->n_batches = 0;
    for (long i = 0; i < w->n; i++)
        worker_accum_push(acc, (void *)(intptr_t)(i + 1), (int)(w->off[i + 1] - w->off[i]), 0);
    long done = 0;
    int n;
    while ((n = worker_accum_pop(acc, 0, 1, items, b->lens, budget / 2)) > 0) {
        b->first[b->n_batches] = (int)done;
        b->count[b->n_batches++] = n;
        for (int i = 0; i < n; i++)
            b->order[done++] = (long)(intptr_t)items[i] - 1;
    }
    free(items);
    worker_accum_free(acc);
    return 0;
}

int main(int argc, char **argv) {
    const char *geometry = "bert-base", *prec = "fp16", *wout = NULL,
               *budgets_s = "8192,16384,32768";
    int labels = 140, repeat = 3, att_bench = 0, gemm_bench = 0, pace_us = 0;
    double energy_s = 0;
    long tickets = 20000;
    uint64_t seed = 1;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--geometry"))
            geometry = argv[i + 1];
        else if (!strcmp(argv[i], "--labels"))
            labels = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--precision"))
            prec = argv[i + 1];
        else if (!strcmp(argv[i], "--tickets"))
            tickets = atol(argv[i + 1]);
        else if (!strcmp(argv[i], "--seed"))
            seed = strtoull(argv[i + 1], NULL, 10);
        else if (!strcmp(argv[i], "--budgets"))
            budgets_s = argv[i + 1];
        else if (!strcmp(argv[i], "--repeat"))
            repeat = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--workload-out"))
            wout = argv[i + 1];
        else if (!strcmp(argv[i], "--att-bench"))
            att_bench = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--gemm-bench")) /* each projection alone, X cold in L2 */
            gemm_bench = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--pace-us")) /* host sleep after each batch: GPU idles */
            pace_us = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--energy")) /* seconds per piece of the energy probe */
            energy_s = atof(argv[i + 1]);
        else {
            fprintf(stderr, "gpu_bench: unknown option %s\n", argv[i]);
            return 2;
        }
    }
    if (gpu_cuda_device_count() == 0) {
        printf("SKIP: no CUDA device\n");
        return 77;
    }
    common_err_t err;
    gpu_model_t *m = NULL;
    if (gpu_model_init_random(geometry, labels, seed, &m, &err) != 0) {
        fprintf(stderr, "gpu_bench: %s\n", err.message);
        return 2;
    }
    const gpu_model_config_t *c = &m->cfg;
    worker_workload_t *w = NULL;
    if (worker_workload_tickets_mix(tickets, seed, c->max_pos, c->vocab_size, &w, &err) != 0) {
        fprintf(stderr, "gpu_bench: %s\n", err.message);
        return 1;
    }
    long total_tokens = w->off[w->n];
    if (wout) {
        FILE *f = fopen(wout, "w");
        for (long i = 0; f && i < w->n; i++) {
            fputs("{\"ids\": [", f);
            for (long j = w->off[i]; j < w->off[i + 1]; j++)
                fprintf(f, j > w->off[i] ? ",%d" : "%d", w->ids[j]);
            fputs("]}\n", f);
        }
        if (f) fclose(f);
        printf("workload written to %s\n", wout);
    }

    /* FLOPs of the layer GEMMs (what the ceiling caps) and of attention, per pass. */
    double H = c->hidden, I = c->intermediate, NL = c->layers;
    double gemm_flops = 2.0 * (4 * H * H + 2 * H * I) * NL * (double)total_tokens, att_flops = 0;
    for (long i = 0; i < w->n; i++) {
        double len = (double)(w->off[i + 1] - w->off[i]);
        att_flops += 4.0 * len * len * H * NL;
    }
    /* What the backend executes (the rates of the profiled phases): the last layer projects K
     * and V on every token and runs Q, one-query attention and the rest on the [CLS] rows. */
    double gemm_exec = 2.0 * (4 * H * H + 2 * H * I) * (NL - 1) * (double)total_tokens +
                       2.0 * 2 * H * H * (double)total_tokens +
                       2.0 * (2 * H * H + 2 * H * I) * (double)w->n,
           att_exec = 0;
    for (long i = 0; i < w->n; i++) {
        double len = (double)(w->off[i + 1] - w->off[i]);
        att_exec += 4.0 * len * len * H * (NL - 1) + 4.0 * len * H;
    }
    /* The least HBM traffic of the LayerNorm phase (fp16: each full-width LayerNorm reads and
     * writes (T, H) once: 2(NL - 1) in the layers, the embedding's reads word rows and writes;
     * bf16 also reads and writes the fp32 residual), for tests/bench/bound.py. */
    const int bf16 = strcmp(prec, "bf16") == 0;
    double norm_bytes =
        (2.0 * (NL - 1) * (bf16 ? 12 : 4) + (bf16 ? 8 : 4)) * H * (double)total_tokens;
    printf("workload tickets-mix: %ld tickets, %ld tokens (mean %.1f), GEMM %.2f TFLOP, "
           "attention %.2f TFLOP per pass\n",
           w->n, total_tokens, (double)total_tokens / w->n, gemm_flops / 1e12, att_flops / 1e12);

    if (att_bench) { /* the attention kernel alone, both kernels, five length regimes */
        static const int shapes[5][2] = {{34, 512}, {64, 256}, {128, 128}, {200, 80}, {400, 40}};
        static const int kernels[2] = {GPU_CUDA_TEST_ATT_MMA, GPU_CUDA_TEST_ATT_WGMMA};
        static const char *const names[2] = {"mma.sync", "wgmma"};
        for (int ki = 0; ki < 2; ki++)
            for (int i = 0; i < 5; i++)
                printf("  attention %s %s: %d seqs x %d tokens, 12 heads: %.1f TFLOP/s\n", prec,
                       names[ki], shapes[i][0], shapes[i][1],
                       gpu_cuda_test_attention_bench(prec, kernels[ki], shapes[i][0], shapes[i][1],
                                                     12, 50));
    }
    if (gemm_bench) { /* each projection with its epilogue, X cold in L2, at 16k and 64k rows */
        const int H = c->hidden, I = c->intermediate;
        const int sh[4][3] = {{3 * H, H, 0}, {H, H, 2}, {I, H, 1}, {H, I, 2}};
        static const char *nm[4] = {"QKV+bias", "attn-out+bias+res", "FF1+bias+GELU",
                                    "FF2+bias+res"};
        for (int mi = 0; mi < 2; mi++)
            for (int i = 0; i < 4; i++) {
                int mm = mi ? 65536 : 16384;
                printf("  gemm %s M %d %s (N %d, K %d): cuBLASLt %.1f TFLOP/s\n", prec, mm, nm[i],
                       sh[i][0], sh[i][1],
                       gpu_cuda_test_gemm_bench(prec, mm, sh[i][0], sh[i][1], sh[i][2]));
            }
    }
    if (energy_s > 0) gpu_energy_probe(prec, c->hidden, c->intermediate, energy_s);
    char pci[32];
    gpu_nvml_t *nv = NULL;
    int have_nvml = gpu_cuda_pci_bus_id(0, pci, sizeof(pci)) == 0 && gpu_nvml_init(pci, &nv) == 0;
    char *bl = strdup(budgets_s);
    for (char *tokp = strtok(bl, ","); tokp; tokp = strtok(NULL, ",")) {
        int budget = atoi(tokp);
        if (budget <= 0) continue; /* "--budgets 0": the microbenches alone */
        /* The ceiling: the four layer GEMMs at M = budget, weighted by their FLOPs. */
        double shape_tf[4];
        double ceiling = gpu_cuda_layer_gemm_ceiling(0, budget, c->hidden, c->intermediate, prec,
                                                     shape_tf, &err);
        if (ceiling < 0) fprintf(stderr, "%s\n", err.message);
        printf("  cuBLAS %s at M = %d, QKV / attn-out / FF1 / FF2: %.1f / %.1f / %.1f / %.1f "
               "TFLOP/s\n",
               prec, budget, shape_tf[0], shape_tf[1], shape_tf[2], shape_tf[3]);
        double ceil_tps = ceiling * 1e12 / (gemm_flops / w->n);

        gpu_backend_opts_t opts = {
            .token_budget = budget, .max_len = c->max_pos, .precision = prec};
        cls_engine_t eng;
        double ti = now_s();
        if (cls_engine_open(&eng, m, "cuda", &opts, &err) != 0) {
            fprintf(stderr, "gpu_bench: init: %s\n", err.message);
            return 1;
        }
        ti = now_s() - ti;
        long tuned, changed;
        double ms_top1, ms_best;
        gpu_cuda_backend_tune_stats(eng.be, &tuned, &changed, &ms_top1, &ms_best);
        printf("  init %.2f s (warm-up sweep included): %ld GEMM buckets tuned, %ld picked another "
               "algorithm than the heuristic's first; summed one-run time %.3f -> %.3f ms\n",
               ti, tuned, changed, ms_top1, ms_best);
        batches_t b;
        if (make_batches(w, budget, c->max_pos, &b, &err) != 0) {
            fprintf(stderr, "gpu_bench: batches: %s\n", err.message);
            return 1;
        }
        double best = 1e30, secs[32];
        int nrep = repeat < 32 ? repeat : 32;
        /* pass 0: warm-up (heuristics, lazy module loads); then timed; then profiled */
        gpu_nvml_window_t win; /* the timed passes: joules per pass, median SM clock */
        int win_mhz = -1;
        for (int pass = 0; pass <= nrep + 1; pass++) {
            if (pass == 1 && have_nvml) gpu_nvml_window_start(&win, nv);
            if (pass == nrep + 1) {
                if (have_nvml) win_mhz = gpu_nvml_window_stop(&win);
                gpu_cuda_backend_profile(eng.be, 1, NULL);
            }
            const int sync = pass == nrep + 1 || pace_us > 0;
            double t0 = now_s();
            for (int k = 0; k < b.n_batches; k++) {
                const int nb = b.count[k];
                for (int q = 0; q < nb; q++) {
                    long t = b.order[b.first[k] + q];
                    b.seqp[q] = w->ids + w->off[t];
                    b.lens[q] = (int)(w->off[t + 1] - w->off[t]);
                }
                /* As the worker drives it: this batch queued before the previous one's logits
                 * are taken (the profiled pass and pacing time one batch at a time). */
                const int32_t *const *sq = (const int32_t *const *)b.seqp;
                const cls_batch_t *out;
                int rc = sync ? cls_engine_forward(&eng, sq, b.lens, nb, &out, &err)
                              : cls_engine_submit(&eng, sq, b.lens, nb, &err);
                if (!rc && !sync && k > 0) rc = cls_engine_collect(&eng, &out, &err);
                if (!rc && !sync && k == b.n_batches - 1) rc = cls_engine_collect(&eng, &out, &err);
                if (rc != 0) {
                    fprintf(stderr, "gpu_bench: forward: %s\n", err.message);
                    return 1;
                }
                if (pace_us > 0) { /* forward returned: the GPU is idle while we sleep */
                    struct timespec ts = {pace_us / 1000000, (long)(pace_us % 1000000) * 1000};
                    nanosleep(&ts, NULL);
                }
            }
            double dt = now_s() - t0;
            if (pass >= 1 && pass <= nrep) {
                secs[pass - 1] = dt;
                if (dt < best) best = dt;
            }
        }
        for (int i = 1; i < nrep; i++) /* median */
            for (int j = i; j > 0 && secs[j] < secs[j - 1]; j--) {
                double t = secs[j];
                secs[j] = secs[j - 1], secs[j - 1] = t;
            }
        double med = secs[nrep / 2];
        double ms[GPU_CUDA_PROF_N];
        gpu_cuda_backend_profile(eng.be, 0, ms);
        double prof_total = 0;
        for (int i = 0; i < GPU_CUDA_PROF_N; i++)
            prof_total += ms[i];
        gpu_mem_stats_t st;
        eng.ops->mem_stats(eng.be, &st);
        double tps = w->n / med;
        double achieved = gemm_flops / med / 1e12;
        printf("budget %d %s: %d batches, median %.4f s (best %.4f): %.0f "
               "tickets/s, %.0f "
               "tokens/s; layer-GEMM ceiling %.1f TFLOP/s = %.0f tickets/s; share %.1f%%\n",
               budget, prec, b.n_batches, med, best, tps, total_tokens / med, ceiling, ceil_tps,
               100.0 * tps / ceil_tps);
        printf("  profiled pass (events between phases), ms: embed %.1f, GEMM %.1f (%.0f "
               "TFLOP/s executed), attention %.1f (%.0f TFLOP/s executed), layernorm/gather %.1f, "
               "head %.1f; sum "
               "%.1f vs wall %.1f (gaps/host %.1f)\n",
               ms[0], ms[1], gemm_exec / ms[1] / 1e9, ms[2], att_exec / ms[2] / 1e9, ms[3], ms[4],
               prof_total, med * 1e3, med * 1e3 - prof_total);
        double j_pass = have_nvml ? win.joules / nrep : -1;
        if (have_nvml)
            printf("  energy: %.1f J per pass (%.4f J per ticket), %.1f W over the timed passes, "
                   "SM clock median %d MHz\n",
                   j_pass, j_pass / w->n, win.joules / win.seconds, win_mhz);
        printf("{\"bench\":\"gpu_bench\",\"precision\":\"%s\","
               "\"budget\":%d,"
               "\"tickets\":%ld,"
               "\"tokens\":%ld,\"batches\":%d,\"seconds\":%.5f,\"tickets_per_s\":%.1f,"
               "\"gemm_ceiling_tflops\":%.1f,\"ceiling_tickets_per_s\":%.1f,\"share\":%.4f,"
               "\"achieved_gemm_tflops\":%.1f,\"ms_embed\":%.2f,\"ms_gemm\":%.2f,"
               "\"ms_attention\":%.2f,\"ms_norm\":%.2f,\"ms_head\":%.2f,\"device_used\":%zu,"
               "\"weights_bytes\":%zu,\"arena_bytes\":%zu,\"joules_per_pass\":%.1f,"
               "\"sm_mhz\":%d,\"gemm_exec_tflop\":%.3f,\"att_exec_tflop\":%.3f,"
               "\"norm_bytes\":%.0f}\n",
               prec, budget, w->n, total_tokens, b.n_batches, med, tps, ceiling, ceil_tps,
               tps / ceil_tps, achieved, ms[0], ms[1], ms[2], ms[3], ms[4], st.device_used,
               st.weights_bytes, st.arena_bytes, j_pass, win_mhz, gemm_exec / 1e12, att_exec / 1e12,
               norm_bytes);
        fflush(stdout);
        cls_engine_close(&eng);
        free(b.first), free(b.count), free(b.order), free((void *)b.seqp), free(b.lens);
    }
    free(bl);
    gpu_nvml_free(nv);
    worker_workload_free(w);
    gpu_model_free(m);
    return 0;
}
#endif
