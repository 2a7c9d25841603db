/*  matmul baseline (host): the textbook triple loop, one dot product per
    output element.  C[M][N] = A[M][K] * B[K][N], row-major. */
void ak_kernel (const ak_args_t *a)
{
    const int64_t M = a->dims[0], N = a->dims[1], K = a->dims[2];
    const float *A = AK_IN (a, 0), *B = AK_IN (a, 1);
    float *C = AK_OUT (a, 0);

    for (int64_t i = 0; i < M; i++)
        for (int64_t j = 0; j < N; j++) {
            float sum = 0.0f;
            for (int64_t k = 0; k < K; k++)
                sum += A[i * K + k] * B[k * N + j];
            C[i * N + j] = sum;
        }
}
