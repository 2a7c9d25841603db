/*  common/metrics_http.c: the metrics endpoint over libmicrohttpd (see
    metrics_http.h). */
#include "metrics_http.h"
#include <errno.h>
#include <microhttpd.h>
#include <netdb.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include "log.h"
#include "util.h"

#define S_CONN_MAX      32
#define S_IDLE_S        10
#define S_CONTENT_TYPE  "text/plain; version=0.0.4; charset=utf-8"

struct ak_metrics_srv {
    struct MHD_Daemon *mhd;
    int                fd;              /* the listening socket until MHD takes it (-1 then) */
    int                port;
    char               url[320];
    pthread_mutex_t    lock;            /* guards text and len only */
    char              *text;            /* the snapshot scrapes answer (NULL: none yet) */
    size_t             len;
    char              *pending;         /* publisher's thread only: not yet published */
    size_t             pending_len;
    atomic_uint_fast64_t scrapes;
};

// ================================================================ address

/* Splits "HOST:PORT" / "[V6]:PORT" into host and port (host "" for ":PORT"). */
static int s_split (const char *addr, char *host, size_t hsize, long *port, ak_err_t *err)
{
    if (!addr || !*addr)
        return ak_err_set (err, AK_EINVAL, "--metrics: empty address (HOST:PORT expected, e.g. 127.0.0.1:9464)");
    const char *colon = strrchr (addr, ':');
    if (!colon)
        return ak_err_set (err, AK_EINVAL, "--metrics '%.200s': no port (HOST:PORT expected, e.g. 127.0.0.1:9464)",
                           addr);
    const char *h = addr;
    size_t hlen = (size_t) (colon - addr);
    if (h[0] == '[') {
        if (hlen < 2 || h[hlen - 1] != ']')
            return ak_err_set (err, AK_EINVAL, "--metrics '%.200s': an IPv6 address goes in brackets, "
                               "[::1]:9464", addr);
        h++;
        hlen -= 2;
    }
    else if (memchr (h, ':', hlen))
        return ak_err_set (err, AK_EINVAL, "--metrics '%.200s': an IPv6 address goes in brackets, [::1]:9464",
                           addr);
    if (hlen == 0 || hlen >= hsize)
        return ak_err_set (err, AK_EINVAL, "--metrics '%.200s': %s host", addr, hlen ? "too long a" : "no");
    memcpy (host, h, hlen);
    host[hlen] = '\0';
    char *end = NULL;
    errno = 0;
    *port = strtol (colon + 1, &end, 10);
    if (errno || end == colon + 1 || *end || *port < 0 || *port > 65535 || colon[1] == '-' || colon[1] == '+')
        return ak_err_set (err, AK_EINVAL, "--metrics '%.200s': port '%.32s' is not 0..65535", addr, colon + 1);
    return 0;
}

static int s_resolve (const char *addr, const char *host, long port, struct addrinfo **res, ak_err_t *err)
{
    char service[16];
    snprintf (service, sizeof service, "%ld", port);
    struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
                              .ai_flags = AI_PASSIVE | AI_NUMERICSERV };
    int rc = getaddrinfo (host, service, &hints, res);
    if (rc != 0)
        return ak_err_set (err, AK_EINVAL, "--metrics '%.200s': host '%s' does not resolve: %s", addr, host,
                           gai_strerror (rc));
    return 0;
}

int ak_metrics_addr_check (const char *addr, ak_err_t *err)
{
    char host[256];
    long port;
    struct addrinfo *res = NULL;
    int rc = s_split (addr, host, sizeof host, &port, err);
    if (rc == 0)
        rc = s_resolve (addr, host, port, &res, err);
    if (res)
        freeaddrinfo (res);
    return rc;
}

// ================================================================ serving

