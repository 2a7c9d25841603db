/*  tests/unit/test_discover_trace.c: reading discover traces
    (discover/trace.c) and attributing kernels to ranges
    (discover/attribute.c).

    The fixtures in tests/data/discover/ are worked by hand:
    two_steps.jsonl has two threads with interleaved ranges, nested module
    and aten ranges, a CUDA graph captured before the window (one node in a
    range, one outside any), a kernel launched before the window and one
    whose launch is missing; crashed.jsonl is the same run cut off by a
    signal mid-line. */
#include "support.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attribute.h"
#include "trace.h"
#include "util.h"

static akd_trace_t *s_load (const char *name)
{
    char *rel = ak_sprintf ("tests/data/discover/%s", name);
    char *path = ak_test_src (rel);
    akd_trace_t *t = NULL;
    ak_err_t err = { 0 };
    if (akd_trace_load (path, &t, &err) != 0)
        fail_msg ("%s: %s", path, err.msg);
    free (rel);
    free (path);
    return t;
}

static const akd_kattr_t *s_kernel (const akd_attr_t *a, uint32_t corr, uint64_t gnode)
{
    for (size_t i = 0; i < a->nkernels; i++)
        if (a->kernels[i].k->corr == corr && a->kernels[i].k->gnode == gnode)
            return &a->kernels[i];
    return NULL;
}

/* The chain of range names from the innermost out, joined by " < ". */
static char *s_chain (const akd_attr_t *a, int r)
{
    char *s = ak_strdup ("");
    for (; r >= 0; r = a->ranges[r].parent) {
        char *n = ak_sprintf ("%s%s%s", s, *s ? " < " : "", a->ranges[r].name);
        free (s);
        s = n;
    }
    return s;
}

static void s_expect_chain (const akd_attr_t *a, uint32_t corr, uint64_t gnode, const char *want)
{
    const akd_kattr_t *k = s_kernel (a, corr, gnode);
    if (!k)
        fail_msg ("kernel corr %u not kept", corr);
    char *got = s_chain (a, k->range);
    if (strcmp (got, want) != 0)
        fail_msg ("kernel corr %u: attributed to '%s', want '%s'", corr, got, want);
    free (got);
}

static void test_decode_fixture (void **state)
{
    (void) state;
    akd_trace_t *t = s_load ("two_steps.jsonl");
    assert_int_equal (t->version, 1);
    assert_string_equal (t->step_range, "step");
    assert_int_equal (t->warmup_steps, 1);
    assert_int_equal (t->steps, 2);
    assert_string_equal (t->driver, "580.65.06");
    assert_string_equal (t->nvrtc, "13.0");
    assert_int_equal (t->ndevices, 1);
    assert_string_equal (t->devices[0].name, "NVIDIA H200");
    assert_int_equal (t->devices[0].cc_major, 9);
    assert_int_equal (t->nkernels, 13);
    assert_int_equal (t->ngnodes, 4);
    assert_int_equal (t->gnodes[0].nstack, 2);
    assert_string_equal (t->gnodes[0].stack[0], "capture");
    const akd_kernel_t *k = &t->kernels[4];
    assert_int_equal (k->corr, 30);
    assert_int_equal (k->end - k->start, 20000);
    assert_int_equal (k->grid[0], 128);
    assert_int_equal (k->block[0], 256);
    assert_int_equal (k->smem_dynamic, 4096);
    assert_int_equal (k->regs, 32);
    assert_true (t->ended);
    assert_false (akd_trace_partial (t));
    assert_int_equal (t->bad_lines, 0);
    assert_true (t->window_opened && t->window_closed);
    assert_int_equal (t->window_open_ts, 1000000);
    akd_trace_destroy (&t);
    akd_trace_destroy (&t);                  /* twice is fine */
}

