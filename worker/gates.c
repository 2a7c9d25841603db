/*  worker/gates.c: correctness gates over the backend table.

    One configuration (dims, dtype, seed, input transform) is prepared once:
    inputs generated and rounded to the dtype, the float64 reference run on
    exactly those values.  Then the candidate runs as often as the stage
    needs; before each run the inputs are uploaded again (in-place kernels
    overwrite them) and the outputs poisoned with 0xFF bytes.  Each output
    element is classified: unwritten (the poison bytes intact), non-finite
    where the reference is finite, beyond atol + rtol*|ref|, or fine.

    The five stages (smoke, shape sweep, numerical stability, determinism,
    edge cases: docs/measurement.md, "The gate stages") follow autokernel's
    bench.py; the first failing stage decides the status and the reason. */
#include "gates.h"
#include "data.h"
#include "log.h"
#include "rng.h"
#include "space.h"
#include "util.h"

#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define AK_POISON_BYTE 0xFF

const char *ak_gate_status_name (ak_gate_status_t status)
{
    switch (status) {
        case AK_GATE_OK:     return "ok";
        case AK_GATE_WRONG:  return "wrong_answer";
        case AK_GATE_NAN:    return "nan";
        case AK_GATE_LAUNCH: return "launch_error";
        case AK_GATE_INVALID: return "invalid_config";
        case AK_GATE_CRASH:  return "crashed";
        default:             return "error";
    }
}

ak_gate_status_t ak_gate_status_for (int rc, const ak_err_t *err)
{
    if (rc == AK_ECRASH)
        return AK_GATE_CRASH;
    if (err && strstr (err->msg, "invalid_config"))
        return AK_GATE_INVALID;
    return AK_GATE_LAUNCH;
}

/* ------------------------------------------------------ input transforms */

typedef enum {
    S_X_NONE = 0,
    S_X_NEAR_MAX,        /* x60000 (fp16), x1e30 (bf16), x1e18 (fp32), clipped to the range */
    S_X_NEAR_ZERO,       /* x1e-6 */
    S_X_MIXED,           /* each element x1e3 or x1e-3 at random */
    S_X_ZEROS,           /* all 0 */
    S_X_SAME,            /* all 0.5 */
} s_xform_t;

static const char *s_xform_name[] = { "", "near_max", "near_zero", "mixed_scale", "all_zeros", "all_same" };

static double s_xform (const ak_spec_t *spec, s_xform_t x, ak_dtype_t dt, uint64_t seed, int j, uint64_t i,
                       double v)
{
    switch (x) {
        case S_X_NEAR_MAX:  return v * ak_spec_near_max_scale (spec, dt);
        case S_X_NEAR_ZERO: return v * 1e-6;
        case S_X_MIXED:     return ak_rng_uniform (seed, 0x100u + (uint64_t) j, i) < 0.5 ? v * 1e3 : v * 1e-3;
        case S_X_ZEROS:     return 0.0;
        case S_X_SAME:      return 0.5;
        default:            return v;
    }
}

/* --------------------------------------------------------- configuration */

typedef struct {
    const ak_gate_ctx_t *ctx;
    char        label[128];                 /* "small/float32" (+ " near_max") */
    int64_t     dims[AK_MAX_DIMS];
    ak_dtype_t  dt;
    size_t      esz;
    size_t      nin[AK_MAX_BUFS], nout[AK_MAX_BUFS];
    uint8_t    *raw_in[AK_MAX_BUFS];        /* inputs in dt */
    double     *ref[AK_MAX_BUFS];           /* reference outputs */
    size_t      ref_nonfinite;              /* elements the reference made NaN/Inf */
    void       *dev_in[AK_MAX_BUFS];
    void       *dev_out[AK_MAX_BUFS];       /* == dev_in[k] for in-place specs */
    uint8_t    *got[AK_MAX_BUFS];           /* candidate outputs, raw */
    bool        on_device;                  /* inputs made on the device (raw_in NULL),
                                               reference: the device reference alone */
    uint64_t    seed;
} s_cfg_t;

/*  Outcome of one comparison. */
typedef struct {
    size_t  n;                 /* output elements compared */
    size_t  unwritten, nonfinite, beyond;
    size_t  overflowed;        /* Inf where the reference is beyond the dtype's range */
    double  worst;             /* largest finite |out - ref| */
    int     first_out;         /* first failing element: buffer, index, values */
    size_t  first_i;
    double  first_got, first_want;
    const char *first_kind;    /* "unwritten" | "non-finite" | "beyond tolerance" */
} s_cmp_t;

static void s_cfg_free (s_cfg_t *c)
{
    const ak_gate_ctx_t *ctx = c->ctx;
    for (int j = 0; j < AK_MAX_BUFS; j++) {
        free (c->raw_in[j]);
        free (c->ref[j]);
        free (c->got[j]);
        if (ctx && c->dev_out[j] && c->dev_out[j] != c->dev_in[j])
            ctx->be->release (ctx->dev, &c->dev_out[j]);
        if (ctx && c->dev_in[j])
            ctx->be->release (ctx->dev, &c->dev_in[j]);
    }
    memset (c, 0, sizeof *c);
}

static bool s_all_bytes (const uint8_t *p, size_t n, uint8_t byte)
{
    for (size_t i = 0; i < n; i++)
        if (p[i] != byte)
            return false;
    return true;
}

static void s_launch_args (const s_cfg_t *c, void *const *in, void *const *out, ak_launch_t *l)
{
    const ak_gate_ctx_t *ctx = c->ctx;
    const ak_spec_t *spec = ctx->spec;
    memset (l, 0, sizeof *l);
    l->ndims = spec->nkeys;
    for (int d = 0; d < spec->nkeys; d++)
        l->dims[d] = c->dims[d];
    l->nin = spec->ninputs;
    for (int j = 0; j < spec->ninputs; j++)
        l->in[j] = in[j];
    l->nout = spec->noutputs;
    for (int k = 0; k < spec->noutputs; k++)
        l->out[k] = out[k];
    l->dtype = c->dt;
    l->params = ctx->params;
    l->param_names = ctx->param_names;
    l->nparams = ctx->nparams;
}

