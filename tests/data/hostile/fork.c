/*  Hostile host kernel (tests/fault/test_sandbox.c): forks on its first
    call; the child writes its pid to @DIR@/forked.pid and sleeps forever.
    Then the softmax baseline (the test appends it).  Confined, the fork is refused. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static void s_hostile (const ak_args_t *a)
{
    (void) a;
    pid_t pid = fork ();
    if (pid == 0) {
        FILE *f = fopen ("@DIR@/forked.pid", "w");
        if (f) {
            fprintf (f, "%d\n", (int) getpid ());
            fclose (f);
        }
        for (;;)
            pause ();
    }
    printf ("fork: %d (%s)\n", (int) pid, pid < 0 ? strerror (errno) : "forked");
    fflush (stdout);
}
