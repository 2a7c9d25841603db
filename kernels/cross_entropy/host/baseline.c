/*  cross_entropy baseline (host): row maximum, then the sum of
    exp(x - max), in float.  loss[r] = (max - x[r][t_r]) + log(sum),
    t_r = (uint32) (r * 2654435761) % vocab (see ref.c). */
void ak_kernel (const ak_args_t *a)
{
    const int64_t B = a->dims[0], V = a->dims[1];
    const float *x = AK_IN (a, 0);
    float *loss = AK_OUT (a, 0);

    for (int64_t r = 0; r < B; r++) {
        const float *xr = x + r * V;
        const uint32_t target = ((uint32_t) r * 2654435761u) % (uint32_t) V;
        float m = xr[0];
        for (int64_t v = 1; v < V; v++)
            if (xr[v] > m)
                m = xr[v];
        float s = 0.0f;
        for (int64_t v = 0; v < V; v++)
            s += expf (xr[v] - m);
        loss[r] = (m - xr[target]) + logf (s);
    }
}
