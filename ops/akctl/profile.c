/*  ops/akctl/profile.c: `akctl profile install|list|show|export|import`
    (docs/profiles.md).

    install, list and show are one request each.  export asks the
    coordinator for the profile and its sources and writes the package;
    import verifies a package with libakprofile (the same check a runtime
    makes) before anything is sent, so a tampered package never reaches the
    store.  akctl writes only into the directory it was given. */
#include "akctl.h"

#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "akprofile.h"
#include "clock.h"
#include "digest.h"
#include "util.h"

static int s_call (const akctl_opts_t *o, const char *verb, char **args, int nargs, const char *body,
                   json_t **answer_p)
{
    ak_err_t err = { 0, "" };
    int ccode = 0;
    akctl_client_t *client = akctl_client_for (o, &ccode);
    if (!client)
        return ccode;
    akctl_reply_t reply;
    int rc = akctl_client_call (client, verb, args, nargs, body, &reply, &err);
    int code = akctl_call_exit (rc, &reply, &err);
    if (code == AKCTL_EXIT_OK) {
        *answer_p = akctl_parse_json (reply.json, verb);
        if (!*answer_p)
            code = AKCTL_EXIT_NEGATIVE;
        else
        if (o->json && strcmp (verb, "profile-export") != 0)
            printf ("%s\n", reply.json);
    }
    akctl_reply_free (&reply);
    akctl_client_destroy (&client);
    return code;
}

static void s_render_installed (const json_t *a, const char *verb)
{
    json_t *inst = akj_arr (a, "installed"), *skip = akj_arr (a, "skipped");
    printf ("%s %zu entr%s into profile %s%s%s\n", verb, json_array_size (inst),
            json_array_size (inst) == 1 ? "y" : "ies", akj_str (a, "profile"),
            *akj_str (a, "batch_id") ? " from batch " : "", akj_str (a, "batch_id"));
    static const char *const head[] = { "CLASS", "OP", "WORKLOAD", "KIND", "CANDIDATE", "PARAMS", "REPLACED" };
    akctl_table_t *t = akctl_table_new (7, head);
    size_t i;
    json_t *e;
    json_array_foreach (inst, i, e) {
        /* a vendor entry applies the library, not the candidate it names */
        bool vendor = strcmp (akj_str (e, "kind"), "vendor") == 0;
        char *params = vendor ? ak_strdup ("-") : akctl_params_text (akj_arr (e, "params"));
        const char *row[7] = { akj_str (e, "device_class"), akj_str (e, "op"), akj_str (e, "key"),
                               *akj_str (e, "kind") ? akj_str (e, "kind") : "kernel",
                               vendor ? akj_str (e, "vendor") : akj_str (e, "candidate"), params,
                               akj_bool (e, "replaced") ? "yes" : "no" };
        akctl_table_add (t, row);
        free (params);
    }
    if (akctl_table_rows (t))
        akctl_table_print (t, stdout, "  ", false);
    akctl_table_destroy (&t);
    json_array_foreach (skip, i, e)
        printf ("skipped: %s on %s: %s\n", akj_str (e, "op"), akj_str (e, "device_class"), akj_str (e, "reason"));
}

static int s_install (const akctl_opts_t *o)
{
    if (!o->profile) {
        fprintf (stderr, "akctl: profile install: say which profile: --profile NAME\n");
        return AKCTL_EXIT_USAGE;
    }
    if (o->npos != 2) {
        fprintf (stderr, "akctl: usage: akctl profile install BATCH --profile NAME [--replace] "
                 "[--unconfirmed]\n");
        return AKCTL_EXIT_USAGE;
    }
    char *args[4] = { o->pos[1], (char *) o->profile };
    int nargs = 2;
    if (o->replace)
        args[nargs++] = (char *) "replace";
    if (o->unconfirmed)
        args[nargs++] = (char *) "unconfirmed";
    json_t *a = NULL;
    int code = s_call (o, "profile-install", args, nargs, NULL, &a);
    if (code == AKCTL_EXIT_OK && !o->json)
        s_render_installed (a, "installed");
    json_decref (a);
    return code;
}

