/*  ops/akctl/external.c: external operators on the command line and the
    built-in name check (docs/formats.md, "External operators").

    `akctl submit --op DIR [--op DIR ...]` writes a one-off manifest naming
    DIR/spec.json by absolute path and loads it through the same loader a
    batch file goes through (akctl_load_bundle): nothing here knows an
    operator, and no table lists them.  The catalog of built-in operators is
    the kernels/ folder found the way `akctl demo` finds its batch; an
    operator with a built-in's name is refused unless overridden. */
#include "akctl.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "corpus.h"
#include "datadir.h"
#include "spec.h"
#include "util.h"

#define S_DEFAULT_TARGET "host"

char *akctl_catalog_dir (void)
{
    return ak_datadir_find ("kernels", NULL, R_OK | X_OK, NULL);
}

/*  The workloads array of --workloads a,b,c (size names, or names the
    loader rejects with its own message). */
static json_t *s_workloads (const char *list)
{
    json_t *arr = json_array ();
    char *copy = ak_strdup (list), *save = NULL;
    for (char *tok = strtok_r (copy, ",", &save); tok; tok = strtok_r (NULL, ",", &save))
        if (*tok)
            json_array_append_new (arr, json_string (tok));
    free (copy);
    return arr;
}

int akctl_external_manifest (const akctl_opts_t *o, char **path_p)
{
    *path_p = NULL;
    const char *target = o->target ? o->target : S_DEFAULT_TARGET;
    json_t *ops = json_array ();
    char name[AK_MAX_NAME + 16] = "external";
    for (int i = 0; i < o->nops; i++) {
        char *spec = ak_sprintf ("%s/spec.json", o->ops[i]);
        char *abs = realpath (spec, NULL);
        if (!abs) {
            fprintf (stderr, "akctl: submit --op %s: no readable %s\n", o->ops[i], spec);
            free (spec);
            json_decref (ops);
            return AKCTL_EXIT_USAGE;
        }
        free (spec);
        json_t *op = json_pack ("{s:s}", "spec", abs);
        free (abs);
        if (o->workloads)
            json_object_set_new (op, "workloads", s_workloads (o->workloads));
        if (o->override_builtin)
            json_object_set_new (op, "override_builtin", json_true ());
        json_array_append_new (ops, op);
    }
    json_t *root = json_pack ("{s:i, s:s, s:[s], s:o}", "schema_version",
                              AK_MANIFEST_SCHEMA_VERSION, "name", name, "targets", target,
                              "ops", ops);
    char *dir = getenv ("TMPDIR") && *getenv ("TMPDIR") ? ak_strdup (getenv ("TMPDIR"))
                                                        : ak_strdup ("/tmp");
    char *path = ak_sprintf ("%s/akctl-ops-XXXXXX.json", dir);
    free (dir);
    int fd = mkstemps (path, 5);
    int rc = fd < 0 ? -1 : json_dumpfd (root, fd, JSON_INDENT (2));
    if (fd >= 0)
        close (fd);
    json_decref (root);
    if (rc != 0) {
        fprintf (stderr, "akctl: submit --op: cannot write the one-off manifest %s\n", path);
        if (fd >= 0)
            unlink (path);
        free (path);
        return AKCTL_EXIT_USAGE;
    }
    *path_p = path;
    return AKCTL_EXIT_OK;
}

int akctl_check_builtins (ak_manifest_t *manifest, const char *label)
{
    char *catalog = akctl_catalog_dir ();
    ak_err_t err = { 0, "" };
    int rc = ak_catalog_check (manifest, label, catalog, &err);
    free (catalog);
    if (rc) {
        fprintf (stderr, "akctl: %s\n", err.msg);
        return AKCTL_EXIT_USAGE;
    }
    return AKCTL_EXIT_OK;
}
