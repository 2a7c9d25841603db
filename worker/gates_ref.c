/*  worker/gates_ref.c: one gate configuration (gates_impl.h): its inputs,
    its float64 reference, the kernel's device buffers and its runs; and
    the reference cache's use.

    A configuration (dims, dtype, seed, input transform) is prepared once:
    inputs generated and rounded to the dtype, the float64 reference run on
    exactly those values (the host oracle; where the spec has a device
    reference it must agree with the oracle, and it alone judges sizes
    beyond the oracle's).  Then the kernel under test runs as often as the
    stage needs; before each run the inputs are uploaded again (in-place
    kernels overwrite them) and the outputs poisoned with 0xFF bytes.

    With a reference cache (ak_gate_ctx_t.refcache), a configuration seen
    before gets its inputs and reference from the cache: no generation, no
    oracle, no device reference.  A configuration computed here goes into
    the cache when it is freed.  The device buffers belong to the run
    (ak_grun_t): each family's buffer j is reused while it is large
    enough. */
#include "gates_impl.h"
#include "clock.h"
#include "data.h"
#include "digest.h"
#include "log.h"
#include "rng.h"
#include "space.h"
#include "util.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

uint64_t ak_gate_secret (void)
{
    static uint64_t key;
    static bool have;
    if (!have) {
        uint8_t b[sizeof key];
        size_t got = 0;
        while (got < sizeof b) {
            ssize_t n = getrandom (b + got, sizeof b - got, 0);
            if (n > 0)
                got += (size_t) n;
            else if (n < 0 && errno != EINTR)
                break;
        }
        if (got < sizeof b) {
            /* No kernel randomness: the clocks and the address space's
               layout, which a kernel cannot see either. */
            uint64_t t = ak_clock_mono_ns () ^ ((uint64_t) (uintptr_t) &key << 17) ^ (uint64_t) getpid ();
            memcpy (b, &t, sizeof t);
            ak_warn ("gates: getrandom failed (%s); the device sums use a weaker key", strerror (errno));
        }
        memcpy (&key, b, sizeof key);
        have = true;
    }
    return key;
}

double ak_gate_ms_since (uint64_t t0_ns)
{
    return (double) (ak_clock_mono_ns () - t0_ns) / 1e6;
}

/* ------------------------------------------------------ input transforms */

static const char *const s_xform_name[] = { "", "near_max", "near_zero", "mixed_scale", "all_zeros", "all_same" };

/*  A transform and what it depends on (ak_input_fill's xform argument). */
typedef struct {
    const ak_spec_t *spec;
    ak_gxform_t      x;
    ak_dtype_t       dt;
    uint64_t         seed;
} s_xform_t;

static double s_xform (void *arg, int j, uint64_t i, double v)
{
    const s_xform_t *a = arg;
    switch (a->x) {
        case AK_GX_NEAR_MAX:  return v * ak_spec_near_max_scale (a->spec, a->dt);
        case AK_GX_NEAR_ZERO: return v * 1e-6;
        case AK_GX_MIXED:     return ak_rng_uniform (a->seed, 0x100u + (uint64_t) j, i) < 0.5 ? v * 1e3 : v * 1e-3;
        case AK_GX_ZEROS:     return 0.0;
        case AK_GX_SAME:      return 0.5;
        default:              return v;
    }
}

/* ------------------------------------------------------- the run's buffers */

void ak_grun_init (ak_grun_t *run, const ak_gate_ctx_t *ctx, ak_gate_cost_t *cost)
{
    memset (run, 0, sizeof *run);
    run->ctx = ctx;
    run->cost = cost;
}

void ak_grun_done (ak_grun_t *run)
{
    uint64_t t0 = ak_clock_mono_ns ();
    for (int f = 0; f < AK_GB_COUNT; f++)
        for (int j = 0; j < AK_MAX_BUFS; j++)
            if (run->buf[f][j].base)
                run->ctx->be->release (run->ctx->dev, &run->buf[f][j].base);
    memset (run->buf, 0, sizeof run->buf);
    free (run->scratch);
    run->scratch = NULL;
    run->scratch_cap = 0;
    run->cost->alloc_ms += ak_gate_ms_since (t0);
}

/* The kernel's own buffers have guard regions; the device reference's do not. */
static size_t s_guard (int f)
{
    return f == AK_GB_IN || f == AK_GB_OUT ? AK_GUARD_BYTES : 0;
}

