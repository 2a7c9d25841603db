/*  tests/unit/test_envelope.c: packing, unpacking and sending envelopes. */
#include "support.h"
#include "envelope.h"
#include "pbwire.h"
#include "receipt_limits.h"
#include "rng.h"
#include "util.h"

#include <czmq.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------- builders */

/* A receipt with a device, params, gates and timings: the deepest tree. */
typedef struct {
    Ak__Receipt receipt;
    Ak__Device device;
    Ak__Param p0, p1;
    Ak__Param *params[2];
    Ak__GateResult g0;
    Ak__GateResult *gates[1];
    Ak__WorkloadTiming t0;
    Ak__WorkloadTiming *timings[1];
    Ak__Workload wl;
    int64_t dims[2];
    Ak__Stats cand, base;
} s_receipt_t;

static void s_receipt_init (s_receipt_t *r)
{
    ak__receipt__init (&r->receipt);
    ak__device__init (&r->device);
    ak__param__init (&r->p0);
    ak__param__init (&r->p1);
    ak__gate_result__init (&r->g0);
    ak__workload_timing__init (&r->t0);
    ak__workload__init (&r->wl);
    ak__stats__init (&r->cand);
    ak__stats__init (&r->base);

    r->device.backend = "host";
    r->device.device_class = "cpu-x86";
    r->device.name = "Host CPU";
    r->device.mem_bytes = 1ull << 35;
    r->device.slots = 2;
    r->p0.name = "BLOCK";
    r->p0.value = 128;
    r->p1.name = "UNROLL";
    r->p1.value = -4;
    r->params[0] = &r->p0;
    r->params[1] = &r->p1;
    r->g0.stage = "smoke";
    r->g0.passed = 1;
    r->g0.configs = 3;
    r->g0.worst_err = 1.5e-6;
    r->g0.worst_at = "small/float32";
    r->gates[0] = &r->g0;
    r->dims[0] = 1024;
    r->dims[1] = 4096;
    r->wl.name = "1024x4096";
    r->wl.n_dims = 2;
    r->wl.dims = r->dims;
    r->wl.dtype = "float32";
    r->wl.weight = 2.0;
    r->cand.n = 50;
    r->cand.median_us = 12.5;
    r->base.n = 50;
    r->base.median_us = 15.0;
    r->t0.workload = &r->wl;
    r->t0.candidate = &r->cand;
    r->t0.baseline = &r->base;
    r->t0.speedup = 1.2;
    r->timings[0] = &r->t0;

    r->receipt.task_id = "B1.7";
    r->receipt.batch_id = "B1";
    r->receipt.attempt = 2;
    r->receipt.worker_id = "w1";
    r->receipt.host = "node-17";
    r->receipt.device = &r->device;
    r->receipt.kind = "tune";
    r->receipt.op = "softmax";
    r->receipt.n_params = 2;
    r->receipt.params = r->params;
    r->receipt.status = "ok";
    r->receipt.n_gates = 1;
    r->receipt.gates = r->gates;
    r->receipt.n_timings = 1;
    r->receipt.timings = r->timings;
    r->receipt.started_at_ms = 1796063473123ull;
}

static uint8_t *s_pack (Ak__Envelope *env, size_t *size)
{
    uint8_t *data = NULL;
    assert_int_equal (ak_envelope_pack (env, &data, size), 0);
    assert_non_null (data);
    return data;
}

/* The packed envelope of r's receipt (r initialised by the caller). */
static uint8_t *s_receipt_frame (s_receipt_t *r, size_t *size)
{
    Ak__Envelope env = AK__ENVELOPE__INIT;
    env.body_case = AK__ENVELOPE__BODY_RECEIPT;
    env.receipt = &r->receipt;
    return s_pack (&env, size);
}

static Ak__Envelope *s_roundtrip (Ak__Envelope *env)
{
    size_t size = 0;
    uint8_t *data = s_pack (env, &size);
    Ak__Envelope *out = NULL;
    ak_err_t err = { 0 };
    int rc = ak_envelope_unpack (data, size, AK_MAX_MSG_SIZE, &out, &err);
    if (rc)
        fail_msg ("unpack: %s", err.msg);
    free (data);
    assert_int_equal (out->version, AK_PROTOCOL_VERSION);
    assert_int_equal (out->body_case, env->body_case);
    assert_string_equal (ak_envelope_kind (out), ak_envelope_kind (env));
    return out;
}

/* -------------------------------------------------------------- tests */

