/*  worker/sandbox.c: confining the processes that run untrusted code
    (sandbox.h, docs/operations.md "Threat model"). */
#include "sandbox.h"
#include "log.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/landlock.h>
#include <linux/seccomp.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

/* ================================================================ limits */

bool ak_sandbox_asan_build (void)
{
#if defined(__SANITIZE_ADDRESS__)
    return true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
    return true;
#else
    return false;
#endif
#else
    return false;
#endif
}

static int s_setrlimit (int what, uint64_t value)
{
    struct rlimit rl = { .rlim_cur = (rlim_t) value, .rlim_max = (rlim_t) value };
    return setrlimit (what, &rl) == 0 ? 0 : -errno;
}

int ak_sandbox_apply_limits (const ak_sandbox_limits_t *l)
{
    int rc = s_setrlimit (RLIMIT_CORE, 0);
    /* RLIMIT_CPU: SIGXCPU at the soft limit; the hard one a second later
       is the SIGKILL for a kernel that ignores it. */
    if (!rc && l->cpu_s) {
        struct rlimit rl = { .rlim_cur = (rlim_t) l->cpu_s, .rlim_max = (rlim_t) l->cpu_s + 1 };
        rc = setrlimit (RLIMIT_CPU, &rl) == 0 ? 0 : -errno;
    }
    if (!rc && l->as_bytes && !ak_sandbox_asan_build ())
        rc = s_setrlimit (RLIMIT_AS, l->as_bytes);
    if (!rc)
        rc = s_setrlimit (RLIMIT_FSIZE, l->fsize_bytes);
    if (!rc && l->nofile)
        rc = s_setrlimit (RLIMIT_NOFILE, l->nofile);
    if (!rc && l->no_procs)
        rc = s_setrlimit (RLIMIT_NPROC, 0);
    return rc;
}

/* ============================================================== landlock */

/* What this file knows beyond an old <linux/landlock.h> (Debian 12's
   stops at ABI 1); the values are the kernel's ABI. */
#ifndef LANDLOCK_ACCESS_FS_REFER
#define LANDLOCK_ACCESS_FS_REFER      (1ULL << 13)
#endif
#ifndef LANDLOCK_ACCESS_FS_TRUNCATE
#define LANDLOCK_ACCESS_FS_TRUNCATE   (1ULL << 14)
#endif
#ifndef LANDLOCK_ACCESS_FS_IOCTL_DEV
#define LANDLOCK_ACCESS_FS_IOCTL_DEV  (1ULL << 15)
#endif
#define S_LL_NET_BIND_TCP             (1ULL << 0)
#define S_LL_NET_CONNECT_TCP          (1ULL << 1)
#define S_LL_SCOPE_ABSTRACT_UNIX      (1ULL << 0)
#define S_LL_SCOPE_SIGNAL             (1ULL << 1)

/* struct landlock_ruleset_attr as of ABI 6; its size tells the kernel
   which fields are there. */
typedef struct {
    uint64_t handled_access_fs;
    uint64_t handled_access_net;
    uint64_t scoped;
} s_ll_attr_t;

#define S_LL_READ  (LANDLOCK_ACCESS_FS_EXECUTE | LANDLOCK_ACCESS_FS_READ_FILE | LANDLOCK_ACCESS_FS_READ_DIR)
#define S_LL_FILE  (LANDLOCK_ACCESS_FS_EXECUTE | LANDLOCK_ACCESS_FS_READ_FILE | LANDLOCK_ACCESS_FS_WRITE_FILE \
                    | LANDLOCK_ACCESS_FS_TRUNCATE | LANDLOCK_ACCESS_FS_IOCTL_DEV)

static pthread_once_t s_abi_once = PTHREAD_ONCE_INIT;
static int s_abi;
static char s_abi_why[128];