/*  Runs the float64 reference on the host backend over the rounded inputs
    in `vals` and keeps its outputs in c->ref.  AK_EINTERNAL when the
    reference leaves an element unwritten (a broken oracle must not pass
    anything). */
static int s_cfg_reference (s_cfg_t *c, double *const *vals, ak_err_t *err)
{
    const ak_gate_ctx_t *ctx = c->ctx;
    const ak_spec_t *spec = ctx->spec;
    const ak_backend_t *be = ctx->ref_be;
    void *in[AK_MAX_BUFS] = { 0 }, *out[AK_MAX_BUFS] = { 0 };
    int rc = 0;

    for (int j = 0; j < spec->ninputs; j++) {
        rc = be->alloc (ctx->ref_dev, c->nin[j] * sizeof (double), &in[j], err);
        if (rc)
            goto done;
        rc = be->upload (ctx->ref_dev, in[j], vals[j], c->nin[j] * sizeof (double), err);
        if (rc)
            goto done;
    }
    for (int k = 0; k < spec->noutputs; k++) {
        if (spec->inplace) {
            out[k] = in[k];
            continue;
        }
        rc = be->alloc (ctx->ref_dev, c->nout[k] * sizeof (double), &out[k], err);
        if (rc)
            goto done;
        rc = be->fill (ctx->ref_dev, out[k], AK_POISON_BYTE, c->nout[k] * sizeof (double), err);
        if (rc)
            goto done;
    }
    ak_launch_t l;
    s_launch_args (c, in, out, &l);
    l.dtype = AK_DT_FLOAT32;
    rc = be->launch (ctx->ref_dev, ctx->ref, &l, err);
    if (rc) {
        ak_err_prefix (err, "reference at %s", c->label);
        goto done;
    }
    for (int k = 0; k < spec->noutputs; k++) {
        c->ref[k] = ak_malloc (c->nout[k] * sizeof (double));
        rc = be->download (ctx->ref_dev, c->ref[k], out[k], c->nout[k] * sizeof (double), err);
        if (rc)
            goto done;
        for (size_t i = 0; i < c->nout[k]; i++) {
            if (!spec->inplace && s_all_bytes ((const uint8_t *) &c->ref[k][i], sizeof (double), AK_POISON_BYTE)) {
                rc = ak_err_set (err, AK_EINTERNAL, "reference left %s[%zu] unwritten at %s",
                                 spec->outputs[k].name, i, c->label);
                goto done;
            }
            if (!isfinite (c->ref[k][i]))
                c->ref_nonfinite++;
        }
    }
done:
    for (int k = 0; k < spec->noutputs; k++)
        if (out[k] && out[k] != in[k])
            be->release (ctx->ref_dev, &out[k]);
    for (int j = 0; j < spec->ninputs; j++)
        if (in[j])
            be->release (ctx->ref_dev, &in[j]);
    return rc;
}

/* ------------------------------------------------------ device reference */

/*  Runs the device reference on ctx->dev over float64 inputs already there
    (din), into outs[k] (host doubles, malloc'ed: the caller frees them).
    AK_EINTERNAL when it leaves an element unwritten; its launch rule or
    launch failing is an error of the spec, reported as such. */
static int s_dref_run (const s_cfg_t *c, void *const *din, double **outs, ak_err_t *err)
{
    const ak_gate_ctx_t *ctx = c->ctx;
    const ak_spec_t *spec = ctx->spec;
    const ak_backend_t *be = ctx->be;
    void *out[AK_MAX_BUFS] = { 0 };
    ak_launch_cfg_t lc;
    ak_launch_t l;
    int rc = ak_launch_eval (spec, ctx->dref_launch, c->dims, AK_DT_FLOAT32, NULL, NULL, 0, &lc, err);
    if (rc)
        return ak_err_prefix (err, "device reference at %s: reference_cuda", c->label);
    for (int k = 0; k < spec->noutputs; k++) {
        if (spec->inplace) {
            out[k] = din[k];
            continue;
        }
        rc = be->alloc (ctx->dev, c->nout[k] * sizeof (double), &out[k], err);
        if (rc)
            goto done;
        rc = be->fill (ctx->dev, out[k], AK_POISON_BYTE, c->nout[k] * sizeof (double), err);
        if (rc)
            goto done;
    }
    s_launch_args (c, din, out, &l);
    l.dtype = AK_DT_FLOAT32;
    l.params = NULL;
    l.param_names = NULL;
    l.nparams = 0;
    ak_launch_apply (&lc, &l);
    rc = be->launch (ctx->dev, ctx->dref, &l, err);
    if (rc) {
        ak_err_prefix (err, "device reference at %s", c->label);
        goto done;
    }
    for (int k = 0; k < spec->noutputs; k++) {
        outs[k] = ak_malloc (c->nout[k] * sizeof (double));
        rc = be->download (ctx->dev, outs[k], out[k], c->nout[k] * sizeof (double), err);
        if (rc)
            goto done;
        for (size_t i = 0; i < c->nout[k] && !spec->inplace; i++)
            if (s_all_bytes ((const uint8_t *) &outs[k][i], sizeof (double), AK_POISON_BYTE)) {
                rc = ak_err_set (err, AK_EINTERNAL, "device reference left %s[%zu] unwritten at %s",
                                 spec->outputs[k].name, i, c->label);
                goto done;
            }
    }
done:
    for (int k = 0; k < spec->noutputs; k++)
        if (out[k] && out[k] != din[k])
            be->release (ctx->dev, &out[k]);
    return rc;
}

