/*  worker/backend_cuda_lib.c: vendor-library baselines of the CUDA
    backend (executor side): a spec baseline {"library": "cublaslt", "op":
    "matmul"} runs as one cublasLtMatmul on the device's stream, timed by
    the same sample path as a kernel.  "swiglu_mlp" (fused_mlp's baseline:
    the three GEMMs PyTorch eager runs for a gated MLP) is g = x Wg and
    u = x Wu into float32 workspaces (the spec rounds h once, from float32
    products, as its kernels do: with g and u rounded to bfloat16 first,
    as PyTorch eager has them, y at the 7B shape misses fused_mlp's
    bfloat16 tolerance), h = silu (g) * u by a helper kernel of ours
    (ak_cuda_lib_helper; its CUBIN follows the marker line in the artifact,
    built by the compile step like any kernel), y = h Wd.

    cuBLASLt is opened with dlopen (libcublasLt.so.13, .so.12, .so, also
    under $CUDA_HOME/lib64 and the toolkit's lib64) and its few types and
    entry points are declared here: no cuBLAS header is needed to build.
    Row-major C[M,N] = A[M,K] B[K,N] is the column-major C^T = B^T A^T: the
    call gets B as its first operand, m = N, n = M, no transposes.  The
    heuristic's best algorithm for the exact shape and dtype is chosen once
    per (kernel, shape) and kept; fp32 accumulation (CUBLAS_COMPUTE_32F),
    alpha 1, beta 0.

    Never: crash or hang where cuBLASLt is missing or refuses a shape (an
    AK_EUNAVAIL / AK_EUNSUPPORTED naming what was tried), or call cuBLASLt
    outside the executor. */
#include "backend_cuda_impl.h"
#include "log.h"
#include "spec_cuda.h"
#include "util.h"

#include <dlfcn.h>
#include <stdatomic.h>
#include <stddef.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/*  swiglu_mlp's elementwise step: h = silu (g) * u from the float32
    products g and u (as fused_mlp's kernels and its oracle: h rounded to
    the element type once), built with the prelude for the element type. */
static const char s_silu_mul_source[] =
    "extern \"C\" __global__ void ak_lib_silu_mul (const float *__restrict__ g, const float *__restrict__ u,\n"
    "                                              ak_t *__restrict__ h, ak_i64 n)\n"
    "{\n"
    "    const ak_i64 stride = (ak_i64) gridDim.x * blockDim.x;\n"
    "    for (ak_i64 t = (ak_i64) blockIdx.x * blockDim.x + threadIdx.x; t < n; t += stride) {\n"
    "        const float x = g[t];\n"
    "        h[t] = ak_from_acc (x / (1.0f + expf (-x)) * u[t]);\n"
    "    }\n"
    "}\n";

const char *ak_cuda_lib_helper (const char *marker, size_t len)
{
    static const char op[] = " swiglu_mlp ";
    size_t n = strlen (op);
    for (size_t i = 0; i + n <= len && marker[i] != '\n'; i++)
        if (memcmp (marker + i, op, n) == 0)
            return s_silu_mul_source;
    return NULL;
}

#if AK_HAVE_CUDA

/* ---------------------------------------------- cuBLASLt, declared here */
typedef int s_lt_status_t;                         /* cublasStatus_t; 0 success */
typedef struct s_lt_ctx *s_lt_handle_t;            /* cublasLtHandle_t */
typedef struct s_lt_desc *s_lt_desc_t;             /* cublasLtMatmulDesc_t */
typedef struct s_lt_layout *s_lt_layout_t;         /* cublasLtMatrixLayout_t */
typedef struct s_lt_pref *s_lt_pref_t;             /* cublasLtMatmulPreference_t */
typedef struct { uint64_t data[8]; } s_lt_algo_t;  /* cublasLtMatmulAlgo_t */
typedef struct {                                   /* cublasLtMatmulHeuristicResult_t */
    s_lt_algo_t algo;
    size_t      workspace;
    s_lt_status_t state;
    float       waves;
    int         reserved[4];
} s_lt_heur_t;
#define S_LT_COMPUTE_32F      68                   /* CUBLAS_COMPUTE_32F */
#define S_LT_R_32F            0                    /* cudaDataType: CUDA_R_32F */
#define S_LT_R_16F            2                    /* CUDA_R_16F */
#define S_LT_R_16BF           14                   /* CUDA_R_16BF */
#define S_LT_PREF_MAX_WS      1                    /* CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES */
#define S_LT_WORKSPACE        (32u << 20)
#define S_LT_PICK_MAX         16                   /* the heuristic's algorithms a bench can pick */
_Static_assert (sizeof (s_lt_heur_t) == 96, "cublasLtMatmulHeuristicResult_t is 96 bytes");

