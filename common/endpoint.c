/*  common/endpoint.c: checking a ZeroMQ endpoint before it is used (see endpoint.h). */
#include "endpoint.h"

#include <netdb.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>

#include "util.h"

#define S_HOST_MAX 256

/*  tcp://[SOURCE;]HOST:PORT: the part after the last ';' is where to go. */
static int s_tcp (const char *endpoint, const char *rest, bool bind, ak_err_t *err)
{
    const char *semi = strrchr (rest, ';');
    if (semi)
        rest = semi + 1;
    const char *colon = strrchr (rest, ':');
    if (!colon || colon == rest)
        return ak_err_set (err, AK_EINVAL, "%s: expected tcp://HOST:PORT", endpoint);
    const char *port = colon + 1;
    int64_t p = 0;
    if (!(bind && strcmp (port, "*") == 0)
        && (ak_parse_i64 (port, &p) != 0 || p < 1 || p > 65535))
        return ak_err_set (err, AK_EINVAL, "%s: port '%.32s' is not a number in 1..65535", endpoint, port);
    size_t hlen = (size_t) (colon - rest);
    if (hlen >= S_HOST_MAX)
        return ak_err_set (err, AK_EINVAL, "%s: host name longer than %d characters", endpoint,
                           S_HOST_MAX - 1);
    char host[S_HOST_MAX];
    memcpy (host, rest, hlen);
    host[hlen] = '\0';
    if (hlen >= 2 && host[0] == '[' && host[hlen - 1] == ']') {   /* [::1] */
        memmove (host, host + 1, hlen - 2);
        host[hlen - 2] = '\0';
    }
    if (!*host)
        return ak_err_set (err, AK_EINVAL, "%s: no host before the port", endpoint);
    if (bind)
        return 0;               /* '*', an address or an interface: ZeroMQ's to judge */
    struct addrinfo hints, *res = NULL;
    memset (&hints, 0, sizeof hints);
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    int grc = getaddrinfo (host, NULL, &hints, &res);
    if (res)
        freeaddrinfo (res);
    if (grc == EAI_NONAME)
        return ak_err_set (err, AK_EINVAL, "%s: host '%s' does not resolve (%s)", endpoint, host,
                           gai_strerror (grc));
    return 0;                   /* resolved, or a failure that may pass: ZeroMQ retries */
}

int ak_endpoint_check (const char *endpoint, bool bind, ak_err_t *err)
{
    if (!endpoint || !*endpoint)
        return ak_err_set (err, AK_EINVAL, "empty endpoint (expected tcp://HOST:PORT or ipc:///PATH)");
    if (strncmp (endpoint, "tcp://", 6) == 0)
        return s_tcp (endpoint, endpoint + 6, bind, err);
    if (strncmp (endpoint, "ipc://", 6) == 0) {
        size_t n = strlen (endpoint + 6);
        struct sockaddr_un sun;
        if (n == 0)
            return ak_err_set (err, AK_EINVAL, "%s: no path after ipc://", endpoint);
        if (n >= sizeof sun.sun_path)
            return ak_err_set (err, AK_EINVAL, "%s: the path is %zu characters, a Unix socket takes "
                               "at most %zu", endpoint, n, sizeof sun.sun_path - 1);
        return 0;
    }
    return ak_err_set (err, AK_EINVAL, "'%s' is not a tcp:// or ipc:// endpoint "
                       "(expected tcp://HOST:PORT or ipc:///PATH)", endpoint);
}