/* "verified (batch B000002, 2026-11-29 21:40)", "failing (...)", "never". */
static const char *s_verification_text (const json_t *v, char *buf, size_t len)
{
    const char *state = akj_str (v, "state");
    if (!*state || strcmp (state, "never") == 0 || strcmp (state, "unknown") == 0) {
        snprintf (buf, len, "%s", *state ? state : "never");
        return buf;
    }
    char when[40];
    snprintf (buf, len, "%s (batch %s, %s)", state, akj_str (v, "batch_id"),
              akctl_when ((uint64_t) akj_int (v, "finished_ms"), when, sizeof when));
    return buf;
}

/* "accepted 1.04x +- 0.01" or "rejected (slower) 0.60x +- 0.02"; "" when
   no gate was recorded. */
static const char *s_gate_text (const json_t *gate, char *buf, size_t len)
{
    const char *state = akj_str (gate, "state");
    buf[0] = '\0';
    if (strcmp (state, "accepted") == 0 || strcmp (state, "rejected") == 0)
        snprintf (buf, len, "%s %.2fx +- %.2f", akj_str (gate, "verdict"),
                  json_number_value (json_object_get (gate, "speedup")),
                  json_number_value (json_object_get (gate, "speedup_noise")));
    else
    if (strcmp (state, "unknown") == 0)
        snprintf (buf, len, "unknown (%s)", akj_str (gate, "error"));
    return buf;
}

/* A class's status: "end-to-end gate rejected (slower) 0.60x +- 0.02
   (kernels: ...)" where its gate rejected the profile, whatever the kernel
   verification said; else the verification, with ", end-to-end gate
   accepted ..." where a gate accepted it.  buf: 512 bytes or more. */
static const char *s_status_text (const json_t *ver, const json_t *gate, char *buf, size_t len)
{
    char vt[160], gt[200];
    s_verification_text (ver, vt, sizeof vt);
    s_gate_text (gate, gt, sizeof gt);
    if (strcmp (akj_str (gate, "state"), "rejected") == 0)
        snprintf (buf, len, "end-to-end gate %s (kernels: %s)", gt, vt);
    else
    if (*gt)
        snprintf (buf, len, "%s, end-to-end gate %s", vt, gt);
    else
        snprintf (buf, len, "%s", vt);
    return buf;
}

static int s_list (const akctl_opts_t *o)
{
    json_t *a = NULL;
    int code = s_call (o, "profile-list", NULL, 0, NULL, &a);
    if (code == AKCTL_EXIT_OK && !o->json) {
        static const char *const head[] = { "PROFILE", "CLASS", "BACKEND", "ENTRIES", "UPDATED", "STATUS" };
        akctl_table_t *t = akctl_table_new (6, head);
        size_t i, j;
        json_t *p, *c;
        json_array_foreach (akj_arr (a, "profiles"), i, p) {
            json_array_foreach (akj_arr (p, "classes"), j, c) {
                char n[24], when[40], ver[512];
                s_status_text (akj_obj (p, "verification"), akj_obj (c, "gate"), ver, sizeof ver);
                snprintf (n, sizeof n, "%" PRId64, akj_int (c, "entries"));
                const char *row[6] = { akj_str (p, "profile"), akj_str (c, "device_class"), akj_str (c, "backend"),
                                       n, akctl_when ((uint64_t) akj_int (c, "updated_ms"), when, sizeof when), ver };
                akctl_table_add (t, row);
            }
        }
        if (akctl_table_rows (t))
            akctl_table_print (t, stdout, "", false);
        else
            printf ("no profiles\n");
        akctl_table_destroy (&t);
    }
    json_decref (a);
    return code;
}

