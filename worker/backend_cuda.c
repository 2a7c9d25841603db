/*  worker/backend_cuda.c: the CUDA backend.

    Kernels are CUDA C++ sources compiled by NVRTC to CUBIN for the
    device's exact sm_XY and run through the driver API; libcuda, NVRTC and
    CUPTI come from worker/cuda_api.c (dlopen, never linked).

    Daemon side: probe lists every device (name, UUID, compute capability,
    SMs, memory, L2, clocks, driver / NVRTC / CUPTI versions) with its
    device class "<name>/sm_XY/drv<major>/nvrtc<maj.min>"; compile prepends
    the embedded prelude (kernels/ak_kernel_cuda.h) and runs NVRTC in a
    forked child under the time limit, into cache_dir/<key>.cubin.
    Executor side: the device's primary context, one blocking stream, two
    events, an L2 flush buffer; launches with the single by-value argument
    block ak_cuda_args_t; CUPTI activity records (when CUPTI loads) give
    per-kernel device durations next to the event timings.

    Never: link a CUDA library, leave a half-written CUBIN where a reader
    could load it, trust a define name, or keep using a context after a
    sticky error (every later call answers AK_ECRASH: the executor must be
    replaced). */
#include "backend_cuda.h"
#include "cuda_api.h"
#include "clock.h"
#include "digest.h"
#include "log.h"
#include "util.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

extern const char ak_prelude_cuda[];
extern const size_t ak_prelude_cuda_len;

#ifndef AK_CUDA_ROOT_DIR
#define AK_CUDA_ROOT_DIR "/usr/local/cuda"
#endif

/* ================================================== compile plan (always) */

static bool s_is_identifier (const char *s)
{
    if (!s || !(isalpha ((unsigned char) s[0]) || s[0] == '_'))
        return false;
    for (size_t i = 0; s[i]; i++) {
        if (i >= AK_MAX_NAME)
            return false;
        if (!(isalnum ((unsigned char) s[i]) || s[i] == '_'))
            return false;
    }
    return true;
}

/*  Facts every key depends on, computed once per process: the prelude
    digest, the toolkit include folder for the half-precision headers and
    the digest of those headers' text (a toolkit update changes them). */
static pthread_once_t s_facts_once = PTHREAD_ONCE_INIT;
static char s_prelude_digest[65];
static char s_include_dir[400];
static char s_headers_digest[65];

static void s_facts_init (void)
{
    ak_sha256_hex (ak_prelude_cuda, ak_prelude_cuda_len, s_prelude_digest);
    const char *roots[] = { getenv ("CUDA_HOME"), getenv ("CUDA_PATH"), AK_CUDA_ROOT_DIR,
                            "/usr/local/cuda" };
    const char *files[] = { "cuda_fp16.h", "cuda_fp16.hpp", "cuda_bf16.h", "cuda_bf16.hpp" };
    for (size_t r = 0; r < sizeof roots / sizeof roots[0]; r++) {
        if (!roots[r] || !roots[r][0])
            continue;
        char dir[400];
        snprintf (dir, sizeof dir, "%s/include", roots[r]);
        ak_sha256_t ctx;
        ak_sha256_init (&ctx);
        bool all = true;
        for (size_t f = 0; f < sizeof files / sizeof files[0] && all; f++) {
            char *path = ak_path_join (dir, files[f]);
            char *text = NULL;
            size_t len = 0;
            if (ak_file_read (path, 16u << 20, &text, &len, NULL) == 0)
                ak_sha256_update (&ctx, text, len);
            else
                all = false;
            free (text);
            free (path);
        }
        if (all) {
            snprintf (s_include_dir, sizeof s_include_dir, "%s", dir);
            ak_sha256_final_hex (&ctx, s_headers_digest);
            return;
        }
        ak_sha256_final_hex (&ctx, s_headers_digest);   /* discard */
        s_headers_digest[0] = '\0';
    }
}

const char *ak_cuda_include_dir (void)
{
    pthread_once (&s_facts_once, s_facts_init);
    return s_include_dir[0] ? s_include_dir : NULL;
}

/*  Appends one option line to *s. */
static void s_opt (char **s, const char *line)
{
    char *t = ak_sprintf ("%s%s%s", *s ? *s : "", *s && **s ? "\n" : "", line);
    free (*s);
    *s = t;
}

int ak_cuda_options (const ak_compile_req_t *req, int cc_major, int cc_minor,
                     const char *include_dir, char **options_p, ak_err_t *err)
{
    *options_p = NULL;
    if (!req)
        return ak_err_set (err, AK_EINVAL, "cuda compile: no request");
    if (cc_major < 1 || cc_major > 99 || cc_minor < 0 || cc_minor > 9)
        return ak_err_set (err, AK_EINVAL, "cuda compile: compute capability %d.%d is not a target",
                           cc_major, cc_minor);
    if (req->ndefines < 0 || req->ndefines > AK_MAX_PARAMS)
        return ak_err_set (err, AK_EINVAL, "cuda compile: %d defines, limit %d", req->ndefines, AK_MAX_PARAMS);
    for (int i = 0; i < req->ndefines; i++) {
        const char *name = req->define_names[i];
        if (!s_is_identifier (name))
            return ak_err_set (err, AK_EINVAL, "parameter name '%.64s' is not a C identifier",
                               name ? name : "(null)");
        if (strncmp (name, "AK_", 3) == 0 || strcmp (name, "ak_t") == 0 || strncmp (name, "__", 2) == 0)
            return ak_err_set (err, AK_EINVAL, "parameter name '%s' is reserved", name);
    }
    const char *dtype_define = NULL;
    if (!req->reference) {
        switch (req->dtype) {
            case AK_DT_FLOAT16:  dtype_define = "-DAK_DTYPE_FLOAT16=1"; break;
            case AK_DT_BFLOAT16: dtype_define = "-DAK_DTYPE_BFLOAT16=1"; break;
            case AK_DT_FLOAT32:  dtype_define = "-DAK_DTYPE_FLOAT32=1"; break;
            default:
                return ak_err_set (err, AK_EINVAL, "cuda compile: unknown dtype %d", (int) req->dtype);
        }
        if (req->dtype != AK_DT_FLOAT32 && !include_dir)
            return ak_err_set (err, AK_EUNSUPPORTED,
                               "%s kernels need the toolkit's cuda_fp16.h and cuda_bf16.h (NVRTC 13.0 "
                               "has no built-in copies): none under $CUDA_HOME/include, %s/include or "
                               "/usr/local/cuda/include", ak_dtype_name (req->dtype), AK_CUDA_ROOT_DIR);
    }

    char *s = NULL;
    char line[512];
    snprintf (line, sizeof line, "--gpu-architecture=sm_%d%d", cc_major, cc_minor);
    s_opt (&s, line);
    s_opt (&s, "--std=c++17");
    if (include_dir) {
        snprintf (line, sizeof line, "--include-path=%s", include_dir);
        s_opt (&s, line);
        s_opt (&s, "-DAK_CUDA_HALF=1");
    }
    s_opt (&s, req->reference ? "-DAK_REFERENCE=1" : dtype_define);
    for (int i = 0; i < req->ndefines; i++) {
        snprintf (line, sizeof line, "-D%s=%" PRId64, req->define_names[i], req->define_values[i]);
        s_opt (&s, line);
    }
    *options_p = s;
    return 0;
}

static void s_sha_part (ak_sha256_t *ctx, const void *data, size_t len)
{
    char hdr[32];
    int n = snprintf (hdr, sizeof hdr, "%zu:", len);
    ak_sha256_update (ctx, hdr, (size_t) n);
    ak_sha256_update (ctx, data, len);
}

void ak_cuda_cache_key (const char *source, size_t source_len, const char *options,
                        const char *arch, const char *nvrtc_version,
                        const char *headers_digest, char key[65])
{
    pthread_once (&s_facts_once, s_facts_init);
    const char *parts[] = { options ? options : "", arch ? arch : "",
                            nvrtc_version ? nvrtc_version : "", headers_digest ? headers_digest : "" };
    ak_sha256_t ctx;
    ak_sha256_init (&ctx);
    /* The tag stands for how s_compile lays out the text NVRTC sees (the
       #line lines around the prelude): change it when that changes. */
    s_sha_part (&ctx, "akfleet-cuda-1", 14);
    s_sha_part (&ctx, s_prelude_digest, 64);
    s_sha_part (&ctx, source ? source : "", source ? source_len : 0);
    for (size_t i = 0; i < sizeof parts / sizeof parts[0]; i++)
        s_sha_part (&ctx, parts[i], strlen (parts[i]));
    ak_sha256_final_hex (&ctx, key);
}

#if AK_HAVE_CUDA

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdatomic.h>
#include <stddef.h>
#include <sys/types.h>
#include <sys/wait.h>

#define AK_CUDA_COMPILE_MS    60000u            /* when the request gives 0 */
#define AK_CUDA_LOG_MAX       (256u * 1024)     /* NVRTC log kept */
#define AK_CUDA_CUBIN_MAX     (512u << 20)
#define AK_CUDA_FLUSH_MIN     (64u << 20)
#define AK_CUDA_ERR_MARK      "\n@@akworker-error@@ "
#define AK_CUPTI_BUF_BYTES    (1u << 20)
#define AK_CUPTI_RING         128

