/*  tests/gpu/test_cuda_backend.c: the CUDA backend on a real GPU
    (worker/backend_cuda.c, worker/cuda_api.c, kernels/ak_kernel_cuda.h).

    Where the backend cannot run (no CUDA headers at build time, no driver,
    no GPU, no NVRTC) every test is skipped after one line
    "SKIP: no GPU: <reason>", and the binary exits 77 ("Not Run" in CTest;
    tests/skip.h: any other probe error fails).  The tests share one
    executor-side device and run in order; the crash test is last because
    it leaves the context dead. */
#include "support.h"
#include "worker/backend.h"
#include "worker/backends.h"
#include "worker/backend_cuda.h"
#include "worker/cuda_api.h"
#include "worker/data.h"
#include "rng.h"
#include "util.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *s_axpy =
    "extern \"C\" __global__ void ak_kernel (ak_cuda_args_t a)\n"
    "{\n"
    "    long long n = a.dims[0];\n"
    "    long long i = (long long) blockIdx.x * blockDim.x + threadIdx.x;\n"
    "    if (i < n)\n"
    "        AK_OUT (a, 0)[i] = ak_from_acc (ALPHA * ak_to_acc (AK_IN (a, 0)[i]) + ak_to_acc (AK_IN (a, 1)[i]));\n"
    "}\n";

/* Writes through out[0], which the test passes as NULL. */
static const char *s_null_writer =
    "extern \"C\" __global__ void ak_kernel (ak_cuda_args_t a)\n"
    "{\n"
    "    AK_OUT (a, 0)[threadIdx.x] = 1.0f;\n"
    "}\n";

static struct {
    bool skip;
    char why[1100];
    const ak_backend_t *be;
    Ak__Device **devs;
    size_t ndevs;
    char *cache;
    ak_dev_t *dev;
    char *axpy_path;
} S;

static int s_group_setup (void **state)
{
    ak_err_t err = { 0 };
    S.be = ak_backend_find ("cuda");
    ak_test_verdict_t v = ak_test_need_cuda (true, &S.devs, &S.ndevs, S.why, sizeof S.why);
    if (v == AK_TEST_FAIL)
        return -1;          /* a probe error other than "no GPU": every test fails */
    if (v == AK_TEST_SKIP) {
        S.skip = true;
        return 0;
    }
    S.cache = ak_test_tmpdir ("cudagpu");
    if (S.be->open (S.devs[0], &S.dev, &err) != 0) {
        fprintf (stderr, "cuda open: %s\n", err.msg);
        return -1;
    }
    return 0;
}

static int s_group_teardown (void **state)
{
    if (S.be && S.dev)
        S.be->close (&S.dev);
    for (size_t i = 0; i < S.ndevs; i++)
        ak__device__free_unpacked (S.devs[i], NULL);
    free (S.devs);
    if (S.cache) {
        ak_test_rmtree (S.cache);
        free (S.cache);
    }
    free (S.axpy_path);
    return 0;
}

#define S_NEED_GPU() do { if (S.skip) skip (); } while (0)

static void s_req (ak_compile_req_t *req, const char *source)
{
    memset (req, 0, sizeof *req);
    req->source = source;
    req->source_len = strlen (source);
    req->dtype = AK_DT_FLOAT32;
    req->cache_dir = S.cache;
    req->timeout_ms = 60000;
    req->device = S.devs[0];
}

static void s_out_free (ak_compile_out_t *out)
{
    free (out->artifact_path);
    free (out->log);
    memset (out, 0, sizeof *out);
}

/*  Compiles source (ALPHA=2) and returns the artifact path (caller frees). */
static char *s_build (const char *source)
{
    ak_compile_req_t req;
    ak_compile_out_t out = { 0 };
    ak_err_t err = { 0 };
    s_req (&req, source);
    req.define_names[0] = "ALPHA";
    req.define_values[0] = 2;
    req.ndefines = 1;
    int rc = S.be->compile (&req, &out, &err);
    if (rc)
        fail_msg ("compile: %s\n%s", err.msg, out.log ? out.log : "");
    char *path = out.artifact_path;
    out.artifact_path = NULL;
    s_out_free (&out);
    return path;
}

