/*  tests/integration/test_walkthrough.c: the documented set-up runs as
    written (issue 14, item 8).

    - `ops/examples/walkthrough.sh --check-docs`: docs/operations.md's
      walkthrough block has the script's commands (both ways) and README.md
      a subset; a page that drifts (a command changed) is caught;
    - `ops/examples/walkthrough.sh ROOT BIN`: keys for the server, a worker,
      an operator and a viewer, the key directory, akcoord with CURVE on
      loopback, a worker, an operator's submit / watch / report, all under
      a scratch root, exits 0. */
#include "support.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

static void test_docs_show_the_script (void **state)
{
    (void) state;
    char *script = ak_test_src ("ops/examples/walkthrough.sh");
    char *out = NULL;
    assert_int_equal (ak_test_runf (&out, "'%s' --check-docs 2>&1", script), 0);
    free (out);

    /* a copy of the tree whose page changed one path: the check says which */
    char *dir = ak_test_tmpdir ("drift");
    char *src = ak_test_src ("");
    assert_int_equal (ak_test_runf (NULL, "mkdir -p '%s/ops/examples' '%s/docs' && cp '%s' '%s/ops/examples/' "
                                    "&& cp '%s/README.md' '%s/' && sed 's#--dir /etc/akfleet/keys$#--dir /etc/akfleet/key#' "
                                    "'%s/docs/operations.md' > '%s/docs/operations.md'",
                                    dir, dir, script, dir, src, dir, src, dir), 0);
    assert_int_equal (ak_test_runf (&out, "'%s/ops/examples/walkthrough.sh' --check-docs 2>&1", dir), 1);
    assert_non_null (strstr (out, "docs/operations.md lacks: akctl keys new gpu-host-01 --role worker --dir /etc/akfleet/keys"));
    assert_non_null (strstr (out, "not in the walkthrough: akctl keys new gpu-host-01 --role worker --dir /etc/akfleet/key"));
    free (out);
    ak_test_rmtree (dir);
    free (dir);
    free (src);
    free (script);
}

static void test_walkthrough_runs (void **state)
{
    (void) state;
    char *script = ak_test_src ("ops/examples/walkthrough.sh");
    char *dir = ak_test_tmpdir ("walk");
    int ports[2];
    ak_test_free_ports (ports, 2);
    char *out = NULL;
    int code = ak_test_runf (&out, "WPORT=%d CPORT=%d timeout 280 '%s' '%s' '%s' 2>&1", ports[0], ports[1],
                             script, dir, getenv ("AK_BIN_DIR"));
    if (code != 0)
        fail_msg ("walkthrough.sh exited %d:\n%s", code, out);
    assert_non_null (strstr (out, "walkthrough: every step worked"));
    assert_non_null (strstr (out, "scale_bias on host"));
    free (out);
    ak_test_rmtree (dir);
    free (dir);
    free (script);
}

int main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test (test_docs_show_the_script),
        cmocka_unit_test (test_walkthrough_runs),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