/*  The device reference over the host's inputs (vals), checked against
    the host oracle's outputs already in c->ref.  AK_EINTERNAL naming the
    first element that disagrees: the device reference is wrong (or the
    oracle), not the candidate. */
static int s_dref_check (const s_cfg_t *c, double *const *vals, ak_err_t *err)
{
    const ak_gate_ctx_t *ctx = c->ctx;
    const ak_spec_t *spec = ctx->spec;
    void *din[AK_MAX_BUFS] = { 0 };
    double *got[AK_MAX_BUFS] = { 0 };
    int rc = 0;
    for (int j = 0; j < spec->ninputs && rc == 0; j++) {
        rc = ctx->be->alloc (ctx->dev, c->nin[j] * sizeof (double), &din[j], err);
        if (rc == 0)
            rc = ctx->be->upload (ctx->dev, din[j], vals[j], c->nin[j] * sizeof (double), err);
    }
    if (rc == 0)
        rc = s_dref_run (c, din, got, err);
    for (int k = 0; k < spec->noutputs && rc == 0; k++) {
        double scale = 0;
        for (size_t i = 0; i < c->nout[k]; i++)
            if (isfinite (c->ref[k][i]) && fabs (c->ref[k][i]) > scale)
                scale = fabs (c->ref[k][i]);
        for (size_t i = 0; i < c->nout[k]; i++) {
            double h = c->ref[k][i], d = got[k][i];
            bool ok = isfinite (h) ? isfinite (d) && fabs (d - h) <= AK_GATE_DREF_RTOL * fabs (h)
                                                                   + AK_GATE_DREF_ATOL * scale
                                   : (isnan (h) && isnan (d)) || h == d;
            if (!ok) {
                rc = ak_err_set (err, AK_EINTERNAL, "device reference disagrees with the host "
                                 "float64 oracle at %s: %s[%zu] = %.17g, oracle %.17g (the "
                                 "spec's reference_cuda is wrong; not the candidate's fault)",
                                 c->label, spec->outputs[k].name, i, d, h);
                break;
            }
        }
    }
    for (int j = 0; j < AK_MAX_BUFS; j++) {
        if (din[j])
            ctx->be->release (ctx->dev, &din[j]);
        free (got[j]);
    }
    return rc;
}

/*  Inputs made on the device (the kernel's in c->dev_in, float64 copies of
    the same values for the device reference), and the device reference's
    outputs in c->ref.  The host never holds the inputs. */
static int s_cfg_on_device (s_cfg_t *c, ak_err_t *err)
{
    const ak_gate_ctx_t *ctx = c->ctx;
    const ak_spec_t *spec = ctx->spec;
    void *din[AK_MAX_BUFS] = { 0 };
    int rc = 0;
    for (int j = 0; j < spec->ninputs && rc == 0; j++) {
        const ak_buf_t *b = &spec->inputs[j];
        rc = ctx->be->alloc (ctx->dev, c->nin[j] * c->esz, &c->dev_in[j], err);
        if (rc == 0)
            rc = ctx->be->alloc (ctx->dev, c->nin[j] * sizeof (double), &din[j], err);
        if (rc == 0)
            rc = ctx->be->generate (ctx->dev, ctx->gen, din[j], c->nin[j], c->seed, (uint64_t) j,
                                    b->lo, b->hi, AK_GEN_AS_F64 + (int) c->dt, err);
        if (rc)
            ak_err_prefix (err, "inputs on the device at %s", c->label);
    }
    if (rc == 0)
        rc = s_dref_run (c, din, c->ref, err);
    for (int k = 0; k < spec->noutputs && rc == 0; k++)
        for (size_t i = 0; i < c->nout[k]; i++)
            if (!isfinite (c->ref[k][i]))
                c->ref_nonfinite++;
    for (int j = 0; j < AK_MAX_BUFS; j++)
        if (din[j])
            ctx->be->release (ctx->dev, &din[j]);
    return rc;
}

/*  True when the configuration goes to the device reference alone: there
    is one, inputs are plain, and some buffer is beyond the oracle's size. */
static bool s_cfg_device_only (const s_cfg_t *c, s_xform_t x)
{
    const ak_gate_ctx_t *ctx = c->ctx;
    if (!ctx->dref || !ctx->dref_launch || !ctx->gen || !ctx->be->generate || x != S_X_NONE)
        return false;
    uint64_t max = ctx->oracle_max_elems ? ctx->oracle_max_elems : AK_GATE_ORACLE_MAX_ELEMS;
    for (int j = 0; j < ctx->spec->ninputs; j++)
        if (c->nin[j] > max)
            return true;
    for (int k = 0; k < ctx->spec->noutputs; k++)
        if (c->nout[k] > max)
            return true;
    return false;
}

/*  Prepares a configuration: counts, inputs (generator, transform, dtype
    rounding), the reference outputs, and the candidate's buffers.  Errors
    here are the spec's or the oracle's, never the candidate's. */