/* ----------------------------------------------------------------- probe */

static void test_probe (void **state)
{
    S_NEED_GPU ();
    assert_true (S.ndevs >= 1);
    for (size_t i = 0; i < S.ndevs; i++) {
        const Ak__Device *d = S.devs[i];
        print_message ("device %u: %s uuid %s cc %u.%u, %u SMs, %.1f GiB, L2 %.1f MiB, clock %u kHz, "
                       "memory clock %u kHz, driver %s, NVRTC %s, CUPTI %s, class '%s', %u slot(s)\n",
                       d->index, d->name, d->uuid, d->cc_major, d->cc_minor, d->sm_count,
                       (double) d->mem_bytes / (1u << 30), (double) d->l2_bytes / (1u << 20), d->clock_khz,
                       d->mem_clock_khz, d->driver_version, d->nvrtc_version, d->cupti_version,
                       d->device_class, d->slots);
        assert_int_equal (d->index, i);
        assert_string_equal (d->backend, "cuda");
        assert_true (strlen (d->name) > 0);
        assert_int_equal (strncmp (d->uuid, "GPU-", 4), 0);
        assert_int_equal (strlen (d->uuid), 40);
        assert_true (d->cc_major >= 7);
        assert_true (d->sm_count > 0);
        assert_true (d->mem_bytes > (1ull << 30));
        assert_true (d->l2_bytes >= (1u << 20));
        assert_true (strlen (d->driver_version) > 0);
        assert_non_null (strchr (d->nvrtc_version, '.'));
        char arch[32];
        snprintf (arch, sizeof arch, "/sm_%u%u/", d->cc_major, d->cc_minor);
        assert_non_null (strstr (d->device_class, arch));
        assert_int_equal (strncmp (d->device_class, d->name, strlen (d->name)), 0);
        assert_non_null (strstr (d->device_class, "/nvrtc"));
        assert_true (strstr (d->device_class, "/drv") || strstr (d->device_class, "/cuda"));
        assert_int_equal (d->slots, 1);
    }
}

/* --------------------------------------------------------------- compile */

static void test_compile (void **state)
{
    S_NEED_GPU ();
    ak_compile_req_t req;
    ak_compile_out_t out = { 0 };
    ak_err_t err = { 0 };
    s_req (&req, s_axpy);
    req.define_names[0] = "ALPHA";
    req.define_values[0] = 2;
    req.ndefines = 1;
    assert_int_equal (S.be->compile (&req, &out, &err), 0);
    assert_false (out.cached);
    print_message ("axpy compiled in %.1f ms\n", out.ms);
    char key[65];
    memcpy (key, out.key, sizeof key);
    S.axpy_path = out.artifact_path;
    out.artifact_path = NULL;
    s_out_free (&out);

    assert_int_equal (S.be->compile (&req, &out, &err), 0);
    assert_true (out.cached);
    assert_string_equal (out.key, key);
    assert_string_equal (out.artifact_path, S.axpy_path);
    s_out_free (&out);

    s_req (&req, "extern \"C\" __global__ void ak_kernel (ak_cuda_args_t a) { int x = ; }\n");
    assert_int_equal (S.be->compile (&req, &out, &err), AK_ECOMPILE);
    assert_non_null (out.log);
    assert_non_null (strstr (out.log, "error"));
    print_message ("broken: %s\n%s", err.msg, out.log);
    s_out_free (&out);
}

/* ------------------------------------------------------------ axpy runs */

