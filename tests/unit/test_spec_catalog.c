/*  tests/unit/test_spec_catalog.c: the built-in catalog's specs load, and
    every host kernel of kernels/ built the way the host backend does
    (prelude + source, the system compiler, params as -D defines) matches
    its reference; the planted kernels under kernels/testing fail the way
    their names say. */
#include "manifest.h"
#include "space.h"
#include "support.h"
#include "unit.h"
#include "digest.h"
#include "spec.h"
#include "util.h"
#include "ak_kernel.h"     /* the host kernel ABI: ak_args_t */

#include <dlfcn.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ================================================ the built-in catalog */

static void test_builtin_specs_load (void **state)
{
    (void) state;
    static const struct { const char *name; int nkeys; size_t configs; double tol; } ops[] = {
        { "softmax", 2, 7, 1e-5 }, { "rmsnorm", 2, 9, 1e-4 }, { "matmul", 3, 11, 2e-3 },
    };
    for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++) {
        ak_spec_t *spec = ak_cat_spec (ops[i].name);
        assert_string_equal (spec->name, ops[i].name);
        assert_int_equal (spec->nkeys, ops[i].nkeys);
        assert_int_equal (spec->dtypes[0], AK_DT_FLOAT32);
        assert_true (ak_spec_tol (spec, AK_DT_FLOAT32)->atol == ops[i].tol);
        assert_true (spec->nsizes >= 4);
        assert_true (spec->nedge >= 2);
        assert_non_null (ak_spec_size (spec, spec->stability_size));
        assert_non_null (ak_spec_baseline (spec, "host"));
        assert_non_null (spec->reference.text);
        assert_true (spec->ncandidates >= 1);
        size_t count = 0;
        ak_err_t err;
        assert_int_equal (ak_space_walk (&spec->candidates[0], NULL, NULL, &count, &err), 0);
        assert_int_equal (count, ops[i].configs);
        /* an edge size that is not a multiple of any tile or vector width */
        bool odd = false;
        for (size_t e = 0; e < spec->nedge; e++)
            for (int k = 0; k < spec->nkeys; k++)
                odd |= spec->edge_sizes[e].dims[k] % 4 != 0;
        assert_true (odd);
        ak_spec_destroy (&spec);
    }
}

/* ---------------------------------------------- building and running kernels */

typedef void (kernel_fn) (const void *args);

typedef struct {
    char *dir;          /* scratch for sources and shared objects */
    int   nbuilt;
} builder_t;

/*  Builds source as the host backend does: prelude + source, cc -O2 -fPIC
    -shared -Wall -Werror, params as -D; returns the dlopen handle. */
static void *s_build (builder_t *b, const char *source, const char *defines)
{
    char *prelude = ak_test_src ("kernels/ak_kernel.h");
    char *head = NULL;
    size_t hlen = 0;
    ak_err_t err;
    if (ak_file_read (prelude, 1 << 20, &head, &hlen, &err))
        fail_msg ("%s", err.msg);
    char *name = ak_sprintf ("k%d", b->nbuilt++);
    char *cname = ak_sprintf ("%s.c", name);
    char *text = ak_sprintf ("%s\n%s", head, source);
    char *cpath = ak_test_write (b->dir, cname, text);
    char *so = ak_sprintf ("%s/%s.so", b->dir, name);
    char *cmd = ak_sprintf ("cc -O2 -fPIC -shared -Wall -Werror %s -o %s %s -lm 2>&1",
                            defines ? defines : "", so, cpath);
    char *out = NULL;
    int rc = ak_test_run (cmd, &out);
    if (rc != 0)
        fail_msg ("%s\n%s", cmd, out ? out : "");
    void *handle = dlopen (so, RTLD_NOW | RTLD_LOCAL);
    if (!handle)
        fail_msg ("dlopen %s: %s", so, dlerror ());
    free (out);
    free (cmd);
    free (so);
    free (cpath);
    free (text);
    free (cname);
    free (name);
    free (head);
    free (prelude);
    return handle;
}

typedef struct {
    const ak_spec_t *spec;
    const int64_t   *dims;
    float  *in[AK_MAX_BUFS], *out[AK_MAX_BUFS];
    double *din[AK_MAX_BUFS], *dout[AK_MAX_BUFS];
    int64_t nin[AK_MAX_BUFS], nout[AK_MAX_BUFS];
} io_t;

