/*  common/store_records.c: the typed records of the LMDB store (store.h).

    Batches, tasks, receipts and workers as protobuf records packed straight
    into LMDB's memory, and the writes that skip packing what is packed
    already: a task record as its definition's bytes plus its state fields
    (ak_store_put_task_later, deferred to the commit), a receipt as the
    bytes the worker sent plus the fields the coordinator sets, a worker
    record around its packed HELLO.  Debug builds decode each such write
    and abort when it differs from the record (s_bytes_check).  The engine
    underneath (transactions, raw access, errors) is store.c. */
#include "store.h"
#include "store_impl.h"
#include "cpb.h"
#include "envelope.h"
#include "pbwire.h"
#include "util.h"

#include <czmq.h>
#include <lmdb.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>


/* A task record to write at commit, with its cached definition, if any. */
typedef struct {
    const Ak__TaskRecord *rec;
    ak_task_def_t *def;
} store_later_t;

static void s_later_free (void **item)
{
    free (*item);
    *item = NULL;
}

static int s_put_msg (ak_txn_t *txn, ak_db_t db, const char *key, const ProtobufCMessage *msg,
                      unsigned flags, ak_err_t *err);

/* ------------------------------------------------- task and receipt fields */


/* The fields of a TaskRecord that change after the task is created: its
   state.  Every other field is its definition, fixed when the task is
   created (expand.c, rounds.c, verify.c): ak_store_put_task_later with a
   def writes those as bytes kept from an earlier read or write.  A field
   added to TaskRecord that changes later must be listed here; debug builds
   catch one that is not (s_bytes_check).  Each is a string or an unsigned
   integer. */
#define AK_TASK_STATE_FIELDS(X) \
    X (state) X (attempt) X (receipt_id) X (status) X (worker_id) X (queued_ms) \
    X (leased_ms) X (finished_ms) X (duplicates) X (last_error) X (attempt_base) \
    X (lease_deadline_ms)

#define S_NAME(f) #f,
static const char *s_state_names[] = { AK_TASK_STATE_FIELDS (S_NAME) };
#undef S_NAME
#define S_NSTATE (sizeof s_state_names / sizeof s_state_names[0])
static const ProtobufCFieldDescriptor *s_state_fields[S_NSTATE];
static pthread_once_t s_state_once = PTHREAD_ONCE_INIT;

/* The fields of a Receipt that the coordinator sets on intake (intake.c):
   ak_store_put_receipt_raw writes them after the bytes the worker sent. */
#define AK_RECEIPT_COORD_FIELDS(X) \
    X (receipt_id) X (batch_id) X (worker_id) X (received_at_ms) X (duplicate)

#define S_NAME(f) #f,
static const char *s_coord_names[] = { AK_RECEIPT_COORD_FIELDS (S_NAME) };
#undef S_NAME
#define S_NCOORD (sizeof s_coord_names / sizeof s_coord_names[0])
static const ProtobufCFieldDescriptor *s_coord_fields[S_NCOORD];

/* The descriptors of names in desc, each a string, bool or unsigned
   integer field that is not repeated (else a build error: abort). */
static void s_fields_find (const ProtobufCMessageDescriptor *desc, const char *const *names, size_t n,
                           const ProtobufCFieldDescriptor **out)
{
    for (size_t i = 0; i < n; i++) {
        const ProtobufCFieldDescriptor *f = protobuf_c_message_descriptor_get_field_by_name (desc, names[i]);
        if (!f || f->label == PROTOBUF_C_LABEL_REPEATED
            || (f->type != PROTOBUF_C_TYPE_STRING && f->type != PROTOBUF_C_TYPE_UINT32
                && f->type != PROTOBUF_C_TYPE_UINT64 && f->type != PROTOBUF_C_TYPE_BOOL))
            abort ();               /* a field list names a field it cannot encode */
        out[i] = f;
    }
}

/* The fields of a slim task record (ak_store_get_task_slim): its id, its
   batch and its state. */
static const char *s_slim_extra[] = { "task_id", "batch_id" };
#define S_NSLIM (S_NSTATE + sizeof s_slim_extra / sizeof s_slim_extra[0])
static ak_pbw_set_t s_slim_set;
static uint32_t     s_slim_high[S_NSLIM];

/* A WorkerRecord written with its HELLO packed beforehand
   (ak_store_put_worker_hello): the HELLO's field, and the others. */
static const char *s_worker_names[] = {
    "state", "first_seen_ms", "last_seen_ms", "tasks_done", "registrations", "key"
};
#define S_NWORKER (sizeof s_worker_names / sizeof s_worker_names[0])
static const ProtobufCFieldDescriptor *s_worker_fields[S_NWORKER];
static const ProtobufCFieldDescriptor *s_hello_field;