/* The host mirror of ak_cuda_args_t (kernels/ak_kernel_cuda.h). */
typedef struct {
    int64_t  dims[AK_MAX_DIMS];
    int32_t  ndims;
    uint64_t in[AK_MAX_BUFS];
    int32_t  nin;
    uint64_t out[AK_MAX_BUFS];
    int32_t  nout;
} s_args_t;
_Static_assert (AK_MAX_DIMS == 8 && AK_MAX_BUFS == 8, "ak_kernel_cuda.h assumes 8 dims and 8 buffers");
_Static_assert (sizeof (s_args_t) == 216, "ak_cuda_args_t is 216 bytes on the device");
_Static_assert (offsetof (s_args_t, in) == 72 && offsetof (s_args_t, nin) == 136
                && offsetof (s_args_t, out) == 144 && offsetof (s_args_t, nout) == 208,
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
};

struct ak_kernel {
    CUmodule   mod;
    CUfunction fn;
    int        regs, max_threads, static_shared;
    int        dyn_shared_set;                 /* MAX_DYNAMIC_SHARED_SIZE_BYTES set to this */
    char       symbol[AK_MAX_NAME + 1];
};

/* ================================================================ probe */

/*  Driver release from /proc/driver/nvidia/version ("NVRM version: NVIDIA
    UNIX x86_64 Kernel Module  580.95.05  ..."): the first token made of
    digits and dots with at least one dot.  False when unreadable. */
static bool s_kernel_driver_release (char *buf, size_t len)
{
    char *text = NULL;
    size_t n = 0;
    bool found = false;
    if (ak_file_read ("/proc/driver/nvidia/version", 64 * 1024, &text, &n, NULL) != 0)
        return false;
    char *line_end = strchr (text, '\n');
    if (line_end)
        *line_end = '\0';
    char *save = NULL;
    for (char *tok = strtok_r (text, " \t", &save); tok; tok = strtok_r (NULL, " \t", &save)) {
        size_t tl = strlen (tok);
        bool digits = tl > 0 && isdigit ((unsigned char) tok[0]) && strchr (tok, '.');
        for (size_t i = 0; digits && i < tl; i++)
            if (!isdigit ((unsigned char) tok[i]) && tok[i] != '.')
                digits = false;
        if (digits && tl < len) {
            memcpy (buf, tok, tl + 1);
            found = true;
            break;
        }
    }
    free (text);
    return found;
}

static void s_uuid_text (const CUuuid *u, char out[48])
{
    const unsigned char *b = (const unsigned char *) u->bytes;
    snprintf (out, 48, "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x",
              b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11],
              b[12], b[13], b[14], b[15]);
}

static int s_attr (const ak_cuda_driver_t *drv, CUdevice d, CUdevice_attribute a, const char *what,
                   int *v, ak_err_t *err)
{
    int rc = ak_cuda_check (drv->cuDeviceGetAttribute (v, a, d), "cuDeviceGetAttribute", err);
    if (rc)
        ak_err_prefix (err, "%s", what);
    return rc;
}

static atomic_flag s_said_hello = ATOMIC_FLAG_INIT;

/*  Every device the driver lists (see backend.h).  NVRTC is required (a
    CUDA worker that cannot compile is of no use); CUPTI is not. */
static int s_probe (Ak__Device ***devices_p, size_t *n_p, ak_err_t *err)
{
    int rc = 0;
    Ak__Device **arr = NULL;
    int count = 0, made = 0;
    const ak_cuda_driver_t *drv = NULL;
    const ak_cuda_nvrtc_t *nv = NULL;

    if (!devices_p || !n_p)
        return ak_err_set (err, AK_EINVAL, "cuda probe: no output");
    *devices_p = NULL;
    *n_p = 0;
    if ((rc = ak_cuda_driver (&drv, err)) != 0 || (rc = ak_cuda_nvrtc (&nv, err)) != 0)
        return rc;
    ak_err_t cerr = { 0 };
    bool have_cupti = ak_cuda_load_cupti (&cerr) == 0;
    if (!atomic_flag_test_and_set (&s_said_hello)) {
        char *what = ak_cuda_describe ();
        ak_info ("cuda backend: %s", what);
        free (what);
    }
    if ((rc = ak_cuda_check (drv->cuInit (0), "cuInit", err)) != 0)
        return rc;
    if ((rc = ak_cuda_check (drv->cuDeviceGetCount (&count), "cuDeviceGetCount", err)) != 0)
        return rc;
    if (count <= 0)
        return ak_err_set (err, AK_EUNAVAIL, "cuDeviceGetCount: no CUDA devices");

    char release[64] = "", drv_seg[80];
    const char *drv_text = ak_cuda_driver_version_text ();
    if (s_kernel_driver_release (release, sizeof release))
        snprintf (drv_seg, sizeof drv_seg, "drv%.*s", (int) strcspn (release, "."), release);
    else
        snprintf (drv_seg, sizeof drv_seg, "cuda%s", drv_text);

    arr = ak_calloc ((size_t) count, sizeof *arr);
    for (int i = 0; i < count; i++) {
        CUdevice d = 0;
        char name[256] = "", uuid[48];
        CUuuid u;
        size_t mem = 0;
        int ccmaj = 0, ccmin = 0, sms = 0, l2 = 0, clk = 0, mclk = 0;
        if ((rc = ak_cuda_check (drv->cuDeviceGet (&d, i), "cuDeviceGet", err)) != 0
            || (rc = ak_cuda_check (drv->cuDeviceGetName (name, (int) sizeof name - 1, d),
                                    "cuDeviceGetName", err)) != 0
            || (rc = ak_cuda_check (drv->cuDeviceGetUuid (&u, d), "cuDeviceGetUuid", err)) != 0
            || (rc = ak_cuda_check (drv->cuDeviceTotalMem (&mem, d), "cuDeviceTotalMem", err)) != 0
            || (rc = s_attr (drv, d, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, "cc major", &ccmaj, err)) != 0
            || (rc = s_attr (drv, d, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, "cc minor", &ccmin, err)) != 0
            || (rc = s_attr (drv, d, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, "SM count", &sms, err)) != 0
            || (rc = s_attr (drv, d, CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE, "L2 size", &l2, err)) != 0) {
            ak_err_prefix (err, "device %d", i);
            goto fail;
        }
        /* Clocks are informative; CUDA 13 keeps the attributes, but a
           driver that refuses them costs us nothing but the figure. */
        ak_err_t soft = { 0 };
        if (s_attr (drv, d, CU_DEVICE_ATTRIBUTE_CLOCK_RATE, "clock rate", &clk, &soft) != 0) {
            ak_debug ("cuda device %d: %s", i, soft.msg);
            clk = 0;
        }
        if (s_attr (drv, d, CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE, "memory clock", &mclk, &soft) != 0) {
            ak_debug ("cuda device %d: %s", i, soft.msg);
            mclk = 0;
        }
        s_uuid_text (&u, uuid);
        name[sizeof name - 1] = '\0';

        Ak__Device *dv = ak_malloc (sizeof *dv);
        ak__device__init (dv);
        dv->index = (uint32_t) i;
        dv->backend = ak_strdup ("cuda");
        dv->name = ak_strdup (name);
        dv->uuid = ak_strdup (uuid);
        dv->cc_major = (uint32_t) ccmaj;
        dv->cc_minor = (uint32_t) ccmin;
        dv->sm_count = (uint32_t) sms;
        dv->mem_bytes = (uint64_t) mem;
        dv->l2_bytes = (uint64_t) (l2 > 0 ? l2 : 0);
        dv->clock_khz = (uint32_t) (clk > 0 ? clk : 0);
        dv->mem_clock_khz = (uint32_t) (mclk > 0 ? mclk : 0);
        dv->driver_version = release[0] ? ak_strdup (release) : ak_sprintf ("cuda%s", drv_text);
        dv->nvrtc_version = ak_strdup (ak_cuda_nvrtc_version_text ());
        dv->cupti_version = ak_strdup (have_cupti ? ak_cuda_cupti_version_text () : "");
        dv->device_class = ak_sprintf ("%s/sm_%d%d/%s/nvrtc%s", name, ccmaj, ccmin, drv_seg,
                                       ak_cuda_nvrtc_version_text ());
        dv->slots = 1;
        arr[made++] = dv;
    }
    *devices_p = arr;
    *n_p = (size_t) made;
    return 0;

fail:
    for (int i = 0; i < made; i++)
        ak__device__free_unpacked (arr[i], NULL);
    free (arr);
    return rc;
}

/* ============================================================== compile */

/*  Captured child output, bounded. */
typedef struct {
    char  *data;
    size_t len, cap;
    bool   truncated;
} s_buf_t;

static void s_buf_add (s_buf_t *b, const char *p, size_t n)
{
    if (b->len + n > AK_CUDA_LOG_MAX) {
        b->truncated = true;
        n = b->len < AK_CUDA_LOG_MAX ? AK_CUDA_LOG_MAX - b->len : 0;
    }
    if (b->len + n + 1 > b->cap) {
        b->cap = (b->len + n + 1) * 2;
        b->data = ak_realloc (b->data, b->cap);
    }
    memcpy (b->data + b->len, p, n);
    b->len += n;
    b->data[b->len] = '\0';
}

