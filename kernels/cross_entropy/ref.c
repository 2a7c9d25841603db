/*  cross_entropy reference: the float64 oracle.  Per row r of a batch x
    vocab matrix of logits,

        loss[r] = logsumexp(x[r]) - x[r][t_r]
                = (max_r - x[r][t_r]) + log(sum_v exp(x[r][v] - max_r))
        t_r     = (uint32) (r * 2654435761) % vocab     (32-bit wrap-around)

    The data path only makes floating inputs of the workload's dtype, so
    the target class is derived from the row (Knuth's multiplicative hash)
    by the same formula here, in cuda/ref.cu and in every kernel.  The
    logits range [-0.5, 0.5] keeps the stability gate's near-max float16
    inputs (x6e4) at a loss below 65504: wider logits would make the true
    float16 answer infinite. */
void ak_reference (const ak_args_t *a)
{
    const int64_t B = a->dims[0], V = a->dims[1];
    const ak_t *x = AK_IN (a, 0);
    ak_t *loss = AK_OUT (a, 0);

    for (int64_t r = 0; r < B; r++) {
        const ak_t *xr = x + r * V;
        const uint32_t target = ((uint32_t) r * 2654435761u) % (uint32_t) V;
        ak_t m = xr[0];
        for (int64_t v = 1; v < V; v++)
            if (xr[v] > m)
                m = xr[v];
        ak_t s = 0;
        for (int64_t v = 0; v < V; v++)
            s += exp (xr[v] - m);
        loss[r] = (m - xr[target]) + log (s);
    }
}
