/*  tests/unit/unit_emu.c: running a kernel through the CPU emulation of
    tests/unit/cuda_emu (test_cuda_ref_emu, test_cuda_cand_emu): the job
    file, the run, and the comparison of the device side's outputs with the
    host oracle's (unit.h). */
#include "support.h"
#include "unit.h"
#include "worker/backend_cuda.h"
#include "worker/data.h"
#include "clock.h"
#include "util.h"

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/*  The emulation's system headers (tests/unit/cuda_emu/emu_sys.h, with
    CUDA's half types emu_sys_cuda.h) precompiled once a process and mode
    into a directory of its own (removed at exit), and given to each build
    as -include: the build then skips half its work.  NULL where g++ could
    not make one (the builds then parse the headers as before); a
    precompiled header g++ finds unfit is ignored by g++ itself. */
static char *s_pch_dir, *s_pch[2];
static bool s_pch_tried[2];

static void s_pch_cleanup (void)
{
    if (s_pch_dir)
        ak_test_rmtree (s_pch_dir);
}

static const char *s_pch_header (bool cand, const char *edir)
{
    if (s_pch_tried[cand])
        return s_pch[cand];
    s_pch_tried[cand] = true;
    const char *inc = cand ? ak_cuda_include_dir () : NULL;
    if (cand && !inc)
        return NULL;
    if (!s_pch_dir) {
        s_pch_dir = ak_test_tmpdir ("emupch");
        atexit (s_pch_cleanup);
    }
    const char *name = cand ? "emu_sys_cuda.h" : "emu_sys.h";
    char *out = NULL;
    char *h = ak_sprintf ("%s/%s", s_pch_dir, name);
    int rc = ak_test_runf (&out, "cp '%s/emu_sys.h' '%s/emu_sys_cuda.h' '%s/' && g++ -O1 -U_FORTIFY_SOURCE -std=c++17 "
                           "-Wall -Wno-unknown-pragmas %s%s%s -x c++-header '%s' -o '%s.gch' 2>&1", edir, edir,
                           s_pch_dir, inc ? "-I'" : "", inc ? inc : "", inc ? "'" : "", h, h);
    free (out);
    if (rc != 0) {
        free (h);
        return NULL;
    }
    s_pch[cand] = h;
    return h;
}

char *ak_unit_emu_build (const ak_spec_t *spec, const char *dir, const char *macro, const char *file,
                         const char *text, const char *flags)
{
    char *ref_c = ak_test_write (dir, "ref.c", spec->reference.text);
    char *cu = ak_test_write (dir, file, text);
    char *kdir = ak_test_src ("kernels"), *edir = ak_test_src ("tests/unit/cuda_emu");
    char *exe = ak_sprintf ("%s/emu", dir);
    char *out = NULL;
    int rc = ak_test_runf (&out, "gcc -c -x c -O1 -DAK_REFERENCE -include '%s/ak_kernel.h' "
                           "-Dak_reference=ak_host_reference '%s' -o '%s/host.o' 2>&1", kdir, ref_c, dir);
    if (rc != 0)
        fail_msg ("%s: gcc of ref.c: %s", spec->name, out ? out : "");
    free (out);
    out = NULL;
    const char *pch = s_pch_header (strcmp (macro, "AK_EMU_CAND") == 0, edir);
    rc = ak_test_runf (&out, "g++ -O1 -U_FORTIFY_SOURCE -std=c++17 -Wall -Wno-unknown-pragmas %s%s%s -I'%s' -I'%s' %s "
                       "-D%s='\"%s\"' '%s/main.cpp' '%s/host.o' -o '%s' -lm 2>&1",
                       pch ? "-include '" : "", pch ? pch : "", pch ? "'" : "", kdir, edir, flags, macro, cu, edir,
                       dir, exe);
    if (rc != 0)
        fail_msg ("%s: g++ of the emulation (%s): %s", spec->name, file, out ? out : "");
    free (out);
    free (ref_c);
    free (cu);
    free (kdir);
    free (edir);
    return exe;
}

void ak_unit_emu_run (const ak_spec_t *spec, const char *dir, const char *exe, const int64_t *dims,
                      ak_dtype_t dt, uint64_t seed, const ak_launch_cfg_t *cfg, unsigned shrink,
                      const ak_tol_t *tol, ak_emu_cmp_t *r)
{
    char *msg = NULL;
    if (ak_unit_emu_try (spec, dir, exe, dims, dt, seed, cfg, shrink, tol, r, &msg) != 0)
        fail_msg ("%s: the emulation failed: %s", spec->name, msg ? msg : "");
}

