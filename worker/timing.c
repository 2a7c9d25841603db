/*  worker/timing.c: timing one workload, over the backend table. */
#include "timing.h"
#include "clock.h"
#include "data.h"
#include "log.h"
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

/*  Samples of one measured kernel, by every clock the backend gave:
    outputs are private to it, inputs are shared (restored before each
    sample when the spec is in place). */
typedef struct {
    ak_kernel_t *kernel;
    void        *out[AK_MAX_BUFS];
    double      *ev;                /* event (host: monotonic) clock */
    double      *cu;                /* CUPTI; meaningful while all_cupti */
    double      *ef;                /* untraced mode: event - floor */
    double       pc[AK_TIMING_MODE_ROUNDS];  /* CUPTI of the traced probes */
    size_t       npc;
    double      *mhz;               /* SM clock of samples that measured it */
    size_t       n, nmhz;
    bool         all_cupti;         /* every kept sample had a CUPTI figure */
    uint32_t     discarded;
    bool         has_info;
    ak_kernel_info_t info;
    ak_stats_t   st;                /* of the headline figure */
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
    bool        untraced;           /* kernel tracing off: headline events - floor */
    double      floor;              /* the backend's event floor (untraced) */
    double      sampled_us;         /* clock spans of the samples taken (timing.h) */
    double      mode_us;            /* slower kernel's probe CUPTI median; 0 none */
} s_run_t;

/* ------------------------------------------------------------- inputs */

static int s_restore_inputs (s_run_t *r, ak_err_t *err)
{
    const ak_timing_ctx_t *ctx = r->ctx;
    for (int j = 0; j < ctx->spec->ninputs; j++) {
        const ak_buf_t *b = &ctx->spec->inputs[j];
        int rc = r->raw_in[j]
            ? ctx->be->upload (ctx->dev, r->dev_in[j], r->raw_in[j], r->nin[j] * r->esz, err)
            : ctx->be->generate (ctx->dev, ctx->gen, r->dev_in[j], r->nin[j], ctx->seed,
                                 (uint64_t) j, b->lo, b->hi, (int) r->dt, err);
        if (rc)
            return rc;
    }
    return 0;
}

/* ------------------------------------------------------------ samples */

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
    /* Launch configuration of this side for this workload (CUDA). */
    const ak_launch_cfg_t *lc = s == &r->side[1] ? ctx->base_launch : ctx->cand_launch;
    if (lc)
        ak_launch_apply (lc, l);
}

/*  One sample of side s into *out: through the backend's sample() where
    it has one, else time() (the event clock alone, never throttled). */
static int s_sample (s_run_t *r, s_side_t *s, ak_sample_t *out, ak_err_t *err)
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
    if (ctx->be->sample)
        rc = ctx->be->sample (ctx->dev, s->kernel, &l, ctx->cold, out, err);
    else {
        memset (out, 0, sizeof *out);
        out->cupti_us = -1;
        out->clock_ok = true;
        rc = ctx->be->time (ctx->dev, s->kernel, &l, ctx->cold, &out->event_us, err);
    }
    if (rc == 0 && out->event_us > 0)
        r->sampled_us += out->event_us;
    return rc;
}

static void s_keep (s_side_t *s, const ak_sample_t *smp, double floor)
{
    s->ef[s->n] = smp->event_us - floor;
    s->ev[s->n] = smp->event_us;
    s->cu[s->n] = smp->cupti_us;
    s->all_cupti = s->all_cupti && smp->cupti_us >= 0;
    s->n++;
    if (smp->sm_clock_mhz > 0)
        s->mhz[s->nmhz++] = smp->sm_clock_mhz;
    if (smp->has_info) {
        s->info = smp->info;
        s->has_info = true;
    }
}

/*  The headline of run r so far: CUPTI while every side has it for
    every sample, else the event clock. */
static bool s_use_cupti (const s_run_t *r)
{
    if (r->untraced)
        return false;
    for (int s = 0; s < r->nsides; s++)
        if (!r->side[s].all_cupti || r->side[s].n == 0)
            return false;
    return true;
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
        free (r->side[s].ev);
        free (r->side[s].cu);
        free (r->side[s].ef);
        free (r->side[s].mhz);
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
        /* One ratio says nothing about its spread: its noise is the figure
           itself, so it is never "beyond noise". */
        if (m < 2)
            *noise = *speedup;
    }
    free (q);
}