static int s_cfg_prepare (const ak_gate_ctx_t *ctx, const char *name, const int64_t *dims,
                          ak_dtype_t dt, uint64_t seed, s_xform_t x, s_cfg_t *c, ak_err_t *err)
{
    const ak_spec_t *spec = ctx->spec;
    double *vals[AK_MAX_BUFS] = { 0 };
    int rc = 0;

    memset (c, 0, sizeof *c);
    c->ctx = ctx;
    c->dt = dt;
    c->esz = ak_dtype_size (dt);
    for (int d = 0; d < spec->nkeys; d++)
        c->dims[d] = dims[d];
    snprintf (c->label, sizeof c->label, "%s/%s%s%s", name, ak_dtype_name (dt),
              x ? " " : "", s_xform_name[x]);

    rc = ak_buf_counts (spec, dims, dt, c->nin, c->nout, err);
    if (rc) {
        ak_err_prefix (err, "%s", c->label);
        goto fail;
    }
    c->seed = seed;
    c->on_device = s_cfg_device_only (c, x);
    if (c->on_device) {
        rc = s_cfg_on_device (c, err);
        if (rc)
            goto fail;
        goto outputs;
    }
    for (int j = 0; j < spec->ninputs; j++) {
        const ak_buf_t *b = &spec->inputs[j];
        vals[j] = ak_malloc (c->nin[j] * sizeof (double));
        c->raw_in[j] = ak_malloc (c->nin[j] * c->esz);
        for (size_t i = 0; i < c->nin[j]; i++) {
            double v = ak_rng_range (seed, (uint64_t) j, i, b->lo, b->hi);
            v = ak_elem_round (dt, s_xform (spec, x, dt, seed, j, i, v));
            vals[j][i] = v;
            ak_elem_store (dt, c->raw_in[j], i, v);
        }
    }
    rc = s_cfg_reference (c, vals, err);
    if (rc)
        goto fail;
    if (ctx->dref && ctx->dref_launch && (rc = s_dref_check (c, vals, err)) != 0)
        goto fail;
    for (int j = 0; j < spec->ninputs; j++) {
        rc = ctx->be->alloc (ctx->dev, c->nin[j] * c->esz, &c->dev_in[j], err);
        if (rc)
            goto fail;
    }
outputs:
    for (int k = 0; k < spec->noutputs; k++) {
        if (spec->inplace)
            c->dev_out[k] = c->dev_in[k];
        else {
            rc = ctx->be->alloc (ctx->dev, c->nout[k] * c->esz, &c->dev_out[k], err);
            if (rc)
                goto fail;
        }
        c->got[k] = ak_malloc (c->nout[k] * c->esz);
    }
    for (int j = 0; j < AK_MAX_BUFS; j++)
        free (vals[j]);
    return 0;

fail:
    for (int j = 0; j < AK_MAX_BUFS; j++)
        free (vals[j]);
    s_cfg_free (c);
    return rc;
}

/*  One candidate run: inputs restored, outputs poisoned, launch, outputs
    downloaded into c->got.  A failure is the candidate's (launch_error). */
static int s_cfg_run (s_cfg_t *c, ak_err_t *err)
{
    const ak_gate_ctx_t *ctx = c->ctx;
    const ak_spec_t *spec = ctx->spec;
    int rc = 0;
    for (int j = 0; j < spec->ninputs; j++) {
        const ak_buf_t *b = &spec->inputs[j];
        rc = c->on_device
            ? ctx->be->generate (ctx->dev, ctx->gen, c->dev_in[j], c->nin[j], c->seed, (uint64_t) j,
                                 b->lo, b->hi, (int) c->dt, err)
            : ctx->be->upload (ctx->dev, c->dev_in[j], c->raw_in[j], c->nin[j] * c->esz, err);
        if (rc)
            return rc;
    }
    for (int k = 0; k < spec->noutputs; k++) {
        if (spec->inplace)
            continue;
        rc = ctx->be->fill (ctx->dev, c->dev_out[k], AK_POISON_BYTE, c->nout[k] * c->esz, err);
        if (rc)
            return rc;
    }
    ak_launch_t l;
    s_launch_args (c, c->dev_in, c->dev_out, &l);
    ak_launch_cfg_t lc;          /* outlives the launch: l borrows its tensor maps */
    if (ctx->launch) {
        rc = ak_launch_eval (spec, ctx->launch, c->dims, c->dt, ctx->param_names, ctx->params,
                             ctx->nparams, &lc, err);
        if (rc)
            return ak_err_prefix (err, "invalid_config: at %s", c->label);
        ak_launch_apply (&lc, &l);
    }
    rc = ctx->be->launch (ctx->dev, ctx->kernel[c->dt], &l, err);
    if (rc)
        return ak_err_prefix (err, "launch at %s", c->label);
    for (int k = 0; k < spec->noutputs; k++) {
        rc = ctx->be->download (ctx->dev, c->got[k], c->dev_out[k], c->nout[k] * c->esz, err);
        if (rc)
            return rc;
    }
    return 0;
}

/*  The largest finite value of dt (float16 65504, bfloat16 ~3.39e38). */
static double s_dtype_max (ak_dtype_t dt)
{
    switch (dt) {
        case AK_DT_FLOAT16:  return 65504.0;
        case AK_DT_BFLOAT16: return 3.3895313892515355e38;
        default:             return 3.4028234663852886e38;
    }
}

/*  Compares c->got with the reference under tol (scaled by tol_scale).  An
    infinity where the float64 reference is finite fails, unless the
    reference itself is beyond the element type's largest value (then it
    is counted as overflowed: the kernel's dtype cannot hold the answer). */