static void test_roundtrip_each_kind (void **state)
{
    (void) state;
    Ak__Envelope env = AK__ENVELOPE__INIT;
    Ak__Envelope *out;
    env.seq = 99;

    Ak__Hello hello = AK__HELLO__INIT;
    char *backends[] = { "host", "cuda" };
    Ak__Device dev = AK__DEVICE__INIT;
    Ak__Device *devs[] = { &dev };
    Ak__TaskRef ref = AK__TASK_REF__INIT;
    Ak__TaskRef *refs[] = { &ref };
    dev.name = "H200";
    dev.slots = 2;
    ref.task_id = "B1.3";
    ref.attempt = 1;
    hello.worker_id = "w1";
    hello.host = "node-1";
    hello.pid = 1234;
    hello.n_backends = 2;
    hello.backends = backends;
    hello.n_devices = 1;
    hello.devices = devs;
    hello.n_running = 1;
    hello.running = refs;
    hello.slots = 2;
    env.body_case = AK__ENVELOPE__BODY_HELLO;
    env.hello = &hello;
    out = s_roundtrip (&env);
    assert_string_equal (ak_envelope_kind (out), "hello");
    assert_int_equal (out->seq, 99);
    assert_string_equal (out->hello->worker_id, "w1");
    assert_int_equal (out->hello->n_backends, 2);
    assert_string_equal (out->hello->backends[1], "cuda");
    assert_string_equal (out->hello->devices[0]->name, "H200");
    assert_string_equal (out->hello->running[0]->task_id, "B1.3");
    ak_envelope_free (&out);
    assert_null (out);
    ak_envelope_free (&out);

    Ak__Heartbeat hb = AK__HEARTBEAT__INIT;
    hb.credits = 3;
    env.body_case = AK__ENVELOPE__BODY_HEARTBEAT;
    env.heartbeat = &hb;
    out = s_roundtrip (&env);
    assert_string_equal (ak_envelope_kind (out), "heartbeat");
    assert_int_equal (out->heartbeat->credits, 3);
    ak_envelope_free (&out);

    /* An empty body message is still a body. */
    Ak__Heartbeat empty_hb = AK__HEARTBEAT__INIT;
    env.heartbeat = &empty_hb;
    out = s_roundtrip (&env);
    assert_non_null (out->heartbeat);
    ak_envelope_free (&out);

    Ak__Assign as = AK__ASSIGN__INIT;
    Ak__Source src = AK__SOURCE__INIT;
    Ak__Policy pol = AK__POLICY__INIT;
    src.name = "k.c";
    src.text = "int x;";
    pol.seed = UINT64_MAX;
    pol.rsd_target = 0.005;
    as.task_id = "B1.7";
    as.kind = "tune";
    as.candidate = &src;
    as.policy = &pol;
    env.body_case = AK__ENVELOPE__BODY_ASSIGN;
    env.assign = &as;
    out = s_roundtrip (&env);
    assert_string_equal (ak_envelope_kind (out), "assign");
    assert_string_equal (out->assign->candidate->text, "int x;");
    assert_null (out->assign->baseline);
    assert_true (out->assign->policy->seed == UINT64_MAX);
    ak_envelope_free (&out);

    Ak__TaskStarted st = AK__TASK_STARTED__INIT;
    st.task_id = "B1.7";
    st.device = 1;
    env.body_case = AK__ENVELOPE__BODY_STARTED;
    env.started = &st;
    out = s_roundtrip (&env);
    assert_string_equal (ak_envelope_kind (out), "started");
    assert_int_equal (out->started->device, 1);
    ak_envelope_free (&out);

    s_receipt_t r;
    s_receipt_init (&r);
    env.body_case = AK__ENVELOPE__BODY_RECEIPT;
    env.receipt = &r.receipt;
    out = s_roundtrip (&env);
    assert_string_equal (ak_envelope_kind (out), "receipt");
    assert_string_equal (out->receipt->device->device_class, "cpu-x86");
    assert_int_equal (out->receipt->params[1]->value, -4);
    assert_int_equal (out->receipt->timings[0]->workload->dims[1], 4096);
    assert_true (out->receipt->timings[0]->candidate->median_us == 12.5);
    ak_envelope_free (&out);

    Ak__Ack ack = AK__ACK__INIT;
    ack.task_id = "B1.7";
    ack.receipt_id = "R42";
    ack.duplicate = 1;
    env.body_case = AK__ENVELOPE__BODY_ACK;
    env.ack = &ack;
    out = s_roundtrip (&env);
    assert_string_equal (ak_envelope_kind (out), "ack");
    assert_true (out->ack->duplicate);
    ak_envelope_free (&out);

    Ak__Disconnect dis = AK__DISCONNECT__INIT;
    dis.reason = "unknown worker";
    env.body_case = AK__ENVELOPE__BODY_DISCONNECT;
    env.disconnect = &dis;
    out = s_roundtrip (&env);
    assert_string_equal (ak_envelope_kind (out), "disconnect");
    assert_string_equal (out->disconnect->reason, "unknown worker");
    ak_envelope_free (&out);

    Ak__ClientRequest req = AK__CLIENT_REQUEST__INIT;
    char *args[] = { "B1" };
    req.verb = "status";
    req.n_args = 1;
    req.args = args;
    env.body_case = AK__ENVELOPE__BODY_REQUEST;
    env.request = &req;
    out = s_roundtrip (&env);
    assert_string_equal (ak_envelope_kind (out), "request");
    assert_string_equal (out->request->args[0], "B1");
    ak_envelope_free (&out);

    Ak__ClientReply rep = AK__CLIENT_REPLY__INIT;
    rep.code = AK_ENOTFOUND;
    rep.error = "no batch B9";
    env.body_case = AK__ENVELOPE__BODY_REPLY;
    env.reply = &rep;
    out = s_roundtrip (&env);
    assert_string_equal (ak_envelope_kind (out), "reply");
    assert_int_equal (out->reply->code, AK_ENOTFOUND);
    ak_envelope_free (&out);

    Ak__Envelope none = AK__ENVELOPE__INIT;
    assert_string_equal (ak_envelope_kind (&none), "none");
    uint8_t *data = NULL;
    size_t size = 0;
    assert_int_equal (ak_envelope_pack (&none, &data, &size), AK_EINVAL);
    assert_null (data);
}