static void s_io_init (io_t *io, const ak_spec_t *spec, const int64_t *dims, uint64_t seed)
{
    memset (io, 0, sizeof *io);
    io->spec = spec;
    io->dims = dims;
    ak_err_t err;
    for (int i = 0; i < spec->ninputs; i++) {
        assert_int_equal (ak_spec_eval (spec, spec->inputs[i].count, dims, AK_DT_FLOAT32,
                                        &io->nin[i], &err), 0);
        io->in[i] = malloc ((size_t) io->nin[i] * sizeof (float));
        io->din[i] = malloc ((size_t) io->nin[i] * sizeof (double));
        for (int64_t j = 0; j < io->nin[i]; j++) {
            seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
            double u = (double) (seed >> 11) / 9007199254740992.0;
            io->in[i][j] = (float) (spec->inputs[i].lo + u * (spec->inputs[i].hi - spec->inputs[i].lo));
            io->din[i][j] = io->in[i][j];
        }
    }
    for (int i = 0; i < spec->noutputs; i++) {
        assert_int_equal (ak_spec_eval (spec, spec->outputs[i].count, dims, AK_DT_FLOAT32,
                                        &io->nout[i], &err), 0);
        io->out[i] = malloc ((size_t) io->nout[i] * sizeof (float));
        io->dout[i] = malloc ((size_t) io->nout[i] * sizeof (double));
    }
}

static void s_io_free (io_t *io)
{
    for (int i = 0; i < AK_MAX_BUFS; i++) {
        free (io->in[i]);
        free (io->din[i]);
        free (io->out[i]);
        free (io->dout[i]);
    }
}

static void s_call (void *handle, const char *symbol, io_t *io, bool reference)
{
    const ak_spec_t *spec = io->spec;
    ak_args_t args = { .ndims = spec->nkeys, .nin = spec->ninputs, .nout = spec->noutputs };
    memcpy (args.dims, io->dims, sizeof (int64_t) * (size_t) spec->nkeys);
    for (int i = 0; i < spec->ninputs; i++)
        args.in[i] = reference ? (const void *) io->din[i] : (const void *) io->in[i];
    for (int i = 0; i < spec->noutputs; i++) {
        if (reference)
            args.out[i] = io->dout[i];
        else {
            memset (io->out[i], 0xff, (size_t) io->nout[i] * sizeof (float));   /* poison: NaN */
            args.out[i] = io->out[i];
        }
    }
    kernel_fn *fn;
    *(void **) &fn = dlsym (handle, symbol);
    if (!fn)
        fail_msg ("no %s: %s", symbol, dlerror ());
    fn (&args);
}

/*  Number of output elements outside the tolerance (NaN counts). */
static int64_t s_mismatches (const io_t *io, const ak_tol_t *tol)
{
    int64_t bad = 0;
    for (int i = 0; i < io->spec->noutputs; i++)
        for (int64_t j = 0; j < io->nout[i]; j++) {
            double ref = io->dout[i][j], got = io->out[i][j];
            if (!(fabs (got - ref) <= tol->atol + tol->rtol * fabs (ref)))
                bad++;
        }
    return bad;
}

typedef struct {
    builder_t       *b;
    const ak_spec_t *spec;
    void            *ref;
    const char      *text;
    int              checked;
} config_run_t;

static int s_check_config (const ak_candidate_t *cand, const int64_t *values, void *arg)
{
    config_run_t *run = arg;
    char defines[512] = "";
    size_t n = 0;
    for (size_t i = 0; i < cand->nparams; i++)
        n += (size_t) snprintf (defines + n, sizeof defines - n, " -D%s=%lld",
                                cand->params[i].name, (long long) values[i]);
    void *k = s_build (run->b, run->text, defines);
    const ak_spec_t *spec = run->spec;
    const ak_size_t *sizes[] = { &spec->sizes[0], ak_spec_size (spec, spec->stability_size),
                                 &spec->edge_sizes[0], &spec->edge_sizes[1] };
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
        io_t io;
        s_io_init (&io, spec, sizes[s]->dims, 42 + s);
        s_call (run->ref, "ak_reference", &io, true);
        s_call (k, "ak_kernel", &io, false);
        int64_t bad = s_mismatches (&io, ak_spec_tol (spec, AK_DT_FLOAT32));
        if (bad)
            fail_msg ("%s %s%s at %s: %lld outputs out of tolerance", spec->name, cand->name,
                      defines, sizes[s]->name, (long long) bad);
        s_io_free (&io);
    }
    dlclose (k);
    run->checked++;
    return 0;
}

