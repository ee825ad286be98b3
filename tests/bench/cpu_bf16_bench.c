/* GEMM microbench for the CPU backend's precisions (not a test): each projection shape of
 * BERT-base and of the demo model (bert-mini), m rows at a time on one thread as a chunk
 * runs them, through the fp32 kernel and each bf16 kernel this CPU has, and through oneDNN's
 * bf16 matmul (weights in its own blocked layout, reordered once) where the bench was built
 * with libdnnl: the measurement that chooses the GEMM. One JSON line per (shape, engine).
 * usage: cpu_bf16_bench [m] [seconds per case] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gpu/cpu/cpu_gemm.h"
#include "gpu/cpu/cpu_gemm_bf16.h"

#ifdef RECLASS_BENCH_DNNL
#include <dnnl.h>
#endif

typedef struct {
    const char *name;
    int N, K;
} shape_t;

static const shape_t shapes[] = {
    {"bert-base qkv", 2304, 768}, {"bert-base ao", 768, 768},   {"bert-base ff1", 3072, 768},
    {"bert-base ff2", 768, 3072}, {"bert-mini qkv", 768, 256},  {"bert-mini ao", 256, 256},
    {"bert-mini ff1", 1024, 256}, {"bert-mini ff2", 256, 1024},
};

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static uint64_t rng = 99;
static float frand(void) {
    rng = rng * 6364136223846793005ull + 1442695040888963407ull;
    return (float)(rng >> 40) / (float)(1 << 24) - 0.5f;
}

static void report(const shape_t *s, int m, const char *engine, double secs, long reps) {
    double gflops = 2.0 * m * s->N * s->K * reps / secs * 1e-9;
    printf("{\"bench\": \"cpu_bf16_gemm\", \"shape\": \"%s\", \"m\": %d, \"N\": %d, \"K\": %d, "
           "\"engine\": \"%s\", \"gflops\": %.1f, \"us_per_call\": %.1f}\n",
           s->name, m, s->N, s->K, engine, gflops, secs / reps * 1e6);
    fflush(stdout);
}

#ifdef RECLASS_BENCH_DNNL
/* oneDNN bf16 matmul y (m, N) fp32 = x (m, K) bf16 . W^T, weights reordered once into the
 * layout the primitive asks for; timed with the activations' fp32 -> bf16 conversion, as the
 * own kernels are. */
static void bench_dnnl(const shape_t *s, int m, const float *x, const float *w, float *y,
                       double budget) {
    dnnl_engine_t eng;
    dnnl_stream_t st;
    if (dnnl_engine_create(&eng, dnnl_cpu, 0) != dnnl_success) return;
    dnnl_stream_create(&st, eng, dnnl_stream_default_flags);
    dnnl_memory_desc_t a_md, b_md, bw_md, c_md, af_md;
    dnnl_dims_t ad = {m, s->K}, bd = {s->K, s->N}, cd = {m, s->N};
    dnnl_memory_desc_init_by_tag(&af_md, 2, ad, dnnl_f32, dnnl_ab);
    dnnl_memory_desc_init_by_tag(&a_md, 2, ad, dnnl_bf16, dnnl_ab);
    dnnl_memory_desc_init_by_tag(&b_md, 2, bd, dnnl_bf16, dnnl_format_tag_any);
    dnnl_memory_desc_init_by_tag(&bw_md, 2, bd, dnnl_f32, dnnl_ba); /* W (N, K) row-major */
    dnnl_memory_desc_init_by_tag(&c_md, 2, cd, dnnl_f32, dnnl_ab);
    dnnl_matmul_desc_t md;
    dnnl_primitive_desc_t pd, rpd_w, rpd_a;
    dnnl_matmul_desc_init(&md, &a_md, &b_md, NULL, &c_md);
    if (dnnl_primitive_desc_create(&pd, &md, NULL, eng, NULL) != dnnl_success) {
        printf("{\"bench\": \"cpu_bf16_gemm\", \"engine\": \"onednn\", \"error\": \"no bf16 "
               "matmul here\"}\n");
        return;
    }
    const char *impl = "?";
    dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl);
    const dnnl_memory_desc_t *bq = dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 0);
    dnnl_memory_t mw, mb, maf, ma, mc;
    dnnl_memory_create(&mw, &bw_md, eng, (void *)w);
    dnnl_memory_create(&mb, bq, eng, DNNL_MEMORY_ALLOCATE);
    dnnl_memory_create(&maf, &af_md, eng, (void *)x);
    dnnl_memory_create(&ma, &a_md, eng, DNNL_MEMORY_ALLOCATE);
    dnnl_memory_create(&mc, &c_md, eng, y);
    dnnl_primitive_t mm, rw, ra;
    dnnl_reorder_primitive_desc_create(&rpd_w, &bw_md, eng, bq, eng, NULL);
    dnnl_primitive_create(&rw, rpd_w);
    dnnl_exec_arg_t rwa[] = {{DNNL_ARG_FROM, mw}, {DNNL_ARG_TO, mb}};
    dnnl_primitive_execute(rw, st, 2, rwa);
    dnnl_reorder_primitive_desc_create(&rpd_a, &af_md, eng, &a_md, eng, NULL);
    dnnl_primitive_create(&ra, rpd_a);
    dnnl_primitive_create(&mm, pd);
    dnnl_exec_arg_t raa[] = {{DNNL_ARG_FROM, maf}, {DNNL_ARG_TO, ma}};
    dnnl_exec_arg_t mma[] = {{DNNL_ARG_SRC, ma}, {DNNL_ARG_WEIGHTS, mb}, {DNNL_ARG_DST, mc}};
    long reps = 0;
    double t0 = now(), t;
    do {
        dnnl_primitive_execute(ra, st, 2, raa);
        dnnl_primitive_execute(mm, st, 3, mma);
        dnnl_stream_wait(st);
        reps++;
    } while ((t = now() - t0) < budget);
    char name[160];
    const dnnl_version_t *v = dnnl_version();
    snprintf(name, sizeof name, "onednn %d.%d.%d bf16 (%s)", v->major, v->minor, v->patch, impl);
    report(s, m, name, t, reps);
    dnnl_primitive_destroy(mm);
    dnnl_primitive_destroy(ra);
    dnnl_primitive_destroy(rw);
    dnnl_primitive_desc_destroy(pd);
    dnnl_primitive_desc_destroy(rpd_w);
    dnnl_primitive_desc_destroy(rpd_a);
    dnnl_memory_destroy(mw);
    dnnl_memory_destroy(mb);
    dnnl_memory_destroy(maf);
    dnnl_memory_destroy(ma);
    dnnl_memory_destroy(mc);
    dnnl_stream_destroy(st);
    dnnl_engine_destroy(eng);
}
#endif

