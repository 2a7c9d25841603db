/*  ops/akctl/gate.c: `akctl gate`, the end-to-end gate of a profile.

        akctl gate --profile DIR [--steps N] [--warmup W] [--tolerance-file F]
                   [--ops a,b] [--out FILE] [--cuda-graph] [--json] -- python3 SCRIPT [ARGS...]

    Verifies the package with libakprofile first (a tampered one never
    reaches Python), then runs the Python driver, `python3 -m akprofile.gate`
    (lib/akprofile/python/akprofile/gate.py), which imports SCRIPT, times its
    step() with the profile off and on in interleaved pairs and compares the
    outputs against the profile-off run and a float32 run (docs/apply.md).
    The driver writes the gate JSON; akctl prints its verdict line (or the
    JSON with --json).

    The driver finds its package and libakprofile through the environment
    akctl sets when the caller has not: PYTHONPATH gains the folder holding
    akprofile/ (a bundle's bin/python, else the source tree's
    lib/akprofile/python), AKPROFILE_LIB names libakprofile.so (a bundle's
    bin/lib, else the build tree's lib/).

    Never: talks to the coordinator, or writes inside the package (a file
    there would make it fail its own verification).

    Exit: 0 accepted, 1 rejected, 2 bad usage, a refused package, or a gate
    that could not run (no GPU, no PyTorch, the script failed). */
#include "akctl.h"
#include "akprofile.h"
#include "datadir.h"
#include "util.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static const char s_usage[] =
    "usage: akctl gate --profile DIR [--steps N] [--warmup W] [--tolerance-file F]\n"
    "                  [--ops a,b] [--out FILE] [--cuda-graph] [--json] -- python3 SCRIPT [ARGS...]\n";

const char akctl_gate_help[] =
    "Runs SCRIPT (which defines make_step(dtype), docs/apply.md) with the profile\n"
    "package DIR off and on in N interleaved pairs of device-timed steps (N >= 10,\n"
    "default 20), after W warm-up pairs (default 3), and compares its outputs with\n"
    "the profile off and with a float32 run, within the tolerance file F (default:\n"
    "the built-in one).  Verdict: accepted | rejected (slower | outputs differ |\n"
    "no entry applied | launch failed), written as JSON to FILE (default\n"
    "DIR.gate.json beside the package).  The package is verified first.\n"
    "\n"
    "  --profile DIR         the package folder (akctl profile export)\n"
    "  --steps N             timed pairs, at least 10 (default 20)\n"
    "  --warmup W            untimed pairs first, at least 1 (default 3)\n"
    "  --tolerance-file F    the frozen tolerance JSON\n"
    "  --ops a,b             route only these operators (default: all)\n"
    "  --out FILE            where the gate JSON goes\n"
    "  --cuda-graph          capture one step off and one on into CUDA graphs and\n"
    "                        time their replays (device time, no launch cost: how\n"
    "                        a server replaying captured decode steps runs)\n"
    "  --json                print the gate JSON instead of the verdict line\n"
    "\n"
    "Exit: 0 accepted, 1 rejected, 2 bad usage, a refused package, or a gate that\n"
    "could not run.\n";

static int s_usage_error (const char *what, const char *arg)
{
    fprintf (stderr, "akctl gate: %s%s%s\n%s(akctl gate --help says more)\n", what, arg ? " " : "", arg ? arg : "",
             s_usage);
    return AKCTL_EXIT_USAGE;
}

static bool s_is_file (const char *path)
{
    struct stat st;
    return stat (path, &st) == 0 && S_ISREG (st.st_mode);
}

/*  The folder of akctl's own binary; caller frees. */
static char *s_bindir (void)
{
    char *dir = ak_datadir_bindir ();
    return dir ? dir : ak_strdup (".");
}

/*  Sets PYTHONPATH and AKPROFILE_LIB for the driver where the caller has
    not.  Returns 0, or 2 with a message when the package is nowhere. */
