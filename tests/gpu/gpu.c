/*  tests/gpu/gpu.c: what the GPU tests share (gpu.h). */
#include "gpu.h"
#include "worker/backends.h"
#include "support.h"

#include <stdio.h>
#include <stdlib.h>

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
