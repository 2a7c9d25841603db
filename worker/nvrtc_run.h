/*  worker/nvrtc_run.h: one NVRTC compile in a confined helper process.

    NVRTC cannot be interrupted, so the CUDA backend compiles in a child
    process it can kill.  That child is a program of its own, ak-nvrtc
    (worker/nvrtc/main.c, installed beside akworker), started with fork
    and exec: the forking thread touches only system calls between the two,
    so no lock another thread of the daemon holds at the fork (the
    allocator's, the dynamic loader's, stdio's) can follow NVRTC into the
    child.  A fork without exec did exactly that: under AddressSanitizer
    (GCC 12's libasan has no fork handler for its allocator) a child forked
    while a sibling compile thread was refilling an allocator size class
    blocked for ever in its first malloc inside nvrtcCompileProgram; see
    docs/cuda-backend.md, "The compile child".

    The helper confines itself before it loads NVRTC: rlimits (CPU seconds
    past the wall limit, 16 GiB of address space outside ASan builds,
    512 MiB files, 1024 descriptors, no core), no_new_privs, and, where the
    kernel has Landlock, reads of the system's libraries, the toolkit and
    NVRTC's folder only, writes of the build's scratch folder only.  It
    dies with the daemon (PR_SET_PDEATHSIG, set by the forking thread,
    which always waits for it), and every wait on it is bounded by the
    compile's time limit.

    The protocol (private to this module and the helper): argv

        ak-nvrtc --nvrtc LIB --out CUBIN --cpu S [--as BYTES] --fsize BYTES
                 --nofile N [--no-landlock] [--ro PATH]... [--rw PATH]...
                 -- OPTION...

    the program text on stdin (a memfd: nothing to block on), the NVRTC log
    then, on a failure that is not a compile error, AK_NVRTC_ERR_MARK and
    "what: why" on stdout and stderr, the CUBIN in CUBIN (created, must not
    exist), and an exit code from the enum below.

    Never: fall back to compiling in this process or in an unconfined
    fork; wait on the helper without a deadline; let a child of a compile
    outlive the daemon. */
#ifndef AK_WORKER_NVRTC_RUN_H
#define AK_WORKER_NVRTC_RUN_H
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include "error.h"

#define AK_NVRTC_HELPER       "ak-nvrtc"
#define AK_NVRTC_ERR_MARK     "\n@@akworker-error@@ "
#define AK_NVRTC_TEXT_MAX     (64u << 20)     /* program text the helper reads */

/* The helper's exit codes. */
enum {
    AK_NVRTC_OK = 0,
    AK_NVRTC_COMPILE = 1,          /* NVRTC_ERROR_COMPILATION: the log says why */
    AK_NVRTC_FAILED = 2,           /* another NVRTC error (marked message) */
    AK_NVRTC_NOMEM = 3,
    AK_NVRTC_IO = 4,               /* reading the text or writing the CUBIN */
    AK_NVRTC_SANDBOX = 5,          /* a confinement could not be applied: nothing ran */
    AK_NVRTC_USAGE = 6,            /* bad arguments, or NVRTC would not load */
    AK_NVRTC_EXEC = 127            /* the exec itself failed (written by the forked child) */
};

typedef struct {
    const char *name;              /* the kernel, for errors ("candidate row_warp"); may be NULL */
    const char *nvrtc_path;        /* absolute path of the NVRTC library the daemon loaded */
    const char *text;              /* the whole program NVRTC sees */
    size_t      text_len;
    const char *const *opts;       /* NVRTC options */
    int         nopts;
    const char *scratch_dir;       /* the build's private folder: the only one the helper may write */
    const char *cubin_path;        /* where the CUBIN goes (inside scratch_dir) */
    const char *const *read_dirs;  /* more folders NVRTC may read (the toolkit's include folder); may be NULL */
    uint64_t    timeout_ms;        /* wall limit; 0: AK_NVRTC_COMPILE_MS */
    uint64_t    cpu_s;             /* RLIMIT_CPU; 0: timeout_ms / 1000 + 10 */
    const atomic_int *cancel;      /* may be NULL; non-zero: kill the helper now */
} ak_nvrtc_job_t;

#define AK_NVRTC_COMPILE_MS   60000u
#define AK_NVRTC_LOG_MAX      (256u * 1024)

/*  Runs the helper on job and waits for it at most the job's time limit.
    *log_p gets the NVRTC log (never NULL; caller frees).  0 (the CUBIN is
    at job->cubin_path), AK_ECOMPILE (a compile error, or the helper killed
    by its CPU or file-size limit or a signal), AK_ETIMEOUT (wall limit or
    cancel), AK_EUNAVAIL (no helper beside this program), AK_ENOMEM,
    AK_EIO; err names the kernel, and the limit where one was hit. */
int ak_nvrtc_run (const ak_nvrtc_job_t *job, char **log_p, ak_err_t *err);

/*  The helper's path: ak-nvrtc in this program's folder, else in
    $AK_BIN_DIR (the build tree's bin/, where tests run from tests/).
    NULL when neither has it; why (may be NULL) then lists where it
    looked.  Found once per process. */
const char *ak_nvrtc_helper (const char **why);

/*  What confines the helper for a compile limit of limit_ms, one line for
    logs and tests: "rlimits (cpu 70 s, address space 16384 MiB, ...),
    no_new_privs, killed with the worker, landlock abi N (...)". */
void ak_nvrtc_describe (uint64_t limit_ms, char *buf, size_t len);

#endif