static int s_environment (void)
{
    char *bin = s_bindir ();
    char *py[4] = { ak_sprintf ("%s/python", bin), NULL, NULL,
                    ak_sprintf ("%s/../share/akfleet/python", bin) };     /* installed */
#ifdef AK_SOURCE_DIR
    py[1] = ak_sprintf ("%s/lib/akprofile/python", AK_SOURCE_DIR);
#endif
    const char *src = getenv ("AK_SOURCE_DIR");
    if (src && *src)
        py[2] = ak_sprintf ("%s/lib/akprofile/python", src);
    const char *found = NULL;
    for (int i = 0; i < 4 && !found; i++) {
        char *init = py[i] ? ak_sprintf ("%s/akprofile/__init__.py", py[i]) : NULL;
        if (init && s_is_file (init))
            found = py[i];
        free (init);
    }
    int rc = 0;
    if (!found) {
        fprintf (stderr, "akctl gate: the akprofile Python package is in none of %s/python, "
                 "$AK_SOURCE_DIR/lib/akprofile/python, the source tree akctl was built from or "
                 "%s/../share/akfleet/python\n", bin, bin);
        rc = AKCTL_EXIT_USAGE;
    }
    else {
        const char *old = getenv ("PYTHONPATH");
        char *path = old && *old ? ak_sprintf ("%s:%s", found, old) : ak_strdup (found);
        setenv ("PYTHONPATH", path, 1);
        free (path);
    }
    if (rc == 0 && !getenv ("AKPROFILE_LIB")) {
        char *libs[2] = { ak_sprintf ("%s/lib/libakprofile.so", bin), ak_sprintf ("%s/../lib/libakprofile.so", bin) };   /* build tree or bundle; installed: the loader's path */
        for (int i = 0; i < 2; i++)
            if (s_is_file (libs[i]) && !getenv ("AKPROFILE_LIB")) {
                char *real = realpath (libs[i], NULL);
                setenv ("AKPROFILE_LIB", real ? real : libs[i], 1);
                free (real);
            }
        free (libs[0]);
        free (libs[1]);
    }
    for (int i = 0; i < 4; i++)
        free (py[i]);
    free (bin);
    return rc;
}

/*  Runs argv, waiting for it; its exit status, or -1 (message printed)
    when it could not start or died of a signal. */
static int s_run (char **argv)
{
    fflush (stdout);
    fflush (stderr);
    pid_t pid = fork ();
    if (pid < 0) {
        fprintf (stderr, "akctl gate: fork: %s\n", strerror (errno));
        return -1;
    }
    if (pid == 0) {
        execvp (argv[0], argv);
        fprintf (stderr, "akctl gate: cannot run %s: %s\n", argv[0], strerror (errno));
        _exit (127);
    }
    int status = 0;
    while (waitpid (pid, &status, 0) < 0)
        if (errno != EINTR) {
            fprintf (stderr, "akctl gate: waitpid: %s\n", strerror (errno));
            return -1;
        }
    if (WIFSIGNALED (status)) {
        fprintf (stderr, "akctl gate: the driver died of signal %d\n", WTERMSIG (status));
        return -1;
    }
    return WEXITSTATUS (status);
}

static bool s_positive (const char *text, int lo, int *out)
{
    int64_t v;
    if (ak_parse_i64 (text, &v) != 0 || v < lo || v > 1000000)
        return false;
    *out = (int) v;
    return true;
}

