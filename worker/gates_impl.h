/*  worker/gates_impl.h: what the three files of the gates share (gates.c:
    the stages; gates_ref.c: one configuration's inputs, reference,
    buffers and runs; gates_cmp.c: comparisons).  Not an interface: only
    those files include it.

    Never: include it outside worker/gates*.c. */
#ifndef AK_WORKER_GATES_IMPL_H
#define AK_WORKER_GATES_IMPL_H
#include "gates.h"
#include "refcache.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define AK_POISON_BYTE 0xFF

/*  Every buffer of the kernel's (inputs and outputs) sits between two
    guard regions of AK_GUARD_BYTES, filled with AK_GUARD_BYTE before each
    launch and read back after it: a byte changed there is a write out of
    bounds, and the configuration fails as wrong_answer (AK_EBOUNDS) even
    when its outputs match.  0xFF is a NaN in every float type, so a read
    past an input's end that reaches an output shows as well.  A multiple
    of 256, so the buffers keep cuMemAlloc's alignment. */
#define AK_GUARD_BYTES ((size_t) 64 << 10)
#define AK_GUARD_BYTE  0xFF

/* Input transforms of the stability stage. */
typedef enum {
    AK_GX_NONE = 0,
    AK_GX_NEAR_MAX,        /* x60000 (fp16), x1e30 (bf16), x1e18 (fp32), clipped to the range */
    AK_GX_NEAR_ZERO,       /* x1e-6 */
    AK_GX_MIXED,           /* each element x1e3 or x1e-3 at random */
    AK_GX_ZEROS,           /* all 0 */
    AK_GX_SAME,            /* all 0.5 */
} ak_gxform_t;

/* Device buffer families of a run: the kernel's inputs and outputs, the
   device reference's float64 inputs and outputs.  Each family's buffer j
   is kept from one configuration to the next. */
enum { AK_GB_IN = 0, AK_GB_OUT, AK_GB_DIN, AK_GB_DOUT, AK_GB_COUNT };

/* One call of ak_gates_run / ak_gates_recheck. */
typedef struct {
    const ak_gate_ctx_t *ctx;
    ak_gate_cost_t      *cost;         /* the report's */
    struct {
        void  *p;              /* what the kernel gets: base + the guard for guarded families */
        void  *base;           /* what the backend allocated */
        size_t cap;
    } buf[AK_GB_COUNT][AK_MAX_BUFS];
    uint8_t *scratch;          /* guards and inputs read back (s_scratch) */
    size_t   scratch_cap;
} ak_grun_t;

/* One configuration (dims, dtype, seed, transform), prepared once, run as
   often as the stage needs. */
typedef struct {
    const ak_gate_ctx_t *ctx;
    ak_grun_t  *run;
    char        label[128];                 /* "small/float32" (+ " near_max") */
    int64_t     dims[AK_MAX_DIMS];
    ak_dtype_t  dt;
    size_t      esz;
    size_t      nin[AK_MAX_BUFS], nout[AK_MAX_BUFS];
    const uint8_t *raw_in[AK_MAX_BUFS];     /* inputs in dt (entry's or own_in) */
    const double  *ref[AK_MAX_BUFS];        /* reference outputs (entry's or own_ref) */
    size_t      ref_nonfinite;              /* elements the reference made NaN/Inf */
    void       *dev_in[AK_MAX_BUFS];        /* borrowed from run */
    void       *dev_out[AK_MAX_BUFS];       /* == dev_in[k] for in-place specs */
    uint8_t    *got[AK_MAX_BUFS];           /* candidate outputs, raw */
    bool        on_device;                  /* inputs made on the device (raw_in NULL),
                                               reference: the device reference alone */
    bool        dcmp;                       /* on_device, and judged on the device: the
                                               reference stays in dref_out (ref NULL),
                                               got is read back only with keep_got */
    bool        keep_got;                   /* set by a caller that reads got itself */
    void       *dref_out[AK_MAX_BUFS];      /* the reference's outputs: the run's buffers, the
                                               device cache entry's or down's */
    const ak_refentry_t *dhit;              /* the device cache's entry (pinned until free) */
    bool        dcacheable;                 /* down goes into the device cache at free */
    ak_refentry_t down;                     /* reference outputs on the device, own */
    uint64_t    dsum[AK_MAX_BUFS];          /* dref_out[k]'s keyed sum when it was made */
    uint64_t    seed;
    /* The cache: the entry served (pinned until ak_gcfg_free), or the key
       under which own_* go into the cache at ak_gcfg_free. */
    const ak_refentry_t *hit;
    bool        cacheable;
    uint8_t     key[AK_REFCACHE_KEY_LEN];
    ak_refentry_t own;                      /* computed here: inputs and reference */
} ak_gcfg_t;

/* Outcome of one comparison. */
typedef struct {
    size_t  n;                 /* output elements compared */
    size_t  unwritten, nonfinite, beyond;
    size_t  overflowed;        /* Inf where the reference is beyond the dtype's range */
    double  worst;             /* largest finite |out - ref| */
    int     first_out;         /* first failing element: buffer, index, values */
    size_t  first_i;
    double  first_got, first_want;
    const char *first_kind;    /* "unwritten" | "non-finite" | "beyond tolerance" */
} ak_gcmp_t;

/* The key of the sums that prove a reference on the device unchanged
   (ak_dcmp_t.want_sum): random, once per process, never on the device
   but as a parameter of the comparison. */
uint64_t ak_gate_secret (void);

/* Monotonic milliseconds since t0_ns (ak_clock_mono_ns). */
double ak_gate_ms_since (uint64_t t0_ns);

/* gates_ref.c */
void ak_grun_init (ak_grun_t *run, const ak_gate_ctx_t *ctx, ak_gate_cost_t *cost);
/* Releases the run's device buffers. */
void ak_grun_done (ak_grun_t *run);
/* Prepares c: counts, inputs (generator, transform, dtype rounding), the
   reference outputs (from the cache when the context has one and knows
   the reference's digests), the kernel's buffers.  Errors here are the
   spec's or the oracle's, never the candidate's; c is clean after one. */
int  ak_gcfg_prepare (ak_grun_t *run, const char *name, const int64_t *dims, ak_dtype_t dt,
                      uint64_t seed, ak_gxform_t x, ak_gcfg_t *c, ak_err_t *err);
/* One run of the kernel under test: inputs restored, outputs poisoned,
   launch, outputs downloaded into c->got.  A failure is the candidate's. */
int  ak_gcfg_run (ak_gcfg_t *c, ak_err_t *err);
/* Frees c; a reference computed here goes into the cache. */
void ak_gcfg_free (ak_gcfg_t *c);
/* The cache key of a configuration (exposed for tests through
   gates.c's callers only). */
void ak_gcfg_key (const ak_gcfg_t *c, ak_gxform_t x, uint8_t key[AK_REFCACHE_KEY_LEN]);

/* gates_cmp.c */
bool ak_gate_all_bytes (const uint8_t *p, size_t n, uint8_t byte);
/* c's outputs against the reference under the spec's tolerance x
   tol_scale: c->got on the host, or (c->dcmp) on the device.  An error
   is the device's (AK_ECRASH: the context died under the candidate). */
int  ak_gcfg_compare (const ak_gcfg_t *c, double tol_scale, ak_gcmp_t *r, ak_err_t *err);
/* Text for one failed comparison. */
void ak_gcmp_text (const ak_gcfg_t *c, const ak_gcmp_t *r, char *buf, size_t len);
/* What a comparison means for a tolerance stage. */
ak_gate_status_t ak_gcmp_status (const ak_gcmp_t *r);

#endif
