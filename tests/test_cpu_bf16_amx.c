/* The AMX-BF16 kernel where AMX runs, against a minimal probe and the fp32 reference; skipped
 * (exit 77, the reason printed) where it does not. The probe is this file's own: CPUID,
 * Linux's tile data permission, and in a child process one TDPBF16PS on a 16x16 tile of ones
 * (32 in every cell). Where the probe runs, the backend's detection must choose AMX (it
 * refused AMX on a machine where it ran, because the tile configuration it loaded was not the
 * one it wrote), the configuration its kernel runs under must read back as written, and the
 * kernel must match the fp32 product on BERT's shapes and on tails of rows, columns and K. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu/cpu/cpu_bf16_int.h"
#include "gpu/cpu/cpu_gemm_bf16.h"
#include "tests/lib/ref_ops.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <cpuid.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#define AMX_TARGET __attribute__((target("amx-tile,amx-bf16")))

typedef struct {
    uint8_t palette, start_row, reserved[14];
    uint16_t colsb[16];
    uint8_t rows[16];
} tilecfg_t;

static char why_skip[256];

/* tmm0 = ones (16 x 32 bf16) . ones: every cell 32. Exits 0 when it is. */
AMX_TARGET static int probe_child(void) {
    _Alignas(64) tilecfg_t cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.palette = 1;
    for (int t = 0; t < 3; t++) {
        cfg.rows[t] = 16;
        cfg.colsb[t] = 64;
    }
    _Alignas(64) static uint16_t one[16 * 32];
    _Alignas(64) static float c[16 * 16];
    for (int i = 0; i < 16 * 32; i++)
        one[i] = 0x3f80;
    __asm__ volatile("ldtilecfg %0" ::"m"(cfg));
    __asm__ volatile("tilezero %%tmm0\n\t"
                     "tileloadd (%0,%1,1), %%tmm1\n\t"
                     "tileloadd (%0,%1,1), %%tmm2\n\t"
                     "tdpbf16ps %%tmm2, %%tmm1, %%tmm0\n\t"
                     "tilestored %%tmm0, (%2,%3,1)\n\t"
                     "tilerelease" ::"r"(one),
                     "r"(64L), "r"(c), "r"(64L)
                     : "memory");
    for (int i = 0; i < 256; i++)
        if (c[i] != 32.0f) return 1;
    return 0;
}

/* 1 when AMX runs here; else 0 and why_skip says why not. */
static int amx_runs_here(void) {
    unsigned a, b, c, d;
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d) || !(d >> 22 & 1) || !(d >> 24 & 1)) {
        snprintf(why_skip, sizeof why_skip, "this CPU has no AMX-BF16 (CPUID leaf 7)");
        return 0;
    }
    if (syscall(SYS_arch_prctl, 0x1023 /* ARCH_REQ_XCOMP_PERM */, 18 /* XTILEDATA */) != 0) {
        snprintf(why_skip, sizeof why_skip, "Linux refused AMX tile data (ARCH_REQ_XCOMP_PERM)");
        return 0;
    }
    fflush(stdout);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) _exit(probe_child());
    int st = 0;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    if (WIFSIGNALED(st)) {
        snprintf(why_skip, sizeof why_skip,
                 "AMX faults here: a minimal tile probe in a child process died of signal %d "
                 "(seen in virtual machines that advertise AMX)",
                 WTERMSIG(st));
        return 0;
    }
    assert_int_equal(WEXITSTATUS(st), 0); /* the probe ran: its product must be 32 */
    return 1;
}

/* The configuration gpu_cpu_bf16_amx_begin loads, read back with STTILECFG. */
AMX_TARGET static void loaded_config(tilecfg_t *cfg) {
    gpu_cpu_bf16_amx_begin();
    __asm__ volatile("sttilecfg %0" : "=m"(*cfg));
    gpu_cpu_bf16_amx_end();
}

static void test_detection_and_config(void **state) {
    (void)state;
    if (!amx_runs_here()) skip();
    printf("AMX runs here (minimal probe: 32 in every cell); backend: %s%s\n",
           gpu_cpu_bf16_isa_name(gpu_cpu_bf16_best()), gpu_cpu_bf16_why_not_amx());
    assert_true(gpu_cpu_bf16_isa_available(GPU_CPU_BF16_AMX));
    assert_int_equal(gpu_cpu_bf16_best(), GPU_CPU_BF16_AMX);
    _Alignas(64) tilecfg_t cfg;
    memset(&cfg, 0xff, sizeof cfg);
    loaded_config(&cfg);
    assert_int_equal(cfg.palette, 1);
    for (int t = 0; t < 8; t++) {
        assert_int_equal(cfg.rows[t], 16);
        assert_int_equal(cfg.colsb[t], 64);
    }
}