static int s_gate (int argc, char **argv)
{
    const char *profile = NULL, *tol = NULL, *ops = NULL, *out = NULL;
    int steps = 20, warmup = 3, i = 1;
    bool json = false, graph = false;
    for (; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp (a, "--") == 0) {
            i++;
            break;
        }
        if (strcmp (a, "-h") == 0 || strcmp (a, "--help") == 0) {
            printf ("%s\n%s", s_usage, akctl_gate_help);
            return AKCTL_EXIT_OK;
        }
        if (strcmp (a, "--json") == 0) {
            json = true;
            continue;
        }
        if (strcmp (a, "--cuda-graph") == 0) {
            graph = true;
            continue;
        }
        const char *names[] = { "--profile", "--steps", "--warmup", "--tolerance-file", "--ops", "--out" };
        int which = -1;
        const char *value = NULL;
        for (int n = 0; n < 6 && which < 0; n++) {
            size_t len = strlen (names[n]);
            if (strncmp (a, names[n], len) == 0 && (a[len] == '\0' || a[len] == '=')) {
                which = n;
                value = a[len] == '=' ? a + len + 1 : NULL;
            }
        }
        if (which < 0)
            return s_usage_error ("unknown option", a);
        if (!value) {
            if (i + 1 >= argc)
                return s_usage_error ("option needs a value:", a);
            value = argv[++i];
        }
        if (!*value)
            return s_usage_error ("option needs a value:", a);
        switch (which) {
            case 0: profile = value; break;
            case 1:
                if (!s_positive (value, 10, &steps))
                    return s_usage_error ("--steps wants a number >= 10, not", value);
                break;
            case 2:
                if (!s_positive (value, 1, &warmup))
                    return s_usage_error ("--warmup wants a number >= 1, not", value);
                break;
            case 3: tol = value; break;
            case 4: ops = value; break;
            default: out = value; break;
        }
    }
    if (!profile)
        return s_usage_error ("--profile DIR is required", NULL);
    if (i >= argc)
        return s_usage_error ("no program after --: give python3 SCRIPT [ARGS...]", NULL);
    /* python3 SCRIPT ARGS, or SCRIPT.py ARGS with the default interpreter */
    const char *python = getenv ("AKPROFILE_PYTHON");
    size_t alen = strlen (argv[i]);
    if (!(alen > 3 && strcmp (argv[i] + alen - 3, ".py") == 0))
        python = argv[i++];
    if (!python || !*python)
        python = "python3";
    if (i >= argc)
        return s_usage_error ("no script after the interpreter", NULL);
    if (tol && !s_is_file (tol))
        return s_usage_error ("--tolerance-file: no such file:", tol);

    char err[1024];
    int rc = akp_verify (profile, err, sizeof err);
    if (rc != AKP_OK) {
        fprintf (stderr, "akctl gate: package refused: %s\n", err);
        return AKCTL_EXIT_USAGE;
    }
    if (s_environment () != 0)
        return AKCTL_EXIT_USAGE;

    char *prof_abs = realpath (profile, NULL);
    char *out_path = out ? ak_strdup (out) : ak_sprintf ("%s.gate.json", prof_abs ? prof_abs : profile);
    char steps_s[16], warm_s[16];
    snprintf (steps_s, sizeof steps_s, "%d", steps);
    snprintf (warm_s, sizeof warm_s, "%d", warmup);
    char **cmd = ak_calloc ((size_t) (argc - i) + 20, sizeof *cmd);
    int n = 0;
    cmd[n++] = (char *) python;
    cmd[n++] = "-m";
    cmd[n++] = "akprofile.gate";
    cmd[n++] = "--profile";
    cmd[n++] = (char *) profile;
    cmd[n++] = "--steps";
    cmd[n++] = steps_s;
    cmd[n++] = "--warmup";
    cmd[n++] = warm_s;
    cmd[n++] = "--out";
    cmd[n++] = out_path;
    if (tol) {
        cmd[n++] = "--tolerance-file";
        cmd[n++] = (char *) tol;
    }
    if (ops) {
        cmd[n++] = "--ops";
        cmd[n++] = (char *) ops;
    }
    if (graph)
        cmd[n++] = "--cuda-graph";
    cmd[n++] = "--";
    for (; i < argc; i++)
        cmd[n++] = argv[i];
    cmd[n] = NULL;

    unlink (out_path);                 /* a stale verdict is never read as this one */
    int code = s_run (cmd);
    int result;
    if (code == 0 || code == 1) {
        char *text = NULL;
        size_t len = 0;
        ak_err_t e = { 0 };
        if (ak_file_read (out_path, 64u << 20, &text, &len, &e) != 0) {
            fprintf (stderr, "akctl gate: the driver wrote no verdict: %s\n", e.msg);
            result = AKCTL_EXIT_USAGE;
        }
        else {
            json_error_t je;
            json_t *doc = json_loadb (text, len, 0, &je);
            const char *verdict = json_string_value (json_object_get (doc, "verdict"));
            if (!doc || !verdict) {
                fprintf (stderr, "akctl gate: %s: not a gate verdict (%s)\n", out_path, doc ? "no verdict" : je.text);
                result = AKCTL_EXIT_USAGE;
            }
            else {
                if (json)
                    printf ("%s", text);
                else
                    printf ("gate: profile %s: %s (%s)\n", json_string_value (json_object_get (doc, "profile")),
                            verdict, out_path);
                /* the file decides, not the driver's exit code alone */
                result = strcmp (verdict, "accepted") == 0 && code == 0 ? AKCTL_EXIT_OK : AKCTL_EXIT_NEGATIVE;
            }
            json_decref (doc);
        }
        free (text);
    }
    else {
        fprintf (stderr, "akctl gate: the gate could not run (driver exit %d): see the messages above\n", code);
        result = AKCTL_EXIT_USAGE;
    }
    free (cmd);
    free (out_path);
    free (prof_abs);
    return result;
}

int akctl_gate_verb (const akctl_opts_t *o)
{
    if (o->argv)
        return s_gate (o->argc, o->argv);
    fprintf (stderr, "akctl gate: the verb comes first and takes its own options:\n%s", s_usage);
    return AKCTL_EXIT_USAGE;
}
