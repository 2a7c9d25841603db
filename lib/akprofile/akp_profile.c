/*  lib/akprofile/akp_profile.c: package verification, loading and lookups
    (see akprofile.h, docs/profiles.md). */
#include "akprofile.h"
#include "akp_private.h"
#include "tmap.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <sodium.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define S_SUMS        "SHA256SUMS"
#define S_MAX_FILE    (64u << 20)     /* profile.json and sources */
#define S_MAX_FILES   100000
#define S_MAX_DEPTH   4

typedef struct {
    char         *device_class, *backend, *device_name, *nvrtc_version;
    int           cc_major, cc_minor, driver_major;
    akp_kernel_t *entries;
    size_t        nentries;
    char        **unsupported;  /* per entry: why this library does not apply it, or NULL */
} s_class_t;

struct akp_profile {
    char      *name;
    json_t    *json;            /* profile.json: every string of an entry points into it */
    char     **texts;           /* sources read from disk, owned */
    size_t     ntexts;
    s_class_t *classes;
    size_t     nclasses;
};

int akp_errf (char *err, size_t len, int code, const char *fmt, ...)
{
    if (err && len) {
        va_list ap;
        va_start (ap, fmt);
        vsnprintf (err, len, fmt, ap);
        va_end (ap);
    }
    return code;
}

static void s_hex (const unsigned char *d, char hex[65])
{
    static const char digits[] = "0123456789abcdef";
    for (int i = 0; i < 32; i++) {
        hex[2 * i] = digits[d[i] >> 4];
        hex[2 * i + 1] = digits[d[i] & 15];
    }
    hex[64] = '\0';
}

static void s_sha256 (const void *data, size_t len, char hex[65])
{
    unsigned char d[crypto_hash_sha256_BYTES];
    crypto_hash_sha256 (d, data, len);
    s_hex (d, hex);
}

static bool s_is_hex64 (const char *s, size_t n)
{
    if (n != 64)
        return false;
    for (size_t i = 0; i < n; i++)
        if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
            return false;
    return true;
}

/* A package path: relative, [A-Za-z0-9_.-] components joined by '/', none
   empty, "." or "..". */
static bool s_path_ok (const char *p)
{
    size_t n = strlen (p);
    if (n == 0 || n > 255 || p[0] == '/')
        return false;
    const char *c = p;
    while (*c) {
        size_t k = strcspn (c, "/");
        if (k == 0 || (k == 1 && c[0] == '.') || (k == 2 && c[0] == '.' && c[1] == '.'))
            return false;
        for (size_t i = 0; i < k; i++) {
            char ch = c[i];
            if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9')
                  || ch == '_' || ch == '.' || ch == '-'))
                return false;
        }
        c += k;
        if (*c == '/') {
            c++;
            if (!*c)
                return false;
        }
    }
    return true;
}