/*  Buffer j of family f with room for bytes: the one kept from an earlier
    configuration when large enough, else a new one (the old released). */
static int s_buf (ak_grun_t *run, int f, int j, size_t bytes, void **p, ak_err_t *err)
{
    const ak_gate_ctx_t *ctx = run->ctx;
    if (run->buf[f][j].base && run->buf[f][j].cap >= bytes) {
        run->cost->reused++;
        *p = run->buf[f][j].p;
        return 0;
    }
    uint64_t t0 = ak_clock_mono_ns ();
    if (run->buf[f][j].base)
        ctx->be->release (ctx->dev, &run->buf[f][j].base);
    run->buf[f][j].p = NULL;
    run->buf[f][j].cap = 0;
    const size_t g = s_guard (f);
    if (bytes > SIZE_MAX - 2 * g - 1)
        return ak_err_set (err, AK_ETOOBIG, "buffer of %zu bytes", bytes);
    int rc = ctx->be->alloc (ctx->dev, (bytes ? bytes : 1) + 2 * g, &run->buf[f][j].base, err);
    run->cost->alloc_ms += ak_gate_ms_since (t0);
    if (rc)
        return rc;
    run->cost->allocs++;
    run->buf[f][j].cap = bytes;
    run->buf[f][j].p = (uint8_t *) run->buf[f][j].base + g;
    *p = run->buf[f][j].p;
    return 0;
}

/* ------------------------------------------------------------- guards */

/*  The guard regions around p (bytes long, a guarded buffer): the one
    before and the one right after its end (inside a larger buffer kept
    from an earlier configuration, the bytes past this one's end are out
    of bounds too). */
static int s_guard_fill (const ak_gcfg_t *c, void *p, size_t bytes, ak_err_t *err)
{
    const ak_backend_t *be = c->ctx->be;
    int rc = be->fill (c->ctx->dev, (uint8_t *) p - AK_GUARD_BYTES, AK_GUARD_BYTE, AK_GUARD_BYTES, err);
    if (rc == 0)
        rc = be->fill (c->ctx->dev, (uint8_t *) p + bytes, AK_GUARD_BYTE, AK_GUARD_BYTES, err);
    return rc;
}

/*  The run's read-back buffer with room for bytes (kept, grown as needed:
    every run of every configuration reads its guards and inputs back). */
static uint8_t *s_scratch (ak_grun_t *run, size_t bytes)
{
    if (run->scratch_cap < bytes) {
        free (run->scratch);
        run->scratch = ak_malloc (bytes);
        run->scratch_cap = bytes;
    }
    return run->scratch;
}

/*  AK_EBOUNDS naming the buffer and the changed bytes' offsets from its
    start (negative: before it) when a guard of p changed. */
static int s_guard_check (const ak_gcfg_t *c, const char *role, const char *name, const void *p, size_t bytes,
                          ak_err_t *err)
{
    uint8_t *g = s_scratch (c->run, AK_GUARD_BYTES);
    for (int side = 0; side < 2; side++) {
        const uint8_t *at = side ? (const uint8_t *) p + bytes : (const uint8_t *) p - AK_GUARD_BYTES;
        int rc = c->ctx->be->download (c->ctx->dev, g, at, AK_GUARD_BYTES, err);
        if (rc)
            return ak_err_prefix (err, "reading the guards of %s %s at %s", role, name, c->label);
        if (g[0] == AK_GUARD_BYTE && memcmp (g, g + 1, AK_GUARD_BYTES - 1) == 0)
            continue;                                  /* every byte equals the first: intact */
        size_t lo = SIZE_MAX, hi = 0, n = 0;
        for (size_t i = 0; i < AK_GUARD_BYTES; i++)
            if (g[i] != AK_GUARD_BYTE) {
                lo = lo == SIZE_MAX ? i : lo;
                hi = i;
                n++;
            }
        long long a = side ? (long long) (bytes + lo) : (long long) lo - (long long) AK_GUARD_BYTES;
        long long b = side ? (long long) (bytes + hi) : (long long) hi - (long long) AK_GUARD_BYTES;
        return ak_err_set (err, AK_EBOUNDS, "wrote outside its buffers at %s: %zu byte%s %s %s %s changed "
                           "(offsets %lld .. %lld of a %zu-byte buffer)", c->label, n, n == 1 ? "" : "s",
                           side ? "past the end of" : "before the start of", role, name, a, b, bytes);
    }
    return 0;
}

