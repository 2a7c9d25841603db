/*  worker/data.c: element types and generated inputs. */
#include "data.h"
#include "rng.h"
#include "space.h"

#include <float.h>
#include <math.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

double ak_elem_max (ak_dtype_t dt)
{
    switch (dt) {
        case AK_DT_FLOAT16:  return 65504.0;
        case AK_DT_BFLOAT16: return 0x1.fep127;
        default:             return FLT_MAX;
    }
}

/*  Rounds v to p significant bits with the smallest normal exponent emin
    (frexp convention), so subnormals keep a fixed quantum.  Scaling by a
    power of two is exact, and nearbyint rounds ties to even. */
static double s_round_bits (double v, int p, int emin)
{
    if (v == 0 || !isfinite (v))
        return v;
    int e = 0;
    frexp (v, &e);
    if (e < emin)
        e = emin;
    double q = ldexp (1.0, e - p);
    return nearbyint (v / q) * q;
}

double ak_elem_round (ak_dtype_t dt, double v)
{
    if (isnan (v))
        return v;
    double max = ak_elem_max (dt);
    double r;
    switch (dt) {
        case AK_DT_FLOAT16:  r = s_round_bits (v, 11, -13); break;
        case AK_DT_BFLOAT16: r = s_round_bits (v, 8, -125); break;
        default:
            if (v > max || v < -max)
                r = v;
            else
                r = (double) (float) v;
            break;
    }
    if (r > max)
        r = max;
    else if (r < -max)
        r = -max;
    return r;
}

static uint16_t s_half_bits (double v)
{
    uint16_t sign = signbit (v) ? 0x8000 : 0;
    double a = fabs (v);
    if (isnan (v))
        return 0x7e00;
    if (isinf (v) || a > 65504.0)
        return sign | 0x7c00;
    if (a == 0)
        return sign;
    int e = 0;
    double m = frexp (a, &e);            /* a = m * 2^e, m in [0.5, 1) */
    int exp = e - 1;                     /* a = 1.f * 2^exp */
    if (exp < -14)                       /* subnormal: quantum 2^-24 */
        return sign | (uint16_t) nearbyint (ldexp (a, 24));
    uint32_t mant = (uint32_t) nearbyint ((m * 2.0 - 1.0) * 1024.0);
    if (mant == 1024) {
        mant = 0;
        exp++;
    }
    if (exp > 15)
        return sign | 0x7c00;
    return sign | (uint16_t) ((exp + 15) << 10) | (uint16_t) mant;
}

static double s_half_value (uint16_t h)
{
    double sign = (h & 0x8000) ? -1.0 : 1.0;
    int exp = (h >> 10) & 0x1f;
    int mant = h & 0x3ff;
    if (exp == 0x1f)
        return mant ? NAN : sign * INFINITY;
    if (exp == 0)
        return sign * ldexp (mant, -24);
    return sign * ldexp (1024 + mant, exp - 25);
}

void ak_elem_store (ak_dtype_t dt, void *base, size_t i, double v)
{
    switch (dt) {
        case AK_DT_FLOAT16: {
            uint16_t h = s_half_bits (v);
            memcpy ((uint8_t *) base + 2 * i, &h, 2);
            break;
        }
        case AK_DT_BFLOAT16: {
            /* v is bfloat16-representable, so the float conversion is exact
               and its top half is the value. */
            float f = (float) v;
            uint32_t bits;
            memcpy (&bits, &f, 4);
            uint16_t b = (uint16_t) (bits >> 16);
            if (isnan (f))
                b = 0x7fc0;
            memcpy ((uint8_t *) base + 2 * i, &b, 2);
            break;
        }
        default: {
            float f = (float) v;
            memcpy ((uint8_t *) base + 4 * i, &f, 4);
            break;
        }
    }
}

double ak_elem_load (ak_dtype_t dt, const void *base, size_t i)
{
    switch (dt) {
        case AK_DT_FLOAT16: {
            uint16_t h;
            memcpy (&h, (const uint8_t *) base + 2 * i, 2);
            return s_half_value (h);
        }
        case AK_DT_BFLOAT16: {
            uint16_t b;
            memcpy (&b, (const uint8_t *) base + 2 * i, 2);
            uint32_t bits = (uint32_t) b << 16;
            float f;
            memcpy (&f, &bits, 4);
            return (double) f;
        }
        default: {
            float f;
            memcpy (&f, (const uint8_t *) base + 4 * i, 4);
            return (double) f;
        }
    }
}

double ak_input_value (const ak_spec_t *spec, int j, uint64_t i, uint64_t seed, ak_dtype_t dt)
{
    const ak_buf_t *b = &spec->inputs[j];
    return ak_elem_round (dt, ak_rng_range (seed, (uint64_t) j, i, b->lo, b->hi));
}

