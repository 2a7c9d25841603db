/*  common/envelope.c: the versioned message envelope.

    Unpacking is the door untrusted bytes come through.  After protobuf-c has
    parsed the frame we walk the whole message tree generically through its
    descriptors and bound every string and repeated field, so no handler
    downstream ever sees a 4 GiB string or a million-element list. */
#include "envelope.h"
#include "pbwire.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <czmq.h>

/* The schema has no recursive messages; the bound guards future changes. */
#define AK_ENVELOPE_MAX_DEPTH 32

/* ------------------------------------------------------------ validation */

/*  The dotted path of field f below path, for an error message: built only
    when there is an error to report, since formatting it for every field
    of every message was a measurable share of the coordinator's CPU. */
static const char *s_field_path (const char *path, const ProtobufCFieldDescriptor *f, char *buf,
                                 size_t cap)
{
    snprintf (buf, cap, "%s%s%s", path, *path ? "." : "", f->name);
    return buf;
}

/*  Appends ".name" (no dot at the start) and "[index]" when index >= 0 to
    the path of length len, cut to cap; without snprintf, which cost more
    than the checks themselves. */
static void s_path_push (char *path, size_t cap, size_t len, const char *name, long index)
{
    char num[24];
    size_t n = 0;
    if (len && len + 1 < cap)
        path[len++] = '.';
    for (const char *c = name; *c && len + 1 < cap; c++)
        path[len++] = *c;
    if (index >= 0) {
        do
            num[n++] = (char) ('0' + index % 10);
        while ((index /= 10) && n < sizeof num);
        if (len + 1 < cap)
            path[len++] = '[';
        while (n && len + 1 < cap)
            path[len++] = num[--n];
        if (len + 1 < cap)
            path[len++] = ']';
    }
    path[len < cap ? len : cap - 1] = '\0';
}

/*  Checks msg and every sub-message against AK_MAX_STRING / AK_MAX_REPEATED.
    path holds the dotted path of msg (extended while a sub-message is
    checked) for the error message. */
static int s_check_limits (const ProtobufCMessage *msg, int depth, char *path, size_t path_cap,
                           ak_err_t *err)
{
    const ProtobufCMessageDescriptor *desc = msg->descriptor;
    if (depth > AK_ENVELOPE_MAX_DEPTH)
        return ak_err_set (err, AK_EPROTO, "envelope: messages nested deeper than %d at %s",
                           AK_ENVELOPE_MAX_DEPTH, path);
    size_t path_len = strlen (path);
    char fp[512];

    for (unsigned i = 0; i < desc->n_fields; i++) {
        const ProtobufCFieldDescriptor *f = &desc->fields[i];
        const char *base = (const char *) msg;
        const void *member = base + f->offset;
        int rc = 0;

        if (f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF) {
            uint32_t which = *(const uint32_t *) (base + f->quantifier_offset);
            if (which != f->id)
                continue;
        }

        if (f->label == PROTOBUF_C_LABEL_REPEATED) {
            size_t n = *(const size_t *) (base + f->quantifier_offset);
            if (n > AK_MAX_REPEATED)
                return ak_err_set (err, AK_ETOOBIG, "envelope: %s has %zu elements, limit %u",
                                   s_field_path (path, f, fp, sizeof fp), n, (unsigned) AK_MAX_REPEATED);
            void *const *arr = *(void *const *const *) member;
            if (n && !arr)
                return ak_err_set (err, AK_EPROTO, "envelope: %s: missing elements",
                                   s_field_path (path, f, fp, sizeof fp));
            for (size_t k = 0; k < n && !rc; k++) {
                if (f->type == PROTOBUF_C_TYPE_STRING) {
                    const char *s = ((const char *const *) arr)[k];
                    if (s && strlen (s) > AK_MAX_STRING)
                        rc = ak_err_set (err, AK_ETOOBIG, "envelope: %s[%zu] longer than %u bytes",
                                         s_field_path (path, f, fp, sizeof fp), k,
                                         (unsigned) AK_MAX_STRING);
                }
                else if (f->type == PROTOBUF_C_TYPE_BYTES) {
                    const ProtobufCBinaryData *b = &((const ProtobufCBinaryData *) arr)[k];
                    if (b->len > AK_MAX_STRING)
                        rc = ak_err_set (err, AK_ETOOBIG, "envelope: %s[%zu] longer than %u bytes",
                                         s_field_path (path, f, fp, sizeof fp), k,
                                         (unsigned) AK_MAX_STRING);
                }
                else if (f->type == PROTOBUF_C_TYPE_MESSAGE) {
                    const ProtobufCMessage *sub = ((const ProtobufCMessage *const *) arr)[k];
                    if (sub) {
                        s_path_push (path, path_cap, path_len, f->name, (long) k);
                        rc = s_check_limits (sub, depth + 1, path, path_cap, err);
                        path[path_len] = '\0';
                    }
                }
            }
        }
        else if (f->type == PROTOBUF_C_TYPE_STRING) {
            const char *s = *(const char *const *) member;
            if (s && strlen (s) > AK_MAX_STRING)
                rc = ak_err_set (err, AK_ETOOBIG, "envelope: %s longer than %u bytes",
                                 s_field_path (path, f, fp, sizeof fp), (unsigned) AK_MAX_STRING);
        }
        else if (f->type == PROTOBUF_C_TYPE_BYTES) {
            const ProtobufCBinaryData *b = member;
            if (b->len > AK_MAX_STRING)
                rc = ak_err_set (err, AK_ETOOBIG, "envelope: %s longer than %u bytes",
                                 s_field_path (path, f, fp, sizeof fp), (unsigned) AK_MAX_STRING);
        }
        else if (f->type == PROTOBUF_C_TYPE_MESSAGE) {
            const ProtobufCMessage *sub = *(const ProtobufCMessage *const *) member;
            if (sub) {
                s_path_push (path, path_cap, path_len, f->name, -1);
                rc = s_check_limits (sub, depth + 1, path, path_cap, err);
                path[path_len] = '\0';
            }
        }
        if (rc)
            return rc;
    }
    return 0;
}