static void s_cfg_compare (const s_cfg_t *c, double tol_scale, s_cmp_t *r)
{
    const ak_spec_t *spec = c->ctx->spec;
    const ak_tol_t *t = ak_spec_tol (spec, c->dt);
    double atol = t ? t->atol * tol_scale : 0.0, rtol = t ? t->rtol * tol_scale : 0.0;
    memset (r, 0, sizeof *r);
    r->first_out = -1;
    for (int k = 0; k < spec->noutputs; k++) {
        for (size_t i = 0; i < c->nout[k]; i++) {
            double want = c->ref[k][i];
            double got = ak_elem_load (c->dt, c->got[k], i);
            const char *kind = NULL;
            r->n++;
            if (!spec->inplace && s_all_bytes (c->got[k] + i * c->esz, c->esz, AK_POISON_BYTE)) {
                r->unwritten++;
                kind = "unwritten";
            }
            else if (!isfinite (got) && isfinite (want) && fabs (want) > s_dtype_max (c->dt)) {
                /* The true answer is beyond what the element type holds:
                   nothing representable is right.  An infinity of its sign
                   is the expected result; an infinity of the other sign or
                   a NaN comes from an accumulator overflowing on the way
                   (products of near-max 16-bit inputs beyond float32's
                   range, summed in whatever order the kernel chose). */
                r->overflowed++;
            }
            else if (!isfinite (got) && isfinite (want)) {
                r->nonfinite++;
                kind = "non-finite";
            }
            else if (!isfinite (want)) {
                /* The reference itself overflowed: only the same special
                   value matches. */
                bool same = (isnan (want) && isnan (got)) || want == got;
                if (!same) {
                    r->beyond++;
                    kind = "beyond tolerance";
                }
            }
            else {
                double e = fabs (got - want);
                if (e > r->worst)
                    r->worst = e;
                if (!(e <= atol + rtol * fabs (want))) {
                    r->beyond++;
                    kind = "beyond tolerance";
                }
            }
            if (kind && r->first_out < 0) {
                r->first_out = k;
                r->first_i = i;
                r->first_got = got;
                r->first_want = want;
                r->first_kind = kind;
            }
        }
    }
}

/* ---------------------------------------------------------------- stages */

typedef struct {
    ak_gate_report_t *rep;
    ak_gate_result_t *g;
    char  first[384];          /* why the first failing config failed */
    ak_gate_status_t first_status;
    char  notes[256];          /* skipped dtypes and the like */
    uint32_t on_device;        /* configurations judged by the device reference alone */
} s_stage_t;

static void s_stage_begin (s_stage_t *s, ak_gate_report_t *rep, const char *stage)
{
    memset (s, 0, sizeof *s);
    s->rep = rep;
    s->g = &rep->stages[rep->nstages++];
    memset (s->g, 0, sizeof *s->g);
    snprintf (s->g->stage, sizeof s->g->stage, "%s", stage);
}

static void s_note (s_stage_t *s, const char *fmt, ...) __attribute__ ((format (printf, 2, 3)));
static void s_note (s_stage_t *s, const char *fmt, ...)
{
    size_t off = strlen (s->notes);
    if (off >= sizeof s->notes - 1)
        return;
    va_list ap;
    va_start (ap, fmt);
    vsnprintf (s->notes + off, sizeof s->notes - off, fmt, ap);
    va_end (ap);
}

/*  Records one failed configuration; the first one's text is kept. */
static void s_stage_fail (s_stage_t *s, ak_gate_status_t status, const char *fmt, ...)
    __attribute__ ((format (printf, 3, 4)));
static void s_stage_fail (s_stage_t *s, ak_gate_status_t status, const char *fmt, ...)
{
    s->g->failed++;
    /* The first failure explains the stage, except that a crash outranks
       everything: the device is lost and that is what the receipt says. */
    if (s->first[0] && !(status == AK_GATE_CRASH && s->first_status != AK_GATE_CRASH))
        return;
    s->first_status = status;
    va_list ap;
    va_start (ap, fmt);
    vsnprintf (s->first, sizeof s->first, fmt, ap);
    va_end (ap);
}

static void s_stage_worst (s_stage_t *s, const s_cfg_t *c, double worst)
{
    if (worst > s->g->worst_err || !s->g->worst_at[0]) {
        s->g->worst_err = worst;
        snprintf (s->g->worst_at, sizeof s->g->worst_at, "%s", c->label);
    }
}

static void s_stage_end (s_stage_t *s)
{
    if (s->on_device)
        s_note (s, "%s%u configs on device inputs, judged by the device reference", s->notes[0] ? "; " : "",
                s->on_device);
    ak_gate_result_t *g = s->g;
    if (g->configs == 0 && g->failed == 0) {
        g->skipped = true;
        g->passed = false;
        snprintf (g->detail, sizeof g->detail, "SKIPPED (nothing to run)%s%s",
                  s->notes[0] ? "; " : "", s->notes);
        return;
    }
    g->passed = g->failed == 0;
    if (g->passed)
        snprintf (g->detail, sizeof g->detail, "PASS (%u configs, worst_err=%.3g at %s)%s%s",
                  g->configs, g->worst_err, g->worst_at[0] ? g->worst_at : "-",
                  s->notes[0] ? "; " : "", s->notes);
    else {
        snprintf (g->detail, sizeof g->detail, "FAIL (%u/%u failed): %s%s%s",
                  g->failed, g->configs, s->first, s->notes[0] ? "; " : "", s->notes);
        if (s->rep->status == AK_GATE_OK
            || (s->first_status == AK_GATE_CRASH && s->rep->status != AK_GATE_CRASH)) {
            s->rep->status = s->first_status;
            snprintf (s->rep->reason, sizeof s->rep->reason, "%s: %s", g->stage, s->first);
        }
    }
}

/*  Text for one failed comparison. */
static void s_cmp_text (const s_cfg_t *c, const s_cmp_t *r, char *buf, size_t len)
{
    const ak_spec_t *spec = c->ctx->spec;
    const char *out = r->first_out >= 0 ? spec->outputs[r->first_out].name : "?";
    if (r->unwritten)
        snprintf (buf, len, "%zu of %zu output elements never written (poison intact) at %s, first %s[%zu]",
                  r->unwritten, r->n, c->label, out, r->first_i);
    else if (r->nonfinite)
        snprintf (buf, len, "%zu NaN/Inf where the reference is finite at %s, first %s[%zu] = %g (want %.6g)",
                  r->nonfinite, c->label, out, r->first_i, r->first_got, r->first_want);
    else
        snprintf (buf, len, "%zu of %zu elements beyond tolerance at %s, worst |err| %.3g, first %s[%zu] = %.6g (want %.6g)",
                  r->beyond, r->n, c->label, r->worst, out, r->first_i, r->first_got, r->first_want);
}

