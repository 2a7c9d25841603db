/*  worker/backend_cuda_impl.h: what the files of the CUDA backend share;
    private to them (everyone else uses backend_cuda.h or the table).

    The backend's code runs in two processes:
    - the worker daemon: probe and compile (backend_cuda_daemon.c), never a
      context of its own beyond the probe's;
    - an executor child that owns one device: context, memory, launches and
      the CUPTI ring (backend_cuda_exec.c), timing samples, the event floor
      and the device's peaks (backend_cuda_timing.c).
    backend_cuda.c holds the table that joins the two sides, and the helpers
    both use.

    Never: include this outside worker/backend_cuda*.c, or call an executor
    function (anything taking an ak_dev_t) from the daemon. */
#ifndef AK_BACKEND_CUDA_IMPL_H
#define AK_BACKEND_CUDA_IMPL_H
#include "backend_cuda.h"

#include <stddef.h>

/* The source of the helper kernel a library marker's op needs
   (swiglu_mlp: ak_lib_silu_mul, built with the prelude like any kernel and
   appended to the artifact after the marker line), NULL for none
   (backend_cuda_lib.c; every build). */
const char *ak_cuda_lib_helper (const char *marker, size_t len);

#if AK_HAVE_CUDA
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "cuda_api.h"

#define AK_CUDA_COMPILE_MS    60000u            /* when the request gives 0 (AK_NVRTC_COMPILE_MS) */
#define AK_CUDA_CUBIN_MAX     (512u << 20)
#define AK_CUDA_FLUSH_MIN     (64u << 20)
/* Samples of each pass of the event floor calibration (ak_cuda_event_floor). */
#define AK_CUDA_FLOOR_SAMPLES 50
#define AK_CUPTI_BUF_BYTES    (1u << 20)
#define AK_CUPTI_RING         512
#define AK_CUDA_BLOCK_NS      100000000ull      /* the blocking kernel gives up after 100 ms */
#define AK_CUDA_PROBE_SLOTS   1024u             /* clock probe slots, by %smid */
#define AK_CUDA_WORDS         (8u + 3u * AK_CUDA_PROBE_SLOTS)   /* host-mapped u64 words */
#define AK_CUDA_THROTTLE      0.75              /* of the default SM clock: below, discard */

/* The host mirror of ak_cuda_args_t (kernels/ak_kernel_cuda.h). */
typedef struct {
    int64_t  dims[AK_MAX_DIMS];
    int32_t  ndims;
    uint64_t in[AK_MAX_BUFS];
    int32_t  nin;
    uint64_t out[AK_MAX_BUFS];
    int32_t  nout;
} ak_cuda_be_args_t;
_Static_assert (AK_MAX_DIMS == 8 && AK_MAX_BUFS == 8, "ak_kernel_cuda.h assumes 8 dims and 8 buffers");
_Static_assert (sizeof (ak_cuda_be_args_t) == 216, "ak_cuda_args_t is 216 bytes on the device");
_Static_assert (offsetof (ak_cuda_be_args_t, in) == 72 && offsetof (ak_cuda_be_args_t, nin) == 136
                && offsetof (ak_cuda_be_args_t, out) == 144 && offsetof (ak_cuda_be_args_t, nout) == 208,
                "ak_cuda_args_t layout");

struct ak_dev {
    const ak_cuda_driver_t *drv;
    int        ordinal;
    CUdevice   cudev;
    CUcontext  ctx;
    bool       ctx_retained;
    CUstream   stream;
    CUevent    ev_start, ev_stop;
    CUdeviceptr flush;
    size_t     flush_bytes;
    uint8_t    flush_value;
    int        sm_count;
    int        max_threads;                    /* per block, device limit */
    int        max_block[3], max_grid[3];
    int        max_shared, max_shared_optin;   /* per block: default, opt-in */
    bool       dead;                           /* a sticky error happened */
    char       dead_reason[256];
    /* CUPTI */
    bool       cupti_on;
    char       cupti_why[384];
    uint64_t   ext_seq;                        /* last external correlation id pushed */
    uint64_t   last_ext;                       /* that of the last launch; 0 none */
    unsigned   cupti_kinds;                    /* bit i: s_cupti_kinds[i] enabled */
    bool       kernel_trace_off;               /* CONCURRENT_KERNEL disabled by kernel_trace() */
    bool       floor_done;                     /* event floor calibrated (or tried) */
    int        floor_rc;                       /* its outcome; floor_why says why not */
    double     floor_us;
    char       floor_why[256];
    /* timing helpers (ak_cuda_be_timing_open) */
    CUmodule   help_mod;
    CUfunction fn_block, fn_probe, fn_tick, fn_flush;
    CUfunction fn_empty;                       /* ak_empty: event floor calibration; NULL none */
    volatile uint64_t *words;                  /* host-mapped, AK_CUDA_WORDS: see ak_cuda_be_timing_open */
    CUdeviceptr words_dev;
    bool       blocker_on;
    bool       read_flush;                     /* the L2 flush reads (ak_l2_flush), else memset */
    char       blocker_why[256];
    uint64_t   tick_ns;                        /* %globaltimer step */
    uint32_t   clock_mhz;                      /* default SM clock; 0 unknown */
    uint64_t   sample_seq;
    /* measured peaks (ak_cuda_device_peaks), once per device */
    bool       peaks_done;
    int        peaks_rc;
    ak_cuda_peaks_t peaks;
    char       peaks_why[256];
};