/* Reads a regular file (no links: O_NOFOLLOW) of at most S_MAX_FILE bytes. */
static int s_read (const char *path, char **data_p, size_t *len_p, char *err, size_t errlen)
{
    int fd = open (path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return akp_errf (err, errlen, errno == ENOENT ? AKP_ETAMPERED : AKP_EIO, "%s: %s", path, strerror (errno));
    struct stat st;
    if (fstat (fd, &st) != 0 || !S_ISREG (st.st_mode) || (uint64_t) st.st_size > S_MAX_FILE) {
        close (fd);
        return akp_errf (err, errlen, AKP_ETAMPERED, "%s: not a regular file of at most %u bytes", path, S_MAX_FILE);
    }
    size_t len = (size_t) st.st_size, got = 0;
    char *buf = malloc (len + 1);
    if (!buf) {
        close (fd);
        return akp_errf (err, errlen, AKP_EIO, "%s: out of memory", path);
    }
    while (got < len) {
        ssize_t r = read (fd, buf + got, len - got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0) {
            free (buf);
            close (fd);
            return akp_errf (err, errlen, AKP_EIO, "%s: read failed", path);
        }
        got += (size_t) r;
    }
    close (fd);
    buf[len] = '\0';
    *data_p = buf;
    *len_p = len;
    return AKP_OK;
}

// ------------------------------------------------------------ verification

typedef struct {
    char  **paths;
    char  (*digests)[65];
    bool   *seen;
    size_t  n, cap;
} s_sums_t;

static void s_sums_free (s_sums_t *s)
{
    for (size_t i = 0; i < s->n; i++)
        free (s->paths[i]);
    free (s->paths);
    free (s->digests);
    free (s->seen);
    memset (s, 0, sizeof *s);
}

static int s_sums_parse (const char *text, size_t len, s_sums_t *s, char *err, size_t errlen)
{
    const char *p = text, *end = text + len;
    int line = 0;
    while (p < end) {
        const char *nl = memchr (p, '\n', (size_t) (end - p));
        size_t ll = nl ? (size_t) (nl - p) : (size_t) (end - p);
        line++;
        if (ll > 0) {
            /* "<64 hex>  <path>" (sha256sum's text form) */
            if (ll < 67 || !s_is_hex64 (p, 64) || p[64] != ' ' || p[65] != ' ')
                return akp_errf (err, errlen, AKP_ETAMPERED, S_SUMS ": line %d: not '<sha256>  <path>'", line);
            char path[256];
            size_t pl = ll - 66;
            if (pl >= sizeof path)
                return akp_errf (err, errlen, AKP_ETAMPERED, S_SUMS ": line %d: path too long", line);
            memcpy (path, p + 66, pl);
            path[pl] = '\0';
            if (!s_path_ok (path) || strcmp (path, S_SUMS) == 0)
                return akp_errf (err, errlen, AKP_ETAMPERED,
                              S_SUMS ": line %d: path '%s' is not a plain relative path inside the package",
                              line, path);
            for (size_t i = 0; i < s->n; i++)
                if (strcmp (s->paths[i], path) == 0)
                    return akp_errf (err, errlen, AKP_ETAMPERED, S_SUMS ": line %d: '%s' listed twice", line, path);
            if (s->n == S_MAX_FILES)
                return akp_errf (err, errlen, AKP_ETAMPERED, S_SUMS ": more than %d files", S_MAX_FILES);
            if (s->n == s->cap) {
                s->cap = s->cap ? s->cap * 2 : 16;
                s->paths = realloc (s->paths, s->cap * sizeof *s->paths);
                s->digests = realloc (s->digests, s->cap * sizeof *s->digests);
                s->seen = realloc (s->seen, s->cap * sizeof *s->seen);
                if (!s->paths || !s->digests || !s->seen)
                    abort ();
            }
            s->paths[s->n] = strdup (path);
            memcpy (s->digests[s->n], p, 64);
            s->digests[s->n][64] = '\0';
            s->seen[s->n] = false;
            s->n++;
        }
        p += ll + 1;
    }
    return AKP_OK;
}

/* Every file under dir/rel must be listed and match; marks it seen. */
static int s_walk (const char *dir, const char *rel, int depth, s_sums_t *s, char *err, size_t errlen)
{
    char path[4096];
    snprintf (path, sizeof path, "%s%s%s", dir, *rel ? "/" : "", rel);
    DIR *d = opendir (path);
    if (!d)
        return akp_errf (err, errlen, AKP_EIO, "%s: %s", path, strerror (errno));
    int rc = AKP_OK;
    struct dirent *de;
    while (rc == AKP_OK && (de = readdir (d))) {
        if (strcmp (de->d_name, ".") == 0 || strcmp (de->d_name, "..") == 0)
            continue;
        char sub[1024], full[4096];
        snprintf (sub, sizeof sub, "%s%s%s", rel, *rel ? "/" : "", de->d_name);
        snprintf (full, sizeof full, "%s/%s", dir, sub);
        struct stat st;
        if (lstat (full, &st) != 0) {
            rc = akp_errf (err, errlen, AKP_EIO, "%s: %s", full, strerror (errno));
            break;
        }
        if (S_ISDIR (st.st_mode)) {
            if (depth >= S_MAX_DEPTH)
                rc = akp_errf (err, errlen, AKP_ETAMPERED, "%s: folders nested too deep", sub);
            else
                rc = s_walk (dir, sub, depth + 1, s, err, errlen);
            continue;
        }
        if (!S_ISREG (st.st_mode)) {
            rc = akp_errf (err, errlen, AKP_ETAMPERED, "%s: not a regular file (a link or a device): refused", sub);
            break;
        }
        if (!*rel && strcmp (de->d_name, S_SUMS) == 0)
            continue;
        size_t i = 0;
        while (i < s->n && strcmp (s->paths[i], sub) != 0)
            i++;
        if (i == s->n) {
            rc = akp_errf (err, errlen, AKP_ETAMPERED, "%s: extra file, not in " S_SUMS, sub);
            break;
        }
        char *data = NULL;
        size_t len = 0;
        rc = s_read (full, &data, &len, err, errlen);
        if (rc)
            break;
        char hex[65];
        s_sha256 (data, len, hex);
        free (data);
        if (strcmp (hex, s->digests[i]) != 0)
            rc = akp_errf (err, errlen, AKP_ETAMPERED, "%s: modified (sha256 %s, " S_SUMS " says %s)", sub, hex,
                        s->digests[i]);
        s->seen[i] = true;
    }
    closedir (d);
    return rc;
}

static int s_verify (const char *dir, s_sums_t *sums, char *err, size_t errlen)
{
    if (!dir || !*dir)
        return akp_errf (err, errlen, AKP_EINVAL, "no package directory given");
    if (sodium_init () < 0)
        return akp_errf (err, errlen, AKP_EIO, "libsodium failed to initialise");
    char path[4096], *text = NULL;
    size_t len = 0;
    snprintf (path, sizeof path, "%s/" S_SUMS, dir);
    int rc = s_read (path, &text, &len, err, errlen);
    if (rc == AKP_ETAMPERED)
        return akp_errf (err, errlen, AKP_ETAMPERED, "%s: missing: not a profile package", path);
    if (rc)
        return rc;
    rc = s_sums_parse (text, len, sums, err, errlen);
    free (text);
    if (rc == AKP_OK)
        rc = s_walk (dir, "", 0, sums, err, errlen);
    for (size_t i = 0; rc == AKP_OK && i < sums->n; i++)
        if (!sums->seen[i])
            rc = akp_errf (err, errlen, AKP_ETAMPERED, "%s: listed in " S_SUMS " but missing", sums->paths[i]);
    bool has_profile = false;
    for (size_t i = 0; i < sums->n; i++)
        has_profile |= strcmp (sums->paths[i], "profile.json") == 0;
    if (rc == AKP_OK && !has_profile)
        rc = akp_errf (err, errlen, AKP_ETAMPERED, "profile.json: missing from " S_SUMS);
    return rc;
}

int akp_verify (const char *dir, char *err, size_t errlen)
{
    s_sums_t sums = { 0 };
    int rc = s_verify (dir, &sums, err, errlen);
    s_sums_free (&sums);
    return rc;
}

// ----------------------------------------------------------------- loading

static const char *s_str (const json_t *o, const char *k)
{
    const char *s = json_string_value (json_object_get (o, k));
    return s ? s : "";
}

/* The text of package file `file` whose digest must be `digest`. */
static int s_source (akp_profile_t *p, const char *dir, const s_sums_t *sums, const json_t *ref,
                     const char *at, const char **text, size_t *len, char *err, size_t errlen)
{
    const char *file = s_str (ref, "file"), *digest = s_str (ref, "digest");
    if (!s_is_hex64 (digest, strlen (digest)) || !s_path_ok (file) || strncmp (file, "sources/", 8) != 0
        || strncmp (file + 8, digest, 64) != 0)
        return akp_errf (err, errlen, AKP_EINVAL, "profile.json: %s: needs a digest and file sources/<digest>.*", at);
    size_t i = 0;
    while (i < sums->n && strcmp (sums->paths[i], file) != 0)
        i++;
    if (i == sums->n || strcmp (sums->digests[i], digest) != 0)
        return akp_errf (err, errlen, AKP_ETAMPERED, "profile.json: %s: %s is not in the package under its digest", at, file);
    for (size_t t = 0; t < p->ntexts; t++) {
        char hex[65];
        s_sha256 (p->texts[t], strlen (p->texts[t]), hex);
        if (strcmp (hex, digest) == 0) {
            *text = p->texts[t];
            *len = strlen (p->texts[t]);
            return AKP_OK;
        }
    }
    char path[4096], *data = NULL;
    size_t n = 0;
    snprintf (path, sizeof path, "%s/%s", dir, file);
    int rc = s_read (path, &data, &n, err, errlen);
    if (rc)
        return rc;
    char hex[65];
    s_sha256 (data, n, hex);
    if (strcmp (hex, digest) != 0 || strlen (data) != n) {
        free (data);
        return akp_errf (err, errlen, AKP_ETAMPERED, "%s: changed while loading", file);
    }
    p->texts = realloc (p->texts, (p->ntexts + 1) * sizeof *p->texts);
    if (!p->texts)
        abort ();
    p->texts[p->ntexts++] = data;
    *text = data;
    *len = n;
    return AKP_OK;
}

/*  A vendor entry's own fields (k's common ones are read): the library,
    its op and the reason as non-empty strings, the library's time a
    number, and nothing of a kernel. */
static int s_vendor (const json_t *j, akp_kernel_t *k, const char *at, char *err, size_t errlen)
{
    static const char *const strs[] = { "vendor", "vendor_op", "reason" };
    for (size_t i = 0; i < sizeof strs / sizeof strs[0]; i++)
        if (!*s_str (j, strs[i]))
            return akp_errf (err, errlen, AKP_EINVAL, "profile.json: %s.%s: a vendor entry needs a non-empty string",
                             at, strs[i]);
    static const char *const kernel[] = { "entry", "source", "prelude", "launch", "arch" };
    for (size_t i = 0; i < sizeof kernel / sizeof kernel[0]; i++) {
        const json_t *v = json_object_get (j, kernel[i]);
        if (v && !json_is_null (v))
            return akp_errf (err, errlen, AKP_EINVAL, "profile.json: %s.%s: a vendor entry has no kernel", at, kernel[i]);
    }
    if (strcmp (k->backend, "cuda") != 0)
        return akp_errf (err, errlen, AKP_EINVAL, "profile.json: %s.backend: a vendor entry is a cuda library call", at);
    const json_t *b = json_object_get (j, "baseline_us");
    if (!json_is_number (b) || !(json_number_value (b) >= 0))
        return akp_errf (err, errlen, AKP_EINVAL, "profile.json: %s.baseline_us: must be a non-negative number", at);
    k->vendor = s_str (j, "vendor");
    k->vendor_op = s_str (j, "vendor_op");
    k->reason = s_str (j, "reason");
    k->baseline_us = json_number_value (b);
    return AKP_OK;
}

_Static_assert (AKP_MAX_RANK == AK_TMAP_MAX_RANK, "akp_tmap_t and ak_tmap_cfg_t hold the same ranks");

/*  launch.maps of a kernel entry (absent: none recorded) into k, after its
    buffers: read and checked by common/tmap_json.c (the coordinator's
    form, common/tmap.h's rules against the entry's buffer), so what
    akp_launch encodes never reaches past it. */
static int s_tmaps (const json_t *arr, akp_kernel_t *k, const char *at, char *err, size_t errlen)
{
    if (!arr || json_is_null (arr))
        return AKP_OK;
    if (!json_is_array (arr) || json_array_size (arr) > AKP_MAX_TMAPS)
        return akp_errf (err, errlen, AKP_EINVAL, "profile.json: %s.launch.maps: an array of at most %d maps", at,
                         AKP_MAX_TMAPS);
    uint32_t esz = strcmp (k->dtype, "float32") == 0 ? 4 : strcmp (k->dtype, "float16") == 0
                   || strcmp (k->dtype, "bfloat16") == 0 ? 2 : 99;
    for (size_t i = 0; i < json_array_size (arr); i++) {
        const json_t *j = json_array_get (arr, i);
        ak_tmap_cfg_t cfg;
        ak_err_t e = { 0 };
        if (ak_tmap_from_json (j, k->input_counts, k->ninputs, k->output_counts, k->noutputs, esz, &cfg, &e) != 0)
            return akp_errf (err, errlen, AKP_EINVAL, "profile.json: %s.launch.maps[%zu]: %s", at, i, e.msg);
        akp_tmap_t *m = &k->tmaps[i];
        m->name = s_str (j, "name");          /* the profile's string: lives as long as it */
        m->output = cfg.output;
        m->index = (unsigned) cfg.buf;
        m->rank = cfg.rank;
        m->elem_bytes = cfg.elem_bytes;
        m->swizzle = (unsigned) cfg.swizzle;
        m->l2 = (unsigned) cfg.l2;
        m->oob = (unsigned) cfg.oob;
        m->absent = cfg.absent;
        memcpy (m->dims, cfg.dims, sizeof m->dims);
        memcpy (m->strides, cfg.strides, sizeof m->strides);
        memcpy (m->box, cfg.box, sizeof m->box);
    }
    k->ntmaps = json_array_size (arr);
    return AKP_OK;
}

static int s_entry (akp_profile_t *p, const char *dir, const s_sums_t *sums, const json_t *j,
                    akp_kernel_t *k, const char *at, char *err, size_t errlen)
{
    /* "kind" absent: a kernel (profiles made before kinds) */
    const json_t *kind = json_object_get (j, "kind");
    k->kind = kind ? json_string_value (kind) : "kernel";
    if (!k->kind || (strcmp (k->kind, "kernel") != 0 && strcmp (k->kind, "vendor") != 0))
        return akp_errf (err, errlen, AKP_EINVAL, "profile.json: %s.kind: unknown kind '%.32s' (kernel or vendor)",
                         at, k->kind ? k->kind : "(not a string)");
    bool vendor = strcmp (k->kind, "vendor") == 0;
    k->vendor = k->vendor_op = k->reason = "";
    k->op = s_str (j, "op");
    k->key = s_str (j, "key");
    k->dtype = s_str (j, "dtype");
    k->workload = s_str (j, "workload");
    k->candidate = s_str (j, "candidate");
    k->backend = s_str (j, "backend");
    k->entry = s_str (j, "entry");
    k->batch_id = s_str (j, "batch_id");
    k->task_id = s_str (j, "task_id");
    if (!*k->op || !*k->dtype || (!vendor && (!*k->entry || !*k->candidate))
        || (strcmp (k->backend, "cuda") != 0 && strcmp (k->backend, "host") != 0))
        return akp_errf (err, errlen, AKP_EINVAL, "profile.json: %s: op, dtype, entry, candidate and backend are required%s",
                         at, vendor ? " (a vendor entry: op, dtype and backend)" : "");
    const json_t *keys = json_object_get (j, "keys"), *dims = json_object_get (j, "dims");
    k->ndims = json_array_size (dims);
    if (k->ndims < 1 || k->ndims > AKP_MAX_DIMS || json_array_size (keys) != k->ndims)
        return akp_errf (err, errlen, AKP_EINVAL, "profile.json: %s: keys and dims must have 1..%d items each", at, AKP_MAX_DIMS);
    for (size_t i = 0; i < k->ndims; i++) {
        json_t *d = json_array_get (dims, i);
        k->keys[i] = json_string_value (json_array_get (keys, i));
        if (!k->keys[i] || !json_is_integer (d) || json_integer_value (d) < 1)
            return akp_errf (err, errlen, AKP_EINVAL, "profile.json: %s: dims[%zu] must be a positive integer with a key", at, i);
        k->dims[i] = json_integer_value (d);
    }
    const json_t *params = json_object_get (j, "params");
    k->nparams = json_array_size (params);
    if (k->nparams > AKP_MAX_PARAMS)
        return akp_errf (err, errlen, AKP_EINVAL, "profile.json: %s: more than %d params", at, AKP_MAX_PARAMS);
    for (size_t i = 0; i < k->nparams; i++) {
        json_t *pp = json_array_get (params, i);
        k->param_names[i] = json_string_value (json_object_get (pp, "name"));
        if (!k->param_names[i] || !json_is_integer (json_object_get (pp, "value")))
            return akp_errf (err, errlen, AKP_EINVAL, "profile.json: %s: params[%zu] needs name and value", at, i);
        k->param_values[i] = json_integer_value (json_object_get (pp, "value"));
    }
    k->speedup = json_number_value (json_object_get (j, "speedup"));
    k->noise = json_number_value (json_object_get (j, "noise"));
    const json_t *ev = json_object_get (j, "evidence");
    for (size_t i = 0; i < json_array_size (ev) && k->nevidence < 4; i++)
        if (json_string_value (json_array_get (ev, i)))
            k->evidence[k->nevidence++] = json_string_value (json_array_get (ev, i));
    if (vendor)
        return s_vendor (j, k, at, err, errlen);
    k->baseline_us = json_number_value (json_object_get (j, "baseline_us"));
    const json_t *launch = json_object_get (j, "launch");
    if (json_is_object (launch)) {
        const json_t *g = json_object_get (launch, "grid"), *b = json_object_get (launch, "block");
        if (json_array_size (g) < 1 || json_array_size (g) > 3 || json_array_size (b) < 1 || json_array_size (b) > 3)
            return akp_errf (err, errlen, AKP_EINVAL, "profile.json: %s: launch grid and block need 1..3 values", at);
        for (int i = 0; i < 3; i++) {
            json_int_t gv = i < (int) json_array_size (g) ? json_integer_value (json_array_get (g, (size_t) i)) : 1;
            json_int_t bv = i < (int) json_array_size (b) ? json_integer_value (json_array_get (b, (size_t) i)) : 1;
            if (gv < 1 || gv > 2147483647 || bv < 1 || bv > 2147483647)
                return akp_errf (err, errlen, AKP_EINVAL, "profile.json: %s: launch dimension %d out of range", at, i);
            k->grid[i] = (unsigned) gv;
            k->block[i] = (unsigned) bv;
        }
        json_int_t sh = json_integer_value (json_object_get (launch, "shared_bytes"));
        if (sh < 0 || sh > 2147483647)
            return akp_errf (err, errlen, AKP_EINVAL, "profile.json: %s: launch shared_bytes out of range", at);
        k->shared_bytes = (unsigned) sh;
        k->has_launch = true;
    }
    if (strcmp (k->backend, "cuda") == 0 && !k->has_launch)
        return akp_errf (err, errlen, AKP_EINVAL, "profile.json: %s: a cuda entry needs its launch configuration", at);
    const char *bufkeys[2] = { "inputs", "outputs" };
    for (int w = 0; w < 2; w++) {
        const json_t *arr = json_object_get (j, bufkeys[w]);
        size_t n = json_array_size (arr);
        if (n > AKP_MAX_BUFS)
            return akp_errf (err, errlen, AKP_EINVAL, "profile.json: %s: more than %d %s", at, AKP_MAX_BUFS, bufkeys[w]);
        for (size_t i = 0; i < n; i++) {
            const json_t *b = json_array_get (arr, i);
            (w ? k->output_names : k->input_names)[i] = s_str (b, "name");
            (w ? k->output_counts : k->input_counts)[i] = json_integer_value (json_object_get (b, "count"));
        }
        *(w ? &k->noutputs : &k->ninputs) = n;
    }
    k->arch = s_str (j, "arch");
    int mrc = s_tmaps (json_object_get (launch, "maps"), k, at, err, errlen);
    if (mrc)
        return mrc;
    const json_t *src = json_object_get (j, "source");
    k->source_name = s_str (src, "name");
    k->source_digest = s_str (src, "digest");
    char what[128];
    snprintf (what, sizeof what, "%s.source", at);
    int rc = s_source (p, dir, sums, src, what, &k->source, &k->source_len, err, errlen);
    snprintf (what, sizeof what, "%s.prelude", at);
    if (rc == AKP_OK)
        rc = s_source (p, dir, sums, json_object_get (j, "prelude"), what, &k->prelude, &k->prelude_len, err, errlen);
    return rc;
}

/*  Why this library cannot apply entry j (k as loaded), or NULL: a vendor
    entry has no kernel (the library call stays, for the entry's reason);
    of kernel ABI 2, thread-block clusters (akp_launch has no
    cuLaunchKernelEx) and tensor maps whose configurations the package
    lacks (exported before they were recorded): applied regardless, the
    kernel would read tensor-map parameters that are not there.  Tensor
    maps with their configurations and arch-specific builds (k->arch) are
    applied.  Caller frees. */
static char *s_unsupported (const json_t *j, const akp_kernel_t *k)
{
    if (strcmp (k->kind, "vendor") == 0) {
        size_t n = strlen (k->reason) + 32;
        char *buf = malloc (n);
        if (!buf)
            abort ();
        snprintf (buf, n, "vendor entry: %s", k->reason);
        return buf;
    }
    const json_t *launch = json_object_get (j, "launch");
    json_int_t tmaps = json_integer_value (json_object_get (launch, "tensor_maps"));
    const json_t *cluster = json_object_get (launch, "cluster");
    bool clustered = false, unmapped = tmaps > 0 && (size_t) tmaps != k->ntmaps;
    for (size_t i = 0; i < json_array_size (cluster); i++)
        clustered |= json_integer_value (json_array_get (cluster, i)) > 1;
    if (!unmapped && !clustered)
        return NULL;
    char buf[256];
    snprintf (buf, sizeof buf, "it needs kernel ABI 2 (%s%s%s), which this libakprofile does not launch",
              unmapped ? "TMA tensor maps without their configurations: a package exported before they were "
                         "recorded" : "", unmapped && clustered ? ", " : "",
              clustered ? "a thread-block cluster" : "");
    return strdup (buf);
}

int akp_load (const char *dir, akp_profile_t **p_out, char *err, size_t errlen)
{
    if (!p_out)
        return akp_errf (err, errlen, AKP_EINVAL, "akp_load: no result pointer");
    *p_out = NULL;
    s_sums_t sums = { 0 };
    int rc = s_verify (dir, &sums, err, errlen);
    akp_profile_t *p = calloc (1, sizeof *p);
    if (!p)
        abort ();
    char path[4096], *text = NULL;
    size_t len = 0;
    if (rc == AKP_OK) {
        snprintf (path, sizeof path, "%s/profile.json", dir);
        rc = s_read (path, &text, &len, err, errlen);
    }
    if (rc == AKP_OK) {
        char hex[65];
        s_sha256 (text, len, hex);
        for (size_t i = 0; i < sums.n; i++)
            if (strcmp (sums.paths[i], "profile.json") == 0 && strcmp (sums.digests[i], hex) != 0)
                rc = akp_errf (err, errlen, AKP_ETAMPERED, "profile.json: changed while loading");
    }
    if (rc == AKP_OK) {
        json_error_t je;
        p->json = json_loadb (text, len, JSON_REJECT_DUPLICATES, &je);
        if (!p->json)
            rc = akp_errf (err, errlen, AKP_EINVAL, "profile.json: invalid JSON: %s (line %d)", je.text, je.line);
    }
    free (text);
    if (rc == AKP_OK) {
        const json_t *sv = json_object_get (p->json, "schema_version");
        if (!json_is_integer (sv) || json_integer_value (sv) != 1 || strcmp (s_str (p->json, "format"), "akfleet-profile") != 0)
            rc = akp_errf (err, errlen, AKP_EINVAL, "profile.json: not an akfleet-profile of schema_version 1");
    }
    const json_t *classes = rc == AKP_OK ? json_object_get (p->json, "classes") : NULL;
    if (rc == AKP_OK) {
        p->name = strdup (s_str (p->json, "profile"));
        p->nclasses = json_array_size (classes);
        p->classes = calloc (p->nclasses + 1, sizeof *p->classes);
        if (!p->name || !p->classes)
            abort ();
    }
    for (size_t c = 0; rc == AKP_OK && c < p->nclasses; c++) {
        const json_t *cj = json_array_get (classes, c), *dev = json_object_get (cj, "device");
        s_class_t *cl = &p->classes[c];
        cl->device_class = (char *) s_str (cj, "device_class");
        cl->backend = (char *) s_str (cj, "backend");
        cl->device_name = (char *) s_str (dev, "name");
        cl->nvrtc_version = (char *) s_str (dev, "nvrtc_version");
        cl->cc_major = (int) json_integer_value (json_object_get (dev, "cc_major"));
        cl->cc_minor = (int) json_integer_value (json_object_get (dev, "cc_minor"));
        cl->driver_major = (int) json_integer_value (json_object_get (dev, "driver_major"));
        if (!*cl->device_class) {
            rc = akp_errf (err, errlen, AKP_EINVAL, "profile.json: classes[%zu]: no device_class", c);
            break;
        }
        const json_t *entries = json_object_get (cj, "entries");
        cl->nentries = json_array_size (entries);
        cl->entries = calloc (cl->nentries + 1, sizeof *cl->entries);
        cl->unsupported = calloc (cl->nentries + 1, sizeof *cl->unsupported);
        if (!cl->entries || !cl->unsupported)
            abort ();
        for (size_t i = 0; rc == AKP_OK && i < cl->nentries; i++) {
            char at[64];
            snprintf (at, sizeof at, "classes[%zu].entries[%zu]", c, i);
            rc = s_entry (p, dir, &sums, json_array_get (entries, i), &cl->entries[i], at, err, errlen);
            if (rc == AKP_OK)
                cl->unsupported[i] = s_unsupported (json_array_get (entries, i), &cl->entries[i]);
        }
    }
    s_sums_free (&sums);
    if (rc)
        akp_destroy (&p);
    *p_out = p;
    return rc;
}

void akp_destroy (akp_profile_t **self_p)
{
    if (self_p && *self_p) {
        akp_profile_t *p = *self_p;
        for (size_t c = 0; c < p->nclasses; c++) {
            for (size_t i = 0; p->classes[c].unsupported && i < p->classes[c].nentries; i++)
                free (p->classes[c].unsupported[i]);
            free (p->classes[c].unsupported);
            free (p->classes[c].entries);
        }
        free (p->classes);
        for (size_t i = 0; i < p->ntexts; i++)
            free (p->texts[i]);
        free (p->texts);
        free (p->name);
        json_decref (p->json);
        free (p);
        *self_p = NULL;
    }
}

const char *akp_name (const akp_profile_t *p)        { return p ? p->name : ""; }
size_t akp_class_count (const akp_profile_t *p)      { return p ? p->nclasses : 0; }

const char *akp_class_name (const akp_profile_t *p, size_t i)
{
    return p && i < p->nclasses ? p->classes[i].device_class : NULL;
}

size_t akp_entry_count (const akp_profile_t *p, size_t c)
{
    return p && c < p->nclasses ? p->classes[c].nentries : 0;
}

const akp_kernel_t *akp_entry (const akp_profile_t *p, size_t c, size_t i)
{
    return p && c < p->nclasses && i < p->classes[c].nentries ? &p->classes[c].entries[i] : NULL;
}

// ----------------------------------------------------------------- lookups

int akp_device_class (const akp_device_t *dev, char *buf, size_t len)
{
    if (!dev || !dev->name || !*dev->name || !dev->nvrtc_version || !*dev->nvrtc_version || !buf)
        return AKP_EINVAL;
    int n = snprintf (buf, len, "%s/sm_%d%d/drv%d/nvrtc%s", dev->name, dev->cc_major, dev->cc_minor,
                      dev->driver_major, dev->nvrtc_version);
    if (n < 0 || (size_t) n >= len)
        return AKP_EINVAL;
    for (char *c = buf; *c; c++)
        if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9')
              || *c == '_' || *c == '.' || *c == '-' || *c == '/'))
            *c = '_';
    return AKP_OK;
}

