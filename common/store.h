/*  common/store.h: the LMDB store.

    One environment (a directory), named databases, values encoded with the
    protobuf schema.  `meta` holds the schema version and id counters.  Every
    state change happens inside a write transaction; callers group many
    changes into one transaction (group commit) and only tell peers about a
    change after ak_store_commit returned 0.

    Every LMDB return code is checked; failures come back as AK_ESTORE (with
    the mdb call and mdb_strerror in err), AK_ESTOREFULL when the map is
    full, or AK_ENOSPACE when the disk (or a file size limit) is, in which
    cases the transaction is aborted and nothing is half-written. */
#ifndef AK_STORE_H
#define AK_STORE_H
#include <stddef.h>
#include <stdint.h>
#include <stdbool.h>
#include "akfleet.pb-c.h"
#include "error.h"
#include "pbwire.h"

#define AK_STORE_SCHEMA_VERSION 1
#define AK_STORE_DEFAULT_MAP    (1ull << 30)     /* 1 GiB, grows on demand */

typedef enum {
    AK_DB_META = 0,      /* "schema_version", counters "next.batch", "next.receipt" */
    AK_DB_BATCHES,       /* batch_id -> BatchRecord */
    AK_DB_TASKS,         /* task_id -> TaskRecord */
    AK_DB_RECEIPTS,      /* receipt_id -> Receipt (never overwritten) */
    AK_DB_ATTEMPTS,      /* "task_id#attempt" -> receipt_id of its first receipt */
    AK_DB_BLOBS,         /* sha256 hex -> bytes (sources, specs, manifests) */
    AK_DB_WORKERS,       /* worker_id -> WorkerRecord */
    AK_DB_PROFILES,      /* installed profiles: NAME#CLASS -> ProfileClass, NAME!verify ->
                            VerifyReport (coordinator/profiles.c, docs/profiles.md) */
    AK_DB_COUNT
} ak_db_t;

typedef struct ak_store ak_store_t;
typedef struct ak_txn ak_txn_t;

typedef struct {
    size_t map_size;     /* 0: AK_STORE_DEFAULT_MAP */
    bool   no_sync;      /* MDB_NOSYNC: only for tests and load generators */
    uint32_t commit_delay_ms;   /* benchmarks: every write commit waits this long
                                   first (storage with a slow fsync, simulated) */
} ak_store_opts_t;

/* Opens (creating the directory with mode 0700 if needed) the environment at
   dir.  A new store gets the schema version; an existing one with another
   version is refused with AK_EVERSION. */
int ak_store_open (const char *dir, const ak_store_opts_t *opts, ak_store_t **store_p, ak_err_t *err);
void ak_store_destroy (ak_store_t **self_p);

#define AK_STORE_LOW_SPACE (64ull << 20)    /* free bytes below which a write error is "no space" */

/* Whether a failed write (mdb_rc: the errno LMDB returned) is the store's
   disk running full, and why, into buf: ENOSPC ("no space left on
   device"), EDQUOT ("disk quota exceeded") and EFBIG ("file size limit
   ...") always are; EIO (what LMDB returns for a short write) is when
   free_bytes is below AK_STORE_LOW_SPACE or a file size limit
   (fsize_limit; UINT64_MAX: none) is below the map size.  false, buf
   untouched, for any other error: a genuine I/O error is not "full". */
bool ak_store_space_reason (int mdb_rc, uint64_t free_bytes, uint64_t fsize_limit, uint64_t map_size,
                            char *buf, size_t len);

/* Map size in bytes now; grow it (no transaction may be open). */
size_t ak_store_map_size (ak_store_t *self);
/* Bytes of the map in use: the pages up to the last one written (free
   pages inside count as used; LMDB reuses them). */
size_t ak_store_map_used (ak_store_t *self);
/* The map size less what is in use (one look at the environment, for a
   hot path); 0 when full or unknown. */
size_t ak_store_map_free (ak_store_t *self);
int ak_store_set_map_size (ak_store_t *self, size_t bytes, ak_err_t *err);
int ak_store_schema_version (ak_store_t *self, uint32_t *version);

