/* OpenBLAS's kernel family, chosen by the CPU's features (gpu/cpu/cpu_backend.h). */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "gpu/cpu/cpu_backend.h"

/* OpenBLAS's DYNAMIC_ARCH entry points; weak, so a BLAS without them still links. */
extern char *gotoblas_corename(void) __attribute__((weak));
extern void gotoblas_dynamic_init(void) __attribute__((weak));
extern void gotoblas_dynamic_quit(void) __attribute__((weak));

static int core_is(const char *core, const char *const *names) {
    for (; *names; names++)
        if (strcmp(core, *names) == 0) return 1;
    return 0;
}

static void blas_init_once(void) {
    if (!gotoblas_corename || !gotoblas_dynamic_init || !gotoblas_dynamic_quit) return;
    if (getenv("OPENBLAS_CORETYPE")) return; /* the user chose */
    static const char *const avx512[] = {"SkylakeX", "Cooperlake", "SapphireRapids", NULL};
    static const char *const avx2[] = {"Haswell",        "SkylakeX", "Cooperlake",
                                       "SapphireRapids", "Zen",      NULL};
    const char *core = gotoblas_corename(), *want = NULL;
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
        __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq")) {
        if (!core_is(core, avx512)) want = "SkylakeX";
    } else if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
        if (!core_is(core, avx2)) want = "Haswell";
    }
    if (!want) return;
    /* dynamic_init reads the choice from the environment only; put it there for the call. */
    setenv("OPENBLAS_CORETYPE", want, 1);
    gotoblas_dynamic_quit();
    gotoblas_dynamic_init();
    unsetenv("OPENBLAS_CORETYPE");
}

void gpu_cpu_blas_init(void) {
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, blas_init_once);
}

const char *gpu_cpu_blas_core(void) {
    return gotoblas_corename ? gotoblas_corename() : "unknown";
}