/* Where the toolkit's cuBLASLt header is at hand, the declarations above
   are checked against it (the build never needs it). */
#if defined(__has_include)
#if __has_include(<cublasLt.h>)
#include <cublasLt.h>
_Static_assert (S_LT_COMPUTE_32F == CUBLAS_COMPUTE_32F, "CUBLAS_COMPUTE_32F");
_Static_assert (S_LT_R_32F == CUDA_R_32F && S_LT_R_16F == CUDA_R_16F && S_LT_R_16BF == CUDA_R_16BF, "cudaDataType");
_Static_assert (S_LT_PREF_MAX_WS == CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, "MAX_WORKSPACE_BYTES");
_Static_assert (sizeof (s_lt_heur_t) == sizeof (cublasLtMatmulHeuristicResult_t)
                && offsetof (s_lt_heur_t, workspace) == offsetof (cublasLtMatmulHeuristicResult_t, workspaceSize)
                && offsetof (s_lt_heur_t, waves) == offsetof (cublasLtMatmulHeuristicResult_t, wavesCount),
                "cublasLtMatmulHeuristicResult_t layout");
_Static_assert (sizeof (s_lt_algo_t) == sizeof (cublasLtMatmulAlgo_t), "cublasLtMatmulAlgo_t");
#endif
#endif

typedef struct {
    void  *so;
    char   path[256];
    size_t (*GetVersion) (void);
    s_lt_status_t (*Create) (s_lt_handle_t *);
    s_lt_status_t (*Destroy) (s_lt_handle_t);
    s_lt_status_t (*DescCreate) (s_lt_desc_t *, int compute, int scale);
    s_lt_status_t (*DescDestroy) (s_lt_desc_t);
    s_lt_status_t (*LayoutCreate) (s_lt_layout_t *, int type, uint64_t rows, uint64_t cols, int64_t ld);
    s_lt_status_t (*LayoutDestroy) (s_lt_layout_t);
    s_lt_status_t (*PrefCreate) (s_lt_pref_t *);
    s_lt_status_t (*PrefDestroy) (s_lt_pref_t);
    s_lt_status_t (*PrefSetAttribute) (s_lt_pref_t, int attr, const void *buf, size_t size);
    s_lt_status_t (*AlgoGetHeuristic) (s_lt_handle_t, s_lt_desc_t, s_lt_layout_t, s_lt_layout_t, s_lt_layout_t,
                                       s_lt_layout_t, s_lt_pref_t, int requested, s_lt_heur_t *results,
                                       int *returned);
    s_lt_status_t (*Matmul) (s_lt_handle_t, s_lt_desc_t, const void *alpha, const void *a, s_lt_layout_t,
                             const void *b, s_lt_layout_t, const void *beta, const void *c, s_lt_layout_t,
                             void *d, s_lt_layout_t, const s_lt_algo_t *algo, void *ws, size_t ws_size,
                             CUstream stream);
} s_lt_api_t;

static pthread_once_t s_lt_once = PTHREAD_ONCE_INIT;
static s_lt_api_t s_lt;
static int s_lt_rc;
static char s_lt_why[768];