/* Every prefix of a valid frame is rejected or decodes to a valid envelope. */
static void test_truncated (void **state)
{
    (void) state;
    s_receipt_t r;
    s_receipt_init (&r);
    size_t size = 0;
    uint8_t *data = s_receipt_frame (&r, &size);
    assert_true (size > 100);
    int rejected = 0;
    for (size_t n = 0; n < size; n++) {
        /* A fresh copy of exactly n bytes so ASan sees any over-read. */
        uint8_t *copy = malloc (n ? n : 1);
        memcpy (copy, data, n);
        Ak__Envelope *out = NULL;
        ak_err_t err = { 0 };
        int rc = ak_envelope_unpack (copy, n, AK_MAX_MSG_SIZE, &out, &err);
        if (rc) {
            assert_null (out);
            assert_true (rc == AK_EPROTO || rc == AK_EVERSION);
            assert_true (err.msg[0] != '\0');
            rejected++;
        }
        else {
            assert_int_equal (out->version, AK_PROTOCOL_VERSION);
            assert_int_not_equal (out->body_case, AK__ENVELOPE__BODY__NOT_SET);
            ak_envelope_free (&out);
        }
        free (copy);
    }
    assert_true (rejected > 0);
    /* Size 0 and NULL data. */
    Ak__Envelope *out = NULL;
    ak_err_t err;
    assert_int_equal (ak_envelope_unpack (data, 0, AK_MAX_MSG_SIZE, &out, &err), AK_EPROTO);
    assert_int_equal (ak_envelope_unpack (NULL, 10, AK_MAX_MSG_SIZE, &out, &err), AK_EPROTO);
    /* A one-byte-short frame is malformed, with its size in the message. */
    assert_int_equal (ak_envelope_unpack (data, size - 1, AK_MAX_MSG_SIZE, &out, &err), AK_EPROTO);
    char expect[64];
    snprintf (expect, sizeof expect, "malformed envelope (%zu bytes)", size - 1);
    assert_string_equal (err.msg, expect);
    free (data);
}

static void test_oversized (void **state)
{
    (void) state;
    Ak__Envelope env = AK__ENVELOPE__INIT;
    Ak__Disconnect dis = AK__DISCONNECT__INIT;
    dis.reason = "bye";
    env.body_case = AK__ENVELOPE__BODY_DISCONNECT;
    env.disconnect = &dis;
    size_t size = 0;
    uint8_t *data = s_pack (&env, &size);
    Ak__Envelope *out = NULL;
    ak_err_t err;
    assert_int_equal (ak_envelope_unpack (data, size, size - 1, &out, &err), AK_ETOOBIG);
    assert_null (out);
    assert_int_equal (ak_envelope_unpack (data, size, size, &out, &err), 0);
    ak_envelope_free (&out);
    free (data);

    /* Over the global limit, whatever max_size says. */
    size_t big = AK_MAX_MSG_SIZE + 1;
    uint8_t *junk = calloc (1, big);
    assert_int_equal (ak_envelope_unpack (junk, big, SIZE_MAX, &out, &err), AK_ETOOBIG);
    free (junk);

    /* Packing something over the limit is refused. */
    char *text = malloc (AK_MAX_MSG_SIZE + 1);
    memset (text, 'a', AK_MAX_MSG_SIZE);
    text[AK_MAX_MSG_SIZE] = '\0';
    dis.reason = text;
    data = NULL;
    assert_int_equal (ak_envelope_pack (&env, &data, &size), AK_ETOOBIG);
    assert_null (data);

    /* A string over AK_MAX_STRING inside the size limit is refused on unpack. */
    text[AK_MAX_STRING + 1] = '\0';
    env.version = AK_PROTOCOL_VERSION;
    size = ak__envelope__get_packed_size (&env);
    data = malloc (size);
    ak__envelope__pack (&env, data);
    assert_int_equal (ak_envelope_unpack (data, size, AK_MAX_MSG_SIZE, &out, &err), AK_ETOOBIG);
    assert_non_null (strstr (err.msg, "disconnect.reason"));
    free (data);
    /* ... and exactly AK_MAX_STRING is fine. */
    text[AK_MAX_STRING] = '\0';
    data = s_pack (&env, &size);
    assert_int_equal (ak_envelope_unpack (data, size, AK_MAX_MSG_SIZE, &out, &err), 0);
    ak_envelope_free (&out);
    free (data);
    free (text);
}