static void s_abi_init (void)
{
    long v = syscall (SYS_landlock_create_ruleset, NULL, 0, LANDLOCK_CREATE_RULESET_VERSION);
    if (v > 0)
        s_abi = (int) v;
    else {
        int e = errno;
        snprintf (s_abi_why, sizeof s_abi_why, "%s",
                  e == ENOSYS ? "the running kernel has no Landlock (Linux >= 5.13 needed)"
                  : e == EOPNOTSUPP ? "Landlock is disabled on this kernel (boot with lsm=...,landlock)"
                  : strerror (e));
        ak_warn ("sandbox: Landlock unavailable (%s): kernels and compilers can read and write every "
                 "file this worker can; receipts say so", s_abi_why);
    }
}

int ak_sandbox_landlock_abi (const char **why)
{
    pthread_once (&s_abi_once, s_abi_init);
    if (why)
        *why = s_abi_why;
    return s_abi;
}

/*  Every filesystem right the ABI knows: what is not granted by a rule is
    denied. */
static uint64_t s_handled_fs (int abi)
{
    uint64_t fs = LANDLOCK_ACCESS_FS_EXECUTE | LANDLOCK_ACCESS_FS_WRITE_FILE | LANDLOCK_ACCESS_FS_READ_FILE
                | LANDLOCK_ACCESS_FS_READ_DIR | LANDLOCK_ACCESS_FS_REMOVE_DIR | LANDLOCK_ACCESS_FS_REMOVE_FILE
                | LANDLOCK_ACCESS_FS_MAKE_CHAR | LANDLOCK_ACCESS_FS_MAKE_DIR | LANDLOCK_ACCESS_FS_MAKE_REG
                | LANDLOCK_ACCESS_FS_MAKE_SOCK | LANDLOCK_ACCESS_FS_MAKE_FIFO | LANDLOCK_ACCESS_FS_MAKE_BLOCK
                | LANDLOCK_ACCESS_FS_MAKE_SYM;
    if (abi >= 2)
        fs |= LANDLOCK_ACCESS_FS_REFER;
    if (abi >= 3)
        fs |= LANDLOCK_ACCESS_FS_TRUNCATE;
    if (abi >= 5)
        fs |= LANDLOCK_ACCESS_FS_IOCTL_DEV;
    return fs;
}

/*  One rule: rights beneath path (a file gets only the rights a file
    has).  A missing path is skipped. */
static int s_ll_rule (int ruleset, const char *path, uint64_t rights, uint64_t handled, ak_err_t *err)
{
    int fd = open (path, O_PATH | O_CLOEXEC);
    if (fd < 0) {
        if (errno == ENOENT || errno == ENOTDIR)
            return 0;
        return ak_err_set (err, AK_EIO, "sandbox: %s: %s", path, strerror (errno));
    }
    struct stat st;
    if (fstat (fd, &st) == 0 && !S_ISDIR (st.st_mode))
        rights &= S_LL_FILE;
    struct landlock_path_beneath_attr pb = { .allowed_access = rights & handled, .parent_fd = fd };
    long rc = syscall (SYS_landlock_add_rule, ruleset, LANDLOCK_RULE_PATH_BENEATH, &pb, 0);
    int e = errno;
    close (fd);
    if (rc != 0)
        return ak_err_set (err, AK_EIO, "sandbox: landlock_add_rule %s: %s", path, strerror (e));
    return 0;
}

