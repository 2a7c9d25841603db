/*  common/rng.h: counter-based Philox4x32-10.

    Element i of stream (seed, stream) is a pure function of (seed, stream, i),
    so a device implementation (later, CUDA) produces bit-identical values and
    inputs can be generated anywhere without shipping them. */
#ifndef AK_RNG_H
#define AK_RNG_H
#include <stdint.h>

/* Four 32-bit words for counter (ctr_hi, ctr_lo) under key derived from seed. */
void ak_philox4x32 (uint64_t seed, uint64_t ctr_hi, uint64_t ctr_lo, uint32_t out[4]);

/* Uniform double in [0, 1) for element i of stream: uses 53 random bits. */
double ak_rng_uniform (uint64_t seed, uint64_t stream, uint64_t i);

/* Uniform in [lo, hi). */
double ak_rng_range (uint64_t seed, uint64_t stream, uint64_t i, double lo, double hi);

#endif
