/*  common/auth.c: CurveZMQ certificates, the key ring and the ZAP handler
    (see auth.h). */
#include "auth.h"

#include <czmq.h>
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#include "util.h"

#define S_ZERO_KEY "0000000000000000000000000000000000000000"
#define S_RING_ROLES 3

static const ak_role_t s_ring_roles[S_RING_ROLES] = { AK_ROLE_WORKER, AK_ROLE_OPERATOR, AK_ROLE_VIEWER };

const char *ak_role_name (ak_role_t role)
{
    switch (role) {
        case AK_ROLE_WORKER:   return "worker";
        case AK_ROLE_OPERATOR: return "operator";
        case AK_ROLE_VIEWER:   return "viewer";
        case AK_ROLE_SERVER:   return "server";
        default:               return "none";
    }
}

ak_role_t ak_role_parse (const char *name)
{
    for (int r = AK_ROLE_WORKER; name && r <= AK_ROLE_SERVER; r++)
        if (strcmp (name, ak_role_name ((ak_role_t) r)) == 0)
            return (ak_role_t) r;
    return AK_ROLE_NONE;
}

bool ak_key_name_ok (const char *name)
{
    size_t n = name ? strlen (name) : 0;
    if (n == 0 || n > AK_KEY_NAME_MAX || name[0] == '.')
        return false;
    for (size_t i = 0; i < n; i++) {
        char c = name[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')
              || c == '_' || c == '-' || c == '.'))
            return false;
    }
    return true;
}

static bool s_is_z85_key (const char *text)
{
    if (!text || strlen (text) != AK_KEY_Z85_LEN)
        return false;
    uint8_t bin[32];
    return zmq_z85_decode (bin, text) != NULL;
}

/* A certificate from file; zcert_load reads FILE_secret when it is there. */
static zcert_t *s_cert_load (const char *file, ak_err_t *err)
{
    if (access (file, R_OK) != 0) {
        ak_err_set (err, AK_EINVAL, "certificate %s: %s", file, strerror (errno));
        return NULL;
    }
    zcert_t *cert = zcert_load (file);
    if (!cert || strcmp (zcert_public_txt (cert), S_ZERO_KEY) == 0) {
        zcert_destroy (&cert);
        ak_err_set (err, AK_EINVAL, "certificate %s: not a CurveZMQ certificate", file);
        return NULL;
    }
    return cert;
}

int ak_auth_public_key (const char *file_or_z85, char z85[AK_KEY_Z85_LEN + 1], ak_err_t *err)
{
    if (!file_or_z85 || !*file_or_z85)
        return ak_err_set (err, AK_EINVAL, "no server key given");
    if (s_is_z85_key (file_or_z85) && access (file_or_z85, F_OK) != 0) {
        memcpy (z85, file_or_z85, AK_KEY_Z85_LEN + 1);
        return 0;
    }
    zcert_t *cert = s_cert_load (file_or_z85, err);
    if (!cert)
        return AK_EINVAL;
    snprintf (z85, AK_KEY_Z85_LEN + 1, "%s", zcert_public_txt (cert));
    zcert_destroy (&cert);
    return 0;
}

/* The secret certificate of file: AK_EINVAL when it has no secret key. */
static zcert_t *s_secret_load (const char *file, ak_err_t *err)
{
    zcert_t *cert = s_cert_load (file, err);
    if (cert && strcmp (zcert_secret_txt (cert), S_ZERO_KEY) == 0) {
        zcert_destroy (&cert);
        ak_err_set (err, AK_EINVAL, "certificate %s has no secret key (give NAME.key_secret)", file);
    }
    return cert;
}

static int s_setkey (void *handle, int option, const void *key, const char *name, ak_err_t *err)
{
    if (zmq_setsockopt (handle, option, key, 32) != 0)
        return ak_err_set (err, AK_EIO, "zmq_setsockopt (%s): %s", name, zmq_strerror (zmq_errno ()));
    return 0;
}

