/*  matmul, shared-memory tiles (cuda).  A block computes a TILE x TILE
    tile of C; its TILE x (TILE/TM) threads each compute TM rows of one
    column.  Tiles of A and B (TILE x TILE each, as float) are staged in
    dynamic shared memory, 2*TILE*TILE*4 bytes.  The k order is the same for
    every output, so results are deterministic.
    C[M][N] = A[M][K] * B[K][N], row-major, float accumulation.
    Launch: grid [(N+TILE-1)/TILE, (M+TILE-1)/TILE], block [TILE, TILE/TM],
    shared 2*TILE*TILE*4. */
#ifndef TILE
#define TILE 16
#endif
#ifndef TM
#define TM 1
#endif
#define S_ROWS (TILE / TM)          /* thread rows: thread (tx, ty) owns rows ty + i*S_ROWS */

extern "C" __global__ void ak_kernel (ak_cuda_args_t a)
{
    extern __shared__ float s_smem[];
    float *As = s_smem, *Bs = s_smem + TILE * TILE;
    const ak_i64 M = a.dims[0], N = a.dims[1], K = a.dims[2];
    const ak_t *A = AK_IN (a, 0), *B = AK_IN (a, 1);
    ak_t *C = AK_OUT (a, 0);
    const int tx = threadIdx.x, ty = threadIdx.y;
    const ak_i64 row0 = (ak_i64) blockIdx.y * TILE, col = (ak_i64) blockIdx.x * TILE + tx;

    float acc[TM];
#pragma unroll
    for (int i = 0; i < TM; i++)
        acc[i] = 0.0f;
    for (ak_i64 k0 = 0; k0 < K; k0 += TILE) {
#pragma unroll
        for (int i = 0; i < TM; i++) {
            const int r = ty + i * S_ROWS;
            const ak_i64 ar = row0 + r, ak = k0 + tx, bk = k0 + r;
            As[r * TILE + tx] = ar < M && ak < K ? ak_to_acc (A[ar * K + ak]) : 0.0f;
            Bs[r * TILE + tx] = bk < K && col < N ? ak_to_acc (B[bk * N + col]) : 0.0f;
        }
        __syncthreads ();
#pragma unroll
        for (int kk = 0; kk < TILE; kk++) {
            const float b = Bs[kk * TILE + tx];
#pragma unroll
            for (int i = 0; i < TM; i++)
                acc[i] += As[(ty + i * S_ROWS) * TILE + kk] * b;
        }
        __syncthreads ();
    }
#pragma unroll
    for (int i = 0; i < TM; i++) {
        const ak_i64 r = row0 + ty + i * S_ROWS;
        if (r < M && col < N)
            C[r * N + col] = ak_from_acc (acc[i]);
    }
}