static void test_garbage (void **state)
{
    (void) state;
    uint8_t buf[512];
    int accepted = 0;
    for (uint64_t i = 0; i < 4000; i++) {
        uint32_t w[4];
        ak_philox4x32 (7, 1, i, w);
        size_t n = 1 + w[0] % sizeof buf;
        for (size_t k = 0; k < n; k += 16) {
            uint32_t b[4];
            ak_philox4x32 (7, 2 + i, k, b);
            memcpy (buf + k, b, n - k < 16 ? n - k : 16);
        }
        /* Some start like a real envelope so the parser gets deeper. */
        if (i % 2) {
            buf[0] = 0x08;          /* field 1 varint: version */
            buf[1] = 0x01;
            if (n > 2)
                buf[2] = (uint8_t) (0x52 + (w[1] % 8) * 8);   /* fields 10..17, length-delimited */
        }
        uint8_t *copy = malloc (n);
        memcpy (copy, buf, n);
        Ak__Envelope *out = NULL;
        ak_err_t err;
        int rc = ak_envelope_unpack (copy, n, AK_MAX_MSG_SIZE, &out, &err);
        if (rc == 0) {
            assert_int_equal (out->version, AK_PROTOCOL_VERSION);
            assert_non_null (ak_envelope_kind (out));
            accepted++;
            ak_envelope_free (&out);
        }
        else {
            assert_true (rc == AK_EPROTO || rc == AK_EVERSION || rc == AK_ETOOBIG);
            assert_null (out);
        }
        free (copy);
    }
    (void) accepted;
}

static void test_version_and_body (void **state)
{
    (void) state;
    Ak__Envelope env = AK__ENVELOPE__INIT;
    Ak__Heartbeat hb = AK__HEARTBEAT__INIT;
    env.body_case = AK__ENVELOPE__BODY_HEARTBEAT;
    env.heartbeat = &hb;
    env.version = 2;
    size_t size = ak__envelope__get_packed_size (&env);
    uint8_t *data = malloc (size);
    ak__envelope__pack (&env, data);
    Ak__Envelope *out = NULL;
    ak_err_t err;
    assert_int_equal (ak_envelope_unpack (data, size, AK_MAX_MSG_SIZE, &out, &err), AK_EVERSION);
    assert_null (out);
    assert_non_null (strstr (err.msg, "version 2"));
    assert_non_null (strstr (err.msg, "version 1"));
    free (data);

    /* Version 0 (field absent) is also wrong. */
    env.version = 0;
    size = ak__envelope__get_packed_size (&env);
    data = malloc (size);
    ak__envelope__pack (&env, data);
    assert_int_equal (ak_envelope_unpack (data, size, AK_MAX_MSG_SIZE, &out, &err), AK_EVERSION);
    free (data);

    /* Right version, no body. */
    Ak__Envelope nobody = AK__ENVELOPE__INIT;
    nobody.version = AK_PROTOCOL_VERSION;
    nobody.seq = 5;
    size = ak__envelope__get_packed_size (&nobody);
    data = malloc (size);
    ak__envelope__pack (&nobody, data);
    assert_int_equal (ak_envelope_unpack (data, size, AK_MAX_MSG_SIZE, &out, &err), AK_EPROTO);
    assert_non_null (strstr (err.msg, "no body"));
    free (data);
}