static void s_state_fields_init (void)
{
    s_fields_find (&ak__worker_record__descriptor, s_worker_names, S_NWORKER, s_worker_fields);
    s_hello_field = protobuf_c_message_descriptor_get_field_by_name (&ak__worker_record__descriptor, "hello");
    if (!s_hello_field || s_hello_field->type != PROTOBUF_C_TYPE_MESSAGE
        || ak__worker_record__descriptor.n_fields != S_NWORKER + 1)
        abort ();                   /* WorkerRecord gained a field this writer does not know */
    s_fields_find (&ak__task_record__descriptor, s_state_names, S_NSTATE, s_state_fields);
    const ProtobufCFieldDescriptor *extra[sizeof s_slim_extra / sizeof s_slim_extra[0]];
    s_fields_find (&ak__task_record__descriptor, s_slim_extra, sizeof s_slim_extra / sizeof s_slim_extra[0],
                   extra);
    for (size_t i = 0; i < S_NSLIM; i++)
        if (!ak_pbw_set_add (&s_slim_set, i < S_NSTATE ? s_state_fields[i]->id : extra[i - S_NSTATE]->id,
                             s_slim_high, S_NSLIM))
            abort ();
    s_fields_find (&ak__receipt__descriptor, s_coord_names, S_NCOORD, s_coord_fields);
}

/* Encodes the given fields of msg at p (NULL: only counts), each one also
   when empty or zero (a decoder takes the last value of a field, so these
   replace any earlier ones in the same bytes); returns the size. */
static size_t s_fields_encode (const void *msg, const ProtobufCFieldDescriptor *const *fields,
                               size_t nfields, uint8_t *p)
{
    size_t n = 0;
    for (size_t i = 0; i < nfields; i++) {
        const ProtobufCFieldDescriptor *f = fields[i];
        const char *member = (const char *) msg + f->offset;
        if (f->type == PROTOBUF_C_TYPE_STRING) {
            const char *str = *(char *const *) member;
            size_t len = str ? strlen (str) : 0;
            n += ak_pbw_tag (p ? p + n : NULL, f->id, AK_PBW_LEN);
            n += ak_pbw_varint (p ? p + n : NULL, len);
            if (p && len)
                memcpy (p + n, str, len);
            n += len;
        }
        else {
            uint64_t v = f->type == PROTOBUF_C_TYPE_UINT64 ? *(const uint64_t *) member
                       : f->type == PROTOBUF_C_TYPE_BOOL   ? *(const protobuf_c_boolean *) member != 0
                                                           : *(const uint32_t *) member;
            n += ak_pbw_tag (p ? p + n : NULL, f->id, AK_PBW_VARINT);
            n += ak_pbw_varint (p ? p + n : NULL, v);
        }
    }
    return n;
}

static size_t s_state_encode (const Ak__TaskRecord *rec, uint8_t *p)
{
    return s_fields_encode (rec, s_state_fields, S_NSTATE, p);
}

void ak_task_def_clear (ak_task_def_t *def)
{
    if (def) {
        free (def->data);
        *def = (ak_task_def_t) { 0 };
    }
}

/* Decodes the slim record of the task record bytes data: only the fields
   of s_slim_set.  NULL when the bytes do not parse. */
static Ak__TaskRecord *s_slim_unpack (const uint8_t *data, size_t len)
{
    if (pthread_once (&s_state_once, s_state_fields_init) != 0)
        abort ();
    return (Ak__TaskRecord *) ak_pbw_unpack_only (&ak__task_record__descriptor, data, len, &s_slim_set);
}

#ifndef NDEBUG
/* Debug builds: what a write of stored bytes plus fields put in the store
   (val) must decode to msg: a definition field changed on a cached task
   record, a state field missing from AK_TASK_STATE_FIELDS, or a receipt
   field the coordinator sets missing from AK_RECEIPT_COORD_FIELDS, would
   otherwise be lost silently.  A slim record (ak_store_get_task_slim,
   ak_envelope_slim_receipt) must be the slim part of what was stored, and
   hold nothing else. */