static void test_axpy (void **state)
{
    S_NEED_GPU ();
    ak_err_t err = { 0 };
    ak_kernel_t *k = NULL;
    if (!S.axpy_path)
        S.axpy_path = s_build (s_axpy);
    assert_int_equal (S.be->load (S.dev, S.axpy_path, "ak_kernel", &k, &err), 0);
    ak_kernel_t *none = NULL;
    assert_int_equal (S.be->load (S.dev, S.axpy_path, "no_such_kernel", &none, &err), AK_ENOTFOUND);
    print_message ("missing symbol: %s\n", err.msg);

    const size_t n = 100003;                       /* not a multiple of the block */
    float *x = ak_malloc (n * sizeof *x), *y = ak_malloc (n * sizeof *y), *z = ak_malloc (n * sizeof *z);
    for (size_t i = 0; i < n; i++) {
        x[i] = (float) ak_rng_range (1, 0, i, -1, 1);
        y[i] = (float) ak_rng_range (1, 1, i, -1, 1);
    }
    void *dx = NULL, *dy = NULL, *dz = NULL;
    assert_int_equal (S.be->alloc (S.dev, n * 4, &dx, &err), 0);
    assert_int_equal (S.be->alloc (S.dev, n * 4, &dy, &err), 0);
    assert_int_equal (S.be->alloc (S.dev, n * 4, &dz, &err), 0);
    assert_int_equal (S.be->upload (S.dev, dx, x, n * 4, &err), 0);
    assert_int_equal (S.be->upload (S.dev, dy, y, n * 4, &err), 0);

    /* Poison: every byte reads back as written. */
    assert_int_equal (S.be->fill (S.dev, dz, 0xA5, n * 4, &err), 0);
    assert_int_equal (S.be->download (S.dev, z, dz, n * 4, &err), 0);
    for (size_t i = 0; i < n * 4; i++)
        assert_int_equal (((unsigned char *) z)[i], 0xA5);

    ak_launch_t l;
    memset (&l, 0, sizeof l);
    l.ndims = 1;
    l.dims[0] = (int64_t) n;
    l.nin = 2;
    l.in[0] = dx;
    l.in[1] = dy;
    l.nout = 1;
    l.out[0] = dz;
    l.dtype = AK_DT_FLOAT32;

    /* No configuration: refused, nothing launched. */
    assert_int_equal (S.be->launch (S.dev, k, &l, &err), AK_EINVAL);
    assert_non_null (strstr (err.msg, "launch configuration missing"));
    /* Impossible ones: invalid_config. */
    l.grid[0] = l.grid[1] = l.grid[2] = 1;
    l.block[0] = 2048;
    l.block[1] = l.block[2] = 1;
    assert_int_equal (S.be->launch (S.dev, k, &l, &err), AK_EINVAL);
    assert_non_null (strstr (err.msg, "invalid_config"));
    print_message ("%s\n", err.msg);
    l.block[0] = 256;
    l.shared_bytes = 1u << 30;
    assert_int_equal (S.be->launch (S.dev, k, &l, &err), AK_EINVAL);
    assert_non_null (strstr (err.msg, "invalid_config"));
    l.shared_bytes = 0;

    l.grid[0] = (uint32_t) ((n + 255) / 256);
    assert_int_equal (S.be->launch (S.dev, k, &l, &err), 0);
    assert_int_equal (S.be->download (S.dev, z, dz, n * 4, &err), 0);
    for (size_t i = 0; i < n; i++) {
        float want = 2.0f * x[i] + y[i];
        if (memcmp (&z[i], &want, 4) != 0)
            fail_msg ("z[%zu] = %a, want %a", i, (double) z[i], (double) want);
    }
    double us = 0;
    if (ak_cuda_last_kernel_us (S.dev, &us, &err) == 0)
        print_message ("axpy n=%zu: CUPTI %.2f us\n", n, us);

    /* Dynamic shared memory above the 48 KiB default: opted in. */
    l.shared_bytes = 100 * 1024;
    assert_int_equal (S.be->launch (S.dev, k, &l, &err), 0);
    l.shared_bytes = 0;

    S.be->release (S.dev, &dx);
    S.be->release (S.dev, &dy);
    S.be->release (S.dev, &dz);
    assert_null (dx);
    S.be->unload (S.dev, &k);
    assert_null (k);
    free (x);
    free (y);
    free (z);
}

