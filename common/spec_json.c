/*  common/spec_json.c: a parsed spec back to JSON (spec.h: ak_spec_to_json,
    ak_spec_to_text, ak_spec_shape_json), the canonical form that travels
    with tasks and whose text is digested: the fields the parser keeps, in
    the parser's grammar.  Split from spec.c (the parser) in session 38.

    Never: a field written here that the parser would refuse, or one
    written only sometimes where its absence means something else (an
    optional field appears only when it was given: older specs keep their
    digests). */
#include "spec.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "spec_cuda.h"
#include "util.h"

/* ---------------------------------------------------------- spec to JSON */

json_t *ak_spec_shape_json (const ak_spec_t *spec, const int64_t *dims)
{
    json_t *o = json_object ();
    for (int k = 0; k < spec->nkeys; k++)
        json_object_set_new (o, spec->keys[k], json_integer ((json_int_t) dims[k]));
    return o;
}

static json_t *s_sizes_json (const ak_spec_t *spec, const ak_size_t *sizes, size_t n)
{
    json_t *a = json_array ();
    for (size_t i = 0; i < n; i++)
    {
        json_t *o = json_pack ("{s:s, s:o}", "name", sizes[i].name,
                               "size", ak_spec_shape_json (spec, sizes[i].dims));
        if (o && sizes[i].backends) {
            json_t *bs = json_array ();
            if (sizes[i].backends & AK_BACKEND_HOST)
                json_array_append_new (bs, json_string ("host"));
            if (sizes[i].backends & AK_BACKEND_CUDA)
                json_array_append_new (bs, json_string ("cuda"));
            json_object_set_new (o, "backends", bs);
        }
        json_array_append_new (a, o);
    }
    return a;
}

static json_t *s_tol_json (const ak_tol_t *tol)
{
    return json_pack ("{s:f, s:f}", "atol", tol->atol, "rtol", tol->rtol);
}

static json_t *s_launch_json (const ak_launch_rule_t *rule)
{
    json_t *grid = json_array (), *block = json_array ();
    for (int i = 0; i < rule->ngrid; i++)
        json_array_append_new (grid, json_string (rule->grid[i]));
    for (int i = 0; i < rule->nblock; i++)
        json_array_append_new (block, json_string (rule->block[i]));
    json_t *o = json_pack ("{s:o, s:o, s:s}", "grid", grid, "block", block,
                           "shared", rule->shared ? rule->shared : "0");
    ak_spec_cluster_json (o, rule);
    return o;
}

static json_t *s_candidate_json (const ak_candidate_t *cand, bool with_text)
{
    json_t *params = json_object (), *constraints = json_array ();
    for (size_t i = 0; i < cand->nparams; i++) {
        json_t *vals = json_array ();
        for (size_t j = 0; j < cand->params[i].nvalues; j++)
            json_array_append_new (vals, json_integer ((json_int_t) cand->params[i].values[j]));
        json_object_set_new (params, cand->params[i].name, vals);
    }
    for (size_t i = 0; i < cand->nconstraints; i++)
        json_array_append_new (constraints, json_string (cand->constraints[i]));
    json_t *o = json_pack ("{s:s, s:s, s:o, s:o, s:o}", "name", cand->name, "backend", cand->backend,
                           "source", ak_source_to_json (&cand->source, with_text),
                           "params", params, "constraints", constraints);
    if (o && cand->nseeds) {
        json_t *seeds = json_array ();
        for (size_t k = 0; k < cand->nseeds; k++) {
            json_t *c = json_object ();
            for (size_t i = 0; i < cand->nparams; i++)
                json_object_set_new (c, cand->params[i].name,
                                     json_integer ((json_int_t) cand->seeds[k * cand->nparams + i]));
            json_array_append_new (seeds, c);
        }
        json_object_set_new (o, "seeds", seeds);
    }
    if (o && cand->launch)
        json_object_set_new (o, "launch", s_launch_json (cand->launch));
    ak_spec_cuda_json (o, cand->arch, cand->launch);
    return o;
}

