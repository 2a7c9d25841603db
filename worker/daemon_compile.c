/*  worker/daemon_compile.c: the daemon's compile stage (daemon_impl.h):
    every artifact of a task built on the pool, off the loop thread. */
#include "daemon_impl.h"
#include "assign.h"
#include "backends.h"
#include "digest.h"
#include "log.h"
#include "spec.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/*  The line of a compiler log worth quoting: the first with "error". */
static void s_log_headline (const char *log, char *buf, size_t len)
{
    const char *line = log, *pick = NULL;
    while (line && *line) {
        const char *end = strchr (line, '\n');
        size_t n = end ? (size_t) (end - line) : strlen (line);
        if (!pick && n > 0)
            pick = line;
        if (memmem (line, n, "error", 5)) {
            pick = line;
            break;
        }
        line = end ? end + 1 : NULL;
    }
    if (!pick) {
        snprintf (buf, len, "no compiler output");
        return;
    }
    size_t n = strcspn (pick, "\n");
    if (n >= len)
        n = len - 1;
    memcpy (buf, pick, n);
    buf[n] = '\0';
}

/*  One compile of a task (reference, baseline or candidate, for element
    type dtype) for device.  On failure sets the task's failure status and
    reason and returns non-zero: a source under test that does not build is
    a compile_error; the reference (or a tune task's baseline) not building
    is an error of the batch, not of the candidate. */
static int s_compile_one (ak_daemon_t *d, ak_dtask_t *t, const char *what, const ak_backend_t *be,
                          const Ak__Device *device, const Ak__Source *src, ak_dtype_t dtype,
                          bool reference, bool with_params, bool under_test,
                          char **path_p, char *options_digest)
{
    const Ak__Assign *a = t->a;
    ak_compile_req_t req;
    ak_compile_out_t out;
    ak_err_t err = { 0 };
    memset (&req, 0, sizeof req);
    if (!src || !src->text || !src->text[0]) {
        t->fail_status = "error";
        snprintf (t->fail_reason, sizeof t->fail_reason, "task has no %s source", what);
        return -1;
    }
    if (src->digest[0]) {
        char hex[65];
        ak_sha256_hex (src->text, strlen (src->text), hex);
        if (strcmp (hex, src->digest) != 0) {
            t->fail_status = "error";
            snprintf (t->fail_reason, sizeof t->fail_reason,
                      "%s source %.64s: digest %.16s... does not match its text (%.16s...)",
                      what, src->name, src->digest, hex);
            return -1;
        }
    }
    req.source = src->text;
    req.source_len = strlen (src->text);
    req.reference = reference;
    req.dtype = dtype;
    if (with_params) {
        for (size_t i = 0; i < a->n_params; i++) {
            req.define_names[i] = a->params[i]->name;
            req.define_values[i] = a->params[i]->value;
        }
        req.ndefines = (int) a->n_params;
    }
    req.cache_dir = d->cache_dir;
    /* compile_timeout_ms bounds the task's compiles together, apart from
       its run limit (run_timeout_ms, the executor's watchdog) */
    req.timeout_ms = t->policy.compile_timeout_ms;
    if (req.timeout_ms)
        req.timeout_ms = t->compile_ms + 1 < req.timeout_ms ? req.timeout_ms - (uint32_t) t->compile_ms : 1;
    req.device = device;
    req.cancel = &d->cancel;
    char name[200];
    snprintf (name, sizeof name, "%s %.120s", what, src->name && src->name[0] ? src->name : "(unnamed)");
    req.name = name;
    if (!reference) {
        const char *arch = with_params ? t->cand_arch : t->base_arch;
        req.arch = arch[0] ? arch : NULL;
        req.library = !with_params && t->base_library;
    }

    int rc = be->compile (&req, &out, &err);
    t->compile_ms += out.ms;
    if (rc == 0) {
        *path_p = out.artifact_path;
        if (options_digest)
            memcpy (options_digest, out.options_digest, sizeof out.options_digest);
        ak_debug ("task %s#%u: %s (%s) %s (%.0f ms)", a->task_id, a->attempt, what,
                  reference ? "float64" : ak_dtype_name (dtype), out.cached ? "from cache" : "compiled",
                  out.ms);
        free (out.log);
        return 0;
    }
    if (options_digest && out.options_digest[0])
        memcpy (options_digest, out.options_digest, sizeof out.options_digest);
    if (rc == AK_ECOMPILE) {
        char head[240];
        s_log_headline (out.log ? out.log : "", head, sizeof head);
        t->fail_status = under_test ? "compile_error" : "error";
        snprintf (t->fail_reason, sizeof t->fail_reason, "%s failed to compile (%s): %s", what,
                  reference ? "float64" : ak_dtype_name (dtype), head);
    }
    else if (rc == AK_ETIMEOUT) {
        t->fail_status = under_test ? "compile_error" : "error";
        snprintf (t->fail_reason, sizeof t->fail_reason, "%s: %.400s", what, err.msg);
    }
    else if (rc == AK_EINVAL || rc == AK_EUNSUPPORTED) {
        t->fail_status = "invalid_config";
        snprintf (t->fail_reason, sizeof t->fail_reason, "%s: %.400s", what, err.msg);
    }
    else {
        t->fail_status = "error";
        snprintf (t->fail_reason, sizeof t->fail_reason, "%s: %.400s", what, err.msg);
    }
    free (t->compile_log);
    t->compile_log = out.log;
    free (out.artifact_path);
    return -1;
}

/*  The element types to build a task's kernels for on device: those the
    spec declares and the backend supports, in spec order; when there are
    none, the backend's default (the gates then say the spec's dtypes are
    not supported).  Returns how many, or -1 with the task failed when the
    spec does not parse. */
