/*  pairs (testing; float16 or bfloat16 builds): the prelude's paired
    conversions and folded exponential against their element-wise forms.
    Counters, 64-bit words in out[0] (zeroed before the launch):
      [0] ak_unpack of a 32-bit word != ak_to_acc of its two elements
          (bit for bit), over every 16-bit pattern in both halves;
      [1] ak_pack of two floats != ak_from_acc of each (bit for bit, or
          both NaN), over every float32 bit pattern (each once in the low
          and once in the high half);
      [2] ak_exp_fold (x, m log2 e) * 2^-ak_exp_fold_err farther than
          AK_FOLD_TOL (relative) from exp(x - m) in double, for |m| up to
          2^24 (ak_exp_foldable) and x - m down to -20;
      [3] ak_exp_foldable (m) for an m it should refuse (2^24 * 1.0001);
      [4] the first mismatching input of [0] or [1] (its 32-bit pattern),
      [5] the number of threads that ran.
    PLANT=1 swaps the halves ak_pack is given (a planted bug: [1] counts
    nearly every pattern).
    Launch: grid [4096], block [256] (each thread 4096 float patterns). */
#ifndef PLANT
#define PLANT 0
#endif
#define AK_FOLD_TOL 4e-6

extern "C" __global__ void ak_kernel (ak_cuda_args_t a)
{
    unsigned long long *out = (unsigned long long *) AK_OUT (a, 0);
    const unsigned int t = blockIdx.x * blockDim.x + threadIdx.x, nt = gridDim.x * blockDim.x;
    typedef ak_vec_acc<4, 0>::u pair_t;                 /* two 16-bit elements */
    static_assert (pair_t::count == 2, "a 16-bit build");

    /* unpack: word i holds pattern i high and pattern (i * 40503) & 0xffff
       low (40503 is odd: every pattern once in each half) */
    for (unsigned int i = t; i < 65536u; i += nt) {
        pair_t v;
        v.raw = (i << 16) | ((i * 40503u) & 0xffffu);
        float f[2];
        ak_unpack (v, f);
        if (__float_as_uint (f[0]) != __float_as_uint (ak_to_acc (v.e[0]))
            || __float_as_uint (f[1]) != __float_as_uint (ak_to_acc (v.e[1]))) {
            atomicAdd (&out[0], 1ull);
            out[4] = v.raw;
        }
    }

    /* pack: every float pattern u, paired with the pattern 0x9e3779b9 * u
       (odd: a bijection), u in the low half; then the same swapped */
    for (unsigned long long u0 = t; u0 < (1ull << 32); u0 += nt) {
        const unsigned int u = (unsigned int) u0, w = u * 0x9e3779b9u;
        const float p[2][2] = { { __uint_as_float (u), __uint_as_float (w) },
                                { __uint_as_float (w), __uint_as_float (u) } };
        for (int s = 0; s < 2; s++) {
            pair_t o;
            ak_pack (o, p[PLANT ? 1 - s : s]);
#pragma unroll
            for (int e = 0; e < 2; e++) {
                const ak_t want = ak_from_acc (p[s][e]);
                const unsigned short gb = (unsigned short) (o.raw >> (16 * e));
                unsigned short wb;
                memcpy (&wb, &want, sizeof wb);
                const float gf = ak_to_acc (o.e[e]), wf = ak_to_acc (want);
                if (gb != wb && !(gf != gf && wf != wf)) {     /* NaN: both NaN */
                    atomicAdd (&out[1], 1ull);
                    out[4] = __float_as_uint (p[s][e]);
                }
            }
        }
    }

    /* the fold: m from -2^24 to 2^24, x = m - d for d in [0, 20] */
    for (unsigned int i = t; i < (1u << 20); i += nt) {
        const float m = ((float) (int) (i % 4097u) - 2048.0f) * 8192.0f * (1.0f + (float) (i % 7u) * 1e-3f);
        const float x = m - (float) (i / 4097u) * (20.0f / 256.0f);
        if (!ak_exp_foldable (m))
            continue;
        const float m2 = m * AK_LOG2E;
        const double got = (double) ak_exp_fold (x, m2) * exp2 (-(double) ak_exp_fold_err (m, m2));
        const double want = exp ((double) x - (double) m);
        if (fabs (got - want) > AK_FOLD_TOL * want)
            atomicAdd (&out[2], 1ull);
    }
    if (t == 0 && ak_exp_foldable (16777216.0f * 1.0001f))
        atomicAdd (&out[3], 1ull);
    atomicAdd (&out[5], 1ull);
}