/* ----------------------------------------------------------------- time */

static void test_time (void **state)
{
    S_NEED_GPU ();
    ak_err_t err = { 0 };
    ak_kernel_t *k = NULL;
    if (!S.axpy_path)
        S.axpy_path = s_build (s_axpy);
    assert_int_equal (S.be->load (S.dev, S.axpy_path, "ak_kernel", &k, &err), 0);
    const size_t n = 16u << 20;                    /* 64 MiB per buffer */
    void *dx = NULL, *dy = NULL, *dz = NULL;
    assert_int_equal (S.be->alloc (S.dev, n * 4, &dx, &err), 0);
    assert_int_equal (S.be->alloc (S.dev, n * 4, &dy, &err), 0);
    assert_int_equal (S.be->alloc (S.dev, n * 4, &dz, &err), 0);
    assert_int_equal (S.be->fill (S.dev, dx, 0, n * 4, &err), 0);
    assert_int_equal (S.be->fill (S.dev, dy, 0, n * 4, &err), 0);
    ak_launch_t l;
    memset (&l, 0, sizeof l);
    l.ndims = 1;
    l.dims[0] = (int64_t) n;
    l.nin = 2;
    l.in[0] = dx;
    l.in[1] = dy;
    l.nout = 1;
    l.out[0] = dz;
    l.grid[0] = (uint32_t) (n / 256);
    l.grid[1] = l.grid[2] = 1;
    l.block[0] = 256;
    l.block[1] = l.block[2] = 1;

    const char *why = NULL;
    bool cupti = ak_cuda_cupti_active (S.dev, &why);
    ak_err_t cerr = { 0 };
    bool cupti_lib = ak_cuda_load_cupti (&cerr) == 0;
    if (!cupti)
        print_message ("CUPTI not active: %s\n", why);
    /* CUPTI is optional, but where the library loads it must work. */
    if (cupti_lib && getenv ("AK_CUDA_CUPTI") == NULL)
        assert_true (cupti);

    double min_gap = 1e9;                          /* events - CUPTI, warm samples */
    for (int cold = 1; cold >= 0; cold--) {
        for (int s = 0; s < 5; s++) {
            double us = 0;
            assert_int_equal (S.be->time (S.dev, k, &l, cold, &us, &err), 0);
            assert_true (us > 0);
            double kus = 0;
            if (cupti) {
                if (ak_cuda_last_kernel_us (S.dev, &kus, &err) != 0)
                    fail_msg ("CUPTI: %s", err.msg);
                assert_true (kus > 0);
                /* Events carry the launch latency too: never less. */
                if (kus > us + 1.0)
                    fail_msg ("CUPTI %.2f us > events %.2f us", kus, us);
                ak_cuda_kernel_record_t rec;
                assert_int_equal (ak_cuda_last_kernel (S.dev, &rec, &err), 0);
                assert_int_equal (rec.grid[0], l.grid[0]);
                assert_int_equal (rec.block[0], 256);
                assert_true (rec.registers > 0);
                if (!cold && us - kus < min_gap)
                    min_gap = us - kus;
            }
            print_message ("%s sample %d: events %.2f us, CUPTI %.2f us (%.0f GB/s by CUPTI)\n",
                           cold ? "cold" : "warm", s, us, kus, kus > 0 ? 3.0 * n * 4 / (kus * 1e3) : 0.0);
        }
    }
    /* The events bracket the launch and little else: reading CUPTI between
       samples must not slow the next launch (a forced CUPTI flush did, by
       about 200 us on an H200). */
    if (cupti) {
        print_message ("smallest warm gap events - CUPTI: %.2f us\n", min_gap);
        assert_true (min_gap < 50.0);
    }
    S.be->release (S.dev, &dx);
    S.be->release (S.dev, &dy);
    S.be->release (S.dev, &dz);
    S.be->unload (S.dev, &k);
}

