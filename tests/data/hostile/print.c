/*  Hostile host kernel (tests/fault/test_sandbox.c): prints 10 MB on its
    first call (stdout and stderr), then the softmax baseline (the test appends it).  Confined, the
    output is captured and capped; nothing reaches the worker's log. */
#include <stdio.h>
#include <string.h>

static void s_hostile (const ak_args_t *a)
{
    (void) a;
    static char line[1024];
    memset (line, 'A', sizeof line - 1);
    line[sizeof line - 2] = '\n';
    for (int i = 0; i < 5 * 1024; i++) {
        fputs (line, stdout);
        fputs (line, stderr);
    }
    fflush (stdout);
}
