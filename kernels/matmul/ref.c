/*  matmul reference: the float64 oracle.  C[M][N] = A[M][K] * B[K][N],
    all row-major. */
void ak_reference (const ak_args_t *a)
{
    const int64_t M = a->dims[0], N = a->dims[1], K = a->dims[2];
    const ak_t *A = AK_IN (a, 0), *B = AK_IN (a, 1);
    ak_t *C = AK_OUT (a, 0);

    for (int64_t i = 0; i < M; i++) {
        ak_t *c = C + i * N;
        for (int64_t j = 0; j < N; j++)
            c[j] = 0;
        for (int64_t k = 0; k < K; k++) {
            const ak_t aik = A[i * K + k];
            const ak_t *b = B + k * N;
            for (int64_t j = 0; j < N; j++)
                c[j] += aik * b[j];
        }
    }
}
