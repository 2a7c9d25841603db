/*  ops/akctl/keys.c: `akctl keys new|list`: CurveZMQ certificates for a
    fleet (common/auth.h, docs/operations.md).  Works on files only; never
    talks to a coordinator. */
#include "akctl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "auth.h"
#include "util.h"

static int s_keys_new (const akctl_opts_t *o)
{
    if (o->npos != 2) {
        fprintf (stderr, "akctl keys new: give one NAME (akctl keys --help)\n");
        return AKCTL_EXIT_USAGE;
    }
    ak_role_t role = ak_role_parse (o->role);
    if (role == AK_ROLE_NONE) {
        fprintf (stderr, "akctl keys new: --role must be worker, operator, viewer or server, not '%s'\n",
                 o->role ? o->role : "");
        return AKCTL_EXIT_USAGE;
    }
    ak_err_t err = { 0, "" };
    char *file = NULL;
    int rc = ak_keys_new (o->dir, o->pos[1], role, &file, &err);
    if (rc) {
        fprintf (stderr, "akctl keys new: %s\n", err.msg);
        return rc == AK_EEXIST ? AKCTL_EXIT_NEGATIVE : AKCTL_EXIT_USAGE;
    }
    char z85[AK_KEY_Z85_LEN + 1];
    rc = ak_auth_public_key (file, z85, &err);
    if (o->json)
        printf ("{\"name\":\"%s\",\"role\":\"%s\",\"public\":\"%s\",\"secret\":\"%s_secret\",\"key\":\"%s\"}\n",
                o->pos[1], ak_role_name (role), file, file, rc ? "" : z85);
    else
        printf ("%s key %s: public %s, secret %s_secret (mode 0600)\n  public key %s\n",
                ak_role_name (role), o->pos[1], file, file, rc ? "?" : z85);
    free (file);
    return rc ? AKCTL_EXIT_NEGATIVE : AKCTL_EXIT_OK;
}

static int s_keys_list (const akctl_opts_t *o)
{
    if (o->npos != 1) {
        fprintf (stderr, "akctl keys list: takes no arguments besides --dir DIR\n");
        return AKCTL_EXIT_USAGE;
    }
    ak_err_t err = { 0, "" };
    ak_keyring_t *ring = NULL;
    if (ak_keyring_load (o->dir, &ring, &err)) {
        fprintf (stderr, "akctl keys list: %s\n", err.msg);
        return AKCTL_EXIT_USAGE;
    }
    size_t n = ak_keyring_size (ring);
    if (o->json)
        printf ("{\"keys\":[");
    else
        printf ("%-9s %-24s %-40s %s\n", "ROLE", "NAME", "PUBLIC KEY", "FILE");
    for (size_t i = 0; i < n; i++) {
        const ak_key_t *k = ak_keyring_at (ring, i);
        if (o->json)
            printf ("%s{\"role\":\"%s\",\"name\":\"%s\",\"key\":\"%s\",\"file\":\"%s\"}", i ? "," : "",
                    ak_role_name (k->role), k->name, k->key, k->file);
        else
            printf ("%-9s %-24s %-40s %s\n", ak_role_name (k->role), k->name, k->key, k->file);
    }
    if (o->json)
        printf ("]}\n");
    else if (n == 0)
        printf ("(no keys under %s/{worker,operator,viewer})\n", o->dir);
    ak_keyring_destroy (&ring);
    return AKCTL_EXIT_OK;
}

int akctl_keys (const akctl_opts_t *o)
{
    if (!o->dir) {
        fprintf (stderr, "akctl keys: --dir DIR is required\n");
        return AKCTL_EXIT_USAGE;
    }
    if (strcmp (o->pos[0], "new") == 0)
        return s_keys_new (o);
    if (strcmp (o->pos[0], "list") == 0)
        return s_keys_list (o);
    fprintf (stderr, "akctl keys: '%s' is not new or list\n", o->pos[0]);
    return AKCTL_EXIT_USAGE;
}
