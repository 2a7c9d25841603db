/*  worker/timing.c: timing one workload, over the backend table. */
#include "timing.h"
#include "clock.h"
#include "data.h"
#include "util.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

double ak_timing_rsd (const ak_stats_t *s)
{
    if (!s || s->n == 0 || !(s->median > 0))
        return 0.0;
    return (s->p90 - s->p10) / (2.0 * 1.2816 * s->median);
}

/*  Buffers of one measured kernel: outputs are private to it, inputs are
    shared (restored before each sample when the spec is in place). */
typedef struct {
    ak_kernel_t *kernel;
    void        *out[AK_MAX_BUFS];
    double      *x;                 /* samples */
    size_t       n;
    ak_stats_t   st;
} s_side_t;

typedef struct {
    const ak_timing_ctx_t *ctx;
    int64_t     dims[AK_MAX_DIMS];
    ak_dtype_t  dt;
    size_t      esz;
    size_t      nin[AK_MAX_BUFS], nout[AK_MAX_BUFS];
    uint8_t    *raw_in[AK_MAX_BUFS];
    void       *dev_in[AK_MAX_BUFS];
    s_side_t    side[2];            /* 0: candidate, 1: baseline */
    int         nsides;
} s_run_t;

static int s_restore_inputs (s_run_t *r, ak_err_t *err)
{
    const ak_timing_ctx_t *ctx = r->ctx;
    for (int j = 0; j < ctx->spec->ninputs; j++) {
        int rc = ctx->be->upload (ctx->dev, r->dev_in[j], r->raw_in[j], r->nin[j] * r->esz, err);
        if (rc)
            return rc;
    }
    return 0;
}

static void s_args (s_run_t *r, s_side_t *s, ak_launch_t *l)
{
    const ak_timing_ctx_t *ctx = r->ctx;
    const ak_spec_t *spec = ctx->spec;
    memset (l, 0, sizeof *l);
    l->ndims = spec->nkeys;
    for (int d = 0; d < spec->nkeys; d++)
        l->dims[d] = r->dims[d];
    l->nin = spec->ninputs;
    for (int j = 0; j < spec->ninputs; j++)
        l->in[j] = r->dev_in[j];
    l->nout = spec->noutputs;
    for (int k = 0; k < spec->noutputs; k++)
        l->out[k] = spec->inplace ? r->dev_in[k] : s->out[k];
    l->dtype = r->dt;
    l->params = ctx->params;
    l->param_names = ctx->param_names;
    l->nparams = ctx->nparams;
}

static int s_sample (s_run_t *r, s_side_t *s, bool keep, ak_err_t *err)
{
    const ak_timing_ctx_t *ctx = r->ctx;
    int rc = 0;
    if (ctx->spec->inplace) {
        rc = s_restore_inputs (r, err);
        if (rc)
            return rc;
    }
    ak_launch_t l;
    s_args (r, s, &l);
    double us = 0;
    rc = ctx->be->time (ctx->dev, s->kernel, &l, ctx->cold, &us, err);
    if (rc)
        return rc;
    if (keep)
        s->x[s->n++] = us;
    return 0;
}

static void s_run_free (s_run_t *r)
{
    const ak_timing_ctx_t *ctx = r->ctx;
    for (int j = 0; j < AK_MAX_BUFS; j++) {
        free (r->raw_in[j]);
        if (r->dev_in[j])
            ctx->be->release (ctx->dev, &r->dev_in[j]);
    }
    for (int s = 0; s < 2; s++) {
        for (int k = 0; k < AK_MAX_BUFS; k++)
            if (r->side[s].out[k])
                ctx->be->release (ctx->dev, &r->side[s].out[k]);
        free (r->side[s].x);
    }
}

static int s_cmp_double (const void *a, const void *b)
{
    double x = *(const double *) a, y = *(const double *) b;
    return (x > y) - (x < y);
}

/*  Speedup from paired rounds: round i timed the baseline and the candidate
    back to back, so base[i] / cand[i] cancels drift that hits both (clock
    changes, a neighbour's load).  The speedup is the median of those ratios
    and its noise the half-width of a distribution-free ~95% confidence
    interval of that median (order statistics at n/2 -+ 0.98 sqrt(n)): with
    few or scattered rounds the interval is wide, and it narrows as rounds
    agree, which is what the promotion rule needs to know. */
static void s_paired_speedup (const double *base, const double *cand, size_t n,
                              double *speedup, double *noise)
{
    *speedup = 0;
    *noise = 0;
    if (n == 0)
        return;
    double *q = ak_malloc (n * sizeof (double));
    size_t m = 0;
    for (size_t i = 0; i < n; i++)
        if (cand[i] > 0 && base[i] > 0)
            q[m++] = base[i] / cand[i];
    if (m > 0) {
        qsort (q, m, sizeof (double), s_cmp_double);
        *speedup = (m & 1) ? q[m / 2] : 0.5 * (q[m / 2 - 1] + q[m / 2]);
        double half = 0.98 * sqrt ((double) m);
        double lo_r = floor ((double) m / 2.0 - half);
        double hi_r = ceil ((double) m / 2.0 + half);
        size_t lo = lo_r < 0 ? 0 : (size_t) lo_r;
        size_t hi = hi_r > (double) (m - 1) ? m - 1 : (size_t) hi_r;
        *noise = 0.5 * (q[hi] - q[lo]);
    }
    free (q);
}

