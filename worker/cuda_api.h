/*  worker/cuda_api.h: libcuda, NVRTC and CUPTI, opened with dlopen.

    The worker never links any of the three, so one akworker binary starts
    on hosts with and without a GPU and says which backends it has.  Each
    library is opened once per process (pthread_once) the first time it is
    asked for; after that its table of entry points is read-only and every
    thread may use it.

    - libcuda.so.1: entry points through cuGetProcAddress (looked up itself
      with dlsym), each asked for at the API version whose prototype we call
      (the PFN_..._vNNNN typedefs of cudaTypedefs.h), so a driver newer than
      our headers never hands us a function with another signature; plain
      dlsym of the exported versioned names when cuGetProcAddress is absent.
      Drivers older than the CUDA major version of our headers are refused.
    - libnvrtc.so.<major> (then libnvrtc.so), also searched in $CUDA_HOME,
      the toolkit CMake found and /usr/local/cuda; NVRTC older than our
      headers is refused.
    - libcupti.so.<major> (then libcupti.so), also in .../extras/CUPTI/lib64;
      optional: the CUDA backend times with events when it is missing.

    Never: call into a library that did not load, or treat a missing
    library as anything but AK_EUNAVAIL with a reason a person can act on
    ("libcuda.so.1: cannot open shared object file: No such file or
    directory"). */
#ifndef AK_CUDA_API_H
#define AK_CUDA_API_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "error.h"

#ifndef AK_HAVE_CUDA
#define AK_HAVE_CUDA 0
#endif

/*  Opens the library on first call (thread-safe) and answers whether it is
    usable: 0, or AK_EUNAVAIL with err saying what is missing or too old.
    Without CUDA headers at build time every one answers AK_EUNAVAIL. */
int ak_cuda_load_driver (ak_err_t *err);
int ak_cuda_load_nvrtc (ak_err_t *err);
int ak_cuda_load_cupti (ak_err_t *err);

/*  Version texts of the loaded libraries, "" when not loaded:
    driver "13.0" (the CUDA API version of cuDriverGetVersion), NVRTC
    "13.0", CUPTI "13.0.1" (cuptiGetVersion 130001) or "api 18" for the old
    small numbers.  The path each library was opened from, for logs. */
const char *ak_cuda_driver_version_text (void);
const char *ak_cuda_nvrtc_version_text (void);
const char *ak_cuda_cupti_version_text (void);
const char *ak_cuda_nvrtc_path (void);
const char *ak_cuda_cupti_path (void);
/*  The NVRTC library file the loader mapped, as an absolute path (what the
    compile helper ak-nvrtc must load: worker/nvrtc_run.h); "" when NVRTC
    is not loaded or the loader cannot say. */
const char *ak_cuda_nvrtc_file (void);

/*  One line for start-up logs: what loaded and what did not, e.g.
    "libcuda: libcuda.so.1: cannot open ...; NVRTC 13.0 (/usr/local/...);
    CUPTI 13.0.1 (...)".  Loads all three.  Caller frees. */
char *ak_cuda_describe (void);

#if AK_HAVE_CUDA
#include <cuda.h>
#include <cudaTypedefs.h>
#include <nvrtc.h>
#include <cupti.h>
/* The range profiler (CUDA 13 API).  cupti_profiler_host.h includes the
   C++ header <string> without using it; CMake puts an empty `string` in a
   SYSTEM include folder of its own (build/cupti_c_shim) so C can read it. */
#include <cupti_target.h>
#include <cupti_profiler_target.h>
#include <cupti_range_profiler.h>
#include <cupti_profiler_host.h>

/* Driver entry points: (name, API version of the prototype we call, the
   versioned symbol libcuda exports, for the dlsym fallback). */