int ak_auth_client_setup (void *handle, const char *cert_file, const char *server_key, ak_err_t *err)
{
    bool has_cert = cert_file && *cert_file, has_server = server_key && *server_key;
    if (!has_cert && !has_server)
        return 0;
    if (!has_cert)
        return ak_err_set (err, AK_EINVAL, "a server key without a certificate: give --cert FILE too");
    if (!has_server)
        return ak_err_set (err, AK_EINVAL, "certificate %s without the server's key: give --server-key too",
                           cert_file);
    char z85[AK_KEY_Z85_LEN + 1];
    uint8_t server[32];
    int rc = ak_auth_public_key (server_key, z85, err);
    if (rc)
        return ak_err_prefix (err, "server key");
    zmq_z85_decode (server, z85);
    zcert_t *cert = s_secret_load (cert_file, err);
    if (!cert)
        return AK_EINVAL;
    void *h = zsock_resolve (handle);
    rc = s_setkey (h, ZMQ_CURVE_SERVERKEY, server, "ZMQ_CURVE_SERVERKEY", err);
    if (rc == 0)
        rc = s_setkey (h, ZMQ_CURVE_PUBLICKEY, zcert_public_key (cert), "ZMQ_CURVE_PUBLICKEY", err);
    if (rc == 0)
        rc = s_setkey (h, ZMQ_CURVE_SECRETKEY, zcert_secret_key (cert), "ZMQ_CURVE_SECRETKEY", err);
    zcert_destroy (&cert);
    return rc;
}

int ak_auth_server_setup (void *handle, const char *cert_file, const char *domain, ak_err_t *err)
{
    zcert_t *cert = s_secret_load (cert_file, err);
    if (!cert)
        return AK_EINVAL;
    void *h = zsock_resolve (handle);
    int on = 1;
    int rc = 0;
    if (zmq_setsockopt (h, ZMQ_CURVE_SERVER, &on, sizeof on) != 0)
        rc = ak_err_set (err, AK_EIO, "zmq_setsockopt (ZMQ_CURVE_SERVER): %s", zmq_strerror (zmq_errno ()));
    if (rc == 0)
        rc = s_setkey (h, ZMQ_CURVE_SECRETKEY, zcert_secret_key (cert), "ZMQ_CURVE_SECRETKEY", err);
    if (rc == 0 && zmq_setsockopt (h, ZMQ_ZAP_DOMAIN, domain, strlen (domain)) != 0)
        rc = ak_err_set (err, AK_EIO, "zmq_setsockopt (ZMQ_ZAP_DOMAIN): %s", zmq_strerror (zmq_errno ()));
    zcert_destroy (&cert);
    return rc;
}

// ================================================================ key ring

struct ak_keyring {
    char           *dir;
    ak_key_t       *keys;
    size_t          nkeys;
    struct timespec mtime[S_RING_ROLES];
    bool            exists[S_RING_ROLES];
};

static int s_key_cmp (const void *a, const void *b)
{
    const ak_key_t *x = a, *y = b;
    if (x->role != y->role)
        return (int) x->role - (int) y->role;
    return strcmp (x->name, y->name);
}

static bool s_role_stat (const char *dir, ak_role_t role, struct timespec *mtime)
{
    char *path = ak_path_join (dir, ak_role_name (role));
    struct stat st;
    bool ok = stat (path, &st) == 0 && S_ISDIR (st.st_mode);
    free (path);
    memset (mtime, 0, sizeof *mtime);
    if (ok)
        *mtime = st.st_mtim;
    return ok;
}