int akp_match (const akp_profile_t *p, const char *device_class, const akp_device_t *dev,
               size_t *index, char *why, size_t whylen)
{
    if (!p || !device_class || !index)
        return akp_errf (why, whylen, AKP_EINVAL, "akp_match: missing argument");
    for (size_t c = 0; c < p->nclasses; c++) {
        const s_class_t *cl = &p->classes[c];
        if (strcmp (cl->device_class, device_class) != 0)
            continue;
        if (dev && strcmp (cl->backend, "cuda") == 0) {
            const char *what = NULL;
            if (dev->name && *cl->device_name && strcmp (dev->name, cl->device_name) != 0)
                what = "device name";
            else if (dev->cc_major != cl->cc_major || dev->cc_minor != cl->cc_minor)
                what = "compute capability";
            else if (cl->driver_major && dev->driver_major != cl->driver_major)
                what = "driver major";
            else if (dev->nvrtc_version && *cl->nvrtc_version && strcmp (dev->nvrtc_version, cl->nvrtc_version) != 0)
                what = "NVRTC version";
            if (what)
                return akp_errf (why, whylen, AKP_FALLBACK,
                              "class %s matches by name but the device's %s differs from the recorded one: "
                              "run the default kernels", device_class, what);
        }
        *index = c;
        return AKP_OK;
    }
    /* The nearest class, only to tell the operator why nothing applies. */
    const char *near = NULL;
    size_t slash = strcspn (device_class, "/");
    for (size_t c = 0; c < p->nclasses && !near; c++)
        if (strncmp (p->classes[c].device_class, device_class, slash) == 0)
            near = p->classes[c].device_class;
    return akp_errf (why, whylen, AKP_FALLBACK, "profile %s has no class %s%s%s%s: run the default kernels",
                  p->name, device_class, near ? " (it has " : "", near ? near : "", near ? ", not applied)" : "");
}

