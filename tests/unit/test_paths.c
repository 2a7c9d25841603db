/*  tests/unit/test_paths.c: files stay where they belong (issue 7): a
    spec's sources cannot leave the spec's directory (no '..', no absolute
    path, no symbolic link pointing outside), the store directory is 0700
    and its files 0600. */
#include "support.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "spec.h"
#include "store.h"
#include "util.h"

/* A copy of kernels/softmax in a fresh directory; caller frees. */
static char *s_softmax_copy (char **tmp_p)
{
    *tmp_p = ak_test_tmpdir ("paths");
    assert_non_null (*tmp_p);
    char *src = ak_test_src ("kernels/softmax");
    char *cmd = ak_sprintf ("cp -r '%s' '%s/softmax'", src, *tmp_p);
    assert_int_equal (ak_test_run (cmd, NULL), 0);
    free (cmd);
    free (src);
    return ak_sprintf ("%s/softmax", *tmp_p);
}

static int s_load (const char *dir, ak_err_t *err)
{
    char *path = ak_sprintf ("%s/spec.json", dir);
    ak_spec_t *spec = NULL;
    int rc = ak_spec_load (path, &spec, err);
    ak_spec_destroy (&spec);
    free (path);
    return rc;
}

/* Rewrites "reference": "ref.c" in dir/spec.json to "reference": ref. */
static void s_set_reference (const char *dir, const char *ref)
{
    char *path = ak_sprintf ("%s/spec.json", dir);
    json_t *j = json_load_file (path, 0, NULL);
    assert_non_null (j);
    assert_true (json_is_string (json_object_get (j, "reference")));
    json_object_set_new (j, "reference", json_string (ref));
    assert_int_equal (json_dump_file (j, path, JSON_INDENT (2)), 0);
    json_decref (j);
    free (path);
}

static void test_spec_source_dotdot_and_absolute (void **state)
{
    (void) state;
    char *tmp = NULL, *dir = s_softmax_copy (&tmp);
    ak_err_t err = { 0 };
    assert_int_equal (s_load (dir, &err), 0);

    char *outside = ak_test_write (tmp, "secret.c", "int leaked;\n");
    s_set_reference (dir, "../secret.c");
    assert_int_equal (s_load (dir, &err), AK_EINVAL);
    assert_non_null (strstr (err.msg, "reference"));
    assert_non_null (strstr (err.msg, "'..'"));

    s_set_reference (dir, outside);
    assert_int_equal (s_load (dir, &err), AK_EINVAL);
    assert_non_null (strstr (err.msg, "reference"));
    assert_non_null (strstr (err.msg, "absolute"));

    free (outside);
    ak_test_rmtree (tmp);
    free (dir);
    free (tmp);
}

static void test_spec_source_symlink_outside (void **state)
{
    (void) state;
    char *tmp = NULL, *dir = s_softmax_copy (&tmp);
    ak_err_t err = { 0 };
    char *outside = ak_test_write (tmp, "secret.c", "int leaked;\n");
    char *ref = ak_sprintf ("%s/ref.c", dir);
    char *kept = ak_sprintf ("%s/ref_real.c", dir);
    assert_int_equal (rename (ref, kept), 0);

    /* a link out of the directory: refused, naming the field and the target */
    assert_int_equal (symlink (outside, ref), 0);
    assert_int_equal (s_load (dir, &err), AK_EINVAL);
    assert_non_null (strstr (err.msg, "reference"));
    assert_non_null (strstr (err.msg, "symbolic link"));
    assert_non_null (strstr (err.msg, "secret.c"));

    /* a directory link out of it, too */
    assert_int_equal (unlink (ref), 0);
    char *sub = ak_sprintf ("%s/sub", dir);
    assert_int_equal (symlink (tmp, sub), 0);
    s_set_reference (dir, "sub/secret.c");
    assert_int_equal (s_load (dir, &err), AK_EINVAL);
    assert_non_null (strstr (err.msg, "symbolic link"));

    /* a link that stays inside is fine */
    s_set_reference (dir, "ref.c");
    assert_int_equal (symlink ("ref_real.c", ref), 0);
    if (s_load (dir, &err) != 0)
        fail_msg ("a link inside the directory was refused: %s", err.msg);

    free (sub);
    free (kept);
    free (ref);
    free (outside);
    ak_test_rmtree (tmp);
    free (dir);
    free (tmp);
}

static void test_store_modes (void **state)
{
    (void) state;
    char *tmp = ak_test_tmpdir ("paths-store");
    char *dir = ak_sprintf ("%s/a/store", tmp);
    ak_store_t *store = NULL;
    ak_err_t err = { 0 };
    ak_store_opts_t so = { .no_sync = true };
    assert_int_equal (ak_store_open (dir, &so, &store, &err), 0);
    ak_store_destroy (&store);
    struct stat st;
    assert_int_equal (stat (dir, &st), 0);
    assert_int_equal (st.st_mode & 0777, 0700);
    char *data = ak_sprintf ("%s/data.mdb", dir);
    assert_int_equal (stat (data, &st), 0);
    assert_int_equal (st.st_mode & 0077, 0);
    free (data);
    free (dir);
    ak_test_rmtree (tmp);
    free (tmp);
}

int main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test (test_spec_source_dotdot_and_absolute),
        cmocka_unit_test (test_spec_source_symlink_outside),
        cmocka_unit_test (test_store_modes),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