static void test_repeated_limit (void **state)
{
    (void) state;
    size_t n = AK_MAX_REPEATED + 1;
    char **names = malloc (n * sizeof *names);
    for (size_t i = 0; i < n; i++)
        names[i] = "x";
    Ak__Hello hello = AK__HELLO__INIT;
    hello.worker_id = "w1";
    hello.n_backends = n;
    hello.backends = names;
    Ak__Envelope env = AK__ENVELOPE__INIT;
    env.body_case = AK__ENVELOPE__BODY_HELLO;
    env.hello = &hello;
    size_t size = 0;
    uint8_t *data = s_pack (&env, &size);
    Ak__Envelope *out = NULL;
    ak_err_t err;
    assert_int_equal (ak_envelope_unpack (data, size, AK_MAX_MSG_SIZE, &out, &err), AK_ETOOBIG);
    assert_null (out);
    assert_non_null (strstr (err.msg, "hello.backends"));
    free (data);

    /* Nested: a workload's dims inside a receipt's timings. */
    hello.n_backends = AK_MAX_REPEATED;
    data = s_pack (&env, &size);
    assert_int_equal (ak_envelope_unpack (data, size, AK_MAX_MSG_SIZE, &out, &err), 0);
    ak_envelope_free (&out);
    free (data);
    free (names);

    s_receipt_t r;
    s_receipt_init (&r);
    int64_t *dims = calloc (n, sizeof *dims);
    r.wl.n_dims = n;
    r.wl.dims = dims;
    env.body_case = AK__ENVELOPE__BODY_RECEIPT;
    env.receipt = &r.receipt;
    data = s_pack (&env, &size);
    assert_int_equal (ak_envelope_unpack (data, size, AK_MAX_MSG_SIZE, &out, &err), AK_ETOOBIG);
    assert_non_null (strstr (err.msg, "receipt.timings[0].workload.dims"));
    free (data);
    free (dims);
}

static void test_send (void **state)
{
    (void) state;
    zsock_t *router = zsock_new (ZMQ_ROUTER);
    assert_non_null (router);
    zsock_set_router_mandatory (router, 1);
    assert_int_equal (zsock_bind (router, "inproc://ak-envelope-test"), 0);
    zsock_t *dealer = zsock_new (ZMQ_DEALER);
    assert_non_null (dealer);
    zsock_set_identity (dealer, "peer-1");
    assert_int_equal (zsock_connect (dealer, "inproc://ak-envelope-test"), 0);

    Ak__Envelope env = AK__ENVELOPE__INIT;
    Ak__Heartbeat hb = AK__HEARTBEAT__INIT;
    hb.credits = 4;
    env.body_case = AK__ENVELOPE__BODY_HEARTBEAT;
    env.heartbeat = &hb;
    assert_int_equal (ak_envelope_send (dealer, NULL, 0, &env), 0);

    zmsg_t *msg = zmsg_recv (router);
    assert_non_null (msg);
    assert_int_equal (zmsg_size (msg), 2);
    zframe_t *id = zmsg_pop (msg);
    zframe_t *body = zmsg_pop (msg);
    assert_true (zframe_streq (id, "peer-1"));
    Ak__Envelope *out = NULL;
    ak_err_t err;
    assert_int_equal (ak_envelope_unpack (zframe_data (body), zframe_size (body),
                                          AK_MAX_MSG_SIZE, &out, &err), 0);
    assert_int_equal (out->heartbeat->credits, 4);
    ak_envelope_free (&out);

    /* Reply through the ROUTER with the routing id. */
    hb.credits = 9;
    assert_int_equal (ak_envelope_send (router, zframe_data (id), zframe_size (id), &env), 0);
    zframe_t *reply = zframe_recv (dealer);
    assert_non_null (reply);
    assert_int_equal (ak_envelope_unpack (zframe_data (reply), zframe_size (reply),
                                          AK_MAX_MSG_SIZE, &out, &err), 0);
    assert_int_equal (out->heartbeat->credits, 9);
    ak_envelope_free (&out);

    /* Unknown peer on a mandatory ROUTER. */
    assert_int_equal (ak_envelope_send (router, "nobody", 6, &env), AK_EUNAVAIL);
    /* Nothing to send. */
    Ak__Envelope none = AK__ENVELOPE__INIT;
    assert_int_equal (ak_envelope_send (dealer, NULL, 0, &none), AK_EINVAL);

    zframe_destroy (&reply);
    zframe_destroy (&id);
    zframe_destroy (&body);
    zmsg_destroy (&msg);
    zsock_destroy (&dealer);
    zsock_destroy (&router);
}

/*  Regression (tests/fuzz/fuzz_envelope): a DISCONNECT body occurring
    three times with an unknown field in it decoded, but protobuf-c packed
    the merged unknown fields into bytes that did not decode again.  The
    decoder now drops unknown fields, so what decodes packs and decodes. */
