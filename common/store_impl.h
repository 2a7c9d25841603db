/*  common/store_impl.h: what the files of the LMDB store share; private
    to them (everyone else uses store.h).

    - store.c: the engine: errors, opening and growing the environment,
      transactions (begin, commit, abort, the spare read transaction), raw
      access, walks, counters, blobs;
    - store_records.c: the typed records (protobuf) and the writes that
      reuse packed bytes (task definitions, raw receipts, worker HELLOs),
      including the task records deferred to the commit.
    Functions shared between them are prefixed store_; what one file alone
    uses stays static (s_).

    Never: include this outside common/store*.c; write to LMDB other than
    through store_put (it checks the key and the transaction and poisons
    the transaction on failure). */
#ifndef AK_STORE_IMPL_H
#define AK_STORE_IMPL_H
#include <lmdb.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <czmq.h>
#include "store.h"

#define AK_STORE_KEY_MAX 511        /* LMDB's compiled default */

struct ak_store {
    MDB_env *env;
    MDB_dbi dbi[AK_DB_COUNT];
    char *dir;
    atomic_int open_txns;
    /* One reset read transaction kept for reuse: renewing it costs no
       allocation and keeps its reader slot, where a new one takes both
       (the coordinator opens one per dispatch).  NULL when none. */
    _Atomic (MDB_txn *) spare;
    uint32_t commit_delay_ms;   /* ak_store_opts_t */
};

#define S_COUNTERS 4                /* counters a transaction keeps in memory */
#define S_COUNTER_KEY 32            /* ... when their key is shorter than this */

struct ak_txn {
    MDB_txn *txn;                   /* NULL once aborted after a failure */
    ak_store_t *store;
    bool write;
    int failed;                     /* first failure, 0 while healthy */
    char failed_msg[sizeof ((ak_err_t *) 0)->msg];
    zhashx_t *later;                /* task_id -> a task record to write at commit (put_task_later) */
    ProtobufCAllocator *decode;     /* what records read are decoded into; NULL: malloc */
    /* counters ak_store_next_id raised in this transaction, written once
       before the commit or any other access to meta */
    struct {
        char     key[S_COUNTER_KEY];
        uint64_t value;
        bool     dirty;
    } counters[S_COUNTERS];
    size_t ncounters;
};

/* The names of the databases, indexed by ak_db_t (errors name them). */
extern const char *const store_db_names[AK_DB_COUNT];

/* mdb_put with flags; LMDB failures poison the transaction.  With
   MDB_NOOVERWRITE an existing key is AK_EEXIST and the transaction stays
   usable.  With MDB_RESERVE, *reserved receives the space to fill. */
int store_put (ak_txn_t *txn, ak_db_t db, const char *key, const void *val, size_t len,
               unsigned flags, void **reserved, ak_err_t *err);
/* Looks key up after writing what txn deferred for db; v points into the
   map, valid for the transaction.  AK_ENOTFOUND when absent. */
int store_get_ref (ak_txn_t *txn, ak_db_t db, const char *key, MDB_val *v, ak_err_t *err);
/* 0 when txn may be used; else why not (no transaction, failed, closed). */
int store_txn_usable (ak_txn_t *txn, ak_err_t *err);
/* Records rc as txn's first failure and aborts the LMDB transaction;
   returns rc. */
int store_txn_poison (ak_txn_t *txn, int rc, ak_err_t *err);
/* Packs and writes the task records deferred by ak_store_put_task_later
   (store_records.c), each once, as they are now; 0 or the first failure
   (which poisons the transaction). */
int store_write_later (ak_txn_t *txn, ak_err_t *err);

#endif
