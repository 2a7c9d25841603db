/*  gated_residual, a tile of rows x columns a block (cuda).
    y = x + g * h, g = gate[b][n] (G = 1: one gate vector per batch row,
    shared by its T tokens) or gate[b][t][n] (G = 2).

    Rows are the B*T tokens.  A block covers ROWS rows and THREADS*UNROLL
    accesses of VECB bytes along them (VECB 16: one 128-bit load of 4
    floats or 8 halves); the grid is (column tiles) x (row tiles) in one
    dimension.  Every thread first issues all its loads (UNROLL*ROWS
    accesses of x, h and the gate), then computes and stores: the bytes in
    flight per thread are what a memory-bound kernel lives on.  Rows whose
    length is not a multiple of the access, or buffers not aligned to it,
    take a scalar path with the same tiling.  Float arithmetic; each
    output is one rounding of x + g*h: deterministic.
    Launch: grid [ceil(N / (THREADS*UNROLL*VECB/b)) * ceil(B*T / ROWS)],
    block [THREADS]. */
#ifndef THREADS
#define THREADS 256
#endif
#ifndef VECB
#define VECB 16
#endif
#ifndef UNROLL
#define UNROLL 2
#endif
#ifndef ROWS
#define ROWS 2
#endif

typedef ak_vec_t<VECB> s_vec_t;                        /* one access */
#define S_VEC  ((int) s_vec_t::count)                    /* elements per access */
#define S_COLS ((ak_i64) THREADS * UNROLL * S_VEC)       /* columns per block */
typedef s_vec_t::raw_t s_raw_t;

extern "C" __global__ void __launch_bounds__ (THREADS) ak_kernel (ak_cuda_args_t a)
{
    const ak_i64 T = a.dims[1], N = a.dims[2], G = a.dims[3];
    const ak_i64 R = a.dims[0] * T;
    const ak_i64 ncb = (N + S_COLS - 1) / S_COLS;
    const ak_i64 cb = blockIdx.x % ncb, r0 = (ak_i64) (blockIdx.x / ncb) * ROWS;
    const ak_t *x = AK_IN (a, 0), *gate = AK_IN (a, 1), *h = AK_IN (a, 2);
    ak_t *y = AK_OUT (a, 0);
    ak_i64 grow[ROWS];                   /* the gate row of each of the block's rows */
#pragma unroll
    for (int i = 0; i < ROWS; i++)
        grow[i] = G == 1 ? (r0 + i) / T : r0 + i;

    if (N % S_VEC == 0 && ak_aligned (x, VECB) && ak_aligned (gate, VECB) && ak_aligned (h, VECB)
        && ak_aligned (y, VECB)) {
        const ak_i64 nv = N / S_VEC;
        const s_raw_t *xv = (const s_raw_t *) x, *gv = (const s_raw_t *) gate, *hv = (const s_raw_t *) h;
        s_raw_t *yv = (s_raw_t *) y;
        const ak_i64 j0 = cb * THREADS * UNROLL + threadIdx.x;
        s_vec_t vx[ROWS][UNROLL], vg[ROWS][UNROLL], vh[ROWS][UNROLL];
#pragma unroll
        for (int i = 0; i < ROWS; i++)
#pragma unroll
            for (int u = 0; u < UNROLL; u++) {
                const ak_i64 j = j0 + (ak_i64) u * THREADS;
                if (r0 + i < R && j < nv) {
                    vx[i][u].raw = __ldg (xv + (r0 + i) * nv + j);
                    vh[i][u].raw = __ldg (hv + (r0 + i) * nv + j);
                    vg[i][u].raw = __ldg (gv + grow[i] * nv + j);
                }
            }
#pragma unroll
        for (int i = 0; i < ROWS; i++)
#pragma unroll
            for (int u = 0; u < UNROLL; u++) {
                const ak_i64 j = j0 + (ak_i64) u * THREADS;
                if (r0 + i < R && j < nv) {
                    s_vec_t o;
#pragma unroll
                    for (int k = 0; k < S_VEC; k++)
                        o.e[k] = ak_from_acc (ak_to_acc (vx[i][u].e[k])
                                              + ak_to_acc (vg[i][u].e[k]) * ak_to_acc (vh[i][u].e[k]));
                    yv[(r0 + i) * nv + j] = o.raw;
                }
            }
    } else {
        const ak_i64 n0 = cb * S_COLS + threadIdx.x;
#pragma unroll
        for (int i = 0; i < ROWS; i++) {
            if (r0 + i >= R)
                break;
            const ak_t *xr = x + (r0 + i) * N, *hr = h + (r0 + i) * N, *gr = gate + grow[i] * N;
            ak_t *yr = y + (r0 + i) * N;
#pragma unroll
            for (int e = 0; e < UNROLL * S_VEC; e++) {
                const ak_i64 n = n0 + (ak_i64) e * THREADS;
                if (n < N)
                    yr[n] = ak_from_acc (ak_to_acc (xr[n]) + ak_to_acc (gr[n]) * ak_to_acc (hr[n]));
            }
        }
    }
}