static int s_write_all (int fd, const void *data, size_t len)
{
    const char *p = data;
    while (len > 0) {
        ssize_t n = write (fd, p, len);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        p += n;
        len -= (size_t) n;
    }
    return 0;
}

/*  Child exit codes: what went wrong, for the parent's error code. */
enum { S_CHILD_OK = 0, S_CHILD_COMPILE = 1, S_CHILD_NVRTC = 2, S_CHILD_NOMEM = 3, S_CHILD_IO = 4 };

/*  In the child: the marked message "what: why" after the log; returns code. */
static int s_child_fail (int fd, int code, const char *what, const char *why)
{
    char msg[512];
    snprintf (msg, sizeof msg, AK_CUDA_ERR_MARK "%s: %s", what, why ? why : "failed");
    s_write_all (fd, msg, strlen (msg));
    return code;
}

/*  In the child: NVRTC on text with opts, the CUBIN into cubin_path
    (created, must not exist), the log (then, on a failure that is not a
    compile error, a marked message) into fd.  Returns the exit code. */
static int s_child_compile (const ak_cuda_nvrtc_t *nv, const char *text, const char *const *opts,
                            int nopts, const char *cubin_path, int fd)
{
    nvrtcProgram prog = NULL;
    nvrtcResult r = nv->nvrtcCreateProgram (&prog, text, "kernel.cu", 0, NULL, NULL);
    if (r != NVRTC_SUCCESS)
        return s_child_fail (fd, r == NVRTC_ERROR_OUT_OF_MEMORY ? S_CHILD_NOMEM : S_CHILD_NVRTC,
                             "nvrtcCreateProgram", nv->nvrtcGetErrorString (r));
    nvrtcResult cr = nv->nvrtcCompileProgram (prog, nopts, opts);
    size_t log_len = 0;
    r = nv->nvrtcGetProgramLogSize (prog, &log_len);
    if (r != NVRTC_SUCCESS)
        return s_child_fail (fd, S_CHILD_NVRTC, "nvrtcGetProgramLogSize", nv->nvrtcGetErrorString (r));
    if (log_len > 1) {
        char *log = malloc (log_len);
        if (!log)
            return s_child_fail (fd, S_CHILD_NOMEM, "malloc", "NVRTC log");
        r = nv->nvrtcGetProgramLog (prog, log);
        if (r != NVRTC_SUCCESS)
            return s_child_fail (fd, S_CHILD_NVRTC, "nvrtcGetProgramLog", nv->nvrtcGetErrorString (r));
        s_write_all (fd, log, strnlen (log, log_len));
        free (log);
    }
    if (cr == NVRTC_ERROR_COMPILATION)
        return S_CHILD_COMPILE;
    if (cr != NVRTC_SUCCESS)
        return s_child_fail (fd, cr == NVRTC_ERROR_OUT_OF_MEMORY ? S_CHILD_NOMEM : S_CHILD_NVRTC,
                             "nvrtcCompileProgram", nv->nvrtcGetErrorString (cr));
    size_t n = 0;
    r = nv->nvrtcGetCUBINSize (prog, &n);
    if (r != NVRTC_SUCCESS)
        return s_child_fail (fd, S_CHILD_NVRTC, "nvrtcGetCUBINSize", nv->nvrtcGetErrorString (r));
    char *cubin = malloc (n ? n : 1);
    if (!cubin)
        return s_child_fail (fd, S_CHILD_NOMEM, "malloc", "CUBIN");
    r = nv->nvrtcGetCUBIN (prog, cubin);
    if (r != NVRTC_SUCCESS)
        return s_child_fail (fd, S_CHILD_NVRTC, "nvrtcGetCUBIN", nv->nvrtcGetErrorString (r));
    int out = open (cubin_path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (out < 0)
        return s_child_fail (fd, S_CHILD_IO, cubin_path, strerror (errno));
    if (s_write_all (out, cubin, n) != 0 || fsync (out) != 0)
        return s_child_fail (fd, S_CHILD_IO, cubin_path, strerror (errno));
    if (close (out) != 0)
        return s_child_fail (fd, S_CHILD_IO, cubin_path, strerror (errno));
    /* The program is not destroyed: _exit returns everything at once. */
    return S_CHILD_OK;
}

/*  Runs NVRTC on text in a child process and waits for it at most
    timeout_ms (or until *cancel turns non-zero).

    Why a child: nvrtcCompileProgram cannot be interrupted or cancelled,
    and a pathological source can keep it busy for minutes.  On a compile
    pool thread it would hold that thread (and a few hundred MB) hostage
    with no way to honour timeout_ms, cancel, or a daemon shutdown.  A
    process can be killed.  fork() without exec is enough: akworker has no
    hidden "compile one kernel" mode to exec (main.c is not ours to
    change), and exec would pay dlopen and NVRTC start-up again.  fork()
    without exec in a threaded process is safe only when the child touches
    nothing another thread might have held locked at the fork; here the
    child calls NVRTC (already loaded, and never used for compiling by the
    parent: the parent only called nvrtcVersion and nvrtcGetSupportedArchs,
    once, under pthread_once, before any fork), malloc (fork-safe in glibc),
    open / write / fsync, and leaves with _exit: no CUDA driver state, no
    ZeroMQ, no stdio, no atexit handlers.  If a lock we did not foresee
    (say, the dynamic loader's, taken by NVRTC loading its builtins library
    while another thread was inside dlopen) were held, the child would hang
    and be reported as AK_ETIMEOUT, never as a wrong CUBIN.

    The child writes the CUBIN to cubin_path and the NVRTC log to a pipe;
    *log_p gets the log (caller frees).  0, AK_ECOMPILE (compile error;
    the log says why), AK_ETIMEOUT, or another code with err set. */
static int s_nvrtc_in_child (const ak_cuda_nvrtc_t *nv, const char *text, const char *const *opts,
                             int nopts, const char *cubin_path, uint32_t timeout_ms,
                             const atomic_int *cancel, char **log_p, ak_err_t *err)
{
    int rc = 0;
    int pfd[2] = { -1, -1 };
    pid_t pid = -1;
    s_buf_t out = { 0 };

    *log_p = NULL;
    if (pipe2 (pfd, O_CLOEXEC) != 0)
        return ak_err_set (err, AK_EIO, "pipe2: %s", strerror (errno));
    pid = fork ();
    if (pid < 0) {
        rc = ak_err_set (err, AK_EIO, "fork: %s", strerror (errno));
        goto done;
    }
    if (pid == 0) {
        close (pfd[0]);
        signal (SIGPIPE, SIG_DFL);
        _exit (s_child_compile (nv, text, opts, nopts, cubin_path, pfd[1]));
    }
    close (pfd[1]);
    pfd[1] = -1;

    uint64_t limit = timeout_ms ? timeout_ms : AK_CUDA_COMPILE_MS;
    uint64_t deadline = ak_clock_mono_ms () + limit;
    bool timed_out = false, cancelled = false;
    for (;;) {
        uint64_t now = ak_clock_mono_ms ();
        if (now >= deadline) {
            timed_out = true;
            break;
        }
        if (cancel && atomic_load (cancel)) {
            cancelled = true;
            break;
        }
        uint64_t wait = deadline - now;
        if (wait > 100)
            wait = 100;
        struct pollfd p = { .fd = pfd[0], .events = POLLIN };
        int n = poll (&p, 1, (int) wait);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            rc = ak_err_set (err, AK_EIO, "poll: %s", strerror (errno));
            break;
        }
        if (n == 0)
            continue;
        char chunk[4096];
        ssize_t got = read (pfd[0], chunk, sizeof chunk);
        if (got < 0) {
            if (errno == EINTR || errno == EAGAIN)
                continue;
            rc = ak_err_set (err, AK_EIO, "read NVRTC output: %s", strerror (errno));
            break;
        }
        if (got == 0)
            break;               /* the child exited (it holds the only writer) */
        s_buf_add (&out, chunk, (size_t) got);
    }
    if (timed_out || cancelled || rc)
        kill (pid, SIGKILL);
    int status = 0;
    while (waitpid (pid, &status, 0) < 0) {
        if (errno != EINTR) {
            if (!rc)
                rc = ak_err_set (err, AK_EIO, "waitpid: %s", strerror (errno));
            break;
        }
    }
    pid = -1;
    if (rc)
        goto done;
    if (timed_out) {
        rc = ak_err_set (err, AK_ETIMEOUT, "compile: NVRTC killed after %" PRIu64 " ms", limit);
        goto done;
    }
    if (cancelled) {
        rc = ak_err_set (err, AK_ETIMEOUT, "compile: NVRTC cancelled");
        goto done;
    }

    /* Split the log from a marked failure message. */
    char *mark = out.data ? strstr (out.data, AK_CUDA_ERR_MARK) : NULL;
    char msg[600] = "";
    if (mark) {
        snprintf (msg, sizeof msg, "%s", mark + strlen (AK_CUDA_ERR_MARK));
        *mark = '\0';
        out.len = (size_t) (mark - out.data);
    }
    if (WIFSIGNALED (status))
        rc = ak_err_set (err, AK_ECOMPILE, "compile: NVRTC child killed by signal %d", WTERMSIG (status));
    else if (!WIFEXITED (status))
        rc = ak_err_set (err, AK_EINTERNAL, "compile: NVRTC child status %d", status);
    else {
        switch (WEXITSTATUS (status)) {
            case S_CHILD_OK:      break;
            case S_CHILD_COMPILE: rc = ak_err_set (err, AK_ECOMPILE, "nvrtcCompileProgram: NVRTC_ERROR_COMPILATION"); break;
            case S_CHILD_NVRTC:   rc = ak_err_set (err, AK_ECOMPILE, "%s", msg[0] ? msg : "NVRTC failed"); break;
            case S_CHILD_NOMEM:   rc = ak_err_set (err, AK_ENOMEM, "%s", msg[0] ? msg : "NVRTC out of memory"); break;
            case S_CHILD_IO:      rc = ak_err_set (err, AK_EIO, "%s", msg[0] ? msg : "writing the CUBIN failed"); break;
            default:
                rc = ak_err_set (err, AK_EINTERNAL, "compile: NVRTC child exited with %d", WEXITSTATUS (status));
                break;
        }
    }

done:
    if (pid > 0) {
        kill (pid, SIGKILL);
        while (waitpid (pid, NULL, 0) < 0 && errno == EINTR)
            ;
    }
    if (pfd[0] >= 0)
        close (pfd[0]);
    if (pfd[1] >= 0)
        close (pfd[1]);
    char *log = out.data ? out.data : ak_strdup ("");
    if (out.truncated) {
        char *t = ak_sprintf ("%s\n[NVRTC log truncated at %u bytes]", log, AK_CUDA_LOG_MAX);
        free (log);
        log = t;
    }
    *log_p = log;
    return rc;
}

