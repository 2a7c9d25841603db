/*  Hostile host kernel (tests/fault/test_sandbox.c): sends SIGKILL to its
    parent on its first call (the executor, or the worker when kernels ran
    in the executor), then the softmax baseline (the test appends it).  Confined, it is denied. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static void s_hostile (const ak_args_t *a)
{
    (void) a;
    int rc = kill (getppid (), SIGKILL);
    printf ("kill parent: %s\n", rc == 0 ? "sent" : strerror (errno));
    fflush (stdout);
}