/*  Deepest nesting of message types below desc (depth counts desc), or
    a number over AK_ENVELOPE_MAX_DEPTH when it passes that bound or a
    type contains itself. */
static int s_schema_depth (const ProtobufCMessageDescriptor *desc, int depth)
{
    if (depth > AK_ENVELOPE_MAX_DEPTH)
        return depth;
    int deepest = depth;
    for (unsigned i = 0; i < desc->n_fields; i++) {
        const ProtobufCFieldDescriptor *f = &desc->fields[i];
        if (f->type != PROTOBUF_C_TYPE_MESSAGE)
            continue;
        int d = s_schema_depth (f->descriptor, depth + 1);
        if (d > deepest)
            deepest = d;
        if (deepest > AK_ENVELOPE_MAX_DEPTH)
            break;
    }
    return deepest;
}

static bool s_small_is_safe;
static pthread_once_t s_small_once = PTHREAD_ONCE_INIT;

static void s_small_init (void)
{
    s_small_is_safe = s_schema_depth (&ak__envelope__descriptor, 0) <= AK_ENVELOPE_MAX_DEPTH;
}

/*  True when a frame of size bytes cannot break any limit s_check_limits
    enforces, so the walk can be skipped: no string is longer than its
    frame; every element of a repeated field takes at least one byte of it
    (a packed varint one, anything else a tag and more), so no field has
    more elements than the frame has bytes; and the schema nests no deeper
    than AK_ENVELOPE_MAX_DEPTH, with no type that contains itself (checked
    once on the descriptors, so a schema change cannot slip past). */
static bool s_limits_implied (size_t size)
{
    if (size > AK_MAX_REPEATED || size > AK_MAX_STRING)
        return false;
    if (pthread_once (&s_small_once, s_small_init) != 0)
        return false;
    return s_small_is_safe;
}

/*  Drops the unknown fields of msg and every sub-message.  protobuf-c keeps
    them and packs them again, and when a sub-message occurs more than once
    in a frame (its occurrences are merged) the unknown fields it packs can
    be bytes that no longer parse (found by tests/fuzz/fuzz_envelope): a
    receipt stored that way would be a record nobody can read.  What this
    build does not know it neither keeps nor passes on. */
