/*  ops/akctl/verbs.c: the verbs that are one request to the coordinator
    (or a few: every page of `workers`), its answer as JSON or rendered for
    people; and `watch`.  The verb table that reaches them is main.c's. */
#include "akctl.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

typedef void (s_render_fn) (FILE *out, const json_t *answer);

/*  The shape of most verbs: one request with the positional arguments,
    then the JSON as is (--json) or its human form. */
static int s_simple (const akctl_opts_t *o, const char *verb, s_render_fn *render)
{
    int code = 0;
    akctl_client_t *client = akctl_client_for (o, &code);
    if (!client)
        return code;
    akctl_reply_t reply;
    ak_err_t err = { 0, "" };
    int rc = akctl_client_call (client, verb, o->pos, o->npos, NULL, &reply, &err);
    code = akctl_call_exit (rc, &reply, &err);
    if (code == AKCTL_EXIT_OK) {
        if (o->json)
            printf ("%s\n", reply.json);
        else {
            json_t *answer = akctl_parse_json (reply.json, verb);
            if (answer)
                render (stdout, answer);
            else
                code = AKCTL_EXIT_NEGATIVE;
            json_decref (answer);
        }
    }
    akctl_reply_free (&reply);
    akctl_client_destroy (&client);
    return code;
}

int akctl_verb_status (const akctl_opts_t *o)
{
    return s_simple (o, "status", o->npos ? akctl_render_batch : akctl_render_list);
}

int akctl_verb_list (const akctl_opts_t *o)
{
    return s_simple (o, "list", akctl_render_list);
}

int akctl_verb_show (const akctl_opts_t *o)
{
    return s_simple (o, "show", akctl_render_show);
}

int akctl_verb_receipts (const akctl_opts_t *o)
{
    return s_simple (o, "receipts", akctl_render_receipts);
}

/* workers: every page of the coordinator's answer (workers LIMIT AFTER), as one. */
static int s_verb_workers_list (const akctl_opts_t *o)
{
    int code = 0;
    akctl_client_t *client = akctl_client_for (o, &code);
    if (!client)
        return code;
    json_t *all = json_array ();
    char *after = NULL;
    for (;;) {
        akctl_reply_t reply;
        ak_err_t err = { 0, "" };
        char *args[2] = { "500", after };
        int rc = akctl_client_call (client, "workers", args, after ? 2 : 1, NULL, &reply, &err);
        code = akctl_call_exit (rc, &reply, &err);
        json_t *answer = code == AKCTL_EXIT_OK ? akctl_parse_json (reply.json, "workers") : NULL;
        akctl_reply_free (&reply);
        if (code == AKCTL_EXIT_OK && !answer)
            code = AKCTL_EXIT_NEGATIVE;
        if (!answer)
            break;
        json_t *page = akj_arr (answer, "workers");
        if (page)
            json_array_extend (all, page);
        const char *next = json_string_value (json_object_get (answer, "next"));
        free (after);
        after = next && *next ? ak_strdup (next) : NULL;
        json_decref (answer);
        if (!after)
            break;
    }
    free (after);
    if (code == AKCTL_EXIT_OK) {
        json_t *merged = json_pack ("{s:O}", "workers", all);
        if (o->json) {
            char *text = json_dumps (merged, JSON_COMPACT);
            printf ("%s\n", text ? text : "{}");
            free (text);
        }
        else
            akctl_render_workers (stdout, merged);
        json_decref (merged);
    }
    json_decref (all);
    akctl_client_destroy (&client);
    return code;
}

static void s_render_forget (FILE *out, const json_t *answer)
{
    fprintf (out, "forgot worker %s (%" PRId64 " tasks done)\n", akj_str (answer, "forgotten"),
             akj_int (answer, "tasks_done"));
}

int akctl_verb_workers (const akctl_opts_t *o)
{
    if (o->npos == 0)
        return s_verb_workers_list (o);
    if (o->npos != 2 || strcmp (o->pos[0], "forget") != 0) {
        fprintf (stderr, "akctl: workers: expected nothing or 'forget WORKER_ID'\n"
                         "usage: akctl [OPTIONS] workers [forget WORKER_ID]\n(akctl workers --help says more)\n");
        return AKCTL_EXIT_USAGE;
    }
    akctl_opts_t one = *o;
    one.pos = o->pos + 1;
    one.npos = 1;
    return s_simple (&one, "worker-forget", s_render_forget);
}

int akctl_verb_cancel (const akctl_opts_t *o)
{
    return s_simple (o, "cancel", akctl_render_batch);
}

int akctl_verb_resume (const akctl_opts_t *o)
{
    return s_simple (o, "resume", akctl_render_resume);
}

int akctl_verb_retry (const akctl_opts_t *o)
{
    if (!o->failed) {
        fprintf (stderr, "akctl: retry: say what to retry: --failed (failed, timed-out and poisoned tasks)\n"
                         "usage: akctl [OPTIONS] retry BATCH --failed\n(akctl retry --help says more)\n");
        return AKCTL_EXIT_USAGE;
    }
    char *args[2] = { o->pos[0], (char *) "failed" };
    akctl_opts_t with = *o;
    with.pos = args;
    with.npos = 2;
    return s_simple (&with, "retry", akctl_render_retry);
}

int akctl_verb_stats (const akctl_opts_t *o)
{
    return s_simple (o, "stats", akctl_render_stats);
}

int akctl_verb_shutdown (const akctl_opts_t *o)
{
    int code = 0;
    akctl_client_t *client = akctl_client_for (o, &code);
    if (!client)
        return code;
    akctl_reply_t reply;
    ak_err_t err = { 0, "" };
    int rc = akctl_client_call (client, "shutdown", NULL, 0, NULL, &reply, &err);
    code = akctl_call_exit (rc, &reply, &err);
    if (code == AKCTL_EXIT_OK) {
        if (o->json)
            printf ("%s\n", reply.json);
        else
            printf ("the coordinator at %s commits what is pending and exits\n", o->endpoint);
    }
    akctl_reply_free (&reply);
    akctl_client_destroy (&client);
    return code;
}

static void s_render_report_text (FILE *out, const json_t *answer)
{
    akctl_render_report (out, answer, false);
}

static void s_render_report_markdown (FILE *out, const json_t *answer)
{
    akctl_render_report (out, answer, true);
}

int akctl_verb_report (const akctl_opts_t *o)
{
    if (o->from && !o->out) {
        fprintf (stderr, "akctl: report: --from FILE goes with --out DIR\n"
                         "usage: akctl [OPTIONS] report BATCH [--markdown | --out DIR [--from FILE]]\n");
        return AKCTL_EXIT_USAGE;
    }
    if (o->out)
        return akctl_report_out (o);
    return s_simple (o, "report", o->markdown ? s_render_report_markdown : s_render_report_text);
}

int akctl_verb_watch (const akctl_opts_t *o)
{
    int code = 0;
    akctl_client_t *client = akctl_client_for (o, &code);
    if (!client)
        return code;
    akctl_catch_signals ();
    code = akctl_watch (client, o->pos[0], o->json, &akctl_stop, NULL, NULL, NULL);
    akctl_client_destroy (&client);
    return code;
}
