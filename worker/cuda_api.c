/*  worker/cuda_api.c: libcuda, NVRTC and CUPTI through dlopen (see
    cuda_api.h for the contract). */
#include "cuda_api.h"
#include "util.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if AK_HAVE_CUDA

#include <dlfcn.h>
#include <unistd.h>

/* The CUDA major version our headers describe: 13 for cuda.h 13000. */
#define AK_CUDA_HEADER_MAJOR (CUDA_VERSION / 1000)

#ifndef AK_CUDA_ROOT_DIR
#define AK_CUDA_ROOT_DIR "/usr/local/cuda"
#endif

/*  One library's load state, filled once under its pthread_once. */
typedef struct {
    pthread_once_t once;
    void *handle;
    bool  ok;
    char  why[768];            /* reason when !ok */
    char  version[32];
    char  path[512];           /* as opened: a name the loader searched, or a path */
    char  file[4096];          /* the file the loader mapped, absolute; "" when it cannot say */
} s_lib_t;

static s_lib_t s_drv_lib = { .once = PTHREAD_ONCE_INIT };
static s_lib_t s_nv_lib = { .once = PTHREAD_ONCE_INIT };
static s_lib_t s_cp_lib = { .once = PTHREAD_ONCE_INIT };
static ak_cuda_driver_t s_drv;
static ak_cuda_nvrtc_t s_nv;
static ak_cuda_cupti_t s_cp;

/* ------------------------------------------------------------- searching */

/*  dlopen the first of names that opens: each name through the dynamic
    linker's own search first, then inside each of dirs.  On failure
    lib->why holds the linker's answer for the first name (the one a
    person expects to see: "libnvrtc.so.13: cannot open shared object
    file: No such file or directory"). */
static void *s_open_first (s_lib_t *lib, const char *const *names, const char *const *dirs)
{
    char first[512] = "";
    for (int i = 0; names[i]; i++) {
        void *h = dlopen (names[i], RTLD_NOW | RTLD_LOCAL);
        if (h) {
            snprintf (lib->path, sizeof lib->path, "%s", names[i]);
            return h;
        }
        const char *e = dlerror ();
        if (!first[0])
            snprintf (first, sizeof first, "%s", e ? e : names[i]);
    }
    for (int d = 0; dirs && dirs[d]; d++) {
        if (!dirs[d][0])
            continue;
        for (int i = 0; names[i]; i++) {
            char path[512];
            int n = snprintf (path, sizeof path, "%s/%s", dirs[d], names[i]);
            if (n <= 0 || (size_t) n >= sizeof path || access (path, R_OK) != 0)
                continue;
            void *h = dlopen (path, RTLD_NOW | RTLD_LOCAL);
            if (h) {
                snprintf (lib->path, sizeof lib->path, "%s", path);
                return h;
            }
            const char *e = dlerror ();
            snprintf (first, sizeof first, "%s", e ? e : path);
        }
    }
    snprintf (lib->why, sizeof lib->why, "%s", first);
    return NULL;
}

/*  Folders to search beside the linker's path: $CUDA_HOME, $CUDA_PATH, the
    toolkit CMake found, /usr/local/cuda; each with sub (e.g. "lib64"). */
static void s_dirs (const char *sub, char bufs[][400], const char **dirs, int max)
{
    const char *roots[] = { getenv ("CUDA_HOME"), getenv ("CUDA_PATH"), AK_CUDA_ROOT_DIR,
                            "/usr/local/cuda" };
    int n = 0;
    for (size_t r = 0; r < sizeof roots / sizeof roots[0] && n < max - 1; r++) {
        if (!roots[r] || !roots[r][0])
            continue;
        snprintf (bufs[n], 400, "%s/%s", roots[r], sub);
        dirs[n] = bufs[n];
        n++;
    }
    dirs[n] = NULL;
}

/* ---------------------------------------------------------------- driver */