static void test_fuzz_unknown_fields_merged (void **state)
{
    (void) state;
    static const uint8_t frame[] = {
        0x08, 0x01, 0x82, 0x01, 0x11, 0x0a, 0x06, 0x88, 0x74, 0x61, 0x74, 0x75,
        0x73, 0x12, 0x07, 0x42, 0x30, 0x30, 0x34, 0x30, 0x30, 0x31, 0x08, 0x01,
        0x82, 0x01, 0x11, 0x0a, 0x06, 0x88, 0x74, 0x61, 0x74, 0x75, 0x73, 0x12,
        0x07, 0x42, 0x30, 0x30, 0x34, 0x30, 0x08, 0x01, 0x82, 0x00, 0x11, 0x0a,
        0x06, 0x88, 0x74, 0x61, 0x74, 0x75, 0x73, 0x12, 0x07, 0x42, 0x30, 0x30,
        0x34, 0x30, 0x30, 0x31, 0x30, 0x31 };
    Ak__Envelope *env = NULL, *again = NULL;
    ak_err_t err = { 0 };
    assert_int_equal (ak_envelope_unpack (frame, sizeof frame, 0, &env, &err), 0);
    assert_int_equal (env->body_case, AK__ENVELOPE__BODY_DISCONNECT);
    assert_int_equal (env->disconnect->base.n_unknown_fields, 0);
    uint8_t *buf = NULL;
    size_t len = 0;
    assert_int_equal (ak_envelope_pack (env, &buf, &len), 0);
    assert_int_equal (ak_envelope_unpack (buf, len, 0, &again, &err), 0);
    assert_int_equal (again->body_case, AK__ENVELOPE__BODY_DISCONNECT);
    free (buf);
    ak_envelope_free (&again);
    ak_envelope_free (&env);
}

/* The slice of a body in a packed envelope: the receipt's own packing,
   nothing for an absent or a repeated field, never a read past a
   truncated frame. */
static void test_field_bytes (void **state)
{
    (void) state;
    s_receipt_t r;
    s_receipt_init (&r);
    size_t size = 0;
    uint8_t *data = s_receipt_frame (&r, &size);
    const uint8_t *p = NULL;
    size_t n = 0;
    assert_int_equal (ak_envelope_field_bytes (data, size, AK__ENVELOPE__BODY_RECEIPT, &p, &n), 0);
    size_t want = ak__receipt__get_packed_size (&r.receipt);
    uint8_t *packed = malloc (want);
    assert_int_equal (ak__receipt__pack (&r.receipt, packed), want);
    assert_int_equal (n, want);
    assert_memory_equal (p, packed, want);
    free (packed);
    assert_int_equal (ak_envelope_field_bytes (data, size, AK__ENVELOPE__BODY_ASSIGN, &p, &n), AK_ENOTFOUND);

    for (size_t len = 0; len < size; len++) {
        uint8_t *copy = malloc (len ? len : 1);
        memcpy (copy, data, len);
        int rc = ak_envelope_field_bytes (copy, len, AK__ENVELOPE__BODY_RECEIPT, &p, &n);
        assert_true (rc == 0 || rc == AK_EPROTO || rc == AK_ENOTFOUND);
        if (rc == 0)
            assert_true (p >= copy && p + n <= copy + len);
        free (copy);
    }
    uint8_t *data_copy = data;
    size_t size_copy = size;

    /* a field this build does not know, inside the receipt: counted and
       dropped, so the coordinator never stores the receipt's bytes as they
       came (coord.c) */
    uint8_t *rbuf = malloc (want + 3);
    assert_int_equal (ak__receipt__pack (&r.receipt, rbuf), want);
    rbuf[want] = 0x98;                  /* field 99, varint */
    rbuf[want + 1] = 0x06;
    rbuf[want + 2] = 0x01;
    size_t rlen = want + 3;
    uint8_t *frame = malloc (rlen + 16);
    size_t fl = 0;
    frame[fl++] = 0x08;                 /* version */
    frame[fl++] = AK_PROTOCOL_VERSION;
    frame[fl++] = 0x72;                 /* field 14 (receipt), length-delimited */
    for (size_t v = rlen; ; v >>= 7) {
        frame[fl++] = (uint8_t) (v >= 0x80 ? (v & 0x7f) | 0x80 : v);
        if (v < 0x80)
            break;
    }
    memcpy (frame + fl, rbuf, rlen);
    fl += rlen;
    Ak__Envelope *out = NULL;
    ak_err_t err = { 0 };
    size_t unknown = 0;
    assert_int_equal (ak_envelope_unpack_counted (frame, fl, 0, 0, &out, &unknown, NULL, &err), 0);
    assert_int_equal (unknown, 1);
    assert_int_equal (out->receipt->base.n_unknown_fields, 0);
    assert_string_equal (out->receipt->task_id, r.receipt.task_id);
    ak_envelope_free (&out);
    assert_int_equal (ak_envelope_unpack_counted (data_copy, size_copy, 0, 0, &out, &unknown, NULL, &err), 0);
    assert_int_equal (unknown, 0);
    ak_envelope_free (&out);
    free (frame);
    free (rbuf);
    free (data_copy);

    /* a body sent twice is merged by the parser: no single slice is it */
    static const uint8_t twice[] = { 0x08, 0x01, 0x82, 0x01, 0x02, 0x0a, 0x00,
                                     0x82, 0x01, 0x02, 0x0a, 0x00 };
    assert_int_equal (ak_envelope_field_bytes (twice, sizeof twice, AK__ENVELOPE__BODY_DISCONNECT, &p, &n),
                      AK_ENOTFOUND);
    assert_int_equal (ak_envelope_field_bytes (twice, 1, AK__ENVELOPE__BODY_DISCONNECT, &p, &n), AK_EPROTO);
}