static size_t s_drop_unknown (ProtobufCMessage *msg, int depth)
{
    if (depth > AK_ENVELOPE_MAX_DEPTH)
        return 0;
    size_t dropped = msg->n_unknown_fields;
    for (unsigned i = 0; i < msg->n_unknown_fields; i++)
        free (msg->unknown_fields[i].data);
    free (msg->unknown_fields);
    msg->unknown_fields = NULL;
    msg->n_unknown_fields = 0;
    const ProtobufCMessageDescriptor *desc = msg->descriptor;
    for (unsigned i = 0; i < desc->n_fields; i++) {
        const ProtobufCFieldDescriptor *f = &desc->fields[i];
        char *base = (char *) msg;
        if (f->type != PROTOBUF_C_TYPE_MESSAGE)
            continue;
        if (f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF) {
            uint32_t which = *(const uint32_t *) (base + f->quantifier_offset);
            if (which != f->id)
                continue;
        }
        if (f->label == PROTOBUF_C_LABEL_REPEATED) {
            size_t n = *(const size_t *) (base + f->quantifier_offset);
            ProtobufCMessage **arr = *(ProtobufCMessage ***) (base + f->offset);
            for (size_t k = 0; arr && k < n; k++)
                if (arr[k])
                    dropped += s_drop_unknown (arr[k], depth + 1);
        }
        else {
            ProtobufCMessage *sub = *(ProtobufCMessage **) (base + f->offset);
            if (sub)
                dropped += s_drop_unknown (sub, depth + 1);
        }
    }
    return dropped;
}

/* ---------------------------------------------------------------- public */

/*  An envelope without a body is a programmer error (the peer would
    refuse it): AK_EINVAL. */
int ak_envelope_size (Ak__Envelope *env, size_t *size_p)
{
    if (env->body_case == AK__ENVELOPE__BODY__NOT_SET)
        return AK_EINVAL;
    env->version = AK_PROTOCOL_VERSION;
    *size_p = ak__envelope__get_packed_size (env);
    return *size_p > AK_MAX_MSG_SIZE ? AK_ETOOBIG : 0;
}

/*  Packs env (stamping the protocol version) into a malloc'ed buffer the
    caller frees.  AK_EINVAL for an envelope without a body, AK_ETOOBIG
    over AK_MAX_MSG_SIZE (ak_envelope_size). */
int ak_envelope_pack (Ak__Envelope *env, uint8_t **data_p, size_t *size_p)
{
    if (!env || !data_p || !size_p)
        return AK_EINVAL;
    *data_p = NULL;
    *size_p = 0;
    size_t size = 0;
    int rc = ak_envelope_size (env, &size);
    if (rc)
        return rc;
    uint8_t *buf = malloc (size ? size : 1);
    if (!buf)
        return AK_ENOMEM;
    size_t packed = ak__envelope__pack (env, buf);
    if (packed != size) {
        free (buf);
        return AK_EINTERNAL;
    }
    *data_p = buf;
    *size_p = size;
    return 0;
}

int ak_envelope_field_bytes (const void *data, size_t size, uint32_t field,
                             const uint8_t **p, size_t *n)
{
    const uint8_t *pos = data, *end = pos + size;
    ak_pbw_field_t f;
    int seen = 0, more;
    while ((more = ak_pbw_next (&pos, end, &f)) == 1) {
        if (f.number == field && f.wire == AK_PBW_LEN) {
            *p = f.data;
            *n = f.len;
            seen++;
        }
    }
    if (more < 0)
        return AK_EPROTO;
    return seen == 1 ? 0 : AK_ENOTFOUND;
}

/*  Parses and validates one frame.  Never trusts data: every failure is a
    return code with err saying why, never a crash. */
int ak_envelope_unpack (const void *data, size_t size, size_t max_size,
                        Ak__Envelope **env_p, ak_err_t *err)
{
    return ak_envelope_unpack_counted (data, size, max_size, 0, env_p, NULL, NULL, err);
}

/* The Receipt fields a slim receipt holds (envelope.h). */
static const char *s_slim_names[] = {
    "task_id", "attempt", "status",
    "receipt_id", "batch_id", "worker_id", "received_at_ms", "duplicate"
};
#define S_NSLIM (sizeof s_slim_names / sizeof s_slim_names[0])
static ak_pbw_set_t s_slim_set;
static uint32_t s_slim_high[S_NSLIM];
static pthread_once_t s_slim_once = PTHREAD_ONCE_INIT;