/*  What a comparison means for a normal (tolerance) stage. */
static ak_gate_status_t s_cmp_status (const s_cmp_t *r)
{
    if (r->unwritten)
        return AK_GATE_WRONG;
    if (r->nonfinite)
        return AK_GATE_NAN;
    if (r->beyond)
        return AK_GATE_WRONG;
    return AK_GATE_OK;
}

/*  Prepares a configuration for a stage; a failure to prepare is an error
    of the spec or the oracle, recorded as status "error" so it is never
    mistaken for a passing candidate.  Returns false when not prepared. */
static bool s_stage_prepare (s_stage_t *s, const ak_gate_ctx_t *ctx, const char *name,
                             const int64_t *dims, ak_dtype_t dt, uint64_t seed, s_xform_t x, s_cfg_t *c)
{
    ak_err_t err = { 0 };
    int rc = s_cfg_prepare (ctx, name, dims, dt, seed, x, c, &err);
    if (rc != 0) {
        s->g->configs++;
        /* A lost device context fails every buffer call after the crash. */
        s_stage_fail (s, rc == AK_ECRASH ? AK_GATE_CRASH : AK_GATE_ERROR, "%s", err.msg);
        return false;
    }
    return true;
}

/*  True once the stage saw the device context die: nothing more can run. */
static bool s_stage_dead (const s_stage_t *s)
{
    return s->first[0] && s->first_status == AK_GATE_CRASH;
}

/*  One configuration through the tolerance check (smoke, sweep, edges,
    recheck).  Returns false when it failed. */
static bool s_check_config (s_stage_t *s, const ak_gate_ctx_t *ctx, const char *name,
                            const int64_t *dims, ak_dtype_t dt, uint64_t seed)
{
    s_cfg_t c;
    if (s_stage_dead (s) || !s_stage_prepare (s, ctx, name, dims, dt, seed, S_X_NONE, &c))
        return false;
    bool ok = false;
    ak_err_t err = { 0 };
    s->g->configs++;
    s->on_device += c.on_device;
    int rc = s_cfg_run (&c, &err);
    if (rc != 0)
        s_stage_fail (s, ak_gate_status_for (rc, &err), "%s", err.msg);
    else {
        s_cmp_t r;
        s_cfg_compare (&c, 1.0, &r);
        s_stage_worst (s, &c, r.worst);
        ak_gate_status_t st = s_cmp_status (&r);
        if (st != AK_GATE_OK) {
            char text[384];
            s_cmp_text (&c, &r, text, sizeof text);
            s_stage_fail (s, st, "%s", text);
        }
        else
            ok = true;
    }
    s_cfg_free (&c);
    return ok;
}

/*  The dtype the single-dtype stages use: the spec's primary dtype when the
    backend supports it, else the first supported one in spec order (noted
    in the detail).  -1 when the backend supports none. */
static int s_gate_dtype (const ak_gate_ctx_t *ctx)
{
    const ak_spec_t *spec = ctx->spec;
    for (int i = 0; i < spec->ndtypes; i++) {
        ak_dtype_t dt = spec->dtypes[i];
        if (ctx->kernel[dt] && (!ctx->be->supports_dtype || ctx->be->supports_dtype (ctx->device, dt)))
            return (int) dt;
    }
    return -1;
}

static bool s_dtype_usable (const ak_gate_ctx_t *ctx, ak_dtype_t dt)
{
    return ctx->kernel[dt] && (!ctx->be->supports_dtype || ctx->be->supports_dtype (ctx->device, dt));
}

static void s_note_primary (s_stage_t *s, const ak_gate_ctx_t *ctx, ak_dtype_t dt)
{
    if (ctx->spec->dtypes[0] != dt)
        s_note (s, "primary dtype %s not supported by backend %s; ran %s",
                ak_dtype_name (ctx->spec->dtypes[0]), ctx->be->name, ak_dtype_name (dt));
}

static void s_stage_smoke (const ak_gate_ctx_t *ctx, ak_dtype_t dt, ak_gate_report_t *rep)
{
    s_stage_t s;
    s_stage_begin (&s, rep, "smoke");
    s_note_primary (&s, ctx, dt);
    const ak_size_t *z = &ctx->spec->sizes[0];
    s_check_config (&s, ctx, z->name, z->dims, dt, ctx->seed);
    s_stage_end (&s);
}

static bool s_same_dims (const ak_spec_t *spec, const int64_t *a, const int64_t *b)
{
    for (int d = 0; d < spec->nkeys; d++)
        if (a[d] != b[d])
            return false;
    return true;
}

/*  True when some workload of the task has these dims and dtype. */
static bool s_is_workload (const ak_gate_ctx_t *ctx, const int64_t *dims, ak_dtype_t dt)
{
    for (size_t w = 0; w < ctx->nworkloads; w++)
        if (ctx->workloads[w].dtype == dt && s_same_dims (ctx->spec, ctx->workloads[w].dims, dims))
            return true;
    return false;
}

/*  Every size x every spec dtype the backend runs (backend-restricted
    sizes only at the task's workloads, see ak_gate_ctx_t.sweep_all_sizes),
    plus the corpus cases not already among them.  Unsupported dtypes are
    named in the detail. */