/*  The names tried, in order; $CUDA_HOME and the toolkit's lib64 too. */
static void s_lt_open (void)
{
    const char *names[] = { "libcublasLt.so.13", "libcublasLt.so.12", "libcublasLt.so" };
    const char *dirs[] = { "", getenv ("CUDA_HOME"), AK_CUDA_ROOT_DIR, "/usr/local/cuda" };
    char tried[512] = "";
    size_t used = 0;
    for (size_t d = 0; d < sizeof dirs / sizeof dirs[0] && !s_lt.so; d++) {
        if (!dirs[d])
            continue;
        for (size_t i = 0; i < sizeof names / sizeof names[0] && !s_lt.so; i++) {
            char path[256];
            if (dirs[d][0])
                snprintf (path, sizeof path, "%s/lib64/%s", dirs[d], names[i]);
            else
                snprintf (path, sizeof path, "%s", names[i]);
            s_lt.so = dlopen (path, RTLD_NOW | RTLD_LOCAL);
            if (s_lt.so)
                snprintf (s_lt.path, sizeof s_lt.path, "%s", path);
            else if (used < sizeof tried) {
                int w = snprintf (tried + used, sizeof tried - used, "%s%s", used ? ", " : "", path);
                used += w > 0 ? (size_t) w : 0;
            }
        }
    }
    if (!s_lt.so) {
        s_lt_rc = AK_EUNAVAIL;
        snprintf (s_lt_why, sizeof s_lt_why, "cuBLASLt not found: tried %s", tried);
        return;
    }
    struct { void **fn; const char *sym; } syms[] = {
        { (void **) &s_lt.GetVersion, "cublasLtGetVersion" },
        { (void **) &s_lt.Create, "cublasLtCreate" },
        { (void **) &s_lt.Destroy, "cublasLtDestroy" },
        { (void **) &s_lt.DescCreate, "cublasLtMatmulDescCreate" },
        { (void **) &s_lt.DescDestroy, "cublasLtMatmulDescDestroy" },
        { (void **) &s_lt.LayoutCreate, "cublasLtMatrixLayoutCreate" },
        { (void **) &s_lt.LayoutDestroy, "cublasLtMatrixLayoutDestroy" },
        { (void **) &s_lt.PrefCreate, "cublasLtMatmulPreferenceCreate" },
        { (void **) &s_lt.PrefDestroy, "cublasLtMatmulPreferenceDestroy" },
        { (void **) &s_lt.PrefSetAttribute, "cublasLtMatmulPreferenceSetAttribute" },
        { (void **) &s_lt.AlgoGetHeuristic, "cublasLtMatmulAlgoGetHeuristic" },
        { (void **) &s_lt.Matmul, "cublasLtMatmul" },
    };
    for (size_t i = 0; i < sizeof syms / sizeof syms[0]; i++) {
        *syms[i].fn = dlsym (s_lt.so, syms[i].sym);
        if (!*syms[i].fn) {
            s_lt_rc = AK_EUNAVAIL;
            snprintf (s_lt_why, sizeof s_lt_why, "cuBLASLt %s has no %s", s_lt.path, syms[i].sym);
            return;
        }
    }
}

static void *s_lt_preload_main (void *arg)
{
    (void) arg;
    pthread_once (&s_lt_once, s_lt_open);
    return NULL;
}

/* The preload thread, joinable: ak_cuda_lib_preload_wait joins it once,
   in the process that started it (a forked child has no such thread: a
   join there would wait for ever). */
static pthread_mutex_t s_lt_thread_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_t s_lt_thread;
static bool s_lt_thread_live;
static pid_t s_lt_thread_pid;

static void s_lt_preload_start (void)
{
    pthread_mutex_lock (&s_lt_thread_mu);
    int rc = pthread_create (&s_lt_thread, NULL, s_lt_preload_main, NULL);
    s_lt_thread_live = rc == 0;
    s_lt_thread_pid = getpid ();
    pthread_mutex_unlock (&s_lt_thread_mu);
    if (rc != 0)                       /* the first library baseline opens it then, as before */
        ak_debug ("cublaslt preload: pthread_create: %s", strerror (rc));
}

void ak_cuda_lib_preload_wait (void)
{
    pthread_mutex_lock (&s_lt_thread_mu);
    if (s_lt_thread_live && s_lt_thread_pid == getpid ()) {
        int rc = pthread_join (s_lt_thread, NULL);
        if (rc != 0)
            ak_debug ("cublaslt preload: pthread_join: %s", strerror (rc));
        s_lt_thread_live = false;
    }
    pthread_mutex_unlock (&s_lt_thread_mu);
}

void ak_cuda_lib_preload (void)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    const char *off = getenv ("AK_CUDA_LIB_PRELOAD");
    if (off && strcmp (off, "0") == 0)
        return;
    pthread_once (&once, s_lt_preload_start);
}

/*  One matmul's plan: the heuristic's best algorithm for a shape and
    dtype, kept until they change. */