static void s_bytes_check (const ProtobufCMessage *msg, const char *id, const void *val, size_t len)
{
    ProtobufCMessage *back = protobuf_c_message_unpack (msg->descriptor, NULL, len, val);
    bool same = back && ak_cpb_same (msg, back);
    if (back && !same) {
        ProtobufCMessage *slim = msg->descriptor == &ak__task_record__descriptor
                               ? (ProtobufCMessage *) s_slim_unpack (val, len)
                               : msg->descriptor == &ak__receipt__descriptor
                               ? (ProtobufCMessage *) ak_envelope_slim_receipt (val, len) : NULL;
        same = slim && ak_cpb_same (msg, slim);
        protobuf_c_message_free_unpacked (slim, NULL);
    }
    if (!same) {
        fprintf (stderr, "store: %s %s: its stored bytes plus the fields written after them no "
                 "longer match the record (AK_TASK_STATE_FIELDS, AK_RECEIPT_COORD_FIELDS, store_records.c)\n",
                 msg->descriptor->short_name, id);
        abort ();
    }
    protobuf_c_message_free_unpacked (back, NULL);
}
#endif

/*  Writes rec as its definition's bytes followed by its state fields; the
    first such write without stored bytes packs the definition. */
static int s_put_task_split (ak_txn_t *txn, const Ak__TaskRecord *rec, ak_task_def_t *def, ak_err_t *err)
{
    if (pthread_once (&s_state_once, s_state_fields_init) != 0)
        abort ();
    if (!def->packed) {
        static const Ak__TaskRecord init = AK__TASK_RECORD__INIT;
        Ak__TaskRecord d = *rec;
#define S_CLEAR(f) d.f = init.f;
        AK_TASK_STATE_FIELDS (S_CLEAR)
#undef S_CLEAR
        def->len = protobuf_c_message_get_packed_size (&d.base);
        def->data = ak_malloc (def->len);
        if (protobuf_c_message_pack (&d.base, def->data) != def->len)
            abort ();               /* protobuf-c contradicts itself: a bug */
        def->packed = true;
    }
    size_t slen = s_state_encode (rec, NULL);
    void *space = NULL;
    int rc = store_put (txn, AK_DB_TASKS, rec->task_id, NULL, def->len + slen, MDB_RESERVE, &space, err);
    if (rc)
        return rc;
    memcpy (space, def->data, def->len);
    s_state_encode (rec, (uint8_t *) space + def->len);
#ifndef NDEBUG
    s_bytes_check (&rec->base, rec->task_id, space, def->len + slen);
#endif
    return 0;
}

/*  Packs and writes the task records deferred by ak_store_put_task_later,
    each once, as they are now.  0 or the first failure (which poisons the
    transaction). */
int store_write_later (ak_txn_t *txn, ak_err_t *err)
{
    if (!txn->later || zhashx_size (txn->later) == 0)
        return 0;
    int rc = 0;
    for (store_later_t *e = zhashx_first (txn->later); e && rc == 0; e = zhashx_next (txn->later))
        rc = e->def ? s_put_task_split (txn, e->rec, e->def, err)
                    : s_put_msg (txn, AK_DB_TASKS, e->rec->task_id, &e->rec->base, 0, err);
    zhashx_purge (txn->later);
    return rc;
}


/* --------------------------------------------------------- typed records */

/*  Packs msg straight into LMDB's memory (MDB_RESERVE) under key. */
static int s_put_msg (ak_txn_t *txn, ak_db_t db, const char *key, const ProtobufCMessage *msg,
                      unsigned flags, ak_err_t *err)
{
    if (!msg)
        return ak_err_set (err, AK_EINVAL, "store: %s: no record", store_db_names[db]);
    if (!key || !*key)
        return ak_err_set (err, AK_EINVAL, "store: %s: record has no id", store_db_names[db]);
    size_t size = protobuf_c_message_get_packed_size (msg);
    void *space = NULL;
    int rc = store_put (txn, db, key, NULL, size, flags | MDB_RESERVE, &space, err);
    if (rc)
        return rc;
    if (size && protobuf_c_message_pack (msg, space) != size) {
        rc = ak_err_set (err, AK_EINTERNAL, "store %s: %s: '%s' packed to an unexpected size",
                         txn->store->dir, store_db_names[db], key);
        return store_txn_poison (txn, rc, err);
    }
    return 0;
}

/* Looks key up and decodes it (only the fields in keep, when given: see
   ak_store_get_only); raw, when given, is the stored value (valid for the
   transaction). */