typedef struct {
    const ak_spec_t   *spec;
    int                j;
    uint64_t           seed;
    ak_dtype_t         dt;
    ak_input_xform_fn *xform;
    void              *arg;
    double            *vals;
    void              *raw;
} s_fill_t;

/*  Elements lo..hi-1 of the input (ak_par_for's part). */
static void s_fill (void *arg, size_t part, size_t lo, size_t hi)
{
    const s_fill_t *f = arg;
    const ak_buf_t *b = &f->spec->inputs[f->j];
    (void) part;
    for (size_t i = lo; i < hi; i++) {
        double v = ak_rng_range (f->seed, (uint64_t) f->j, i, b->lo, b->hi);
        if (f->xform)
            v = f->xform (f->arg, f->j, i, v);
        v = ak_elem_round (f->dt, v);
        if (f->vals)
            f->vals[i] = v;
        ak_elem_store (f->dt, f->raw, i, v);
    }
}

static long s_cpus;                     /* online CPUs, read once (sysconf reads /sys) */

static void s_cpus_read (void)
{
    s_cpus = sysconf (_SC_NPROCESSORS_ONLN);
}

typedef struct {
    ak_par_fn *fn;
    void      *arg;
    size_t     part, lo, hi;
} s_par_t;

static void *s_par_main (void *arg)
{
    const s_par_t *p = arg;
    p->fn (p->arg, p->part, p->lo, p->hi);
    return NULL;
}

size_t ak_par_for (size_t n, size_t min, ak_par_fn *fn, void *arg)
{
    size_t nt = min ? n / min : n;
    if (nt > 1) {
        static pthread_once_t once = PTHREAD_ONCE_INIT;
        pthread_once (&once, s_cpus_read);
        if (s_cpus >= 1 && nt > (size_t) s_cpus)
            nt = (size_t) s_cpus;
    }
    nt = nt < 1 ? 1 : nt > AK_PAR_MAX ? AK_PAR_MAX : nt;
    s_par_t part[AK_PAR_MAX];
    pthread_t th[AK_PAR_MAX];
    bool started[AK_PAR_MAX] = { false };
    for (size_t t = 0; t < nt; t++)
        part[t] = (s_par_t) { fn, arg, t, n * t / nt, n * (t + 1) / nt };
    for (size_t t = 1; t < nt; t++)
        started[t] = pthread_create (&th[t], NULL, s_par_main, &part[t]) == 0;
    fn (arg, 0, part[0].lo, part[0].hi);
    for (size_t t = 1; t < nt; t++) {
        if (started[t])
            pthread_join (th[t], NULL);
        else
            fn (arg, t, part[t].lo, part[t].hi);
    }
    return nt;
}

void ak_input_fill (const ak_spec_t *spec, int j, uint64_t seed, ak_dtype_t dt, size_t n,
                    ak_input_xform_fn *xform, void *arg, double *vals, void *raw)
{
    s_fill_t f = { spec, j, seed, dt, xform, arg, vals, raw };
    ak_par_for (n, AK_INPUT_FILL_MIN, s_fill, &f);
}

static int s_count (const ak_spec_t *spec, const ak_buf_t *b, const char *what, int k,
                    const int64_t *dims, ak_dtype_t dt, size_t *n, ak_err_t *err)
{
    int64_t v = 0;
    int rc = ak_spec_eval (spec, b->count, dims, dt, &v, err);
    if (rc)
        return ak_err_prefix (err, "%s[%d] '%s' count", what, k, b->name);
    if (v < 1 || (uint64_t) v > AK_DATA_MAX_ELEMS)
        return ak_err_set (err, AK_EINVAL, "%s[%d] '%s': %lld elements, allowed 1..%llu",
                           what, k, b->name, (long long) v, (unsigned long long) AK_DATA_MAX_ELEMS);
    *n = (size_t) v;
    return 0;
}

int ak_buf_counts (const ak_spec_t *spec, const int64_t *dims, ak_dtype_t dt,
                   size_t nin[AK_MAX_BUFS], size_t nout[AK_MAX_BUFS], ak_err_t *err)
{
    for (int j = 0; j < spec->ninputs; j++) {
        int rc = s_count (spec, &spec->inputs[j], "inputs", j, dims, dt, &nin[j], err);
        if (rc)
            return rc;
    }
    for (int k = 0; k < spec->noutputs; k++) {
        int rc = s_count (spec, &spec->outputs[k], "outputs", k, dims, dt, &nout[k], err);
        if (rc)
            return rc;
    }
    return 0;
}

const char *ak_dims_text (const ak_spec_t *spec, const int64_t *dims, char *buf, size_t len)
{
    size_t off = 0;
    buf[0] = '\0';
    for (int d = 0; d < spec->nkeys && off < len; d++) {
        int n = snprintf (buf + off, len - off, "%s%lld", d ? "x" : "", (long long) dims[d]);
        if (n < 0)
            break;
        off += (size_t) n;
    }
    return buf;
}