static void test_attribution (void **state)
{
    (void) state;
    akd_trace_t *t = s_load ("two_steps.jsonl");
    akd_attr_t *a = NULL;
    ak_err_t err = { 0 };
    assert_int_equal (akd_attribute (t, &a, &err), 0);
    /* corr 5 was launched before the window opened: left out, counted */
    assert_int_equal (a->outside, 1);
    assert_null (s_kernel (a, 5, 0));
    assert_int_equal (a->nkernels, 12);
    /* nested ranges: the innermost open at launch */
    s_expect_chain (a, 10, 0, "aten::pow, seq = 1, sizes = [[1, 512, 2048], []] < module::LlamaRMSNorm, "
                             "sizes = [[1, 512, 2048]], dtypes = [bfloat16] < step");
    s_expect_chain (a, 30, 0, "aten::mm, seq = 4, sizes = [[512, 2048], [2048, 6144]] < aten::linear, seq = 3, "
                             "sizes = [[1, 512, 2048], [6144, 2048], []] < module::Linear, sizes = [[1, 512, 2048], "
                             "[6144, 2048]], dtypes = [bfloat16] < step");
    /* several threads: thread 200's launch, made while thread 100 was
       inside module::Linear, belongs to thread 200's own range */
    s_expect_chain (a, 90, 0, "aten::softmax, seq = 9, op_id = 4, sizes = [[64, 32000], []], dtypes = [float16]");
    assert_int_equal (s_kernel (a, 90, 0)->tid, 200);
    /* thread 200's second launch came after its pop: no range */
    assert_int_equal (s_kernel (a, 100, 0)->range, -1);
    /* graph replays: the node captured in a range gets copies of the
       capture ranges, under the range open at the graph launch; the node
       captured outside any range is a labelled graph replay */
    s_expect_chain (a, 70, 80, "aten::addmm, seq = 99, sizes = [[6144], [512, 2048], [2048, 6144]], dtypes = "
                              "[bfloat16, bfloat16, bfloat16] < capture < step");
    const akd_kattr_t *g = s_kernel (a, 70, 80);
    assert_true (a->ranges[g->range].graph);
    assert_non_null (strstr (a->ranges[g->range].key, "[graph]"));
    s_expect_chain (a, 70, 81, "[graph replay 8] < step");
    assert_true (a->ranges[s_kernel (a, 70, 81)->range].synthetic);
    /* a kernel inside the window whose launch was not recorded is kept */
    assert_int_equal (a->no_launch, 1);
    assert_false (s_kernel (a, 55, 0)->launched);
    /* steps: two, 100 us each (push to pop) */
    assert_int_equal (a->steps, 2);
    assert_true (a->step_from_ranges);
    assert_true (a->step_ns == 100000.0);
    assert_int_equal (a->gpu_ns, 81000);
    akd_attr_destroy (&a);
    akd_trace_destroy (&t);
}

static void test_crashed_trace (void **state)
{
    (void) state;
    akd_trace_t *t = s_load ("crashed.jsonl");
    assert_false (t->ended);
    assert_int_equal (t->signal, 11);
    assert_true (akd_trace_partial (t));
    assert_int_equal (t->bad_lines, 2);          /* "not json at all" and the cut-off kernel */
    akd_attr_t *a = NULL;
    ak_err_t err = { 0 };
    assert_int_equal (akd_attribute (t, &a, &err), 0);
    assert_int_equal (a->nkernels, 11);          /* corr 80 never made it */
    assert_int_equal (a->steps, 1);
    akd_attr_destroy (&a);
    akd_trace_destroy (&t);
}

static void s_refused (const char *text, const char *needle)
{
    akd_trace_t *t = NULL;
    ak_err_t err = { 0 };
    assert_int_equal (akd_trace_parse (text, strlen (text), "x.jsonl", &t, &err), AK_EINVAL);
    assert_null (t);
    if (!strstr (err.msg, needle) || !strstr (err.msg, "x.jsonl"))
        fail_msg ("'%s' lacks '%s'", err.msg, needle);
}