static void s_slim_init (void)
{
    for (size_t i = 0; i < S_NSLIM; i++) {
        const ProtobufCFieldDescriptor *f =
            protobuf_c_message_descriptor_get_field_by_name (&ak__receipt__descriptor, s_slim_names[i]);
        if (!f || !ak_pbw_set_add (&s_slim_set, f->id, s_slim_high, S_NSLIM))
            abort ();               /* the schema lost a field named here: a build error */
    }
}

Ak__Receipt *ak_envelope_slim_receipt (const uint8_t *data, size_t len)
{
    if (pthread_once (&s_slim_once, s_slim_init) != 0)
        return NULL;
    return (Ak__Receipt *) ak_pbw_unpack_only (&ak__receipt__descriptor, data, len, &s_slim_set);
}

/*  The slim path (AK_ENVELOPE_SLIM_RECEIPT): an envelope of exactly
    version, seq and one RECEIPT whose bytes pass ak_pbw_validate with no
    unknown field.  NULL for anything else, which the full path decides. */
static Ak__Envelope *s_unpack_slim (const uint8_t *data, size_t size)
{
    const uint8_t *pos = data, *end = data + size, *body = NULL;
    size_t body_len = 0;
    uint64_t version = 0, seq = 0;
    int bodies = 0, more;
    ak_pbw_field_t f;
    while ((more = ak_pbw_next (&pos, end, &f)) == 1) {
        if (f.number == 1 && f.wire == AK_PBW_VARINT)
            version = f.varint;
        else if (f.number == 2 && f.wire == AK_PBW_VARINT)
            seq = f.varint;
        else if (f.number == AK__ENVELOPE__BODY_RECEIPT && f.wire == AK_PBW_LEN) {
            body = f.data;
            body_len = f.len;
            bodies++;
        }
        else
            return NULL;            /* another body, a wire type to reject, an unknown field */
    }
    if (more < 0 || bodies != 1 || version != AK_PROTOCOL_VERSION)
        return NULL;
    size_t unknown = 0;
    if (ak_pbw_validate (&ak__receipt__descriptor, body, body_len, AK_ENVELOPE_MAX_DEPTH - 1,
                         AK_MAX_STRING, AK_MAX_REPEATED, &unknown) != 0 || unknown)
        return NULL;
    Ak__Receipt *r = ak_envelope_slim_receipt (body, body_len);
    if (!r)
        return NULL;
    Ak__Envelope *env = malloc (sizeof *env);
    if (!env) {
        ak__receipt__free_unpacked (r, NULL);
        return NULL;
    }
    ak__envelope__init (env);
    env->version = (uint32_t) version;
    env->seq = seq;
    env->body_case = AK__ENVELOPE__BODY_RECEIPT;
    env->receipt = r;
#ifndef NDEBUG
    /* debug builds: protobuf-c must take what the validator passed, with
       nothing unknown (a laxer validator would store receipts that no
       longer decode) */
    Ak__Envelope *full = ak__envelope__unpack (NULL, size, data);
    char path[512] = "";
    ak_err_t err = { 0 };
    if (!full || full->body_case != AK__ENVELOPE__BODY_RECEIPT
        || s_check_limits (&full->base, 0, path, sizeof path, &err) != 0 || s_drop_unknown (&full->base, 0)) {
        fprintf (stderr, "envelope: a receipt frame of %zu bytes passed ak_pbw_validate but protobuf-c "
                 "does not take it as one\n", size);
        abort ();
    }
    ak__envelope__free_unpacked (full, NULL);
#endif
    return env;
}

