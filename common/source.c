/*  common/source.c: kernel sources, confined paths (source.h). */
#include "source.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "digest.h"
#include "jpath.h"
#include "util.h"

#define S_MAX_SRC_NAME 255

/*  Relative, no ".." component: a spec's sources stay inside its directory. */
static int s_confined_path (const char *rel, const char *label, const char *path, ak_err_t *err)
{
    if (rel[0] == '/')
        return ak_jpath_bad (err, label, path, "must be a path relative to the spec's directory, "
                             "not an absolute path");
    for (const char *p = rel; *p; ) {
        const char *slash = strchr (p, '/');
        size_t n = slash ? (size_t) (slash - p) : strlen (p);
        if (n == 2 && p[0] == '.' && p[1] == '.')
            return ak_jpath_bad (err, label, path, "must stay inside the spec's directory "
                                 "(no '..' component)");
        p += n;
        if (*p == '/')
            p++;
    }
    return 0;
}

/*  A confined path must also stay inside base_dir once symbolic links are
    followed: "kernel.c -> ~/.ssh/id_rsa" would otherwise ship that file to
    every worker of the fleet.  full is base_dir/rel. */
static int s_confined_real (const char *base_dir, const char *full, const char *rel, const char *label,
                            const char *path, ak_err_t *err)
{
    char *base = realpath (base_dir, NULL), *real = realpath (full, NULL);
    int rc = 0;
    if (base && real) {
        size_t n = strlen (base);
        bool inside = strncmp (real, base, n) == 0 && (real[n] == '/' || (n == 1 && base[0] == '/'));
        if (!inside)
            rc = ak_jpath_bad (err, label, path, "'%.200s' leaves the spec's directory through a "
                               "symbolic link (it resolves to %.300s)", rel, real);
    }
    /* a path that does not resolve is left to the read, which names it */
    free (base);
    free (real);
    return rc;
}

/*  Source text must be non-empty, NUL-free UTF-8 (it travels in JSON). */
static int s_text_ok (const char *text, size_t len, const char *label, const char *path,
                      ak_err_t *err)
{
    if (len == 0)
        return ak_jpath_bad (err, label, path, "source is empty");
    if (len > AK_MAX_SOURCE_BYTES)
        return ak_jpath_fail (err, AK_ETOOBIG, label, path, "source is %zu bytes, limit %u",
                              len, AK_MAX_SOURCE_BYTES);
    if (strlen (text) != len)
        return ak_jpath_bad (err, label, path, "source contains a NUL byte");
    json_t *probe = json_stringn (text, len);
    if (!probe)
        return ak_jpath_bad (err, label, path, "source is not valid UTF-8");
    json_decref (probe);
    return 0;
}

/*  A source: a file path (read relative to base_dir; confined: inside it) or
    an inline object {"name", "text"} or {"name", "digest"} (the form without
    sources that workers receive: text stays NULL).  base_dir NULL: inline
    only (bundles name no files). */
int ak_source_parse (json_t *v, const char *label, const char *path, const char *base_dir,
                     bool confined, ak_source_t *src, ak_err_t *err)
{
    static const char *const fields[] = { "name", "text", "digest", NULL };
    char p[AK_JPATH_MAX];
    int rc;

    if (json_is_string (v)) {
        const char *rel;
        rc = ak_jpath_str (v, label, path, &rel, err);
        if (rc)
            return rc;
        if (!base_dir)
            return ak_jpath_bad (err, label, path, "must be an inline source {\"name\", \"text\"}: "
                                 "a bundle names no files");
        if (!*rel || strlen (rel) > 4095)
            return ak_jpath_bad (err, label, path, "must be a file path");
        if (confined && (rc = s_confined_path (rel, label, path, err)) != 0)
            return rc;
        char *full = ak_path_join (base_dir, rel);
        if (confined && (rc = s_confined_real (base_dir, full, rel, label, path, err)) != 0) {
            free (full);
            return rc;
        }
        char *text = NULL;
        size_t len = 0;
        ak_err_t sub = { 0 };
        rc = ak_file_read (full, AK_MAX_SOURCE_BYTES, &text, &len, &sub);
        free (full);
        if (rc)
            return ak_jpath_fail (err, rc, label, path, "cannot read source: %s", sub.msg);
        rc = s_text_ok (text, len, label, path, err);
        if (rc) {
            free (text);
            return rc;
        }
        /* A confined path is the source's name; one that may leave the
           directory (a manifest's extra candidate) is named by its last
           component, so no path of the submitting host travels on. */
        const char *base = strrchr (rel, '/');
        src->name = ak_strdup (confined || !base ? rel : base + 1);
        src->text = text;
        return ak_sha256_hex (text, len, src->digest);
    }
    if (!json_is_object (v))
        return ak_jpath_bad (err, label, path, "must be a file path or an inline source object");
    rc = ak_jpath_only (v, fields, label, path, err);
    if (rc)
        return rc;
    const char *name, *text, *digest;
    if ((rc = ak_jpath_get_str (v, "name", true, label, path, &name, err)) != 0
     || (rc = ak_jpath_get_str (v, "text", false, label, path, &text, err)) != 0
     || (rc = ak_jpath_get_str (v, "digest", false, label, path, &digest, err)) != 0)
        return rc;
    if (!*name || strlen (name) > S_MAX_SRC_NAME)
        return ak_jpath_bad (err, label, ak_jpath_field (p, path, "name"),
                             "must be 1 to %d characters", S_MAX_SRC_NAME);
    for (const char *c = name; *c; c++)
        if ((unsigned char) *c < 0x20 || *c == 0x7f)
            return ak_jpath_bad (err, label, ak_jpath_field (p, path, "name"),
                                 "must not contain control characters");
    if (digest && !ak_digest_valid (digest))
        return ak_jpath_bad (err, label, ak_jpath_field (p, path, "digest"),
                             "must be 64 lower-case hex characters (sha256)");
    if (text) {
        size_t len = strlen (text);
        rc = s_text_ok (text, len, label, ak_jpath_field (p, path, "text"), err);
        if (rc)
            return rc;
        rc = ak_sha256_hex (text, len, src->digest);
        if (rc)
            return ak_err_set (err, rc, "%s: %s: sha256 failed", label, path);
        if (digest && strcmp (digest, src->digest) != 0)
            return ak_jpath_bad (err, label, ak_jpath_field (p, path, "digest"),
                                 "does not match the text (its sha256 is %s)", src->digest);
        src->text = ak_strdup (text);
    }
    else if (digest)
        memcpy (src->digest, digest, AK_DIGEST_HEX_LEN + 1);
    else
        return ak_jpath_bad (err, label, ak_jpath_field (p, path, "text"), "missing");
    src->name = ak_strdup (name);
    return 0;
}

json_t *ak_source_to_json (const ak_source_t *src, bool with_text)
{
    json_t *o = json_object ();
    json_object_set_new (o, "name", json_string (src->name ? src->name : ""));
    if (with_text && src->text)
        json_object_set_new (o, "text", json_stringn (src->text, strlen (src->text)));
    else
        json_object_set_new (o, "digest", json_string (src->digest));
    return o;
}

void ak_source_clear (ak_source_t *src)
{
    free (src->name);
    free (src->text);
    src->name = src->text = NULL;
}