static bool s_converged (const s_run_t *r, uint32_t min_samples, double target)
{
    for (int s = 0; s < r->nsides; s++) {
        if (r->side[s].n < min_samples)
            return false;
        if (ak_timing_rsd (&r->side[s].st) > target)
            return false;
    }
    return true;
}

int ak_timing_measure (const ak_timing_ctx_t *ctx, const int64_t *dims, ak_dtype_t dt,
                       ak_timing_result_t *out, ak_err_t *err)
{
    int rc = 0;
    s_run_t r;
    memset (&r, 0, sizeof r);
    memset (out, 0, sizeof *out);
    if (!ctx || !ctx->spec || !ctx->be || !ctx->cand || !dims)
        return ak_err_set (err, AK_EINVAL, "timing: incomplete context");
    const ak_spec_t *spec = ctx->spec;
    uint64_t t0 = ak_clock_mono_ns ();
    r.ctx = ctx;
    r.dt = dt;
    r.esz = ak_dtype_size (dt);
    for (int d = 0; d < spec->nkeys; d++)
        r.dims[d] = dims[d];
    r.side[0].kernel = ctx->cand;
    r.nsides = 1;
    if (ctx->base) {
        r.side[1].kernel = ctx->base;
        r.nsides = 2;
    }
    uint32_t max_samples = ctx->max_samples ? ctx->max_samples : 1;
    uint32_t min_samples = ctx->min_samples ? ctx->min_samples : 1;
    if (min_samples > max_samples)
        min_samples = max_samples;

    rc = ak_buf_counts (spec, dims, dt, r.nin, r.nout, err);
    if (rc)
        goto fail;
    int64_t v = 0;
    if (ak_spec_eval (spec, spec->flops, dims, dt, &v, NULL) == 0)
        out->flops = (double) v;
    if (ak_spec_eval (spec, spec->bytes, dims, dt, &v, NULL) == 0)
        out->bytes = (double) v;

    for (int j = 0; j < spec->ninputs; j++) {
        r.raw_in[j] = ak_malloc (r.nin[j] * r.esz);
        for (size_t i = 0; i < r.nin[j]; i++)
            ak_elem_store (dt, r.raw_in[j], i, ak_input_value (spec, j, i, ctx->seed, dt));
        rc = ctx->be->alloc (ctx->dev, r.nin[j] * r.esz, &r.dev_in[j], err);
        if (rc)
            goto fail;
    }
    rc = s_restore_inputs (&r, err);
    if (rc)
        goto fail;
    for (int s = 0; s < r.nsides; s++) {
        r.side[s].x = ak_malloc (max_samples * sizeof (double));
        if (spec->inplace)
            continue;
        for (int k = 0; k < spec->noutputs; k++) {
            rc = ctx->be->alloc (ctx->dev, r.nout[k] * r.esz, &r.side[s].out[k], err);
            if (rc)
                goto fail;
        }
    }

    uint64_t deadline = ak_clock_mono_ms () + (ctx->max_time_ms ? ctx->max_time_ms : 2000);
    for (uint32_t w = 0; w < ctx->warmup; w++)
        for (int s = 0; s < r.nsides; s++) {
            rc = s_sample (&r, &r.side[s], false, err);
            if (rc)
                goto fail;
        }
    /* Rounds: A B, then B A, ... so neither kernel always runs right after
       the other's cache state. */
    uint32_t next_check = min_samples;
    for (uint32_t round = 0; round < max_samples; round++) {
        for (int i = 0; i < r.nsides; i++) {
            int s = (round & 1) ? r.nsides - 1 - i : i;
            rc = s_sample (&r, &r.side[s], true, err);
            if (rc)
                goto fail;
        }
        uint32_t n = round + 1;
        bool out_of_time = ak_clock_mono_ms () >= deadline;
        if (n >= next_check || out_of_time || n == max_samples) {
            for (int s = 0; s < r.nsides; s++)
                ak_stats_compute (r.side[s].x, r.side[s].n, &r.side[s].st);
            if (s_converged (&r, min_samples, ctx->rsd_target))
                break;
            /* Recheck about every n/16 rounds: the stop test stays cheap
               even for large max_samples. */
            next_check = n + (n / 16 > 0 ? n / 16 : 1);
        }
        if (out_of_time)
            break;
    }
    for (int s = 0; s < r.nsides; s++)
        ak_stats_compute (r.side[s].x, r.side[s].n, &r.side[s].st);

    out->cand = r.side[0].st;
    out->rsd_cand = ak_timing_rsd (&out->cand);
    out->rsd_met = out->rsd_cand <= ctx->rsd_target && out->cand.n >= min_samples;
    if (r.nsides == 2) {
        out->base = r.side[1].st;
        out->rsd_base = ak_timing_rsd (&out->base);
        out->rsd_met = out->rsd_met && out->rsd_base <= ctx->rsd_target && out->base.n >= min_samples;
        s_paired_speedup (r.side[1].x, r.side[0].x, r.side[0].n < r.side[1].n
                          ? r.side[0].n : r.side[1].n, &out->speedup, &out->speedup_noise);
    }
    out->ms = (double) (ak_clock_mono_ns () - t0) / 1e6;
    s_run_free (&r);
    return 0;

fail:
    s_run_free (&r);
    return rc;
}