/* A vendor-library call standing in for a kernel (backend_cuda_lib.c). */
typedef struct ak_cuda_lib ak_cuda_lib_t;

struct ak_kernel {
    CUmodule   mod;
    CUfunction fn;
    int        regs, max_threads, static_shared;
    int        local_bytes;                    /* per thread: register spills and local arrays */
    ak_cuda_lib_t *lib;                        /* a library baseline: no module, no fn */
    int        dyn_shared_set;                 /* MAX_DYNAMIC_SHARED_SIZE_BYTES set to this */
    bool       warm;                           /* launched once without the blocker */
    char       symbol[AK_MAX_NAME + 1];
};

/* ------------------------------------------------ both sides (backend_cuda.c) */
/* "GPU-xxxxxxxx-..." of a device UUID, as nvidia-smi writes it. */
void ak_cuda_be_uuid_text (const CUuuid *u, char out[48]);
/* cuDeviceGetAttribute, the failure prefixed with what. */
int  ak_cuda_be_attr (const ak_cuda_driver_t *drv, CUdevice d, CUdevice_attribute a,
                      const char *what, int *v, ak_err_t *err);
/* CUDA_MODULE_LOADING=EAGER before the process's first cuInit (once). */
void ak_cuda_be_eager_modules (void);

/* -------------------------------------- daemon side (backend_cuda_daemon.c) */
/* The table's probe and compile (backend.h). */
int  ak_cuda_be_probe (Ak__Device ***devices_p, size_t *n_p, ak_err_t *err);
int  ak_cuda_be_compile (const ak_compile_req_t *req, ak_compile_out_t *out, ak_err_t *err);

/* ---------------------------------------- executor side (backend_cuda_exec.c) */
/* The table's open ... launch (backend.h). */
int  ak_cuda_be_open (const Ak__Device *device, ak_dev_t **dev_p, ak_err_t *err);
void ak_cuda_be_close (ak_dev_t **dev_p);
int  ak_cuda_be_load (ak_dev_t *dev, const char *artifact_path, const char *symbol,
                      ak_kernel_t **kernel_p, ak_err_t *err);
void ak_cuda_be_unload (ak_dev_t *dev, ak_kernel_t **kernel_p);
int  ak_cuda_be_alloc (ak_dev_t *dev, size_t bytes, void **buf_p, ak_err_t *err);
void ak_cuda_be_release (ak_dev_t *dev, void **buf_p);
int  ak_cuda_be_upload (ak_dev_t *dev, void *dst, const void *src, size_t bytes, ak_err_t *err);
int  ak_cuda_be_download (ak_dev_t *dev, void *dst, const void *src, size_t bytes, ak_err_t *err);
int  ak_cuda_be_fill (ak_dev_t *dev, void *dst, int byte, size_t bytes, ak_err_t *err);
int  ak_cuda_be_launch (ak_dev_t *dev, ak_kernel_t *kernel, const ak_launch_t *args, ak_err_t *err);

/* Every executor call starts here: AK_ECRASH on a dead context, else the
   context made current for the calling thread. */
int  ak_cuda_be_enter (ak_dev_t *dev, ak_err_t *err);
/* ak_cuda_check, and a sticky error marks the context dead. */
int  ak_cuda_be_cu (ak_dev_t *dev, CUresult r, const char *call, ak_err_t *err);
/* The launch configuration of l checked against the device and the kernel. */
int  ak_cuda_be_check_launch (ak_dev_t *dev, ak_kernel_t *k, const ak_launch_t *l, ak_err_t *err);
/* l's dims and buffers as the kernel's by-value argument block. */
void ak_cuda_be_pack (const ak_launch_t *l, ak_cuda_be_args_t *a);
/* Queues fn on the device's stream (not waited for). */
int  ak_cuda_be_enqueue (ak_dev_t *dev, CUfunction fn, const uint32_t grid[3],
                         const uint32_t block[3], uint32_t shared, void **params, ak_err_t *err);
