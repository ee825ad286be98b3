/* The board's energy counter, and SM clock through NVML, loaded with dlopen so
 * the benches build and run where there is no driver (every call then answers -1). Bench
 * only: the worker never reads these. */
#ifndef RECLASS_TESTS_NVML_PROBE_H
#define RECLASS_TESTS_NVML_PROBE_H

#include <dlfcn.h>
#include <pthread.h>
#include <stddef.h>
#include <stdlib.h>
#include <time.h>

typedef struct {
    void *lib, *dev;
    int (*energy)(void *dev, unsigned long long *mj); /* since the driver loaded, mJ */
    int (*clock)(void *dev, int type, unsigned *mhz);
} nvml_probe_t;

/* 0 when device 0's counters can be read. */
static inline int nvml_probe_init(nvml_probe_t *p) {
    p->lib = dlopen("libnvidia-ml.so.1", RTLD_NOW);
    if (!p->lib) return -1;
    int (*init)(void) = (int (*)(void))dlsym(p->lib, "nvmlInit_v2");
    int (*get)(unsigned, void **) =
        (int (*)(unsigned, void **))dlsym(p->lib, "nvmlDeviceGetHandleByIndex_v2");
    p->energy =
        (int (*)(void *, unsigned long long *))dlsym(p->lib, "nvmlDeviceGetTotalEnergyConsumption");
    p->clock = (int (*)(void *, int, unsigned *))dlsym(p->lib, "nvmlDeviceGetClockInfo");
    if (!init || !get || !p->energy || !p->clock || init() != 0 || get(0, &p->dev) != 0) {
        dlclose(p->lib);
        p->lib = NULL;
        return -1;
    }
    return 0;
}

/* Joules since the driver loaded; -1 when unknown. */
static inline double nvml_probe_joules(nvml_probe_t *p) {
    unsigned long long mj = 0;
    return p->lib && p->energy(p->dev, &mj) == 0 ? (double)mj / 1e3 : -1;
}

/* The SM clock now (MHz; NVML_CLOCK_SM = 1); -1 when unknown. */
static inline int nvml_probe_sm_mhz(nvml_probe_t *p) {
    unsigned mhz = 0;
    return p->lib && p->clock(p->dev, 1, &mhz) == 0 ? (int)mhz : -1;
}

/* A window over which the board's energy, the wall time and (every 20 ms, from a thread)
 * the SM clock are taken: nvml_window_start, the work, nvml_window_stop. */
typedef struct {
    nvml_probe_t *p;
    double j0, t0, joules, seconds;
    volatile int stop;
    int n, mhz[1024];
    pthread_t th;
} nvml_window_t;

static inline double nvml_now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}
static inline void *nvml_window_sample(void *arg) {
    nvml_window_t *w = (nvml_window_t *)arg;
    while (!w->stop) {
        int mhz = nvml_probe_sm_mhz(w->p);
        if (mhz > 0 && w->n < 1024) w->mhz[w->n++] = mhz;
        struct timespec ts = {0, 20 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    return NULL;
}
static inline void nvml_window_start(nvml_window_t *w, nvml_probe_t *p) {
    w->p = p, w->stop = 0, w->n = 0;
    pthread_create(&w->th, NULL, nvml_window_sample, w);
    w->j0 = nvml_probe_joules(p), w->t0 = nvml_now_s();
}
static inline int nvml_int_cmp(const void *a, const void *b) {
    return *(const int *)a - *(const int *)b;
}
/* Ends the window: joules and seconds set; returns the median SM clock (MHz), -1 if none. */
static inline int nvml_window_stop(nvml_window_t *w) {
    w->joules = nvml_probe_joules(w->p) - w->j0;
    w->seconds = nvml_now_s() - w->t0;
    w->stop = 1;
    pthread_join(w->th, NULL);
    if (w->n == 0) return -1;
    qsort(w->mhz, (size_t)w->n, sizeof(int), nvml_int_cmp);
    return w->mhz[w->n / 2];
}

#endif