static int s_get_msg_raw (ak_txn_t *txn, ak_db_t db, const char *key, const ProtobufCMessageDescriptor *desc,
                          const ak_pbw_set_t *keep, ProtobufCMessage **msg_p, MDB_val *raw, ak_err_t *err)
{
    if (!msg_p)
        return ak_err_set (err, AK_EINVAL, "store: %s: no output pointer", store_db_names[db]);
    *msg_p = NULL;
    MDB_val v;
    int rc = store_get_ref (txn, db, key, &v, err);
    if (rc)
        return rc;
    ProtobufCMessage *msg = keep ? ak_pbw_unpack_only_with (desc, txn->decode, v.mv_data, v.mv_size, keep)
                                 : protobuf_c_message_unpack (desc, txn->decode, v.mv_size, v.mv_data);
    if (!msg)
        return ak_err_set (err, AK_ESTORE, "store %s: %s: key '%s': value of %zu bytes does not "
                           "decode as %s", txn->store->dir, store_db_names[db], key, v.mv_size,
                           desc->name);
    *msg_p = msg;
    if (raw)
        *raw = v;
    return 0;
}

int ak_store_get_only (ak_txn_t *txn, ak_db_t db, const char *key, const ProtobufCMessageDescriptor *desc,
                       const ak_pbw_set_t *keep, ProtobufCMessage **msg_p, ak_err_t *err)
{
    return s_get_msg_raw (txn, db, key, desc, keep, msg_p, NULL, err);
}

static int s_get_msg (ak_txn_t *txn, ak_db_t db, const char *key,
                      const ProtobufCMessageDescriptor *desc, ProtobufCMessage **msg_p, ak_err_t *err)
{
    return s_get_msg_raw (txn, db, key, desc, NULL, msg_p, NULL, err);
}

int ak_store_put_batch (ak_txn_t *txn, const Ak__BatchRecord *rec, ak_err_t *err)
{
    return s_put_msg (txn, AK_DB_BATCHES, rec ? rec->batch_id : NULL, rec ? &rec->base : NULL, 0, err);
}

int ak_store_get_batch (ak_txn_t *txn, const char *batch_id, Ak__BatchRecord **rec_p, ak_err_t *err)
{
    return s_get_msg (txn, AK_DB_BATCHES, batch_id, &ak__batch_record__descriptor,
                      (ProtobufCMessage **) rec_p, err);
}

int ak_store_put_task (ak_txn_t *txn, const Ak__TaskRecord *rec, ak_err_t *err)
{
    if (txn && txn->later && rec && rec->task_id)
        zhashx_delete (txn->later, rec->task_id);      /* this write is the newer one */
    return s_put_msg (txn, AK_DB_TASKS, rec ? rec->task_id : NULL, rec ? &rec->base : NULL, 0, err);
}

/*  Records rec to be packed and written when the transaction commits (or
    before anything reads the tasks database in it), once however often it
    is put: a record written twice in one group commit is packed once. */
int ak_store_put_task_later (ak_txn_t *txn, const Ak__TaskRecord *rec, ak_task_def_t *def, ak_err_t *err)
{
    int rc = store_txn_usable (txn, err);
    if (rc)
        return rc;
    if (!txn->write)
        return ak_err_set (err, AK_ESTATE, "store %s: put to tasks in a read transaction", txn->store->dir);
    if (!rec || !rec->task_id || !*rec->task_id)
        return ak_err_set (err, AK_EINVAL, "store: tasks: record has no id");
    if (!txn->later) {
        txn->later = zhashx_new ();
        if (!txn->later)
            abort ();
        zhashx_set_destructor (txn->later, s_later_free);
    }
    store_later_t *e = ak_malloc (sizeof *e);
    e->rec = rec;
    e->def = def;
    zhashx_update (txn->later, rec->task_id, e);
    return 0;
}

int ak_store_get_task (ak_txn_t *txn, const char *task_id, Ak__TaskRecord **rec_p, ak_err_t *err)
{
    return s_get_msg (txn, AK_DB_TASKS, task_id, &ak__task_record__descriptor,
                      (ProtobufCMessage **) rec_p, err);
}

int ak_store_get_task_def (ak_txn_t *txn, const char *task_id, Ak__TaskRecord **rec_p,
                           ak_task_def_t *def, ak_err_t *err)
{
    ak_task_def_clear (def);
    MDB_val v = { 0, NULL };            /* set by s_get_msg_raw on success; gcc -O3 cannot see that */
    int rc = s_get_msg_raw (txn, AK_DB_TASKS, task_id, &ak__task_record__descriptor, NULL,
                            (ProtobufCMessage **) rec_p, &v, err);
    if (rc == 0 && def) {
        def->data = ak_malloc (v.mv_size ? v.mv_size : 1);
        memcpy (def->data, v.mv_data, v.mv_size);
        def->len = v.mv_size;
        def->packed = true;
    }
    return rc;
}

