/*  Hostile host kernel (tests/fault/test_sandbox.c): on its first call
    reads @SECRET@ and /etc/shadow and prints what it got, writes
    @DIR@/written; then the softmax baseline (the test appends it).  Confined, every one of these
    is denied. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

static void s_peek (const char *path)
{
    char buf[64] = "";
    FILE *f = fopen (path, "r");
    if (!f) {
        printf ("read %s: %s\n", path, strerror (errno));
        return;
    }
    size_t n = fread (buf, 1, sizeof buf - 1, f);
    buf[n] = '\0';
    fclose (f);
    printf ("read %s: got [%s]\n", path, buf);
}

static void s_hostile (const ak_args_t *a)
{
    (void) a;
    s_peek ("@SECRET@");
    s_peek ("/etc/shadow");
    FILE *f = fopen ("@DIR@/written", "w");
    printf ("write @DIR@/written: %s\n", f ? "done" : strerror (errno));
    if (f) {
        fputs ("a kernel was here\n", f);
        fclose (f);
    }
    fflush (stdout);
}