/* ------------------------------------------------------- device Philox */

/*  ak_fill_uniform against common/rng.c and worker/data.c, bit for bit,
    with a seed and a stream that use all 64 bits. */
static void test_philox (void **state)
{
    S_NEED_GPU ();
    ak_err_t err = { 0 };
    if (!S.axpy_path)
        S.axpy_path = s_build (s_axpy);
    ak_kernel_t *fill = NULL;
    assert_int_equal (S.be->load (S.dev, S.axpy_path, "ak_fill_uniform", &fill, &err), 0);
    const size_t n = 4096;
    const uint64_t seeds[] = { 42, 0x9E3779B97F4A7C15ull };
    const uint64_t streams[] = { 0, 0xD1B54A32D192ED03ull };
    void *d = NULL;
    assert_int_equal (S.be->alloc (S.dev, n * 8, &d, &err), 0);
    unsigned char *got = ak_malloc (n * 8), *want = ak_malloc (n * 8);
    for (int si = 0; si < 2; si++) {
        uint64_t seed = seeds[si], stream = streams[si];
        /* [0, 1) as float64: ak_rng_uniform exactly. */
        assert_int_equal (ak_cuda_fill_uniform (S.dev, fill, d, n, seed, stream, 0.0, 1.0,
                                                AK_CUDA_FILL_FLOAT64, &err), 0);
        assert_int_equal (S.be->download (S.dev, got, d, n * 8, &err), 0);
        for (size_t i = 0; i < n; i++) {
            double w = ak_rng_uniform (seed, stream, i);
            if (memcmp (got + 8 * i, &w, 8) != 0) {
                double g;
                memcpy (&g, got + 8 * i, 8);
                fail_msg ("seed %" PRIu64 " stream %" PRIu64 " element %zu: device %a, host %a",
                          seed, stream, i, g, w);
            }
        }
        /* A range, then each element type with the host's rounding. */
        const double lo = -3.0, hi = 70000.0;
        assert_int_equal (ak_cuda_fill_uniform (S.dev, fill, d, n, seed, stream, lo, hi,
                                                AK_CUDA_FILL_FLOAT64, &err), 0);
        assert_int_equal (S.be->download (S.dev, got, d, n * 8, &err), 0);
        for (size_t i = 0; i < n; i++) {
            double w = ak_rng_range (seed, stream, i, lo, hi);
            assert_memory_equal (got + 8 * i, &w, 8);
        }
        ak_dtype_t dts[] = { AK_DT_FLOAT32, AK_DT_FLOAT16, AK_DT_BFLOAT16 };
        for (int t = 0; t < 3; t++) {
            ak_dtype_t dt = dts[t];
            if (!S.be->supports_dtype (S.devs[0], dt)) {
                ak_test_skip_gpu_note ("%s: not supported by this device", ak_dtype_name (dt));
                continue;
            }
            size_t esz = ak_dtype_size (dt);
            assert_int_equal (ak_cuda_fill_uniform (S.dev, fill, d, n, seed, stream, lo, hi, (int) dt, &err), 0);
            assert_int_equal (S.be->download (S.dev, got, d, n * esz, &err), 0);
            for (size_t i = 0; i < n; i++) {
                ak_elem_store (dt, want, i, ak_elem_round (dt, ak_rng_range (seed, stream, i, lo, hi)));
                if (memcmp (got + esz * i, want + esz * i, esz) != 0)
                    fail_msg ("%s element %zu: device %g, host %g", ak_dtype_name (dt), i,
                              ak_elem_load (dt, got, i), ak_elem_load (dt, want, i));
            }
        }
    }
    print_message ("device Philox matches the host for %zu elements x 2 seeds\n", n);
    free (got);
    free (want);
    S.be->release (S.dev, &d);
    S.be->unload (S.dev, &fill);
}