static void test_not_a_trace (void **state)
{
    (void) state;
    s_refused ("", "empty");
    s_refused ("{\"t\":\"push\",\"seq\":1,\"tid\":1,\"id\":1,\"name\":\"x\"}\n", "not a discover trace");
    s_refused ("PK\003\004 binary\n", "not a discover trace");
    s_refused ("{\"t\":\"header\",\"version\":2}\n", "version 2");
    akd_trace_t *t = NULL;
    ak_err_t err = { 0 };
    assert_int_equal (akd_trace_load ("/nonexistent/trace.jsonl", &t, &err), AK_ENOTFOUND);
}

/* Records with missing or hostile fields are skipped and counted; the
   rest still attributes. */
static void test_hostile_records (void **state)
{
    (void) state;
    const char *text =
        "{\"t\":\"header\",\"version\":1}\n"
        "{\"t\":\"push\",\"seq\":1,\"tid\":1,\"id\":1}\n"                          /* no name */
        "{\"t\":\"push\",\"seq\":-4,\"tid\":1,\"id\":1,\"name\":\"x\"}\n"          /* negative seq */
        "{\"t\":\"launch\",\"seq\":2,\"tid\":1,\"corr\":99999999999}\n"            /* corr > 32 bits */
        "{\"t\":\"kernel\",\"corr\":1,\"start\":10,\"end\":5,\"grid\":[1,1,1],\"block\":[1,1,1],\"name\":\"k\"}\n"
        "{\"t\":\"kernel\",\"corr\":1,\"start\":10,\"end\":20,\"grid\":[1,1],\"block\":[1,1,1],\"name\":\"k\"}\n"
        "{\"t\":\"gnode\",\"graph\":1,\"node\":5,\"orig\":5,\"stack\":[1,2,\"ok\"]}\n"  /* a node its own origin */
        "{\"t\":\"pop\",\"seq\":3,\"tid\":1}\n"                                     /* pop with nothing open */
        "{\"t\":\"wat\"}\n[1,2]\n\"str\"\n{\"t\":\"push\",\"t\":\"pop\"}\n"
        "{\"t\":\"launch\",\"seq\":4,\"tid\":1,\"corr\":1}\n"
        "{\"t\":\"kernel\",\"corr\":1,\"start\":10,\"end\":20,\"grid\":[1,1,1],\"block\":[1,1,1],\"name\":\"k\","
        "\"graph\":1,\"gnode\":5}\n"
        "{\"t\":\"end\"}\n";
    akd_trace_t *t = NULL;
    ak_err_t err = { 0 };
    assert_int_equal (akd_trace_parse (text, strlen (text), "h.jsonl", &t, &err), 0);
    assert_int_equal (t->bad_lines, 9);
    assert_int_equal (t->nkernels, 1);
    akd_attr_t *a = NULL;
    assert_int_equal (akd_attribute (t, &a, &err), 0);
    assert_int_equal (a->unmatched_pops, 1);
    assert_int_equal (a->nkernels, 1);
    /* the self-cloned node is not followed forever: a labelled replay */
    assert_string_equal (a->ranges[a->kernels[0].range].name, "[graph replay 1]");
    akd_attr_destroy (&a);
    akd_trace_destroy (&t);
}

/* Kernels whose launch is missing: kept only when their correlation id lies
   among the window's launches (ids grow with every call), so a warm-up
   kernel still running when the window opened is not counted in it. */
static void s_window_trace (bool closed, akd_attr_t **a_p, akd_trace_t **t_p)
{
    char *text = ak_sprintf (
        "{\"t\":\"header\",\"version\":1}\n"
        "{\"t\":\"window\",\"state\":\"open\",\"seq\":1,\"ts\":100}\n"
        "{\"t\":\"launch\",\"seq\":2,\"tid\":1,\"corr\":10}\n"
        "{\"t\":\"launch\",\"seq\":3,\"tid\":1,\"corr\":20}\n"
        "%s"
        "{\"t\":\"kernel\",\"corr\":3,\"start\":150,\"end\":160,\"grid\":[1,1,1],\"block\":[1,1,1],\"name\":\"warm\"}\n"
        "{\"t\":\"kernel\",\"corr\":10,\"start\":160,\"end\":170,\"grid\":[1,1,1],\"block\":[1,1,1],\"name\":\"a\"}\n"
        "{\"t\":\"kernel\",\"corr\":15,\"start\":170,\"end\":180,\"grid\":[1,1,1],\"block\":[1,1,1],\"name\":\"b\"}\n"
        "{\"t\":\"kernel\",\"corr\":25,\"start\":180,\"end\":190,\"grid\":[1,1,1],\"block\":[1,1,1],\"name\":\"c\"}\n",
        closed ? "{\"t\":\"window\",\"state\":\"closed\",\"seq\":4,\"ts\":500}\n" : "");
    ak_err_t err = { 0 };
    assert_int_equal (akd_trace_parse (text, strlen (text), "w.jsonl", t_p, &err), 0);
    assert_int_equal (akd_attribute (*t_p, a_p, &err), 0);
    free (text);
}

