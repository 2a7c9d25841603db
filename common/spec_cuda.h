/*  common/spec_cuda.h: the parts of the spec grammar only CUDA kernels
    have (docs/formats.md "CUDA targets, tensor maps, clusters, vendor
    baselines"), and the architecture rules both the coordinator and the
    worker apply.

    - "arch" on a candidate or cuda baseline: "sm_90a" (or "sm_XY" /
      "sm_XYa"): the kernel is built for that target and runs only where
      it can (ak_arch_check).  The coordinator leaves it out of targets
      whose class names another compute capability (ak_class_cc); a worker
      refuses it before compiling on a device of another one.
    - "tensor_maps" on a candidate or cuda baseline, "cluster" in a launch
      rule: kept in ak_launch_rule_t, evaluated by ak_launch_eval.
    - a library baseline {"backend": "cuda", "library": "cublaslt",
      "op": "matmul"}: no source, no launch; it travels as a one-line
      marker source (ak_spec_library_source) that the CUDA backend
      recognises instead of compiling.

    Used by spec.c only (and the arch helpers by expand.c and the CUDA
    backend).  Never: accept a field for a backend that does not use it
    (a host kernel with tensor maps, a library on the host), or keep a
    pointer into the json_t. */
#ifndef AK_SPEC_CUDA_H
#define AK_SPEC_CUDA_H
#include <stdbool.h>
#include <jansson.h>
#include "error.h"
#include "spec.h"

/* --------------------------------------------------------- architecture */

/*  "sm_90a" -> 9, 0, specific = true; "sm_80" -> 8, 0, false.  0, or -1
    for anything else. */
int  ak_arch_parse (const char *arch, int *major, int *minor, bool *specific);
/*  Whether a kernel built for arch runs on a device of compute capability
    major.minor: sm_XYa exactly X.Y (arch-specific features are not
    forward compatible); sm_XY the same major with minor >= Y (CUBIN
    compatibility); NULL arch always.  0, or AK_EUNSUPPORTED with err
    saying which arch and which device ("built for sm_90a (compute
    capability 9.0 only); the device is sm_80"). */
int  ak_arch_check (const char *arch, int major, int minor, ak_err_t *err);
/*  The compute capability a device class names in its "/sm_XY/" segment
    ("NVIDIA_H200/sm_90/drv580/nvrtc13.0"): true and major, minor; false
    when the class does not say (then nothing can be decided before a
    worker of it answers). */
bool ak_class_cc (const char *device_class, int *major, int *minor);

/* --------------------------------------------------------------- parsing */

/*  The "arch" member of a candidate or baseline object at path: absent is
    NULL; refused on a backend other than cuda or when ak_arch_parse does
    not take it. */
int  ak_spec_parse_arch (json_t *obj, const char *backend, const char *label, const char *path,
                         char **arch_p, ak_err_t *err);
/*  The "tensor_maps" member of the kernel object obj at path into rule
    (names: the launch rule's variables).  Refused for backends other than
    cuda and for a library baseline (rule NULL).  Names unique C
    identifiers, buffers of the spec, 1..5 dims with a box each, strides 0
    or rank-1, the enums known. */
int  ak_spec_parse_tmaps (json_t *obj, const ak_spec_t *spec, const char *const *names, int nnames,
                          const char *backend, const char *label, const char *path,
                          ak_launch_rule_t *rule, ak_err_t *err);
/*  The "cluster" member of a launch object: 1 to 3 expressions. */
int  ak_spec_parse_cluster (json_t *launch, const char *const *names, int nnames, const char *label,
                            const char *path, ak_launch_rule_t *rule, ak_err_t *err);
/*  A library baseline object (it has "library"): library and op known,
    the spec of the shape the op needs (matmul: keys M, N, K, inputs
    a = M*K and b = K*N, output c = M*N, row-major), no source or launch;
    fills bl's library, lib_op and its marker source. */
int  ak_spec_parse_library (json_t *obj, const ak_spec_t *spec, const char *label, const char *path,
                            ak_baseline_t *bl, ak_err_t *err);

/*  The marker source of a library baseline: "//@akfleet-library cublaslt
    matmul M=0 N=1 K=2\n" (the key positions of the op's dimensions in the
    spec's key order).  Caller frees.  NULL for an unknown op. */
char *ak_spec_library_source (const ak_spec_t *spec, const char *library, const char *op);
#define AK_LIBRARY_MARKER "//@akfleet-library "

/* ------------------------------------------------------- JSON and frees */

/*  Adds "arch" and "tensor_maps" (from rule) to the kernel object o. */
void ak_spec_cuda_json (json_t *o, const char *arch, const ak_launch_rule_t *rule);
/*  Adds "cluster" to the launch object o when the rule has one. */
void ak_spec_cluster_json (json_t *o, const ak_launch_rule_t *rule);
/*  Frees the rule's cluster and tensor maps. */
void ak_spec_cuda_rule_clear (ak_launch_rule_t *rule);

#endif