int main(int argc, char **argv) {
    int m = argc > 1 ? atoi(argv[1]) : 512;
    double budget = argc > 2 ? atof(argv[2]) : 0.3;
    static const gpu_cpu_bf16_isa_t isas[] = {GPU_CPU_BF16_AVX2, GPU_CPU_BF16_AVX512,
                                              GPU_CPU_BF16_AMX};
    fprintf(stderr,
            "cpu_bf16_bench: m %d, %.2f s per case, one thread; fp32 kernel %s, bf16 "
            "best %s%s%s%s\n",
            m, budget, gpu_cpu_gemm_kernel_name(), gpu_cpu_bf16_isa_name(gpu_cpu_bf16_best()),
            *gpu_cpu_bf16_why_not_amx() ? " (not AMX: " : "", gpu_cpu_bf16_why_not_amx(),
            *gpu_cpu_bf16_why_not_amx() ? ")" : "");
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        const shape_t *s = &shapes[i];
        float *x = malloc(sizeof(float) * (size_t)m * s->K);
        float *w = malloc(sizeof(float) * (size_t)s->N * s->K);
        float *b = malloc(sizeof(float) * (size_t)s->N);
        float *y = malloc(sizeof(float) * (size_t)m * s->N);
        float *p32 = aligned_alloc(64, gpu_cpu_gemm_packed_floats(s->N, s->K) * sizeof(float));
        uint16_t *p16 =
            aligned_alloc(64, (gpu_cpu_bf16_packed_elems(s->N, s->K) * 2 + 63) / 64 * 64);
        for (size_t j = 0; j < (size_t)m * s->K; j++)
            x[j] = frand();
        for (size_t j = 0; j < (size_t)s->N * s->K; j++)
            w[j] = frand() * 0.1f;
        for (int j = 0; j < s->N; j++)
            b[j] = frand();
        if (gpu_cpu_gemm_available()) {
            gpu_cpu_gemm_pack(w, s->N, s->K, p32);
            long reps = 0;
            double t0 = now(), t;
            do {
                gpu_cpu_gemm(x, s->K, m, p32, s->N, s->K, b, GPU_CPU_EPI_STORE, y, s->N);
                reps++;
            } while ((t = now() - t0) < budget);
            char name[64];
            snprintf(name, sizeof name, "fp32 %s", gpu_cpu_gemm_kernel_name());
            report(s, m, name, t, reps);
        }
        gpu_cpu_bf16_pack(w, s->K, s->N, s->K, p16);
        for (size_t k = 0; k < sizeof isas / sizeof isas[0]; k++) {
            if (!gpu_cpu_bf16_isa_available(isas[k])) continue;
            long reps = 0;
            double t0 = now(), t;
            do {
                gpu_cpu_gemm_bf16_isa(isas[k], x, s->K, m, p16, s->N, s->K, b, GPU_CPU_EPI_STORE, y,
                                      s->N);
                reps++;
            } while ((t = now() - t0) < budget);
            char name[64];
            snprintf(name, sizeof name, "bf16 %s", gpu_cpu_bf16_isa_name(isas[k]));
            report(s, m, name, t, reps);
        }
#ifdef RECLASS_BENCH_DNNL
        bench_dnnl(s, m, x, w, y, budget);
#endif
        free(x);
        free(w);
        free(b);
        free(y);
        free(p32);
        free(p16);
    }
    return 0;
}