static void test_window_by_correlation (void **state)
{
    (void) state;
    akd_trace_t *t = NULL;
    akd_attr_t *a = NULL;
    s_window_trace (true, &a, &t);
    assert_null (s_kernel (a, 3, 0));           /* before the window's first launch */
    assert_non_null (s_kernel (a, 10, 0));
    assert_non_null (s_kernel (a, 15, 0));      /* among them: an API we do not hook */
    assert_null (s_kernel (a, 25, 0));          /* after the window's last launch */
    assert_int_equal (a->outside, 2);
    assert_int_equal (a->no_launch, 1);
    akd_attr_destroy (&a);
    akd_trace_destroy (&t);
    /* a window still open at exit has no last launch */
    s_window_trace (false, &a, &t);
    assert_null (s_kernel (a, 3, 0));
    assert_non_null (s_kernel (a, 25, 0));
    assert_int_equal (a->outside, 1);
    akd_attr_destroy (&a);
    akd_trace_destroy (&t);
}

/*  Kernel records CUPTI could not time (start and end 0, seen in a CUDA
    graph's replays on the H100): left out and counted, so neither the
    kernel count nor the step time from the kernels' span (no step ranges
    here: 160 to 190 ns over one step) takes them in. */
static void test_untimed_records (void **state)
{
    (void) state;
    const char *text =
        "{\"t\":\"header\",\"version\":1}\n"
        "{\"t\":\"launch\",\"seq\":1,\"tid\":1,\"corr\":10}\n"
        "{\"t\":\"launch\",\"seq\":2,\"tid\":1,\"corr\":20}\n"
        "{\"t\":\"kernel\",\"corr\":10,\"start\":160,\"end\":170,\"grid\":[1,1,1],\"block\":[1,1,1],\"name\":\"a\"}\n"
        "{\"t\":\"kernel\",\"corr\":10,\"start\":0,\"end\":0,\"grid\":[1,1,1],\"block\":[1,1,1],\"name\":\"a\"}\n"
        "{\"t\":\"kernel\",\"corr\":20,\"start\":180,\"end\":190,\"grid\":[1,1,1],\"block\":[1,1,1],\"name\":\"b\"}\n";
    akd_trace_t *t = NULL;
    akd_attr_t *a = NULL;
    ak_err_t err = { 0 };
    assert_int_equal (akd_trace_parse (text, strlen (text), "u.jsonl", &t, &err), 0);
    assert_int_equal (akd_attribute (t, &a, &err), 0);
    assert_int_equal (t->nkernels, 3);
    assert_int_equal (a->nkernels, 2);
    assert_int_equal (a->untimed, 1);
    assert_int_equal (a->gpu_ns, 20);
    assert_false (a->step_from_ranges);
    assert_true (a->step_ns == 30.0);
    akd_attr_destroy (&a);
    akd_trace_destroy (&t);
}

int main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test (test_decode_fixture),
        cmocka_unit_test (test_untimed_records),
        cmocka_unit_test (test_attribution),
        cmocka_unit_test (test_crashed_trace),
        cmocka_unit_test (test_not_a_trace),
        cmocka_unit_test (test_hostile_records),
        cmocka_unit_test (test_window_by_correlation),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
