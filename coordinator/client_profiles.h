/*  coordinator/client_profiles.h: the profile verbs of the client API
    (docs/client-api.md, docs/profiles.md), dispatched from client.c.

    profile-install BATCH NAME [replace] [unconfirmed]
                                           write transaction, committed before the reply
    profile-list                           read transaction
    profile-show NAME                      read transaction
    profile-export NAME                    read transaction: {"profile","sources"}
    profile-import NAME|- [replace]        body: {"profile","sources"}; write transaction
    profile-gate NAME                      body: a gate JSON (profile_gates.h); write transaction

    Each first commits what is pending (so a batch's winners are on disk),
    then works in one transaction.  A full map grows and the transaction
    is retried, as for submit. */
#ifndef AK_CLIENT_PROFILES_H
#define AK_CLIENT_PROFILES_H
#include <jansson.h>
#include "client.h"

int ak_client_profile_install (ak_client_env_t *env, const Ak__ClientRequest *req, uint64_t now,
                               json_t **out, ak_err_t *err);
int ak_client_profile_list (ak_client_env_t *env, const Ak__ClientRequest *req, uint64_t now,
                            json_t **out, ak_err_t *err);
int ak_client_profile_show (ak_client_env_t *env, const Ak__ClientRequest *req, uint64_t now,
                            json_t **out, ak_err_t *err);
int ak_client_profile_export (ak_client_env_t *env, const Ak__ClientRequest *req, uint64_t now,
                              json_t **out, ak_err_t *err);
int ak_client_profile_import (ak_client_env_t *env, const Ak__ClientRequest *req, uint64_t now,
                              json_t **out, ak_err_t *err);

int ak_client_profile_gate (ak_client_env_t *env, const Ak__ClientRequest *req, uint64_t now,
                            json_t **out, ak_err_t *err);

#endif
