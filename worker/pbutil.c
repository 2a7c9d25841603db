/*  worker/pbutil.c: building protobuf-c messages by hand (see pbutil.h). */
#include "pbutil.h"
#include "error.h"
#include "util.h"

#include <stdlib.h>
#include <string.h>

static void s_free_str (char *s)
{
    if (s && s != protobuf_c_empty_string)
        free (s);
}

void ak_pb_set_str (char **field, const char *value)
{
    char *old = *field;
    *field = ak_strdup (value ? value : "");
    s_free_str (old);
}

void ak_pb_set_str_max (char **field, const char *value, size_t max)
{
    static const char mark[] = "\n[truncated]";
    if (!value || strlen (value) <= max) {
        ak_pb_set_str (field, value);
        return;
    }
    char *cut = ak_malloc (max + sizeof mark);
    memcpy (cut, value, max);
    memcpy (cut + max, mark, sizeof mark);
    s_free_str (*field);
    *field = cut;
}

int ak_pb_pack (const void *msg, uint8_t **data_p, size_t *len_p)
{
    const ProtobufCMessage *m = msg;
    if (!m)
        return AK_EINVAL;
    size_t len = protobuf_c_message_get_packed_size (m);
    uint8_t *data = ak_malloc (len ? len : 1);
    size_t put = protobuf_c_message_pack (m, data);
    if (put != len) {
        free (data);
        return AK_EINTERNAL;
    }
    *data_p = data;
    *len_p = len;
    return 0;
}

void *ak_pb_dup (const void *msg)
{
    const ProtobufCMessage *m = msg;
    uint8_t *data = NULL;
    size_t len = 0;
    if (!m || ak_pb_pack (m, &data, &len) != 0)
        return NULL;
    ProtobufCMessage *copy = protobuf_c_message_unpack (m->descriptor, NULL, len, data);
    free (data);
    return copy;
}

Ak__Receipt *ak_pb_receipt_for (const Ak__Assign *assign, const char *status, const char *reason)
{
    Ak__Receipt *r = ak_malloc (sizeof *r);
    ak__receipt__init (r);
    if (assign) {
        ak_pb_set_str (&r->task_id, assign->task_id);
        ak_pb_set_str (&r->batch_id, assign->batch_id);
        r->attempt = assign->attempt;
        ak_pb_set_str (&r->kind, assign->kind);
        ak_pb_set_str (&r->op, assign->op);
        ak_pb_set_str (&r->candidate_name, assign->candidate_name);
        if (assign->n_params > 0) {
            r->params = ak_calloc (assign->n_params, sizeof *r->params);
            for (size_t i = 0; i < assign->n_params; i++) {
                Ak__Param *p = ak_malloc (sizeof *p);
                ak__param__init (p);
                ak_pb_set_str (&p->name, assign->params[i]->name);
                p->value = assign->params[i]->value;
                r->params[i] = p;
            }
            r->n_params = assign->n_params;
        }
    }
    ak_pb_set_str (&r->status, status);
    ak_pb_set_str (&r->reason, reason);
    return r;
}

void ak_pb_receipt_add_gate (Ak__Receipt *receipt, const Ak__GateResult *gate)
{
    Ak__GateResult *g = ak_malloc (sizeof *g);
    ak__gate_result__init (g);
    ak_pb_set_str (&g->stage, gate->stage);
    g->passed = gate->passed;
    g->skipped = gate->skipped;
    g->configs = gate->configs;
    g->failed = gate->failed;
    g->worst_err = gate->worst_err;
    ak_pb_set_str (&g->worst_at, gate->worst_at);
    ak_pb_set_str (&g->detail, gate->detail);
    receipt->gates = ak_realloc (receipt->gates, (receipt->n_gates + 1) * sizeof *receipt->gates);
    receipt->gates[receipt->n_gates++] = g;
}

void ak_pb_receipt_add_timing (Ak__Receipt *receipt, Ak__WorkloadTiming *timing)
{
    receipt->timings = ak_realloc (receipt->timings, (receipt->n_timings + 1) * sizeof *receipt->timings);
    receipt->timings[receipt->n_timings++] = timing;
}
