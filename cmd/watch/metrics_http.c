/* metrics_http.c - see metrics_http.h. */
#include "metrics_http.h"

#ifdef LD_HAVE_MICROHTTPD

#include <fcntl.h>
#include <microhttpd.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ld_dynlib.h"
#include "logdiff_config.h"
#include "metrics_listen.h"

#if MHD_VERSION >= 0x00097002
typedef enum MHD_Result ld_mhd_result;
#else
typedef int ld_mhd_result;
#endif

/* libmicrohttpd is opened on the first --metrics-listen, not linked
 * (include/ld_dynlib.h says why); it is called through mhd, whose members
 * have the library's own names and types. */
#define MHD_FUNCS(X, t)                                                                    \
    X(t, MHD_start_daemon) X(t, MHD_stop_daemon) X(t, MHD_create_response_from_buffer)     \
    X(t, MHD_create_response_from_buffer_with_free_callback) X(t, MHD_add_response_header) \
    X(t, MHD_queue_response) X(t, MHD_destroy_response)

static struct {
    MHD_FUNCS(LD_DYNLIB_SLOT, _)
} mhd;

LD_DYNLIB_BINDER(bind_mhd, mhd, MHD_FUNCS)

static ld_dynlib mhd_lib = LD_DYNLIB_INIT(LD_MHD_SONAME, "--metrics-listen", bind_mhd);

#define CONTENT_TYPE "text/plain; version=0.0.4; charset=utf-8"

struct ld_metrics_http {
    struct MHD_Daemon *daemon;
    ld_metrics *metrics;
    int port;
};

/* a fixed short text answer (404, 405, 500) */
static ld_mhd_result answer_text(struct MHD_Connection *c, unsigned status, const char *text)
{
    struct MHD_Response *r =
        mhd.MHD_create_response_from_buffer(strlen(text), (void *)text, MHD_RESPMEM_PERSISTENT);
    if (!r) return MHD_NO;
    mhd.MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, "text/plain; charset=utf-8");
    if (status == MHD_HTTP_METHOD_NOT_ALLOWED) mhd.MHD_add_response_header(r, MHD_HTTP_HEADER_ALLOW, "GET, HEAD");
    ld_mhd_result rc = mhd.MHD_queue_response(c, status, r);
    mhd.MHD_destroy_response(r);
    return rc;
}

static ld_mhd_result answer_metrics(struct MHD_Connection *c, ld_metrics *m)
{
    size_t len = 0;
    char *text = ld_metrics_render(m, ld_metrics_now(), &len);
    if (!text) return answer_text(c, MHD_HTTP_INTERNAL_SERVER_ERROR, "out of memory\n");
    struct MHD_Response *r = mhd.MHD_create_response_from_buffer_with_free_callback(len, text, free);
    if (!r) {
        free(text);
        return MHD_NO;
    }
    mhd.MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, CONTENT_TYPE);
    ld_mhd_result rc = mhd.MHD_queue_response(c, MHD_HTTP_OK, r);
    mhd.MHD_destroy_response(r);
    return rc;
}

static ld_mhd_result on_request(void *cls, struct MHD_Connection *c, const char *url,
                                const char *method, const char *version, const char *upload_data,
                                size_t *upload_data_size, void **req_cls)
{
    (void)version;
    (void)upload_data;
    (void)req_cls;
    if (*upload_data_size) { /* a body (not asked for) is read and ignored */
        *upload_data_size = 0;
        return MHD_YES;
    }
    if (strcmp(method, MHD_HTTP_METHOD_GET) != 0 && strcmp(method, MHD_HTTP_METHOD_HEAD) != 0)
        return answer_text(c, MHD_HTTP_METHOD_NOT_ALLOWED, "method not allowed: GET /metrics\n");
    if (strcmp(url, "/metrics") != 0)
        return answer_text(c, MHD_HTTP_NOT_FOUND, "not found: the metrics are at /metrics\n");
    return answer_metrics(c, (ld_metrics *)cls);
}

/* The listening socket, closed unless MHD closed it already (whether it
 * does on a failed start depends on the version). */
static void close_if_open(int fd)
{
    if (fcntl(fd, F_GETFD) != -1) close(fd);
}

ld_metrics_http *ld_metrics_http_start(ld_metrics *m, const char *addr, ld_error *err)
{
    if (ld_dynlib_need(&mhd_lib, err) != LD_OK) return NULL;
    ld_metrics_http *h = calloc(1, sizeof *h);
    if (!h) return LD_FAIL(err, LD_ERR_NOMEM, 0, "out of memory"), NULL;
    int fd = ld_metrics_listen(addr, err);
    if (fd < 0) {
        free(h);
        return NULL;
    }
    h->metrics = m;
    h->port = ld_metrics_listen_port(fd);
    h->daemon = mhd.MHD_start_daemon(MHD_USE_POLL_INTERNAL_THREAD, 0, NULL, NULL, on_request, m,
                                 MHD_OPTION_LISTEN_SOCKET, fd, MHD_OPTION_CONNECTION_LIMIT, 32u,
                                 MHD_OPTION_CONNECTION_TIMEOUT, 10u, MHD_OPTION_END);
    if (!h->daemon) {
        close_if_open(fd);
        free(h);
        return LD_FAIL(err, LD_ERR_IO, 0, "cannot serve metrics on %s: libmicrohttpd failed to start", addr), NULL;
    }
    return h;
}

int ld_metrics_http_port(const ld_metrics_http *h)
{
    return h->port;
}

void ld_metrics_http_stop(ld_metrics_http *h)
{
    if (!h) return;
    mhd.MHD_stop_daemon(h->daemon); /* closes the listening socket */
    free(h);
}

#else /* !LD_HAVE_MICROHTTPD */

#include <stddef.h>

ld_metrics_http *ld_metrics_http_start(ld_metrics *m, const char *addr, ld_error *err)
{
    (void)m;
    (void)addr;
    LD_FAIL(err, LD_ERR_UNSUPPORTED, 0, "built without libmicrohttpd: use --metrics-textfile");
    return NULL;
}

int ld_metrics_http_port(const ld_metrics_http *h)
{
    (void)h;
    return -1;
}

void ld_metrics_http_stop(ld_metrics_http *h)
{
    (void)h;
}

#endif
