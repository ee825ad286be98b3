/* The tests' seeded PRNG (splitmix64): property tests set rng_state to a seed and replay the same
 * operations on every run and machine. One copy per test file (static state). */
#ifndef RECLASS_TESTS_TEST_RNG_H
#define RECLASS_TESTS_TEST_RNG_H

#include <stdint.h>

static uint64_t rng_state;

static inline uint64_t rng_next(void) {
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

/* Uniform in [lo, hi]. */
static inline int rng_int(int lo, int hi) {
    return lo + (int)(rng_next() % (uint64_t)(hi - lo + 1));
}

/* The accumulator's tests push item ids as the opaque pointers it carries (never 0: NULL). */
static inline void *ptr_of(int id) {
    return (void *)(intptr_t)(id + 1);
}

static inline int id_of(void *p) {
    return (int)(intptr_t)p - 1;
}

#endif