int ak_sandbox_landlock_new (const char *const *ro, const char *const *rw, int *fd_p, ak_err_t *err)
{
    *fd_p = -1;
    int abi = ak_sandbox_landlock_abi (NULL);
    if (abi <= 0)
        return ak_err_set (err, AK_EUNSUPPORTED, "sandbox: Landlock unavailable (%s)", s_abi_why);
    s_ll_attr_t attr = { .handled_access_fs = s_handled_fs (abi) };
    size_t size = sizeof attr.handled_access_fs;
    if (abi >= 4) {
        attr.handled_access_net = S_LL_NET_BIND_TCP | S_LL_NET_CONNECT_TCP;
        size = offsetof (s_ll_attr_t, scoped);
    }
    if (abi >= 6) {
        attr.scoped = S_LL_SCOPE_ABSTRACT_UNIX | S_LL_SCOPE_SIGNAL;
        size = sizeof attr;
    }
    int fd = (int) syscall (SYS_landlock_create_ruleset, &attr, size, 0);
    if (fd < 0)
        return ak_err_set (err, AK_EIO, "sandbox: landlock_create_ruleset: %s", strerror (errno));
    if (fcntl (fd, F_SETFD, FD_CLOEXEC) != 0) {
        int e = errno;
        close (fd);
        return ak_err_set (err, AK_EIO, "sandbox: fcntl: %s", strerror (e));
    }
    int rc = 0;
    for (size_t i = 0; !rc && ro && ro[i]; i++)
        rc = s_ll_rule (fd, ro[i], S_LL_READ, attr.handled_access_fs, err);
    for (size_t i = 0; !rc && rw && rw[i]; i++)
        rc = s_ll_rule (fd, rw[i], attr.handled_access_fs, attr.handled_access_fs, err);
    if (rc) {
        close (fd);
        return rc;
    }
    *fd_p = fd;
    return 0;
}