int ak_envelope_unpack_counted (const void *data, size_t size, size_t max_size, unsigned flags,
                                Ak__Envelope **env_p, size_t *unknown_p, bool *slim_p, ak_err_t *err)
{
    int rc = 0;
    if (slim_p)
        *slim_p = false;
    Ak__Envelope *env = NULL;
    if (!env_p)
        return ak_err_set (err, AK_EINVAL, "envelope: no output pointer");
    *env_p = NULL;
    if (max_size == 0 || max_size > AK_MAX_MSG_SIZE)
        max_size = AK_MAX_MSG_SIZE;
    if (size == 0 || !data)
        return ak_err_set (err, AK_EPROTO, "malformed envelope (empty frame)");
    if (size > max_size)
        return ak_err_set (err, AK_ETOOBIG, "envelope of %zu bytes over the limit of %zu",
                           size, max_size);

    if ((flags & AK_ENVELOPE_SLIM_RECEIPT) && (env = s_unpack_slim (data, size)) != NULL) {
        if (unknown_p)
            *unknown_p = 0;
        if (slim_p)
            *slim_p = true;
        *env_p = env;
        return 0;
    }
    env = ak__envelope__unpack (NULL, size, (const uint8_t *) data);
    if (!env)
        return ak_err_set (err, AK_EPROTO, "malformed envelope (%zu bytes)", size);
    if (env->version != AK_PROTOCOL_VERSION) {
        rc = ak_err_set (err, AK_EVERSION,
                         "envelope protocol version %u, this build speaks version %u",
                         (unsigned) env->version, (unsigned) AK_PROTOCOL_VERSION);
        goto fail;
    }
    if (env->body_case == AK__ENVELOPE__BODY__NOT_SET) {
        rc = ak_err_set (err, AK_EPROTO, "envelope (%zu bytes) has no body", size);
        goto fail;
    }
    /* A body case whose message is absent cannot come from the parser, but
       handlers dereference it unconditionally, so make sure. */
    const ProtobufCFieldDescriptor *f =
        protobuf_c_message_descriptor_get_field (&ak__envelope__descriptor, env->body_case);
    if (!f || *(void **) ((char *) env + f->offset) == NULL) {
        rc = ak_err_set (err, AK_EPROTO, "envelope (%zu bytes) has an unknown or empty body %u",
                         size, (unsigned) env->body_case);
        goto fail;
    }
    if (!s_limits_implied (size)) {
        char path[512] = "";
        rc = s_check_limits (&env->base, 0, path, sizeof path, err);
        if (rc)
            goto fail;
    }
    size_t unknown = s_drop_unknown (&env->base, 0);
    if (unknown_p)
        *unknown_p = unknown;
    *env_p = env;
    return 0;

fail:
    ak__envelope__free_unpacked (env, NULL);
    return rc;
}

void ak_envelope_free (Ak__Envelope **env_p)
{
    if (env_p && *env_p) {
        ak__envelope__free_unpacked (*env_p, NULL);
        *env_p = NULL;
    }
}

const char *ak_envelope_kind (const Ak__Envelope *env)
{
    if (!env)
        return "null";
    if (env->body_case == AK__ENVELOPE__BODY__NOT_SET)
        return "none";
    const ProtobufCFieldDescriptor *f =
        protobuf_c_message_descriptor_get_field (&ak__envelope__descriptor, env->body_case);
    return f ? f->name : "unknown";
}

static int s_map_errno (int e)
{
    return (e == EAGAIN || e == EHOSTUNREACH) ? AK_EUNAVAIL : AK_EIO;
}

/*  Packs env and sends it without blocking: on a ROUTER the routing id goes
    first as its own frame.  The envelope stays the caller's either way.
    AK_EUNAVAIL when the peer is unknown or its queue is full (the caller may
    retry or drop), AK_ETOOBIG, AK_EINVAL or AK_EIO otherwise. */
int ak_envelope_send (void *zsock, const void *routing_id, size_t routing_len,
                      Ak__Envelope *env)
{
    if (!zsock || !env)
        return AK_EINVAL;
    void *handle = zsock_resolve (zsock);
    if (!handle)
        return AK_EINVAL;
    uint8_t *data = NULL;
    size_t size = 0;
    int rc = ak_envelope_pack (env, &data, &size);
    if (rc)
        return rc;
    if (routing_id) {
        if (zmq_send (handle, routing_id, routing_len, ZMQ_SNDMORE | ZMQ_DONTWAIT) < 0) {
            rc = s_map_errno (zmq_errno ());
            goto done;
        }
    }
    if (zmq_send (handle, data, size, ZMQ_DONTWAIT) < 0)
        rc = s_map_errno (zmq_errno ());
done:
    free (data);
    return rc;
}
