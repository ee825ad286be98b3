/* The CUDA backend's one-arena promise on bert-base (or the geometry named after the batch
 * count: modernbert-base, deberta-v3-base), fp16, token budget 16384: weights + arena equal to
 * the graph's layout without a device (gpu_cuda_graph_plan), on bert-base <= 0.5 GiB; device
 * memory in use (cudaMemGetInfo) identical right after init, after one batch of every token
 * count 1..2048 (so state a library allocates lazily, per new shape, shows at once) and after
 * N batches of random shapes (default 100,000, mostly small so the run is quick, with a
 * full-budget batch now and then); allocations_after_init stays 0; a batch over the budget is
 * refused before launch; and an allocation attempt after init is refused and counted; the
 * forwards' event-timed device seconds are positive and within the wall time. SKIPPED without
 * GPU. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gpu/backend.h"
#include "gpu/model/model.h"

#ifndef RECLASS_HAVE_CUDA
int main(void) {
    printf("SKIP: built without CUDA\n");
    return 77;
}
#else
#include "gpu/cuda/cuda_backend.h"
#include "tests/lib/cuda_test_api.h"

static uint64_t rng = 0x2545F4914F6CDD1Dull;
static uint32_t rnd(uint32_t n) {
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (uint32_t)((rng >> 16) % n);
}

#define CHECK(cond, ...)                                                                           \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            printf("FAIL: " __VA_ARGS__);                                                          \
            printf("\n");                                                                          \
            fails++;                                                                               \
        }                                                                                          \
    } while (0)

int main(int argc, char **argv) {
    if (gpu_cuda_device_count() == 0) {
        printf("SKIP: no CUDA device\n");
        return 77;
    }
    long batches = argc > 1 ? atol(argv[1]) : 100000;
    const char *geometry = argc > 2 ? argv[2] : "bert-base";
    const int bert = strcmp(geometry, "bert-base") == 0; /* the 0.5 GiB promise */
    const int budget = 16384;
    int fails = 0;
    gpu_model_t *m = NULL;
    common_err_t err;
    const gpu_backend_ops_t *ops = gpu_backend_find("cuda", &err);
    if (!ops) {
        printf("FAIL: %s\n", err.message);
        return 1;
    }
    if (gpu_model_init_random(geometry, 140, 11, &m, &err) != 0) {
        printf("FAIL model: %s\n", err.message);
        return 1;
    }
    gpu_backend_opts_t opts = {.token_budget = budget, .max_len = 512, .precision = "fp16"};
    gpu_backend_t *be = NULL;
    if (ops->init(m, &opts, &be, &err) != 0) {
        printf("FAIL init: %s\n", err.message);
        return 1;
    }
    size_t plan_w = 0, plan_total = 0;
    CHECK(gpu_cuda_graph_plan(&m->cfg, "fp16", budget, 0, 512, &plan_w, &plan_total, &err) == 0,
          "graph plan: %s", err.message);
    gpu_mem_stats_t st_init, st0, st1;
    ops->mem_stats(be, &st0);
    st_init = st0; /* right after init, whose warm-up sweep should have loaded every kernel */
    double gib = (double)(st0.weights_bytes + st0.arena_bytes) / (double)(1u << 30);
    printf("%s: weights %zu B + arena %zu B = %.3f GiB (plan total %zu B)\n", geometry,
           st0.weights_bytes, st0.arena_bytes, gib, plan_total);
    CHECK(!bert || st0.weights_bytes + st0.arena_bytes <= (size_t)1 << 29,
          "weights + arena %.3f GiB > 0.5", gib);
    CHECK(st0.weights_bytes + st0.arena_bytes == plan_total, "backend and plan disagree");

    int32_t *ids = malloc((size_t)budget * 4), *cu = malloc((size_t)(budget + 1) * 4);
    float *logits = malloc((size_t)budget * 140 * 4);
    for (int i = 0; i < budget; i++)
        ids[i] = 1000 + (int32_t)rnd(29000);
    /* The test's own sweep: one batch of every token count 1..2048 (a library that takes
     * memory lazily per new shape, as cuBLAS did for DeBERTa's relative scores, shows here at
     * once), then one per cuBLASLt shape bucket up to the budget (CUDA loads modules lazily,
     * and a first launch takes device memory for its code). The backend's init ran its own
     * sweep, so this one must not change device memory either. Sequences of 1..512 tokens, a
     * different split each time. */
    for (int tok = 1, done = 0; !done;
         tok = tok < 2048 ? tok + 1 : tok + (tok >= 4096 ? tok / 8 : 256)) {
        if (tok >= budget) tok = budget, done = 1;
        gpu_batch_t b = {.ids = ids, .cu_seqlens = cu};
        int n_seqs = 0;
        cu[0] = 0;
        while (cu[n_seqs] < tok) {
            int len = 1 + (int)rnd(tok % 3 == 0 ? 512 : 64);
            if (len > tok - cu[n_seqs]) len = tok - cu[n_seqs];
            cu[n_seqs + 1] = cu[n_seqs] + len;
            if (len > b.max_len) b.max_len = len;
            n_seqs++;
        }
        b.n_seqs = n_seqs, b.n_tokens = cu[n_seqs];
        if (ops->forward(be, &b, logits, &err) != 0) {
            printf("FAIL sweep batch of %d tokens: %s\n", tok, err.message);
            return 1;
        }
    }
    ops->mem_stats(be, &st0);
    printf("device used right after init %zu B, after the test's sweep (1..2048 tokens, then "
           "every bucket) %zu B\n",
           st_init.device_used, st0.device_used);
    CHECK(st_init.device_used == st0.device_used,
          "device memory in use grew by %lld B after init (a kernel the init sweep missed)",
          (long long)st0.device_used - (long long)st_init.device_used);
    long t0 = 0;
    struct timespec w0, w1;
    clock_gettime(CLOCK_MONOTONIC, &w0);
    double dev0 = ops->device_seconds ? ops->device_seconds(be) : -1;
    for (long it = 0; it < batches; it++) {
        gpu_batch_t b = {.ids = ids, .cu_seqlens = cu};
        int full = it % 20000 == 19999; /* a full-budget batch of long sequences now and then */
        int n_seqs = full ? budget / 512 : 1 + (int)rnd(4);
        cu[0] = 0;
        for (int s = 0; s < n_seqs; s++) {
            int len = full ? 512 : 1 + (int)rnd(it % 100 == 0 ? 512 : 32);
            cu[s + 1] = cu[s] + len;
            if (len > b.max_len) b.max_len = len;
        }
        b.n_seqs = n_seqs, b.n_tokens = cu[n_seqs];
        t0 += b.n_tokens;
        if (ops->forward(be, &b, logits, &err) != 0) {
            printf("FAIL batch %ld: %s\n", it, err.message);
            fails++;
            break;
        }
    }
    clock_gettime(CLOCK_MONOTONIC, &w1);
    /* device_seconds: event-timed forwards, so positive and within the wall time */
    double wall = (double)(w1.tv_sec - w0.tv_sec) + (w1.tv_nsec - w0.tv_nsec) * 1e-9;
    double dev = ops->device_seconds ? ops->device_seconds(be) - dev0 : -1;
    printf("forwards: %.3f s of device time (events) in %.3f s of wall time\n", dev, wall);
    CHECK(dev > 0 && dev <= wall, "device_seconds %.3f outside (0, wall %.3f]", dev, wall);
    ops->mem_stats(be, &st1);
    printf("%ld batches (%ld tokens): device used before %zu B, after %zu B; "
           "allocations_after_init %ld; heuristic queries %ld\n",
           batches, t0, st0.device_used, st1.device_used, st1.allocations_after_init,
           gpu_cuda_backend_heuristic_queries(be));
    CHECK(st0.device_used == st1.device_used, "device memory in use changed by %lld B",
          (long long)st1.device_used - (long long)st0.device_used);
    CHECK(st1.allocations_after_init == 0, "allocations after init: %ld",
          st1.allocations_after_init);

    /* Over the budget: refused before any work. */
    gpu_batch_t big = {.ids = ids, .cu_seqlens = cu, .n_seqs = 33, .max_len = 512};
    cu[0] = 0;
    for (int s = 0; s < 33; s++)
        cu[s + 1] = cu[s] + 512;
    big.n_tokens = cu[33];
    int32_t *ids2 = malloc((size_t)big.n_tokens * 4);
    for (int i = 0; i < big.n_tokens; i++)
        ids2[i] = 1000;
    big.ids = ids2;
    int rc = ops->forward(be, &big, logits, &err);
    CHECK(rc != 0, "a batch of %d tokens over budget %d was accepted", big.n_tokens, budget);
    printf("over-budget batch refused: %s\n", rc ? err.message : "(accepted!)");
    CHECK(gpu_cuda_backend_try_alloc(be, 4096) != 0, "allocation after init succeeded");
    ops->mem_stats(be, &st1);
    CHECK(st1.allocations_after_init == 1, "refused allocation not counted (%ld)",
          st1.allocations_after_init);
    printf("{\"test\":\"gpu_memory\",\"geometry\":\"%s\",\"weights_bytes\":%zu,\"arena_bytes\":%zu,"
           "\"gib\":%.4f,"
           "\"batches\":%ld,\"used_before\":%zu,\"used_after\":%zu}\n",
           geometry, st0.weights_bytes, st0.arena_bytes, gib, batches, st0.device_used,
           st1.device_used);
    ops->free(be);
    gpu_model_free(m);
    free(ids), free(ids2), free(cu), free(logits);
    printf("%s\n", fails ? "FAILED" : "PASSED");
    return fails ? 1 : 0;
}
#endif
