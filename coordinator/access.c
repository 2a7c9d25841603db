/*  coordinator/access.c: roles and verbs (see access.h). */
#include "access.h"

#include <string.h>

static const char *s_read_verbs[] = {
    "list", "status", "show", "receipts", "report", "workers", "stats",
    "profile-list", "profile-show", "profile-export", "verify-status",
};

bool ak_access_read_verb (const char *verb)
{
    for (size_t i = 0; verb && i < sizeof s_read_verbs / sizeof s_read_verbs[0]; i++)
        if (strcmp (verb, s_read_verbs[i]) == 0)
            return true;
    return false;
}

int ak_access_check (ak_role_t role, const char *name, const char *verb, ak_err_t *err)
{
    if (role == AK_ROLE_OPERATOR || (role == AK_ROLE_VIEWER && ak_access_read_verb (verb)))
        return 0;
    return ak_err_set (err, AK_EDENIED, "refused: %s key %s may not %.64s", ak_role_name (role),
                       name && *name ? name : "?", verb ? verb : "");
}

json_t *ak_access_stats (const ak_counters_t *c)
{
    return json_pack ("{s:{s:I, s:I}, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I}",
        "handshakes_refused", "workers", (json_int_t) c->auth_refused[AK_EP_WORKERS],
                              "clients", (json_int_t) c->auth_refused[AK_EP_CLIENTS],
        "handshakes_accepted", (json_int_t) c->auth_accepted,
        "unauthorised_messages", (json_int_t) c->unauthorised,
        "verbs_refused", (json_int_t) c->verbs_refused,
        "busy_refused", (json_int_t) c->busy_refused,
        "peers_dropped", (json_int_t) c->peers_dropped,
        "workers_revoked", (json_int_t) c->workers_revoked,
        "receipts_refused", (json_int_t) c->receipts_refused,
        "claims_refused", (json_int_t) c->claims_refused,
        "registrations_refused", (json_int_t) c->hellos_refused,
        "receipts_too_big", (json_int_t) c->receipts_too_big);
}