static int s_build_dtypes (ak_dtask_t *t, const ak_backend_t *be, const Ak__Device *device,
                           ak_dtype_t out[AK_DT_COUNT])
{
    const Ak__Assign *a = t->a;
    ak_spec_t *spec = NULL;
    ak_err_t err = { 0 };
    if (!a->spec_json || ak_spec_parse_text (a->spec_json, strlen (a->spec_json), "assign.spec_json",
                                             &spec, &err) != 0) {
        t->fail_status = "error";
        snprintf (t->fail_reason, sizeof t->fail_reason, "spec: %.480s",
                  a->spec_json ? err.msg : "missing");
        return -1;
    }
    const ak_baseline_t *bl = ak_spec_baseline (spec, be->name);
    const ak_candidate_t *cd = a->candidate_name ? ak_spec_candidate (spec, a->candidate_name) : NULL;
    snprintf (t->base_arch, sizeof t->base_arch, "%s", bl && bl->arch ? bl->arch : "");
    snprintf (t->cand_arch, sizeof t->cand_arch, "%s", cd && cd->arch ? cd->arch : "");
    t->base_library = bl && bl->library;
    int n = 0;
    for (int i = 0; i < spec->ndtypes; i++)
        if (!be->supports_dtype || be->supports_dtype (device, spec->dtypes[i]))
            out[n++] = spec->dtypes[i];
    if (n == 0)
        out[n++] = ak_backend_build_dtype (be, device);
    ak_spec_destroy (&spec);
    return n;
}

/*  The spec's device reference (reference_cuda, its text inside
    spec_json), built in float64 for a cuda device; nothing to do for other
    backends or a spec without one.  Non-zero when it failed to build (the
    task's error, set by s_compile_one). */
static int s_compile_dref (ak_daemon_t *d, ak_dtask_t *t, const ak_backend_t *be,
                           const Ak__Device *device)
{
    const Ak__Assign *a = t->a;
    ak_spec_t *spec = NULL;
    ak_err_t err = { 0 };
    if (strcmp (be->name, "cuda") != 0 || !a->spec_json
     || ak_spec_parse_text (a->spec_json, strlen (a->spec_json), "assign.spec_json", &spec, &err) != 0)
        return 0;        /* a spec that does not parse fails the task elsewhere */
    int rc = 0;
    if (spec->reference_cuda.text && spec->reference_cuda_launch) {
        Ak__Source src = AK__SOURCE__INIT;
        src.name = spec->reference_cuda.name;
        src.text = spec->reference_cuda.text;
        src.digest = spec->reference_cuda.digest;
        rc = s_compile_one (d, t, "device reference", be, device, &src, AK_DT_FLOAT32,
                            true, false, false, &t->dref_path, NULL);
    }
    ak_spec_destroy (&spec);
    return rc;
}

/*  Pool thread: builds the reference (always host, float64), then the
    baseline and, for tune, the candidate with its parameters as defines,
    once per element type the device's backend runs for the spec.  The
    options digest of the receipt is that of the first (primary) build. */
void ak_daemon_compile_task (void *item, void *arg)
{
    ak_dtask_t *t = item;
    ak_daemon_t *d = arg;
    const Ak__Assign *a = t->a;
    bool tune = ak_assign_is_tune (a);               /* tune, verify */
    bool profile = strcmp (a->kind, "profile") == 0;
    bool cand = ak_assign_tests_candidate (a);      /* tune; profile of a candidate */
    if (!tune && !profile && strcmp (a->kind, "preflight") != 0) {
        t->fail_status = "error";
        snprintf (t->fail_reason, sizeof t->fail_reason,
                  "task kind '%.32s' is not run by this worker (preflight, tune, verify and profile are)", a->kind);
        return;
    }
    if (a->n_params > AK_MAX_PARAMS) {
        t->fail_status = "invalid_config";
        snprintf (t->fail_reason, sizeof t->fail_reason, "%zu parameters, limit %d",
                  a->n_params, AK_MAX_PARAMS);
        return;
    }
    int dev = ak_daemon_device_for (d, a);
    if (dev < 0) {
        t->fail_status = "error";
        snprintf (t->fail_reason, sizeof t->fail_reason,
                  "no device of class '%.64s' (backend '%.16s') on this worker",
                  a->device_class, a->backend);
        return;
    }
    const ak_backend_t *be = d->dev_be[dev];
    const Ak__Device *device = d->devices[dev];
    ak_dtype_t dtypes[AK_DT_COUNT];
    int n = s_build_dtypes (t, be, device, dtypes);
    if (n < 0)
        return;
    if (s_compile_one (d, t, "reference", ak_backend_host (), NULL, a->reference, AK_DT_FLOAT32,
                       true, false, false, &t->ref_path, NULL) != 0)
        return;
    if (s_compile_dref (d, t, be, device) != 0)
        return;
    for (int i = 0; i < n; i++) {
        ak_dtype_t dt = dtypes[i];
        char *digest = i == 0 ? t->options_digest : NULL;
        /* A profile of a candidate runs only the candidate. */
        if (!(profile && cand)
            && s_compile_one (d, t, "baseline", be, device, a->baseline, dt, false, false, !cand,
                              &t->base_path[dt], cand ? NULL : digest) != 0)
            return;
        if (cand && s_compile_one (d, t, "candidate", be, device, a->candidate, dt, false, true, true,
                                   &t->cand_path[dt], digest) != 0)
            return;
    }
}

void ak_daemon_drain_compiles (ak_daemon_t *d)
{
    ak_dtask_t *t;
    while ((t = ak_pool_pop_done (d->pool)) != NULL) {
        if (t->fail_status) {
            ak_daemon_task_fail (d, t, t->fail_status, t->fail_reason);
            continue;
        }
        t->state = AK_DTASK_READY;
    }
}