typedef struct {
    bool          planned;
    bool          out32;               /* C and D float32 (A and B in the element type) */
    int64_t       m, n, k;
    ak_dtype_t    dt;
    s_lt_layout_t la, lb, lc;
    s_lt_algo_t   algo;
    size_t        ws_need;
} s_plan_t;

/*  One library call a kernel stands for (ak_kernel_t.lib). */
struct ak_cuda_lib {
    bool          swiglu;              /* op swiglu_mlp; else matmul */
    int           key[3];              /* positions of the op's keys (M N K; batch dim hidden) */
    s_lt_handle_t h;
    s_lt_desc_t   desc;
    CUdeviceptr   ws;
    s_plan_t      plan[2];             /* matmul: [0]; swiglu_mlp: [0] up/gate, [1] down */
    CUmodule      mod;                 /* swiglu_mlp: the helper kernel's module */
    CUfunction    silu_mul;
    CUdeviceptr   g;                   /* swiglu_mlp: the float32 products g and u, g_bytes each */
    CUdeviceptr   u;
    size_t        g_bytes;
};

static int s_lt_check (s_lt_status_t st, const char *call, ak_err_t *err)
{
    if (st == 0)
        return 0;
    return ak_err_set (err, st == 15 /* NOT_SUPPORTED */ ? AK_EUNSUPPORTED : AK_EINTERNAL,
                       "%s: cublasStatus %d", call, st);
}

static void s_plan_clear (s_plan_t *pl)
{
    if (pl->la)
        s_lt.LayoutDestroy (pl->la);
    if (pl->lb)
        s_lt.LayoutDestroy (pl->lb);
    if (pl->lc)
        s_lt.LayoutDestroy (pl->lc);
    pl->la = pl->lb = pl->lc = NULL;
    pl->planned = false;
}

void ak_cuda_lib_close (ak_dev_t *dev, ak_cuda_lib_t **lib_p)
{
    if (!lib_p || !*lib_p)
        return;
    ak_cuda_lib_t *lib = *lib_p;
    for (int i = 0; i < 2; i++)
        s_plan_clear (&lib->plan[i]);
    ak_err_t e = { 0 };
    if (lib->g && dev && ak_cuda_check (dev->drv->cuMemFree (lib->g), "cuMemFree", &e))
        ak_debug ("cublaslt close: %s", e.msg);
    if (lib->u && dev && ak_cuda_check (dev->drv->cuMemFree (lib->u), "cuMemFree", &e))
        ak_debug ("cublaslt close: %s", e.msg);
    if (lib->mod && dev && ak_cuda_check (dev->drv->cuModuleUnload (lib->mod), "cuModuleUnload", &e))
        ak_debug ("cublaslt close: %s", e.msg);
    if (lib->desc)
        s_lt.DescDestroy (lib->desc);
    if (lib->h)
        s_lt.Destroy (lib->h);
    if (lib->ws && dev && ak_cuda_check (dev->drv->cuMemFree (lib->ws), "cuMemFree", &e))
        ak_debug ("cublaslt close: %s", e.msg);
    free (lib);
    *lib_p = NULL;
}

/*  The helper kernel's CUBIN after the marker line into lib (copied to an
    aligned buffer for the loader). */
static int s_load_helper (ak_dev_t *dev, ak_cuda_lib_t *lib, const char *image, size_t len, ak_err_t *err)
{
    if (len < 4 || memcmp (image, "\177ELF", 4) != 0)
        return ak_err_set (err, AK_ECOMPILE, "library artifact: swiglu_mlp needs its helper kernel's CUBIN "
                           "after the marker line (built by the compile step)");
    char *copy = ak_malloc (len);
    memcpy (copy, image, len);
    int rc = ak_cuda_be_cu (dev, dev->drv->cuModuleLoadData (&lib->mod, copy), "cuModuleLoadData (helper)", err);
    free (copy);
    if (rc) {
        lib->mod = NULL;
        return rc;
    }
    return ak_cuda_be_cu (dev, dev->drv->cuModuleGetFunction (&lib->silu_mul, lib->mod, "ak_lib_silu_mul"),
                          "cuModuleGetFunction (ak_lib_silu_mul)", err);
}

