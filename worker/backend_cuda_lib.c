/*  worker/backend_cuda_lib.c: vendor-library baselines of the CUDA
    backend (executor side): a spec baseline {"library": "cublaslt", "op":
    "matmul"} runs as one cublasLtMatmul on the device's stream, timed by
    the same sample path as a kernel.

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
#include <stddef.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

/*  One library call a kernel stands for (ak_kernel_t.lib). */
struct ak_cuda_lib {
    int           key[3];              /* positions of M, N, K in the spec's keys */
    s_lt_handle_t h;
    s_lt_desc_t   desc;
    CUdeviceptr   ws;
    /* the plan of the last shape and dtype */
    bool          planned;
    int64_t       m, n, k;
    ak_dtype_t    dt;
    s_lt_layout_t la, lb, lc;
    s_lt_algo_t   algo;
    size_t        ws_need;
};

static int s_lt_check (s_lt_status_t st, const char *call, ak_err_t *err)
{
    if (st == 0)
        return 0;
    return ak_err_set (err, st == 15 /* NOT_SUPPORTED */ ? AK_EUNSUPPORTED : AK_EINTERNAL,
                       "%s: cublasStatus %d", call, st);
}

static void s_plan_clear (ak_cuda_lib_t *lib)
{
    if (lib->la)
        s_lt.LayoutDestroy (lib->la);
    if (lib->lb)
        s_lt.LayoutDestroy (lib->lb);
    if (lib->lc)
        s_lt.LayoutDestroy (lib->lc);
    lib->la = lib->lb = lib->lc = NULL;
    lib->planned = false;
}

void ak_cuda_lib_close (ak_dev_t *dev, ak_cuda_lib_t **lib_p)
{
    if (!lib_p || !*lib_p)
        return;
    ak_cuda_lib_t *lib = *lib_p;
    s_plan_clear (lib);
    if (lib->desc)
        s_lt.DescDestroy (lib->desc);
    if (lib->h)
        s_lt.Destroy (lib->h);
    ak_err_t e = { 0 };
    if (lib->ws && dev && ak_cuda_check (dev->drv->cuMemFree (lib->ws), "cuMemFree", &e))
        ak_debug ("cublaslt close: %s", e.msg);
    free (lib);
    *lib_p = NULL;
}

int ak_cuda_lib_open (ak_dev_t *dev, const char *marker, size_t len, ak_cuda_lib_t **lib_p, ak_err_t *err)
{
    char line[256], lname[32], op[32];
    int mi, ni, ki;
    size_t mlen = strlen (AK_LIBRARY_MARKER);
    *lib_p = NULL;
    if (len <= mlen || len >= sizeof line)
        return ak_err_set (err, AK_ECOMPILE, "library artifact: not a marker line");
    memcpy (line, marker, len);
    line[len] = '\0';
    if (sscanf (line + mlen, "%31s %31s M=%d N=%d K=%d", lname, op, &mi, &ni, &ki) != 5
        || strcmp (lname, "cublaslt") != 0 || strcmp (op, "matmul") != 0
        || mi < 0 || ni < 0 || ki < 0 || mi >= AK_MAX_DIMS || ni >= AK_MAX_DIMS || ki >= AK_MAX_DIMS)
        return ak_err_set (err, AK_ECOMPILE, "library artifact: unknown library call '%.120s'", line + mlen);
    pthread_once (&s_lt_once, s_lt_open);
    if (s_lt_rc)
        return ak_err_set (err, s_lt_rc, "%s", s_lt_why);
    ak_cuda_lib_t *lib = ak_calloc (1, sizeof *lib);
    lib->key[0] = mi;
    lib->key[1] = ni;
    lib->key[2] = ki;
    int rc = s_lt_check (s_lt.Create (&lib->h), "cublasLtCreate", err);
    if (rc == 0)
        rc = s_lt_check (s_lt.DescCreate (&lib->desc, S_LT_COMPUTE_32F, S_LT_R_32F), "cublasLtMatmulDescCreate", err);
    if (rc == 0)
        rc = ak_cuda_be_cu (dev, dev->drv->cuMemAlloc (&lib->ws, S_LT_WORKSPACE), "cuMemAlloc (cuBLASLt workspace)",
                            err);
    if (rc) {
        ak_err_prefix (err, "cuBLASLt (%s)", s_lt.path);
        ak_cuda_lib_close (dev, &lib);
        return rc;
    }
    ak_info ("cuda device %d: cuBLASLt %zu from %s", dev->ordinal, s_lt.GetVersion (), s_lt.path);
    *lib_p = lib;
    return 0;
}

