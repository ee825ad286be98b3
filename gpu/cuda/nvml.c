#include "gpu/cuda/nvml.h"

#include <dlfcn.h>
#include <stdlib.h>
#include <time.h>

#include "common/clock.h"

/* NVML's own declarations, the few used (nvml.h is not needed: these are stable ABI). */
typedef void *nvml_dev_t;
struct gpu_nvml {
    void *lib;
    nvml_dev_t dev;
    int (*energy)(nvml_dev_t, unsigned long long *); /* mJ */
    int (*clock)(nvml_dev_t, int, unsigned *);       /* type 1: NVML_CLOCK_SM */
    int (*shutdown)(void);                           /* set once nvmlInit succeeded */
};

int gpu_nvml_init(const char *pci_bus_id, gpu_nvml_t **out) {
    gpu_nvml_t *nv = calloc(1, sizeof(*nv));
    if (!nv) return -1;
    nv->lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!nv->lib) goto fail;
    int (*init)(void) = (int (*)(void))dlsym(nv->lib, "nvmlInit_v2");
    int (*by_index)(unsigned, nvml_dev_t *) =
        (int (*)(unsigned, nvml_dev_t *))dlsym(nv->lib, "nvmlDeviceGetHandleByIndex_v2");
    int (*by_pci)(const char *, nvml_dev_t *) =
        (int (*)(const char *, nvml_dev_t *))dlsym(nv->lib, "nvmlDeviceGetHandleByPciBusId_v2");
    nv->energy = (int (*)(nvml_dev_t, unsigned long long *))dlsym(
        nv->lib, "nvmlDeviceGetTotalEnergyConsumption");
    nv->clock = (int (*)(nvml_dev_t, int, unsigned *))dlsym(nv->lib, "nvmlDeviceGetClockInfo");
    int (*shutdown)(void) = (int (*)(void))dlsym(nv->lib, "nvmlShutdown");
    if (!init || !shutdown || !by_index || !by_pci || !nv->energy || !nv->clock || init() != 0)
        goto fail;
    nv->shutdown = shutdown;
    if ((pci_bus_id ? by_pci(pci_bus_id, &nv->dev) : by_index(0, &nv->dev)) != 0) goto fail;
    *out = nv;
    return 0;
fail:
    gpu_nvml_free(nv);
    return -1;
}

void gpu_nvml_free(gpu_nvml_t *nv) {
    if (!nv) return;
    if (nv->shutdown) nv->shutdown(); /* reference counted: one per successful init */
    if (nv->lib) dlclose(nv->lib);
    free(nv);
}

double gpu_nvml_joules(gpu_nvml_t *nv) {
    unsigned long long mj = 0;
    return nv && nv->energy(nv->dev, &mj) == 0 ? (double)mj / 1e3 : -1;
}

int gpu_nvml_sm_mhz(gpu_nvml_t *nv) {
    unsigned mhz = 0;
    return nv && nv->clock(nv->dev, 1, &mhz) == 0 ? (int)mhz : -1;
}

static void *nvml_window_sample(void *arg) {
    gpu_nvml_window_t *w = arg;
    while (!w->stop) {
        int mhz = gpu_nvml_sm_mhz(w->nv);
        if (mhz > 0 && w->n < (int)(sizeof(w->mhz) / sizeof(w->mhz[0]))) w->mhz[w->n++] = mhz;
        struct timespec ts = {0, 20 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    return NULL;
}

void gpu_nvml_window_start(gpu_nvml_window_t *w, gpu_nvml_t *nv) {
    w->nv = nv, w->stop = 0, w->n = 0;
    if (pthread_create(&w->th, NULL, nvml_window_sample, w) != 0) w->stop = -1; /* no clocks */
    w->j0 = gpu_nvml_joules(nv), w->t0 = common_now_s();
}

static int nvml_int_cmp(const void *a, const void *b) {
    return *(const int *)a - *(const int *)b;
}

int gpu_nvml_window_stop(gpu_nvml_window_t *w) {
    double j1 = gpu_nvml_joules(w->nv);
    w->joules = j1 >= 0 && w->j0 >= 0 ? j1 - w->j0 : -1;
    w->seconds = common_now_s() - w->t0;
    if (w->stop == 0) {
        w->stop = 1;
        pthread_join(w->th, NULL);
    }
    if (w->n == 0) return -1;
    qsort(w->mhz, (size_t)w->n, sizeof(int), nvml_int_cmp);
    return w->mhz[w->n / 2];
}