static uint64_t rng = 34;
static float frand(float scale) {
    rng = rng * 6364136223846793005ull + 1442695040888963407ull;
    return scale * ((float)(rng >> 40) / (float)(1 << 24) * 2.0f - 1.0f);
}

/* AMX against the fp32 product of the unrounded operands (within bf16 rounding: both
 * operands carry 8 significant bits) and against the exact sum over the bf16 operands
 * (within fp32 accumulation error), bias and GELU epilogues. */
static void check(int m, int N, int K) {
    float *x = malloc(sizeof(float) * m * K), *w = malloc(sizeof(float) * N * K);
    float *bias = malloc(sizeof(float) * N), *y = malloc(sizeof(float) * m * N);
    float *f32 = malloc(sizeof(float) * m * N);
    float *xr = malloc(sizeof(float) * m * K), *wr = malloc(sizeof(float) * N * K);
    uint16_t *bp = aligned_alloc(64, (gpu_cpu_bf16_packed_elems(N, K) * 2 + 63) / 64 * 64);
    assert_true(x && w && bias && y && f32 && xr && wr && bp);
    for (int i = 0; i < m * K; i++)
        x[i] = frand(1.0f);
    for (int i = 0; i < N * K; i++)
        w[i] = frand(0.1f);
    for (int i = 0; i < N; i++)
        bias[i] = frand(0.5f);
    gpu_cpu_bf16_pack(w, K, N, K, bp);
    gpu_ref_linear(x, w, bias, m, K, N, f32);
    /* (m, N): the exact sum over the bf16 operands, and the sum of its terms' magnitudes */
    double *exact = malloc(sizeof(double) * m * N), *mag = malloc(sizeof(double) * m * N);
    assert_true(exact && mag);
    for (int i = 0; i < m * K; i++)
        xr[i] = gpu_cpu_bf16_round(x[i]);
    for (int i = 0; i < N * K; i++)
        wr[i] = gpu_cpu_bf16_round(w[i]);
    for (int r = 0; r < m; r++)
        for (int c = 0; c < N; c++) {
            double s = bias[c], a = fabs(bias[c]);
            for (int k = 0; k < K; k++) {
                double p = (double)xr[r * K + k] * wr[c * K + k];
                s += p;
                a += fabs(p);
            }
            exact[r * N + c] = s;
            mag[r * N + c] = a;
        }
    double d32 = 0, dex = 0;
    for (int epi = GPU_CPU_EPI_STORE; epi <= GPU_CPU_EPI_GELU; epi += GPU_CPU_EPI_GELU) {
        gpu_cpu_gemm_bf16_isa(GPU_CPU_BF16_AMX, x, K, m, bp, N, K, bias, (gpu_cpu_epi_t)epi, y, N);
        for (int r = 0; r < m; r++)
            for (int c = 0; c < N; c++) {
                double s = exact[r * N + c], a = mag[r * N + c];
                double ref = f32[r * N + c], v = y[r * N + c];
                if (epi == GPU_CPU_EPI_GELU) {
                    s = 0.5 * s * (1.0 + erf(s / sqrt(2.0)));
                    ref = 0.5 * ref * (1.0 + erf(ref / sqrt(2.0)));
                }
                d32 = fmax(d32, fabs(v - ref) / (a + 1e-3));
                dex = fmax(dex, fabs(v - s) / (2e-6 * a + 2e-7 * (1.0 + fabs(s))));
            }
    }
    printf("amx-bf16 %dx%dx%d: |delta| vs fp32 <= %.3g of sum |x w|; error vs the exact sum of "
           "bf16 products <= %.3g of its bound\n",
           m, N, K, d32, dex);
    assert_true(d32 <= 0x1p-7);
    assert_true(dex <= 1.0);
    free(x);
    free(w);
    free(bias);
    free(y);
    free(f32);
    free(xr);
    free(wr);
    free(exact);
    free(mag);
    free(bp);
}

static void test_gemm_vs_fp32(void **state) {
    (void)state;
    if (!gpu_cpu_bf16_isa_available(GPU_CPU_BF16_AMX)) skip();
    check(70, 2304, 768); /* bert-base qkv; a row tail past two 32-row blocks */
    check(33, 768, 3072); /* ff2: one row past a block, the longest K */
    check(1, 3072, 768);  /* ff1, one row */
    check(13, 151, 40);   /* column tail 23, K not a multiple of 32 */
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_detection_and_config),
        cmocka_unit_test(test_gemm_vs_fp32),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    if (rc == 0 && why_skip[0]) {
        printf("skipped: %s; the backend says: %s\n", why_skip, gpu_cpu_bf16_why_not_amx());
        return 77;
    }
    return rc;
}
#else
int main(void) {
    printf("skipped: AMX is x86-64 only\n");
    return 77;
}
#endif