/* Transactions.  Commit and abort free the transaction and null the pointer;
   abort may be called on NULL. */
int  ak_store_begin (ak_store_t *self, bool write, ak_txn_t **txn_p, ak_err_t *err);
int  ak_store_commit (ak_txn_t **txn_p, ak_err_t *err);
void ak_store_abort (ak_txn_t **txn_p);
/* Writes what a write transaction deferred to its commit (the task records
   of ak_store_put_task_later, the counters of ak_store_next_id) now, so
   that ak_store_commit has only LMDB's commit left and reads none of the
   caller's records: the group commit prepares on its writer thread while
   the loop waits, then commits while the loop goes on (coordinator/
   committer.h).  0 or the first failure (the transaction is poisoned). */
int  ak_store_prepare (ak_txn_t *txn, ak_err_t *err);
/* Records the ak_store_get_* functions decode in txn from now on are
   allocated with alloc (NULL: malloc, the default) and must be freed with
   it; returns the allocator in force before.  For an arena (arena.h):
   set it around a loop of reads, and back before anything else reads. */
ProtobufCAllocator *ak_store_decode_with (ak_txn_t *txn, ProtobufCAllocator *alloc);
/* Reads key of db and decodes only the top-level fields of desc in keep
   (pbwire.h): what a pass over many records needs of each. */
int ak_store_get_only (ak_txn_t *txn, ak_db_t db, const char *key, const ProtobufCMessageDescriptor *desc,
                       const ak_pbw_set_t *keep, ProtobufCMessage **msg_p, ak_err_t *err);

/* Raw access.  get copies the value into a malloc'ed buffer the caller frees
   (NUL-terminated beyond len for convenience); AK_ENOTFOUND if absent. */
int ak_store_put (ak_txn_t *txn, ak_db_t db, const char *key, const void *val, size_t len, ak_err_t *err);
int ak_store_get (ak_txn_t *txn, ak_db_t db, const char *key, void **val_p, size_t *len_p, ak_err_t *err);
int ak_store_del (ak_txn_t *txn, ak_db_t db, const char *key, ak_err_t *err);
/* Calls fn for each key starting with prefix ("" for all), in key order.
   The value pointer is only valid during the call.  fn returning non-zero
   stops the walk and that value is returned. */
typedef int (ak_store_walk_fn) (const char *key, const void *val, size_t len, void *arg);
int ak_store_walk (ak_txn_t *txn, ak_db_t db, const char *prefix, ak_store_walk_fn *fn, void *arg, ak_err_t *err);
/* The same from the first key after `after` (a key with that prefix;
   NULL or another: from the start), for a listing in pages. */
int ak_store_walk_after (ak_txn_t *txn, ak_db_t db, const char *prefix, const char *after,
                         ak_store_walk_fn *fn, void *arg, ak_err_t *err);
/* Number of entries in db. */
int ak_store_count (ak_txn_t *txn, ak_db_t db, uint64_t *count, ak_err_t *err);

/* Atomically increments counter `name` in meta and returns the new value (first is 1). */
int ak_store_next_id (ak_txn_t *txn, const char *name, uint64_t *value, ak_err_t *err);

/* Content-addressed blobs: put stores under sha256(data) and writes the hex
   digest; storing the same bytes twice is a no-op. */
int ak_store_put_blob (ak_txn_t *txn, const void *data, size_t len, char digest[65], ak_err_t *err);
int ak_store_get_blob (ak_txn_t *txn, const char *digest, char **data_p, size_t *len_p, ak_err_t *err);

/* Typed records (protobuf).  get returns a record the caller frees with the
   matching ak__*__free_unpacked(rec, NULL); a value that fails to decode is
   AK_ESTORE with the key named. */
