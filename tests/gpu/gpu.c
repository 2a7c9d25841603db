/*  tests/gpu/gpu.c: what the GPU tests share (gpu.h). */
#include "gpu.h"
#include "spec_cuda.h"
#include "worker/backends.h"
#include "support.h"
#include "util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int ak_gpu_fixture_open (ak_gpu_fixture_t *f, const char *tag)
{
    ak_err_t err = { 0 };
    char why[1100];
    f->be = ak_backend_find ("cuda");
    f->host = ak_backend_host ();
    ak_test_verdict_t v = ak_test_need_cuda (true, &f->devs, &f->ndevs, why, sizeof why);
    if (v == AK_TEST_FAIL)
        return -1;
    if (v == AK_TEST_SKIP) {
        f->skip = true;
        return 0;
    }
    f->cache = ak_test_tmpdir (tag);
    if (f->be->open (f->devs[0], &f->dev, &err) != 0 || f->host->open (NULL, &f->host_dev, &err) != 0) {
        fprintf (stderr, "open: %s\n", err.msg);
        return -1;
    }
    return 0;
}

void ak_gpu_fixture_close (ak_gpu_fixture_t *f)
{
    if (f->dev)
        f->be->close (&f->dev);
    if (f->host_dev)
        f->host->close (&f->host_dev);
    for (size_t i = 0; i < f->ndevs; i++)
        ak__device__free_unpacked (f->devs[i], NULL);
    free (f->devs);
    f->devs = NULL;
    f->ndevs = 0;
    if (f->cache) {
        ak_test_rmtree (f->cache);
        free (f->cache);
        f->cache = NULL;
    }
}

bool ak_gpu_fixture_needs (const ak_gpu_fixture_t *f, bool ok, const char *what)
{
    if (!ok)
        printf ("SKIP: needs %s; device 0 is sm_%u%u\n", what, f->devs[0]->cc_major, f->devs[0]->cc_minor);
    return ok;
}

/*  req (its cache, timeout and device filled here) compiled with be and
    symbol loaded from the artifact into dev; what names it in a failure. */
static ak_kernel_t *s_compile_load (ak_gpu_fixture_t *f, const ak_backend_t *be, ak_dev_t *dev,
                                    ak_compile_req_t *req, const char *symbol, const char *what)
{
    ak_compile_out_t out = { 0 };
    ak_err_t err = { 0 };
    req->cache_dir = f->cache;
    req->timeout_ms = 120000;
    req->device = be == f->be ? f->devs[0] : NULL;
    if (be->compile (req, &out, &err) != 0)
        fail_msg ("compile %s (%s, %s): %s\n%.2000s", what, be->name, ak_dtype_name (req->dtype), err.msg,
                  out.log ? out.log : "");
    ak_kernel_t *k = NULL;
    if (be->load (dev, out.artifact_path, symbol, &k, &err) != 0)
        fail_msg ("load %s of %s: %s", symbol, what, err.msg);
    free (out.artifact_path);
    free (out.log);
    return k;
}

ak_kernel_t *ak_gpu_build (ak_gpu_fixture_t *f, const ak_backend_t *be, ak_dev_t *dev, const char *source,
                           bool reference, ak_dtype_t dt, const char *symbol)
{
    ak_compile_req_t req;
    memset (&req, 0, sizeof req);
    req.source = source;
    req.source_len = strlen (source);
    req.reference = reference;
    req.dtype = dt;
    /* a library baseline's marker (matmul's and fused_mlp's cuBLASLt) */
    req.library = strncmp (source, AK_LIBRARY_MARKER, strlen (AK_LIBRARY_MARKER)) == 0;
    return s_compile_load (f, be, dev, &req, symbol, "a source");
}

ak_kernel_t *ak_gpu_load_testing (ak_gpu_fixture_t *f, const char *name, const char *arch, ak_dtype_t dt,
                                  const char *const *names, const int64_t *values, int n)
{
    char *text = ak_test_testing_kernel (name);
    char *what = ak_sprintf ("%s.cu", name);
    ak_compile_req_t req;
    memset (&req, 0, sizeof req);
    req.source = text;
    req.source_len = strlen (text);
    req.dtype = dt;
    req.arch = arch;
    for (int i = 0; i < n; i++) {
        req.define_names[i] = names[i];
        req.define_values[i] = values[i];
    }
    req.ndefines = n;
    ak_kernel_t *k = s_compile_load (f, f->be, f->dev, &req, "ak_kernel", what);
    free (what);
    free (text);
    return k;
}