static void s_render_show (const json_t *a)
{
    printf ("profile %s\n", akj_str (a, "profile"));
    const json_t *ver = akj_obj (a, "verification");
    char vt[160];
    size_t i, j;
    json_t *why, *c, *e;
    /* a class whose end-to-end gate rejected the profile: never "verified" */
    bool rejected = false;
    json_array_foreach (akj_arr (a, "classes"), i, c)
        rejected |= strcmp (akj_str (akj_obj (c, "gate"), "state"), "rejected") == 0;
    printf ("verification: %s%s\n", rejected ? "rejected by the end-to-end gate (below); kernels: " : "",
            s_verification_text (ver, vt, sizeof vt));
    json_array_foreach (akj_arr (ver, "reasons"), i, why)
        printf ("  %s\n", json_string_value (why) ? json_string_value (why) : "");
    json_array_foreach (akj_arr (a, "classes"), i, c) {
        const json_t *d = akj_obj (c, "device");
        if (strcmp (akj_str (c, "backend"), "host") == 0) {
            printf ("\n%s (host: %s)\n", akj_str (c, "device_class"), akj_str (d, "name"));
        }
        else
        printf ("\n%s (%s: %s, sm_%" PRId64 "%" PRId64 ", driver %s, NVRTC %s)\n", akj_str (c, "device_class"),
                akj_str (c, "backend"), akj_str (d, "name"), akj_int (d, "cc_major"), akj_int (d, "cc_minor"),
                *akj_str (d, "driver_version") ? akj_str (d, "driver_version") : "-",
                *akj_str (d, "nvrtc_version") ? akj_str (d, "nvrtc_version") : "-");
        const json_t *g = akj_obj (c, "gate");
        if (strcmp (akj_str (g, "state"), "never") != 0 && *akj_str (g, "state")) {
            char when[40], st[200];
            printf ("end-to-end gate: %s (%s, %" PRId64 " pairs, %.0f%% of calls hit, recorded %s)\n",
                    s_gate_text (g, st, sizeof st), *akj_str (g, "script") ? akj_str (g, "script") : "?",
                    akj_int (g, "steps"), 100.0 * json_number_value (json_object_get (g, "hit_share")),
                    akctl_when ((uint64_t) akj_int (g, "recorded_ms"), when, sizeof when));
        }
        static const char *const head[] = { "WORKLOAD", "KIND", "CANDIDATE", "PARAMS", "LAUNCH", "SPEEDUP",
                                            "SOURCE", "CONFIRMED ON", "EVIDENCE" };
        akctl_table_t *t = akctl_table_new (9, head);
        size_t nvendor = 0;
        json_array_foreach (akj_arr (c, "entries"), j, e) {
            /* a vendor entry: the library stays; its reason follows the table */
            bool vendor = strcmp (akj_str (e, "kind"), "vendor") == 0;
            nvendor += vendor;
            char *params = vendor ? ak_strdup ("-") : akctl_params_text (akj_arr (e, "params"));
            char launch[160] = "-", sp[64], src[32], ev[200] = "";
            const json_t *l = akj_obj (e, "launch");
            if (l && json_is_object (l)) {
                json_t *g = akj_arr (l, "grid"), *b = akj_arr (l, "block");
                snprintf (launch, sizeof launch, "grid %" PRId64 "x%" PRId64 "x%" PRId64 " block %" PRId64 "x%" PRId64
                          "x%" PRId64 " smem %" PRId64, (int64_t) json_integer_value (json_array_get (g, 0)),
                          (int64_t) json_integer_value (json_array_get (g, 1)), (int64_t) json_integer_value (json_array_get (g, 2)),
                          (int64_t) json_integer_value (json_array_get (b, 0)), (int64_t) json_integer_value (json_array_get (b, 1)),
                          (int64_t) json_integer_value (json_array_get (b, 2)), akj_int (l, "shared_bytes"));
            }
            snprintf (src, sizeof src, "%.12s", vendor ? "-" : akj_str (akj_obj (e, "source"), "digest"));
            size_t k;
            json_t *r;
            json_array_foreach (akj_arr (e, "evidence"), k, r) {
                size_t len = strlen (ev);
                snprintf (ev + len, sizeof ev - len, "%s%s", k ? "," : "", json_string_value (r) ? json_string_value (r) : "");
            }
            /* "-": installed with --unconfirmed (or before entries said) */
            const char *conf = *akj_str (e, "confirmed_on") ? akj_str (e, "confirmed_on") : "-";
            const char *row[9] = { akj_str (e, "key"), vendor ? "vendor" : "kernel",
                                   vendor ? akj_str (e, "vendor") : akj_str (e, "candidate"), params, launch,
                                   vendor ? "-" : akctl_speedup (akj_num (e, "speedup"), akj_num (e, "noise"),
                                                                 sp, sizeof sp),
                                   src, conf, ev };
            akctl_table_add (t, row);
            free (params);
        }
        akctl_table_print (t, stdout, "  ", false);
        akctl_table_destroy (&t);
        if (nvendor)
            printf ("  vendor entries (the vendor library stays; no kernel is applied):\n");
        json_array_foreach (akj_arr (c, "entries"), j, e)
            if (strcmp (akj_str (e, "kind"), "vendor") == 0)
                printf ("    %s: %s %s, %.2f us: %s\n", akj_str (e, "key"), akj_str (e, "vendor"),
                        akj_str (e, "vendor_op"), akj_num (e, "baseline_us"), akj_str (e, "reason"));
    }
}

