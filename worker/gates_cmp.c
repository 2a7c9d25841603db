/*  worker/gates_cmp.c: a configuration's outputs against its reference
    (gates_impl.h).  Each output element is classified: unwritten (the
    poison bytes intact), non-finite where the reference is finite, beyond
    atol + rtol*|ref|, or fine. */
#include "gates_impl.h"
#include "clock.h"
#include "data.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

bool ak_gate_all_bytes (const uint8_t *p, size_t n, uint8_t byte)
{
    for (size_t i = 0; i < n; i++)
        if (p[i] != byte)
            return false;
    return true;
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

/* What one element is (ak_compare in kernels/ak_kernel_cuda.h classifies
   exactly so on the device). */
typedef enum { S_FINE = 0, S_OVERFLOWED, S_UNWRITTEN, S_NONFINITE, S_BEYOND } s_kind_t;
static const char *const s_kind_text[] = { NULL, NULL, "unwritten", "non-finite", "beyond tolerance" };

/*  One element; *e the error where both values are finite, else -1.  An
    infinity where the float64 reference is finite fails, unless the
    reference itself is beyond the element type's largest value: then it
    is overflowed (counted, not failed: the kernel's dtype cannot hold the
    answer). */
static s_kind_t s_classify (bool poisoned, double got, double want, double atol, double rtol, double dmax,
                            double *e)
{
    *e = -1;
    if (poisoned)
        return S_UNWRITTEN;
    if (!isfinite (got) && isfinite (want) && fabs (want) > dmax)
        /* The true answer is beyond what the element type holds: nothing
           representable is right.  An infinity of its sign is the
           expected result; an infinity of the other sign or a NaN comes
           from an accumulator overflowing on the way (products of
           near-max 16-bit inputs beyond float32's range, summed in
           whatever order the kernel chose). */
        return S_OVERFLOWED;
    if (!isfinite (got) && isfinite (want))
        return S_NONFINITE;
    if (!isfinite (want))
        /* The reference itself overflowed: only the same special value
           matches. */
        return (isnan (want) && isnan (got)) || want == got ? S_FINE : S_BEYOND;
    *e = fabs (got - want);
    return *e <= atol + rtol * fabs (want) ? S_FINE : S_BEYOND;
}

/*  The outputs judged on the device (c->dcmp): counts from the backend's
    compare, then the first failing element's two values read back and
    classified here, for the message. */
static int s_compare_device (const ak_gcfg_t *c, double atol, double rtol, double dmax, ak_gcmp_t *r,
                             ak_err_t *err)
{
    const ak_gate_ctx_t *ctx = c->ctx;
    const ak_spec_t *spec = ctx->spec;
    for (int k = 0; k < spec->noutputs; k++) {
        ak_dcmp_t d;
        int rc = ctx->be->compare (ctx->dev, ctx->dcmp, c->dev_out[k], (int) c->dt, c->dref_out[k], c->nout[k],
                                   atol, rtol, dmax, !spec->inplace, ak_gate_secret (), &d, err);
        if (rc)
            return ak_err_prefix (err, "comparing %s on the device at %s", spec->outputs[k].name, c->label);
        if (d.want_sum != c->dsum[k]) {
            /* The reference changed on the device since it was made: a
               kernel wrote outside its buffers (this one, or an earlier
               one into a cached reference).  Never a verdict on it; the
               cached entry goes. */
            if (c->dhit)
                ak_refcache_forget (ctx->drefcache, c->dhit);
            return ak_err_set (err, AK_EINTERNAL, "the device reference's %s changed on the device at %s "
                               "after it was computed (a kernel wrote outside its buffers); no verdict",
                               spec->outputs[k].name, c->label);
        }
        r->n += c->nout[k];
        r->unwritten += d.unwritten;
        r->overflowed += d.overflowed;
        r->nonfinite += d.nonfinite;
        r->beyond += d.beyond;
        if (d.worst > r->worst)
            r->worst = d.worst;
        if (d.first == UINT64_MAX || r->first_out >= 0)
            continue;
        uint8_t raw[8] = { 0 };
        double want = 0;
        rc = ctx->be->download (ctx->dev, raw, (const uint8_t *) c->dev_out[k] + d.first * c->esz, c->esz, err);
        if (rc == 0)
            rc = ctx->be->download (ctx->dev, &want, (const double *) c->dref_out[k] + d.first, sizeof want, err);
        if (rc)
            return ak_err_prefix (err, "reading %s[%llu] back at %s", spec->outputs[k].name,
                                  (unsigned long long) d.first, c->label);
        double e;
        double got = ak_elem_load (c->dt, raw, 0);
        s_kind_t kind = s_classify (!spec->inplace && ak_gate_all_bytes (raw, c->esz, AK_POISON_BYTE),
                                    got, want, atol, rtol, dmax, &e);
        r->first_out = k;
        r->first_i = (size_t) d.first;
        r->first_got = got;
        r->first_want = want;
        r->first_kind = s_kind_text[kind] ? s_kind_text[kind] : "beyond tolerance";
    }
    return 0;
}

/*  Elements lo..hi-1 of output k into r (zeroed, first_out -1 when none failed). */
static void s_compare_range (const ak_gcfg_t *c, int k, size_t lo, size_t hi, double atol, double rtol,
                             double dmax, ak_gcmp_t *r)
{
    const ak_spec_t *spec = c->ctx->spec;
    for (size_t i = lo; i < hi; i++) {
        double want = c->ref[k][i];
        double got = ak_elem_load (c->dt, c->got[k], i);
        double e;
        s_kind_t kind = s_classify (!spec->inplace && ak_gate_all_bytes (c->got[k] + i * c->esz, c->esz,
                                                                         AK_POISON_BYTE),
                                    got, want, atol, rtol, dmax, &e);
        r->n++;
        if (e > r->worst)
            r->worst = e;
        switch (kind) {
            case S_FINE:       continue;
            case S_OVERFLOWED: r->overflowed++; continue;
            case S_UNWRITTEN:  r->unwritten++; break;
            case S_NONFINITE:  r->nonfinite++; break;
            case S_BEYOND:     r->beyond++; break;
        }
        if (r->first_out < 0) {
            r->first_out = k;
            r->first_i = i;
            r->first_got = got;
            r->first_want = want;
            r->first_kind = s_kind_text[kind];
        }
    }
}

/* An output compared in parts (ak_par_for), each its own partial result. */
typedef struct {
    const ak_gcfg_t *c;
    int              k;
    double           atol, rtol, dmax;
    ak_gcmp_t        part[AK_PAR_MAX];
} s_cmp_par_t;

static void s_compare_part (void *arg, size_t part, size_t lo, size_t hi)
{
    s_cmp_par_t *p = arg;
    ak_gcmp_t *r = &p->part[part];
    memset (r, 0, sizeof *r);
    r->first_out = -1;
    s_compare_range (p->c, p->k, lo, hi, p->atol, p->rtol, p->dmax, r);
}

/*  Output elements of at least this many are compared on several threads
    (ak_par_for): the parts' counts added, the largest error kept, the
    first failing element the first part's that has one, so the result is
    the one element-by-element order gives. */
#define S_CMP_PAR_MIN (1u << 16)

int ak_gcfg_compare (const ak_gcfg_t *c, double tol_scale, ak_gcmp_t *r, ak_err_t *err)
{
    uint64_t t0 = ak_clock_mono_ns ();
    const ak_spec_t *spec = c->ctx->spec;
    const ak_tol_t *t = ak_spec_tol (spec, c->dt);
    double atol = t ? t->atol * tol_scale : 0.0, rtol = t ? t->rtol * tol_scale : 0.0;
    double dmax = s_dtype_max (c->dt);
    int rc = 0;
    memset (r, 0, sizeof *r);
    r->first_out = -1;
    if (c->dcmp)
        rc = s_compare_device (c, atol, rtol, dmax, r, err);
    else
        for (int k = 0; k < spec->noutputs; k++) {
            s_cmp_par_t p = { .c = c, .k = k, .atol = atol, .rtol = rtol, .dmax = dmax };
            size_t parts = ak_par_for (c->nout[k], S_CMP_PAR_MIN, s_compare_part, &p);
            for (size_t t = 0; t < parts; t++) {
                const ak_gcmp_t *q = &p.part[t];
                r->n += q->n;
                r->unwritten += q->unwritten;
                r->nonfinite += q->nonfinite;
                r->beyond += q->beyond;
                r->overflowed += q->overflowed;
                if (q->worst > r->worst)
                    r->worst = q->worst;
                if (r->first_out < 0 && q->first_out >= 0) {
                    r->first_out = q->first_out;
                    r->first_i = q->first_i;
                    r->first_got = q->first_got;
                    r->first_want = q->first_want;
                    r->first_kind = q->first_kind;
                }
            }
        }
    if (c->run)
        c->run->cost->compare_ms += ak_gate_ms_since (t0);
    return rc;
}

void ak_gcmp_text (const ak_gcfg_t *c, const ak_gcmp_t *r, char *buf, size_t len)
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

ak_gate_status_t ak_gcmp_status (const ak_gcmp_t *r)
{
    if (r->unwritten)
        return AK_GATE_WRONG;
    if (r->nonfinite)
        return AK_GATE_NAN;
    if (r->beyond)
        return AK_GATE_WRONG;
    return AK_GATE_OK;
}
