/*  ops/akctl/submit.c: `akctl submit`, and the loading and sending of a
    manifest that demo shares with it. */
#include "akctl.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "names.h"
#include "util.h"

int akctl_load_bundle (const char *path, const char *target, char **bundle_p, char ***pairs_p,
                       int *npairs_p)
{
    ak_manifest_t *manifest = NULL;
    ak_err_t err = { 0, "" };
    if (target && !ak_name_class_ok (target)) {
        fprintf (stderr, "akctl: --target '%.200s': a device class must match [A-Za-z0-9_./-]+ (at most %d "
                 "characters)\n", target, AK_MAX_NAME - 1);
        return AKCTL_EXIT_USAGE;
    }
    int rc = ak_manifest_load_for (path, target, &manifest, &err);
    if (rc != 0) {
        /* The loader's message names the file and the field: print it as is. */
        fprintf (stderr, "akctl: %s\n", err.msg[0] ? err.msg : ak_strerror (rc));
        return AKCTL_EXIT_USAGE;
    }
    if (akctl_check_builtins (manifest, path) != AKCTL_EXIT_OK) {
        ak_manifest_destroy (&manifest);
        return AKCTL_EXIT_USAGE;
    }
    *bundle_p = ak_manifest_to_bundle (manifest);
    if (!*bundle_p) {
        fprintf (stderr, "akctl: %s: cannot build the bundle to send\n", path);
        ak_manifest_destroy (&manifest);
        return AKCTL_EXIT_USAGE;
    }
    if (pairs_p) {
        int n = (int) (manifest->nops * manifest->ntargets);
        char **pairs = ak_calloc ((size_t) n + 1, sizeof (char *));
        int k = 0;
        for (size_t i = 0; i < manifest->nops; i++)
            for (size_t j = 0; j < manifest->ntargets; j++)
                pairs[k++] = ak_sprintf ("%s@%s", manifest->ops[i].spec->name, manifest->targets[j]);
        *pairs_p = pairs;
        *npairs_p = n;
    }
    ak_manifest_destroy (&manifest);
    return AKCTL_EXIT_OK;
}

int akctl_submit_bundle (akctl_client_t *client, const char *bundle, bool allow_unserved, bool json,
                         bool quiet, char **batch_id_p, int64_t *tasks_p)
{
    akctl_reply_t reply;
    ak_err_t err = { 0, "" };
    *batch_id_p = NULL;
    char *allow[1] = { "allow-unserved" };
    int rc = akctl_client_call (client, "submit", allow_unserved ? allow : NULL, allow_unserved ? 1 : 0,
                                bundle, &reply, &err);
    int code = akctl_call_exit (rc, &reply, &err);
    if (code == AKCTL_EXIT_OK) {
        json_t *answer = akctl_parse_json (reply.json, "submit");
        const char *id = akj_str (answer, "batch_id");
        if (!*id) {
            fprintf (stderr, "akctl: submit: the coordinator's answer has no batch_id: %s\n", reply.json);
            code = AKCTL_EXIT_NEGATIVE;
        }
        else {
            *batch_id_p = ak_strdup (id);
            if (tasks_p)
                *tasks_p = akj_int (answer, "tasks");
            const json_t *unserved = akj_arr (answer, "unserved");
            size_t i;
            json_t *cls;
            json_array_foreach (unserved, i, cls)
                fprintf (stderr, "akctl: warning: batch %s: no worker has ever announced class %s; "
                         "its tasks wait until one registers\n", id,
                         json_is_string (cls) ? json_string_value (cls) : "?");
            if (json)
                printf ("%s\n", reply.json);
            else
            if (!quiet) {
                printf ("%s\n", id);
                if (isatty (STDERR_FILENO))
                    fprintf (stderr, "submitted batch %s: %" PRId64 " tasks\n", id,
                             akj_int (answer, "tasks"));
            }
            fflush (stdout);
        }
        json_decref (answer);
    }
    akctl_reply_free (&reply);
    return code;
}

int akctl_verb_submit (const akctl_opts_t *o)
{
    char *bundle = NULL, *batch_id = NULL, *oneoff = NULL;
    int code = AKCTL_EXIT_OK;
    /* FILE, or external operators by directory (ops/akctl/external.c) */
    if ((o->npos > 0) == (o->nops > 0) || (o->npos > 0 && (o->workloads || o->override_builtin))) {
        fprintf (stderr, "akctl: submit: give a manifest FILE (with --target) or --op DIR (with --workloads, "
                 "--target, --override-builtin), not %s\n(akctl submit --help says more)\n",
                 o->npos ? "both" : "neither");
        return AKCTL_EXIT_USAGE;
    }
    if (o->nops)
        code = akctl_external_manifest (o, &oneoff);
    /* FILE --target CLASS: the manifest's targets replaced (the one-off
       manifest of --op has it already) */
    if (code == AKCTL_EXIT_OK)
        code = akctl_load_bundle (oneoff ? oneoff : o->pos[0], oneoff ? NULL : o->target, &bundle, NULL,
                                  NULL);
    if (oneoff && code != AKCTL_EXIT_OK)
        fprintf (stderr, "akctl: (%s is the one-off manifest of submit --op; ops[i] is the "
                 "i-th --op)\n", oneoff);
    if (oneoff)
        unlink (oneoff);
    free (oneoff);
    if (code != AKCTL_EXIT_OK)
        return code;
    akctl_client_t *client = akctl_client_for (o, &code);
    if (client) {
        code = akctl_submit_bundle (client, bundle, o->allow_unserved, o->json, false, &batch_id, NULL);
        if (code == AKCTL_EXIT_OK && o->wait) {
            akctl_catch_signals ();
            code = akctl_watch (client, batch_id, o->json, &akctl_stop, NULL, NULL, NULL);
        }
    }
    free (batch_id);
    free (bundle);
    akctl_client_destroy (&client);
    return code;
}