static void s_mhd_log (void *cls, const char *fmt, va_list ap)
{
    (void) cls;
    char msg[512];
    vsnprintf (msg, sizeof msg, fmt, ap);
    size_t n = strlen (msg);
    while (n && (msg[n - 1] == '\n' || msg[n - 1] == '\r'))
        msg[--n] = '\0';
    ak_debug ("metrics endpoint: %s", msg);
}

static enum MHD_Result s_reply (struct MHD_Connection *conn, unsigned status, const char *type,
                                const char *body, size_t len)
{
    struct MHD_Response *r = MHD_create_response_from_buffer (len, (void *) body, MHD_RESPMEM_MUST_COPY);
    if (!r)
        return MHD_NO;
    enum MHD_Result ok = MHD_add_response_header (r, MHD_HTTP_HEADER_CONTENT_TYPE, type);
    if (ok == MHD_YES && status == MHD_HTTP_METHOD_NOT_ALLOWED)
        ok = MHD_add_response_header (r, MHD_HTTP_HEADER_ALLOW, "GET, HEAD");
    if (ok == MHD_YES)
        ok = MHD_queue_response (conn, status, r);
    MHD_destroy_response (r);
    return ok;
}

static enum MHD_Result s_handle (void *cls, struct MHD_Connection *conn, const char *url, const char *method,
                                 const char *version, const char *upload, size_t *upload_size, void **con_cls)
{
    static int first;
    ak_metrics_srv_t *self = cls;
    (void) version;
    (void) upload;
    if (*con_cls == NULL) {             /* headers only so far: answer on the next call */
        *con_cls = &first;
        return MHD_YES;
    }
    if (*upload_size) {                 /* nobody posts here: the body is skipped */
        *upload_size = 0;
        return MHD_YES;
    }
    static const char text_type[] = "text/plain; charset=utf-8";
    if (strcmp (method, MHD_HTTP_METHOD_GET) != 0 && strcmp (method, MHD_HTTP_METHOD_HEAD) != 0) {
        static const char m[] = "only GET and HEAD\n";
        return s_reply (conn, MHD_HTTP_METHOD_NOT_ALLOWED, text_type, m, sizeof m - 1);
    }
    if (strcmp (url, "/") == 0) {
        static const char m[] = "akfleet metrics: GET /metrics (Prometheus text format)\n";
        return s_reply (conn, MHD_HTTP_OK, text_type, m, sizeof m - 1);
    }
    if (strcmp (url, "/metrics") != 0) {
        static const char m[] = "not found: the metrics are at /metrics\n";
        return s_reply (conn, MHD_HTTP_NOT_FOUND, text_type, m, sizeof m - 1);
    }
    atomic_fetch_add (&self->scrapes, 1);
    enum MHD_Result rc;
    pthread_mutex_lock (&self->lock);
    if (self->text)                     /* copied under the lock, sent after it */
        rc = s_reply (conn, MHD_HTTP_OK, S_CONTENT_TYPE, self->text, self->len);
    else {
        static const char m[] = "no metrics yet: the first snapshot comes within a second of the start\n";
        rc = s_reply (conn, MHD_HTTP_SERVICE_UNAVAILABLE, text_type, m, sizeof m - 1);
    }
    pthread_mutex_unlock (&self->lock);
    return rc;
}

