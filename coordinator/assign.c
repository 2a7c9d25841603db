/*  coordinator/assign.c: an ASSIGN's parts from its task's stored bytes
    (assign.h). */
#include "assign.h"
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include "pbwire.h"
#include "util.h"

/* TaskRecord fields passed on as the Assign field of the same name. */
static const char *s_copy_names[] = {
    "task_id", "batch_id", "op", "device_class", "backend", "candidate_name",
    "params", "workloads", "policy"
};
#define S_NCOPY (sizeof s_copy_names / sizeof s_copy_names[0])

/* TaskRecord strings the coordinator reads to build the rest. */
enum { S_KIND, S_SPEC, S_REF_NAME, S_REF_DIGEST, S_BASE_NAME, S_BASE_DIGEST, S_CAND_DIGEST,
       S_CAND_NAME, S_NLOOKUP };
static const char *s_lookup_names[S_NLOOKUP] = {
    "kind", "spec_digest", "reference_name", "reference_digest", "baseline_name",
    "baseline_digest", "candidate_digest", "candidate_source_name"
};

static struct {
    uint32_t from[S_NCOPY];         /* TaskRecord number */
    uint32_t to[S_NCOPY];           /* Assign number */
    uint32_t lookup[S_NLOOKUP];
    uint32_t verify;
    /* by TaskRecord number below 64: 1 + the index into from, or 64 + the
       lookup index, or 128 for verify; 0: not read */
    uint8_t  action[64];
} s_map;
static pthread_once_t s_map_once = PTHREAD_ONCE_INIT;

static const ProtobufCFieldDescriptor *s_field (const ProtobufCMessageDescriptor *d, const char *name)
{
    const ProtobufCFieldDescriptor *f = protobuf_c_message_descriptor_get_field_by_name (d, name);
    if (!f)
        abort ();                   /* the schema lost a field this file names: a build error */
    return f;
}

static void s_map_init (void)
{
    for (size_t i = 0; i < S_NCOPY; i++) {
        const ProtobufCFieldDescriptor *from = s_field (&ak__task_record__descriptor, s_copy_names[i]);
        const ProtobufCFieldDescriptor *to = s_field (&ak__assign__descriptor, s_copy_names[i]);
        /* the same type, label and message type, so the same bytes */
        if (from->type != to->type || from->label != to->label || from->descriptor != to->descriptor
            || (from->type != PROTOBUF_C_TYPE_STRING && from->type != PROTOBUF_C_TYPE_MESSAGE))
            abort ();
        s_map.from[i] = from->id;
        s_map.to[i] = to->id;
    }
    for (size_t i = 0; i < S_NLOOKUP; i++) {
        const ProtobufCFieldDescriptor *f = s_field (&ak__task_record__descriptor, s_lookup_names[i]);
        if (f->type != PROTOBUF_C_TYPE_STRING || f->label == PROTOBUF_C_LABEL_REPEATED)
            abort ();
        s_map.lookup[i] = f->id;
    }
    s_map.verify = s_field (&ak__task_record__descriptor, "verify")->id;
    for (size_t i = 0; i < S_NCOPY; i++)
        if (s_map.from[i] < 64)
            s_map.action[s_map.from[i]] = (uint8_t) (1 + i);
    for (size_t i = 0; i < S_NLOOKUP; i++)
        if (s_map.lookup[i] < 64)
            s_map.action[s_map.lookup[i]] = (uint8_t) (64 + i);
    if (s_map.verify < 64)
        s_map.action[s_map.verify] = 128;
}

/* What to do with TaskRecord field number: as s_map.action. */
static int s_action (uint32_t number)
{
    if (number < 64)
        return s_map.action[number];
    for (size_t i = 0; i < S_NCOPY; i++)
        if (number == s_map.from[i])
            return (int) (1 + i);
    for (size_t i = 0; i < S_NLOOKUP; i++)
        if (number == s_map.lookup[i])
            return (int) (64 + i);
    return number == s_map.verify ? 128 : 0;
}

void ak_assign_src_clear (ak_assign_src_t *src)
{
    if (!src)
        return;
    free (src->copied);
    free (src->strs);
    if (src->verify)
        ak__verify_ref__free_unpacked (src->verify, NULL);
    memset (src, 0, sizeof *src);
}

int ak_assign_src_read (const uint8_t *rec, size_t len, const char *task_id, ak_assign_src_t *src,
                        ak_err_t *err)
{
    if (pthread_once (&s_map_once, s_map_init) != 0)
        abort ();
    memset (src, 0, sizeof *src);
    /* retagging can only grow a tag by a byte or two per field; the strings
       and the verify bytes are at most the record */
    src->copied = ak_malloc (2 * len + 16);
    src->strs = ak_malloc (len + S_NLOOKUP);
    uint8_t *verify = NULL;
    size_t nverify = 0;
    ak_pbw_field_t last[S_NLOOKUP];
    bool seen[S_NLOOKUP] = { false };
    const uint8_t *pos = rec, *end = rec + len;
    ak_pbw_field_t f;
    int more;
    while ((more = ak_pbw_next (&pos, end, &f)) == 1) {
        if (f.wire != AK_PBW_LEN)
            continue;               /* every field read here is length-delimited */
        int act = s_action (f.number);
        if (act >= 1 && act < 64) {
            size_t i = (size_t) act - 1;
            src->ncopied += ak_pbw_tag (src->copied + src->ncopied, s_map.to[i], AK_PBW_LEN);
            src->ncopied += ak_pbw_varint (src->copied + src->ncopied, f.len);
            memcpy (src->copied + src->ncopied, f.data, f.len);
            src->ncopied += f.len;
        }
        else if (act >= 64 && act < 128) {
            last[act - 64] = f;     /* a string: the last one counts */
            seen[act - 64] = true;
        }
        else if (act == 128) {
            /* a message: its occurrences merge, as their concatenation does */
            if (!verify)
                verify = ak_malloc (len);
            memcpy (verify + nverify, f.data, f.len);
            nverify += f.len;
        }
    }
    if (more < 0) {
        free (verify);
        return ak_err_set (err, AK_ESTORE, "task %s: its stored record does not parse", task_id);
    }
    char *s = src->strs;
    const char **out[S_NLOOKUP] = {
        &src->kind, &src->spec_digest, &src->reference_name, &src->reference_digest,
        &src->baseline_name, &src->baseline_digest, &src->candidate_digest, &src->candidate_source_name
    };
    for (size_t i = 0; i < S_NLOOKUP; i++) {
        *out[i] = s;
        if (seen[i]) {
            memcpy (s, last[i].data, last[i].len);
            s += last[i].len;
        }
        *s++ = '\0';
    }
    if (verify) {
        src->verify = ak__verify_ref__unpack (NULL, nverify, verify);
        free (verify);
        if (!src->verify)
            return ak_err_set (err, AK_ESTORE, "task %s: its stored verify reference does not parse",
                               task_id);
    }
    return 0;
}