/*  After a launch: every guard intact, and (where the host holds them)
    the inputs the kernel must not write as they were uploaded. */
static int s_bounds_check (const ak_gcfg_t *c, ak_err_t *err)
{
    const ak_spec_t *spec = c->ctx->spec;
    int rc = 0;
    for (int j = 0; j < spec->ninputs && rc == 0; j++)
        rc = s_guard_check (c, "input", spec->inputs[j].name, c->dev_in[j], c->nin[j] * c->esz, err);
    for (int k = 0; k < spec->noutputs && rc == 0 && !spec->inplace; k++)
        rc = s_guard_check (c, "output", spec->outputs[k].name, c->dev_out[k], c->nout[k] * c->esz, err);
    for (int j = 0; j < spec->ninputs && rc == 0 && !c->on_device; j++) {
        if (spec->inplace && j < spec->noutputs)
            continue;                                  /* also an output */
        const size_t bytes = c->nin[j] * c->esz;
        uint8_t *now = s_scratch (c->run, bytes ? bytes : 1);
        rc = c->ctx->be->download (c->ctx->dev, now, c->dev_in[j], bytes, err);
        if (rc)
            ak_err_prefix (err, "reading input %s back at %s", spec->inputs[j].name, c->label);
        else if (bytes && memcmp (now, c->raw_in[j], bytes) != 0) {
            size_t i = 0;
            while (now[i] == c->raw_in[j][i])
                i++;
            rc = ak_err_set (err, AK_EBOUNDS, "wrote outside its buffers at %s: input %s changed (first at "
                             "element %zu)", c->label, spec->inputs[j].name, i / c->esz);
        }
    }
    return rc;
}

/* ------------------------------------------------------------- launches */

static void s_launch_args (const ak_gcfg_t *c, void *const *in, void *const *out, ak_launch_t *l)
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

/* ---------------------------------------------------------- host oracle */

/*  Runs the float64 reference on the host backend over the rounded inputs
    in `vals` into c->own.ref.  AK_EINTERNAL when the reference leaves an
    element unwritten (a broken oracle must not pass anything). */
static int s_oracle (ak_gcfg_t *c, double *const *vals, ak_err_t *err)
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
        c->own.ref[k] = ak_malloc (c->nout[k] * sizeof (double));
        c->own.nref[k] = c->nout[k];
        rc = be->download (ctx->ref_dev, c->own.ref[k], out[k], c->nout[k] * sizeof (double), err);
        if (rc)
            goto done;
        for (size_t i = 0; i < c->nout[k]; i++) {
            if (!spec->inplace && ak_gate_all_bytes ((const uint8_t *) &c->own.ref[k][i], sizeof (double), AK_POISON_BYTE)) {
                rc = ak_err_set (err, AK_EINTERNAL, "reference left %s[%zu] unwritten at %s",
                                 spec->outputs[k].name, i, c->label);
                goto done;
            }
            if (!isfinite (c->own.ref[k][i]))
                c->own.ref_nonfinite++;
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
    (din), into out[k]: buffers the caller gives, or (NULL) the run's
    (poisoned first; din[k] for in-place specs).  Its launch rule or launch failing is an error of
    the spec, reported as such. */
static int s_dref_launch (const ak_gcfg_t *c, void *const *din, void **out, ak_err_t *err)
{
    const ak_gate_ctx_t *ctx = c->ctx;
    const ak_spec_t *spec = ctx->spec;
    const ak_backend_t *be = ctx->be;
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
        if (!out[k] && (rc = s_buf (c->run, AK_GB_DOUT, k, c->nout[k] * sizeof (double), &out[k], err)) != 0)
            return rc;
        rc = be->fill (ctx->dev, out[k], AK_POISON_BYTE, c->nout[k] * sizeof (double), err);
        if (rc)
            return rc;
    }
    s_launch_args (c, din, out, &l);
    l.dtype = AK_DT_FLOAT32;
    l.params = NULL;
    l.param_names = NULL;
    l.nparams = 0;
    ak_launch_apply (&lc, &l);
    rc = be->launch (ctx->dev, ctx->dref, &l, err);
    if (rc)
        return ak_err_prefix (err, "device reference at %s", c->label);
    return 0;
}

/*  The device reference's outputs read back into outs[k] (host doubles,
    malloc'ed: the caller frees them).  AK_EINTERNAL when it leaves an
    element unwritten. */