int ak_cuda_lib_open (ak_dev_t *dev, const char *marker, size_t len, ak_cuda_lib_t **lib_p, ak_err_t *err)
{
    char line[256], lname[32], op[32], k0[32], k1[32], k2[32];
    int i0, i1, i2;
    size_t mlen = strlen (AK_LIBRARY_MARKER);
    *lib_p = NULL;
    const char *nl = memchr (marker, '\n', len);
    size_t llen = nl ? (size_t) (nl - marker) : len;
    if (llen <= mlen || llen >= sizeof line)
        return ak_err_set (err, AK_ECOMPILE, "library artifact: not a marker line");
    memcpy (line, marker, llen);
    line[llen] = '\0';
    /* "cublaslt matmul M=0 N=1 K=2", "cublaslt swiglu_mlp batch=0 dim=1 hidden=2" */
    int used = 0;
    if (sscanf (line + mlen, "%31s %31s %31[a-z_A-Z]=%d %31[a-z_A-Z]=%d %31[a-z_A-Z]=%d%n", lname, op, k0, &i0, k1,
                &i1, k2, &i2, &used) != 8 || line[mlen + (size_t) used] != '\0'
        || strcmp (lname, "cublaslt") != 0
        || !((strcmp (op, "matmul") == 0 && !strcmp (k0, "M") && !strcmp (k1, "N") && !strcmp (k2, "K"))
             || (strcmp (op, "swiglu_mlp") == 0 && !strcmp (k0, "batch") && !strcmp (k1, "dim")
                 && !strcmp (k2, "hidden")))
        || i0 < 0 || i1 < 0 || i2 < 0 || i0 >= AK_MAX_DIMS || i1 >= AK_MAX_DIMS || i2 >= AK_MAX_DIMS)
        return ak_err_set (err, AK_ECOMPILE, "library artifact: unknown library call '%.120s'", line + mlen);
    pthread_once (&s_lt_once, s_lt_open);
    if (s_lt_rc)
        return ak_err_set (err, s_lt_rc, "%s", s_lt_why);
    ak_cuda_lib_t *lib = ak_calloc (1, sizeof *lib);
    lib->swiglu = strcmp (op, "swiglu_mlp") == 0;
    lib->plan[0].out32 = lib->swiglu;
    lib->key[0] = i0;
    lib->key[1] = i1;
    lib->key[2] = i2;
    int rc = s_lt_check (s_lt.Create (&lib->h), "cublasLtCreate", err);
    if (rc == 0)
        rc = s_lt_check (s_lt.DescCreate (&lib->desc, S_LT_COMPUTE_32F, S_LT_R_32F), "cublasLtMatmulDescCreate", err);
    if (rc == 0)
        rc = ak_cuda_be_cu (dev, dev->drv->cuMemAlloc (&lib->ws, S_LT_WORKSPACE), "cuMemAlloc (cuBLASLt workspace)",
                            err);
    if (rc == 0 && lib->swiglu)
        rc = s_load_helper (dev, lib, nl ? nl + 1 : marker + len, nl ? len - llen - 1 : 0, err);
    if (rc) {
        ak_err_prefix (err, "cuBLASLt (%s)", s_lt.path);
        ak_cuda_lib_close (dev, &lib);
        return rc;
    }
    ak_info ("cuda device %d: cuBLASLt %zu from %s", dev->ordinal, s_lt.GetVersion (), s_lt.path);
    *lib_p = lib;
    return 0;
}

/*  Which of the heuristic's algorithms plans take: 0, its best, always
    in the worker; bench_compute_ops times the others too
    (ak_cuda_lib_bench_pick). */
static _Atomic int s_pick;

void ak_cuda_lib_bench_pick (int index)
{
    atomic_store (&s_pick, index < 0 ? 0 : index >= S_LT_PICK_MAX ? S_LT_PICK_MAX - 1 : index);
}

/*  The heuristic's best algorithm (or its s_pick-th) for row-major
    C[m,n] = A[m,k] B[k,n] in dt, C in float32 where pl->out32 (kept until
    the shape changes). */
