/*  common/cli.h: what the programs share in parsing their flags (akcoord,
    akload): one wording for every bad flag, so that an operator reads the
    same sentence from each.

    Each reports on stderr as "PROGRAM: WHAT\nTry 'PROGRAM --help'.\n" and
    returns 2, the exit status of bad usage, for main to return at once.

    Never: exit from here (main returns the status: a test or a wrapper
    calling into a program's code must not lose its process); print to
    stdout (help and --version do that). */
#ifndef AK_CLI_H
#define AK_CLI_H
#include <stdint.h>

/* Prints "PROG: <fmt ...>" and the --help hint to stderr; returns 2. */
int ak_cli_bad (const char *prog, const char *fmt, ...) __attribute__ ((format (printf, 2, 3)));

/* text as an integer in lo..hi into *out: 0, or 2 after
   "PROG: FLAG: 'TEXT' is not an integer in LO..HI" (*out untouched). */
int ak_cli_uint (const char *prog, const char *flag, const char *text, int64_t lo, int64_t hi,
                 uint32_t *out);

/* --log-level's value as a level of log.h into *level: 0, or 2 after
   naming the levels there are. */
int ak_cli_log_level (const char *prog, const char *text, int *level);

/* What getopt_long (optstring starting ":") returned for an option it
   could not take, opt ':' (a value missing) or anything else (unknown):
   2 after naming argv[optind - 1]. */
int ak_cli_getopt_error (const char *prog, int opt, char *const *argv, int optind);

#endif
