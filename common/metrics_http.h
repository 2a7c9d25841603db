/*  common/metrics_http.h: the HTTP endpoint of `--metrics ADDR:PORT`
    (akcoord, akworker), served by libmicrohttpd on a thread of its own.

    The program's loop renders its metrics (metrics.h) every so often and
    publishes the text here; a scrape (GET /metrics) answers the last text
    published.  The loop never waits for the HTTP thread: publishing takes
    the snapshot's mutex only with pthread_mutex_trylock and, when a scrape
    is copying the text just then, keeps the new text for the next publish.
    The HTTP thread holds the mutex only to copy one snapshot.

    Answers: GET or HEAD /metrics -> 200 text/plain; version=0.0.4 (503
    until the first publish); / -> a line naming /metrics; another path ->
    404; another method -> 405.  At most 32 connections, 10 s idle timeout.

    Never: call into the program's state from the HTTP thread; block the
    publishing thread; listen anywhere but the address given. */
#ifndef AK_METRICS_HTTP_H
#define AK_METRICS_HTTP_H
#include <stddef.h>
#include <stdint.h>
#include "error.h"

typedef struct ak_metrics_srv ak_metrics_srv_t;

/* Checks addr ("HOST:PORT", "[V6]:PORT"; PORT 0..65535, 0: any free port)
   without binding: the syntax, the port and that HOST resolves.
   AK_EINVAL with err saying what is wrong. */
int ak_metrics_addr_check (const char *addr, ak_err_t *err);

/* Binds addr and starts serving on a thread.  AK_EINVAL for an address
   that ak_metrics_addr_check refuses or that is not this host's
   (EADDRNOTAVAIL); AK_EIO for any other bind or start failure (the port
   in use ...), err naming the address. */
int ak_metrics_srv_new (const char *addr, ak_metrics_srv_t **self_p, ak_err_t *err);
/* Stops the thread, closes the socket, frees the snapshots. */
void ak_metrics_srv_destroy (ak_metrics_srv_t **self_p);

/* The port it listens on (the one picked for port 0). */
int ak_metrics_srv_port (const ak_metrics_srv_t *self);
/* "http://HOST:PORT/metrics" as it listens. */
const char *ak_metrics_srv_url (const ak_metrics_srv_t *self);

/* Publishes *text_p (len bytes, malloc'ed; taken, *text_p set NULL) as
   the answer of the next scrapes.  Never waits (see above). */
void ak_metrics_srv_publish (ak_metrics_srv_t *self, char **text_p, size_t len);
/* Scrapes answered so far (any thread). */
uint64_t ak_metrics_srv_scrapes (const ak_metrics_srv_t *self);

#endif