/* ----------------------------------------------- float16 and bfloat16 */

/*  axpy built for each half type: the kernel computes in float and rounds
    once (ak_from_acc), as the host's ak_elem_round does from that float. */
static void test_half_axpy (void **state)
{
    S_NEED_GPU ();
    ak_dtype_t dts[] = { AK_DT_FLOAT16, AK_DT_BFLOAT16 };
    for (int t = 0; t < 2; t++) {
        ak_dtype_t dt = dts[t];
        if (!S.be->supports_dtype (S.devs[0], dt)) {
            ak_test_skip_gpu_note ("%s: not supported by this device", ak_dtype_name (dt));
            continue;
        }
        ak_compile_req_t req;
        ak_compile_out_t out = { 0 };
        ak_err_t err = { 0 };
        s_req (&req, s_axpy);
        req.dtype = dt;
        req.define_names[0] = "ALPHA";
        req.define_values[0] = 2;
        req.ndefines = 1;
        if (S.be->compile (&req, &out, &err) != 0)
            fail_msg ("%s compile: %s\n%s", ak_dtype_name (dt), err.msg, out.log);
        ak_kernel_t *k = NULL;
        assert_int_equal (S.be->load (S.dev, out.artifact_path, "ak_kernel", &k, &err), 0);
        s_out_free (&out);
        const size_t n = 5000;
        size_t esz = ak_dtype_size (dt);
        unsigned char *x = ak_malloc (n * esz), *y = ak_malloc (n * esz), *z = ak_malloc (n * esz);
        unsigned char *want = ak_malloc (n * esz);
        for (size_t i = 0; i < n; i++) {
            double xv = ak_elem_round (dt, ak_rng_range (3, 0, i, -4, 4));
            double yv = ak_elem_round (dt, ak_rng_range (3, 1, i, -4, 4));
            ak_elem_store (dt, x, i, xv);
            ak_elem_store (dt, y, i, yv);
            float f = 2.0f * (float) xv + (float) yv;
            ak_elem_store (dt, want, i, ak_elem_round (dt, (double) f));
        }
        void *dx = NULL, *dy = NULL, *dz = NULL;
        assert_int_equal (S.be->alloc (S.dev, n * esz, &dx, &err), 0);
        assert_int_equal (S.be->alloc (S.dev, n * esz, &dy, &err), 0);
        assert_int_equal (S.be->alloc (S.dev, n * esz, &dz, &err), 0);
        assert_int_equal (S.be->upload (S.dev, dx, x, n * esz, &err), 0);
        assert_int_equal (S.be->upload (S.dev, dy, y, n * esz, &err), 0);
        assert_int_equal (S.be->fill (S.dev, dz, 0xFF, n * esz, &err), 0);
        ak_launch_t l;
        memset (&l, 0, sizeof l);
        l.ndims = 1;
        l.dims[0] = (int64_t) n;
        l.nin = 2;
        l.in[0] = dx;
        l.in[1] = dy;
        l.nout = 1;
        l.out[0] = dz;
        l.dtype = dt;
        l.grid[0] = (uint32_t) ((n + 127) / 128);
        l.grid[1] = l.grid[2] = 1;
        l.block[0] = 128;
        l.block[1] = l.block[2] = 1;
        assert_int_equal (S.be->launch (S.dev, k, &l, &err), 0);
        assert_int_equal (S.be->download (S.dev, z, dz, n * esz, &err), 0);
        for (size_t i = 0; i < n; i++)
            if (memcmp (z + i * esz, want + i * esz, esz) != 0)
                fail_msg ("%s z[%zu] = %g, want %g", ak_dtype_name (dt), i, ak_elem_load (dt, z, i),
                          ak_elem_load (dt, want, i));
        print_message ("%s axpy: %zu elements exact\n", ak_dtype_name (dt), n);
        S.be->release (S.dev, &dx);
        S.be->release (S.dev, &dy);
        S.be->release (S.dev, &dz);
        S.be->unload (S.dev, &k);
        free (x);
        free (y);
        free (z);
        free (want);
    }
}

