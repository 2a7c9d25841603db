/*  ops/akctl/verify.c: `akctl verify --profile NAME [--k K --floor F] [--wait]` and
    `akctl verify BATCH [--wait]` (docs/profiles.md "Verify").

    --profile asks the coordinator for a verify batch of the profile; with
    --wait (or given a BATCH) it polls `verify-status` until the batch is
    judged, prints one line per (entry, host) and the summary line scripts
    grep:
        verify: profile NAME: verified|failing|unverified (...)
    Exit 0 when verified, 1 when failing or unverified (or the batch was
    cancelled), 130 when interrupted (the verification goes on). */
#include "akctl.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define S_POLL_MS 250

static int s_call (akctl_client_t *client, const char *verb, char **args, int nargs, json_t **answer_p)
{
    ak_err_t err = { 0, "" };
    akctl_reply_t reply;
    int rc = akctl_client_call (client, verb, args, nargs, NULL, &reply, &err);
    int code = akctl_call_exit (rc, &reply, &err);
    if (code == AKCTL_EXIT_OK) {
        *answer_p = akctl_parse_json (reply.json, verb);
        if (!*answer_p)
            code = AKCTL_EXIT_NEGATIVE;
    }
    akctl_reply_free (&reply);
    return code;
}

static void s_nap (int ms)
{
    struct timespec ts = { ms / 1000, (long) (ms % 1000) * 1000000L };
    while (!akctl_stop && nanosleep (&ts, &ts) != 0)
        ;
}

static const char *s_figure (double v, double noise, char *buf, size_t len)
{
    if (v <= 0)
        return "-";
    return akctl_speedup (v, noise, buf, len);
}

/* The verdict table and the summary line; the exit code. */
static int s_render (const json_t *answer)
{
    const json_t *rep = akj_obj (answer, "report"), *batch = akj_obj (answer, "batch");
    static const char *const head[] = { "CLASS", "WORKLOAD", "HOST", "WORKER", "VERDICT", "MEASURED",
                                        "RECORDED", "REASON" };
    akctl_table_t *t = akctl_table_new (8, head);
    size_t i;
    json_t *v;
    size_t npass = 0, nall = 0;
    json_array_foreach (akj_arr (rep, "verdicts"), i, v) {
        char m[64], r[64];
        const char *verdict = akj_str (v, "verdict");
        bool pass = strcmp (verdict, "pass") == 0;
        npass += pass;
        nall += strcmp (verdict, "vendor") != 0;      /* a vendor entry has no host verdict */
        const char *row[8] = { akj_str (v, "device_class"), akj_str (v, "key"),
                               *akj_str (v, "host") ? akj_str (v, "host") : "-",
                               *akj_str (v, "worker_id") ? akj_str (v, "worker_id") : "-", verdict,
                               s_figure (akj_num (v, "measured"), akj_num (v, "measured_noise"), m, sizeof m),
                               s_figure (akj_num (v, "recorded"), akj_num (v, "recorded_noise"), r, sizeof r),
                               akj_str (v, "reason") };
        akctl_table_add (t, row);
    }
    double floor = akj_num (rep, "floor");
    printf ("verify batch %s of profile %s (rule: |measured - recorded| <= %g x (noises) + %g x recorded,"
            " at most %g x recorded; measured >= 1 + threshold)\n", akj_str (batch, "batch_id"),
            akj_str (rep, "profile"), akj_num (rep, "k"), floor, floor > 0.25 ? floor : 0.25);
    if (akctl_table_rows (t))
        akctl_table_print (t, stdout, "  ", false);
    akctl_table_destroy (&t);
    const char *state = akj_str (rep, "state");
    int64_t entries = akj_int (rep, "entries"), failed = akj_int (rep, "entries_failed"),
            unver = akj_int (rep, "entries_unverified");
    const char *name = akj_str (rep, "profile");
    char vendor[96] = "";
    if (akj_int (rep, "entries_vendor") > 0)
        snprintf (vendor, sizeof vendor, "; %" PRId64 " vendor entr%s, no kernel to verify",
                  akj_int (rep, "entries_vendor"), akj_int (rep, "entries_vendor") == 1 ? "y" : "ies");
    if (strcmp (state, "verified") == 0)
        printf ("verify: profile %s: verified (%" PRId64 " of %" PRId64 " entries passed; %zu of %zu host verdicts%s; batch %s)\n",
                name, entries, entries, npass, nall, vendor, akj_str (batch, "batch_id"));
    else
    if (strcmp (state, "failing") == 0)
        printf ("verify: profile %s: failing (%" PRId64 " of %" PRId64 " entries failed; %" PRId64
                " unverified; %zu of %zu host verdicts passed%s; batch %s)\n",
                name, failed, entries, unver, npass, nall, vendor, akj_str (batch, "batch_id"));
    else
        printf ("verify: profile %s: %s (%" PRId64 " of %" PRId64 " entries unverified; %zu of %zu host verdicts passed%s; batch %s)\n",
                name, *state ? state : "unverified", unver, entries, npass, nall, vendor, akj_str (batch, "batch_id"));
    return strcmp (state, "verified") == 0 ? AKCTL_EXIT_OK : AKCTL_EXIT_NEGATIVE;
}

