/*  worker/sandbox.h: confining the processes that run untrusted code.

    Candidate kernels are written by people or coding agents that may game
    their evaluator (docs/operations.md, "Threat model").  The worker runs
    them, and the compilers that build them, in child processes confined
    with what Linux offers an unprivileged process:
    - resource limits (CPU seconds, address space, file size, open files,
      processes), a core-less death, no_new_privs;
    - Landlock (Linux >= 5.13): read only the system's libraries and
      headers, the compile cache and its own scratch directory, write only
      the scratch directory; where the running kernel supports them, also
      no TCP and no signals to processes outside the sandbox.  A kernel
      without Landlock is logged once at WARN and named in every receipt
      (ak_sandbox_describe), never silently treated as confined;
    - seccomp (the host kernel's process, after its set-up): no new
      processes or threads, no exec, no signals to other processes, no
      sockets, no opening files for writing, no ptrace, no io_uring, none
      of the calls only root may make; the architecture is checked first.
    The functions marked "child side" make only system calls, so that they
    may run between fork and exec in a threaded daemon.

    Never: treat a confinement that failed to apply as applied; widen what
    a child can read beyond what it was given; allocate on the child side. */
#ifndef AK_WORKER_SANDBOX_H
#define AK_WORKER_SANDBOX_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include "error.h"

typedef struct {
    uint64_t cpu_s;             /* RLIMIT_CPU seconds; 0: unlimited */
    uint64_t as_bytes;          /* RLIMIT_AS; 0: unlimited (always so in ASan builds: their shadow
                                   memory needs terabytes of address space) */
    uint64_t fsize_bytes;       /* RLIMIT_FSIZE */
    uint64_t nofile;            /* RLIMIT_NOFILE */
    bool     no_procs;          /* RLIMIT_NPROC 0: no fork (root is exempt: seccomp covers it) */
} ak_sandbox_limits_t;

/* Child side.  Sets the limits and RLIMIT_CORE 0.  0, or -errno of the
   first setrlimit that failed. */
int ak_sandbox_apply_limits (const ak_sandbox_limits_t *l);

/* Whether this build reserves address space beyond any sane RLIMIT_AS
   (AddressSanitizer). */
bool ak_sandbox_asan_build (void);

/* The Landlock ABI of the running kernel (0: none), asked once per
   process; the first time it is 0 a WARN says that files are not
   confined.  why (may be NULL) gets the reason when 0. */
int ak_sandbox_landlock_abi (const char **why);

/* A Landlock ruleset: read (and map, and execute) beneath each of ro,
   read and write beneath each of rw (NULL-terminated lists; paths that do
   not exist are skipped).  Where the ABI allows, TCP bind/connect and
   signals or abstract sockets outside the domain are denied too.  *fd_p
   gets a close-on-exec descriptor to hand to ak_sandbox_enter.
   AK_EUNSUPPORTED when the kernel has no Landlock; AK_EIO with err naming
   the path or call. */
int ak_sandbox_landlock_new (const char *const *ro, const char *const *rw, int *fd_p, ak_err_t *err);

/* Child side.  PR_SET_NO_NEW_PRIVS, then (ruleset_fd >= 0) enters the
   Landlock domain.  0, or -errno. */
int ak_sandbox_enter (int ruleset_fd);

/* Child side.  Installs the seccomp filter of a host kernel's process
   whose pid is self (signals to itself and its own group stay allowed).
   0, or -errno. */
int ak_sandbox_seccomp_kernel (pid_t self);

/* A one-line account of what confines a kernel process set up with l and
   a Landlock ABI abi (0: none), for receipts: "rlimits(cpu 25 s, ...),
   no_new_privs, own process group, landlock abi 7, seccomp". */
void ak_sandbox_describe (const ak_sandbox_limits_t *l, int abi, char *buf, size_t len);

/* The include scan every compile starts with: a source whose
   preprocessor could read a file outside the compiler's include paths is
   refused before any compiler sees it, so that no compile log can quote
   such a file.  Refused: #include / #include_next / #import / #embed of
   an absolute path, of a name with a ".." component or a backslash, or of
   a computed name (a macro); `.incbin` anywhere.  0, or AK_EINVAL with
   err naming the line ("source line 3: #include \"/etc/shadow\": ..."). */
int ak_sandbox_check_includes (const char *src, size_t len, ak_err_t *err);

#endif