/*  True when path starts with the ELF magic (a CUBIN is an ELF file). */
static bool s_is_elf (const char *path)
{
    unsigned char head[4] = { 0 };
    int fd = open (path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return false;
    ssize_t n = read (fd, head, sizeof head);
    close (fd);
    return n == 4 && memcmp (head, "\177ELF", 4) == 0;
}

static bool s_cubin_present (const char *path)
{
    struct stat st;
    return stat (path, &st) == 0 && S_ISREG (st.st_mode) && st.st_size > 0;
}

/*  Builds req into the cache (see backend.h): CUBIN for the device's
    sm_XY, cache_dir/<key>.cubin.  The options text is exactly what NVRTC
    gets (one option per line), so its digest names the build. */
static int s_compile (const ak_compile_req_t *req, ak_compile_out_t *out, ak_err_t *err)
{
    int rc = 0;
    char *options = NULL, *build_dir = NULL, *tmp_path = NULL, *artifact = NULL;
    char *log = NULL, *text = NULL;
    const char **opts = NULL;
    int nopts = 0;
    const ak_cuda_nvrtc_t *nv = NULL;

    if (!req || !out)
        return ak_err_set (err, AK_EINVAL, "cuda compile: no request");
    memset (out, 0, sizeof *out);
    uint64_t t0 = ak_clock_mono_ns ();
    if (!req->source)
        return ak_err_set (err, AK_EINVAL, "cuda compile: no source");
    if (req->source_len > AK_MAX_SOURCE_BYTES)
        return ak_err_set (err, AK_ETOOBIG, "cuda compile: source of %zu bytes, limit %u",
                           req->source_len, (unsigned) AK_MAX_SOURCE_BYTES);
    if (memchr (req->source, '\0', req->source_len))
        return ak_err_set (err, AK_EINVAL, "cuda compile: source holds a NUL byte");
    if (!req->cache_dir || !*req->cache_dir)
        return ak_err_set (err, AK_EINVAL, "cuda compile: no cache directory");
    if (!req->device || req->device->cc_major == 0)
        return ak_err_set (err, AK_EINVAL, "cuda compile: no target device (compute capability)");
    if ((rc = ak_cuda_nvrtc (&nv, err)) != 0)
        return rc;

    int ccmaj = (int) req->device->cc_major, ccmin = (int) req->device->cc_minor;
    int arch_num = ccmaj * 10 + ccmin;
    bool arch_ok = false;
    for (int i = 0; i < nv->narchs; i++)
        arch_ok = arch_ok || nv->archs[i] == arch_num;
    if (!arch_ok)
        return ak_err_set (err, AK_EUNSUPPORTED, "NVRTC %s cannot build CUBIN for sm_%d (supports sm_%d .. sm_%d)",
                           ak_cuda_nvrtc_version_text (), arch_num,
                           nv->narchs ? nv->archs[0] : 0, nv->narchs ? nv->archs[nv->narchs - 1] : 0);
    const char *include_dir = ak_cuda_include_dir ();
    if ((rc = ak_cuda_options (req, ccmaj, ccmin, include_dir, &options, err)) != 0)
        return rc;

    char arch[16];
    snprintf (arch, sizeof arch, "sm_%d", arch_num);
    ak_sha256_hex (options, strlen (options), out->options_digest);
    ak_cuda_cache_key (req->source, req->source_len, options, arch, ak_cuda_nvrtc_version_text (),
                       include_dir ? s_headers_digest : "", out->key);

    rc = ak_mkdir_p (req->cache_dir, 0755, err);
    if (rc)
        goto fail;
    artifact = ak_sprintf ("%s/%s.cubin", req->cache_dir, out->key);
    if (s_cubin_present (artifact)) {
        out->cached = true;
        goto done;
    }

    /* A private build directory next to the artifact: the rename below is
       then within one filesystem, so it is atomic. */
    build_dir = ak_sprintf ("%s/.build-XXXXXX", req->cache_dir);
    if (!mkdtemp (build_dir)) {
        rc = ak_err_set (err, AK_EIO, "%s: mkdtemp: %s", build_dir, strerror (errno));
        free (build_dir);
        build_dir = NULL;
        goto fail;
    }
    tmp_path = ak_sprintf ("%s/kernel.cubin", build_dir);
    /* #line: diagnostics name the prelude or the kernel with their own lines. */
    text = ak_sprintf ("#line 1 \"ak_kernel_cuda.h\"\n%s\n#line 1 \"kernel.cu\"\n%.*s",
                       ak_prelude_cuda, (int) req->source_len, req->source);

    /* The options text, one per line, as an argv. */
    for (const char *p = options; *p; p++)
        nopts += *p == '\n';
    nopts++;
    opts = ak_calloc ((size_t) nopts, sizeof *opts);
    {
        char *save = NULL;
        int i = 0;
        for (char *tok = strtok_r (options, "\n", &save); tok && i < nopts; tok = strtok_r (NULL, "\n", &save))
            opts[i++] = tok;
        nopts = i;
    }
    rc = s_nvrtc_in_child (nv, text, opts, nopts, tmp_path, req->timeout_ms, req->cancel, &log, err);
    if (rc)
        goto fail;
    /* Check the child's work before anyone can load it. */
    if (!s_is_elf (tmp_path)) {
        rc = ak_err_set (err, AK_ECOMPILE, "compile: %s is not an ELF CUBIN", tmp_path);
        goto fail;
    }
    if (rename (tmp_path, artifact) != 0) {
        rc = ak_err_set (err, AK_EIO, "rename %s -> %s: %s", tmp_path, artifact, strerror (errno));
        goto fail;
    }

done:
    out->artifact_path = artifact;
    artifact = NULL;
    out->log = log ? log : ak_strdup ("");
    log = NULL;
    out->ms = (double) (ak_clock_mono_ns () - t0) / 1e6;
    rc = 0;

fail:
    if (rc) {
        out->log = log ? log : ak_strdup ("");
        log = NULL;
        out->ms = (double) (ak_clock_mono_ns () - t0) / 1e6;
    }
    if (build_dir) {
        if (tmp_path)
            unlink (tmp_path);
        rmdir (build_dir);
        free (build_dir);
    }
    free (opts);
    free (options);
    free (tmp_path);
    free (artifact);
    free (log);
    free (text);
    return rc;
}

/* ================================================================ CUPTI */

/*  CUPTI's activity API is process-wide and its callbacks carry no user
    pointer, so the records land in two small rings here, under a mutex
    (CUPTI delivers full buffers from its own thread):
    - external correlation records: our id (pushed around each launch) ->
      CUPTI's correlation id;
    - kernel records, by correlation id.
    Reading pairs them.  External correlation records are emitted with API
    records, so the DRIVER kind is enabled too. */
typedef struct {
    uint64_t ext;
    uint32_t corr;
} s_ext_rec_t;

static pthread_mutex_t s_cupti_mu = PTHREAD_MUTEX_INITIALIZER;
static const ak_cuda_cupti_t *s_cp;
static s_ext_rec_t s_ext_ring[AK_CUPTI_RING];
static ak_cuda_kernel_record_t s_kern_ring[AK_CUPTI_RING];
static unsigned s_ext_next, s_kern_next;
static size_t s_cupti_dropped;
static char s_cupti_buffer_error[256];

static pthread_once_t s_cupti_once = PTHREAD_ONCE_INIT;
static int s_cupti_reg_rc;
static ak_err_t s_cupti_reg_err;

static void CUPTIAPI s_cupti_requested (uint8_t **buffer, size_t *size, size_t *max_records)
{
    /* Activity buffers must be 8-byte aligned. */
    *buffer = aligned_alloc (8, AK_CUPTI_BUF_BYTES);
    *size = *buffer ? AK_CUPTI_BUF_BYTES : 0;
    *max_records = 0;
}

static void CUPTIAPI s_cupti_completed (CUcontext ctx, uint32_t stream_id, uint8_t *buffer,
                                        size_t size, size_t valid)
{
    (void) size;
    pthread_mutex_lock (&s_cupti_mu);
    CUpti_Activity *rec = NULL;
    for (;;) {
        CUptiResult r = s_cp->cuptiActivityGetNextRecord (buffer, valid, &rec);
        if (r == CUPTI_ERROR_MAX_LIMIT_REACHED)
            break;
        if (r != CUPTI_SUCCESS) {
            ak_err_t e = { 0 };
            ak_cuda_cupti_check (r, "cuptiActivityGetNextRecord", &e);
            snprintf (s_cupti_buffer_error, sizeof s_cupti_buffer_error, "%.200s", e.msg);
            break;
        }
        if (rec->kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL || rec->kind == CUPTI_ACTIVITY_KIND_KERNEL) {
            const CUpti_ActivityKernel10 *k = (const CUpti_ActivityKernel10 *) rec;
            ak_cuda_kernel_record_t *o = &s_kern_ring[s_kern_next++ % AK_CUPTI_RING];
            memset (o, 0, sizeof *o);
            o->start_ns = k->start;
            o->end_ns = k->end;
            o->us = k->end > k->start ? (double) (k->end - k->start) / 1000.0 : 0.0;
            o->correlation_id = k->correlationId;
            o->registers = k->registersPerThread;
            o->static_shared = (uint32_t) (k->staticSharedMemory > 0 ? k->staticSharedMemory : 0);
            o->dynamic_shared = (uint32_t) (k->dynamicSharedMemory > 0 ? k->dynamicSharedMemory : 0);
            o->grid[0] = (uint32_t) k->gridX;
            o->grid[1] = (uint32_t) k->gridY;
            o->grid[2] = (uint32_t) k->gridZ;
            o->block[0] = (uint32_t) k->blockX;
            o->block[1] = (uint32_t) k->blockY;
            o->block[2] = (uint32_t) k->blockZ;
        }
        else if (rec->kind == CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION) {
            const CUpti_ActivityExternalCorrelation *x = (const CUpti_ActivityExternalCorrelation *) rec;
            if (x->externalKind == CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0) {
                s_ext_rec_t *o = &s_ext_ring[s_ext_next++ % AK_CUPTI_RING];
                o->ext = x->externalId;
                o->corr = x->correlationId;
            }
        }
    }
    size_t dropped = 0;
    if (s_cp->cuptiActivityGetNumDroppedRecords (ctx, stream_id, &dropped) == CUPTI_SUCCESS)
        s_cupti_dropped += dropped;
    pthread_mutex_unlock (&s_cupti_mu);
    free (buffer);
}

static void s_cupti_register (void)
{
    const ak_cuda_cupti_t *cp = NULL;
    s_cupti_reg_rc = ak_cuda_cupti (&cp, &s_cupti_reg_err);
    if (s_cupti_reg_rc)
        return;
    s_cp = cp;
    s_cupti_reg_rc = ak_cuda_cupti_check (cp->cuptiActivityRegisterCallbacks (s_cupti_requested, s_cupti_completed),
                                          "cuptiActivityRegisterCallbacks", &s_cupti_reg_err);
}

static const CUpti_ActivityKind s_cupti_kinds[] = {
    CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL,
    CUPTI_ACTIVITY_KIND_DRIVER,
    CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION,
};

/*  Turns kernel records on for dev, or leaves dev->cupti_why saying why
    not (then timing is events only).  AK_CUDA_CUPTI=0 in the environment
    turns it off on purpose. */
static void s_cupti_start (ak_dev_t *dev)
{
    const char *env = getenv ("AK_CUDA_CUPTI");
    if (env && strcmp (env, "0") == 0) {
        snprintf (dev->cupti_why, sizeof dev->cupti_why, "CUPTI off (AK_CUDA_CUPTI=0)");
        return;
    }
    pthread_once (&s_cupti_once, s_cupti_register);
    if (s_cupti_reg_rc) {
        snprintf (dev->cupti_why, sizeof dev->cupti_why, "%.300s", s_cupti_reg_err.msg);
        return;
    }
    size_t n = sizeof s_cupti_kinds / sizeof s_cupti_kinds[0];
    for (size_t i = 0; i < n; i++) {
        ak_err_t e = { 0 };
        if (ak_cuda_cupti_check (s_cp->cuptiActivityEnable (s_cupti_kinds[i]), "cuptiActivityEnable", &e) != 0) {
            snprintf (dev->cupti_why, sizeof dev->cupti_why, "%.300s (kind %d)", e.msg, (int) s_cupti_kinds[i]);
            for (size_t j = 0; j < i; j++) {
                ak_err_t e2 = { 0 };
                if (ak_cuda_cupti_check (s_cp->cuptiActivityDisable (s_cupti_kinds[j]), "cuptiActivityDisable", &e2))
                    ak_debug ("cuda: %s", e2.msg);
            }
            return;
        }
    }
    dev->cupti_on = true;
}

static void s_cupti_stop (ak_dev_t *dev)
{
    if (!dev->cupti_on)
        return;
    ak_err_t e = { 0 };
    if (ak_cuda_cupti_check (s_cp->cuptiActivityFlushAll (CUPTI_ACTIVITY_FLAG_FLUSH_FORCED),
                             "cuptiActivityFlushAll", &e))
        ak_debug ("cuda: %s", e.msg);
    for (size_t i = 0; i < sizeof s_cupti_kinds / sizeof s_cupti_kinds[0]; i++)
        if (ak_cuda_cupti_check (s_cp->cuptiActivityDisable (s_cupti_kinds[i]), "cuptiActivityDisable", &e))
            ak_debug ("cuda: %s", e.msg);
    dev->cupti_on = false;
}

bool ak_cuda_cupti_active (ak_dev_t *dev, const char **why_p)
{
    if (why_p)
        *why_p = dev ? dev->cupti_why : "no device";
    return dev && dev->cupti_on;
}

/*  Under s_cupti_mu: the kernel record of external id ext, newest first. */
static void s_cupti_find (uint64_t ext, bool *have_corr, uint32_t *corr, bool *found,
                          ak_cuda_kernel_record_t *rec)
{
    *have_corr = *found = false;
    for (unsigned i = 0; i < AK_CUPTI_RING && i < s_ext_next; i++) {
        const s_ext_rec_t *x = &s_ext_ring[(s_ext_next - 1 - i) % AK_CUPTI_RING];
        if (x->ext == ext) {
            *corr = x->corr;
            *have_corr = true;
            break;
        }
    }
    for (unsigned i = 0; *have_corr && i < AK_CUPTI_RING && i < s_kern_next; i++) {
        const ak_cuda_kernel_record_t *k = &s_kern_ring[(s_kern_next - 1 - i) % AK_CUPTI_RING];
        if (k->correlation_id == *corr) {
            *rec = *k;
            *found = true;
            break;
        }
    }
}

int ak_cuda_last_kernel (ak_dev_t *dev, ak_cuda_kernel_record_t *rec, ak_err_t *err)
{
    if (!dev || !rec)
        return ak_err_set (err, AK_EINVAL, "ak_cuda_last_kernel: bad arguments");
    if (!dev->cupti_on)
        return ak_err_set (err, AK_EUNAVAIL, "no CUPTI kernel records: %s",
                           dev->cupti_why[0] ? dev->cupti_why : "CUPTI not started");
    if (!dev->last_ext)
        return ak_err_set (err, AK_EINVAL, "ak_cuda_last_kernel: no launch yet");
    /* The launch has finished (launch and time synchronise), so its
       records are complete and a plain flush hands them over.  Not a
       forced one: measured on an H200 (CUDA 13.0), a forced flush after
       every sample added about 200 us of host latency to the next launch,
       which the next sample's events then carried; a plain flush added
       none.  Forced only as a fallback when the plain one brought nothing. */
    bool have_corr = false, found = false;
    uint32_t corr = 0;
    for (int attempt = 0; attempt < 2 && !found; attempt++) {
        uint32_t flag = attempt == 0 ? 0 : CUPTI_ACTIVITY_FLAG_FLUSH_FORCED;
        int rc = ak_cuda_cupti_check (s_cp->cuptiActivityFlushAll (flag), "cuptiActivityFlushAll", err);
        if (rc)
            return rc;
        pthread_mutex_lock (&s_cupti_mu);
        s_cupti_find (dev->last_ext, &have_corr, &corr, &found, rec);
        pthread_mutex_unlock (&s_cupti_mu);
    }
    pthread_mutex_lock (&s_cupti_mu);
    size_t dropped = s_cupti_dropped;
    char buf_err[256];
    snprintf (buf_err, sizeof buf_err, "%s", s_cupti_buffer_error);
    pthread_mutex_unlock (&s_cupti_mu);
    if (!have_corr)
        return ak_err_set (err, AK_ENOTFOUND, "CUPTI: no correlation record for launch %" PRIu64
                           " (%zu records dropped%s%s)", dev->last_ext, dropped,
                           buf_err[0] ? "; " : "", buf_err);
    if (!found)
        return ak_err_set (err, AK_ENOTFOUND, "CUPTI: no kernel record with correlation id %u "
                           "(%zu records dropped%s%s)", corr, dropped, buf_err[0] ? "; " : "", buf_err);
    if (rec->end_ns <= rec->start_ns)
        return ak_err_set (err, AK_ENOTFOUND, "CUPTI: kernel record %u has no duration", corr);
    return 0;
}

int ak_cuda_last_kernel_us (ak_dev_t *dev, double *us, ak_err_t *err)
{
    ak_cuda_kernel_record_t rec;
    if (!us)
        return ak_err_set (err, AK_EINVAL, "ak_cuda_last_kernel_us: no output");
    int rc = ak_cuda_last_kernel (dev, &rec, err);
    if (rc == 0)
        *us = rec.us;
    return rc;
}

/* ======================================================== executor side */

/*  Every executor call starts here: a dead context answers AK_ECRASH at
    once, and the context is made current for the calling thread. */
static int s_enter (ak_dev_t *dev, ak_err_t *err)
{
    if (!dev)
        return ak_err_set (err, AK_EINVAL, "cuda: no device");
    if (dev->dead)
        return ak_err_set (err, AK_ECRASH, "device %d context is unusable after %s: replace the executor",
                           dev->ordinal, dev->dead_reason);
    return ak_cuda_check (dev->drv->cuCtxSetCurrent (dev->ctx), "cuCtxSetCurrent", err);
}

/*  ak_cuda_check, and a sticky error marks the context dead. */
static int s_cu (ak_dev_t *dev, CUresult r, const char *call, ak_err_t *err)
{
    if (r == CUDA_SUCCESS)
        return 0;
    int rc = ak_cuda_check (r, call, err);
    if (ak_cuda_result_sticky (r) && dev) {
        char buf[32];
        dev->dead = true;
        snprintf (dev->dead_reason, sizeof dev->dead_reason, "%s in %s",
                  ak_cuda_result_name (r, buf, sizeof buf), call);
    }
    return rc;
}

static void s_close (ak_dev_t **dev_p);

static int s_open (const Ak__Device *device, ak_dev_t **dev_p, ak_err_t *err)
{
    int rc = 0;
    const ak_cuda_driver_t *drv = NULL;
    if (!dev_p)
        return ak_err_set (err, AK_EINVAL, "cuda open: no output");
    *dev_p = NULL;
    if ((rc = ak_cuda_driver (&drv, err)) != 0)
        return rc;
    if ((rc = ak_cuda_check (drv->cuInit (0), "cuInit", err)) != 0)
        return rc;
    ak_dev_t *dev = ak_calloc (1, sizeof *dev);
    dev->drv = drv;
    dev->ordinal = device ? (int) device->index : 0;
    if ((rc = s_cu (dev, drv->cuDeviceGet (&dev->cudev, dev->ordinal), "cuDeviceGet", err)) != 0)
        goto fail;
    if (device && device->uuid && device->uuid[0]) {
        CUuuid u;
        char uuid[48];
        if ((rc = s_cu (dev, drv->cuDeviceGetUuid (&u, dev->cudev), "cuDeviceGetUuid", err)) != 0)
            goto fail;
        s_uuid_text (&u, uuid);
        if (strcmp (uuid, device->uuid) != 0) {
            rc = ak_err_set (err, AK_ENOTFOUND, "cuda device %d is %s, not %s (CUDA_VISIBLE_DEVICES changed?)",
                             dev->ordinal, uuid, device->uuid);
            goto fail;
        }
    }
    int l2 = 0;
    const struct { CUdevice_attribute a; const char *what; int *v; } attrs[] = {
        { CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, "SM count", &dev->sm_count },
        { CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE, "L2 size", &l2 },
        { CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK, "max threads per block", &dev->max_threads },
        { CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X, "max block x", &dev->max_block[0] },
        { CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y, "max block y", &dev->max_block[1] },
        { CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z, "max block z", &dev->max_block[2] },
        { CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X, "max grid x", &dev->max_grid[0] },
        { CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y, "max grid y", &dev->max_grid[1] },
        { CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z, "max grid z", &dev->max_grid[2] },
        { CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK, "max shared per block", &dev->max_shared },
        { CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, "max opt-in shared per block",
          &dev->max_shared_optin },
    };
    for (size_t i = 0; i < sizeof attrs / sizeof attrs[0]; i++)
        if ((rc = s_attr (drv, dev->cudev, attrs[i].a, attrs[i].what, attrs[i].v, err)) != 0)
            goto fail;

    /* Kernel records from the first launch on: enable before the context. */
    s_cupti_start (dev);
    if (!dev->cupti_on)
        ak_info ("cuda device %d: timing with CUDA events only: %s", dev->ordinal, dev->cupti_why);

    if ((rc = s_cu (dev, drv->cuDevicePrimaryCtxRetain (&dev->ctx, dev->cudev), "cuDevicePrimaryCtxRetain", err)) != 0)
        goto fail;
    dev->ctx_retained = true;
    if ((rc = s_cu (dev, drv->cuCtxSetCurrent (dev->ctx), "cuCtxSetCurrent", err)) != 0)
        goto fail;
    /* A blocking stream: ordered after the legacy stream's copies and
       memsets (upload / download), so no extra synchronisation is needed. */
    if ((rc = s_cu (dev, drv->cuStreamCreate (&dev->stream, CU_STREAM_DEFAULT), "cuStreamCreate", err)) != 0
        || (rc = s_cu (dev, drv->cuEventCreate (&dev->ev_start, CU_EVENT_DEFAULT), "cuEventCreate", err)) != 0
        || (rc = s_cu (dev, drv->cuEventCreate (&dev->ev_stop, CU_EVENT_DEFAULT), "cuEventCreate", err)) != 0)
        goto fail;
    /* Twice the L2, at least 64 MiB: written before each cold sample. */
    dev->flush_bytes = (size_t) l2 * 2;
    if (dev->flush_bytes < AK_CUDA_FLUSH_MIN)
        dev->flush_bytes = AK_CUDA_FLUSH_MIN;
    if ((rc = s_cu (dev, drv->cuMemAlloc (&dev->flush, dev->flush_bytes), "cuMemAlloc (L2 flush buffer)", err)) != 0)
        goto fail;
    *dev_p = dev;
    return 0;

fail:
    ak_err_prefix (err, "cuda device %d", dev->ordinal);
    s_close (&dev);
    return rc;
}

static void s_close (ak_dev_t **dev_p)
{
    if (!dev_p || !*dev_p)
        return;
    ak_dev_t *dev = *dev_p;
    const ak_cuda_driver_t *drv = dev->drv;
    ak_err_t e = { 0 };
    /* After a sticky error every call below fails; they are still made so
       that a live context is left clean, and failures only logged. */
    if (dev->ctx && ak_cuda_check (drv->cuCtxSetCurrent (dev->ctx), "cuCtxSetCurrent", &e))
        ak_debug ("cuda close: %s", e.msg);
    if (dev->flush && ak_cuda_check (drv->cuMemFree (dev->flush), "cuMemFree", &e))
        ak_debug ("cuda close: %s", e.msg);
    if (dev->ev_start && ak_cuda_check (drv->cuEventDestroy (dev->ev_start), "cuEventDestroy", &e))
        ak_debug ("cuda close: %s", e.msg);
    if (dev->ev_stop && ak_cuda_check (drv->cuEventDestroy (dev->ev_stop), "cuEventDestroy", &e))
        ak_debug ("cuda close: %s", e.msg);
    if (dev->stream && ak_cuda_check (drv->cuStreamDestroy (dev->stream), "cuStreamDestroy", &e))
        ak_debug ("cuda close: %s", e.msg);
    s_cupti_stop (dev);
    if (dev->ctx_retained
        && ak_cuda_check (drv->cuDevicePrimaryCtxRelease (dev->cudev), "cuDevicePrimaryCtxRelease", &e))
        ak_debug ("cuda close: %s", e.msg);
    free (dev);
    *dev_p = NULL;
}

static int s_load (ak_dev_t *dev, const char *artifact_path, const char *symbol,
                   ak_kernel_t **kernel_p, ak_err_t *err)
{
    int rc = 0;
    char *image = NULL;
    size_t len = 0;
    if (!artifact_path || !symbol || !kernel_p)
        return ak_err_set (err, AK_EINVAL, "cuda load: bad arguments");
    *kernel_p = NULL;
    if (strlen (symbol) > AK_MAX_NAME)
        return ak_err_set (err, AK_EINVAL, "cuda load: symbol name too long");
    if ((rc = s_enter (dev, err)) != 0)
        return rc;
    if ((rc = ak_file_read (artifact_path, AK_CUDA_CUBIN_MAX, &image, &len, err)) != 0)
        return rc;
    if (len < 4 || memcmp (image, "\177ELF", 4) != 0) {
        free (image);
        return ak_err_set (err, AK_ECOMPILE, "%s: not a CUBIN (no ELF header)", artifact_path);
    }
    ak_kernel_t *k = ak_calloc (1, sizeof *k);
    snprintf (k->symbol, sizeof k->symbol, "%s", symbol);
    const ak_cuda_driver_t *drv = dev->drv;
    if ((rc = s_cu (dev, drv->cuModuleLoadData (&k->mod, image), "cuModuleLoadData", err)) != 0) {
        k->mod = NULL;
        goto fail;
    }
    if ((rc = s_cu (dev, drv->cuModuleGetFunction (&k->fn, k->mod, symbol), "cuModuleGetFunction", err)) != 0) {
        if (rc == AK_ENOTFOUND)
            ak_err_prefix (err, "no kernel '%s'", symbol);
        goto fail;
    }
    if ((rc = s_cu (dev, drv->cuFuncGetAttribute (&k->regs, CU_FUNC_ATTRIBUTE_NUM_REGS, k->fn),
                    "cuFuncGetAttribute (NUM_REGS)", err)) != 0
        || (rc = s_cu (dev, drv->cuFuncGetAttribute (&k->max_threads, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, k->fn),
                       "cuFuncGetAttribute (MAX_THREADS_PER_BLOCK)", err)) != 0
        || (rc = s_cu (dev, drv->cuFuncGetAttribute (&k->static_shared, CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, k->fn),
                       "cuFuncGetAttribute (SHARED_SIZE_BYTES)", err)) != 0)
        goto fail;
    free (image);
    *kernel_p = k;
    return 0;

fail:
    ak_err_prefix (err, "%s", artifact_path);
    if (k->mod) {
        ak_err_t e = { 0 };
        if (ak_cuda_check (drv->cuModuleUnload (k->mod), "cuModuleUnload", &e))
            ak_debug ("cuda load: %s", e.msg);
    }
    free (k);
    free (image);
    return rc;
}

static void s_unload (ak_dev_t *dev, ak_kernel_t **kernel_p)
{
    if (!kernel_p || !*kernel_p)
        return;
    ak_kernel_t *k = *kernel_p;
    ak_err_t e = { 0 };
    if (dev && k->mod && s_enter (dev, &e) == 0
        && ak_cuda_check (dev->drv->cuModuleUnload (k->mod), "cuModuleUnload", &e))
        ak_debug ("cuda unload: %s", e.msg);
    free (k);
    *kernel_p = NULL;
}

static int s_alloc (ak_dev_t *dev, size_t bytes, void **buf_p, ak_err_t *err)
{
    int rc = s_enter (dev, err);
    if (rc)
        return rc;
    CUdeviceptr p = 0;
    rc = s_cu (dev, dev->drv->cuMemAlloc (&p, bytes ? bytes : 1), "cuMemAlloc", err);
    if (rc)
        return ak_err_prefix (err, "%zu bytes", bytes);
    *buf_p = (void *) (uintptr_t) p;
    return 0;
}

static void s_release (ak_dev_t *dev, void **buf_p)
{
    if (!buf_p || !*buf_p)
        return;
    ak_err_t e = { 0 };
    if (dev && s_enter (dev, &e) == 0
        && ak_cuda_check (dev->drv->cuMemFree ((CUdeviceptr) (uintptr_t) *buf_p), "cuMemFree", &e))
        ak_debug ("cuda release: %s", e.msg);
    *buf_p = NULL;
}

static int s_upload (ak_dev_t *dev, void *dst, const void *src, size_t bytes, ak_err_t *err)
{
    int rc = s_enter (dev, err);
    if (rc || !bytes)
        return rc;
    return s_cu (dev, dev->drv->cuMemcpyHtoD ((CUdeviceptr) (uintptr_t) dst, src, bytes), "cuMemcpyHtoD", err);
}

static int s_download (ak_dev_t *dev, void *dst, const void *src, size_t bytes, ak_err_t *err)
{
    int rc = s_enter (dev, err);
    if (rc || !bytes)
        return rc;
    return s_cu (dev, dev->drv->cuMemcpyDtoH (dst, (CUdeviceptr) (uintptr_t) src, bytes), "cuMemcpyDtoH", err);
}

static int s_fill (ak_dev_t *dev, void *dst, int byte, size_t bytes, ak_err_t *err)
{
    int rc = s_enter (dev, err);
    if (rc || !bytes)
        return rc;
    if ((rc = s_cu (dev, dev->drv->cuMemsetD8Async ((CUdeviceptr) (uintptr_t) dst, (unsigned char) byte, bytes,
                                                    dev->stream), "cuMemsetD8Async", err)) != 0)
        return rc;
    return s_cu (dev, dev->drv->cuStreamSynchronize (dev->stream), "cuStreamSynchronize", err);
}

/*  The launch configuration against the device's and the kernel's limits.
    AK_EINVAL "launch configuration missing" when grid or block is unset,
    AK_EINVAL "invalid_config: ..." when it cannot run (a candidate's
    fault, not the worker's); sets the dynamic shared memory opt-in when
    the request needs more than the default. */
static int s_check_launch (ak_dev_t *dev, ak_kernel_t *k, const ak_launch_t *l, ak_err_t *err)
{
    if (l->ndims < 0 || l->ndims > AK_MAX_DIMS || l->nin < 0 || l->nin > AK_MAX_BUFS
        || l->nout < 0 || l->nout > AK_MAX_BUFS)
        return ak_err_set (err, AK_EINVAL, "cuda launch: %d dims, %d inputs, %d outputs (limits %d, %d, %d)",
                           l->ndims, l->nin, l->nout, AK_MAX_DIMS, AK_MAX_BUFS, AK_MAX_BUFS);
    for (int i = 0; i < 3; i++)
        if (l->grid[i] == 0 || l->block[i] == 0)
            return ak_err_set (err, AK_EINVAL, "launch configuration missing: grid %ux%ux%u block %ux%ux%u "
                               "(the CUDA backend has no default; every dimension must be >= 1)",
                               l->grid[0], l->grid[1], l->grid[2], l->block[0], l->block[1], l->block[2]);
    for (int i = 0; i < 3; i++) {
        if (l->block[i] > (uint32_t) dev->max_block[i])
            return ak_err_set (err, AK_EINVAL, "invalid_config: block.%c = %u > device limit %d",
                               "xyz"[i], l->block[i], dev->max_block[i]);
        if (l->grid[i] > (uint32_t) dev->max_grid[i])
            return ak_err_set (err, AK_EINVAL, "invalid_config: grid.%c = %u > device limit %d",
                               "xyz"[i], l->grid[i], dev->max_grid[i]);
    }
    uint64_t threads = (uint64_t) l->block[0] * l->block[1] * l->block[2];
    if (threads > (uint64_t) k->max_threads)
        return ak_err_set (err, AK_EINVAL, "invalid_config: block of %" PRIu64 " threads > %d for kernel '%s' "
                           "(%d registers/thread)", threads, k->max_threads, k->symbol, k->regs);
    uint64_t shared = (uint64_t) l->shared_bytes + (uint64_t) k->static_shared;
    if (shared > (uint64_t) dev->max_shared_optin)
        return ak_err_set (err, AK_EINVAL, "invalid_config: shared memory %u dynamic + %d static bytes > "
                           "%d per block", l->shared_bytes, k->static_shared, dev->max_shared_optin);
    if (shared > (uint64_t) dev->max_shared && (int) l->shared_bytes > k->dyn_shared_set) {
        int rc = s_cu (dev, dev->drv->cuFuncSetAttribute (k->fn, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                                          (int) l->shared_bytes),
                       "cuFuncSetAttribute (MAX_DYNAMIC_SHARED_SIZE_BYTES)", err);
        if (rc)
            return rc == AK_EINVAL ? ak_err_prefix (err, "invalid_config") : rc;
        k->dyn_shared_set = (int) l->shared_bytes;
    }
    return 0;
}

static void s_pack (const ak_launch_t *l, s_args_t *a)
{
    memset (a, 0, sizeof *a);
    a->ndims = l->ndims;
    for (int i = 0; i < l->ndims && i < AK_MAX_DIMS; i++)
        a->dims[i] = l->dims[i];
    a->nin = l->nin;
    for (int i = 0; i < l->nin && i < AK_MAX_BUFS; i++)
        a->in[i] = (uint64_t) (uintptr_t) l->in[i];
    a->nout = l->nout;
    for (int i = 0; i < l->nout && i < AK_MAX_BUFS; i++)
        a->out[i] = (uint64_t) (uintptr_t) l->out[i];
}

/*  Enqueues one launch of fn on dev's stream with params, inside an
    external correlation id for CUPTI.  A refused launch is the
    candidate's configuration: AK_EINVAL "invalid_config: ...". */
static int s_enqueue (ak_dev_t *dev, CUfunction fn, const uint32_t grid[3], const uint32_t block[3],
                      uint32_t shared, void **params, ak_err_t *err)
{
    bool pushed = false;
    if (dev->cupti_on) {
        ak_err_t e = { 0 };
        uint64_t id = ++dev->ext_seq;
        if (ak_cuda_cupti_check (s_cp->cuptiActivityPushExternalCorrelationId (CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, id),
                                 "cuptiActivityPushExternalCorrelationId", &e) == 0) {
            pushed = true;
            dev->last_ext = id;
        }
        else {
            ak_debug ("cuda: %s", e.msg);
            dev->last_ext = 0;
        }
    }
    CUresult r = dev->drv->cuLaunchKernel (fn, grid[0], grid[1], grid[2], block[0], block[1], block[2],
                                           shared, dev->stream, params, NULL);
    if (pushed) {
        ak_err_t e = { 0 };
        uint64_t last = 0;
        if (ak_cuda_cupti_check (s_cp->cuptiActivityPopExternalCorrelationId (CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, &last),
                                 "cuptiActivityPopExternalCorrelationId", &e))
            ak_debug ("cuda: %s", e.msg);
    }
    int rc = s_cu (dev, r, "cuLaunchKernel", err);
    if (rc == AK_EINVAL)
        ak_err_prefix (err, "invalid_config");
    if (rc)
        dev->last_ext = 0;
    return rc;
}

/*  Waits for everything on the context; a sticky error kills the
    context (AK_ECRASH naming it). */
static int s_sync (ak_dev_t *dev, ak_err_t *err)
{
    return s_cu (dev, dev->drv->cuCtxSynchronize (), "cuCtxSynchronize", err);
}

static int s_launch (ak_dev_t *dev, ak_kernel_t *kernel, const ak_launch_t *args, ak_err_t *err)
{
    if (!kernel || !args)
        return ak_err_set (err, AK_EINVAL, "cuda launch: bad arguments");
    int rc = s_enter (dev, err);
    if (rc || (rc = s_check_launch (dev, kernel, args, err)) != 0)
        return rc;
    s_args_t a;
    s_pack (args, &a);
    void *params[] = { &a };
    if ((rc = s_enqueue (dev, kernel->fn, args->grid, args->block, args->shared_bytes, params, err)) != 0)
        return rc;
    return s_sync (dev, err);
}

/*  One sample: when cold, the flush buffer (2x L2) is rewritten on the
    stream first; then start event, the launch, stop event.  The events
    bracket only the launch (and its launch latency, which the CUPTI
    record of the same launch does not carry). */
static int s_time (ak_dev_t *dev, ak_kernel_t *kernel, const ak_launch_t *args, bool cold,
                   double *us, ak_err_t *err)
{
    if (!kernel || !args || !us)
        return ak_err_set (err, AK_EINVAL, "cuda time: bad arguments");
    int rc = s_enter (dev, err);
    if (rc || (rc = s_check_launch (dev, kernel, args, err)) != 0)
        return rc;
    const ak_cuda_driver_t *drv = dev->drv;
    s_args_t a;
    s_pack (args, &a);
    void *params[] = { &a };
    if (cold && (rc = s_cu (dev, drv->cuMemsetD8Async (dev->flush, ++dev->flush_value, dev->flush_bytes,
                                                       dev->stream), "cuMemsetD8Async (L2 flush)", err)) != 0)
        return rc;
    if ((rc = s_cu (dev, drv->cuEventRecord (dev->ev_start, dev->stream), "cuEventRecord", err)) != 0)
        return rc;
    if ((rc = s_enqueue (dev, kernel->fn, args->grid, args->block, args->shared_bytes, params, err)) != 0)
        return rc;
    if ((rc = s_cu (dev, drv->cuEventRecord (dev->ev_stop, dev->stream), "cuEventRecord", err)) != 0
        || (rc = s_cu (dev, drv->cuEventSynchronize (dev->ev_stop), "cuEventSynchronize", err)) != 0
        || (rc = s_sync (dev, err)) != 0)
        return rc;
    float ms = 0;
    if ((rc = s_cu (dev, drv->cuEventElapsedTime (&ms, dev->ev_start, dev->ev_stop), "cuEventElapsedTime", err)) != 0)
        return rc;
    *us = (double) ms * 1000.0;
    return 0;
}

int ak_cuda_fill_uniform (ak_dev_t *dev, ak_kernel_t *fill, void *buf, uint64_t n,
                          uint64_t seed, uint64_t stream, double lo, double hi,
                          int dtype, ak_err_t *err)
{
    if (!fill || (!buf && n))
        return ak_err_set (err, AK_EINVAL, "ak_cuda_fill_uniform: bad arguments");
    if (dtype < 0 || dtype > AK_CUDA_FILL_FLOAT64)
        return ak_err_set (err, AK_EINVAL, "ak_cuda_fill_uniform: dtype %d", dtype);
    if ((dtype == AK_DT_FLOAT16 || dtype == AK_DT_BFLOAT16) && !ak_cuda_include_dir ())
        return ak_err_set (err, AK_EUNSUPPORTED, "ak_cuda_fill_uniform: %s needs cuda_fp16.h / cuda_bf16.h",
                           ak_dtype_name ((ak_dtype_t) dtype));
    int rc = s_enter (dev, err);
    if (rc || n == 0)
        return rc;
    uint64_t blocks = (n + 255) / 256;
    uint64_t cap = (uint64_t) (dev->sm_count > 0 ? dev->sm_count : 1) * 32;
    uint32_t grid[3] = { (uint32_t) (blocks < cap ? blocks : cap), 1, 1 };
    uint32_t block[3] = { 256, 1, 1 };
    unsigned long long seed_a = seed, stream_a = stream, n_a = n;
    CUdeviceptr out = (CUdeviceptr) (uintptr_t) buf;
    void *params[] = { &seed_a, &stream_a, &n_a, &lo, &hi, &dtype, &out };
    if ((rc = s_enqueue (dev, fill->fn, grid, block, 0, params, err)) != 0)
        return rc;
    return s_sync (dev, err);
}

/*  float32 always; float16 and bfloat16 when the toolkit's headers for
    them were found (every architecture NVRTC 13 targets has both). */
static bool s_supports_dtype (const Ak__Device *device, ak_dtype_t dt)
{
    if (dt == AK_DT_FLOAT32)
        return true;
    if (dt == AK_DT_FLOAT16 || dt == AK_DT_BFLOAT16)
        return ak_cuda_include_dir () != NULL;
    return false;
}

static const ak_backend_t s_cuda = {
    .name = "cuda",
    .probe = s_probe,
    .compile = s_compile,
    .open = s_open,
    .close = s_close,
    .load = s_load,
    .unload = s_unload,
    .alloc = s_alloc,
    .release = s_release,
    .upload = s_upload,
    .download = s_download,
    .fill = s_fill,
    .launch = s_launch,
    .time = s_time,
    .supports_dtype = s_supports_dtype,
};

const ak_backend_t *ak_backend_cuda (void)
{
    return &s_cuda;
}

#else  /* !AK_HAVE_CUDA: the table is absent; the extras answer AK_EUNAVAIL. */

static int s_absent (ak_err_t *err)
{
    return ak_err_set (err, AK_EUNAVAIL, "CUDA backend: this akworker was built without CUDA headers");
}

const ak_backend_t *ak_backend_cuda (void)
{
    return NULL;
}

/*  Under s_cupti_mu: the kernel record of external id ext, newest first. */
static void s_cupti_find (uint64_t ext, bool *have_corr, uint32_t *corr, bool *found,
                          ak_cuda_kernel_record_t *rec)
{
    *have_corr = *found = false;
    for (unsigned i = 0; i < AK_CUPTI_RING && i < s_ext_next; i++) {
        const s_ext_rec_t *x = &s_ext_ring[(s_ext_next - 1 - i) % AK_CUPTI_RING];
        if (x->ext == ext) {
            *corr = x->corr;
            *have_corr = true;
            break;
        }
    }
    for (unsigned i = 0; *have_corr && i < AK_CUPTI_RING && i < s_kern_next; i++) {
        const ak_cuda_kernel_record_t *k = &s_kern_ring[(s_kern_next - 1 - i) % AK_CUPTI_RING];
        if (k->correlation_id == *corr) {
            *rec = *k;
            *found = true;
            break;
        }
    }
}

int ak_cuda_last_kernel (ak_dev_t *dev, ak_cuda_kernel_record_t *rec, ak_err_t *err)
{
    return s_absent (err);
}

int ak_cuda_last_kernel_us (ak_dev_t *dev, double *us, ak_err_t *err)
{
    return s_absent (err);
}

bool ak_cuda_cupti_active (ak_dev_t *dev, const char **why_p)
{
    if (why_p)
        *why_p = "built without CUDA headers";
    return false;
}

int ak_cuda_fill_uniform (ak_dev_t *dev, ak_kernel_t *fill, void *buf, uint64_t n,
                          uint64_t seed, uint64_t stream, double lo, double hi,
                          int dtype, ak_err_t *err)
{
    return s_absent (err);
}

#endif
