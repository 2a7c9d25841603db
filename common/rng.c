/*  common/rng.c: counter-based Philox4x32-10 (Salmon et al., Random123).

    Layout, fixed so a device port can match bit for bit:
      key     = { seed & 0xffffffff, seed >> 32 }
      counter = { ctr_lo & 0xffffffff, ctr_lo >> 32, ctr_hi & 0xffffffff, ctr_hi >> 32 }
      ak_rng_uniform (seed, stream, i): counter (ctr_hi = stream, ctr_lo = i),
        u64 = out[0] | (uint64) out[1] << 32, value = (u64 >> 11) * 2^-53. */
#include "rng.h"

#define AK_PHILOX_M0 0xD2511F53u
#define AK_PHILOX_M1 0xCD9E8D57u
#define AK_PHILOX_W0 0x9E3779B9u
#define AK_PHILOX_W1 0xBB67AE85u

static inline void s_round (uint32_t ctr[4], const uint32_t key[2])
{
    uint64_t p0 = (uint64_t) AK_PHILOX_M0 * ctr[0];
    uint64_t p1 = (uint64_t) AK_PHILOX_M1 * ctr[2];
    uint32_t hi0 = (uint32_t) (p0 >> 32), lo0 = (uint32_t) p0;
    uint32_t hi1 = (uint32_t) (p1 >> 32), lo1 = (uint32_t) p1;
    uint32_t c1 = ctr[1], c3 = ctr[3];
    ctr[0] = hi1 ^ c1 ^ key[0];
    ctr[1] = lo1;
    ctr[2] = hi0 ^ c3 ^ key[1];
    ctr[3] = lo0;
}

void ak_philox4x32 (uint64_t seed, uint64_t ctr_hi, uint64_t ctr_lo, uint32_t out[4])
{
    uint32_t key[2] = { (uint32_t) seed, (uint32_t) (seed >> 32) };
    uint32_t ctr[4] = { (uint32_t) ctr_lo, (uint32_t) (ctr_lo >> 32),
                        (uint32_t) ctr_hi, (uint32_t) (ctr_hi >> 32) };
    for (int r = 0; r < 10; r++) {
        if (r > 0) {
            key[0] += AK_PHILOX_W0;
            key[1] += AK_PHILOX_W1;
        }
        s_round (ctr, key);
    }
    for (int k = 0; k < 4; k++)
        out[k] = ctr[k];
}

double ak_rng_uniform (uint64_t seed, uint64_t stream, uint64_t i)
{
    uint32_t out[4];
    ak_philox4x32 (seed, stream, i, out);
    uint64_t u = (uint64_t) out[0] | ((uint64_t) out[1] << 32);
    return (double) (u >> 11) * 0x1.0p-53;
}

/*  lo + (hi - lo) * u; rounding could land on hi, which the half-open range
    excludes, so that case maps back to lo. */
double ak_rng_range (uint64_t seed, uint64_t stream, uint64_t i, double lo, double hi)
{
    double u = ak_rng_uniform (seed, stream, i);
    double r = lo + (hi - lo) * u;
    if (r >= hi && hi > lo)
        r = lo;
    return r;
}
