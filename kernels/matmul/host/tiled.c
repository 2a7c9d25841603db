/*  matmul candidate (host): register tiling with GCC/Clang vector extensions.
    C[M][N] = A[M][K] * B[K][N], row-major.

    TM  rows of C computed together: each row of B loaded from cache feeds
        TM rows of accumulators
    TN  columns of C computed together, in 4-lane (16-byte) vectors: TN / 4
        independent accumulators per row

    The TM x TN tile of C stays in registers over the whole K loop (TM * TN
    / 4 vector registers; past the register file it spills: the loops over
    the tile are unrolled so that the accumulators can be registers at all),
    and the column
    panel of B is reused across every row tile (j outer, i inner).  Rows and
    columns left over by the tiles are plain dot products. */
#ifndef TM
#define TM 4
#endif
#ifndef TN
#define TN 8
#endif
#define NV (TN / 4)

typedef float v4_t __attribute__ ((vector_size (16)));

static void s_dots (const float *A, const float *B, float *C, int64_t N, int64_t K,
                    int64_t i0, int64_t i1, int64_t j0, int64_t j1)
{
    for (int64_t i = i0; i < i1; i++)
        for (int64_t j = j0; j < j1; j++) {
            float sum = 0.0f;
            for (int64_t k = 0; k < K; k++)
                sum += A[i * K + k] * B[k * N + j];
            C[i * N + j] = sum;
        }
}

void ak_kernel (const ak_args_t *a)
{
    const int64_t M = a->dims[0], N = a->dims[1], K = a->dims[2];
    const int64_t Mb = M - M % TM, Nb = N - N % TN;
    const float *A = AK_IN (a, 0), *B = AK_IN (a, 1);
    float *C = AK_OUT (a, 0);

    for (int64_t j0 = 0; j0 < Nb; j0 += TN)
        for (int64_t i0 = 0; i0 < Mb; i0 += TM) {
            v4_t acc[TM][NV];
#pragma GCC unroll 64
            for (int r = 0; r < TM; r++)
#pragma GCC unroll 64
                for (int v = 0; v < NV; v++)
                    acc[r][v] = (v4_t) {0};
            for (int64_t k = 0; k < K; k++) {
                v4_t b[NV];
                memcpy (b, B + k * N + j0, sizeof b);
#pragma GCC unroll 64
                for (int r = 0; r < TM; r++) {
                    const float ark = A[(i0 + r) * K + k];
#pragma GCC unroll 64
                    for (int v = 0; v < NV; v++)
                        acc[r][v] += ark * b[v];
                }
            }
#pragma GCC unroll 64
            for (int r = 0; r < TM; r++)
                memcpy (C + (i0 + r) * N + j0, acc[r], sizeof acc[r]);
        }
    s_dots (A, B, C, N, K, 0, M, Nb, N);
    s_dots (A, B, C, N, K, Mb, M, 0, Nb);
}
