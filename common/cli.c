/*  common/cli.c: the shared wording of bad flags (cli.h). */
#include "cli.h"
#include "log.h"
#include "util.h"

#include <stdarg.h>
#include <stdio.h>

int ak_cli_bad (const char *prog, const char *fmt, ...)
{
    va_list ap;
    va_start (ap, fmt);
    fprintf (stderr, "%s: ", prog);
    vfprintf (stderr, fmt, ap);
    fprintf (stderr, "\nTry '%s --help'.\n", prog);
    va_end (ap);
    return 2;
}

int ak_cli_uint (const char *prog, const char *flag, const char *text, int64_t lo, int64_t hi,
                 uint32_t *out)
{
    int64_t v;
    if (ak_parse_i64 (text, &v) || v < lo || v > hi)
        return ak_cli_bad (prog, "%s: '%s' is not an integer in %lld..%lld", flag, text, (long long) lo,
                           (long long) hi);
    *out = (uint32_t) v;
    return 0;
}

int ak_cli_log_level (const char *prog, const char *text, int *level)
{
    int l = ak_log_parse_level (text);
    if (l < 0)
        return ak_cli_bad (prog, "--log-level: '%s' is not one of debug, info, warn, error, quiet", text);
    *level = l;
    return 0;
}

int ak_cli_getopt_error (const char *prog, int opt, char *const *argv, int optind)
{
    if (opt == ':')
        return ak_cli_bad (prog, "%s needs a value", argv[optind - 1]);
    return ak_cli_bad (prog, "unknown option '%s'", argv[optind - 1]);
}