/* ak_pbw_validate against protobuf-c: whatever the validator passes with
   nothing unknown, protobuf-c must decode (else the coordinator would
   store receipts that no longer decode); it may refuse more. */
static bool s_pbc_takes (const uint8_t *data, size_t len)
{
    Ak__Receipt *r = ak__receipt__unpack (NULL, len, data);
    ak__receipt__free_unpacked (r, NULL);
    return r != NULL;
}

static void test_validate (void **state)
{
    (void) state;
    s_receipt_t r;
    s_receipt_init (&r);
    size_t len = ak__receipt__get_packed_size (&r.receipt);
    uint8_t *good = malloc (len + 16);
    assert_int_equal (ak__receipt__pack (&r.receipt, good), len);
    size_t unknown = 0;
    assert_int_equal (ak_pbw_validate (&ak__receipt__descriptor, good, len, 31, AK_MAX_STRING, AK_MAX_REPEATED,
                                       &unknown), 0);
    assert_int_equal (unknown, 0);
    /* a field it does not know is counted, not refused */
    memcpy (good + len, (const uint8_t[]) { 0x98, 0x06, 0x01 }, 3);
    assert_int_equal (ak_pbw_validate (&ak__receipt__descriptor, good, len + 3, 31, AK_MAX_STRING,
                                       AK_MAX_REPEATED, &unknown), 0);
    assert_int_equal (unknown, 1);

    /* what protobuf-c refuses: a string (task_id, 2) sent as a varint, a
       length in six bytes, a tag in six, a cut-off field, a packed run of
       a fixed type that does not split */
    static const uint8_t bad[][8] = {
        { 0x10, 0x01 },
        { 0x12, 0x81, 0x80, 0x80, 0x80, 0x80, 0x00, 0x41 },
        { 0x92, 0x80, 0x80, 0x80, 0x80, 0x00, 0x00 },
        { 0x12, 0x05, 0x41 },
    };
    static const size_t bad_len[] = { 2, 8, 7, 3 };
    for (size_t i = 0; i < sizeof bad_len / sizeof bad_len[0]; i++) {
        assert_false (s_pbc_takes (bad[i], bad_len[i]));
        unknown = 0;
        assert_int_equal (ak_pbw_validate (&ak__receipt__descriptor, bad[i], bad_len[i], 31, AK_MAX_STRING,
                                           AK_MAX_REPEATED, &unknown), -1);
    }
    /* limits: a string over max_string, too deep */
    assert_int_equal (ak_pbw_validate (&ak__receipt__descriptor, good, len, 31, 2, AK_MAX_REPEATED, &unknown),
                      -1);
    assert_int_equal (ak_pbw_validate (&ak__receipt__descriptor, good, len, 0, AK_MAX_STRING, AK_MAX_REPEATED,
                                       &unknown), -1);

    /* mutations of the good receipt: one to four bytes changed, or cut */
    uint8_t *buf = malloc (len + 3);
    size_t passed = 0, pbc = 0;
    for (uint64_t i = 0; i < 40000; i++) {
        memcpy (buf, good, len);       /* the good receipt, without the unknown field */
        size_t n = len;
        int changes = ak_rng_uniform (7, 1, i) < 0.8 ? 1 : 2;
        for (int k = 0; k < changes; k++) {
            size_t at = (size_t) ak_rng_range (7, 2 + (uint64_t) k, i, 0, (double) n);
            buf[at < n ? at : n - 1] = (uint8_t) ak_rng_range (7, 10 + (uint64_t) k, i, 0, 256);
        }
        if (ak_rng_uniform (7, 20, i) < 0.1)
            n = (size_t) ak_rng_range (7, 21, i, 0, (double) n);
        uint8_t *copy = malloc (n ? n : 1);         /* exactly n bytes: ASan sees any over-read */
        memcpy (copy, buf, n);
        pbc += s_pbc_takes (copy, n);
        unknown = 0;
        if (ak_pbw_validate (&ak__receipt__descriptor, copy, n, 31, AK_MAX_STRING, AK_MAX_REPEATED, &unknown) == 0
            && unknown == 0) {
            passed++;
            if (!s_pbc_takes (copy, n)) {
                fprintf (stderr, "mutation %llu passed the validator, protobuf-c refuses it\n",
                         (unsigned long long) i);
                fail ();
            }
        }
        free (copy);
    }
    /* the check saw many pass, and the validator refuses few of those
       protobuf-c takes (they then go the full way, nothing lost) */
    assert_true (passed > 10000);
    assert_true (passed > pbc * 9 / 10);
    free (buf);
    free (good);
}