static int s_plan (ak_cuda_lib_t *lib, s_plan_t *pl, int64_t m, int64_t n, int64_t k, ak_dtype_t dt, ak_err_t *err)
{
    if (pl->planned && m == pl->m && n == pl->n && k == pl->k && dt == pl->dt)
        return 0;
    s_plan_clear (pl);
    int type = dt == AK_DT_FLOAT16 ? S_LT_R_16F : dt == AK_DT_BFLOAT16 ? S_LT_R_16BF : S_LT_R_32F;
    int ctype = pl->out32 ? S_LT_R_32F : type;
    /* column-major: "A" = B^T (N x K, ld N), "B" = A^T (K x M, ld K), C^T (N x M, ld N) */
    int rc = s_lt_check (s_lt.LayoutCreate (&pl->la, type, (uint64_t) n, (uint64_t) k, n), "cublasLtMatrixLayoutCreate", err);
    if (rc == 0)
        rc = s_lt_check (s_lt.LayoutCreate (&pl->lb, type, (uint64_t) k, (uint64_t) m, k), "cublasLtMatrixLayoutCreate", err);
    if (rc == 0)
        rc = s_lt_check (s_lt.LayoutCreate (&pl->lc, ctype, (uint64_t) n, (uint64_t) m, n), "cublasLtMatrixLayoutCreate", err);
    s_lt_pref_t pref = NULL;
    if (rc == 0)
        rc = s_lt_check (s_lt.PrefCreate (&pref), "cublasLtMatmulPreferenceCreate", err);
    uint64_t ws = S_LT_WORKSPACE;
    if (rc == 0)
        rc = s_lt_check (s_lt.PrefSetAttribute (pref, S_LT_PREF_MAX_WS, &ws, sizeof ws),
                         "cublasLtMatmulPreferenceSetAttribute", err);
    const int pick = atomic_load (&s_pick);
    s_lt_heur_t heur[S_LT_PICK_MAX];
    int got = 0;
    memset (heur, 0, sizeof heur);
    if (rc == 0)
        rc = s_lt_check (s_lt.AlgoGetHeuristic (lib->h, lib->desc, pl->la, pl->lb, pl->lc, pl->lc, pref, pick + 1,
                                                heur, &got), "cublasLtMatmulAlgoGetHeuristic", err);
    if (pref)
        s_lt.PrefDestroy (pref);
    if (rc == 0 && got < 1)
        rc = ak_err_set (err, AK_EUNSUPPORTED, "cublasLtMatmulAlgoGetHeuristic: no algorithm");
    else
    if (rc == 0 && got <= pick)
        rc = ak_err_set (err, AK_EUNSUPPORTED, "cublasLtMatmulAlgoGetHeuristic: %d algorithm%s, no algorithm %d",
                         got, got == 1 ? "" : "s", pick);
    if (rc) {
        s_plan_clear (pl);
        return ak_err_prefix (err, "cuBLASLt matmul %s M=%lld N=%lld K=%lld", ak_dtype_name (dt),
                              (long long) m, (long long) n, (long long) k);
    }
    pl->algo = heur[pick].algo;
    pl->ws_need = heur[pick].workspace;
    pl->m = m;
    pl->n = n;
    pl->k = k;
    pl->dt = dt;
    pl->planned = true;
    return 0;
}

/*  The planned row-major c = a b on the device's stream. */
static int s_matmul (ak_dev_t *dev, ak_cuda_lib_t *lib, const s_plan_t *pl, const void *a, const void *b, void *c,
                     ak_err_t *err)
{
    float alpha = 1.0f, beta = 0.0f;
    return s_lt_check (s_lt.Matmul (lib->h, lib->desc, &alpha, b, pl->la, a, pl->lb, &beta, c, pl->lc, c, pl->lc,
                                    &pl->algo, (void *) (uintptr_t) lib->ws,
                                    pl->ws_need <= S_LT_WORKSPACE ? pl->ws_need : S_LT_WORKSPACE, dev->stream),
                       "cublasLtMatmul", err);
}

/*  m n k of plan i for l's dims (matmul: M N K; swiglu_mlp: [0] batch x
    hidden x dim, [1] batch x dim x hidden). */
static void s_shape (const ak_cuda_lib_t *lib, const ak_launch_t *l, int i, int64_t *m, int64_t *n, int64_t *k)
{
    int64_t d0 = l->dims[lib->key[0]], d1 = l->dims[lib->key[1]], d2 = l->dims[lib->key[2]];
    *m = d0;
    *n = !lib->swiglu ? d1 : i == 0 ? d2 : d1;
    *k = !lib->swiglu ? d2 : i == 0 ? d1 : d2;
}

