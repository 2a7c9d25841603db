/*  coordinator/client_verify.h: the verify verbs of the client API
    (docs/client-api.md, docs/profiles.md "Verify"), dispatched from client.c.

    verify NAME [K FLOOR]     creates a verify batch of profile NAME (its own
                              write transaction, committed before the reply):
                              {"batch_id","profile","tasks","unverified"}
    verify-status BATCH       the verify batch: {"batch": BATCHSUM,
                              "report": VerifyReport (verdicts once complete)} */
#ifndef AK_CLIENT_VERIFY_H
#define AK_CLIENT_VERIFY_H
#include <jansson.h>
#include "client.h"

int ak_client_verify (ak_client_env_t *env, const Ak__ClientRequest *req, uint64_t now,
                      json_t **out, ak_err_t *err);
int ak_client_verify_status (ak_client_env_t *env, const Ak__ClientRequest *req, uint64_t now,
                             json_t **out, ak_err_t *err);

#endif