/* ---------------------------------------------------------------- reopen */

/*  Close and open again in one process (CUPTI off and on again): launches
    and their CUPTI records still work. */
static void test_reopen (void **state)
{
    S_NEED_GPU ();
    ak_err_t err = { 0 };
    S.be->close (&S.dev);
    assert_null (S.dev);
    assert_int_equal (S.be->open (S.devs[0], &S.dev, &err), 0);
    if (!S.axpy_path)
        S.axpy_path = s_build (s_axpy);
    ak_kernel_t *fill = NULL;
    assert_int_equal (S.be->load (S.dev, S.axpy_path, "ak_fill_uniform", &fill, &err), 0);
    void *d = NULL;
    assert_int_equal (S.be->alloc (S.dev, 1u << 20, &d, &err), 0);
    assert_int_equal (ak_cuda_fill_uniform (S.dev, fill, d, (1u << 20) / 8, 5, 6, 0, 1,
                                            AK_CUDA_FILL_FLOAT64, &err), 0);
    double first = 0, want = ak_rng_uniform (5, 6, 0);
    assert_int_equal (S.be->download (S.dev, &first, d, 8, &err), 0);
    assert_memory_equal (&first, &want, 8);
    double us = 0;
    if (ak_cuda_cupti_active (S.dev, NULL)) {
        if (ak_cuda_last_kernel_us (S.dev, &us, &err) != 0)
            fail_msg ("CUPTI after reopen: %s", err.msg);
        assert_true (us > 0);
    }
    print_message ("after reopen: fill of 1 MiB, CUPTI %.2f us\n", us);
    S.be->release (S.dev, &d);
    S.be->unload (S.dev, &fill);
}

/* ---------------------------------------------------------------- crash */

/*  Last: a write through NULL is CUDA_ERROR_ILLEGAL_ADDRESS, AK_ECRASH, and
    the context is dead for every later call. */
static void test_zz_crash (void **state)
{
    S_NEED_GPU ();
    ak_err_t err = { 0 };
    char *path = s_build (s_null_writer);
    ak_kernel_t *k = NULL;
    assert_int_equal (S.be->load (S.dev, path, "ak_kernel", &k, &err), 0);
    ak_launch_t l;
    memset (&l, 0, sizeof l);
    l.nout = 1;
    l.out[0] = NULL;
    l.grid[0] = l.grid[1] = l.grid[2] = 1;
    l.block[0] = 32;
    l.block[1] = l.block[2] = 1;
    assert_int_equal (S.be->launch (S.dev, k, &l, &err), AK_ECRASH);
    print_message ("crash: %s\n", err.msg);
    assert_non_null (strstr (err.msg, "CUDA_ERROR_ILLEGAL_ADDRESS"));
    void *buf = NULL;
    assert_int_equal (S.be->alloc (S.dev, 64, &buf, &err), AK_ECRASH);
    assert_non_null (strstr (err.msg, "replace the executor"));
    S.be->unload (S.dev, &k);
    S.be->close (&S.dev);
    assert_null (S.dev);
    free (path);
}

int main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test (test_probe),
        cmocka_unit_test (test_compile),
        cmocka_unit_test (test_axpy),
        cmocka_unit_test (test_time),
        cmocka_unit_test (test_philox),
        cmocka_unit_test (test_half_axpy),
        cmocka_unit_test (test_reopen),
        cmocka_unit_test (test_zz_crash),
    };
    return ak_test_exit (cmocka_run_group_tests (tests, s_group_setup, s_group_teardown));
}
