/*  worker/backend_cuda_daemon.c: the CUDA backend's daemon side, run by
    the worker daemon (akworker): the compile plan, probe and compile
    (backend_cuda_impl.h says where the rest is).

    Probe lists every device (name, UUID, compute capability, SMs, memory,
    L2, clocks, driver / NVRTC / CUPTI versions) with its device class
    "<name>/sm_XY/drv<major>/nvrtc<maj.min>"; compile prepends the embedded
    prelude (kernels/ak_kernel_cuda.h) and runs NVRTC in the confined
    helper ak-nvrtc (fork and exec, worker/nvrtc_run.h) under the time
    limit, into cache_dir/<key>.cubin.  The compile plan
    (options, cache key, toolkit include folder) exists in every build.

    Never: link a CUDA library, leave a half-written CUBIN where a reader
    could load it, trust a define name, or hold a device context (that is
    the executor's). */
#include "backend_cuda_impl.h"
#include "cache.h"
#include "clock.h"
#include "digest.h"
#include "log.h"
#include "nvrtc_run.h"
#include "spec_cuda.h"
#include "util.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

extern const char ak_prelude_cuda[];
extern const size_t ak_prelude_cuda_len;

#ifndef AK_CUDA_ROOT_DIR
#define AK_CUDA_ROOT_DIR "/usr/local/cuda"
#endif

/* ================================================== compile plan (always) */

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
        if (!ak_compile_define_ok (name))
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

    int rc = ak_arch_check (req->arch, cc_major, cc_minor, err);
    if (rc)
        return ak_err_prefix (err, "refused before compile");
    char *s = NULL;
    char line[512];
    if (req->arch)
        snprintf (line, sizeof line, "--gpu-architecture=%s", req->arch);
    else
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

void ak_cuda_cache_key (const char *source, size_t source_len, const char *options,
                        const char *arch, const char *nvrtc_version,
                        const char *headers_digest, char key[65])
{
    pthread_once (&s_facts_once, s_facts_init);
    const char *parts[] = { options ? options : "", arch ? arch : "",
                            nvrtc_version ? nvrtc_version : "", headers_digest ? headers_digest : "" };
    ak_sha256_t ctx;
    ak_sha256_init (&ctx);
    /* The tag stands for how ak_cuda_be_compile lays out the text NVRTC sees (the
       #line lines around the prelude): change it when that changes. */
    ak_compile_key_part (&ctx, "akfleet-cuda-1", 14);
    ak_compile_key_part (&ctx, s_prelude_digest, 64);
    ak_compile_key_part (&ctx, source ? source : "", source ? source_len : 0);
    for (size_t i = 0; i < sizeof parts / sizeof parts[0]; i++)
        ak_compile_key_part (&ctx, parts[i], strlen (parts[i]));
    ak_sha256_final_hex (&ctx, key);
}

#if AK_HAVE_CUDA

#include <fcntl.h>
#include <stdatomic.h>

static atomic_flag s_said_hello = ATOMIC_FLAG_INIT;

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

/*  Every device the driver lists (see backend.h).  NVRTC is required (a
    CUDA worker that cannot compile is of no use); CUPTI is not. */
int ak_cuda_be_probe (Ak__Device ***devices_p, size_t *n_p, ak_err_t *err)
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
    ak_cuda_be_eager_modules ();
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
            || (rc = ak_cuda_be_attr (drv, d, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR,
                                      "cc major", &ccmaj, err)) != 0
            || (rc = ak_cuda_be_attr (drv, d, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR,
                                      "cc minor", &ccmin, err)) != 0
            || (rc = ak_cuda_be_attr (drv, d, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, "SM count",
                                      &sms, err)) != 0
            || (rc = ak_cuda_be_attr (drv, d, CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE, "L2 size", &l2, err)) != 0) {
            ak_err_prefix (err, "device %d", i);
            goto fail;
        }
        /* Clocks are informative; CUDA 13 keeps the attributes, but a
           driver that refuses them costs us nothing but the figure. */
        ak_err_t soft = { 0 };
        if (ak_cuda_be_attr (drv, d, CU_DEVICE_ATTRIBUTE_CLOCK_RATE, "clock rate", &clk, &soft) != 0) {
            ak_debug ("cuda device %d: %s", i, soft.msg);
            clk = 0;
        }
        if (ak_cuda_be_attr (drv, d, CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE, "memory clock", &mclk,
                             &soft) != 0) {
            ak_debug ("cuda device %d: %s", i, soft.msg);
            mclk = 0;
        }
        ak_cuda_be_uuid_text (&u, uuid);
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

