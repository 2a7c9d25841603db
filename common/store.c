/*  common/store.c: the LMDB store.

    One MDB_env with a named database per record kind, all created in the
    first write transaction.  Values are protobuf-packed records (or raw bytes
    for blobs and meta).  Every mdb_* return code is checked and translated:
    MDB_MAP_FULL becomes AK_ESTOREFULL (the transaction is aborted at once,
    the caller grows the map and retries), anything else AK_ESTORE naming the
    store, the call, the database and the key.

    A write that fails inside a transaction poisons it: later operations and
    the commit return the first failure and nothing of it reaches the disk.
    Refusals that write nothing (AK_EEXIST for a receipt id, a bad key) leave
    the transaction usable.

    This file is the engine (errors, lifecycle, transactions, raw access,
    counters, blobs); the typed records are store_records.c (store_impl.h). */
#include "store.h"
#include "store_impl.h"
#include "digest.h"
#include "util.h"

#include <czmq.h>
#include <errno.h>
#include <lmdb.h>
#include <stdatomic.h>
#include <time.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/statvfs.h>

const char *const store_db_names[AK_DB_COUNT] = {
    "meta", "batches", "tasks", "receipts", "attempts", "blobs", "workers", "profiles"
};

#define AK_SCHEMA_KEY    "schema_version"

/* ---------------------------------------------------------------- errors */

bool ak_store_space_reason (int mdb_rc, uint64_t free_bytes, uint64_t fsize_limit, uint64_t map_size,
                            char *buf, size_t len)
{
    bool limited = fsize_limit != UINT64_MAX && fsize_limit < map_size;
    if (mdb_rc == ENOSPC || (mdb_rc == EIO && free_bytes < AK_STORE_LOW_SPACE))
        snprintf (buf, len, "no space left on device (%llu KiB free)", (unsigned long long) (free_bytes >> 10));
    else
    if (mdb_rc == EDQUOT)
        snprintf (buf, len, "disk quota exceeded");
    else
    if ((mdb_rc == EFBIG || mdb_rc == EIO) && limited)
        snprintf (buf, len, "no space left under the file size limit (ulimit -f, systemd LimitFSIZE=) "
                  "of %llu KiB, below the map size", (unsigned long long) (fsize_limit >> 10));
    else
    if (mdb_rc == EFBIG)
        snprintf (buf, len, "file too large for its file system");
    else
        return false;
    return true;
}

/*  The space reason of a failed write at store (ak_store_space_reason with
    the free space of its file system and this process's file size limit). */