/* Polls verify-status of batch_id until it is judged (wait) or once. */
static int s_follow (akctl_client_t *client, const char *batch_id, bool wait, bool json)
{
    char *args[1] = { (char *) batch_id };
    int misses = 0;
    for (;;) {
        json_t *a = NULL;
        int code = s_call (client, "verify-status", args, 1, &a);
        if (code == AKCTL_EXIT_UNREACHABLE && wait && ++misses < 3) {
            s_nap (S_POLL_MS);
            continue;
        }
        if (code != AKCTL_EXIT_OK)
            return code;
        misses = 0;
        const char *bstate = akj_str (akj_obj (a, "batch"), "state");
        const char *vstate = akj_str (akj_obj (a, "report"), "state");
        bool judged = *vstate != '\0';
        if (judged || strcmp (bstate, "cancelled") == 0 || !wait) {
            if (json) {
                json_dumpf (a, stdout, JSON_COMPACT);
                printf ("\n");
            }
            if (judged)
                code = json ? (strcmp (vstate, "verified") == 0 ? AKCTL_EXIT_OK : AKCTL_EXIT_NEGATIVE)
                            : s_render (a);
            else {
                const json_t *counts = akj_obj (akj_obj (a, "batch"), "counts");
                if (!json)
                    printf ("verify batch %s of profile %s: %s, %" PRId64 " of %" PRId64 " tasks finished\n",
                            batch_id, akj_str (akj_obj (a, "report"), "profile"), bstate,
                            akj_int (counts, "done") + akj_int (counts, "failed") + akj_int (counts, "poisoned")
                            + akj_int (counts, "cancelled"), akj_int (akj_obj (a, "batch"), "total"));
                code = strcmp (bstate, "cancelled") == 0 ? AKCTL_EXIT_NEGATIVE : AKCTL_EXIT_OK;
            }
            json_decref (a);
            return code;
        }
        json_decref (a);
        s_nap (S_POLL_MS);
        if (akctl_stop) {
            fprintf (stderr, "akctl: verify %s: interrupted (the verification goes on)\n", batch_id);
            return 130;
        }
    }
}

int akctl_verify (const akctl_opts_t *o)
{
    if (o->as || o->replace) {
        fprintf (stderr, "akctl: verify: --as and --replace do not apply\n");
        return AKCTL_EXIT_USAGE;
    }
    if ((o->profile != NULL) == (o->npos == 1)) {
        fprintf (stderr, "akctl: usage: akctl verify --profile NAME [--k K --floor FLOOR] [--wait] | "
                 "akctl verify BATCH [--wait]\n");
        return AKCTL_EXIT_USAGE;
    }
    if ((o->rule_k != NULL) != (o->rule_floor != NULL) || (o->rule_k && !o->profile)) {
        fprintf (stderr, "akctl: verify: --k and --floor go together, with --profile\n");
        return AKCTL_EXIT_USAGE;
    }
    int ccode = 0;
    akctl_client_t *client = akctl_client_for (o, &ccode);
    if (!client)
        return ccode;
    int code = AKCTL_EXIT_OK;
    char *batch_id = NULL;
    if (o->profile) {
        char *args[3] = { (char *) o->profile, (char *) o->rule_k, (char *) o->rule_floor };
        json_t *a = NULL;
        code = s_call (client, "verify", args, o->rule_k ? 3 : 1, &a);
        if (code == AKCTL_EXIT_OK) {
            batch_id = strdup (akj_str (a, "batch_id"));
            if (!o->wait) {
                if (o->json) {
                    json_dumpf (a, stdout, JSON_COMPACT);
                    printf ("\n");
                }
                else
                    printf ("verify batch %s of profile %s: %" PRId64 " tasks, %" PRId64
                            " entries without a live worker, %" PRId64 " vendor entries (no kernel to verify)"
                            " (akctl verify %s --wait follows it)\n",
                            batch_id, o->profile, akj_int (a, "tasks"), akj_int (a, "unverified"),
                            akj_int (a, "vendor"), batch_id);
            }
        }
        json_decref (a);
    }
    else
        batch_id = strdup (o->pos[0]);
    if (code == AKCTL_EXIT_OK && (o->wait || !o->profile)) {
        akctl_catch_signals ();
        code = s_follow (client, batch_id, o->wait, o->json);
    }
    free (batch_id);
    akctl_client_destroy (&client);
    return code;
}