/* The receipt limits (receipt_limits.h): each bound and its message,
   on the bytes; a receipt at every bound passes. */
static void test_receipt_limits (void **state)
{
    (void) state;
    char why[320];
    Ak__Receipt r = AK__RECEIPT__INIT;
    r.task_id = "B000001.0001";
    r.status = "ok";
    Ak__GateResult g[AK_RECEIPT_MAX_GATES + 1], *gp[AK_RECEIPT_MAX_GATES + 1];
    char *detail = ak_calloc (1, AK_RECEIPT_MAX_DETAIL + 2);
    memset (detail, 'd', AK_RECEIPT_MAX_DETAIL);
    for (size_t i = 0; i <= AK_RECEIPT_MAX_GATES; i++) {
        ak__gate_result__init (&g[i]);
        g[i].stage = "smoke";
        g[i].detail = detail;
        gp[i] = &g[i];
    }
    r.gates = gp;
    r.n_gates = AK_RECEIPT_MAX_GATES;
    char *log = ak_calloc (1, AK_RECEIPT_MAX_LOG + 2);
    memset (log, 'l', AK_RECEIPT_MAX_LOG);
    r.compile_log = log;
    assert_int_equal (ak_receipt_check_msg (&r, why, sizeof why), 0);

    r.n_gates = AK_RECEIPT_MAX_GATES + 1;
    assert_int_equal (ak_receipt_check_msg (&r, why, sizeof why), AK_ETOOBIG);
    assert_string_equal (why, "receipt for task B000001.0001: more than 16 gate entries (at most 16)");
    r.n_gates = 1;
    detail[AK_RECEIPT_MAX_DETAIL] = 'd';
    assert_int_equal (ak_receipt_check_msg (&r, why, sizeof why), AK_ETOOBIG);
    assert_string_equal (why, "receipt for task B000001.0001: gates[0].detail of 4097 bytes (at most 4096)");
    detail[AK_RECEIPT_MAX_DETAIL] = '\0';
    log[AK_RECEIPT_MAX_LOG] = 'l';
    assert_int_equal (ak_receipt_check_msg (&r, why, sizeof why), AK_ETOOBIG);
    assert_non_null (strstr (why, "262145 bytes of compile_log (at most 262144)"));
    log[AK_RECEIPT_MAX_LOG] = '\0';

    /* the whole size, before anything else */
    char *big = ak_calloc (1, AK_RECEIPT_MAX_BYTES + 1);
    memset (big, 'b', AK_RECEIPT_MAX_BYTES);
    r.reason = big;
    assert_int_equal (ak_receipt_check_msg (&r, why, sizeof why), AK_ETOOBIG);
    assert_non_null (strstr (why, "bytes (at most 4194304)"));
    big[AK_RECEIPT_MAX_REASON + 1] = '\0';
    assert_int_equal (ak_receipt_check_msg (&r, why, sizeof why), AK_ETOOBIG);
    assert_non_null (strstr (why, "4097 bytes of reason (at most 4096)"));

    /* bytes that do not parse */
    const uint8_t junk[] = { 0x82, 0x01, 0xff };
    assert_int_equal (ak_receipt_check (junk, sizeof junk, "T", why, sizeof why), AK_EPROTO);
    free (big);
    free (log);
    free (detail);
}

int main (void)
{
    zsys_init ();
    zsys_set_logstream (NULL);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test (test_roundtrip_each_kind),
        cmocka_unit_test (test_truncated),
        cmocka_unit_test (test_oversized),
        cmocka_unit_test (test_garbage),
        cmocka_unit_test (test_version_and_body),
        cmocka_unit_test (test_repeated_limit),
        cmocka_unit_test (test_send),
        cmocka_unit_test (test_fuzz_unknown_fields_merged),
        cmocka_unit_test (test_field_bytes),
        cmocka_unit_test (test_validate),
        cmocka_unit_test (test_receipt_limits),
    };
    int rc = cmocka_run_group_tests (tests, NULL, NULL);
    zsys_shutdown ();
    return rc;
}
