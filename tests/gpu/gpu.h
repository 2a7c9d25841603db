/*  tests/gpu/gpu.h: what the GPU tests share (linked into each of them,
    tests/CMakeLists.txt).

    The fixture of a test that runs kernels on the first CUDA device with
    the host backend beside it (for the float64 oracle).  Where there is no
    GPU (tests/skip.h says what that is), opening it prints
    "SKIP: no GPU: <reason>" and sets skip; the tests then call skip() and
    main returns ak_test_exit (): CTest shows the binary as "Not Run". */
#ifndef AK_TESTS_GPU_H
#define AK_TESTS_GPU_H
#include <stdbool.h>
#include <stddef.h>
#include "worker/backend.h"

typedef struct {
    bool                skip;
    const ak_backend_t *be, *host;     /* cuda, host */
    Ak__Device        **devs;          /* what the CUDA probe found */
    size_t              ndevs;
    ak_dev_t           *dev, *host_dev;/* devs[0], the host */
    char               *cache;         /* a compile cache: a fresh directory named after tag */
} ak_gpu_fixture_t;

/* 0 (with skip set when there is no GPU), or -1 when the probe fails
   other than for "no GPU", or a device that is there cannot be opened
   (the group setup fails, and with it every test). */
int  ak_gpu_fixture_open (ak_gpu_fixture_t *f, const char *tag);
void ak_gpu_fixture_close (ak_gpu_fixture_t *f);

/* ok, after printing "SKIP: needs WHAT; device 0 is sm_XY" when it is
   false: the tests of an open fixture that need a compute capability. */
bool ak_gpu_fixture_needs (const ak_gpu_fixture_t *f, bool ok, const char *what);

/* Builds source with be (f->be or f->host; reference: float64, dt ignored)
   into f's cache and loads symbol from it; fails the test on an error. */
ak_kernel_t *ak_gpu_build (ak_gpu_fixture_t *f, const ak_backend_t *be, ak_dev_t *dev, const char *source,
                           bool reference, ak_dtype_t dt, const char *symbol);

/* Compiles the testing kernel kernels/testing/cuda/NAME.cu with f->be for
   dt (and arch, NULL: the device's own) with the n defines names=values,
   and loads its ak_kernel; fails the test on an error. */
ak_kernel_t *ak_gpu_load_testing (ak_gpu_fixture_t *f, const char *name, const char *arch, ak_dtype_t dt,
                                  const char *const *names, const int64_t *values, int n);

#endif
