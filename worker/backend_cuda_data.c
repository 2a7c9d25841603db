/*  worker/backend_cuda_data.c: the CUDA backend's device-side data work,
    run by an executor child: inputs generated on the device
    (ak_fill_uniform, the values the host would make) and outputs judged
    on the device against a float64 reference (ak_compare), so that a
    gate configuration the size of a real workload never crosses to the
    host.  Both kernels are in the prelude (kernels/ak_kernel_cuda.h);
    ak_compare only in device references' modules (-DAK_REFERENCE).

    Never: report a comparison whose kernel did not finish, or read the
    counts of another call. */
#include "backend_cuda_impl.h"

#include <math.h>
#include <string.h>

#if AK_HAVE_CUDA

int ak_cuda_fill_uniform (ak_dev_t *dev, ak_kernel_t *fill, void *buf, uint64_t n,
                          uint64_t seed, uint64_t stream, double lo, double hi,
                          int dtype, ak_err_t *err)
{
    if (!fill || (!buf && n))
        return ak_err_set (err, AK_EINVAL, "ak_cuda_fill_uniform: bad arguments");
    if (dtype < 0 || dtype > AK_CUDA_FILL_AS_F64 + AK_DT_FLOAT32)
        return ak_err_set (err, AK_EINVAL, "ak_cuda_fill_uniform: dtype %d", dtype);
    int half = dtype >= AK_CUDA_FILL_AS_F64 ? dtype - AK_CUDA_FILL_AS_F64 : dtype;
    if ((half == AK_DT_FLOAT16 || half == AK_DT_BFLOAT16) && !ak_cuda_include_dir ())
        return ak_err_set (err, AK_EUNSUPPORTED, "ak_cuda_fill_uniform: %s needs cuda_fp16.h / cuda_bf16.h",
                           ak_dtype_name ((ak_dtype_t) dtype));
    int rc = ak_cuda_be_enter (dev, err);
    if (rc || n == 0)
        return rc;
    uint64_t blocks = (n + 255) / 256;
    uint64_t cap = (uint64_t) (dev->sm_count > 0 ? dev->sm_count : 1) * 32;
    uint32_t grid[3] = { (uint32_t) (blocks < cap ? blocks : cap), 1, 1 };
    uint32_t block[3] = { 256, 1, 1 };
    unsigned long long seed_a = seed, stream_a = stream, n_a = n;
    CUdeviceptr out = (CUdeviceptr) (uintptr_t) buf;
    void *params[] = { &seed_a, &stream_a, &n_a, &lo, &hi, &dtype, &out };
    if ((rc = ak_cuda_be_enqueue (dev, fill->fn, grid, block, 0, params, err)) != 0)
        return rc;
    return ak_cuda_be_sync (dev, err);
}

int ak_cuda_compare (ak_dev_t *dev, ak_kernel_t *cmp, const void *got, int code, const void *want,
                     uint64_t n, double atol, double rtol, double dmax, bool poison, uint64_t key,
                     ak_dcmp_t *out,
                     ak_err_t *err)
{
    if (!cmp || !out || ((!got || !want) && n))
        return ak_err_set (err, AK_EINVAL, "ak_cuda_compare: bad arguments");
    if (code < 0 || code > AK_CUDA_FILL_FLOAT64)
        return ak_err_set (err, AK_EINVAL, "ak_cuda_compare: element type %d", code);
    if ((code == AK_DT_FLOAT16 || code == AK_DT_BFLOAT16) && !ak_cuda_include_dir ())
        return ak_err_set (err, AK_EUNSUPPORTED, "ak_cuda_compare: %s needs cuda_fp16.h / cuda_bf16.h",
                           ak_dtype_name ((ak_dtype_t) code));
    memset (out, 0, sizeof *out);
    out->first = UINT64_MAX;
    int rc = ak_cuda_be_enter (dev, err);
    if (rc || n == 0)
        return rc;
    /* [0..4] counts, [5] the first index (starts at ~0), [6] the worst
       error's bits, [7] the keyed sum; see ak_compare in the prelude. */
    uint64_t words[8] = { 0, 0, 0, 0, 0, UINT64_MAX, 0, 0 };
    void *res = NULL;
    if ((rc = ak_cuda_be_alloc (dev, sizeof words, &res, err)) != 0)
        return ak_err_prefix (err, "ak_cuda_compare");
    rc = ak_cuda_be_upload (dev, res, words, sizeof words, err);
    if (rc == 0) {
        uint64_t blocks = (n + 255) / 256;
        uint64_t capb = (uint64_t) (dev->sm_count > 0 ? dev->sm_count : 1) * 16;
        uint32_t grid[3] = { (uint32_t) (blocks < capb ? blocks : capb), 1, 1 };
        uint32_t block[3] = { 256, 1, 1 };
        CUdeviceptr g = (CUdeviceptr) (uintptr_t) got, w = (CUdeviceptr) (uintptr_t) want;
        CUdeviceptr r = (CUdeviceptr) (uintptr_t) res;
        unsigned long long n_a = n;
        int poison_a = poison ? 1 : 0;
        unsigned long long key_a = key;
        void *params[] = { &g, &code, &w, &n_a, &atol, &rtol, &dmax, &poison_a, &key_a, &r };
        rc = ak_cuda_be_enqueue (dev, cmp->fn, grid, block, 0, params, err);
        if (rc == 0)
            rc = ak_cuda_be_sync (dev, err);
        if (rc == 0)
            rc = ak_cuda_be_download (dev, words, res, sizeof words, err);
    }
    ak_cuda_be_release (dev, &res);
    if (rc)
        return ak_err_prefix (err, "ak_cuda_compare");
    out->unwritten = words[0];
    out->overflowed = words[1];
    out->nonfinite = words[2];
    out->beyond = words[3];
    out->want_nonfinite = words[4];
    out->first = words[5];
    memcpy (&out->worst, &words[6], sizeof out->worst);
    out->want_sum = words[7];
    if (!(out->worst >= 0) || out->unwritten > n || out->overflowed > n || out->nonfinite > n
        || out->beyond > n || out->want_nonfinite > n || (out->first != UINT64_MAX && out->first >= n))
        return ak_err_set (err, AK_EINTERNAL, "ak_cuda_compare: the kernel returned impossible counts "
                           "(first %llu of %llu)", (unsigned long long) out->first, (unsigned long long) n);
    return 0;
}

#endif