static void test_builtin_kernels_match_reference (void **state)
{
    (void) state;
    builder_t b = { .dir = ak_test_tmpdir ("kernels") };
    const char *ops[] = { "softmax", "rmsnorm", "matmul" };
    for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++) {
        ak_spec_t *spec = ak_cat_spec (ops[i]);
        config_run_t run = { .b = &b, .spec = spec };
        run.ref = s_build (&b, spec->reference.text, "-DAK_REFERENCE");
        assert_string_equal (spec->baselines[0].backend, "host");
        ak_candidate_t base = { .name = "baseline",
                                .source = spec->baselines[0].source };
        run.text = base.source.text;
        s_check_config (&base, NULL, &run);
        for (size_t c = 0; c < spec->ncandidates; c++) {
            size_t count = 0;
            ak_err_t err;
            if (strcmp (spec->candidates[c].backend, "host") != 0)
                continue;          /* cuda kernels: tests/unit/test_cuda_catalog.c */
            run.text = spec->candidates[c].source.text;
            assert_int_equal (ak_space_walk (&spec->candidates[c], s_check_config, &run, &count,
                                             &err), 0);
        }
        dlclose (run.ref);
        ak_spec_destroy (&spec);
    }
    ak_test_rmtree (b.dir);
    free (b.dir);
}

/*  The planted kernels under kernels/testing fail the way their names say
    (crash and hang are only built: running them is the fault tests' job). */
static void test_planted_kernels (void **state)
{
    (void) state;
    builder_t b = { .dir = ak_test_tmpdir ("planted") };
    ak_spec_t *spec = ak_cat_spec ("softmax");
    void *ref = s_build (&b, spec->reference.text, "-DAK_REFERENCE");
    const ak_tol_t *tol = ak_spec_tol (spec, AK_DT_FLOAT32);
    const char *names[] = { "wrong", "nan", "unwritten", "nondeterministic", "crash", "hang" };
    void *handles[6];
    for (int i = 0; i < 6; i++) {
        char *rel = ak_sprintf ("kernels/testing/%s.c", names[i]);
        char *path = ak_test_src (rel);
        char *text = NULL;
        ak_err_t err;
        if (ak_file_read (path, AK_MAX_SOURCE_BYTES, &text, NULL, &err))
            fail_msg ("%s", err.msg);
        handles[i] = s_build (&b, text, "");
        free (text);
        free (path);
        free (rel);
    }
    for (size_t s = 0; s < spec->nsizes; s++) {
        if (!ak_size_for_backend (&spec->sizes[s], "host"))
            continue;               /* GPU-only sizes: host kernels never get them */
        io_t io;
        s_io_init (&io, spec, spec->sizes[s].dims, 7);
        s_call (ref, "ak_reference", &io, true);
        int64_t total = io.nout[0];

        s_call (handles[0], "ak_kernel", &io, false);                  /* wrong */
        assert_true (s_mismatches (&io, tol) > 0);
        for (int64_t j = 0; j < total; j++)
            assert_true (isfinite (io.out[0][j]));

        s_call (handles[1], "ak_kernel", &io, false);                  /* nan */
        int64_t nans = 0;
        for (int64_t j = 0; j < total; j++)
            nans += isnan (io.out[0][j]);
        assert_true (nans > 0 && nans < total);

        s_call (handles[2], "ak_kernel", &io, false);                  /* unwritten */
        assert_true (s_mismatches (&io, tol) > 0);
        assert_true (isnan (io.out[0][total - 1]));                    /* still the poison */
        assert_false (isnan (io.out[0][0]) && spec->sizes[s].dims[0] > 1);

        float first[4];
        for (int run = 0; run < 3; run++) {                            /* nondeterministic */
            s_call (handles[3], "ak_kernel", &io, false);
            assert_int_equal (s_mismatches (&io, tol), 0);
            first[run] = io.out[0][total - 1];
        }
        assert_true (memcmp (&first[0], &first[1], sizeof (float)) != 0
                     || memcmp (&first[1], &first[2], sizeof (float)) != 0);
        s_io_free (&io);
    }
    for (int i = 0; i < 6; i++)
        dlclose (handles[i]);
    dlclose (ref);
    ak_spec_destroy (&spec);
    ak_test_rmtree (b.dir);
    free (b.dir);
}

int main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test (test_builtin_specs_load),
        cmocka_unit_test (test_builtin_kernels_match_reference),
        cmocka_unit_test (test_planted_kernels),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
