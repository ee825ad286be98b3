/* gpu_bench's energy probe (tests/bench/gpu_energy.c). */
#ifndef RECLASS_TESTS_GPU_ENERGY_H
#define RECLASS_TESTS_GPU_ENERGY_H

/* Prints watts, SM clock and joules per unit of work of each encoder piece run alone for
 * about secs seconds (bench only; needs a CUDA device and NVML). */
void gpu_energy_probe(const char *prec, int H, int I, double secs);

#endif