/*  The heuristic's best algorithm for l's shape and dtype (kept until the
    shape changes). */
static int s_plan (ak_cuda_lib_t *lib, const ak_launch_t *l, ak_err_t *err)
{
    int64_t m = l->dims[lib->key[0]], n = l->dims[lib->key[1]], k = l->dims[lib->key[2]];
    if (lib->planned && m == lib->m && n == lib->n && k == lib->k && l->dtype == lib->dt)
        return 0;
    s_plan_clear (lib);
    int type = l->dtype == AK_DT_FLOAT16 ? S_LT_R_16F : l->dtype == AK_DT_BFLOAT16 ? S_LT_R_16BF : S_LT_R_32F;
    /* column-major: "A" = B^T (N x K, ld N), "B" = A^T (K x M, ld K), C^T (N x M, ld N) */
    int rc = s_lt_check (s_lt.LayoutCreate (&lib->la, type, (uint64_t) n, (uint64_t) k, n), "cublasLtMatrixLayoutCreate", err);
    if (rc == 0)
        rc = s_lt_check (s_lt.LayoutCreate (&lib->lb, type, (uint64_t) k, (uint64_t) m, k), "cublasLtMatrixLayoutCreate", err);
    if (rc == 0)
        rc = s_lt_check (s_lt.LayoutCreate (&lib->lc, type, (uint64_t) n, (uint64_t) m, n), "cublasLtMatrixLayoutCreate", err);
    s_lt_pref_t pref = NULL;
    if (rc == 0)
        rc = s_lt_check (s_lt.PrefCreate (&pref), "cublasLtMatmulPreferenceCreate", err);
    uint64_t ws = S_LT_WORKSPACE;
    if (rc == 0)
        rc = s_lt_check (s_lt.PrefSetAttribute (pref, S_LT_PREF_MAX_WS, &ws, sizeof ws),
                         "cublasLtMatmulPreferenceSetAttribute", err);
    s_lt_heur_t heur;
    int got = 0;
    memset (&heur, 0, sizeof heur);
    if (rc == 0)
        rc = s_lt_check (s_lt.AlgoGetHeuristic (lib->h, lib->desc, lib->la, lib->lb, lib->lc, lib->lc, pref, 1,
                                                &heur, &got), "cublasLtMatmulAlgoGetHeuristic", err);
    if (pref)
        s_lt.PrefDestroy (pref);
    if (rc == 0 && got < 1)
        rc = ak_err_set (err, AK_EUNSUPPORTED, "cublasLtMatmulAlgoGetHeuristic: no algorithm");
    if (rc) {
        s_plan_clear (lib);
        return ak_err_prefix (err, "cuBLASLt matmul %s M=%lld N=%lld K=%lld", ak_dtype_name (l->dtype),
                              (long long) m, (long long) n, (long long) k);
    }
    lib->algo = heur.algo;
    lib->ws_need = heur.workspace;
    lib->m = m;
    lib->n = n;
    lib->k = k;
    lib->dt = l->dtype;
    lib->planned = true;
    return 0;
}

bool ak_cuda_lib_ready (const ak_cuda_lib_t *lib, const ak_launch_t *l)
{
    if (!lib || !lib->planned || l->ndims <= lib->key[0] || l->ndims <= lib->key[1] || l->ndims <= lib->key[2])
        return false;
    return l->dims[lib->key[0]] == lib->m && l->dims[lib->key[1]] == lib->n && l->dims[lib->key[2]] == lib->k
           && l->dtype == lib->dt;
}

int ak_cuda_lib_enqueue (ak_dev_t *dev, ak_cuda_lib_t *lib, const ak_launch_t *l, ak_err_t *err)
{
    if (l->nin != 2 || l->nout != 1 || l->ndims <= lib->key[0] || l->ndims <= lib->key[1]
        || l->ndims <= lib->key[2])
        return ak_err_set (err, AK_EINVAL, "cuBLASLt matmul: %d inputs, %d outputs, %d dims", l->nin, l->nout,
                           l->ndims);
    int rc = s_plan (lib, l, err);
    if (rc)
        return rc;
    float alpha = 1.0f, beta = 0.0f;
    return s_lt_check (s_lt.Matmul (lib->h, lib->desc, &alpha, l->in[1], lib->la, l->in[0], lib->lb, &beta,
                                    l->out[0], lib->lc, l->out[0], lib->lc, &lib->algo, (void *) (uintptr_t) lib->ws,
                                    lib->ws_need <= S_LT_WORKSPACE ? lib->ws_need : S_LT_WORKSPACE, dev->stream),
                       "cublasLtMatmul", err);
}

#endif