static int s_load_role (ak_keyring_t *self, ak_role_t role, ak_err_t *err)
{
    char *path = ak_path_join (self->dir, ak_role_name (role));
    DIR *d = opendir (path);
    if (!d) {
        int e = errno;
        free (path);
        return e == ENOENT ? 0 : ak_err_set (err, AK_EIO, "key directory %s/%s: %s", self->dir,
                                             ak_role_name (role), strerror (e));
    }
    int rc = 0;
    struct dirent *de;
    while (rc == 0 && (de = readdir (d))) {
        size_t n = strlen (de->d_name);
        if (de->d_name[0] == '.' || n <= 4 || strcmp (de->d_name + n - 4, ".key") != 0)
            continue;           /* NAME.key_secret, editor files ... */
        char name[AK_KEY_NAME_MAX + 8];
        snprintf (name, sizeof name, "%.*s", (int) (n - 4), de->d_name);
        char *file = ak_path_join (path, de->d_name);
        if (!ak_key_name_ok (name)) {
            rc = ak_err_set (err, AK_EINVAL, "key %s: the name must be 1..%d of [A-Za-z0-9_.-]", file,
                             AK_KEY_NAME_MAX);
            free (file);
            break;
        }
        zcert_t *cert = s_cert_load (file, err);
        if (!cert) {
            free (file);
            rc = AK_EINVAL;
            break;
        }
        const ak_key_t *dup = ak_keyring_find (self, zcert_public_txt (cert));
        if (dup) {
            rc = ak_err_set (err, AK_EINVAL, "key %s is also %s: one key, one role", file, dup->file);
            zcert_destroy (&cert);
            free (file);
            break;
        }
        self->keys = ak_realloc (self->keys, (self->nkeys + 1) * sizeof *self->keys);
        ak_key_t *k = &self->keys[self->nkeys++];
        memset (k, 0, sizeof *k);
        snprintf (k->key, sizeof k->key, "%s", zcert_public_txt (cert));
        memcpy (k->name, name, strlen (name) + 1);     /* ak_key_name_ok: at most 64 */
        k->role = role;
        k->file = file;
        k->max_workers = 1;
        /* the metadata of this file, not zcert_load's: it reads
           FILE_secret instead where that exists beside it */
        zconfig_t *pub = zconfig_load (file);
        const char *workers = pub ? zconfig_get (pub, "metadata/workers", NULL) : NULL;
        if (role == AK_ROLE_WORKER && workers) {
            char *end = NULL;
            unsigned long v = strtoul (workers, &end, 10);
            if (!*workers || *end || v < 1 || v > AK_KEY_WORKERS_MAX) {
                rc = ak_err_set (err, AK_EINVAL, "key %s: metadata workers = \"%s\": must be 1..%d worker ids",
                                 file, workers, AK_KEY_WORKERS_MAX);
                zconfig_destroy (&pub);
                zcert_destroy (&cert);
                break;
            }
            k->max_workers = (uint32_t) v;
        }
        zconfig_destroy (&pub);
        zcert_destroy (&cert);
    }
    closedir (d);
    free (path);
    return rc;
}

int ak_keyring_load (const char *dir, ak_keyring_t **self_p, ak_err_t *err)
{
    *self_p = NULL;
    struct stat st;
    if (!dir || !*dir)
        return ak_err_set (err, AK_EINVAL, "no key directory");
    if (stat (dir, &st) != 0 || !S_ISDIR (st.st_mode))
        return ak_err_set (err, AK_EINVAL, "key directory %s: %s", dir,
                           errno ? strerror (errno) : "not a directory");
    ak_keyring_t *self = ak_calloc (1, sizeof *self);
    self->dir = ak_strdup (dir);
    int rc = 0;
    for (int i = 0; i < S_RING_ROLES && rc == 0; i++) {
        self->exists[i] = s_role_stat (dir, s_ring_roles[i], &self->mtime[i]);
        rc = s_load_role (self, s_ring_roles[i], err);
    }
    if (rc) {
        ak_keyring_destroy (&self);
        return rc;
    }
    if (self->nkeys)
        qsort (self->keys, self->nkeys, sizeof *self->keys, s_key_cmp);
    *self_p = self;
    return 0;
}