static int s_show (const akctl_opts_t *o)
{
    if (o->npos != 2) {
        fprintf (stderr, "akctl: usage: akctl profile show NAME\n");
        return AKCTL_EXIT_USAGE;
    }
    char *args[1] = { o->pos[1] };
    json_t *a = NULL;
    int code = s_call (o, "profile-show", args, 1, NULL, &a);
    if (code == AKCTL_EXIT_OK && !o->json)
        s_render_show (a);
    json_decref (a);
    return code;
}

// ------------------------------------------------------------------ export

static int s_cmp_str (const void *a, const void *b)
{
    return strcmp (*(char *const *) a, *(char *const *) b);
}

/* A file name the coordinator gave: sources/<64 hex>.(cu|c|h). */
static bool s_source_file_ok (const char *file, const char *digest)
{
    if (!file || !digest || strncmp (file, "sources/", 8) != 0 || !ak_digest_valid (digest)
        || strncmp (file + 8, digest, 64) != 0)
        return false;
    const char *ext = file + 8 + 64;
    return strcmp (ext, ".cu") == 0 || strcmp (ext, ".c") == 0 || strcmp (ext, ".h") == 0;
}

static int s_write (const char *dir, const char *rel, const char *data, size_t len, char ***lines, size_t *n)
{
    char *path = ak_path_join (dir, rel);
    ak_err_t err = { 0, "" };
    int rc = ak_file_write_atomic (path, data, len, &err);
    free (path);
    if (rc) {
        fprintf (stderr, "akctl: %s\n", err.msg);
        return AKCTL_EXIT_NEGATIVE;
    }
    char hex[65];
    ak_sha256_hex (data, len, hex);
    *lines = ak_realloc (*lines, (*n + 1) * sizeof **lines);
    (*lines)[(*n)++] = ak_sprintf ("%s  %s\n", hex, rel);
    return 0;
}