/*  The NVRTC library the daemon loaded (ak_cuda_nvrtc_file: the helper
    loads the same file, so the version in every key is the one that
    built), and how the helper is confined: said once in the log. */
static pthread_once_t s_nvrtc_file_once = PTHREAD_ONCE_INIT;

static void s_nvrtc_file_init (void)
{
    const ak_cuda_nvrtc_t *nv = NULL;
    if (ak_cuda_nvrtc (&nv, NULL) != 0)
        return;
    char desc[600];
    ak_nvrtc_describe (AK_CUDA_COMPILE_MS, desc, sizeof desc);
    ak_info ("cuda compile: NVRTC (%s) runs in %s", ak_cuda_nvrtc_file ()[0] ? ak_cuda_nvrtc_file () : "not found",
             desc);
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

/*  A library baseline (req->library): the artifact is the marker line
    (cache_dir/<key>.lib), which ak_cuda_be_load opens as a library call.
    An op with a helper kernel of ours (ak_cuda_lib_helper: swiglu_mlp's
    silu * mul) gets that kernel built like any other (NVRTC, the prelude,
    the device's sm_XY, req's dtype) and its CUBIN appended after the line;
    the helper's build key is part of the artifact's.  A source that is not
    one marker line is refused. */
static int s_library_artifact (const ak_compile_req_t *req, ak_compile_out_t *out, uint64_t t0,
                               ak_err_t *err)
{
    size_t mlen = strlen (AK_LIBRARY_MARKER);
    const char *nl = memchr (req->source, '\n', req->source_len);
    if (req->source_len <= mlen || req->source_len > 256 || memcmp (req->source, AK_LIBRARY_MARKER, mlen) != 0
        || (nl && nl != req->source + req->source_len - 1))
        return ak_err_set (err, AK_EINVAL, "cuda compile: a library baseline's source must be its one marker "
                           "line (%s...)", AK_LIBRARY_MARKER);
    const char *helper = ak_cuda_lib_helper (req->source, req->source_len);
    ak_compile_out_t hout = { 0 };
    char *cubin = NULL, *image = NULL, *tmp = NULL;
    size_t cubin_len = 0;
    int rc = 0;
    if (helper) {
        ak_compile_req_t h = *req;
        h.source = helper;
        h.source_len = strlen (helper);
        h.library = false;
        h.reference = false;
        h.arch = NULL;
        h.ndefines = 0;
        rc = ak_cuda_be_compile (&h, &hout, err);
        if (rc == 0)
            rc = ak_file_read (hout.artifact_path, AK_CUDA_CUBIN_MAX, &cubin, &cubin_len, err);
        if (rc) {
            out->log = hout.log;
            free (hout.artifact_path);
            return ak_err_prefix (err, "cuda compile: the library call's helper kernel");
        }
    }
    char *log = helper ? ak_strdup (hout.log ? hout.log : "") : ak_strdup ("");
    free (hout.log);
    free (hout.artifact_path);
    ak_sha256_hex ("library", 7, out->options_digest);
    ak_cuda_cache_key (req->source, req->source_len, "library", helper ? hout.key : "any", "", "", out->key);
    ak_cache_build_t b;
    rc = ak_cache_build_begin (&b, req->cache_dir, out->key, ".lib", out, err);
    if (rc || out->cached)
        goto done;
    image = ak_malloc (req->source_len + cubin_len + 1);
    memcpy (image, req->source, req->source_len);
    size_t len = req->source_len;
    if (req->source[len - 1] != '\n')
        image[len++] = '\n';
    if (cubin_len)
        memcpy (image + len, cubin, cubin_len);
    len += cubin_len;
    tmp = ak_cache_build_path (&b, "library.lib");
    rc = ak_file_write_atomic (tmp, image, len, err);
    if (rc == 0)
        rc = ak_cache_build_commit (&b, tmp, err);
done:
    free (tmp);
    free (image);
    free (cubin);
    return ak_cache_build_end (&b, rc, t0, &log, out);
}

/*  Builds req into the cache (see backend.h): CUBIN for the device's
    sm_XY, cache_dir/<key>.cubin.  The options text is exactly what NVRTC
    gets (one option per line), so its digest names the build. */
int ak_cuda_be_compile (const ak_compile_req_t *req, ak_compile_out_t *out, ak_err_t *err)
{
    int rc = 0;
    char *options = NULL, *tmp_path = NULL, *log = NULL, *text = NULL;
    const char **opts = NULL;
    int nopts = 0;
    const ak_cuda_nvrtc_t *nv = NULL;

    uint64_t t0 = ak_clock_mono_ns ();
    rc = ak_compile_req_check (req, out, "cuda", err);
    if (rc)
        return rc;
    if (!req->device || req->device->cc_major == 0)
        return ak_err_set (err, AK_EINVAL, "cuda compile: no target device (compute capability)");
    int ccmaj = (int) req->device->cc_major, ccmin = (int) req->device->cc_minor;
    if ((rc = ak_arch_check (req->arch, ccmaj, ccmin, err)) != 0)
        return ak_err_prefix (err, "refused before compile");
    if (req->library)
        return s_library_artifact (req, out, t0, err);
    if ((rc = ak_cuda_nvrtc (&nv, err)) != 0)
        return rc;

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
    if (req->arch)
        snprintf (arch, sizeof arch, "%s", req->arch);
    else
        snprintf (arch, sizeof arch, "sm_%d", arch_num);
    ak_sha256_hex (options, strlen (options), out->options_digest);
    ak_cuda_cache_key (req->source, req->source_len, options, arch, ak_cuda_nvrtc_version_text (),
                       include_dir ? s_headers_digest : "", out->key);

    ak_cache_build_t b;
    rc = ak_cache_build_begin (&b, req->cache_dir, out->key, ".cubin", out, err);
    if (rc || out->cached)
        goto done;
    tmp_path = ak_cache_build_path (&b, "kernel.cubin");
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
    pthread_once (&s_nvrtc_file_once, s_nvrtc_file_init);
    const char *reads[] = { include_dir, NULL };
    ak_nvrtc_job_t job = { .name = req->name, .nvrtc_path = ak_cuda_nvrtc_file (), .text = text,
                           .text_len = strlen (text), .opts = opts, .nopts = nopts,
                           .scratch_dir = b.build_dir, .cubin_path = tmp_path,
                           .read_dirs = include_dir ? reads : NULL, .timeout_ms = req->timeout_ms,
                           .cancel = req->cancel };
    rc = ak_nvrtc_run (&job, &log, err);
    if (rc)
        goto done;
    /* Check the child's work before anyone can load it. */
    if (!s_is_elf (tmp_path)) {
        rc = ak_err_set (err, AK_ECOMPILE, "compile: %s is not an ELF CUBIN", tmp_path);
        goto done;
    }
    rc = ak_cache_build_commit (&b, tmp_path, err);

done:
    free (opts);
    free (options);
    free (tmp_path);
    free (text);
    return ak_cache_build_end (&b, rc, t0, &log, out);
}

#endif