int ak_sandbox_enter (int ruleset_fd)
{
    if (prctl (PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0)
        return -errno;
    if (ruleset_fd >= 0 && syscall (SYS_landlock_restrict_self, ruleset_fd, 0) != 0)
        return -errno;
    return 0;
}

/* =============================================================== seccomp */

#if defined(__x86_64__)
#define S_AUDIT_ARCH AUDIT_ARCH_X86_64
#elif defined(__aarch64__)
#define S_AUDIT_ARCH AUDIT_ARCH_AARCH64
#endif

#define S_NR_OFF     ((uint32_t) offsetof (struct seccomp_data, nr))
#define S_ARCH_OFF   ((uint32_t) offsetof (struct seccomp_data, arch))
#define S_ARG_LO(i)  ((uint32_t) (offsetof (struct seccomp_data, args) + 8 * (i)))   /* little endian */
#define S_DENY       (SECCOMP_RET_ERRNO | (EPERM & SECCOMP_RET_DATA))
#define S_OPEN_WRITE ((uint32_t) (O_WRONLY | O_RDWR | O_CREAT | O_TRUNC | O_APPEND | (O_TMPFILE & ~O_DIRECTORY)))

/* Denied outright (EPERM): new processes and threads, exec, tracing,
   sockets, leaving the process group, and what changes files by name. */
static const int s_denied[] = {
#ifdef __NR_fork
    __NR_fork,
#endif
#ifdef __NR_vfork
    __NR_vfork,
#endif
    __NR_clone, __NR_execve, __NR_execveat, __NR_ptrace, __NR_process_vm_readv, __NR_process_vm_writev,
    __NR_socket, __NR_socketpair, __NR_setsid, __NR_setpgid, __NR_unshare, __NR_setns, __NR_mount,
    __NR_pidfd_open, __NR_pidfd_send_signal, __NR_rt_sigqueueinfo, __NR_rt_tgsigqueueinfo,
    __NR_openat2, __NR_name_to_handle_at, __NR_open_by_handle_at,
    __NR_unlinkat, __NR_renameat, __NR_mkdirat, __NR_linkat, __NR_symlinkat, __NR_fchmodat,
    __NR_fchownat, __NR_truncate, __NR_mknodat,
    /* io_uring would open files and sockets past this filter */
    __NR_io_uring_setup, __NR_io_uring_enter, __NR_io_uring_register,
    /* files changed through a name or a read-only descriptor */
    __NR_fchmod, __NR_fchown, __NR_setxattr, __NR_lsetxattr, __NR_fsetxattr, __NR_removexattr,
    __NR_lremovexattr, __NR_fremovexattr, __NR_utimensat,
    /* what a worker run as root could otherwise do (run it as a user:
       ops/systemd/akworker.service) */
    __NR_umount2, __NR_pivot_root, __NR_chroot, __NR_reboot, __NR_init_module, __NR_finit_module,
    __NR_delete_module, __NR_kexec_load, __NR_bpf, __NR_perf_event_open, __NR_swapon, __NR_swapoff,
    __NR_settimeofday, __NR_clock_settime, __NR_adjtimex, __NR_sethostname, __NR_setdomainname,
    __NR_acct, __NR_quotactl, __NR_keyctl, __NR_add_key, __NR_request_key, __NR_userfaultfd,
    __NR_fanotify_init, __NR_syslog, __NR_vhangup, __NR_kcmp, __NR_process_madvise, __NR_pidfd_getfd,
    __NR_fsopen, __NR_fsmount, __NR_fsconfig, __NR_fspick, __NR_open_tree, __NR_move_mount,
#ifdef __NR_kexec_file_load
    __NR_kexec_file_load,
#endif
#ifdef __NR_mount_setattr
    __NR_mount_setattr,
#endif
#ifdef __NR_iopl
    __NR_iopl, __NR_ioperm,
#endif
#ifdef __NR_utimes
    __NR_utimes, __NR_utime, __NR_futimesat,
#endif
#ifdef __NR_clone3
    __NR_clone3,
#endif
#ifdef __NR_renameat2
    __NR_renameat2,
#endif
#ifdef __NR_creat
    __NR_creat,
#endif
#ifdef __NR_unlink
    __NR_unlink, __NR_rename, __NR_mkdir, __NR_rmdir, __NR_link, __NR_symlink, __NR_chmod, __NR_chown,
    __NR_lchown, __NR_mknod,
#endif
};

int ak_sandbox_seccomp_kernel (pid_t self)
{
#ifndef S_AUDIT_ARCH
    (void) self;
    return -ENOSYS;
#else
    enum { N_DENIED = sizeof s_denied / sizeof s_denied[0] };
    /* Layout: arch check, x32 check, the denied list, then per-syscall
       argument checks; every "deny" jumps to the last instruction. */
    struct sock_filter f[2 * N_DENIED + 48];
    size_t n = 0;
    uint32_t me = (uint32_t) self, group = (uint32_t) -self;
#define S_STMT(code, k)          (f[n++] = (struct sock_filter) BPF_STMT ((code), (k)))
#define S_JUMP(code, k, jt, jf)  (f[n++] = (struct sock_filter) BPF_JUMP ((code), (k), (jt), (jf)))
    S_STMT (BPF_LD | BPF_W | BPF_ABS, S_ARCH_OFF);
    S_JUMP (BPF_JMP | BPF_JEQ | BPF_K, S_AUDIT_ARCH, 1, 0);
    S_STMT (BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS);
    S_STMT (BPF_LD | BPF_W | BPF_ABS, S_NR_OFF);
#if defined(__x86_64__)
    /* the x32 ABI numbers the same calls differently: none of it */
    S_JUMP (BPF_JMP | BPF_JGE | BPF_K, 0x40000000u, 0, 1);
    S_STMT (BPF_RET | BPF_K, S_DENY);
#endif
    for (size_t i = 0; i < N_DENIED; i++) {
        S_JUMP (BPF_JMP | BPF_JEQ | BPF_K, (uint32_t) s_denied[i], 0, 1);
        S_STMT (BPF_RET | BPF_K, S_DENY);
    }
    /* kill (pid): itself, 0 or its own group (it leads it and can make no
       other process); tkill (tid) and tgkill (tgid, ...): itself only. */
    S_JUMP (BPF_JMP | BPF_JEQ | BPF_K, __NR_kill, 0, 6);
    S_STMT (BPF_LD | BPF_W | BPF_ABS, S_ARG_LO (0));
    S_JUMP (BPF_JMP | BPF_JEQ | BPF_K, me, 3, 0);
    S_JUMP (BPF_JMP | BPF_JEQ | BPF_K, 0, 2, 0);
    S_JUMP (BPF_JMP | BPF_JEQ | BPF_K, group, 1, 0);
    S_STMT (BPF_RET | BPF_K, S_DENY);
    S_STMT (BPF_RET | BPF_K, SECCOMP_RET_ALLOW);
    S_JUMP (BPF_JMP | BPF_JEQ | BPF_K, __NR_tkill, 1, 0);
    S_JUMP (BPF_JMP | BPF_JEQ | BPF_K, __NR_tgkill, 0, 4);
    S_STMT (BPF_LD | BPF_W | BPF_ABS, S_ARG_LO (0));
    S_JUMP (BPF_JMP | BPF_JEQ | BPF_K, me, 1, 0);
    S_STMT (BPF_RET | BPF_K, S_DENY);
    S_STMT (BPF_RET | BPF_K, SECCOMP_RET_ALLOW);
    /* open (path, flags) and openat (dirfd, path, flags): read only. */
#ifdef __NR_open
    S_JUMP (BPF_JMP | BPF_JEQ | BPF_K, __NR_open, 0, 4);
    S_STMT (BPF_LD | BPF_W | BPF_ABS, S_ARG_LO (1));
    S_JUMP (BPF_JMP | BPF_JSET | BPF_K, S_OPEN_WRITE, 0, 1);
    S_STMT (BPF_RET | BPF_K, S_DENY);
    S_STMT (BPF_RET | BPF_K, SECCOMP_RET_ALLOW);
#endif
    S_JUMP (BPF_JMP | BPF_JEQ | BPF_K, __NR_openat, 0, 4);
    S_STMT (BPF_LD | BPF_W | BPF_ABS, S_ARG_LO (2));
    S_JUMP (BPF_JMP | BPF_JSET | BPF_K, S_OPEN_WRITE, 0, 1);
    S_STMT (BPF_RET | BPF_K, S_DENY);
    S_STMT (BPF_RET | BPF_K, SECCOMP_RET_ALLOW);
    S_STMT (BPF_RET | BPF_K, SECCOMP_RET_ALLOW);
#undef S_STMT
#undef S_JUMP
    struct sock_fprog prog = { .len = (unsigned short) n, .filter = f };
    if (prctl (PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0)
        return -errno;
    if (syscall (SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog) != 0)
        return -errno;
    return 0;
#endif
}

void ak_sandbox_describe (const ak_sandbox_limits_t *l, int abi, char *buf, size_t len)
{
    char as[32];
    if (l->as_bytes && !ak_sandbox_asan_build ())
        snprintf (as, sizeof as, "%llu MiB", (unsigned long long) (l->as_bytes >> 20));
    else
        snprintf (as, sizeof as, "none%s", ak_sandbox_asan_build () ? " (ASan build)" : "");
    const char *why = NULL;
    if (abi <= 0)
        ak_sandbox_landlock_abi (&why);
    char ll[200];
    if (abi > 0)
        snprintf (ll, sizeof ll, "landlock abi %d (read: system libraries, cache; write: scratch)", abi);
    else
        snprintf (ll, sizeof ll, "NO landlock (%s): files not confined", why && *why ? why : "unavailable");
    snprintf (buf, len, "own process group killed at the end, rlimits (cpu %llu s, address space %s, "
              "file size %llu KiB, %llu files%s), no_new_privs, %s, seccomp (no fork/exec/socket/"
              "signals to others/opens for writing)",
              (unsigned long long) l->cpu_s, as, (unsigned long long) (l->fsize_bytes >> 10),
              (unsigned long long) l->nofile, l->no_procs ? ", no processes" : "", ll);
}

/* ========================================================= include scan */

/*  src with line splices removed and comments blanked (string and
    character literals kept), so that a directive reads as the
    preprocessor reads it; line numbers are kept (a removed splice's line
    comes back as an empty line after the logical line).  Caller frees. */
static char *s_logical (const char *src, size_t len)
{
    char *out = malloc (len + 1);
    if (!out)
        return NULL;
    size_t o = 0, pending_nl = 0;
    char quote = 0;
    bool line_comment = false, block_comment = false;
    for (size_t i = 0; i < len; i++) {
        char c = src[i];
        if (c == '\\' && i + 1 < len && src[i + 1] == '\n') {
            i++;
            pending_nl++;
            continue;
        }
        if (c == '\n') {
            if (line_comment)
                line_comment = false;
            if (quote)
                quote = 0;       /* an unterminated literal ends with its line */
            out[o++] = '\n';
            for (; pending_nl; pending_nl--)
                out[o++] = '\n';
            continue;
        }
        if (line_comment)
            continue;
        if (block_comment) {
            if (c == '*' && i + 1 < len && src[i + 1] == '/') {
                block_comment = false;
                i++;
                out[o++] = ' ';
            }
            continue;
        }
        if (quote) {
            out[o++] = c;
            if (c == '\\' && i + 1 < len && src[i + 1] != '\n')
                out[o++] = src[++i];
            else if (c == quote)
                quote = 0;
            continue;
        }
        if (c == '/' && i + 1 < len && src[i + 1] == '/') {
            line_comment = true;
            i++;
            continue;
        }
        if (c == '/' && i + 1 < len && src[i + 1] == '*') {
            block_comment = true;
            i++;
            continue;
        }
        if (c == '"' || c == '\'')
            quote = c;
        out[o++] = c;
    }
    out[o] = '\0';
    return out;
}

static const char *s_skip_blank (const char *p)
{
    while (*p == ' ' || *p == '\t' || *p == '\f' || *p == '\v' || *p == '\r')
        p++;
    return p;
}

/*  Whether a header name may be read: relative, no ".." component, no
    backslash. */
static bool s_header_ok (const char *name, size_t n)
{
    if (n == 0 || name[0] == '/' || memchr (name, '\\', n))
        return false;
    for (size_t i = 0; i + 1 < n; i++)
        if (name[i] == '.' && name[i + 1] == '.' && (i == 0 || name[i - 1] == '/')
            && (i + 2 == n || name[i + 2] == '/'))
            return false;
    return true;
}

int ak_sandbox_check_includes (const char *src, size_t len, ak_err_t *err)
{
    static const char *const directives[] = { "include_next", "include", "import", "embed" };
    if (!src)
        return 0;
    if (memmem (src, len, "incbin", 6))
        return ak_err_set (err, AK_EINVAL, "source: '.incbin' is refused (it reads a file into the "
                           "object; docs/operations.md, \"Threat model\")");
    char *text = s_logical (src, len);
    if (!text)
        return ak_err_set (err, AK_ENOMEM, "source: include scan: out of memory");
    int rc = 0, line = 0;
    for (char *p = text; p && *p && !rc; ) {
        char *end = strchr (p, '\n');
        if (end)
            *end = '\0';
        line++;
        const char *q = s_skip_blank (p);
        if (*q == '#' || (q[0] == '%' && q[1] == ':')) {       /* %: is the digraph of # */
            q = s_skip_blank (q + (*q == '#' ? 1 : 2));
            for (size_t d = 0; d < sizeof directives / sizeof directives[0]; d++) {
                size_t dl = strlen (directives[d]);
                if (strncmp (q, directives[d], dl) != 0)
                    continue;
                const char *arg = s_skip_blank (q + dl);
                if (arg == q + dl && *arg && *arg != '"' && *arg != '<')
                    break;                      /* #includex: not this directive */
                char close = *arg == '"' ? '"' : *arg == '<' ? '>' : 0;
                const char *stop = close ? strchr (arg + 1, close) : NULL;
                if (!close || !stop)
                    rc = ak_err_set (err, AK_EINVAL, "source line %d: #%s %.80s: a computed or malformed "
                                     "header name is refused (write it as \"name\" or <name>)", line,
                                     directives[d], arg);
                else if (!s_header_ok (arg + 1, (size_t) (stop - arg - 1)))
                    rc = ak_err_set (err, AK_EINVAL, "source line %d: #%s %.*s: absolute paths, '..' and "
                                     "backslashes are refused (only the compiler's include paths are "
                                     "read)", line, directives[d], (int) (stop - arg + 1 > 120 ? 120
                                     : stop - arg + 1), arg);
                break;
            }
        }
        p = end ? end + 1 : NULL;
    }
    free (text);
    return rc;
}