static int s_listen (ak_metrics_srv_t *self, const char *addr, ak_err_t *err)
{
    char host[256];
    long port;
    struct addrinfo *res = NULL;
    int rc = s_split (addr, host, sizeof host, &port, err);
    if (rc == 0)
        rc = s_resolve (addr, host, port, &res, err);
    if (rc)
        return rc;
    int why = 0;
    for (struct addrinfo *ai = res; ai && self->fd < 0; ai = ai->ai_next) {
        int fd = socket (ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
        if (fd < 0) {
            why = errno;
            continue;
        }
        int one = 1;
        (void) setsockopt (fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        if (bind (fd, ai->ai_addr, ai->ai_addrlen) != 0 || listen (fd, 64) != 0) {
            why = errno;
            close (fd);
            continue;
        }
        self->fd = fd;
    }
    freeaddrinfo (res);
    if (self->fd < 0)
        return ak_err_set (err, why == EADDRNOTAVAIL ? AK_EINVAL : AK_EIO, "--metrics %.200s: cannot listen: %s%s",
                           addr, strerror (why),
                           why == EADDRNOTAVAIL ? " (not an address of this host)" : "");
    struct sockaddr_storage ss;
    socklen_t sl = sizeof ss;
    if (getsockname (self->fd, (struct sockaddr *) &ss, &sl) == 0)
        self->port = ntohs (ss.ss_family == AF_INET6 ? ((struct sockaddr_in6 *) &ss)->sin6_port
                                                     : ((struct sockaddr_in *) &ss)->sin_port);
    bool v6 = strchr (host, ':') != NULL;
    snprintf (self->url, sizeof self->url, "http://%s%s%s:%d/metrics", v6 ? "[" : "", host, v6 ? "]" : "",
              self->port);
    return 0;
}

int ak_metrics_srv_new (const char *addr, ak_metrics_srv_t **self_p, ak_err_t *err)
{
    *self_p = NULL;
    ak_metrics_srv_t *self = ak_calloc (1, sizeof *self);
    self->fd = -1;
    pthread_mutex_init (&self->lock, NULL);
    int rc = s_listen (self, addr, err);
    if (rc)
        goto fail;
    self->mhd = MHD_start_daemon (MHD_USE_AUTO_INTERNAL_THREAD | MHD_USE_ERROR_LOG, 0, NULL, NULL,
                                  s_handle, self,
                                  MHD_OPTION_LISTEN_SOCKET, (MHD_socket) self->fd,
                                  MHD_OPTION_CONNECTION_LIMIT, (unsigned) S_CONN_MAX,
                                  MHD_OPTION_CONNECTION_TIMEOUT, (unsigned) S_IDLE_S,
                                  MHD_OPTION_EXTERNAL_LOGGER, s_mhd_log, NULL,
                                  MHD_OPTION_END);
    if (!self->mhd) {
        rc = ak_err_set (err, AK_EIO, "--metrics %.200s: libmicrohttpd did not start", addr);
        goto fail;
    }
    self->fd = -1;                      /* MHD's now: MHD_stop_daemon closes it */
    *self_p = self;
    return 0;
fail:
    ak_metrics_srv_destroy (&self);
    return rc;
}

void ak_metrics_srv_destroy (ak_metrics_srv_t **self_p)
{
    if (self_p && *self_p) {
        ak_metrics_srv_t *self = *self_p;
        if (self->mhd)
            MHD_stop_daemon (self->mhd);
        if (self->fd >= 0)
            close (self->fd);
        pthread_mutex_destroy (&self->lock);
        free (self->text);
        free (self->pending);
        free (self);
        *self_p = NULL;
    }
}

int ak_metrics_srv_port (const ak_metrics_srv_t *self)
{
    return self ? self->port : 0;
}

const char *ak_metrics_srv_url (const ak_metrics_srv_t *self)
{
    return self ? self->url : "";
}

uint64_t ak_metrics_srv_scrapes (const ak_metrics_srv_t *self)
{
    return self ? atomic_load (&((ak_metrics_srv_t *) self)->scrapes) : 0;
}

void ak_metrics_srv_publish (ak_metrics_srv_t *self, char **text_p, size_t len)
{
    if (!self) {
        free (*text_p);
        *text_p = NULL;
        return;
    }
    free (self->pending);
    self->pending = *text_p;
    self->pending_len = len;
    *text_p = NULL;
    if (pthread_mutex_trylock (&self->lock) != 0)
        return;                         /* a scrape copies the old one: publish next time */
    char *old = self->text;
    self->text = self->pending;
    self->len = self->pending_len;
    pthread_mutex_unlock (&self->lock);
    self->pending = NULL;
    free (old);
}