static int s_export (const akctl_opts_t *o)
{
    if (o->npos != 3) {
        fprintf (stderr, "akctl: usage: akctl profile export NAME DIR\n");
        return AKCTL_EXIT_USAGE;
    }
    const char *dir = o->pos[2];
    DIR *d = opendir (dir);
    if (d) {
        struct dirent *de;
        bool empty = true;
        while ((de = readdir (d)))
            if (strcmp (de->d_name, ".") != 0 && strcmp (de->d_name, "..") != 0)
                empty = false;
        closedir (d);
        if (!empty) {
            fprintf (stderr, "akctl: profile export: %s is not empty: give a new or empty directory\n", dir);
            return AKCTL_EXIT_USAGE;
        }
    }
    char *args[1] = { o->pos[1] };
    json_t *a = NULL;
    int code = s_call (o, "profile-export", args, 1, NULL, &a);
    if (code != AKCTL_EXIT_OK)
        return code;
    ak_err_t err = { 0, "" };
    char *srcdir = ak_path_join (dir, "sources");
    if (ak_mkdir_p (srcdir, 0755, &err) != 0) {
        fprintf (stderr, "akctl: %s\n", err.msg);
        free (srcdir);
        json_decref (a);
        return AKCTL_EXIT_NEGATIVE;
    }
    free (srcdir);
    json_t *profile = akj_obj (a, "profile"), *sources = akj_obj (a, "sources");
    char **lines = NULL;
    size_t nlines = 0, nsrc = 0;
    json_t *written = json_object ();
    size_t ci, ei;
    json_t *c, *e;
    json_array_foreach (akj_arr (profile, "classes"), ci, c) {
        json_array_foreach (akj_arr (c, "entries"), ei, e) {
            if (strcmp (akj_str (e, "kind"), "vendor") == 0)
                continue;                   /* no kernel, no sources */
            const json_t *refs[2] = { akj_obj (e, "source"), akj_obj (e, "prelude") };
            for (int k = 0; k < 2 && code == AKCTL_EXIT_OK; k++) {
                const char *file = akj_str (refs[k], "file"), *digest = akj_str (refs[k], "digest");
                const char *text = json_string_value (json_object_get (sources, digest));
                if (!s_source_file_ok (file, digest) || !text) {
                    fprintf (stderr, "akctl: profile export: entry %s: source %s is not in the answer\n",
                             akj_str (e, "key"), digest);
                    code = AKCTL_EXIT_NEGATIVE;
                    break;
                }
                if (json_object_get (written, file))
                    continue;
                json_object_set_new (written, file, json_true ());
                code = s_write (dir, file, text, json_string_length (json_object_get (sources, digest)), &lines, &nlines);
                nsrc++;
            }
        }
    }
    json_object_set_new (profile, "exported_ms", json_integer ((json_int_t) ak_clock_wall_ms ()));
    char *text = code == AKCTL_EXIT_OK ? json_dumps (profile, JSON_INDENT (2) | JSON_SORT_KEYS) : NULL;
    if (text) {
        size_t len = strlen (text);
        text = ak_realloc (text, len + 2);
        text[len] = '\n';
        text[len + 1] = '\0';
        code = s_write (dir, "profile.json", text, len + 1, &lines, &nlines);
    }
    free (text);
    if (code == AKCTL_EXIT_OK) {
        qsort (lines, nlines, sizeof *lines, s_cmp_str);
        size_t total = 1;
        for (size_t i = 0; i < nlines; i++)
            total += strlen (lines[i]);
        char *sums = ak_malloc (total);
        sums[0] = '\0';
        for (size_t i = 0; i < nlines; i++)
            strcat (sums, lines[i]);
        char *path = ak_path_join (dir, "SHA256SUMS");
        if (ak_file_write_atomic (path, sums, strlen (sums), &err) != 0) {
            fprintf (stderr, "akctl: %s\n", err.msg);
            code = AKCTL_EXIT_NEGATIVE;
        }
        free (path);
        free (sums);
    }
    if (code == AKCTL_EXIT_OK) {
        if (o->json)
            printf ("{\"profile\":\"%s\",\"dir\":\"%s\",\"files\":%zu}\n", akj_str (profile, "profile"), dir, nlines + 1);
        else
            printf ("exported profile %s to %s: profile.json, %zu source file(s), SHA256SUMS\n",
                    akj_str (profile, "profile"), dir, nsrc);
    }
    for (size_t i = 0; i < nlines; i++)
        free (lines[i]);
    free (lines);
    json_decref (written);
    json_decref (a);
    return code;
}

// ------------------------------------------------------------------ import

