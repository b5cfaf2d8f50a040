/* metrics_listen.c - see metrics_listen.h. */
#include "metrics_listen.h"

#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <unistd.h>

#define HOST_MAX 256

/* 1 when p is 1 to 5 decimal digits worth at most 65535 */
static int valid_port(const char *p)
{
    size_t n = strlen(p);
    long v = 0;
    if (n == 0 || n > 5) return 0;
    for (size_t i = 0; i < n; i++) {
        if (p[i] < '0' || p[i] > '9') return 0;
        v = v * 10 + (p[i] - '0');
    }
    return v <= 65535;
}

/* addr split into host (brackets removed; "" for every interface) and
 * port (decimal digits, 0..65535); -1 with a message in err. */
static int split_address(const char *addr, char *host, char *port, ld_error *err)
{
    const char *colon = strrchr(addr, ':');
    if (!colon)
        return LD_FAIL(err, LD_ERR_USAGE, 0, "'%s': expected ADDR:PORT (127.0.0.1:9464, [::1]:9464, :9464)", addr), -1;
    size_t hlen = (size_t)(colon - addr);
    const char *h = addr;
    if (hlen >= 2 && addr[0] == '[' && addr[hlen - 1] == ']') {
        h++;
        hlen -= 2;
    } else if (memchr(addr, ':', hlen) || memchr(addr, '[', hlen) || memchr(addr, ']', hlen)) {
        return LD_FAIL(err, LD_ERR_USAGE, 0, "'%s': an IPv6 address goes in brackets: [::1]:9464", addr), -1;
    }
    if (hlen >= HOST_MAX) return LD_FAIL(err, LD_ERR_USAGE, 0, "'%s': host name too long", addr), -1;
    memcpy(host, h, hlen);
    host[hlen] = 0;
    const char *p = colon + 1;
    size_t plen = strlen(p);
    if (!valid_port(p))
        return LD_FAIL(err, LD_ERR_USAGE, 0, "'%s': the port must be a number from 0 to 65535", addr), -1;
    memcpy(port, p, plen + 1);
    return 0;
}

/* A socket of ai's family bound to ai and listening; -1 with errno. */
static int bind_listen(const struct addrinfo *ai, int dual_stack)
{
    int fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
    if (fd < 0) return -1;
    int one = 1, zero = 0;
    (void)setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (ai->ai_family == AF_INET6)
        (void)setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, dual_stack ? &zero : &one, sizeof one);
    if (bind(fd, ai->ai_addr, ai->ai_addrlen) == 0 && listen(fd, 64) == 0) return fd;
    int saved = errno;
    close(fd);
    errno = saved;
    return -1;
}

/* every interface: "::" taking IPv4 too, else 0.0.0.0 where the host
 * has no IPv6 */
static int listen_any(const char *port, int *saved_errno)
{
    static const char *const anys[] = {"::", "0.0.0.0"};
    for (int i = 0; i < 2; i++) {
        struct addrinfo hints = {0}, *res = NULL;
        hints.ai_socktype = SOCK_STREAM;
        hints.ai_flags = AI_NUMERICHOST | AI_NUMERICSERV | AI_PASSIVE;
        if (getaddrinfo(anys[i], port, &hints, &res) != 0) continue;
        int fd = bind_listen(res, 1);
        *saved_errno = errno;
        freeaddrinfo(res);
        if (fd >= 0) return fd;
        if (*saved_errno != EAFNOSUPPORT && *saved_errno != EADDRNOTAVAIL) return -1;
    }
    return -1;
}

static int fail_listen(const char *addr, int e, ld_error *err)
{
    if (e == EADDRINUSE)
        LD_FAIL(err, LD_ERR_IO, 0, "cannot listen on %s: address already in use (another process serves that port)", addr);
    else
        LD_FAIL(err, LD_ERR_IO, 0, "cannot listen on %s: %s", addr, strerror(e));
    return -1;
}

int ld_metrics_listen(const char *addr, ld_error *err)
{
    char host[HOST_MAX], port[8];
    if (split_address(addr, host, port, err) != 0) return -1;
    int e = 0, fd;
    if (!host[0]) {
        fd = listen_any(port, &e);
    } else {
        struct addrinfo hints = {0}, *res = NULL;
        hints.ai_socktype = SOCK_STREAM;
        hints.ai_flags = AI_NUMERICSERV | AI_PASSIVE;
        int rc = getaddrinfo(host, port, &hints, &res);
        if (rc != 0)
            return LD_FAIL(err, LD_ERR_USAGE, 0, "cannot listen on %s: '%s': %s", addr, host, gai_strerror(rc)), -1;
        fd = bind_listen(res, 0);
        e = errno;
        freeaddrinfo(res);
    }
    return fd >= 0 ? fd : fail_listen(addr, e, err);
}

int ld_metrics_listen_port(int fd)
{
    struct sockaddr_storage ss;
    socklen_t len = sizeof ss;
    if (getsockname(fd, (struct sockaddr *)&ss, &len) != 0) return -1;
    if (ss.ss_family == AF_INET) return ntohs(((struct sockaddr_in *)&ss)->sin_port);
    if (ss.ss_family == AF_INET6) return ntohs(((struct sockaddr_in6 *)&ss)->sin6_port);
    return -1;
}
