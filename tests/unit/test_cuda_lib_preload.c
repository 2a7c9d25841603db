/*  tests/unit/test_cuda_lib_preload.c: the CUDA backend's cuBLASLt preload
    thread (worker/backend_cuda_lib.c) and its wait.

    Opening a device starts a dlopen of libcublasLt (540 MB) on a thread of
    its own (ak_cuda_lib_preload); the device's close waits for it
    (ak_cuda_lib_preload_wait), because a process that exits while the
    thread runs the library's initializers crashes (SIGSEGV, status 139;
    backend_cuda_impl.h; the crash itself needs a build without ASan to
    show, so it is not what is tested here).  What is: the wait returns
    only once the library is loaded (a wait that does not join finds it
    still loading: the load takes 0.3 s and more; checked).  The wait's
    guard for a forked child (the thread is the parent's: a join there
    would wait for ever) is not tested: under ASan pthread_join returns
    there all the same.  The case runs in a child process (the preload is
    once a process).
    Without a libcublasLt on this host (the thread then ends at once:
    nothing to test) or without the CUDA backend in the build, the test
    skips and says which. */
#include "support.h"

#if AK_HAVE_CUDA
#include "worker/backend_cuda_impl.h"
#endif

#include <dlfcn.h>
#include <stdbool.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#if AK_HAVE_CUDA
#define S_NO_LIBRARY 3                      /* a child's exit: the preload found no library */

static const char *const s_names[] = { "libcublasLt.so.13", "libcublasLt.so.12", "libcublasLt.so" };

/* Whether cuBLASLt is loaded in this process (RTLD_NOLOAD), or can be (0). */
static bool s_dlopen (int how)
{
    for (size_t i = 0; i < sizeof s_names / sizeof s_names[0]; i++)
        if (dlopen (s_names[i], RTLD_LAZY | RTLD_LOCAL | how))
            return true;
    return false;
}

/* In the child: the preload, its wait, then whether the library is in. */
static int s_wait_then_loaded (void)
{
    ak_cuda_lib_preload ();
    ak_cuda_lib_preload_wait ();
    if (s_dlopen (RTLD_NOLOAD))
        return 0;
    return s_dlopen (0) ? 2 : S_NO_LIBRARY;
}
#endif

/* The wait returns with the library loaded. */
static void test_wait_joins (void **state)
{
    (void) state;
#if AK_HAVE_CUDA
    pid_t pid = fork ();
    assert_true (pid >= 0);
    if (pid == 0)
        _exit (s_wait_then_loaded ());
    int st = 0;
    assert_int_equal (waitpid (pid, &st, 0), pid);
    if (WIFEXITED (st) && WEXITSTATUS (st) == S_NO_LIBRARY)
        ak_test_skip ("no libcublasLt on this host: the preload thread has nothing to load");
    if (!WIFEXITED (st) || WEXITSTATUS (st) != 0)
        fail_msg ("after the wait: %s %d (2: cuBLASLt, which this host has, not loaded yet)",
                  WIFSIGNALED (st) ? "signal" : "exit status", WIFSIGNALED (st) ? WTERMSIG (st) : WEXITSTATUS (st));
#else
    ak_test_skip ("built without the CUDA backend (no CUDA headers)");
#endif
}

int main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test (test_wait_joins),
    };
    return ak_test_exit (cmocka_run_group_tests (tests, NULL, NULL));
}