int ak_store_get_task_slim (ak_txn_t *txn, const char *task_id, Ak__TaskRecord **slim_p,
                            ak_task_def_t *def, ak_err_t *err)
{
    ak_task_def_clear (def);
    *slim_p = NULL;
    MDB_val v;
    int rc = store_get_ref (txn, AK_DB_TASKS, task_id, &v, err);
    if (rc)
        return rc;
    Ak__TaskRecord *slim = s_slim_unpack (v.mv_data, v.mv_size);
    if (!slim)
        return ak_err_set (err, AK_ESTORE, "store %s: tasks: '%s' does not decode", txn->store->dir, task_id);
    def->data = ak_malloc (v.mv_size ? v.mv_size : 1);
    memcpy (def->data, v.mv_data, v.mv_size);
    def->len = v.mv_size;
    def->packed = true;
    *slim_p = slim;
    return 0;
}

int ak_store_put_receipt (ak_txn_t *txn, const Ak__Receipt *rec, ak_err_t *err)
{
    return s_put_msg (txn, AK_DB_RECEIPTS, rec ? rec->receipt_id : NULL, rec ? &rec->base : NULL,
                      MDB_NOOVERWRITE, err);
}

int ak_store_put_receipt_raw (ak_txn_t *txn, const Ak__Receipt *rec, const void *raw, size_t len,
                              ak_err_t *err)
{
    if (!raw)
        return ak_store_put_receipt (txn, rec, err);
    if (!rec || !rec->receipt_id || !*rec->receipt_id)
        return ak_err_set (err, AK_EINVAL, "store: receipts: record has no id");
    if (pthread_once (&s_state_once, s_state_fields_init) != 0)
        abort ();
    size_t clen = s_fields_encode (rec, s_coord_fields, S_NCOORD, NULL);
    void *space = NULL;
    int rc = store_put (txn, AK_DB_RECEIPTS, rec->receipt_id, NULL, len + clen, MDB_NOOVERWRITE | MDB_RESERVE,
                    &space, err);
    if (rc)
        return rc;
    memcpy (space, raw, len);
    s_fields_encode (rec, s_coord_fields, S_NCOORD, (uint8_t *) space + len);
#ifndef NDEBUG
    s_bytes_check (&rec->base, rec->receipt_id, space, len + clen);
#endif
    return 0;
}

int ak_store_get_receipt (ak_txn_t *txn, const char *receipt_id, Ak__Receipt **rec_p, ak_err_t *err)
{
    return s_get_msg (txn, AK_DB_RECEIPTS, receipt_id, &ak__receipt__descriptor,
                      (ProtobufCMessage **) rec_p, err);
}

int ak_store_put_worker (ak_txn_t *txn, const Ak__WorkerRecord *rec, ak_err_t *err)
{
    const char *id = rec && rec->hello ? rec->hello->worker_id : NULL;
    return s_put_msg (txn, AK_DB_WORKERS, id, rec ? &rec->base : NULL, 0, err);
}

int ak_store_put_worker_hello (ak_txn_t *txn, const Ak__WorkerRecord *rec, const void *hello, size_t hello_len,
                               ak_err_t *err)
{
    if (!hello)
        return ak_store_put_worker (txn, rec, err);
    if (!rec || !rec->hello || !rec->hello->worker_id || !*rec->hello->worker_id)
        return ak_err_set (err, AK_EINVAL, "store: workers: record has no id");
    if (pthread_once (&s_state_once, s_state_fields_init) != 0)
        abort ();
    size_t n = ak_pbw_tag (NULL, s_hello_field->id, AK_PBW_LEN) + ak_pbw_varint (NULL, hello_len) + hello_len
             + s_fields_encode (rec, s_worker_fields, S_NWORKER, NULL);
    void *space = NULL;
    int rc = store_put (txn, AK_DB_WORKERS, rec->hello->worker_id, NULL, n, MDB_RESERVE, &space, err);
    if (rc)
        return rc;
    uint8_t *p = space;
    p += ak_pbw_tag (p, s_hello_field->id, AK_PBW_LEN);
    p += ak_pbw_varint (p, hello_len);
    memcpy (p, hello, hello_len);
    p += hello_len;
    s_fields_encode (rec, s_worker_fields, S_NWORKER, p);
#ifndef NDEBUG
    s_bytes_check (&rec->base, rec->hello->worker_id, space, n);
#endif
    return 0;
}

int ak_store_get_worker (ak_txn_t *txn, const char *worker_id, Ak__WorkerRecord **rec_p, ak_err_t *err)
{
    return s_get_msg (txn, AK_DB_WORKERS, worker_id, &ak__worker_record__descriptor,
                      (ProtobufCMessage **) rec_p, err);
}