static int s_dref_run (const ak_gcfg_t *c, void *const *din, double **outs, ak_err_t *err)
{
    const ak_gate_ctx_t *ctx = c->ctx;
    const ak_spec_t *spec = ctx->spec;
    const ak_backend_t *be = ctx->be;
    void *out[AK_MAX_BUFS] = { 0 };
    int rc = s_dref_launch (c, din, out, err);
    if (rc)
        return rc;
    for (int k = 0; k < spec->noutputs; k++) {
        outs[k] = ak_malloc (c->nout[k] * sizeof (double));
        rc = be->download (ctx->dev, outs[k], out[k], c->nout[k] * sizeof (double), err);
        if (rc)
            return rc;
        for (size_t i = 0; i < c->nout[k] && !spec->inplace; i++)
            if (ak_gate_all_bytes ((const uint8_t *) &outs[k][i], sizeof (double), AK_POISON_BYTE))
                return ak_err_set (err, AK_EINTERNAL, "device reference left %s[%zu] unwritten at %s",
                                   spec->outputs[k].name, i, c->label);
    }
    return 0;
}

/*  The device reference over the host's inputs (vals), checked against
    the host oracle's outputs already in c->own.ref.  AK_EINTERNAL naming
    the first element that disagrees: the device reference is wrong (or
    the oracle), not the candidate. */