/*  Headline statistics of every side (r->side[s].st). */
static void s_headline (s_run_t *r)
{
    bool cupti = s_use_cupti (r);
    for (int s = 0; s < r->nsides; s++)
        ak_stats_compute (cupti ? r->side[s].cu : r->untraced ? r->side[s].ef : r->side[s].ev,
                          r->side[s].n, &r->side[s].st);
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

static void s_detail (const s_run_t *r, const s_side_t *s, ak_timing_detail_t *d)
{
    memset (d, 0, sizeof *d);
    ak_stats_compute (s->ev, s->n, &d->events);
    if (r->untraced) {
        if (s->npc > 0)
            ak_stats_compute (s->pc, s->npc, &d->cupti);
    }
    else if (s->all_cupti && s->n > 0)
        ak_stats_compute (s->cu, s->n, &d->cupti);
    d->discarded = s->discarded;
    if (s->nmhz > 0) {
        ak_stats_t m;
        ak_stats_compute (s->mhz, s->nmhz, &m);
        d->sm_clock_mhz = m.median;
    }
    d->has_info = s->has_info;
    d->info = s->info;
}

bool ak_timing_untraced (double slowest_cupti_us, bool can_untrace)
{
    return can_untrace && slowest_cupti_us >= AK_TIMING_TRACE_MAX_US;
}

/*  Whether a side's every probe so far took AK_TIMING_PROBE_DECISIVE_US or
    more (timing.h): the mode is then settled without the other rounds. */
static bool s_probes_decisive (const s_run_t *r)
{
    for (int s = 0; s < r->nsides; s++) {
        const s_side_t *d = &r->side[s];
        bool all = d->npc > 0;
        for (size_t i = 0; i < d->npc; i++)
            all = all && d->pc[i] >= AK_TIMING_PROBE_DECISIVE_US;
        if (all)
            return true;
    }
    return false;
}

/*  The mode of run r (timing.h, "Untraced mode"): AK_TIMING_MODE_ROUNDS
    traced probe rounds, not kept; when the slower kernel's median CUPTI
    duration reaches AK_TIMING_TRACE_MAX_US and the backend has a floor,
    kernel tracing goes off (r->untraced, r->floor).  Both kernels are
    measured the same way, so the interleaved pairs stay comparable.  A
    backend without the two functions, a probe without CUPTI figures or
    a floor that cannot be had leaves the mode as it was (traced). */
static int s_choose_mode (s_run_t *r, ak_err_t *err)
{
    const ak_timing_ctx_t *ctx = r->ctx;
    if (!ctx->be->sample || !ctx->be->kernel_trace || !ctx->be->event_floor)
        return 0;
    for (int round = 0; round < AK_TIMING_MODE_ROUNDS && !s_probes_decisive (r); round++)
        for (int i = 0; i < r->nsides; i++) {
            int s = (round & 1) ? r->nsides - 1 - i : i;
            ak_sample_t smp;
            int rc = s_sample (r, &r->side[s], &smp, err);
            if (rc)
                return rc;
            if (smp.cupti_us >= 0)
                r->side[s].pc[r->side[s].npc++] = smp.cupti_us;
        }
    double slowest = 0;
    for (int s = 0; s < r->nsides; s++) {
        if (r->side[s].npc == 0)
            return 0;
        ak_stats_t st;
        ak_stats_compute (r->side[s].pc, r->side[s].npc, &st);
        if (st.median > slowest)
            slowest = st.median;
    }
    r->mode_us = slowest;
    if (!ak_timing_untraced (slowest, true))
        return 0;
    ak_err_t e = { 0 };
    double floor = 0;
    int rc = ctx->be->event_floor (ctx->dev, &floor, &e);
    if (rc == AK_ECRASH)
        return ak_err_set (err, rc, "%s", e.msg);
    if (rc) {
        ak_debug ("timing: %.1f us kernel stays traced: %s", slowest, e.msg);
        return 0;
    }
    rc = ctx->be->kernel_trace (ctx->dev, false, err);
    if (rc)
        return rc;
    r->untraced = true;
    r->floor = floor;
    return 0;
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
    uint32_t max_discards = max_samples > AK_TIMING_MAX_DISCARDS ? max_samples : AK_TIMING_MAX_DISCARDS;

    rc = ak_buf_counts (spec, dims, dt, r.nin, r.nout, err);
    if (rc)
        goto fail;
    int64_t v = 0;
    if (ak_spec_eval (spec, spec->flops, dims, dt, &v, NULL) == 0)
        out->flops = (double) v;
    if (ak_spec_eval (spec, spec->bytes, dims, dt, &v, NULL) == 0)
        out->bytes = (double) v;

    for (int j = 0; j < spec->ninputs; j++) {
        if (!ctx->gen || !ctx->be->generate) {
            r.raw_in[j] = ak_malloc (r.nin[j] * r.esz);
            ak_input_fill (spec, j, ctx->seed, dt, r.nin[j], NULL, NULL, NULL, r.raw_in[j]);
        }
        rc = ctx->be->alloc (ctx->dev, r.nin[j] * r.esz, &r.dev_in[j], err);
        if (rc)
            goto fail;
    }
    rc = s_restore_inputs (&r, err);
    if (rc)
        goto fail;
    for (int s = 0; s < r.nsides; s++) {
        r.side[s].ev = ak_malloc (max_samples * sizeof (double));
        r.side[s].cu = ak_malloc (max_samples * sizeof (double));
        r.side[s].ef = ak_malloc (max_samples * sizeof (double));
        r.side[s].mhz = ak_malloc (max_samples * sizeof (double));
        r.side[s].all_cupti = true;
        if (spec->inplace)
            continue;
        for (int k = 0; k < spec->noutputs; k++) {
            rc = ctx->be->alloc (ctx->dev, r.nout[k] * r.esz, &r.side[s].out[k], err);
            if (rc)
                goto fail;
        }
    }

    uint64_t deadline = ak_clock_mono_ms () + (ctx->max_time_ms ? ctx->max_time_ms : 2000);
    ak_sample_t smp[2];
    for (uint32_t w = 0; w < ctx->warmup; w++) {
        double busy_us = 0;
        for (int s = 0; s < r.nsides; s++) {
            rc = s_sample (&r, &r.side[s], &smp[s], err);
            if (rc)
                goto fail;
            busy_us += smp[s].event_us;
        }
        if (busy_us >= AK_TIMING_WARM_BUSY_US)
            break;                      /* one long round warms as several would (timing.h) */
    }
    r.sampled_us = 0;                   /* warm-up is not a timed sample */
    rc = s_choose_mode (&r, err);
    if (rc)
        goto fail;
    /* Rounds: A B, then B A, ... so neither kernel always runs right after
       the other's cache state.  A round with a throttled sample is thrown
       away whole (the pairs stay pairs) and taken again, up to
       max_discards times. */
    uint32_t next_check = min_samples, discards = 0;
    uint32_t min_rounds = AK_TIMING_MIN_ROUNDS < max_samples ? AK_TIMING_MIN_ROUNDS : max_samples;
    for (uint32_t round = 0; round < max_samples;) {
        bool throttled = false;
        for (int i = 0; i < r.nsides; i++) {
            int s = (round & 1) ? r.nsides - 1 - i : i;
            rc = s_sample (&r, &r.side[s], &smp[s], err);
            if (rc)
                goto fail;
            throttled = throttled || !smp[s].clock_ok;
        }
        bool time_up = ak_clock_mono_ms () >= deadline;
        /* Thrown away while discards are allowed, unless the time is up
           with nothing kept yet (then a throttled figure beats none). */
        bool discarded = throttled && discards < max_discards && !(time_up && r.side[0].n == 0);
        if (discarded) {
            for (int s = 0; s < r.nsides; s++)
                r.side[s].discarded += !smp[s].clock_ok;
            discards++;
        }
        else {
            for (int s = 0; s < r.nsides; s++)
                s_keep (&r.side[s], &smp[s], r.floor);
            round++;
        }
        /* The time budget never stops sampling before min_rounds kept
           rounds: fewer give no ~95% interval of the median ratio. */
        bool out_of_time = time_up && r.side[0].n >= min_rounds;
        if (discarded && !out_of_time)
            continue;
        uint32_t n = round;
        if (n > 0 && (n >= next_check || out_of_time || n == max_samples)) {
            s_headline (&r);
            if (s_converged (&r, min_samples, ctx->rsd_target))
                break;
            /* Recheck about every n/16 rounds: the stop test stays cheap
               even for large max_samples. */
            next_check = n + (n / 16 > 0 ? n / 16 : 1);
        }
        if (out_of_time)
            break;
    }
    s_headline (&r);
    if (r.untraced) {
        r.untraced = false;             /* tracing is on again whatever comes */
        rc = ctx->be->kernel_trace (ctx->dev, true, err);
        r.untraced = true;
        if (rc)
            goto fail_traced;
    }

    out->timer = r.untraced ? "events-floor" : s_use_cupti (&r) ? "cupti"
               : strcmp (ctx->be->name, "host") == 0 ? "host" : "events";
    out->event_floor_us = r.untraced ? r.floor : 0.0;
    out->mode_cupti_us = r.mode_us;
    out->cand = r.side[0].st;
    out->rsd_cand = ak_timing_rsd (&out->cand);
    out->rsd_met = out->rsd_cand <= ctx->rsd_target && out->cand.n >= min_samples;
    s_detail (&r, &r.side[0], &out->detail[0]);
    if (r.nsides == 2) {
        bool cupti = s_use_cupti (&r);
        out->base = r.side[1].st;
        out->rsd_base = ak_timing_rsd (&out->base);
        out->rsd_met = out->rsd_met && out->rsd_base <= ctx->rsd_target && out->base.n >= min_samples;
        const double *hb = cupti ? r.side[1].cu : r.untraced ? r.side[1].ef : r.side[1].ev;
        const double *hc = cupti ? r.side[0].cu : r.untraced ? r.side[0].ef : r.side[0].ev;
        s_paired_speedup (hb, hc,
                          r.side[0].n < r.side[1].n ? r.side[0].n : r.side[1].n,
                          &out->speedup, &out->speedup_noise);
        s_detail (&r, &r.side[1], &out->detail[1]);
    }
    out->ms = (double) (ak_clock_mono_ns () - t0) / 1e6;
    out->sampled_us = r.sampled_us;
    s_run_free (&r);
    return 0;

fail:
    if (r.untraced) {
        ak_err_t e = { 0 };
        if (ctx->be->kernel_trace (ctx->dev, true, &e))
            ak_warn ("timing: kernel tracing not restored: %s", e.msg);
    }
fail_traced:
    s_run_free (&r);
    return rc;
}

/* ------------------------------------------------------------ receipts */

static Ak__Stats *s_pb_stats (const ak_stats_t *s, const ak_timing_detail_t *d)
{
    Ak__Stats *p = ak_malloc (sizeof *p);
    ak__stats__init (p);
    p->n = (uint32_t) s->n;
    p->median_us = s->median;
    p->min_us = s->min;
    p->mean_us = s->mean;
    p->stddev_us = s->stddev;
    p->p10_us = s->p10;
    p->p90_us = s->p90;
    p->discarded = d->discarded;
    p->sm_clock_mhz = d->sm_clock_mhz;
    return p;
}

static void s_pb_record (Ak__Receipt *receipt, const ak_kernel_info_t *ki, const char *role,
                         const char *workload)
{
    Ak__KernelRecord *k = ak_malloc (sizeof *k);
    ak__kernel_record__init (k);
    k->name = ak_strdup (ki->name);
    k->role = ak_strdup (role);
    k->workload = ak_strdup (workload ? workload : "");
    k->registers = ki->registers;
    k->static_shared = ki->static_shared;
    k->dynamic_shared = ki->dynamic_shared;
    k->n_grid = 3;
    k->grid = ak_malloc (3 * sizeof *k->grid);
    memcpy (k->grid, ki->grid, 3 * sizeof *k->grid);
    k->n_block = 3;
    k->block = ak_malloc (3 * sizeof *k->block);
    memcpy (k->block, ki->block, 3 * sizeof *k->block);
    k->duration_us = ki->duration_us;
    receipt->kernels = ak_realloc (receipt->kernels, (receipt->n_kernels + 1) * sizeof *receipt->kernels);
    receipt->kernels[receipt->n_kernels++] = k;
}

void ak_timing_to_pb (const ak_timing_result_t *r, const char *workload, Ak__WorkloadTiming *t,
                      Ak__Receipt *receipt)
{
    if (!r || !t)
        return;
    bool base = r->base.n > 0;
    free (t->timer == protobuf_c_empty_string ? NULL : t->timer);
    t->timer = ak_strdup (r->timer ? r->timer : "");
    if (t->candidate) {
        t->candidate->discarded = r->detail[0].discarded;
        t->candidate->sm_clock_mhz = r->detail[0].sm_clock_mhz;
    }
    if (t->baseline && base) {
        t->baseline->discarded = r->detail[1].discarded;
        t->baseline->sm_clock_mhz = r->detail[1].sm_clock_mhz;
    }
    if (!t->candidate_events)
        t->candidate_events = s_pb_stats (&r->detail[0].events, &r->detail[0]);
    if (!t->candidate_cupti && r->detail[0].cupti.n > 0)
        t->candidate_cupti = s_pb_stats (&r->detail[0].cupti, &r->detail[0]);
    if (base && !t->baseline_events)
        t->baseline_events = s_pb_stats (&r->detail[1].events, &r->detail[1]);
    if (base && !t->baseline_cupti && r->detail[1].cupti.n > 0)
        t->baseline_cupti = s_pb_stats (&r->detail[1].cupti, &r->detail[1]);
    if (!receipt)
        return;
    if (r->detail[0].has_info)
        s_pb_record (receipt, &r->detail[0].info, "candidate", workload);
    if (base && r->detail[1].has_info)
        s_pb_record (receipt, &r->detail[1].info, "baseline", workload);
}
