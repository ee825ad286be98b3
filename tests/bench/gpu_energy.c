/* gpu_bench --energy SECONDS: where a pass's joules go. Each piece of the encoder runs alone,
 * back to back for about SECONDS, while NVML's energy counter and the SM clock are read: the
 * board idle; each layer projection at M = 65536 with each of cuBLASLt's first 8 candidate
 * algorithms (X cold in L2, epilogues as the backend runs them); the attention kernel on
 * five length regimes; the fp16 LayerNorm. At the 700 W cap a pass takes its joules / 700 W,
 * so joules per unit of work, not time at boost clocks, decide what is worth changing. */
#include "tests/bench/gpu_energy.h"

#include <stdio.h>
#include <time.h>

#include "gpu/cuda/cuda_backend.h"
#include "tests/lib/cuda_test_api.h"
#include "gpu/cuda/nvml.h"

#ifdef RECLASS_HAVE_CUDA

static void report(const char *what, gpu_nvml_window_t *w, int mhz, double work, const char *unit) {
    printf("  energy %-44s %7.1f W  %5d MHz  %8.3f J/%s  %.3f s\n", what, w->joules / w->seconds,
           mhz, w->joules / work, unit, w->seconds);
}

void gpu_energy_probe(const char *prec, int H, int I, double secs) {
    char pci[32];
    gpu_nvml_t *nv = NULL;
    if (gpu_cuda_pci_bus_id(0, pci, sizeof(pci)) != 0 || gpu_nvml_init(pci, &nv) != 0) {
        printf("  energy probe: NVML not available\n");
        return;
    }
    gpu_nvml_window_t w;
    gpu_nvml_window_start(&w, nv);
    struct timespec idle = {(time_t)secs, (long)((secs - (long)secs) * 1e9)};
    nanosleep(&idle, NULL);
    int mhz = gpu_nvml_window_stop(&w);
    report("idle", &w, mhz, w.seconds, "s");

    const int M = 65536;
    const int sh[4][3] = {{3 * H, H, 0}, {H, H, 2}, {I, H, 1}, {H, I, 2}};
    static const char *nm[4] = {"QKV+bias", "attn-out+bias+res", "FF1+bias+GELU", "FF2+bias+res"};
    for (int i = 0; i < 4; i++)
        for (int cand = 1; cand <= 8; cand++) {
            char desc[160] = "", what[200];
            double flops = 2.0 * M * sh[i][0] * (double)sh[i][1];
            double tf = gpu_cuda_test_gemm_candidate(prec, M, sh[i][0], sh[i][1], sh[i][2], cand, 5,
                                                     desc, sizeof(desc));
            if (tf <= 0) break;
            int reps = (int)(secs * tf * 1e12 / flops) + 1;
            gpu_nvml_window_start(&w, nv);
            tf = gpu_cuda_test_gemm_candidate(prec, M, sh[i][0], sh[i][1], sh[i][2], cand, reps,
                                              desc, sizeof(desc));
            mhz = gpu_nvml_window_stop(&w);
            snprintf(what, sizeof(what), "%s %s #%d %.0f TFLOP/s", prec, nm[i], cand, tf);
            report(what, &w, mhz, flops * reps / 1e15, "PFLOP");
            printf("    (%s)\n", desc);
        }

    static const int att[5][2] = {{34, 512}, {64, 256}, {128, 128}, {200, 80}, {400, 40}};
    for (int i = 0; i < 5; i++) {
        int n = att[i][0], len = att[i][1];
        double flops = 4.0 * n * (double)len * len * H;
        double tf = gpu_cuda_test_attention_bench(prec, GPU_CUDA_TEST_ATT_AUTO, n, len, H / 64, 20);
        if (tf <= 0) continue;
        int iters = (int)(secs * tf * 1e12 / flops) + 1;
        char what[200];
        gpu_nvml_window_start(&w, nv);
        tf = gpu_cuda_test_attention_bench(prec, GPU_CUDA_TEST_ATT_AUTO, n, len, H / 64, iters);
        mhz = gpu_nvml_window_stop(&w);
        snprintf(what, sizeof(what), "%s attention %d x %d %.0f TFLOP/s", prec, n, len, tf);
        report(what, &w, mhz, flops * iters / 1e15, "PFLOP");
    }

    double ms = gpu_cuda_test_ln_bench(prec, M, H, 20);
    if (ms > 0) {
        int iters = (int)(secs * 1e3 / ms) + 1;
        char what[200];
        gpu_nvml_window_start(&w, nv);
        ms = gpu_cuda_test_ln_bench(prec, M, H, iters);
        mhz = gpu_nvml_window_stop(&w);
        snprintf(what, sizeof(what), "%s LayerNorm %d x %d in place %.1f us", prec, M, H, ms * 1e3);
        report(what, &w, mhz, (double)iters / 1e3, "k-launches");
    }
    gpu_nvml_free(nv);
}
#endif
