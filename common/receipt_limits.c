/*  common/receipt_limits.c: how large a receipt may be (see receipt_limits.h). */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include "receipt_limits.h"
#include "error.h"
#include "pbwire.h"
#include "util.h"

static uint32_t s_id (const ProtobufCMessageDescriptor *desc, const char *name)
{
    const ProtobufCFieldDescriptor *f = protobuf_c_message_descriptor_get_field_by_name (desc, name);
    if (!f)
        abort ();                   /* the schema lost a field this check names */
    return f->id;
}

/* One gate entry's strings against their bounds. */
static int s_gate (const uint8_t *p, size_t len, size_t index, const char *task, char *why, size_t whylen)
{
    const uint8_t *end = p + len;
    uint32_t stage = s_id (&ak__gate_result__descriptor, "stage");
    uint32_t worst_at = s_id (&ak__gate_result__descriptor, "worst_at");
    uint32_t detail = s_id (&ak__gate_result__descriptor, "detail");
    ak_pbw_field_t f;
    int more;
    while ((more = ak_pbw_next (&p, end, &f)) == 1) {
        if (f.wire != AK_PBW_LEN)
            continue;
        size_t max = f.number == detail ? AK_RECEIPT_MAX_DETAIL
                   : f.number == stage || f.number == worst_at ? AK_RECEIPT_MAX_GATE_STR : SIZE_MAX;
        if (f.len > max) {
            snprintf (why, whylen, "receipt for task %.128s: gates[%zu].%s of %zu bytes (at most %zu)", task,
                      index, f.number == detail ? "detail" : f.number == stage ? "stage" : "worst_at", f.len,
                      max);
            return AK_ETOOBIG;
        }
    }
    if (more < 0) {
        snprintf (why, whylen, "receipt for task %.128s: gates[%zu] does not parse", task, index);
        return AK_EPROTO;
    }
    return 0;
}

int ak_receipt_check (const uint8_t *raw, size_t len, const char *task_id, char *why, size_t whylen)
{
    const char *task = task_id && *task_id ? task_id : "?";
    if (len > AK_RECEIPT_MAX_BYTES) {
        snprintf (why, whylen, "receipt for task %.128s of %zu bytes (at most %u)", task, len,
                  (unsigned) AK_RECEIPT_MAX_BYTES);
        return AK_ETOOBIG;
    }
    const ProtobufCMessageDescriptor *d = &ak__receipt__descriptor;
    const struct {
        uint32_t    id;
        const char *name;
        size_t      max;            /* elements of a repeated field, bytes of a string */
        bool        repeated;
    } bounds[] = {
        { s_id (d, "gates"), "gate entries", AK_RECEIPT_MAX_GATES, true },
        { s_id (d, "timings"), "timings", AK_RECEIPT_MAX_TIMINGS, true },
        { s_id (d, "kernels"), "kernel records", AK_RECEIPT_MAX_KERNELS, true },
        { s_id (d, "profiles"), "workload profiles", AK_RECEIPT_MAX_PROFILES, true },
        { s_id (d, "budgets"), "kernel budgets", AK_RECEIPT_MAX_BUDGETS, true },
        { s_id (d, "reason"), "bytes of reason", AK_RECEIPT_MAX_REASON, false },
        { s_id (d, "compile_log"), "bytes of compile_log", AK_RECEIPT_MAX_LOG, false },
    };
    enum { S_NBOUNDS = sizeof bounds / sizeof bounds[0] };
    size_t counts[S_NBOUNDS] = { 0 };
    const uint8_t *p = raw, *end = raw + len;
    ak_pbw_field_t f;
    int more;
    while ((more = ak_pbw_next (&p, end, &f)) == 1) {
        for (size_t i = 0; i < S_NBOUNDS; i++) {
            if (f.number != bounds[i].id)
                continue;
            size_t n = bounds[i].repeated ? ++counts[i] : f.len;
            if (n > bounds[i].max) {
                snprintf (why, whylen, "receipt for task %.128s: %s%zu %s (at most %zu)", task,
                          bounds[i].repeated ? "more than " : "", bounds[i].repeated ? bounds[i].max : n,
                          bounds[i].name, bounds[i].max);
                return AK_ETOOBIG;
            }
            if (i == 0 && f.wire == AK_PBW_LEN) {
                int rc = s_gate (f.data, f.len, counts[i] - 1, task, why, whylen);
                if (rc)
                    return rc;
            }
        }
    }
    if (more < 0) {
        snprintf (why, whylen, "receipt for task %.128s does not parse", task);
        return AK_EPROTO;
    }
    return 0;
}

int ak_receipt_check_msg (const Ak__Receipt *r, char *why, size_t whylen)
{
    size_t len = ak__receipt__get_packed_size (r);
    if (len > AK_RECEIPT_MAX_BYTES) {
        snprintf (why, whylen, "receipt for task %.128s of %zu bytes (at most %u)", r->task_id ? r->task_id : "?",
                  len, (unsigned) AK_RECEIPT_MAX_BYTES);
        return AK_ETOOBIG;
    }
    uint8_t *buf = ak_malloc (len ? len : 1);
    ak__receipt__pack (r, buf);
    int rc = ak_receipt_check (buf, len, r->task_id, why, whylen);
    free (buf);
    return rc;
}