bool ak_cuda_lib_ready (const ak_cuda_lib_t *lib, const ak_launch_t *l)
{
    if (!lib || l->ndims <= lib->key[0] || l->ndims <= lib->key[1] || l->ndims <= lib->key[2])
        return false;
    for (int i = 0; i < (lib->swiglu ? 2 : 1); i++) {
        int64_t m, n, k;
        s_shape (lib, l, i, &m, &n, &k);
        const s_plan_t *pl = &lib->plan[i];
        if (!pl->planned || pl->m != m || pl->n != n || pl->k != k || pl->dt != l->dtype)
            return false;
    }
    return true;
}

/*  swiglu_mlp: g = x Wg and u = x Wu (float32 workspaces), h = silu (g) * u,
    y = h Wd. */
static int s_swiglu (ak_dev_t *dev, ak_cuda_lib_t *lib, const ak_launch_t *l, ak_err_t *err)
{
    int64_t batch = l->dims[lib->key[0]], hidden = l->dims[lib->key[2]];
    size_t bytes = (size_t) batch * (size_t) hidden * sizeof (float);
    int rc = 0;
    if (bytes > lib->g_bytes) {
        ak_err_t e = { 0 };
        CUdeviceptr *bufs[] = { &lib->g, &lib->u };
        for (int i = 0; i < 2; i++) {
            if (*bufs[i] && ak_cuda_check (dev->drv->cuMemFree (*bufs[i]), "cuMemFree", &e))
                ak_debug ("cublaslt swiglu_mlp: %s", e.msg);
            *bufs[i] = 0;
        }
        lib->g_bytes = 0;
        for (int i = 0; i < 2; i++)
            if ((rc = ak_cuda_be_cu (dev, dev->drv->cuMemAlloc (bufs[i], bytes), "cuMemAlloc (swiglu_mlp products)",
                                     err)) != 0) {
                *bufs[i] = 0;
                return rc;
            }
        lib->g_bytes = bytes;
    }
    void *g = (void *) (uintptr_t) lib->g, *u = (void *) (uintptr_t) lib->u, *h = l->out[1];
    if ((rc = s_matmul (dev, lib, &lib->plan[0], l->in[0], l->in[1], g, err)) != 0
        || (rc = s_matmul (dev, lib, &lib->plan[0], l->in[0], l->in[2], u, err)) != 0)
        return rc;
    long long n = (long long) batch * hidden;
    unsigned blocks = (unsigned) ((n + 1023) / 1024);
    blocks = blocks < 1 ? 1 : blocks > 8192 ? 8192 : blocks;
    void *params[] = { &g, &u, &h, &n };
    if ((rc = ak_cuda_be_cu (dev, dev->drv->cuLaunchKernel (lib->silu_mul, blocks, 1, 1, 256, 1, 1, 0, dev->stream,
                                                             params, NULL), "cuLaunchKernel (ak_lib_silu_mul)",
                             err)) != 0)
        return rc;
    return s_matmul (dev, lib, &lib->plan[1], h, l->in[3], l->out[0], err);
}

int ak_cuda_lib_enqueue (ak_dev_t *dev, ak_cuda_lib_t *lib, const ak_launch_t *l, ak_err_t *err)
{
    int nin = lib->swiglu ? 4 : 2, nout = lib->swiglu ? 2 : 1;
    if (l->nin != nin || l->nout != nout || l->ndims <= lib->key[0] || l->ndims <= lib->key[1]
        || l->ndims <= lib->key[2])
        return ak_err_set (err, AK_EINVAL, "cuBLASLt %s: %d inputs, %d outputs, %d dims",
                           lib->swiglu ? "swiglu_mlp" : "matmul", l->nin, l->nout, l->ndims);
    for (int i = 0; i < (lib->swiglu ? 2 : 1); i++) {
        int64_t m, n, k;
        s_shape (lib, l, i, &m, &n, &k);
        int rc = s_plan (lib, &lib->plan[i], m, n, k, l->dtype, err);
        if (rc)
            return rc;
    }
    if (lib->swiglu)
        return s_swiglu (dev, lib, l, err);
    return s_matmul (dev, lib, &lib->plan[0], l->in[0], l->in[1], l->out[0], err);
}

#endif