#define AK_CUDA_DRIVER_FNS(X)                                                  \
    X (cuGetErrorName,            6000,  "cuGetErrorName")                     \
    X (cuGetErrorString,          6000,  "cuGetErrorString")                   \
    X (cuInit,                    2000,  "cuInit")                             \
    X (cuDriverGetVersion,        2020,  "cuDriverGetVersion")                 \
    X (cuDeviceGetCount,          2000,  "cuDeviceGetCount")                   \
    X (cuDeviceGet,               2000,  "cuDeviceGet")                        \
    X (cuDeviceGetName,           2000,  "cuDeviceGetName")                    \
    X (cuDeviceGetUuid,           11040, "cuDeviceGetUuid_v2")                 \
    X (cuDeviceGetAttribute,      2000,  "cuDeviceGetAttribute")               \
    X (cuDeviceTotalMem,          3020,  "cuDeviceTotalMem_v2")                \
    X (cuDevicePrimaryCtxRetain,  7000,  "cuDevicePrimaryCtxRetain")           \
    X (cuDevicePrimaryCtxRelease, 11000, "cuDevicePrimaryCtxRelease_v2")       \
    X (cuCtxSetCurrent,           4000,  "cuCtxSetCurrent")                    \
    X (cuCtxSynchronize,          2000,  "cuCtxSynchronize")                   \
    X (cuModuleLoadData,          2000,  "cuModuleLoadData")                   \
    X (cuModuleUnload,            2000,  "cuModuleUnload")                     \
    X (cuModuleGetFunction,       2000,  "cuModuleGetFunction")                \
    X (cuFuncGetAttribute,        2020,  "cuFuncGetAttribute")                 \
    X (cuFuncSetAttribute,        9000,  "cuFuncSetAttribute")                 \
    X (cuMemAlloc,                3020,  "cuMemAlloc_v2")                      \
    X (cuMemFree,                 3020,  "cuMemFree_v2")                       \
    X (cuMemcpyHtoD,              3020,  "cuMemcpyHtoD_v2")                    \
    X (cuMemcpyDtoH,              3020,  "cuMemcpyDtoH_v2")                    \
    X (cuMemsetD8Async,           3020,  "cuMemsetD8Async")                    \
    X (cuMemcpyDtoDAsync,         3020,  "cuMemcpyDtoDAsync_v2")               \
    X (cuMemGetInfo,              3020,  "cuMemGetInfo_v2")                    \
    X (cuMemHostAlloc,            2020,  "cuMemHostAlloc")                     \
    X (cuMemHostGetDevicePointer, 3020,  "cuMemHostGetDevicePointer_v2")       \
    X (cuMemFreeHost,             2000,  "cuMemFreeHost")                      \
    X (cuLaunchKernel,            4000,  "cuLaunchKernel")                     \
    X (cuLaunchKernelEx,          11060, "cuLaunchKernelEx")                   \
    X (cuTensorMapEncodeTiled,    12000, "cuTensorMapEncodeTiled")             \
    X (cuStreamCreate,            2000,  "cuStreamCreate")                     \
    X (cuStreamDestroy,           4000,  "cuStreamDestroy_v2")                 \
    X (cuStreamSynchronize,       2000,  "cuStreamSynchronize")                \
    X (cuEventCreate,             2000,  "cuEventCreate")                      \
    X (cuEventDestroy,            4000,  "cuEventDestroy_v2")                  \
    X (cuEventRecord,             2000,  "cuEventRecord")                      \
    X (cuEventSynchronize,        2000,  "cuEventSynchronize")                 \
    X (cuEventElapsedTime,        12080, "cuEventElapsedTime_v2")                \
    X (cuCtxGetCurrent,           4000,  "cuCtxGetCurrent")

/* Member names go through cuda.h's macros (cuMemAlloc -> cuMemAlloc_v2) in
   the declaration and in every use alike, so `drv->cuMemAlloc (...)` reads
   as the API does. */
#define AK_CUDA_DRIVER_MEMBER(name, ver, sym) PFN_##name##_v##ver name;
typedef struct {
    int driver_version;                /* cuDriverGetVersion: 13000 */
    bool via_proc_address;             /* cuGetProcAddress_v2 was found */
    int  dlsym_fallbacks;              /* entry points it did not give, taken with dlsym */
    AK_CUDA_DRIVER_FNS (AK_CUDA_DRIVER_MEMBER)
} ak_cuda_driver_t;

#define AK_CUDA_NVRTC_FNS(X)                                                   \
    X (nvrtcGetErrorString) X (nvrtcVersion) X (nvrtcGetNumSupportedArchs)     \
    X (nvrtcGetSupportedArchs) X (nvrtcCreateProgram) X (nvrtcDestroyProgram)  \
    X (nvrtcCompileProgram) X (nvrtcGetProgramLogSize) X (nvrtcGetProgramLog)  \
    X (nvrtcGetCUBINSize) X (nvrtcGetCUBIN)
#define AK_CUDA_SAME_MEMBER(name) __typeof__ (&name) name;
typedef struct {
    int major, minor;                  /* nvrtcVersion */
    int archs[64];                     /* nvrtcGetSupportedArchs: 75, 80, ... 90 ... */
    int narchs;
    AK_CUDA_NVRTC_FNS (AK_CUDA_SAME_MEMBER)
} ak_cuda_nvrtc_t;