int akp_lookup (const akp_profile_t *p, const char *device_class, const char *op,
                const int64_t *dims, size_t ndims, const char *dtype,
                const akp_kernel_t **k, char *why, size_t whylen)
{
    if (!p || !device_class || !op || !dtype || !k || (ndims && !dims) || ndims > AKP_MAX_DIMS)
        return akp_errf (why, whylen, AKP_EINVAL, "akp_lookup: missing or bad argument");
    *k = NULL;
    char shape[256];
    size_t off = 0;
    for (size_t i = 0; i < ndims && off < sizeof shape; i++)
        off += (size_t) snprintf (shape + off, sizeof shape - off, "%s%lld", i ? "x" : "", (long long) dims[i]);
    if (ndims == 0)
        snprintf (shape, sizeof shape, "(no dims)");
    size_t c;
    char mwhy[512];
    if (akp_match (p, device_class, NULL, &c, mwhy, sizeof mwhy) != AKP_OK)
        return akp_errf (why, whylen, AKP_FALLBACK, "no entry for %s %s %s: %s", op, shape, dtype, mwhy);
    const s_class_t *cl = &p->classes[c];
    bool op_known = false;
    for (size_t i = 0; i < cl->nentries; i++) {
        const akp_kernel_t *e = &cl->entries[i];
        if (strcmp (e->op, op) != 0)
            continue;
        op_known = true;
        if (strcmp (e->dtype, dtype) != 0 || e->ndims != ndims)
            continue;
        size_t d = 0;
        while (d < ndims && e->dims[d] == dims[d])
            d++;
        if (d == ndims) {
            if (cl->unsupported && cl->unsupported[i])
                return akp_errf (why, whylen, AKP_FALLBACK, "entry for %s %s %s on %s: %s: run the default kernel%s%s%s",
                                 op, shape, dtype, device_class, cl->unsupported[i],
                                 *e->vendor ? " (the vendor library " : "", e->vendor, *e->vendor ? ")" : "");
            *k = e;
            return AKP_OK;
        }
    }
    return akp_errf (why, whylen, AKP_FALLBACK, "no entry for %s %s %s on %s%s: run the default kernel",
                  op, shape, dtype, device_class,
                  op_known ? " (the profile tuned other shapes or dtypes of it; none is applied to this one)"
                           : " (the profile has no entry for this operator)");
}

int akp_compile_options (const akp_kernel_t *k, char *buf, size_t len, const char **opts,
                         size_t max_opts, size_t *n)
{
    if (!k || !buf || !opts || !n)
        return AKP_EINVAL;
    *n = 0;
    size_t off = 0;
    char dt[32];
    size_t i = 0;
    for (; k->dtype[i] && i < sizeof dt - 1; i++)
        dt[i] = (char) (k->dtype[i] >= 'a' && k->dtype[i] <= 'z' ? k->dtype[i] - 32 : k->dtype[i]);
    dt[i] = '\0';
    for (size_t j = 0; j <= k->nparams; j++) {
        if (*n >= max_opts)
            return AKP_EINVAL;
        int w = j == 0 ? snprintf (buf + off, len - off, "-DAK_DTYPE_%s=1", dt)
                       : snprintf (buf + off, len - off, "-D%s=%lld", k->param_names[j - 1],
                                   (long long) k->param_values[j - 1]);
        if (w < 0 || (size_t) w >= len - off)
            return AKP_EINVAL;
        opts[(*n)++] = buf + off;
        off += (size_t) w + 1;
    }
    return AKP_OK;
}