static void s_stage_sweep (const ak_gate_ctx_t *ctx, ak_dtype_t gate_dt, ak_gate_report_t *rep)
{
    (void) gate_dt;             /* every dtype: same signature as the other stages */
    const ak_spec_t *spec = ctx->spec;
    s_stage_t s;
    s_stage_begin (&s, rep, "shape_sweep");
    char skipped[128] = "";
    size_t restricted = 0;
    for (int i = 0; i < spec->ndtypes; i++) {
        ak_dtype_t dt = spec->dtypes[i];
        if (!s_dtype_usable (ctx, dt)) {
            size_t off = strlen (skipped);
            snprintf (skipped + off, sizeof skipped - off, "%s%s", off ? ", " : "", ak_dtype_name (dt));
            continue;
        }
        for (size_t z = 0; z < spec->nsizes; z++) {
            const ak_size_t *size = &spec->sizes[z];
            if (!ak_size_for_backend (size, ctx->be->name))
                continue;
            if (size->backends && !ctx->sweep_all_sizes && !s_is_workload (ctx, size->dims, dt)) {
                restricted++;
                continue;
            }
            s_check_config (&s, ctx, size->name, size->dims, dt, ctx->seed);
        }
    }
    size_t corpus = 0, corpus_skipped = 0;
    for (size_t w = 0; w < ctx->nworkloads; w++) {
        const ak_workload_t *wl = &ctx->workloads[w];
        bool seen = false;
        for (size_t z = 0; z < spec->nsizes && !seen; z++)
            seen = s_same_dims (spec, spec->sizes[z].dims, wl->dims) && ak_spec_has_dtype (spec, wl->dtype);
        for (size_t v = 0; v < w && !seen; v++)
            seen = s_same_dims (spec, ctx->workloads[v].dims, wl->dims) && ctx->workloads[v].dtype == wl->dtype;
        if (seen)
            continue;
        if (!s_dtype_usable (ctx, wl->dtype)) {
            corpus_skipped++;
            continue;
        }
        corpus++;
        s_check_config (&s, ctx, wl->name, wl->dims, wl->dtype, ctx->seed);
    }
    if (skipped[0])
        s_note (&s, "skipped dtypes %s (backend %s does not support them)", skipped, ctx->be->name);
    if (corpus)
        s_note (&s, "%s%zu corpus cases", skipped[0] ? "; " : "", corpus);
    if (corpus_skipped)
        s_note (&s, "; %zu corpus cases skipped (dtype unsupported)", corpus_skipped);
    if (restricted)
        s_note (&s, "%s%zu large size x dtype pairs not among the workloads not swept",
                skipped[0] || corpus || corpus_skipped ? "; " : "", restricted);
    s_stage_end (&s);
}

/*  Transformed inputs at the stability size; tolerances x10.  Only NaN/Inf
    where the reference is finite (or an unwritten element) fails; values
    beyond the widened tolerance are counted in the detail. */
static void s_stage_stability (const ak_gate_ctx_t *ctx, ak_dtype_t dt, ak_gate_report_t *rep)
{
    const ak_spec_t *spec = ctx->spec;
    s_stage_t s;
    s_stage_begin (&s, rep, "stability");
    s_note_primary (&s, ctx, dt);
    const ak_size_t *z = ak_spec_size (spec, spec->stability_size);
    if (!z)
        z = &spec->sizes[0];
    size_t beyond_total = 0, overflowed_total = 0;
    for (s_xform_t x = S_X_NEAR_MAX; x <= S_X_SAME && !s_stage_dead (&s); x++) {
        s_cfg_t c;
        if (!s_stage_prepare (&s, ctx, z->name, z->dims, dt, ctx->seed, x, &c))
            continue;
        ak_err_t err = { 0 };
        s.g->configs++;
        int rc = s_cfg_run (&c, &err);
        if (rc != 0)
            s_stage_fail (&s, ak_gate_status_for (rc, &err), "%s", err.msg);
        else {
            s_cmp_t r;
            s_cfg_compare (&c, 10.0, &r);
            s_stage_worst (&s, &c, r.worst);
            beyond_total += r.beyond;
            overflowed_total += r.overflowed;
            if (r.unwritten || r.nonfinite) {
                char text[384];
                s_cmp_text (&c, &r, text, sizeof text);
                s_stage_fail (&s, r.unwritten ? AK_GATE_WRONG : AK_GATE_NAN, "%s", text);
            }
        }
        s_cfg_free (&c);
    }
    if (beyond_total)
        s_note (&s, "%s%zu elements beyond 10x tolerance (reported, not failed)",
                s.notes[0] ? "; " : "", beyond_total);
    if (overflowed_total)
        s_note (&s, "%s%zu elements Inf where the answer is beyond %s's range (correct)",
                s.notes[0] ? "; " : "", overflowed_total, ak_dtype_name (dt));
    s_stage_end (&s);
}

/*  Three runs on the same input; runs 2 and 3 must be bitwise equal to 1. */
static void s_stage_determinism (const ak_gate_ctx_t *ctx, ak_dtype_t dt, ak_gate_report_t *rep)
{
    const ak_spec_t *spec = ctx->spec;
    s_stage_t s;
    s_stage_begin (&s, rep, "determinism");
    s_note_primary (&s, ctx, dt);
    const ak_size_t *z = ak_spec_size (spec, spec->stability_size);
    if (!z)
        z = &spec->sizes[0];
    s_cfg_t c;
    uint8_t *first[AK_MAX_BUFS] = { 0 };
    if (!s_stage_prepare (&s, ctx, z->name, z->dims, dt, ctx->seed, S_X_NONE, &c)) {
        s_stage_end (&s);
        return;
    }
    s.g->configs++;
    for (int run = 1; run <= 3; run++) {
        ak_err_t err = { 0 };
        int rc = s_cfg_run (&c, &err);
        if (rc != 0) {
            s_stage_fail (&s, ak_gate_status_for (rc, &err), "run %d: %s", run, err.msg);
            break;
        }
        if (run == 1) {
            s_cmp_t r;
            s_cfg_compare (&c, 1.0, &r);
            s_stage_worst (&s, &c, r.worst);
            for (int k = 0; k < spec->noutputs; k++) {
                first[k] = ak_malloc (c.nout[k] * c.esz);
                memcpy (first[k], c.got[k], c.nout[k] * c.esz);
            }
            continue;
        }
        size_t differ = 0, at = 0;
        int at_out = -1;
        for (int k = 0; k < spec->noutputs; k++)
            for (size_t i = 0; i < c.nout[k]; i++)
                if (memcmp (first[k] + i * c.esz, c.got[k] + i * c.esz, c.esz) != 0) {
                    if (at_out < 0) {
                        at_out = k;
                        at = i;
                    }
                    differ++;
                }
        if (differ) {
            s_stage_fail (&s, AK_GATE_WRONG,
                          "run %d differs bitwise from run 1 in %zu elements at %s, first %s[%zu]: %.9g vs %.9g",
                          run, differ, c.label, spec->outputs[at_out].name, at,
                          ak_elem_load (c.dt, c.got[at_out], at), ak_elem_load (c.dt, first[at_out], at));
            break;
        }
    }
    for (int k = 0; k < AK_MAX_BUFS; k++)
        free (first[k]);
    s_cfg_free (&c);
    s_stage_end (&s);
}