#define AK_CUDA_CUPTI_FNS(X)                                                   \
    X (cuptiGetVersion) X (cuptiGetResultString) X (cuptiActivityEnable)       \
    X (cuptiActivityDisable) X (cuptiActivityRegisterCallbacks)                \
    X (cuptiActivityFlushAll) X (cuptiActivityGetNextRecord)                   \
    X (cuptiActivityGetNumDroppedRecords)                                      \
    X (cuptiActivityPushExternalCorrelationId)                                 \
    X (cuptiActivityPopExternalCorrelationId)
typedef struct {
    uint32_t version;                  /* cuptiGetVersion: 130001 */
    AK_CUDA_CUPTI_FNS (AK_CUDA_SAME_MEMBER)
} ak_cuda_cupti_t;

/* The CUPTI range profiler and profiler host entry points
   (worker/profiler_cuda.c).  Resolved with the rest of CUPTI but optional:
   a CUPTI without them still traces, and ak_cuda_profiler says why not. */
#define AK_CUDA_PROFILER_FNS(X)                                                \
    X (cuptiProfilerInitialize) X (cuptiProfilerDeInitialize)                  \
    X (cuptiProfilerDeviceSupported) X (cuptiDeviceGetChipName)                \
    X (cuptiProfilerGetCounterAvailability)                                    \
    X (cuptiRangeProfilerEnable) X (cuptiRangeProfilerDisable)                 \
    X (cuptiRangeProfilerGetCounterDataSize)                                   \
    X (cuptiRangeProfilerCounterDataImageInitialize)                           \
    X (cuptiRangeProfilerSetConfig) X (cuptiRangeProfilerStart)                \
    X (cuptiRangeProfilerStop) X (cuptiRangeProfilerDecodeData)                \
    X (cuptiRangeProfilerGetCounterDataInfo)                                   \
    X (cuptiProfilerHostInitialize) X (cuptiProfilerHostDeinitialize)          \
    X (cuptiProfilerHostConfigAddMetrics)                                      \
    X (cuptiProfilerHostGetConfigImageSize) X (cuptiProfilerHostGetConfigImage) \
    X (cuptiProfilerHostGetNumOfPasses) X (cuptiProfilerHostEvaluateToGpuValues)
typedef struct {
    AK_CUDA_PROFILER_FNS (AK_CUDA_SAME_MEMBER)
} ak_cuda_profiler_t;

/*  The loaded tables (borrowed, valid for the life of the process), or
    AK_EUNAVAIL as the ak_cuda_load_ functions say. */
int ak_cuda_driver (const ak_cuda_driver_t **drv_p, ak_err_t *err);
int ak_cuda_nvrtc (const ak_cuda_nvrtc_t **nv_p, ak_err_t *err);
int ak_cuda_cupti (const ak_cuda_cupti_t **cp_p, ak_err_t *err);
/*  The range profiler's entry points: AK_EUNAVAIL when CUPTI did not load
    or lacks one of them (err names the symbol). */
int ak_cuda_profiler (const ak_cuda_profiler_t **pf_p, ak_err_t *err);

/*  "CUDA_ERROR_ILLEGAL_ADDRESS" (cuGetErrorName when the driver is loaded,
    else "CUresult 700"); never NULL.  buf holds the fallback text. */
const char *ak_cuda_result_name (CUresult r, char *buf, size_t len);

/*  True for the errors that leave the context unusable (illegal or
    misaligned address, launch failure, illegal instruction, trap ...): the
    process that owns the context has to go. */
bool ak_cuda_result_sticky (CUresult r);

/*  0 for CUDA_SUCCESS; else fills err with "call: CUDA_ERROR_X (text)" and
    returns the matching code: AK_ECRASH for sticky errors, AK_ENOMEM,
    AK_EUNAVAIL (no device, driver too old ...), AK_ENOTFOUND,
    AK_ECOMPILE (bad or foreign image), AK_EINVAL, else AK_EINTERNAL. */
int ak_cuda_check (CUresult r, const char *call, ak_err_t *err);

/*  The same for NVRTC ("nvrtcCreateProgram: NVRTC_ERROR_OUT_OF_MEMORY") and
    CUPTI ("cuptiActivityEnable: CUPTI_ERROR_NOT_INITIALIZED"). */
int ak_cuda_nvrtc_check (nvrtcResult r, const char *call, ak_err_t *err);
int ak_cuda_cupti_check (CUptiResult r, const char *call, ak_err_t *err);
#endif

#endif