void ak_keyring_destroy (ak_keyring_t **self_p)
{
    if (self_p && *self_p) {
        ak_keyring_t *self = *self_p;
        for (size_t i = 0; i < self->nkeys; i++)
            free (self->keys[i].file);
        free (self->keys);
        free (self->dir);
        free (self);
        *self_p = NULL;
    }
}

const ak_key_t *ak_keyring_find (const ak_keyring_t *self, const char *z85)
{
    /* a linear scan: a fleet has tens to hundreds of keys, looked up once
       per message; cheaper than the Curve decryption of that message */
    for (size_t i = 0; self && z85 && i < self->nkeys; i++)
        if (memcmp (self->keys[i].key, z85, AK_KEY_Z85_LEN + 1) == 0)
            return &self->keys[i];
    return NULL;
}

size_t ak_keyring_size (const ak_keyring_t *self)
{
    return self ? self->nkeys : 0;
}

const ak_key_t *ak_keyring_at (const ak_keyring_t *self, size_t i)
{
    return self && i < self->nkeys ? &self->keys[i] : NULL;
}

bool ak_keyring_changed (const ak_keyring_t *self)
{
    for (int i = 0; i < S_RING_ROLES; i++) {
        struct timespec t;
        bool exists = s_role_stat (self->dir, s_ring_roles[i], &t);
        if (exists != self->exists[i] || t.tv_sec != self->mtime[i].tv_sec
            || t.tv_nsec != self->mtime[i].tv_nsec)
            return true;
    }
    return false;
}

int ak_keys_new (const char *dir, const char *name, ak_role_t role, char **public_p, ak_err_t *err)
{
    if (public_p)
        *public_p = NULL;
    if (!ak_key_name_ok (name))
        return ak_err_set (err, AK_EINVAL, "key name '%s': must be 1..%d of [A-Za-z0-9_.-], not starting with '.'",
                           name ? name : "", AK_KEY_NAME_MAX);
    if (role == AK_ROLE_NONE)
        return ak_err_set (err, AK_EINVAL, "a key needs a role: worker, operator, viewer or server");
    char *sub = ak_path_join (dir, ak_role_name (role));
    int rc = ak_mkdir_p (sub, 0700, err);
    /* ak_mkdir_p keeps an existing directory's mode: tighten ours */
    if (rc == 0 && (chmod (dir, 0700) != 0 || chmod (sub, 0700) != 0))
        rc = ak_err_set (err, AK_EIO, "chmod 0700 %s: %s", sub, strerror (errno));
    char *file = ak_sprintf ("%s/%s.key", sub, name);
    char *secret = ak_sprintf ("%s_secret", file);
    if (rc == 0 && (access (file, F_OK) == 0 || access (secret, F_OK) == 0))
        rc = ak_err_set (err, AK_EEXIST, "key %s exists already", file);
    zcert_t *cert = rc ? NULL : zcert_new ();
    if (rc == 0 && !cert)
        rc = ak_err_set (err, AK_EIO, "cannot create a key pair");
    if (rc == 0) {
        zcert_set_meta (cert, "name", "%s", name);
        zcert_set_meta (cert, "role", "%s", ak_role_name (role));
        /* never a moment with the secret readable by others */
        mode_t old = umask (077);
        if (zcert_save (cert, file) != 0)
            rc = ak_err_set (err, AK_EIO, "cannot write %s: %s", file, strerror (errno));
        umask (old);
        if (rc == 0 && (chmod (file, 0600) != 0 || chmod (secret, 0600) != 0))
            rc = ak_err_set (err, AK_EIO, "chmod 0600 %s: %s", file, strerror (errno));
    }
    zcert_destroy (&cert);
    if (rc == 0 && public_p)
        *public_p = file;
    else
        free (file);
    free (secret);
    free (sub);
    return rc;
}

