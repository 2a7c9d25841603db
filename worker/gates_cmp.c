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

/*  An infinity where the float64 reference is finite fails, unless the
    reference itself is beyond the element type's largest value (then it
    is counted as overflowed: the kernel's dtype cannot hold the answer). */
void ak_gcfg_compare (const ak_gcfg_t *c, double tol_scale, ak_gcmp_t *r)
{
    uint64_t t0 = ak_clock_mono_ns ();
    const ak_spec_t *spec = c->ctx->spec;
    const ak_tol_t *t = ak_spec_tol (spec, c->dt);
    double atol = t ? t->atol * tol_scale : 0.0, rtol = t ? t->rtol * tol_scale : 0.0;
    double dmax = s_dtype_max (c->dt);
    memset (r, 0, sizeof *r);
    r->first_out = -1;
    for (int k = 0; k < spec->noutputs; k++) {
        for (size_t i = 0; i < c->nout[k]; i++) {
            double want = c->ref[k][i];
            double got = ak_elem_load (c->dt, c->got[k], i);
            const char *kind = NULL;
            r->n++;
            if (!spec->inplace && ak_gate_all_bytes (c->got[k] + i * c->esz, c->esz, AK_POISON_BYTE)) {
                r->unwritten++;
                kind = "unwritten";
            }
            else if (!isfinite (got) && isfinite (want) && fabs (want) > dmax) {
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
    if (c->run)
        c->run->cost->compare_ms += ak_gate_ms_since (t0);
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
