/* The board's energy counter and SM clock, through NVML loaded with dlopen: nothing to link,
 * and where there is no driver gpu_nvml_init says so and callers print no energy. For the
 * benches' joules per pass (at the board's power cap, tickets/s follow joules per ticket). */
#ifndef RECLASS_GPU_NVML_H
#define RECLASS_GPU_NVML_H

#include <pthread.h>

typedef struct gpu_nvml gpu_nvml_t;

/* The device with this PCI bus id ("0000:3B:00.0", as gpu_cuda_pci_bus_id gives it; NVML
 * numbers devices its own way), or NVML's device 0 when pci_bus_id is NULL. 0 and *out set,
 * or -1 (no NVML, no such device). */
int gpu_nvml_init(const char *pci_bus_id, gpu_nvml_t **out);
void gpu_nvml_free(gpu_nvml_t *nv);

/* Joules the board used since the driver loaded; -1 when unknown. */
double gpu_nvml_joules(gpu_nvml_t *nv);

/* The SM clock now in MHz; -1 when unknown. */
int gpu_nvml_sm_mhz(gpu_nvml_t *nv);

/* A measured stretch of work: gpu_nvml_window_start, the work, gpu_nvml_window_stop. In
 * between a thread reads the SM clock every 20 ms. */
typedef struct {
    gpu_nvml_t *nv;
    double j0, t0;
    double joules, seconds; /* set by stop: the board's energy and the wall time */
    volatile int stop;
    int n, mhz[1024];
    pthread_t th;
} gpu_nvml_window_t;
void gpu_nvml_window_start(gpu_nvml_window_t *w, gpu_nvml_t *nv);
/* Returns the median SM clock of the window (MHz), -1 if none was read. */
int gpu_nvml_window_stop(gpu_nvml_window_t *w);

#endif