/* Waits for the device's stream. */
int  ak_cuda_be_sync (ak_dev_t *dev, ak_err_t *err);

/* The kernel parameters of one launch: the argument block, then the
   tensor maps encoded over the launch's buffers (ABI 2). */
typedef struct {
    ak_cuda_be_args_t a;
    CUtensorMap maps[AK_MAX_TMAPS];
    void       *params[1 + AK_MAX_TMAPS];
} ak_cuda_be_params_t;
/* Packs l into p and encodes its tensor maps (cuTensorMapEncodeTiled);
   a map the rules or the driver refuse is AK_EINVAL "invalid_config: ...
   rule ...", before any launch. */
int  ak_cuda_be_prepare (ak_dev_t *dev, ak_kernel_t *k, const ak_launch_t *l, ak_cuda_be_params_t *p,
                         ak_err_t *err);
/* What every launch of k does first: ak_cuda_be_enter, then
   ak_cuda_be_check_launch and ak_cuda_be_prepare into p; the first
   failure. */
int  ak_cuda_be_begin_launch (ak_dev_t *dev, ak_kernel_t *k, const ak_launch_t *l, ak_cuda_be_params_t *p,
                              ak_err_t *err);
/* Queues k with p on the stream (not waited for): the library call, a
   cluster launch (cuLaunchKernelEx) or cuLaunchKernel; correlate: inside
   an external correlation id for CUPTI, as ak_cuda_be_enqueue. */
int  ak_cuda_be_enqueue_kernel (ak_dev_t *dev, ak_kernel_t *k, const ak_launch_t *l, ak_cuda_be_params_t *p,
                                bool correlate, ak_err_t *err);

/* ------------------------------------ executor side (backend_cuda_lib.c) */
/* The library call of a marker artifact (spec_cuda.h): AK_EUNAVAIL
   "cuBLASLt not found: tried ..." where the library is missing. */
int  ak_cuda_lib_open (ak_dev_t *dev, const char *marker, size_t len, ak_cuda_lib_t **lib_p, ak_err_t *err);
void ak_cuda_lib_close (ak_dev_t *dev, ak_cuda_lib_t **lib_p);
/* Starts opening cuBLASLt (a dlopen of 540 MB: seconds where it is read
   from disk) on a thread of its own, once a process, so that the first
   library baseline finds it open instead of stalling the executor;
   ak_cuda_lib_open waits for it where it is still under way.  Nothing
   else of cuBLASLt runs there (no handle, no device work).
   AK_CUDA_LIB_PRELOAD=0: nothing. */
void ak_cuda_lib_preload (void);
/* Waits for that thread, if one was started and not yet waited for.  A
   process must not exit while the thread is inside the dlopen: exit()
   then runs the exit handlers that cuBLASLt's initializers have just
   registered while those initializers still run on the other thread, and
   they crash (SIGSEGV, exit status 139; bench_compute_ops failing within
   a second of opening the device on the H200, and a thread dlopen'ing
   libcublasLt.so.13 while main returns, on a CPU host, 50-200 ms into
   the load).  An exit handler of ours cannot prevent it (the library's
   own handlers, registered later, run first), so the device's close
   waits (ak_cuda_be_close). */
void ak_cuda_lib_preload_wait (void);
/* Whether the call is planned for l's shape and dtype already (its
   kernels then ran once: the sample path runs a library call once
   without the blocking kernel for every new shape, as it does a module). */
bool ak_cuda_lib_ready (const ak_cuda_lib_t *lib, const ak_launch_t *l);
/* Queues the call for l's shape, dtype and buffers on dev's stream. */
int  ak_cuda_lib_enqueue (ak_dev_t *dev, ak_cuda_lib_t *lib, const ak_launch_t *l, ak_err_t *err);

/* ------------------------------------ executor side (backend_cuda_timing.c) */
/* The table's time and sample (backend.h). */
int  ak_cuda_be_time (ak_dev_t *dev, ak_kernel_t *kernel, const ak_launch_t *args, bool cold,
                      double *us, ak_err_t *err);
int  ak_cuda_be_sample (ak_dev_t *dev, ak_kernel_t *kernel, const ak_launch_t *args, bool cold,
                        ak_sample_t *out, ak_err_t *err);
/* Loads the timing helper kernels and the host-mapped words at open. */
int  ak_cuda_be_timing_open (ak_dev_t *dev, ak_err_t *err);

#endif
#endif