int ak_store_put_batch (ak_txn_t *txn, const Ak__BatchRecord *rec, ak_err_t *err);
int ak_store_get_batch (ak_txn_t *txn, const char *batch_id, Ak__BatchRecord **rec_p, ak_err_t *err);
int ak_store_put_task (ak_txn_t *txn, const Ak__TaskRecord *rec, ak_err_t *err);
/* Writes rec when txn commits (or before anything in txn reads the tasks
   database), packed once however often it is put in txn: for a record
   that one group commit changes more than once.  rec is borrowed and must
   stay alive until then; only its last state is written.  A failure to
   write it comes back from ak_store_commit (or from the read of the tasks
   database that wrote it first).  A plain ak_store_put_task of the same
   id in txn afterwards replaces it. */
/* def, when given, caches the bytes of rec's definition (every field but
   its state ones, which alone change once the task exists:
   AK_TASK_STATE_FIELDS in store_records.c) across writes, so that a record
   written several times is packed whole at most once: each write is those
   bytes followed by the state fields, every one of them encoded even when
   empty or zero, so that they override whatever state the bytes hold
   (protobuf: fields may come in any order; of a singular field the last
   wins).  ak_store_get_task_def fills def with the record's stored bytes,
   so that it is not packed at all; otherwise the first write packs it.  It
   belongs to rec: the caller clears it (ak_task_def_clear) whenever it
   drops or replaces rec.  Debug builds decode every such write and check
   it against rec. */
typedef struct {
    void   *data;
    size_t  len;
    bool    packed;
} ak_task_def_t;
void ak_task_def_clear (ak_task_def_t *def);
int ak_store_put_task_later (ak_txn_t *txn, const Ak__TaskRecord *rec, ak_task_def_t *def, ak_err_t *err);
int ak_store_get_task (ak_txn_t *txn, const char *task_id, Ak__TaskRecord **rec_p, ak_err_t *err);
/* ak_store_get_task, and def (cleared first) holds a copy of the stored
   bytes, for ak_store_put_task_later. */
int ak_store_get_task_def (ak_txn_t *txn, const char *task_id, Ak__TaskRecord **rec_p,
                           ak_task_def_t *def, ak_err_t *err);
/* For the record cache of a leased task (sched.h): def (cleared first)
   holds a copy of task_id's stored bytes and *slim_p the slim record
   decoded from them: task_id, batch_id and the state fields alone
   (AK_TASK_STATE_FIELDS, store_records.c), which is all the group commit changes;
   ak_store_put_task_later writes it as def's bytes plus its state.
   AK_ESTORE when the bytes do not decode. */
int ak_store_get_task_slim (ak_txn_t *txn, const char *task_id, Ak__TaskRecord **slim_p,
                            ak_task_def_t *def, ak_err_t *err);
int ak_store_put_receipt (ak_txn_t *txn, const Ak__Receipt *rec, ak_err_t *err);   /* AK_EEXIST if the id exists */
/* Like ak_store_put_receipt, for a receipt decoded from raw (the bytes a
   worker sent) and changed since only in the fields the coordinator sets
   (AK_RECEIPT_COORD_FIELDS in store_records.c: receipt_id, batch_id, worker_id,
   received_at_ms, duplicate): stores raw followed by those fields, which a
   decoder takes over the worker's values, instead of packing rec again.
   raw NULL: ak_store_put_receipt.  Debug builds check the result. */
int ak_store_put_receipt_raw (ak_txn_t *txn, const Ak__Receipt *rec, const void *raw, size_t len,
                              ak_err_t *err);
int ak_store_get_receipt (ak_txn_t *txn, const char *receipt_id, Ak__Receipt **rec_p, ak_err_t *err);
int ak_store_put_worker (ak_txn_t *txn, const Ak__WorkerRecord *rec, ak_err_t *err);
/* ak_store_put_worker with rec->hello already packed (hello, hello_len):
   written as those bytes and the other fields by hand. */
int ak_store_put_worker_hello (ak_txn_t *txn, const Ak__WorkerRecord *rec, const void *hello, size_t hello_len,
                               ak_err_t *err);
int ak_store_get_worker (ak_txn_t *txn, const char *worker_id, Ak__WorkerRecord **rec_p, ak_err_t *err);

#endif