static void s_stage_edges (const ak_gate_ctx_t *ctx, ak_dtype_t dt, ak_gate_report_t *rep)
{
    const ak_spec_t *spec = ctx->spec;
    s_stage_t s;
    s_stage_begin (&s, rep, "edge_cases");
    s_note_primary (&s, ctx, dt);
    for (size_t e = 0; e < spec->nedge; e++)
        if (ak_size_for_backend (&spec->edge_sizes[e], ctx->be->name))
            s_check_config (&s, ctx, spec->edge_sizes[e].name, spec->edge_sizes[e].dims, dt,
                        ctx->seed + 1000 + e);
    s_stage_end (&s);
}

static void s_stage_not_run (ak_gate_report_t *rep, const char *stage, const char *why)
{
    ak_gate_result_t *g = &rep->stages[rep->nstages++];
    memset (g, 0, sizeof *g);
    snprintf (g->stage, sizeof g->stage, "%s", stage);
    g->skipped = true;
    snprintf (g->detail, sizeof g->detail, "not run: %s", why);
}

static int s_check_ctx (const ak_gate_ctx_t *ctx, ak_gate_report_t *rep, ak_err_t *err)
{
    if (!ctx || !rep || !ctx->spec || !ctx->be || !ctx->ref_be || !ctx->ref)
        return ak_err_set (err, AK_EINVAL, "gates: incomplete context");
    if (ctx->spec->nsizes == 0 || ctx->spec->ndtypes == 0)
        return ak_err_set (err, AK_EINVAL, "gates: spec %s has no sizes or dtypes", ctx->spec->name);
    return 0;
}

int ak_gates_run (const ak_gate_ctx_t *ctx, ak_gate_report_t *rep, ak_err_t *err)
{
    int rc = s_check_ctx (ctx, rep, err);
    if (rc)
        return rc;
    memset (rep, 0, sizeof *rep);
    int dt = s_gate_dtype (ctx);
    if (dt < 0) {
        s_stage_t s;
        s_stage_begin (&s, rep, "smoke");
        s.g->configs = 1;
        s_stage_fail (&s, AK_GATE_ERROR, "backend %s supports none of the spec's dtypes (primary %s)",
                      ctx->be->name, ak_dtype_name (ctx->spec->dtypes[0]));
        s_stage_end (&s);
    }
    else
        s_stage_smoke (ctx, (ak_dtype_t) dt, rep);
    if (!rep->stages[0].passed) {
        static const char *rest[] = { "shape_sweep", "stability", "determinism", "edge_cases" };
        for (int i = 0; i < 4; i++)
            s_stage_not_run (rep, rest[i], "smoke failed");
        return 0;
    }
    /* The stages after smoke; a crash (device context lost) ends the gates. */
    static void (*const rest[]) (const ak_gate_ctx_t *, ak_dtype_t, ak_gate_report_t *) = {
        s_stage_sweep, s_stage_stability, s_stage_determinism, s_stage_edges };
    static const char *const names[] = { "shape_sweep", "stability", "determinism", "edge_cases" };
    for (int i = 0; i < 4; i++) {
        if (rep->status == AK_GATE_CRASH)
            s_stage_not_run (rep, names[i], "the device context was lost");
        else
            rest[i] (ctx, (ak_dtype_t) dt, rep);
    }
    return 0;
}

int ak_gates_recheck (const ak_gate_ctx_t *ctx, uint64_t seed, ak_gate_report_t *rep, ak_err_t *err)
{
    int rc = s_check_ctx (ctx, rep, err);
    if (rc)
        return rc;
    if (rep->nstages >= AK_GATE_MAX_STAGES)
        return ak_err_set (err, AK_EINVAL, "gates: report full");
    s_stage_t s;
    s_stage_begin (&s, rep, "recheck");
    size_t skipped = 0;
    for (size_t w = 0; w < ctx->nworkloads; w++) {
        const ak_workload_t *wl = &ctx->workloads[w];
        if (!s_dtype_usable (ctx, wl->dtype)) {
            skipped++;
            continue;
        }
        s_check_config (&s, ctx, wl->name, wl->dims, wl->dtype, seed);
    }
    if (ctx->nworkloads == 0 || skipped == ctx->nworkloads) {
        int dt = s_gate_dtype (ctx);
        if (dt >= 0)
            s_check_config (&s, ctx, ctx->spec->sizes[0].name, ctx->spec->sizes[0].dims,
                            (ak_dtype_t) dt, seed);
    }
    s_note (&s, "fresh inputs, seed %" PRIu64, seed);
    if (skipped)
        s_note (&s, "; %zu workloads skipped (dtype unsupported)", skipped);
    s_stage_end (&s);
    return 0;
}
