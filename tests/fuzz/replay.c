/*  tests/fuzz/replay.c: a fuzz target without libFuzzer.

    Linked with one tests/fuzz/fuzz_X.c in the ordinary test build (gcc,
    ASan + UBSan: tests/CMakeLists.txt), it feeds LLVMFuzzerTestOneInput
    every file of the folders given: the seed corpus tests/fuzz/corpus/X/
    and the crash reproducers kept in tests/fuzz/regressions/X/.  So each
    input that ever crashed a target stays a regression test that runs with
    the suite, on hosts without clang too (CTest: test_fuzz_replay_X).

      replay_X DIR...     a folder that does not exist counts as empty

    Exit 0 when every input ran (the target returning is all it asks: the
    target aborts on what it must not see, the sanitizers on the rest);
    1 when a folder cannot be read or no input was found at all. */
#include <dirent.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput (const uint8_t *data, size_t size);
int LLVMFuzzerInitialize (int *argc, char ***argv) __attribute__ ((weak));

static int s_name_cmp (const void *a, const void *b)
{
    return strcmp (*(char *const *) a, *(char *const *) b);
}

/*  Runs the target over one file; -1 when it cannot be read. */
static int s_replay_file (const char *path)
{
    FILE *fp = fopen (path, "rb");
    if (!fp) {
        fprintf (stderr, "replay: %s: %s\n", path, strerror (errno));
        return -1;
    }
    size_t cap = 4096, len = 0;
    uint8_t *buf = malloc (cap);
    size_t got;
    while (buf && (got = fread (buf + len, 1, cap - len, fp)) > 0) {
        len += got;
        if (len == cap) {
            uint8_t *more = realloc (buf, cap * 2);
            if (!more) {
                free (buf);
                buf = NULL;
                break;
            }
            buf = more;
            cap *= 2;
        }
    }
    int bad = ferror (fp) || !buf;
    fclose (fp);
    if (bad) {
        fprintf (stderr, "replay: %s: cannot read\n", path);
        free (buf);
        return -1;
    }
    /* the target gets exactly len bytes, in a block of its own (ASan sees
       a read past the end) */
    uint8_t *data = malloc (len ? len : 1);
    if (!data) {
        free (buf);
        return -1;
    }
    memcpy (data, buf, len);
    free (buf);
    printf ("replay: %s (%zu bytes)\n", path, len);
    fflush (stdout);
    LLVMFuzzerTestOneInput (data, len);
    free (data);
    return 0;
}

/*  Every regular file of dir, in name order; how many, or -1. */
static int s_replay_dir (const char *dir)
{
    DIR *d = opendir (dir);
    if (!d) {
        if (errno == ENOENT)
            return 0;
        fprintf (stderr, "replay: %s: %s\n", dir, strerror (errno));
        return -1;
    }
    char **names = NULL;
    size_t n = 0, cap = 0;
    struct dirent *e;
    while ((e = readdir (d))) {
        if (e->d_name[0] == '.' || strcmp (e->d_name, "README.md") == 0)
            continue;
        if (n == cap) {
            cap = cap ? cap * 2 : 16;
            char **more = realloc (names, cap * sizeof *names);
            if (!more)
                break;
            names = more;
        }
        names[n] = malloc (strlen (dir) + strlen (e->d_name) + 2);
        if (!names[n])
            break;
        sprintf (names[n], "%s/%s", dir, e->d_name);
        n++;
    }
    closedir (d);
    qsort (names, n, sizeof *names, s_name_cmp);
    int ran = 0;
    for (size_t i = 0; i < n; i++) {
        struct stat st;
        if (stat (names[i], &st) == 0 && S_ISREG (st.st_mode)) {
            if (s_replay_file (names[i]) != 0)
                ran = -1;
            else if (ran >= 0)
                ran++;
        }
        free (names[i]);
    }
    free (names);
    return ran;
}

int main (int argc, char **argv)
{
    if (argc < 2) {
        fprintf (stderr, "usage: %s DIR...\n", argv[0]);
        return 1;
    }
    if (LLVMFuzzerInitialize)
        LLVMFuzzerInitialize (&argc, &argv);
    int total = 0;
    for (int i = 1; i < argc; i++) {
        int n = s_replay_dir (argv[i]);
        if (n < 0)
            return 1;
        printf ("replay: %s: %d input%s\n", argv[i], n, n == 1 ? "" : "s");
        total += n;
    }
    if (total == 0) {
        fprintf (stderr, "replay: no input in any folder given\n");
        return 1;
    }
    printf ("replay: %d inputs, none crashed\n", total);
    return 0;
}