static json_t *s_bufs_json (const ak_buf_t *bufs, int n, bool inputs)
{
    json_t *a = json_array ();
    for (int i = 0; i < n; i++) {
        json_t *o = json_pack ("{s:s, s:s}", "name", bufs[i].name, "count", bufs[i].count);
        if (inputs)
            json_object_set_new (o, "range", json_pack ("[f, f]", bufs[i].lo, bufs[i].hi));
        json_array_append_new (a, o);
    }
    return a;
}

json_t *ak_spec_to_json (const ak_spec_t *spec, bool with_sources)
{
    if (!spec)
        return NULL;
    json_t *o = json_object (), *keys = json_array (), *dtypes = json_array ();
    json_t *tols = json_object (), *baselines = json_array (), *cands = json_array ();
    for (int k = 0; k < spec->nkeys; k++)
        json_array_append_new (keys, json_string (spec->keys[k]));
    for (int t = 0; t < spec->ndtypes; t++) {
        json_array_append_new (dtypes, json_string (ak_dtype_name (spec->dtypes[t])));
        json_object_set_new (tols, ak_dtype_name (spec->dtypes[t]), s_tol_json (&spec->tol[t]));
    }
    json_object_set_new (o, "schema_version", json_integer (AK_SPEC_SCHEMA_VERSION));
    json_object_set_new (o, "name", json_string (spec->name));
    json_object_set_new (o, "keys", keys);
    json_object_set_new (o, "dtypes", dtypes);
    json_object_set_new (o, "tolerances", tols);
    json_object_set_new (o, "sizes", s_sizes_json (spec, spec->sizes, spec->nsizes));
    if (spec->nedge)
        json_object_set_new (o, "edge_sizes", s_sizes_json (spec, spec->edge_sizes, spec->nedge));
    json_object_set_new (o, "stability_size", json_string (spec->stability_size));
    ak_spec_near_max_json (spec, o);
    json_object_set_new (o, "flops", json_string (spec->flops));
    json_object_set_new (o, "bytes", json_string (spec->bytes));
    json_object_set_new (o, "inputs", s_bufs_json (spec->inputs, spec->ninputs, true));
    json_object_set_new (o, "outputs", s_bufs_json (spec->outputs, spec->noutputs, false));
    json_object_set_new (o, "inplace", json_boolean (spec->inplace));
    json_object_set_new (o, "reference", ak_source_to_json (&spec->reference, with_sources));
    if (spec->reference_cuda.name && spec->reference_cuda_launch) {
        /* Always with its text where there is one: no task field carries it. */
        json_t *r = json_pack ("{s:o, s:o}", "source",
                               ak_source_to_json (&spec->reference_cuda, with_sources || spec->reference_cuda.text),
                               "launch", s_launch_json (spec->reference_cuda_launch));
        json_object_set_new (o, "reference_cuda", r);
    }
    for (size_t i = 0; i < spec->nbaselines; i++) {
        const ak_baseline_t *bl = &spec->baselines[i];
        json_t *b;
        if (bl->library)         /* its marker source is made again from these */
            b = json_pack ("{s:s, s:s, s:s}", "backend", bl->backend, "library", bl->library,
                           "op", bl->lib_op);
        else
            b = json_pack ("{s:s, s:o}", "backend", bl->backend,
                           "source", ak_source_to_json (&bl->source, with_sources));
        if (b && bl->launch)
            json_object_set_new (b, "launch", s_launch_json (bl->launch));
        ak_spec_cuda_json (b, bl->arch, bl->launch);
        json_array_append_new (baselines, b);
    }
    json_object_set_new (o, "baselines", baselines);
    for (size_t i = 0; i < spec->ncandidates; i++)
        json_array_append_new (cands, s_candidate_json (&spec->candidates[i], with_sources));
    json_object_set_new (o, "candidates", cands);
    return o;
}

char *ak_spec_to_text (const ak_spec_t *spec, bool with_sources)
{
    json_t *o = ak_spec_to_json (spec, with_sources);
    if (!o)
        return NULL;
    char *text = json_dumps (o, JSON_COMPACT | JSON_PRESERVE_ORDER);
    json_decref (o);
    return text;
}
