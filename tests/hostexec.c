/*  tests/hostexec.c: softmax host jobs for executor tests (hostexec.h). */
#include "hostexec.h"
#include "support.h"
#include "worker/backend.h"
#include "worker/backends.h"
#include "worker/pbutil.h"
#include "util.h"

#include <stdlib.h>
#include <string.h>

char *ak_test_host_build (const char *cache_dir, const char *text, bool reference, ak_err_t *err,
                          char **log_p)
{
    ak_compile_req_t req;
    ak_compile_out_t out;
    memset (&req, 0, sizeof req);
    memset (&out, 0, sizeof out);
    req.source = text;
    req.source_len = strlen (text);
    req.reference = reference;
    req.dtype = AK_DT_FLOAT32;
    req.cache_dir = cache_dir;
    req.timeout_ms = 60000;
    int rc = ak_backend_host ()->compile (&req, &out, err);
    if (log_p)
        *log_p = out.log;
    else
        free (out.log);
    if (rc) {
        free (out.artifact_path);
        return NULL;
    }
    return out.artifact_path;
}

Ak__Assign *ak_test_host_assign (const ak_spec_t *spec, const char *spec_json, const char *task_id,
                                 const char *kind, const char *cand_name, const char *cand_text,
                                 const ak_test_job_opts_t *o)
{
    Ak__Assign *a = ak_malloc (sizeof *a);
    ak__assign__init (a);
    ak_pb_set_str (&a->task_id, task_id);
    ak_pb_set_str (&a->batch_id, "B000001");
    a->attempt = 1;
    a->lease_ms = o->lease_ms;
    ak_pb_set_str (&a->kind, kind);
    ak_pb_set_str (&a->op, "softmax");
    ak_pb_set_str (&a->device_class, "host");
    ak_pb_set_str (&a->backend, "host");
    ak_pb_set_str (&a->spec_json, spec_json);
    a->reference = ak_test_source ("ref.c", spec->reference.text);
    a->baseline = ak_test_source ("baseline.c", ak_spec_baseline (spec, "host")->source.text);
    if (cand_text) {
        a->candidate = ak_test_source (cand_name, cand_text);
        ak_pb_set_str (&a->candidate_name, cand_name);
    }
    Ak__Workload *w = ak_malloc (sizeof *w);
    ak__workload__init (w);
    ak_pb_set_str (&w->name, "small");
    w->n_dims = 2;
    w->dims = ak_calloc (2, sizeof *w->dims);
    w->dims[0] = o->rows;
    w->dims[1] = o->cols;
    ak_pb_set_str (&w->dtype, "float32");
    w->weight = 1;
    a->n_workloads = 1;
    a->workloads = ak_calloc (1, sizeof *a->workloads);
    a->workloads[0] = w;
    Ak__Policy *p = ak_malloc (sizeof *p);
    ak__policy__init (p);
    p->compile_timeout_ms = o->compile_timeout_ms;
    p->run_timeout_ms = o->run_timeout_ms;
    p->warmup = 1;
    p->min_samples = 3;
    p->max_samples = o->max_samples;
    p->rsd_target = 0.5;
    p->max_time_ms = o->max_time_ms;
    p->seed = o->seed;
    a->policy = p;
    return a;
}