static bool s_space_reason (ak_store_t *store, int mrc, char *buf, size_t len)
{
    if (mrc != ENOSPC && mrc != EIO && mrc != EDQUOT && mrc != EFBIG)
        return false;
    struct statvfs vfs;
    uint64_t free_bytes = statvfs (store->dir, &vfs) == 0 ? (uint64_t) vfs.f_bavail * vfs.f_frsize : UINT64_MAX;
    struct rlimit rl;
    uint64_t limit = getrlimit (RLIMIT_FSIZE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY ? (uint64_t) rl.rlim_cur
                                                                                        : UINT64_MAX;
    return ak_store_space_reason (mrc, free_bytes, limit, ak_store_map_size (store), buf, len);
}

/*  Translates an mdb return code into an AK_E code with err naming the
    store and the call. */
static int s_mdb_fail (ak_store_t *store, int mrc, ak_err_t *err, const char *what)
{
    char why[200];
    if (mrc == MDB_MAP_FULL)
        return ak_err_set (err, AK_ESTOREFULL,
                           "store %s: %s: map full (%zu MiB); grow the map with "
                           "ak_store_set_map_size and retry", store->dir, what,
                           ak_store_map_size (store) >> 20);
    if (s_space_reason (store, mrc, why, sizeof why))
        return ak_err_set (err, AK_ENOSPACE, "store full: %s at %s (%s: %s)", why, store->dir, what, mdb_strerror (mrc));
    return ak_err_set (err, AK_ESTORE, "store %s: %s: %s", store->dir, what, mdb_strerror (mrc));
}

/*  Records the first failure of a write transaction and aborts the LMDB
    transaction: after MDB_MAP_FULL and most other write errors LMDB allows
    nothing but an abort anyway. */
int store_txn_poison (ak_txn_t *txn, int rc, ak_err_t *err)
{
    if (!txn->failed) {
        txn->failed = rc;
        snprintf (txn->failed_msg, sizeof txn->failed_msg, "%s",
                  err ? err->msg : ak_strerror (rc));
    }
    if (txn->txn) {
        mdb_txn_abort (txn->txn);
        txn->txn = NULL;
    }
    return rc;
}

int store_txn_usable (ak_txn_t *txn, ak_err_t *err)
{
    if (!txn)
        return ak_err_set (err, AK_EINVAL, "store: no transaction");
    if (txn->failed)
        return ak_err_set (err, txn->failed, "transaction already failed: %s", txn->failed_msg);
    if (!txn->txn)
        return ak_err_set (err, AK_ESTATE, "store %s: transaction is closed", txn->store->dir);
    return 0;
}

static int s_key (ak_txn_t *txn, ak_db_t db, const char *key, MDB_val *k, ak_err_t *err)
{
    if ((int) db < 0 || db >= AK_DB_COUNT)
        return ak_err_set (err, AK_EINVAL, "store %s: no database %d", txn->store->dir, (int) db);
    size_t n = key ? strlen (key) : 0;
    if (n == 0 || n > AK_STORE_KEY_MAX)
        return ak_err_set (err, AK_EINVAL, "store %s: %s: key of %zu bytes (must be 1..%d)",
                           txn->store->dir, store_db_names[db], n, AK_STORE_KEY_MAX);
    k->mv_data = (void *) key;
    k->mv_size = n;
    return 0;
}

/* Strict decimal uint64 from LMDB bytes (not NUL-terminated). */
static int s_parse_u64 (const void *data, size_t len, uint64_t *out)
{
    const char *p = data;
    if (len == 0 || len > 20)
        return AK_EINVAL;
    uint64_t v = 0;
    for (size_t i = 0; i < len; i++) {
        if (p[i] < '0' || p[i] > '9')
            return AK_EINVAL;
        uint64_t digit = (uint64_t) (p[i] - '0');
        if (__builtin_mul_overflow (v, 10, &v) || __builtin_add_overflow (v, digit, &v))
            return AK_EINVAL;
    }
    *out = v;
    return 0;
}

/* ------------------------------------------------------------- lifecycle */

/*  Begins an LMDB transaction, following a map grown by another process
    (MDB_MAP_RESIZED) by adopting its size and retrying once. */
static int s_mdb_begin (ak_store_t *self, unsigned flags, MDB_txn **txn_p, ak_err_t *err)
{
    int mrc = mdb_txn_begin (self->env, NULL, flags, txn_p);
    if (mrc == MDB_MAP_RESIZED) {
        mrc = mdb_env_set_mapsize (self->env, 0);
        if (mrc)
            return s_mdb_fail (self, mrc, err, "mdb_env_set_mapsize (adopt resized map)");
        mrc = mdb_txn_begin (self->env, NULL, flags, txn_p);
    }
    if (mrc)
        return s_mdb_fail (self, mrc, err, flags & MDB_RDONLY ? "mdb_txn_begin (read)"
                                                              : "mdb_txn_begin (write)");
    return 0;
}

/*  Creates the named databases and checks or writes the schema version, in
    one write transaction. */
static int s_open_dbs (ak_store_t *self, ak_err_t *err)
{
    MDB_txn *txn = NULL;
    int rc = s_mdb_begin (self, 0, &txn, err);
    if (rc)
        return rc;
    for (int i = 0; i < AK_DB_COUNT; i++) {
        int mrc = mdb_dbi_open (txn, store_db_names[i], MDB_CREATE, &self->dbi[i]);
        if (mrc) {
            char what[64];
            snprintf (what, sizeof what, "mdb_dbi_open (%s)", store_db_names[i]);
            rc = s_mdb_fail (self, mrc, err, what);
            goto fail;
        }
    }
    MDB_val k = { strlen (AK_SCHEMA_KEY), (void *) AK_SCHEMA_KEY }, v;
    int mrc = mdb_get (txn, self->dbi[AK_DB_META], &k, &v);
    if (mrc == MDB_NOTFOUND) {
        char text[16];
        int n = snprintf (text, sizeof text, "%u", (unsigned) AK_STORE_SCHEMA_VERSION);
        v.mv_data = text;
        v.mv_size = (size_t) n;
        mrc = mdb_put (txn, self->dbi[AK_DB_META], &k, &v, 0);
        if (mrc) {
            rc = s_mdb_fail (self, mrc, err, "mdb_put (meta, schema_version)");
            goto fail;
        }
    }
    else if (mrc) {
        rc = s_mdb_fail (self, mrc, err, "mdb_get (meta, schema_version)");
        goto fail;
    }
    else {
        uint64_t version = 0;
        if (s_parse_u64 (v.mv_data, v.mv_size, &version) != 0) {
            int shown = v.mv_size > 32 ? 32 : (int) v.mv_size;
            rc = ak_err_set (err, AK_EVERSION, "store %s: schema version '%.*s' is not a number, "
                             "this build reads %u", self->dir, shown, (const char *) v.mv_data,
                             (unsigned) AK_STORE_SCHEMA_VERSION);
            goto fail;
        }
        if (version != AK_STORE_SCHEMA_VERSION) {
            rc = ak_err_set (err, AK_EVERSION, "store %s: schema version %llu, this build reads %u",
                             self->dir, (unsigned long long) version,
                             (unsigned) AK_STORE_SCHEMA_VERSION);
            goto fail;
        }
    }
    mrc = mdb_txn_commit (txn);
    txn = NULL;
    if (mrc)
        return s_mdb_fail (self, mrc, err, "mdb_txn_commit (open)");
    return 0;

fail:
    mdb_txn_abort (txn);
    return rc;
}

/*  Opens or creates the store at dir.  The map is at least opts->map_size
    and never smaller than the size the store had before (a map grown after
    AK_ESTOREFULL stays grown).  On success *store_p is the caller's
    (ak_store_destroy); on failure nothing is left open. */
int ak_store_open (const char *dir, const ak_store_opts_t *opts, ak_store_t **store_p, ak_err_t *err)
{
    int rc = 0;
    if (!dir || !*dir || !store_p)
        return ak_err_set (err, AK_EINVAL, "store: no directory");
    *store_p = NULL;
    ak_store_t *self = ak_calloc (1, sizeof *self);
    self->dir = ak_strdup (dir);
    atomic_init (&self->open_txns, 0);
    atomic_init (&self->spare, NULL);
    self->commit_delay_ms = opts ? opts->commit_delay_ms : 0;
    size_t map_size = opts && opts->map_size ? opts->map_size : AK_STORE_DEFAULT_MAP;
    unsigned flags = MDB_NOTLS | (opts && opts->no_sync ? MDB_NOSYNC : 0);

    rc = ak_mkdir_p (dir, 0700, err);
    if (rc) {
        ak_err_prefix (err, "store %s", dir);
        goto fail;
    }
    int mrc = mdb_env_create (&self->env);
    if (mrc) {
        self->env = NULL;
        rc = s_mdb_fail (self, mrc, err, "mdb_env_create");
        goto fail;
    }
    mrc = mdb_env_set_maxdbs (self->env, 16);
    if (mrc) {
        rc = s_mdb_fail (self, mrc, err, "mdb_env_set_maxdbs");
        goto fail;
    }
    /* The map size is set after opening, so that a store grown earlier
       keeps its size (LMDB adopts the size recorded in the file when none
       was set) and map_size only ever grows it. */
    mrc = mdb_env_open (self->env, dir, flags, 0600);
    if (mrc) {
        rc = s_mdb_fail (self, mrc, err, "mdb_env_open");
        goto fail;
    }
    if (ak_store_map_size (self) < map_size) {
        mrc = mdb_env_set_mapsize (self->env, map_size);
        if (mrc) {
            rc = s_mdb_fail (self, mrc, err, "mdb_env_set_mapsize");
            goto fail;
        }
    }
    rc = s_open_dbs (self, err);
    if (rc)
        goto fail;
    *store_p = self;
    return 0;

fail:
    ak_store_destroy (&self);
    return rc;
}

/* Aborts the spare read transaction, if any. */
static void s_spare_drop (ak_store_t *self)
{
    MDB_txn *spare = atomic_exchange (&self->spare, NULL);
    if (spare)
        mdb_txn_abort (spare);
}

void ak_store_destroy (ak_store_t **self_p)
{
    if (self_p && *self_p) {
        ak_store_t *self = *self_p;
        s_spare_drop (self);
        if (self->env)
            mdb_env_close (self->env);
        free (self->dir);
        free (self);
        *self_p = NULL;
    }
}

size_t ak_store_map_size (ak_store_t *self)
{
    MDB_envinfo info;
    if (!self || !self->env || mdb_env_info (self->env, &info) != 0)
        return 0;
    return info.me_mapsize;
}

/*  The map's size and the bytes in use (the pages up to the last one
    written), from one look at the environment; false when unknown. */
static bool s_map_usage (ak_store_t *self, size_t *size, size_t *used)
{
    MDB_envinfo info;
    MDB_stat st;
    if (!self || !self->env || mdb_env_info (self->env, &info) != 0 || mdb_env_stat (self->env, &st) != 0)
        return false;
    *size = info.me_mapsize;
    *used = (size_t) (info.me_last_pgno + 1) * st.ms_psize;
    return true;
}

size_t ak_store_map_free (ak_store_t *self)
{
    size_t size, used;
    return s_map_usage (self, &size, &used) && size > used ? size - used : 0;
}

size_t ak_store_map_used (ak_store_t *self)
{
    size_t size, used;
    return s_map_usage (self, &size, &used) ? used : 0;
}

/*  Grows (or sets) the map; LMDB requires that this process has no open
    transaction, which is checked rather than trusted. */
int ak_store_set_map_size (ak_store_t *self, size_t bytes, ak_err_t *err)
{
    if (!self)
        return ak_err_set (err, AK_EINVAL, "store: none");
    int open = atomic_load (&self->open_txns);
    if (open)
        return ak_err_set (err, AK_ESTATE, "store %s: cannot resize the map with %d transaction%s open",
                           self->dir, open, open == 1 ? "" : "s");
    s_spare_drop (self);
    int mrc = mdb_env_set_mapsize (self->env, bytes);
    if (mrc)
        return s_mdb_fail (self, mrc, err, "mdb_env_set_mapsize");
    return 0;
}

int ak_store_schema_version (ak_store_t *self, uint32_t *version)
{
    if (!self || !version)
        return AK_EINVAL;
    ak_txn_t *txn = NULL;
    void *val = NULL;
    size_t len = 0;
    int rc = ak_store_begin (self, false, &txn, NULL);
    if (rc)
        return rc;
    rc = ak_store_get (txn, AK_DB_META, AK_SCHEMA_KEY, &val, &len, NULL);
    ak_store_abort (&txn);
    if (rc)
        return rc;
    uint64_t v = 0;
    rc = s_parse_u64 (val, len, &v);
    free (val);
    if (rc || v > UINT32_MAX)
        return AK_ESTORE;
    *version = (uint32_t) v;
    return 0;
}

/* ---------------------------------------------------------- transactions */

int ak_store_begin (ak_store_t *self, bool write, ak_txn_t **txn_p, ak_err_t *err)
{
    if (!self || !txn_p)
        return ak_err_set (err, AK_EINVAL, "store: no store");
    *txn_p = NULL;
    MDB_txn *mtxn = write ? NULL : atomic_exchange (&self->spare, NULL);
    if (mtxn && mdb_txn_renew (mtxn) != 0) {
        mdb_txn_abort (mtxn);       /* e.g. the map grew: begin afresh below */
        mtxn = NULL;
    }
    if (!mtxn) {
        int rc = s_mdb_begin (self, write ? 0 : MDB_RDONLY, &mtxn, err);
        if (rc)
            return rc;
    }
    ak_txn_t *txn = ak_calloc (1, sizeof *txn);
    txn->txn = mtxn;
    txn->store = self;
    txn->write = write;
    atomic_fetch_add (&self->open_txns, 1);
    *txn_p = txn;
    return 0;
}

ProtobufCAllocator *ak_store_decode_with (ak_txn_t *txn, ProtobufCAllocator *alloc)
{
    ProtobufCAllocator *was = txn->decode;
    txn->decode = alloc;
    return was;
}

static void s_txn_free (ak_txn_t **txn_p)
{
    ak_txn_t *txn = *txn_p;
    atomic_fetch_sub (&txn->store->open_txns, 1);
    zhashx_destroy (&txn->later);
    free (txn);
    *txn_p = NULL;
}
/*  Writes the counters ak_store_next_id raised and has not written yet.
    0 or the first failure (which poisons the transaction). */
static int s_write_counters (ak_txn_t *txn, ak_err_t *err)
{
    for (size_t i = 0; i < txn->ncounters; i++) {
        if (!txn->counters[i].dirty)
            continue;
        txn->counters[i].dirty = false;
        char text[24];
        int len = snprintf (text, sizeof text, "%llu", (unsigned long long) txn->counters[i].value);
        int rc = store_put (txn, AK_DB_META, txn->counters[i].key, text, (size_t) len, 0, NULL, err);
        if (rc)
            return rc;
    }
    return 0;
}

/* What a read, walk, count or change of db must see first: the deferred
   task records (tasks) or counters (meta). */
static int s_write_deferred (ak_txn_t *txn, ak_db_t db, ak_err_t *err)
{
    return db == AK_DB_TASKS ? store_write_later (txn, err)
         : db == AK_DB_META  ? s_write_counters (txn, err) : 0;
}

int ak_store_prepare (ak_txn_t *txn, ak_err_t *err)
{
    int rc = store_txn_usable (txn, err);
    if (rc == 0 && !txn->write)
        rc = ak_err_set (err, AK_EINVAL, "store %s: a read transaction has nothing to prepare", txn->store->dir);
    if (rc == 0)
        rc = store_write_later (txn, err);
    return rc ? rc : s_write_counters (txn, err);
}

/*  Commits and frees the transaction.  A poisoned transaction is aborted
    and its first failure returned; so is a failed commit. */
int ak_store_commit (ak_txn_t **txn_p, ak_err_t *err)
{
    if (!txn_p || !*txn_p)
        return ak_err_set (err, AK_EINVAL, "store: no transaction to commit");
    ak_txn_t *txn = *txn_p;
    int rc = 0;
    if (txn->failed) {
        rc = ak_err_set (err, txn->failed, "%s", txn->failed_msg);
        if (txn->txn)
            mdb_txn_abort (txn->txn);
    }
    else if (!txn->txn)
        rc = ak_err_set (err, AK_ESTATE, "store %s: transaction is closed", txn->store->dir);
    else if ((rc = store_write_later (txn, err)) != 0 || (rc = s_write_counters (txn, err)) != 0) {
        if (txn->txn)               /* s_put aborted it already when it poisoned it */
            mdb_txn_abort (txn->txn);
    }
    else {
        if (txn->write && txn->store->commit_delay_ms) {
            struct timespec ts = { txn->store->commit_delay_ms / 1000,
                                   (long) (txn->store->commit_delay_ms % 1000) * 1000000L };
            while (nanosleep (&ts, &ts) != 0 && errno == EINTR)
                ;
        }
        int mrc = mdb_txn_commit (txn->txn);
        if (mrc)
            rc = s_mdb_fail (txn->store, mrc, err, "mdb_txn_commit");
    }
    txn->txn = NULL;
    s_txn_free (txn_p);
    return rc;
}

void ak_store_abort (ak_txn_t **txn_p)
{
    if (txn_p && *txn_p) {
        ak_txn_t *txn = *txn_p;
        if (txn->txn && !txn->write) {
            /* keep it as the spare (reset: it pins no snapshot), unless
               there is one already */
            MDB_txn *none = NULL;
            mdb_txn_reset (txn->txn);
            if (!atomic_compare_exchange_strong (&txn->store->spare, &none, txn->txn))
                mdb_txn_abort (txn->txn);
        }
        else if (txn->txn)
            mdb_txn_abort (txn->txn);
        txn->txn = NULL;
        s_txn_free (txn_p);
    }
}

/* ------------------------------------------------------------ raw access */

/*  mdb_put with flags; LMDB failures poison the transaction.  With
    MDB_NOOVERWRITE an existing key is AK_EEXIST and the transaction stays
    usable.  With MDB_RESERVE, *reserved receives the space to fill. */
int store_put (ak_txn_t *txn, ak_db_t db, const char *key, const void *val, size_t len,
                  unsigned flags, void **reserved, ak_err_t *err)
{
    MDB_val k, v;
    int rc = store_txn_usable (txn, err);
    if (!rc)
        rc = s_key (txn, db, key, &k, err);
    if (rc)
        return rc;
    if (!txn->write)
        return ak_err_set (err, AK_ESTATE, "store %s: put to %s in a read transaction",
                           txn->store->dir, store_db_names[db]);
    v.mv_data = (void *) val;
    v.mv_size = len;
    int mrc = mdb_put (txn->txn, txn->store->dbi[db], &k, &v, flags);
    if (mrc == MDB_KEYEXIST && (flags & MDB_NOOVERWRITE))
        return ak_err_set (err, AK_EEXIST, "store %s: %s: key '%s' already exists",
                           txn->store->dir, store_db_names[db], key);
    if (mrc) {
        char what[AK_STORE_KEY_MAX + 64];
        snprintf (what, sizeof what, "mdb_put (%s, '%s', %zu bytes)", store_db_names[db], key, len);
        rc = s_mdb_fail (txn->store, mrc, err, what);
        return store_txn_poison (txn, rc, err);
    }
    if (reserved)
        *reserved = v.mv_data;
    return 0;
}

int ak_store_put (ak_txn_t *txn, ak_db_t db, const char *key, const void *val, size_t len, ak_err_t *err)
{
    if (!val && len)
        return ak_err_set (err, AK_EINVAL, "store: put without a value");
    if (db == AK_DB_META && txn && txn->ncounters) {
        int rc = s_write_counters (txn, err);
        if (rc)
            return rc;
        txn->ncounters = 0;             /* this put may set one of them */
    }
    return store_put (txn, db, key, val ? val : "", len, 0, NULL, err);
}

/* Looks key up; v points into the map, valid for the transaction. */
int store_get_ref (ak_txn_t *txn, ak_db_t db, const char *key, MDB_val *v, ak_err_t *err)
{
    MDB_val k;
    int rc = store_txn_usable (txn, err);
    if (!rc)
        rc = s_write_deferred (txn, db, err);      /* a read sees the deferred writes */
    if (!rc)
        rc = s_key (txn, db, key, &k, err);
    if (rc)
        return rc;
    int mrc = mdb_get (txn->txn, txn->store->dbi[db], &k, v);
    if (mrc == MDB_NOTFOUND)
        return ak_err_set (err, AK_ENOTFOUND, "store %s: %s: key '%s' not found",
                           txn->store->dir, store_db_names[db], key);
    if (mrc) {
        char what[AK_STORE_KEY_MAX + 64];
        snprintf (what, sizeof what, "mdb_get (%s, '%s')", store_db_names[db], key);
        return s_mdb_fail (txn->store, mrc, err, what);
    }
    return 0;
}

int ak_store_get (ak_txn_t *txn, ak_db_t db, const char *key, void **val_p, size_t *len_p, ak_err_t *err)
{
    if (!val_p)
        return ak_err_set (err, AK_EINVAL, "store: get without an output pointer");
    *val_p = NULL;
    if (len_p)
        *len_p = 0;
    MDB_val v;
    int rc = store_get_ref (txn, db, key, &v, err);
    if (rc)
        return rc;
    char *copy = ak_malloc (v.mv_size + 1);
    if (v.mv_size)
        memcpy (copy, v.mv_data, v.mv_size);
    copy[v.mv_size] = '\0';
    *val_p = copy;
    if (len_p)
        *len_p = v.mv_size;
    return 0;
}

int ak_store_del (ak_txn_t *txn, ak_db_t db, const char *key, ak_err_t *err)
{
    MDB_val k;
    int rc = store_txn_usable (txn, err);
    if (!rc)
        rc = s_key (txn, db, key, &k, err);
    if (rc)
        return rc;
    if (db == AK_DB_TASKS && txn->later)
        zhashx_delete (txn->later, key);
    if (db == AK_DB_META) {
        if ((rc = s_write_counters (txn, err)) != 0)
            return rc;
        txn->ncounters = 0;             /* read again if raised again */
    }
    if (!txn->write)
        return ak_err_set (err, AK_ESTATE, "store %s: delete from %s in a read transaction",
                           txn->store->dir, store_db_names[db]);
    int mrc = mdb_del (txn->txn, txn->store->dbi[db], &k, NULL);
    if (mrc == MDB_NOTFOUND)
        return ak_err_set (err, AK_ENOTFOUND, "store %s: %s: key '%s' not found",
                           txn->store->dir, store_db_names[db], key);
    if (mrc) {
        char what[AK_STORE_KEY_MAX + 64];
        snprintf (what, sizeof what, "mdb_del (%s, '%s')", store_db_names[db], key);
        rc = s_mdb_fail (txn->store, mrc, err, what);
        return store_txn_poison (txn, rc, err);
    }
    return 0;
}

/*  Positions a cursor at the first key >= prefix and calls fn while keys
    start with prefix.  Keys are handed to fn NUL-terminated (copied); a key
    holding a NUL byte (only possible in a damaged store) is skipped. */
int ak_store_walk (ak_txn_t *txn, ak_db_t db, const char *prefix, ak_store_walk_fn *fn, void *arg,
                   ak_err_t *err)
{
    return ak_store_walk_after (txn, db, prefix, NULL, fn, arg, err);
}

int ak_store_walk_after (ak_txn_t *txn, ak_db_t db, const char *prefix, const char *after,
                         ak_store_walk_fn *fn, void *arg, ak_err_t *err)
{
    int rc = store_txn_usable (txn, err);
    if (!rc && (int) db >= 0 && db < AK_DB_COUNT)
        rc = s_write_deferred (txn, db, err);
    if (rc)
        return rc;
    if ((int) db < 0 || db >= AK_DB_COUNT || !fn)
        return ak_err_set (err, AK_EINVAL, "store %s: walk: bad arguments", txn->store->dir);
    if (!prefix)
        prefix = "";
    size_t plen = strlen (prefix);
    if (plen > AK_STORE_KEY_MAX)
        return 0;

    MDB_cursor *cur = NULL;
    int mrc = mdb_cursor_open (txn->txn, txn->store->dbi[db], &cur);
    if (mrc)
        return s_mdb_fail (txn->store, mrc, err, "mdb_cursor_open");
    size_t alen = after ? strlen (after) : 0;
    bool from_after = alen && alen <= AK_STORE_KEY_MAX && strncmp (after, prefix, plen) == 0;
    MDB_val k = { from_after ? alen : plen, (void *) (from_after ? after : prefix) }, v;
    mrc = mdb_cursor_get (cur, &k, &v, from_after || plen ? MDB_SET_RANGE : MDB_FIRST);
    if (mrc == 0 && from_after && k.mv_size == alen && memcmp (k.mv_data, after, alen) == 0)
        mrc = mdb_cursor_get (cur, &k, &v, MDB_NEXT);       /* strictly after */
    char key[AK_STORE_KEY_MAX + 1];
    while (mrc == 0) {
        if (k.mv_size < plen || memcmp (k.mv_data, prefix, plen) != 0)
            break;
        if (k.mv_size <= AK_STORE_KEY_MAX && !memchr (k.mv_data, '\0', k.mv_size)) {
            memcpy (key, k.mv_data, k.mv_size);
            key[k.mv_size] = '\0';
            rc = fn (key, v.mv_data, v.mv_size, arg);
            if (rc)
                break;
        }
        mrc = mdb_cursor_get (cur, &k, &v, MDB_NEXT);
    }
    if (!rc && mrc && mrc != MDB_NOTFOUND) {
        char what[64];
        snprintf (what, sizeof what, "mdb_cursor_get (%s)", store_db_names[db]);
        rc = s_mdb_fail (txn->store, mrc, err, what);
    }
    mdb_cursor_close (cur);
    return rc;
}

int ak_store_count (ak_txn_t *txn, ak_db_t db, uint64_t *count, ak_err_t *err)
{
    int rc = store_txn_usable (txn, err);
    if (!rc && (int) db >= 0 && db < AK_DB_COUNT)
        rc = s_write_deferred (txn, db, err);
    if (rc)
        return rc;
    if ((int) db < 0 || db >= AK_DB_COUNT || !count)
        return ak_err_set (err, AK_EINVAL, "store %s: count: bad arguments", txn->store->dir);
    MDB_stat st;
    int mrc = mdb_stat (txn->txn, txn->store->dbi[db], &st);
    if (mrc)
        return s_mdb_fail (txn->store, mrc, err, "mdb_stat");
    *count = st.ms_entries;
    return 0;
}

/*  Counter `name` lives in meta under "next.<name>" (a name that already
    starts with "next." is used as is), as decimal text. */
int ak_store_next_id (ak_txn_t *txn, const char *name, uint64_t *value, ak_err_t *err)
{
    if (!name || !*name || !value)
        return ak_err_set (err, AK_EINVAL, "store: next_id: no counter name");
    char key[AK_STORE_KEY_MAX + 1];
    int n = strncmp (name, "next.", 5) == 0 ? snprintf (key, sizeof key, "%s", name)
                                            : snprintf (key, sizeof key, "next.%s", name);
    if (n < 0 || (size_t) n >= sizeof key)
        return ak_err_set (err, AK_EINVAL, "store: counter name too long");
    for (size_t i = 0; i < txn->ncounters; i++) {
        if (strcmp (txn->counters[i].key, key) != 0)
            continue;
        if (txn->counters[i].value == UINT64_MAX)
            return ak_err_set (err, AK_ESTORE, "store %s: meta: counter '%s' is exhausted",
                               txn->store->dir, key);
        *value = ++txn->counters[i].value;
        txn->counters[i].dirty = true;
        return 0;
    }
    MDB_val v;
    uint64_t current = 0;
    int rc = store_get_ref (txn, AK_DB_META, key, &v, err);
    if (rc == 0) {
        if (s_parse_u64 (v.mv_data, v.mv_size, &current) != 0 || current == UINT64_MAX)
            return ak_err_set (err, AK_ESTORE, "store %s: meta: counter '%s' holds a bad value",
                               txn->store->dir, key);
    }
    else if (rc != AK_ENOTFOUND)
        return rc;
    if (txn->write && txn->ncounters < S_COUNTERS && (size_t) n < S_COUNTER_KEY) {
        /* kept in memory: raised again without a read, written once */
        txn->counters[txn->ncounters].value = current + 1;
        txn->counters[txn->ncounters].dirty = true;
        memcpy (txn->counters[txn->ncounters].key, key, (size_t) n + 1);
        txn->ncounters++;
        *value = current + 1;
        return 0;
    }
    char text[24];
    int len = snprintf (text, sizeof text, "%llu", (unsigned long long) (current + 1));
    rc = store_put (txn, AK_DB_META, key, text, (size_t) len, 0, NULL, err);
    if (rc)
        return rc;
    *value = current + 1;
    return 0;
}

/* ----------------------------------------------------------------- blobs */

int ak_store_put_blob (ak_txn_t *txn, const void *data, size_t len, char digest[65], ak_err_t *err)
{
    if (!digest || (!data && len))
        return ak_err_set (err, AK_EINVAL, "store: put_blob: bad arguments");
    int rc = ak_sha256_hex (data ? data : "", len, digest);
    if (rc)
        return ak_err_set (err, rc, "store: put_blob: sha256 failed");
    MDB_val v;
    rc = store_get_ref (txn, AK_DB_BLOBS, digest, &v, err);
    if (rc == 0)
        return 0;                   /* same bytes, already there */
    if (rc != AK_ENOTFOUND)
        return rc;
    return store_put (txn, AK_DB_BLOBS, digest, data ? data : "", len, 0, NULL, err);
}

/*  Returns the blob NUL-terminated (caller frees).  The bytes are re-hashed
    so damage on disk surfaces as AK_ESTORE rather than a wrong kernel. */
int ak_store_get_blob (ak_txn_t *txn, const char *digest, char **data_p, size_t *len_p, ak_err_t *err)
{
    if (!data_p)
        return ak_err_set (err, AK_EINVAL, "store: get_blob: no output pointer");
    *data_p = NULL;
    if (len_p)
        *len_p = 0;
    if (!ak_digest_valid (digest))
        return ak_err_set (err, AK_EINVAL, "store: blob digest '%.80s' is not 64 lower-case hex "
                           "characters", digest ? digest : "(null)");
    void *val = NULL;
    size_t len = 0;
    int rc = ak_store_get (txn, AK_DB_BLOBS, digest, &val, &len, err);
    if (rc)
        return rc;
    char check[AK_DIGEST_HEX_LEN + 1];
    if (ak_sha256_hex (val, len, check) != 0 || strcmp (check, digest) != 0) {
        free (val);
        return ak_err_set (err, AK_ESTORE, "store %s: blob %s: content does not match its digest",
                           txn->store->dir, digest);
    }
    *data_p = val;
    if (len_p)
        *len_p = len;
    return 0;
}