int ak_unit_emu_try (const ak_spec_t *spec, const char *dir, const char *exe, const int64_t *dims,
                     ak_dtype_t dt, uint64_t seed, const ak_launch_cfg_t *cfg, unsigned shrink,
                     const ak_tol_t *tol, ak_emu_cmp_t *r, char **msg)
{
    ak_err_t err = { 0 };
    size_t nin[AK_MAX_BUFS] = { 0 }, nout[AK_MAX_BUFS] = { 0 }, total = 0;
    assert_int_equal (ak_buf_counts (spec, dims, dt, nin, nout, &err), 0);
    char *job = ak_sprintf ("%s/job", dir), *res = ak_sprintf ("%s/out", dir);
    FILE *f = fopen (job, "wb");
    assert_non_null (f);
    int64_t h[10];
    int64_t ndims = spec->nkeys, ni = spec->ninputs, no = spec->noutputs;
    fwrite (&ndims, 8, 1, f);
    for (int i = 0; i < 8; i++)
        h[i] = i < spec->nkeys ? dims[i] : 0;
    fwrite (h, 8, 8, f);
    fwrite (&ni, 8, 1, f);
    for (int i = 0; i < 8; i++)
        h[i] = (int64_t) nin[i];
    fwrite (h, 8, 8, f);
    fwrite (&no, 8, 1, f);
    for (int i = 0; i < 8; i++)
        h[i] = (int64_t) nout[i];
    fwrite (h, 8, 8, f);
    for (int i = 0; i < 3; i++)
        h[i] = i == 0 && cfg->grid[0] > 1 ? (int64_t) (cfg->grid[0] / shrink) : (int64_t) cfg->grid[i];
    for (int i = 0; i < 3; i++)
        h[3 + i] = cfg->block[i];
    h[6] = (int64_t) cfg->shared_bytes;
    for (int i = 0; i < 3; i++)
        h[7 + i] = cfg->cluster[i] > 0 ? cfg->cluster[i] : 1;
    fwrite (h, 8, 10, f);
    /* the tensor maps, 20 words each (tests/unit/cuda_emu/main.cpp: the job) */
    int64_t nm = cfg->ntmaps;
    fwrite (&nm, 8, 1, f);
    for (int m = 0; m < cfg->ntmaps; m++) {
        const ak_tmap_cfg_t *t = &cfg->tmaps[m];
        int64_t w[20] = { 0 };
        w[0] = t->absent;
        w[1] = t->output;
        w[2] = t->buf;
        w[3] = t->rank;
        for (int i = 0; i < 5; i++) {
            w[4 + i] = i < (int) t->rank ? (int64_t) t->dims[i] : 1;
            w[13 + i] = i < (int) t->rank ? (int64_t) t->box[i] : 1;
        }
        for (int i = 0; i < 4; i++)
            w[9 + i] = i + 1 < (int) t->rank ? (int64_t) t->strides[i] : 0;
        w[18] = (int64_t) ak_tmap_swizzle_bytes (t->swizzle);
        w[19] = t->oob == AK_TMAP_OOB_NAN;
        fwrite (w, 8, 20, f);
    }
    for (int j = 0; j < spec->ninputs; j++)
        for (size_t i = 0; i < nin[j]; i++) {
            double v = ak_input_value (spec, j, i, seed, dt);
            fwrite (&v, 8, 1, f);
        }
    assert_int_equal (fclose (f), 0);
    char *out = NULL;
    uint64_t t0 = ak_clock_mono_ns ();
    int rc = ak_test_runf (&out, "'%s' '%s' '%s' 2>&1", exe, job, res);
    memset (r, 0, sizeof *r);
    r->worst_out = -1;
    r->seconds = (double) (ak_clock_mono_ns () - t0) * 1e-9;
    if (rc != 0) {
        *msg = out;
        free (job);
        free (res);
        return rc;
    }
    free (out);
    for (int k = 0; k < spec->noutputs; k++)
        total += nout[k];
    double *v = ak_malloc (2 * total * sizeof *v);
    f = fopen (res, "rb");
    assert_non_null (f);
    assert_int_equal (fread (v, sizeof *v, 2 * total, f), 2 * total);
    fclose (f);
    const double *host = v, *dev = v + total;
    for (int k = 0; k < spec->noutputs; host += nout[k], dev += nout[k], k++) {
        double big = 0;
        for (size_t i = 0; i < nout[k]; i++)
            if (isfinite (host[i]) && fabs (host[i]) > big)
                big = fabs (host[i]);
        for (size_t i = 0; i < nout[k]; i++) {
            if (isnan (host[i]) && isnan (dev[i]))
                continue;
            double lim = tol ? tol->atol + tol->rtol * fabs (host[i]) : 1e-9 * (big > 1 ? big : 1);
            double e = fabs (dev[i] - host[i]);
            r->checked++;
            if (!(e <= lim) && !(host[i] == dev[i])) {      /* equal infinities */
                r->bad++;
                if (!(e <= r->worst)) {
                    r->worst = isnan (e) ? INFINITY : e;
                    r->worst_at = i;
                    r->worst_out = k;
                    r->tol = lim;
                }
            } else if (e > r->worst && r->bad == 0) {
                r->worst = e;
                r->tol = lim;
            }
        }
    }
    free (v);
    free (job);
    free (res);
    return 0;
}