static int s_dref_check (ak_gcfg_t *c, double *const *vals, ak_err_t *err)
{
    const ak_gate_ctx_t *ctx = c->ctx;
    const ak_spec_t *spec = ctx->spec;
    void *din[AK_MAX_BUFS] = { 0 };
    double *got[AK_MAX_BUFS] = { 0 };
    int rc = 0;
    for (int j = 0; j < spec->ninputs && rc == 0; j++) {
        rc = s_buf (c->run, AK_GB_DIN, j, c->nin[j] * sizeof (double), &din[j], err);
        if (rc == 0)
            rc = ctx->be->upload (ctx->dev, din[j], vals[j], c->nin[j] * sizeof (double), err);
    }
    if (rc == 0)
        rc = s_dref_run (c, din, got, err);
    for (int k = 0; k < spec->noutputs && rc == 0; k++) {
        const double *ref = c->own.ref[k];
        double scale = 0;
        for (size_t i = 0; i < c->nout[k]; i++)
            if (isfinite (ref[i]) && fabs (ref[i]) > scale)
                scale = fabs (ref[i]);
        for (size_t i = 0; i < c->nout[k]; i++) {
            double h = ref[i], d = got[k][i];
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
    for (int j = 0; j < AK_MAX_BUFS; j++)
        free (got[j]);
    return rc;
}

/*  The device reference's float64 inputs made on the device, in the
    run's buffers din[j]: the values the kernel gets, exactly. */
static int s_dref_inputs (const ak_gcfg_t *c, void **din, ak_err_t *err)
{
    const ak_gate_ctx_t *ctx = c->ctx;
    const ak_spec_t *spec = ctx->spec;
    int rc = 0;
    for (int j = 0; j < spec->ninputs && rc == 0; j++) {
        const ak_buf_t *b = &spec->inputs[j];
        rc = s_buf (c->run, AK_GB_DIN, j, c->nin[j] * sizeof (double), &din[j], err);
        if (rc == 0)
            rc = ctx->be->generate (ctx->dev, ctx->gen, din[j], c->nin[j], c->seed, (uint64_t) j,
                                    b->lo, b->hi, AK_GEN_AS_F64 + (int) c->dt, err);
        if (rc)
            ak_err_prefix (err, "inputs on the device at %s", c->label);
    }
    return rc;
}

/*  Inputs made on the device (float64 copies of the kernel's values for
    the device reference) and the device reference's outputs in
    c->own.ref.  The host never holds the inputs. */
static int s_dref_on_device (ak_gcfg_t *c, ak_err_t *err)
{
    const ak_gate_ctx_t *ctx = c->ctx;
    const ak_spec_t *spec = ctx->spec;
    void *din[AK_MAX_BUFS] = { 0 };
    int rc = s_dref_inputs (c, din, err);
    if (rc == 0)
        rc = s_dref_run (c, din, c->own.ref, err);
    for (int k = 0; k < spec->noutputs && rc == 0; k++) {
        c->own.nref[k] = c->nout[k];
        for (size_t i = 0; i < c->nout[k]; i++)
            if (!isfinite (c->own.ref[k][i]))
                c->own.ref_nonfinite++;
    }
    return rc;
}

/*  Inputs made on the device and the device reference's outputs left
    there (c->dref_out), for a comparison on the device: nothing crosses
    to the host but the counts of a check that the reference wrote every
    element (AK_EINTERNAL naming the first it left) and of its NaN/Inf. */
static int s_dref_keep (ak_gcfg_t *c, ak_err_t *err)
{
    const ak_gate_ctx_t *ctx = c->ctx;
    const ak_spec_t *spec = ctx->spec;
    void *din[AK_MAX_BUFS] = { 0 };
    int rc = s_dref_inputs (c, din, err);
    if (rc == 0)
        rc = s_dref_launch (c, din, c->dref_out, err);
    for (int k = 0; k < spec->noutputs && rc == 0; k++) {
        ak_dcmp_t d;
        rc = ctx->be->compare (ctx->dev, ctx->dcmp, c->dref_out[k], AK_GEN_F64, c->dref_out[k], c->nout[k],
                               0.0, 0.0, 0.0, !spec->inplace, ak_gate_secret (), &d, err);
        if (rc)
            return ak_err_prefix (err, "checking the device reference at %s", c->label);
        if (d.unwritten)
            return ak_err_set (err, AK_EINTERNAL, "device reference left %s[%llu] unwritten at %s (%llu "
                               "elements)", spec->outputs[k].name, (unsigned long long) d.first, c->label,
                               (unsigned long long) d.unwritten);
        c->ref_nonfinite += d.want_nonfinite;
        c->dsum[k] = d.want_sum;
    }
    return rc;
}

bool ak_gate_oracle_fits (const ak_spec_t *spec, const int64_t *dims, ak_dtype_t dt, const size_t *nin,
                          const size_t *nout, uint64_t max_elems, uint64_t max_flops)
{
    const uint64_t me = max_elems ? max_elems : AK_GATE_ORACLE_MAX_ELEMS;
    const uint64_t mf = max_flops ? max_flops : AK_GATE_ORACLE_MAX_FLOPS;
    for (int j = 0; j < spec->ninputs; j++)
        if (nin[j] > me)
            return false;
    for (int k = 0; k < spec->noutputs; k++)
        if (nout[k] > me)
            return false;
    int64_t flops = 0;
    if (spec->flops && spec->flops[0] && ak_spec_eval (spec, spec->flops, dims, dt, &flops, NULL) == 0
        && flops > 0 && (uint64_t) flops > mf)
        return false;
    return true;
}

/*  True when the configuration goes to the device reference alone: there
    is one, inputs are plain, and the configuration is beyond the oracle's
    size or work (ak_gate_oracle_fits). */
static bool s_device_only (const ak_gcfg_t *c, ak_gxform_t x)
{
    const ak_gate_ctx_t *ctx = c->ctx;
    if (!ctx->dref || !ctx->dref_launch || !ctx->gen || !ctx->be->generate || x != AK_GX_NONE)
        return false;
    return !ak_gate_oracle_fits (ctx->spec, c->dims, c->dt, c->nin, c->nout, ctx->oracle_max_elems,
                                 ctx->oracle_max_flops);
}

/* ------------------------------------------------------------- the key */

static void s_hash_str (ak_sha256_t *h, const char *s)
{
    const char *v = s ? s : "";
    ak_sha256_update (h, v, strlen (v) + 1);       /* the NUL separates fields */
}

static void s_hash_u64 (ak_sha256_t *h, uint64_t v)
{
    ak_sha256_update (h, &v, sizeof v);
}

static void s_hash_f64 (ak_sha256_t *h, double v)
{
    ak_sha256_update (h, &v, sizeof v);
}

static void s_hash_rule (ak_sha256_t *h, const ak_launch_rule_t *r)
{
    if (!r) {
        s_hash_str (h, "no rule");
        return;
    }
    s_hash_u64 (h, (uint64_t) r->ngrid);
    for (int i = 0; i < r->ngrid; i++)
        s_hash_str (h, r->grid[i]);
    s_hash_u64 (h, (uint64_t) r->nblock);
    for (int i = 0; i < r->nblock; i++)
        s_hash_str (h, r->block[i]);
    s_hash_str (h, r->shared);
    s_hash_u64 (h, (uint64_t) r->ncluster);
    for (int i = 0; i < r->ncluster; i++)
        s_hash_str (h, r->cluster[i]);
}

/*  Everything that decides a configuration's inputs and reference: which
    reference made the outputs (the host oracle, checked by the device
    reference when there is one, or the device reference alone on device
    inputs) and the digests of both compiled modules (the generator kernel
    is the device reference's module); the spec's name, keys, buffers
    (names, count expressions, element counts, generator bounds) and
    in-place flag; the device reference's launch rule; dims, dtype, seed,
    transform.  The host generator (common/rng.c) is this binary's, the
    same for the process's whole life, as the cache is. */
void ak_gcfg_key (const ak_gcfg_t *c, ak_gxform_t x, uint8_t key[AK_REFCACHE_KEY_LEN])
{
    const ak_gate_ctx_t *ctx = c->ctx;
    const ak_spec_t *spec = ctx->spec;
    bool dref = ctx->dref && ctx->dref_launch;
    ak_sha256_t h;
    ak_sha256_init (&h);
    s_hash_str (&h, "akfleet gate reference v1");
    s_hash_str (&h, c->on_device ? "device reference on device inputs" : dref ? "host oracle, device-checked" : "host oracle");
    s_hash_str (&h, ctx->ref_digest);
    s_hash_str (&h, dref ? ctx->dref_digest : "");
    if (dref)
        s_hash_rule (&h, ctx->dref_launch);
    s_hash_str (&h, spec->name);
    s_hash_u64 (&h, spec->inplace);
    s_hash_u64 (&h, (uint64_t) spec->nkeys);
    for (int d = 0; d < spec->nkeys; d++) {
        s_hash_str (&h, spec->keys[d]);
        s_hash_u64 (&h, (uint64_t) c->dims[d]);
    }
    s_hash_u64 (&h, (uint64_t) c->dt);
    s_hash_u64 (&h, c->seed);
    s_hash_u64 (&h, (uint64_t) x);
    if (x == AK_GX_NEAR_MAX)             /* the spec's near_max_scale changes these inputs */
        s_hash_f64 (&h, ak_spec_near_max_scale (spec, c->dt));
    s_hash_u64 (&h, (uint64_t) spec->ninputs);
    for (int j = 0; j < spec->ninputs; j++) {
        s_hash_str (&h, spec->inputs[j].name);
        s_hash_str (&h, spec->inputs[j].count);
        s_hash_u64 (&h, c->nin[j]);
        s_hash_f64 (&h, spec->inputs[j].lo);
        s_hash_f64 (&h, spec->inputs[j].hi);
    }
    s_hash_u64 (&h, (uint64_t) spec->noutputs);
    for (int k = 0; k < spec->noutputs; k++) {
        s_hash_str (&h, spec->outputs[k].name);
        s_hash_str (&h, spec->outputs[k].count);
        s_hash_u64 (&h, c->nout[k]);
    }
    char hex[AK_DIGEST_HEX_LEN + 1];
    ak_sha256_final_hex (&h, hex);
    for (int i = 0; i < AK_REFCACHE_KEY_LEN; i++) {
        unsigned v = 0;
        sscanf (hex + 2 * i, "%2x", &v);
        key[i] = (uint8_t) v;
    }
}

/*  Whether this configuration may use the cache: there is one, and the
    identity of every reference involved is known. */
static bool s_cacheable (const ak_gcfg_t *c, const ak_refcache_t *cache)
{
    const ak_gate_ctx_t *ctx = c->ctx;
    if (!cache || !ctx->ref_digest || !ctx->ref_digest[0])
        return false;
    if (ctx->dref && ctx->dref_launch && (!ctx->dref_digest || !ctx->dref_digest[0]))
        return false;
    return true;
}

/* -------------------------------------------------------- configuration */

/*  Inputs on the host and the reference, computed (c->own). */
static int s_compute_host (ak_gcfg_t *c, ak_gxform_t x, ak_err_t *err)
{
    const ak_gate_ctx_t *ctx = c->ctx;
    const ak_spec_t *spec = ctx->spec;
    double *vals[AK_MAX_BUFS] = { 0 };
    uint64_t t0 = ak_clock_mono_ns ();
    c->own.nin = spec->ninputs;
    c->own.nout = spec->noutputs;
    for (int j = 0; j < spec->ninputs; j++) {
        vals[j] = ak_malloc (c->nin[j] * sizeof (double));
        c->own.in[j] = ak_malloc (c->nin[j] * c->esz);
        c->own.in_bytes[j] = c->nin[j] * c->esz;
        s_xform_t xa = { spec, x, c->dt, c->seed };
        ak_input_fill (spec, j, c->seed, c->dt, c->nin[j], x == AK_GX_NONE ? NULL : s_xform, &xa, vals[j],
                       c->own.in[j]);
    }
    c->run->cost->inputs_ms += ak_gate_ms_since (t0);
    t0 = ak_clock_mono_ns ();
    int rc = s_oracle (c, vals, err);
    if (rc == 0 && ctx->dref && ctx->dref_launch)
        rc = s_dref_check (c, vals, err);
    c->run->cost->reference_ms += ak_gate_ms_since (t0);
    for (int j = 0; j < AK_MAX_BUFS; j++)
        free (vals[j]);
    return rc;
}

int ak_gcfg_prepare (ak_grun_t *run, const char *name, const int64_t *dims, ak_dtype_t dt,
                     uint64_t seed, ak_gxform_t x, ak_gcfg_t *c, ak_err_t *err)
{
    const ak_gate_ctx_t *ctx = run->ctx;
    const ak_spec_t *spec = ctx->spec;
    int rc = 0;

    memset (c, 0, sizeof *c);
    c->ctx = ctx;
    c->run = run;
    c->dt = dt;
    c->esz = ak_dtype_size (dt);
    c->seed = seed;
    for (int d = 0; d < spec->nkeys; d++)
        c->dims[d] = dims[d];
    snprintf (c->label, sizeof c->label, "%s/%s%s%s", name, ak_dtype_name (dt),
              x ? " " : "", s_xform_name[x]);

    rc = ak_buf_counts (spec, dims, dt, c->nin, c->nout, err);
    if (rc) {
        ak_err_prefix (err, "%s", c->label);
        goto fail;
    }
    c->on_device = s_device_only (c, x);
    c->dcmp = c->on_device && ctx->dcmp && ctx->be->compare;
    if (c->dcmp) {
        /* Judged on the device; the reference's outputs from, or for, the
           device cache (gates.h). */
        uint64_t t0 = ak_clock_mono_ns ();
        bool keyed = !spec->inplace && s_cacheable (c, ctx->drefcache);
        if (keyed) {
            ak_gcfg_key (c, x, c->key);
            c->dhit = ak_refcache_get (ctx->drefcache, c->key);
        }
        if (c->dhit) {
            run->cost->ref_hits++;
            for (int k = 0; k < spec->noutputs; k++) {
                c->dref_out[k] = c->dhit->ref[k];
                c->dsum[k] = c->dhit->dsum[k];
            }
            c->ref_nonfinite = c->dhit->ref_nonfinite;
        }
        else {
            run->cost->ref_misses++;
            c->down.nout = spec->noutputs;
            for (int k = 0; k < spec->noutputs && keyed && rc == 0; k++) {
                void *p = NULL;
                rc = ctx->be->alloc (ctx->dev, c->nout[k] * sizeof (double), &p, err);
                c->down.ref[k] = p;
                c->down.nref[k] = c->nout[k];
                c->dref_out[k] = p;
            }
            if (rc == 0)
                rc = s_dref_keep (c, err);
            c->down.ref_nonfinite = c->ref_nonfinite;
            memcpy (c->down.dsum, c->dsum, sizeof c->dsum);
            c->dcacheable = keyed && rc == 0;
        }
        run->cost->reference_ms += ak_gate_ms_since (t0);
        if (rc)
            goto fail;
    }
    else if (s_cacheable (c, ctx->refcache)) {
        ak_gcfg_key (c, x, c->key);
        c->hit = ak_refcache_get (ctx->refcache, c->key);
        c->cacheable = c->hit == NULL;
    }
    if (c->dcmp)
        ;
    else if (c->hit) {
        run->cost->ref_hits++;
        for (int j = 0; j < AK_MAX_BUFS; j++) {
            c->raw_in[j] = c->hit->in[j];
            c->ref[j] = c->hit->ref[j];
        }
        c->ref_nonfinite = c->hit->ref_nonfinite;
    }
    else {
        run->cost->ref_misses++;
        if (c->on_device) {
            uint64_t t0 = ak_clock_mono_ns ();
            c->own.nin = spec->ninputs;
            c->own.nout = spec->noutputs;
            rc = s_dref_on_device (c, err);
            run->cost->reference_ms += ak_gate_ms_since (t0);
        }
        else
            rc = s_compute_host (c, x, err);
        if (rc)
            goto fail;
        for (int j = 0; j < AK_MAX_BUFS; j++) {
            c->raw_in[j] = c->own.in[j];
            c->ref[j] = c->own.ref[j];
        }
        c->ref_nonfinite = c->own.ref_nonfinite;
    }
    for (int j = 0; j < spec->ninputs; j++) {
        rc = s_buf (run, AK_GB_IN, j, c->nin[j] * c->esz, &c->dev_in[j], err);
        if (rc)
            goto fail;
    }
    for (int k = 0; k < spec->noutputs; k++) {
        if (spec->inplace)
            c->dev_out[k] = c->dev_in[k];
        else {
            rc = s_buf (run, AK_GB_OUT, k, c->nout[k] * c->esz, &c->dev_out[k], err);
            if (rc)
                goto fail;
        }
        if (!c->dcmp)
            c->got[k] = ak_malloc (c->nout[k] * c->esz);
    }
    return 0;

fail:
    c->cacheable = false;
    c->dcacheable = false;
    ak_gcfg_free (c);
    return rc;
}

int ak_gcfg_run (ak_gcfg_t *c, ak_err_t *err)
{
    const ak_gate_ctx_t *ctx = c->ctx;
    const ak_spec_t *spec = ctx->spec;
    ak_gate_cost_t *cost = c->run->cost;
    int rc = 0;
    uint64_t t0 = ak_clock_mono_ns ();
    for (int j = 0; j < spec->ninputs; j++) {
        const ak_buf_t *b = &spec->inputs[j];
        rc = c->on_device
            ? ctx->be->generate (ctx->dev, ctx->gen, c->dev_in[j], c->nin[j], c->seed, (uint64_t) j,
                                 b->lo, b->hi, (int) c->dt, err)
            : ctx->be->upload (ctx->dev, c->dev_in[j], c->raw_in[j], c->nin[j] * c->esz, err);
        if (rc)
            goto done;
    }
    for (int j = 0; j < spec->ninputs; j++)
        if ((rc = s_guard_fill (c, c->dev_in[j], c->nin[j] * c->esz, err)) != 0)
            goto done;
    for (int k = 0; k < spec->noutputs; k++) {
        if (spec->inplace)
            continue;
        rc = ctx->be->fill (ctx->dev, c->dev_out[k], AK_POISON_BYTE, c->nout[k] * c->esz, err);
        if (rc == 0)
            rc = s_guard_fill (c, c->dev_out[k], c->nout[k] * c->esz, err);
        if (rc)
            goto done;
    }
    cost->copy_ms += ak_gate_ms_since (t0);
    t0 = ak_clock_mono_ns ();
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
    cost->launch_ms += ak_gate_ms_since (t0);
    if (rc)
        return ak_err_prefix (err, "launch at %s", c->label);
    t0 = ak_clock_mono_ns ();
    for (int k = 0; k < spec->noutputs && (!c->dcmp || c->keep_got); k++) {
        if (!c->got[k])
            c->got[k] = ak_malloc (c->nout[k] * c->esz);
        rc = ctx->be->download (ctx->dev, c->got[k], c->dev_out[k], c->nout[k] * c->esz, err);
        if (rc)
            break;
    }
    if (rc == 0)
        rc = s_bounds_check (c, err);
done:
    cost->copy_ms += ak_gate_ms_since (t0);
    return rc;
}

void ak_gcfg_free (ak_gcfg_t *c)
{
    const ak_gate_ctx_t *ctx = c->ctx;
    if (ctx && c->hit)
        ak_refcache_release (ctx->refcache, c->hit);
    else if (ctx && c->cacheable)
        ak_refcache_put (ctx->refcache, c->key, &c->own);
    ak_refentry_clear (&c->own);
    if (ctx && c->dhit)
        ak_refcache_release (ctx->drefcache, c->dhit);
    else if (ctx && c->dcacheable)
        ak_refcache_put (ctx->drefcache, c->key, &c->down);      /* kept or released there */
    for (int k = 0; ctx && k < AK_MAX_BUFS; k++)
        if (c->down.ref[k]) {
            void *p = c->down.ref[k];
            ctx->be->release (ctx->dev, &p);
        }
    for (int j = 0; j < AK_MAX_BUFS; j++)
        free (c->got[j]);
    memset (c, 0, sizeof *c);
}
