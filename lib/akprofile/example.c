/*  lib/akprofile/example.c: how a runtime applies an installed profile.

    usage: akprofile-example PACKAGE_DIR OP DTYPE DIM [DIM...] [--class CLASS]
           akprofile-example --device      (this GPU's class and properties)

    Loads and verifies the package that `akctl profile export` wrote, finds
    this GPU's device class (or takes --class), looks up the kernel for
    (OP, DIMS, DTYPE) and, when a GPU is here and the entry is a CUDA one,
    compiles it with NVRTC and launches it through the driver API with the
    recorded launch configuration on buffers of the recorded sizes.  Both
    libraries are opened with dlopen, so the program runs anywhere; without
    a GPU it prints "SKIP: no GPU: ..." after the lookup and exits 0.

    Exit: 0 done (a kernel launched, or a clear fallback or skip), 1 the
    package was refused or a CUDA call failed, 2 usage. */
#include "akprofile.h"

#include <dlfcn.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* The argument block every akfleet CUDA kernel takes by value
   (kernels/ak_kernel_cuda.h: ak_cuda_args_t, 216 bytes). */
typedef struct {
    long long   dims[8];
    int         ndims;
    const void *in[8];
    int         nin;
    void       *out[8];
    int         nout;
} s_args_t;
_Static_assert (sizeof (s_args_t) == 216, "ak_cuda_args_t layout");

typedef unsigned long long s_dptr_t;

typedef struct {
    void *lib;
    int (*cuInit) (unsigned);
    int (*cuDeviceGet) (int *, int);
    int (*cuDevicePrimaryCtxRetain) (void **, int);
    int (*cuDevicePrimaryCtxRelease) (int);
    int (*cuCtxSetCurrent) (void *);
    int (*cuModuleLoadData) (void **, const void *);
    int (*cuModuleUnload) (void *);
    int (*cuModuleGetFunction) (void **, void *, const char *);
    int (*cuMemAlloc) (s_dptr_t *, size_t);
    int (*cuMemFree) (s_dptr_t);
    int (*cuMemcpyHtoD) (s_dptr_t, const void *, size_t);
    int (*cuMemcpyDtoH) (void *, s_dptr_t, size_t);
    int (*cuCtxSynchronize) (void);
} s_cu_t;

typedef struct {
    void *lib;
    int (*nvrtcCreateProgram) (void **, const char *, const char *, int, const char *const *, const char *const *);
    int (*nvrtcCompileProgram) (void *, int, const char *const *);
    int (*nvrtcGetProgramLogSize) (void *, size_t *);
    int (*nvrtcGetProgramLog) (void *, char *);
    int (*nvrtcGetCUBINSize) (void *, size_t *);
    int (*nvrtcGetCUBIN) (void *, char *);
    int (*nvrtcDestroyProgram) (void **);
} s_nv_t;

/* The versioned names are those whose plain name keeps an older ABI; any
   other is taken as is (cuCtxSynchronize_v2 of CUDA 13 takes a context, so
   "try _v2 first" would call the wrong function). */
static void *s_sym (void *lib, const char *name)
{
    static const char *const v2[] = { "cuMemAlloc", "cuMemFree", "cuMemcpyHtoD", "cuMemcpyDtoH",
                                      "cuDevicePrimaryCtxRelease", NULL };
    for (int i = 0; v2[i]; i++)
        if (strcmp (v2[i], name) == 0) {
            char sym[96];
            snprintf (sym, sizeof sym, "%s_v2", name);
            void *p = dlsym (lib, sym);
            return p ? p : dlsym (lib, name);
        }
    return dlsym (lib, name);
}

#define S_LOAD(t, f) ((*(void **) &(t)->f = s_sym ((t)->lib, #f)) != NULL)

