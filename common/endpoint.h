/*  common/endpoint.h: checking a ZeroMQ endpoint before it is used.

    Every program takes endpoints from its command line (akcoord --workers,
    --clients; akworker, akload --coordinator; akctl --coordinator or
    $AK_COORDINATOR).  ZeroMQ accepts some mistakes silently (a connect to
    an unresolvable host just never connects) and reports others with a
    bare errno, so the programs check them up front and refuse a bad one
    as a usage error (exit 2) with the endpoint and the problem named.

    Never: touch the network beyond one name lookup (getaddrinfo), or
    refuse an endpoint because a lookup failed for a reason that may pass
    (no DNS server yet at boot): only a name that does not exist is refused. */
#ifndef AK_ENDPOINT_H
#define AK_ENDPOINT_H
#include <stdbool.h>
#include "error.h"

/*  Checks endpoint, to be bound (bind true) or connected to:
      tcp://HOST:PORT   PORT 1..65535; HOST non-empty; for a connect, a
                        name that does not resolve (EAI_NONAME) is refused;
                        for a bind, HOST may be '*', an address or an
                        interface and is left to ZeroMQ
      ipc://PATH        PATH non-empty and short enough for a Unix socket
    0 when it is usable, AK_EINVAL with err naming the endpoint and what is
    wrong ("tcp://h:99999: port 99999 is not in 1..65535") otherwise. */
int ak_endpoint_check (const char *endpoint, bool bind, ak_err_t *err);

#endif
