/*  common/auth.h: CurveZMQ certificates, the coordinator's key ring and its
    ZAP handler (docs/operations.md, "Setting up an authenticated fleet").

    Every connection to a coordinator is CURVE-encrypted and authenticated
    unless akcoord runs with --plain.  The coordinator has one server
    certificate; every worker, operator and viewer has its own.  The
    coordinator's key directory holds the public certificates it accepts,
    one subdirectory per role:

        KEYS/worker/NAME.key      may register as a worker (workers endpoint)
        KEYS/operator/NAME.key    may use every client verb
        KEYS/viewer/NAME.key      may use the read-only client verbs

    A key that is in none of them never completes the handshake: the ZAP
    handler answers 400 and the peer sees no byte of application data.
    Certificates are CZMQ's (zcert): NAME.key holds the public key, and
    NAME.key_secret the public and the secret key. */
#ifndef AK_AUTH_H
#define AK_AUTH_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "error.h"

#define AK_KEY_Z85_LEN    40       /* a Curve25519 key in Z85 */
#define AK_KEY_NAME_MAX   64
#define AK_KEY_WORKERS_MAX 1024    /* worker ids one worker key may be allowed */

typedef enum {
    AK_ROLE_NONE = 0,
    AK_ROLE_WORKER,
    AK_ROLE_OPERATOR,
    AK_ROLE_VIEWER,
    AK_ROLE_SERVER,                /* the coordinator's own certificate (never in the ring) */
} ak_role_t;

/* "worker", "operator", "viewer", "server" ("none" for AK_ROLE_NONE). */
const char *ak_role_name (ak_role_t role);
/* The role named, or AK_ROLE_NONE. */
ak_role_t ak_role_parse (const char *name);

/* A key name: 1..64 of [A-Za-z0-9_.-], not starting with '.'. */
bool ak_key_name_ok (const char *name);

/* ------------------------------------------------------------- peers */

/*  Makes the ZeroMQ socket handle a CURVE client: its own certificate from
    cert_file (NAME.key_secret, or NAME.key with NAME.key_secret next to it)
    and the server's public key, given as 40 Z85 characters or as a
    certificate file.  Both NULL: nothing (plain).  One without the other,
    an unreadable file or a certificate without a secret key: AK_EINVAL
    with err naming the file or option. */
int ak_auth_client_setup (void *handle, const char *cert_file, const char *server_key, ak_err_t *err);

/* The public key of a Z85 text or a certificate file, in z85 (41 bytes). */
int ak_auth_public_key (const char *file_or_z85, char z85[AK_KEY_Z85_LEN + 1], ak_err_t *err);

/*  Makes handle a CURVE server with the secret certificate cert_file and
    sets its ZAP domain (the coordinator's endpoint name). */
int ak_auth_server_setup (void *handle, const char *cert_file, const char *domain, ak_err_t *err);

/* ----------------------------------------------------------- key ring */

typedef struct {
    char        key[AK_KEY_Z85_LEN + 1];  /* public key, Z85 */
    ak_role_t   role;
    char        name[AK_KEY_NAME_MAX + 1]; /* the file name without ".key" */
    char       *file;
    /* worker keys: how many worker ids the key may register (1 unless the
       certificate's metadata says `workers = "N"`, docs/operations.md) */
    uint32_t    max_workers;
} ak_key_t;

typedef struct ak_keyring ak_keyring_t;

/*  Loads every public certificate under dir/worker, dir/operator and
    dir/viewer (files NAME.key; *_secret files are skipped).  dir must
    exist; a missing role subdirectory is an empty role.  A key listed in
    two roles is AK_EINVAL (which role would it have?), and so is an
    unreadable certificate, naming the file. */
int ak_keyring_load (const char *dir, ak_keyring_t **self_p, ak_err_t *err);
void ak_keyring_destroy (ak_keyring_t **self_p);

/* The key with the public key z85, or NULL. */
const ak_key_t *ak_keyring_find (const ak_keyring_t *self, const char *z85);
size_t ak_keyring_size (const ak_keyring_t *self);
/* The i-th key, sorted by role then name. */
const ak_key_t *ak_keyring_at (const ak_keyring_t *self, size_t i);

/* True when a role directory of dir has changed (mtime, or appeared or
   went away) since self was loaded. */
bool ak_keyring_changed (const ak_keyring_t *self);

/*  Creates dir/ROLE/NAME.key and NAME.key_secret (mode 0600; the
    directories 0700) with a fresh key pair; AK_EEXIST when NAME.key is
    there already.  *public_p (may be NULL) gets the public file's path. */
int ak_keys_new (const char *dir, const char *name, ak_role_t role, char **public_p, ak_err_t *err);

/* ---------------------------------------------------------------- ZAP */

typedef struct {
    bool        accepted;
    int         endpoint;           /* 0 workers, 1 clients, -1 other domain */
    char        address[64];        /* the peer's IP address */
    char        key[AK_KEY_Z85_LEN + 1];
    const ak_key_t *entry;          /* NULL when refused */
    char        why[256];
} ak_zap_result_t;

/*  Reads one ZAP request from the REP socket handle (bound to
    inproc://zeromq.zap.01) and answers it: 200 with User-Id = the Z85
    public key when the key is in ring with a role allowed on the domain
    ("workers": worker; "clients": operator or viewer), else 400.  Returns
    false when no request was waiting. */
bool ak_zap_answer (void *handle, const ak_keyring_t *ring, ak_zap_result_t *res);

#endif