static void s_load_driver (void)
{
    s_lib_t *lib = &s_drv_lib;
    /* Only the driver's own soname: an unversioned libcuda.so is usually
       the toolkit's link-time stub, which answers every call with
       CUDA_ERROR_STUB_LIBRARY. */
    const char *names[] = { "libcuda.so.1", NULL };
    lib->handle = s_open_first (lib, names, NULL);
    if (!lib->handle)
        return;

    PFN_cuGetProcAddress_v12000 get_proc = NULL;
    void *sym = dlsym (lib->handle, "cuGetProcAddress_v2");
    if (sym)
        memcpy (&get_proc, &sym, sizeof sym);
    s_drv.via_proc_address = get_proc != NULL;

#define AK_CUDA_DRIVER_RESOLVE(name, ver, exported)                                     \
    do {                                                                                 \
        void *p = NULL;                                                                  \
        if (get_proc) {                                                                  \
            CUdriverProcAddressQueryResult st = CU_GET_PROC_ADDRESS_SUCCESS;             \
            CUresult r = get_proc (#name, &p, ver, CU_GET_PROC_ADDRESS_DEFAULT, &st);    \
            if (r != CUDA_SUCCESS || st != CU_GET_PROC_ADDRESS_SUCCESS)                  \
                p = NULL;                                                                \
        }                                                                                \
        if (!p) {                                                                        \
            p = dlsym (lib->handle, exported);                                           \
            s_drv.dlsym_fallbacks++;                                                     \
        }                                                                                \
        if (!p) {                                                                        \
            snprintf (lib->why, sizeof lib->why,                                         \
                      "libcuda.so.1: no entry point %s (API version %d): driver too old", \
                      #name, ver);                                                       \
            return;                                                                      \
        }                                                                                \
        memcpy (&s_drv.name, &p, sizeof p);                                              \
    } while (0);
    AK_CUDA_DRIVER_FNS (AK_CUDA_DRIVER_RESOLVE)
#undef AK_CUDA_DRIVER_RESOLVE

    int v = 0;
    CUresult r = s_drv.cuDriverGetVersion (&v);
    if (r != CUDA_SUCCESS) {
        snprintf (lib->why, sizeof lib->why, "cuDriverGetVersion: CUresult %d", (int) r);
        return;
    }
    s_drv.driver_version = v;
    snprintf (lib->version, sizeof lib->version, "%d.%d", v / 1000, (v % 1000) / 10);
    /* Kernels are NVRTC CUBINs of our major version; a driver of an older
       major version cannot be trusted to load them. */
    if (v < AK_CUDA_HEADER_MAJOR * 1000) {
        snprintf (lib->why, sizeof lib->why,
                  "CUDA driver supports CUDA %d.%d; this worker needs %d.0 or newer "
                  "(built against CUDA %d.%d headers): upgrade the NVIDIA driver",
                  v / 1000, (v % 1000) / 10, AK_CUDA_HEADER_MAJOR,
                  CUDA_VERSION / 1000, (CUDA_VERSION % 1000) / 10);
        return;
    }
    lib->ok = true;
}

/* ----------------------------------------------------------------- NVRTC */

static void s_load_nvrtc (void)
{
    s_lib_t *lib = &s_nv_lib;
    char soname[32];
    snprintf (soname, sizeof soname, "libnvrtc.so.%d", AK_CUDA_HEADER_MAJOR);
    const char *names[] = { soname, "libnvrtc.so", NULL };
    char bufs[5][400];
    const char *dirs[5];
    s_dirs ("lib64", bufs, dirs, 5);
    lib->handle = s_open_first (lib, names, dirs);
    if (!lib->handle)
        return;
#define AK_CUDA_SAME_RESOLVE(name)                                                  \
    do {                                                                            \
        void *p = dlsym (lib->handle, #name);                                       \
        if (!p) {                                                                   \
            snprintf (lib->why, sizeof lib->why, "%.400s: no symbol %s", lib->path, #name); \
            return;                                                                 \
        }                                                                           \
        memcpy (&tbl->name, &p, sizeof p);                                          \
    } while (0);
    ak_cuda_nvrtc_t *tbl = &s_nv;
    AK_CUDA_NVRTC_FNS (AK_CUDA_SAME_RESOLVE)

    nvrtcResult r = s_nv.nvrtcVersion (&s_nv.major, &s_nv.minor);
    if (r != NVRTC_SUCCESS) {
        snprintf (lib->why, sizeof lib->why, "nvrtcVersion: %s", s_nv.nvrtcGetErrorString (r));
        return;
    }
    snprintf (lib->version, sizeof lib->version, "%d.%d", s_nv.major, s_nv.minor);
    /* the file itself (the compile helper loads the same one) */
    Dl_info info;
    void *sym = NULL;
    memcpy (&sym, &s_nv.nvrtcVersion, sizeof sym);
    if (dladdr (sym, &info) && info.dli_fname && info.dli_fname[0] == '/')
        snprintf (lib->file, sizeof lib->file, "%s", info.dli_fname);
    else if (lib->path[0] == '/')
        snprintf (lib->file, sizeof lib->file, "%.*s", (int) sizeof lib->path - 1, lib->path);
    if (s_nv.major < AK_CUDA_HEADER_MAJOR) {
        snprintf (lib->why, sizeof lib->why,
                  "%.400s is NVRTC %d.%d; this worker needs NVRTC %d.0 or newer (built against CUDA %d.%d)",
                  lib->path, s_nv.major, s_nv.minor, AK_CUDA_HEADER_MAJOR,
                  CUDA_VERSION / 1000, (CUDA_VERSION % 1000) / 10);
        return;
    }
    int n = 0;
    r = s_nv.nvrtcGetNumSupportedArchs (&n);
    if (r != NVRTC_SUCCESS) {
        snprintf (lib->why, sizeof lib->why, "nvrtcGetNumSupportedArchs: %s", s_nv.nvrtcGetErrorString (r));
        return;
    }
    int *all = ak_calloc ((size_t) (n > 0 ? n : 1), sizeof *all);
    r = s_nv.nvrtcGetSupportedArchs (all);
    if (r != NVRTC_SUCCESS) {
        free (all);
        snprintf (lib->why, sizeof lib->why, "nvrtcGetSupportedArchs: %s", s_nv.nvrtcGetErrorString (r));
        return;
    }
    for (int i = 0; i < n && s_nv.narchs < (int) (sizeof s_nv.archs / sizeof s_nv.archs[0]); i++)
        s_nv.archs[s_nv.narchs++] = all[i];
    free (all);
    lib->ok = true;
}

/* ----------------------------------------------------------------- CUPTI */

static void s_load_cupti (void)
{
    s_lib_t *lib = &s_cp_lib;
    char soname[32];
    snprintf (soname, sizeof soname, "libcupti.so.%d", AK_CUDA_HEADER_MAJOR);
    const char *names[] = { soname, "libcupti.so", NULL };
    char bufs[10][400];
    const char *dirs[10];
    s_dirs ("lib64", bufs, dirs, 5);
    int n = 0;
    while (dirs[n])
        n++;
    char more[5][400];
    const char *extra[5];
    s_dirs ("extras/CUPTI/lib64", more, extra, 5);
    for (int i = 0; extra[i] && n < 9; i++) {
        memcpy (bufs[n], more[i], sizeof bufs[n]);
        dirs[n] = bufs[n];
        n++;
    }
    dirs[n] = NULL;
    lib->handle = s_open_first (lib, names, dirs);
    if (!lib->handle)
        return;
    ak_cuda_cupti_t *tbl = &s_cp;
    AK_CUDA_CUPTI_FNS (AK_CUDA_SAME_RESOLVE)
#undef AK_CUDA_SAME_RESOLVE

    uint32_t v = 0;
    CUptiResult r = s_cp.cuptiGetVersion (&v);
    if (r != CUPTI_SUCCESS) {
        snprintf (lib->why, sizeof lib->why, "cuptiGetVersion: CUptiResult %d", (int) r);
        return;
    }
    s_cp.version = v;
    if (v >= 10000)
        snprintf (lib->version, sizeof lib->version, "%u.%u.%u", v / 10000, (v / 100) % 100, v % 100);
    else
        snprintf (lib->version, sizeof lib->version, "api %u", v);
    /* Activity records are read with the layouts of our headers
       (CUpti_ActivityKernel10 in 13.0); an older CUPTI writes older ones. */
#if CUPTI_API_VERSION >= 10000
    if (v < (CUPTI_API_VERSION / 10000) * 10000) {
        snprintf (lib->why, sizeof lib->why,
                  "%.400s is CUPTI %.31s; this worker reads CUPTI %d records (built against CUPTI API %d)",
                  lib->path, lib->version, CUPTI_API_VERSION / 10000, CUPTI_API_VERSION);
        return;
    }
#endif
    lib->ok = true;
}

/* ---------------------------------------------------------------- public */

static int s_need (s_lib_t *lib, void (*init) (void), const char *what, ak_err_t *err)
{
    pthread_once (&lib->once, init);
    if (lib->ok)
        return 0;
    return ak_err_set (err, AK_EUNAVAIL, "%s: %s", what, lib->why[0] ? lib->why : "not loaded");
}

int ak_cuda_load_driver (ak_err_t *err)
{
    return s_need (&s_drv_lib, s_load_driver, "CUDA driver", err);
}

int ak_cuda_load_nvrtc (ak_err_t *err)
{
    return s_need (&s_nv_lib, s_load_nvrtc, "NVRTC", err);
}

int ak_cuda_load_cupti (ak_err_t *err)
{
    return s_need (&s_cp_lib, s_load_cupti, "CUPTI", err);
}

int ak_cuda_driver (const ak_cuda_driver_t **drv_p, ak_err_t *err)
{
    int rc = ak_cuda_load_driver (err);
    *drv_p = rc ? NULL : &s_drv;
    return rc;
}

int ak_cuda_nvrtc (const ak_cuda_nvrtc_t **nv_p, ak_err_t *err)
{
    int rc = ak_cuda_load_nvrtc (err);
    *nv_p = rc ? NULL : &s_nv;
    return rc;
}

int ak_cuda_cupti (const ak_cuda_cupti_t **cp_p, ak_err_t *err)
{
    int rc = ak_cuda_load_cupti (err);
    *cp_p = rc ? NULL : &s_cp;
    return rc;
}

/* The range profiler's entry points: resolved once CUPTI has loaded, on
   their own, so a CUPTI without them still serves tracing. */
static ak_cuda_profiler_t s_pf;
static pthread_once_t     s_pf_once = PTHREAD_ONCE_INIT;
static bool               s_pf_ok;
static char               s_pf_why[512];

static void s_load_profiler (void)
{
    ak_err_t e = { 0 };
    if (ak_cuda_load_cupti (&e) != 0) {
        snprintf (s_pf_why, sizeof s_pf_why, "%.480s", e.msg);
        return;
    }
#define AK_CUDA_PF_RESOLVE(name)                                                    \
    do {                                                                            \
        void *p = dlsym (s_cp_lib.handle, #name);                                   \
        if (!p) {                                                                   \
            snprintf (s_pf_why, sizeof s_pf_why, "CUPTI %.31s (%.300s) has no %s: "  \
                      "no range profiler", s_cp_lib.version, s_cp_lib.path, #name);  \
            return;                                                                 \
        }                                                                           \
        memcpy (&s_pf.name, &p, sizeof p);                                          \
    } while (0);
    AK_CUDA_PROFILER_FNS (AK_CUDA_PF_RESOLVE)
#undef AK_CUDA_PF_RESOLVE
    s_pf_ok = true;
}

int ak_cuda_profiler (const ak_cuda_profiler_t **pf_p, ak_err_t *err)
{
    pthread_once (&s_pf_once, s_load_profiler);
    *pf_p = s_pf_ok ? &s_pf : NULL;
    if (s_pf_ok)
        return 0;
    return ak_err_set (err, AK_EUNAVAIL, "CUPTI range profiler: %s", s_pf_why[0] ? s_pf_why : "not loaded");
}

static const char *s_text (s_lib_t *lib, const char *field)
{
    /* A once not yet run reads as "not loaded": never load from a getter. */
    return lib->ok ? field : "";
}

const char *ak_cuda_driver_version_text (void) { return s_text (&s_drv_lib, s_drv_lib.version); }
const char *ak_cuda_nvrtc_version_text (void)  { return s_text (&s_nv_lib, s_nv_lib.version); }
const char *ak_cuda_cupti_version_text (void)  { return s_text (&s_cp_lib, s_cp_lib.version); }
const char *ak_cuda_nvrtc_path (void)          { return s_text (&s_nv_lib, s_nv_lib.path); }
const char *ak_cuda_cupti_path (void)          { return s_text (&s_cp_lib, s_cp_lib.path); }
const char *ak_cuda_nvrtc_file (void)          { return s_text (&s_nv_lib, s_nv_lib.file); }

char *ak_cuda_describe (void)
{
    ak_err_t e1 = { 0 }, e2 = { 0 }, e3 = { 0 };
    int r1 = ak_cuda_load_driver (&e1);
    int r2 = ak_cuda_load_nvrtc (&e2);
    int r3 = ak_cuda_load_cupti (&e3);
    char *a = r1 ? ak_sprintf ("%s", e1.msg)
                 : s_drv.via_proc_address && s_drv.dlsym_fallbacks == 0
                   ? ak_sprintf ("CUDA driver %s", s_drv_lib.version)
                   : ak_sprintf ("CUDA driver %s (%d entry points through dlsym%s)", s_drv_lib.version,
                                 s_drv.dlsym_fallbacks, s_drv.via_proc_address ? "" : ": no cuGetProcAddress_v2");
    char *b = r2 ? ak_sprintf ("%s", e2.msg) : ak_sprintf ("NVRTC %s (%s)", s_nv_lib.version, s_nv_lib.path);
    char *c = r3 ? ak_sprintf ("%s", e3.msg) : ak_sprintf ("CUPTI %s (%s)", s_cp_lib.version, s_cp_lib.path);
    char *all = ak_sprintf ("%s; %s; %s", a, b, c);
    free (a);
    free (b);
    free (c);
    return all;
}

const char *ak_cuda_result_name (CUresult r, char *buf, size_t len)
{
    const char *name = NULL;
    if (s_drv_lib.handle && s_drv.cuGetErrorName
        && s_drv.cuGetErrorName (r, &name) == CUDA_SUCCESS && name)
        return name;
    snprintf (buf, len, "CUresult %d", (int) r);
    return buf;
}

bool ak_cuda_result_sticky (CUresult r)
{
    switch (r) {
        case CUDA_ERROR_ILLEGAL_ADDRESS:
        case CUDA_ERROR_MISALIGNED_ADDRESS:
        case CUDA_ERROR_LAUNCH_FAILED:
        case CUDA_ERROR_HARDWARE_STACK_ERROR:
        case CUDA_ERROR_ILLEGAL_INSTRUCTION:
        case CUDA_ERROR_INVALID_ADDRESS_SPACE:
        case CUDA_ERROR_INVALID_PC:
        case CUDA_ERROR_ASSERT:
        case CUDA_ERROR_LAUNCH_TIMEOUT:
        case CUDA_ERROR_ECC_UNCORRECTABLE:
        case CUDA_ERROR_CONTEXT_IS_DESTROYED:
        case CUDA_ERROR_UNKNOWN:
            return true;
        default:
            return false;
    }
}

int ak_cuda_check (CUresult r, const char *call, ak_err_t *err)
{
    if (r == CUDA_SUCCESS)
        return 0;
    char buf[32];
    const char *name = ak_cuda_result_name (r, buf, sizeof buf);
    const char *text = NULL;
    if (s_drv_lib.handle && s_drv.cuGetErrorString
        && s_drv.cuGetErrorString (r, &text) != CUDA_SUCCESS)
        text = NULL;
    int code;
    if (ak_cuda_result_sticky (r))
        code = AK_ECRASH;
    else {
        switch (r) {
            case CUDA_ERROR_OUT_OF_MEMORY:
                code = AK_ENOMEM;
                break;
            case CUDA_ERROR_NO_DEVICE:
            case CUDA_ERROR_NOT_INITIALIZED:
            case CUDA_ERROR_DEINITIALIZED:
            case CUDA_ERROR_SYSTEM_DRIVER_MISMATCH:
            case CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE:
            case CUDA_ERROR_DEVICE_UNAVAILABLE:
            case CUDA_ERROR_DEVICE_NOT_LICENSED:
            case CUDA_ERROR_STUB_LIBRARY:
            case CUDA_ERROR_SYSTEM_NOT_READY:
            case CUDA_ERROR_NOT_SUPPORTED:
                code = AK_EUNAVAIL;
                break;
            case CUDA_ERROR_NOT_FOUND:
                code = AK_ENOTFOUND;
                break;
            case CUDA_ERROR_INVALID_IMAGE:
            case CUDA_ERROR_NO_BINARY_FOR_GPU:
            case CUDA_ERROR_INVALID_PTX:
            case CUDA_ERROR_UNSUPPORTED_PTX_VERSION:
            case CUDA_ERROR_INVALID_SOURCE:
            case CUDA_ERROR_SHARED_OBJECT_INIT_FAILED:
            case CUDA_ERROR_SHARED_OBJECT_SYMBOL_NOT_FOUND:
                code = AK_ECOMPILE;
                break;
            case CUDA_ERROR_INVALID_VALUE:
            case CUDA_ERROR_INVALID_HANDLE:
            case CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES:
            case CUDA_ERROR_INVALID_DEVICE:
                code = AK_EINVAL;
                break;
            default:
                code = AK_EINTERNAL;
                break;
        }
    }
    if (text)
        return ak_err_set (err, code, "%s: %s (%s)", call, name, text);
    return ak_err_set (err, code, "%s: %s", call, name);
}

int ak_cuda_nvrtc_check (nvrtcResult r, const char *call, ak_err_t *err)
{
    if (r == NVRTC_SUCCESS)
        return 0;
    const char *name = s_nv_lib.handle && s_nv.nvrtcGetErrorString ? s_nv.nvrtcGetErrorString (r) : NULL;
    int code = r == NVRTC_ERROR_OUT_OF_MEMORY ? AK_ENOMEM
             : r == NVRTC_ERROR_COMPILATION ? AK_ECOMPILE : AK_EINTERNAL;
    if (name)
        return ak_err_set (err, code, "%s: %s", call, name);
    return ak_err_set (err, code, "%s: nvrtcResult %d", call, (int) r);
}

int ak_cuda_cupti_check (CUptiResult r, const char *call, ak_err_t *err)
{
    if (r == CUPTI_SUCCESS)
        return 0;
    const char *name = NULL;
    if (!(s_cp_lib.handle && s_cp.cuptiGetResultString
          && s_cp.cuptiGetResultString (r, &name) == CUPTI_SUCCESS && name))
        name = NULL;
    int code = r == CUPTI_ERROR_OUT_OF_MEMORY ? AK_ENOMEM
             : r == CUPTI_ERROR_INSUFFICIENT_PRIVILEGES ? AK_EDENIED
             : r == CUPTI_ERROR_NOT_SUPPORTED ? AK_EUNSUPPORTED : AK_EINTERNAL;
    if (name)
        return ak_err_set (err, code, "%s: %s", call, name);
    return ak_err_set (err, code, "%s: CUptiResult %d", call, (int) r);
}

#else  /* !AK_HAVE_CUDA */

static int s_absent (const char *what, ak_err_t *err)
{
    return ak_err_set (err, AK_EUNAVAIL, "%s: this akworker was built without CUDA headers "
                       "(cmake found no cuda.h, nvrtc.h, cupti.h)", what);
}

int ak_cuda_load_driver (ak_err_t *err) { return s_absent ("CUDA driver", err); }
int ak_cuda_load_nvrtc (ak_err_t *err)  { return s_absent ("NVRTC", err); }
int ak_cuda_load_cupti (ak_err_t *err)  { return s_absent ("CUPTI", err); }
const char *ak_cuda_driver_version_text (void) { return ""; }
const char *ak_cuda_nvrtc_version_text (void)  { return ""; }
const char *ak_cuda_cupti_version_text (void)  { return ""; }
const char *ak_cuda_nvrtc_path (void)          { return ""; }
const char *ak_cuda_cupti_path (void)          { return ""; }
const char *ak_cuda_nvrtc_file (void)          { return ""; }

char *ak_cuda_describe (void)
{
    return ak_strdup ("CUDA backend: not built (no CUDA headers at build time)");
}

#endif