// ===================================================================== ZAP

/* One frame of a ZAP request as text, cut to cap. */
static void s_frame_text (zmq_msg_t *m, char *buf, size_t cap)
{
    size_t n = zmq_msg_size (m);
    if (n >= cap)
        n = cap - 1;
    memcpy (buf, zmq_msg_data (m), n);
    buf[n] = '\0';
}

static void s_send_text (void *h, const char *text, size_t len, bool more)
{
    if (zmq_send (h, text, len, more ? ZMQ_SNDMORE : 0) < 0 && zmq_errno () != ETERM)
        fprintf (stderr, "ZAP reply: zmq_send: %s\n", zmq_strerror (zmq_errno ()));
}

bool ak_zap_answer (void *handle, const ak_keyring_t *ring, ak_zap_result_t *res)
{
    enum { N = 7 };
    zmq_msg_t f[N + 1];
    int nf = 0;
    memset (res, 0, sizeof *res);
    res->endpoint = -1;
    void *h = zsock_resolve (handle);
    for (;;) {
        zmq_msg_t part;
        zmq_msg_init (&part);
        if (zmq_msg_recv (&part, h, nf ? 0 : ZMQ_DONTWAIT) < 0) {
            zmq_msg_close (&part);
            if (nf == 0)
                return false;
            break;
        }
        bool more = zmq_msg_more (&part);
        if (nf < N + 1)
            f[nf++] = part;
        else
            zmq_msg_close (&part);
        if (!more)
            break;
    }
    char version[8] = "", domain[32] = "", mech[16] = "";
    if (nf >= 1)
        s_frame_text (&f[0], version, sizeof version);
    if (nf >= 3)
        s_frame_text (&f[2], domain, sizeof domain);
    if (nf >= 4)
        s_frame_text (&f[3], res->address, sizeof res->address);
    if (nf >= 6)
        s_frame_text (&f[5], mech, sizeof mech);
    res->endpoint = strcmp (domain, "workers") == 0 ? 0 : strcmp (domain, "clients") == 0 ? 1 : -1;

    if (nf < 6 || strcmp (version, "1.0") != 0)
        snprintf (res->why, sizeof res->why, "malformed ZAP request");
    else if (strcmp (mech, "CURVE") != 0 || nf < 7 || zmq_msg_size (&f[6]) != 32)
        snprintf (res->why, sizeof res->why, "mechanism %s: only CURVE is accepted", mech);
    else {
        zmq_z85_encode (res->key, zmq_msg_data (&f[6]), 32);
        const ak_key_t *k = ak_keyring_find (ring, res->key);
        if (!k)
            snprintf (res->why, sizeof res->why, "unknown key %s", res->key);
        else if (res->endpoint < 0)
            snprintf (res->why, sizeof res->why, "unknown ZAP domain '%s'", domain);
        else if ((res->endpoint == 0) != (k->role == AK_ROLE_WORKER))
            snprintf (res->why, sizeof res->why, "%s key %s may not connect to the %s endpoint",
                      ak_role_name (k->role), k->name, domain);
        else {
            res->accepted = true;
            res->entry = k;
        }
    }
    /* the reply: version, request id, status, text, user id, metadata */
    s_send_text (h, "1.0", 3, true);
    if (nf >= 2)
        s_send_text (h, zmq_msg_data (&f[1]), zmq_msg_size (&f[1]), true);
    else
        s_send_text (h, "", 0, true);
    s_send_text (h, res->accepted ? "200" : "400", 3, true);
    const char *text = res->accepted ? "OK" : res->why;
    s_send_text (h, text, strlen (text), true);
    s_send_text (h, res->accepted ? res->key : "", res->accepted ? AK_KEY_Z85_LEN : 0, true);
    s_send_text (h, "", 0, false);
    for (int i = 0; i < nf; i++)
        zmq_msg_close (&f[i]);
    return true;
}