static int s_import (const akctl_opts_t *o)
{
    if (o->npos != 2) {
        fprintf (stderr, "akctl: usage: akctl profile import DIR [--as NAME] [--replace]\n");
        return AKCTL_EXIT_USAGE;
    }
    const char *dir = o->pos[1];
    char why[1024];
    akp_profile_t *p = NULL;
    if (akp_load (dir, &p, why, sizeof why) != AKP_OK) {
        fprintf (stderr, "akctl: profile import: package %s refused: %s\n", dir, why);
        return AKCTL_EXIT_USAGE;
    }
    /* what was verified is what is sent: profile.json as read, the texts
       libakprofile checked */
    char *path = ak_path_join (dir, "profile.json"), *text = NULL;
    size_t len = 0;
    ak_err_t err = { 0, "" };
    int code = AKCTL_EXIT_OK;
    json_t *profile = NULL;
    if (ak_file_read (path, 64u << 20, &text, &len, &err) != 0 || !(profile = json_loadb (text, len, 0, NULL))) {
        fprintf (stderr, "akctl: profile import: %s: %s\n", path, err.msg[0] ? err.msg : "invalid JSON");
        code = AKCTL_EXIT_USAGE;
    }
    free (text);
    free (path);
    json_t *sources = json_object ();
    for (size_t c = 0; code == AKCTL_EXIT_OK && c < akp_class_count (p); c++)
        for (size_t i = 0; i < akp_entry_count (p, c); i++) {
            const akp_kernel_t *k = akp_entry (p, c, i);
            char hex[65];
            if (!k->source)
                continue;                   /* a vendor entry: no kernel */
            json_object_set_new (sources, k->source_digest, json_stringn (k->source, k->source_len));
            ak_sha256_hex (k->prelude, k->prelude_len, hex);
            json_object_set_new (sources, hex, json_stringn (k->prelude, k->prelude_len));
        }
    akp_destroy (&p);
    json_t *a = NULL;
    if (code == AKCTL_EXIT_OK) {
        json_t *body = json_pack ("{s:O, s:O}", "profile", profile, "sources", sources);
        char *btext = json_dumps (body, JSON_COMPACT);
        json_decref (body);
        char *args[2] = { (char *) (o->as ? o->as : "-"), (char *) "replace" };
        code = s_call (o, "profile-import", args, o->replace ? 2 : 1, btext, &a);
        free (btext);
        if (code == AKCTL_EXIT_OK && !o->json)
            s_render_installed (a, "imported");
    }
    json_decref (a);
    json_decref (profile);
    json_decref (sources);
    return code;
}

// ------------------------------------------------------------- record-gate

/*  Sends the summary of a gate JSON (akctl gate --out FILE) to be kept with
    the profile it gated; the per-call counts and per-pair times stay in the
    file. */
static int s_record_gate (const akctl_opts_t *o)
{
    if (o->npos != 2) {
        fprintf (stderr, "akctl: usage: akctl profile record-gate GATE.json\n");
        return AKCTL_EXIT_USAGE;
    }
    const char *file = o->pos[1];
    char *text = NULL;
    size_t len = 0;
    ak_err_t err = { 0, "" };
    if (ak_file_read (file, 64u << 20, &text, &len, &err) != 0) {
        fprintf (stderr, "akctl: profile record-gate: %s\n", err.msg);
        return AKCTL_EXIT_USAGE;
    }
    json_error_t je;
    json_t *gate = json_loadb (text, len, 0, &je);
    free (text);
    const char *name = json_string_value (json_object_get (gate, "profile"));
    if (!gate || !name) {
        fprintf (stderr, "akctl: profile record-gate: %s: not a gate JSON (%s)\n", file,
                 gate ? "no \"profile\"" : je.text);
        json_decref (gate);
        return AKCTL_EXIT_USAGE;
    }
    json_object_del (gate, "calls");
    json_object_del (gate, "latency_ms");
    char *body = json_dumps (gate, JSON_COMPACT);
    char *args[1] = { (char *) name };
    json_t *a = NULL;
    int code = body ? s_call (o, "profile-gate", args, 1, body, &a) : AKCTL_EXIT_USAGE;
    if (code == AKCTL_EXIT_OK && !o->json)
        printf ("profile %s on %s: end-to-end gate %s recorded%s\n", akj_str (a, "profile"),
                akj_str (a, "device_class"), akj_str (a, "verdict"),
                json_is_true (json_object_get (a, "replaced")) ? " (replacing the earlier one)" : "");
    free (body);
    json_decref (a);
    json_decref (gate);
    return code;
}

int akctl_profile (const akctl_opts_t *o)
{
    const char *sub = o->pos[0];
    if (strcmp (sub, "install") == 0)
        return s_install (o);
    if (strcmp (sub, "list") == 0 && o->npos == 1)
        return s_list (o);
    if (strcmp (sub, "show") == 0)
        return s_show (o);
    if (strcmp (sub, "export") == 0)
        return s_export (o);
    if (strcmp (sub, "import") == 0)
        return s_import (o);
    if (strcmp (sub, "record-gate") == 0)
        return s_record_gate (o);
    fprintf (stderr, "akctl: profile: '%s' is not install, list, show, export, import or record-gate\n"
                     "(akctl profile --help says more)\n", sub);
    return AKCTL_EXIT_USAGE;
}