static int s_load (s_cu_t *cu, s_nv_t *nv)
{
    cu->lib = dlopen ("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    const char *names[] = { "libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so", NULL };
    for (int i = 0; names[i] && !nv->lib; i++)
        nv->lib = dlopen (names[i], RTLD_NOW | RTLD_LOCAL);
    if (!cu->lib || !nv->lib)
        return -1;
    bool ok = S_LOAD (cu, cuInit) && S_LOAD (cu, cuDeviceGet) && S_LOAD (cu, cuDevicePrimaryCtxRetain)
           && S_LOAD (cu, cuDevicePrimaryCtxRelease) && S_LOAD (cu, cuCtxSetCurrent)
           && S_LOAD (cu, cuModuleLoadData) && S_LOAD (cu, cuModuleUnload) && S_LOAD (cu, cuModuleGetFunction)
           && S_LOAD (cu, cuMemAlloc) && S_LOAD (cu, cuMemFree) && S_LOAD (cu, cuMemcpyHtoD)
           && S_LOAD (cu, cuMemcpyDtoH) && S_LOAD (cu, cuCtxSynchronize)
           && S_LOAD (nv, nvrtcCreateProgram) && S_LOAD (nv, nvrtcCompileProgram)
           && S_LOAD (nv, nvrtcGetProgramLogSize) && S_LOAD (nv, nvrtcGetProgramLog)
           && S_LOAD (nv, nvrtcGetCUBINSize) && S_LOAD (nv, nvrtcGetCUBIN) && S_LOAD (nv, nvrtcDestroyProgram);
    return ok ? 0 : -1;
}

/*  Element p of dtype as a double (float16 and bfloat16 widened). */
static double s_value (const char *dtype, const unsigned char *p)
{
    if (strcmp (dtype, "float32") == 0) {
        float f;
        memcpy (&f, p, 4);
        return f;
    }
    unsigned short h;
    memcpy (&h, p, 2);
    if (strcmp (dtype, "bfloat16") == 0) {
        unsigned int u = (unsigned int) h << 16;
        float f;
        memcpy (&f, &u, 4);
        return f;
    }
    int e = (h >> 10) & 0x1F, mant = h & 0x3FF;
    double v = e == 0 ? ldexp (mant, -24) : e == 31 ? (mant ? NAN : INFINITY) : ldexp (mant | 0x400, e - 25);
    return h & 0x8000 ? -v : v;
}

static size_t s_elt (const char *dtype)
{
    return strcmp (dtype, "float32") == 0 ? 4 : 2;
}

/* Compiles k for sm_XY and launches it once; prints what happened. */
static int s_launch (const akp_kernel_t *k, const akp_device_t *dev)
{
    s_cu_t cu = { 0 };
    s_nv_t nv = { 0 };
    if (s_load (&cu, &nv) != 0) {
        fprintf (stderr, "akprofile-example: libcuda or NVRTC lacks an entry point\n");
        return 1;
    }
    /* prelude + source, as the worker compiles it */
    size_t len = k->prelude_len + k->source_len + 2;
    char *src = malloc (len);
    snprintf (src, len, "%s\n%s", k->prelude, k->source);
    char arch[48], buf[2048];
    if (k->arch && *k->arch)            /* an arch-specific entry ("sm_90a", kernel ABI 2) */
        snprintf (arch, sizeof arch, "--gpu-architecture=%s", k->arch);
    else
        snprintf (arch, sizeof arch, "--gpu-architecture=sm_%d%d", dev->cc_major, dev->cc_minor);
    const char *opts[32] = { arch, "--std=c++17" };
    size_t n = 0;
    if (akp_compile_options (k, buf, sizeof buf, opts + 2, 28, &n) != AKP_OK) {
        free (src);
        return 1;
    }
    size_t nopts = n + 2;
    char inc[300];
    if (strcmp (k->dtype, "float32") != 0) {
        const char *root = getenv ("CUDA_HOME") ? getenv ("CUDA_HOME") : "/usr/local/cuda";
        snprintf (inc, sizeof inc, "-I%s/include", root);
        opts[nopts++] = "-DAK_CUDA_HALF";
        opts[nopts++] = inc;
    }
    void *prog = NULL;
    int rc = nv.nvrtcCreateProgram (&prog, src, k->source_name, 0, NULL, NULL);
    free (src);
    if (rc != 0) {
        fprintf (stderr, "akprofile-example: nvrtcCreateProgram failed (%d)\n", rc);
        return 1;
    }
    rc = nv.nvrtcCompileProgram (prog, (int) nopts, opts);
    if (rc != 0) {
        size_t ll = 0;
        nv.nvrtcGetProgramLogSize (prog, &ll);
        char *log = calloc (1, ll + 1);
        nv.nvrtcGetProgramLog (prog, log);
        fprintf (stderr, "akprofile-example: NVRTC could not compile %s:\n%s\n", k->source_name, log);
        free (log);
        nv.nvrtcDestroyProgram (&prog);
        return 1;
    }
    size_t cubin_len = 0;
    nv.nvrtcGetCUBINSize (prog, &cubin_len);
    char *cubin = malloc (cubin_len ? cubin_len : 1);
    nv.nvrtcGetCUBIN (prog, cubin);
    nv.nvrtcDestroyProgram (&prog);

    int d = 0, fail = 0;
    void *ctx = NULL, *mod = NULL, *fn = NULL;
    s_dptr_t bufs[2 * AKP_MAX_BUFS] = { 0 };
    s_args_t a;
    memset (&a, 0, sizeof a);
    if (cu.cuInit (0) || cu.cuDeviceGet (&d, 0) || cu.cuDevicePrimaryCtxRetain (&ctx, d)
        || cu.cuCtxSetCurrent (ctx) || cu.cuModuleLoadData (&mod, cubin)
        || cu.cuModuleGetFunction (&fn, mod, k->entry))
        fail = 1;
    free (cubin);
    size_t elt = s_elt (k->dtype);
    for (size_t i = 0; !fail && i < k->ninputs + k->noutputs; i++) {
        bool in = i < k->ninputs;
        int64_t count = in ? k->input_counts[i] : k->output_counts[i - k->ninputs];
        size_t bytes = (size_t) count * elt;
        unsigned char *host = malloc (bytes);
        for (int64_t e = 0; e < count; e++) {
            if (elt == 4) {
                float v = in ? (float) ((e * 7919) % 17 - 8) / 8.0f : NAN;
                memcpy (host + e * 4, &v, 4);
            }
            else {
                bool h = strcmp (k->dtype, "float16") == 0;
                unsigned short v = in ? (h ? 0x3C00 : 0x3F80) : (h ? 0x7E00 : 0x7FC0);   /* 1.0, NaN */
                memcpy (host + e * 2, &v, 2);
            }
        }
        if (cu.cuMemAlloc (&bufs[i], bytes) || cu.cuMemcpyHtoD (bufs[i], host, bytes))
            fail = 1;
        free (host);
        if (in)
            a.in[a.nin++] = (const void *) (uintptr_t) bufs[i];
        else
            a.out[a.nout++] = (void *) (uintptr_t) bufs[i];
    }
    a.ndims = (int) k->ndims;
    for (size_t i = 0; i < k->ndims; i++)
        a.dims[i] = k->dims[i];
    struct timespec t0, t1;
    clock_gettime (CLOCK_MONOTONIC, &t0);
    /* akp_launch: the argument block, the entry's tensor maps (kernel ABI
       2) encoded over these buffers, shared memory above 48 KiB opted in */
    uint64_t ins[AKP_MAX_BUFS], outs[AKP_MAX_BUFS];
    for (int i = 0; i < a.nin; i++)
        ins[i] = (uint64_t) (uintptr_t) a.in[i];
    for (int i = 0; i < a.nout; i++)
        outs[i] = (uint64_t) (uintptr_t) a.out[i];
    char lerr[512];
    if (!fail && akp_launch (k, fn, NULL, ins, (size_t) a.nin, outs, (size_t) a.nout, &rc, lerr, sizeof lerr)
                 != AKP_OK) {
        fprintf (stderr, "akprofile-example: %s\n", lerr);
        fail = 1;
    }
    if (!fail && (rc = cu.cuCtxSynchronize ()) != 0) {
        fprintf (stderr, "akprofile-example: the kernel failed (%d)\n", rc);
        fail = 1;
    }
    clock_gettime (CLOCK_MONOTONIC, &t1);
    if (!fail && k->noutputs) {
        /* the first outputs, still the NaN they were filled with? (float32:
           finite, as before) */
        unsigned char raw[16];
        double first[4] = { 0 };
        size_t m = k->output_counts[0] < 4 ? (size_t) k->output_counts[0] : 4;
        cu.cuMemcpyDtoH (raw, bufs[k->ninputs], m * elt);
        int written = 1;
        for (size_t i = 0; i < m; i++) {
            first[i] = s_value (k->dtype, raw + i * elt);
            written &= elt == 4 ? isfinite (first[i]) != 0 : !isnan (first[i]);
        }
        printf ("launched: %s (%s) on %s grid=(%u,%u,%u) block=(%u,%u,%u) shared=%u, %zu tensor maps, in %.3f ms; "
                "out[0][0..%zu) = %g %g %g %g (%s)\n", k->entry, k->candidate, dev->name,
                k->grid[0], k->grid[1], k->grid[2], k->block[0], k->block[1], k->block[2], k->shared_bytes,
                k->ntmaps, (double) (t1.tv_sec - t0.tv_sec) * 1e3 + (double) (t1.tv_nsec - t0.tv_nsec) / 1e6,
                m, first[0], first[1], first[2], first[3], written ? "written" : "NOT written");
        if (!written)
            fail = 1;
    }
    else
    if (!fail)
        printf ("launched: %s (%s) on %s\n", k->entry, k->candidate, dev->name);
    else
        fprintf (stderr, "akprofile-example: a CUDA call failed\n");
    for (size_t i = 0; i < 2 * AKP_MAX_BUFS; i++)
        if (bufs[i])
            cu.cuMemFree (bufs[i]);
    if (mod)
        cu.cuModuleUnload (mod);
    if (ctx)
        cu.cuDevicePrimaryCtxRelease (d);
    return fail;
}

int main (int argc, char **argv)
{
    const char *cls_arg = NULL;
    if (argc == 2 && strcmp (argv[1], "--device") == 0) {
        /* which class this machine is, as profiles name it */
        akp_device_t dev;
        char name[256], nvrtc[32], cls[512], err[512];
        if (akp_device_from_cuda (0, &dev, name, sizeof name, nvrtc, sizeof nvrtc, cls, sizeof cls,
                                  err, sizeof err) != AKP_OK) {
            printf ("SKIP: no GPU: %s\n", err);
            return 0;
        }
        printf ("class %s\nname %s\ncc %d.%d\ndriver_major %d\nnvrtc %s\n", cls, dev.name, dev.cc_major,
                dev.cc_minor, dev.driver_major, dev.nvrtc_version);
        return 0;
    }
    const char *pos[16];
    int npos = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp (argv[i], "--class") == 0 && i + 1 < argc)
            cls_arg = argv[++i];
        else if (npos < 16)
            pos[npos++] = argv[i];
    }
    if (npos < 4) {
        fprintf (stderr, "usage: akprofile-example PACKAGE_DIR OP DTYPE DIM [DIM...] [--class CLASS]\n");
        return 2;
    }
    int64_t dims[AKP_MAX_DIMS];
    size_t ndims = 0;
    for (int i = 3; i < npos && ndims < AKP_MAX_DIMS; i++) {
        char *end = NULL;
        long long v = strtoll (pos[i], &end, 10);
        if (!end || *end || v < 1) {
            fprintf (stderr, "akprofile-example: dimension '%s' is not a positive integer\n", pos[i]);
            return 2;
        }
        dims[ndims++] = v;
    }
    char err[1024];
    akp_profile_t *p = NULL;
    if (akp_load (pos[0], &p, err, sizeof err) != AKP_OK) {
        fprintf (stderr, "akprofile-example: package refused: %s\n", err);
        return 1;
    }
    printf ("profile %s: %zu device class(es)\n", akp_name (p), akp_class_count (p));

    akp_device_t dev;
    char name[256], nvrtc[32], cls[512];
    bool gpu = akp_device_from_cuda (0, &dev, name, sizeof name, nvrtc, sizeof nvrtc, cls, sizeof cls,
                                     err, sizeof err) == AKP_OK;
    const char *use = cls_arg ? cls_arg : gpu ? cls : NULL;
    if (!use) {
        printf ("SKIP: no GPU: %s (give --class CLASS to look up without one)\n", err);
        akp_destroy (&p);
        return 0;
    }
    size_t ci;
    char why[1024];
    if (gpu && !cls_arg && akp_match (p, cls, &dev, &ci, why, sizeof why) != AKP_OK) {
        printf ("fallback: %s\n", why);
        akp_destroy (&p);
        return 0;
    }
    const akp_kernel_t *k = NULL;
    if (akp_lookup (p, use, pos[1], dims, ndims, pos[2], &k, why, sizeof why) != AKP_OK) {
        printf ("fallback: %s\n", why);
        akp_destroy (&p);
        return 0;
    }
    printf ("kernel: %s", k->candidate);
    for (size_t i = 0; i < k->nparams; i++)
        printf (" %s=%lld", k->param_names[i], (long long) k->param_values[i]);
    if (k->has_launch)
        printf (" grid=(%u,%u,%u) block=(%u,%u,%u) shared=%u", k->grid[0], k->grid[1], k->grid[2],
                k->block[0], k->block[1], k->block[2], k->shared_bytes);
    printf (" source=%s sha256=%.12s speedup=%.3fx+-%.3f\n", k->source_name, k->source_digest, k->speedup, k->noise);
    int rc = 0;
    if (strcmp (k->backend, "cuda") != 0)
        printf ("host kernel: build it with the system compiler (not launched here)\n");
    else
    if (!gpu)
        printf ("SKIP: no GPU: %s\n", err);
    else
    if (cls_arg && strcmp (cls_arg, cls) != 0)
        printf ("SKIP: this GPU is %s, not %s: not launched\n", cls, cls_arg);
    else
        rc = s_launch (k, &dev);
    akp_destroy (&p);
    return rc;
}
