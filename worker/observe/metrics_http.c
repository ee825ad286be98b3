/* /healthz, /readyz and /metrics on libmicrohttpd's internal polling thread (see
 * worker/observe/metrics.h). Requests only read atomics, so the pipeline never waits for a
 * scrape. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include <microhttpd.h>

#include "common/clock.h"
#include "worker/observe/metrics.h"

struct worker_http {
    struct MHD_Daemon *d;
    const worker_metrics_t *m;
    worker_metrics_info_t info; /* strings below, owned */
    char *strs[4];
    int port;
};

static enum MHD_Result reply(struct MHD_Connection *c, unsigned status, char *body,
                             const char *type) {
    /* body is malloc'd and handed to MHD, which frees it after sending */
    struct MHD_Response *r =
        MHD_create_response_from_buffer(strlen(body), body, MHD_RESPMEM_MUST_FREE);
    if (!r) {
        free(body);
        return MHD_NO;
    }
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, type);
    MHD_add_response_header(r, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
    enum MHD_Result ok = MHD_queue_response(c, status, r);
    MHD_destroy_response(r);
    return ok;
}

static enum MHD_Result reply_text(struct MHD_Connection *c, unsigned status, const char *text) {
    char *body = strdup(text);
    if (!body) return MHD_NO;
    return reply(c, status, body, "text/plain; charset=utf-8");
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url,
                                  const char *method, const char *version, const char *upload_data,
                                  size_t *upload_data_size, void **con_cls) {
    worker_http_t *h = cls;
    if (strcmp(method, MHD_HTTP_METHOD_GET) && strcmp(method, MHD_HTTP_METHOD_HEAD))
        return reply_text(c, MHD_HTTP_METHOD_NOT_ALLOWED, "GET only\n");
    int64_t now = common_now_ms();
    if (!strcmp(url, "/healthz")) {
        if (worker_metrics_healthy(h->m, now)) return reply_text(c, MHD_HTTP_OK, "ok\n");
        return reply_text(c, MHD_HTTP_SERVICE_UNAVAILABLE,
                          "poll loop stalled (no turn in the last 30 s)\n");
    }
    if (!strcmp(url, "/readyz")) {
        if (worker_metrics_ready(h->m)) return reply_text(c, MHD_HTTP_OK, "ready\n");
        return reply_text(c, MHD_HTTP_SERVICE_UNAVAILABLE,
                          "not ready: consumer group not joined or PostgreSQL not connected\n");
    }
    if (!strcmp(url, "/metrics")) {
        char *body = worker_metrics_render(h->m, &h->info, now);
        if (!body) return reply_text(c, MHD_HTTP_INTERNAL_SERVER_ERROR, "out of memory\n");
        return reply(c, MHD_HTTP_OK, body, "text/plain; version=0.0.4; charset=utf-8");
    }
    return reply_text(c, MHD_HTTP_NOT_FOUND, "not found: try /healthz, /readyz or /metrics\n");
}

int worker_http_port(const worker_http_t *h) {
    return h ? h->port : 0;
}

void worker_http_stop(worker_http_t *h) {
    if (!h) return;
    if (h->d) MHD_stop_daemon(h->d);
    for (int i = 0; i < 4; i++)
        free(h->strs[i]);
    free(h);
}

int worker_http_start(const char *addr, int port, const worker_metrics_t *m,
                      const worker_metrics_info_t *info, worker_http_t **out, char *err,
                      size_t errlen) {
    *out = NULL;
    struct sockaddr_in6 a6 = {0};
    struct sockaddr_in a4 = {0};
    struct sockaddr *sa;
    unsigned flags = MHD_USE_AUTO_INTERNAL_THREAD;
    if (!addr) addr = "0.0.0.0";
    if (port < 0 || port > 65535) {
        snprintf(err, errlen, "--http-port %d: use 0..65535", port);
        return 2;
    }
    if (inet_pton(AF_INET, addr, &a4.sin_addr) == 1) {
        a4.sin_family = AF_INET;
        a4.sin_port = htons((uint16_t)port);
        sa = (struct sockaddr *)&a4;
    } else if (inet_pton(AF_INET6, addr, &a6.sin6_addr) == 1) {
        a6.sin6_family = AF_INET6;
        a6.sin6_port = htons((uint16_t)port);
        sa = (struct sockaddr *)&a6;
        flags |= MHD_USE_IPv6;
    } else {
        snprintf(err, errlen, "--http-addr '%s': give an IPv4 or IPv6 address (e.g. 0.0.0.0)",
                 addr);
        return 2;
    }
    worker_http_t *h = calloc(1, sizeof(*h));
    if (!h) {
        snprintf(err, errlen, "out of memory");
        return 1;
    }
    h->m = m;
    const char *src[4] = {0};
    if (info) {
        src[0] = info->backend, src[1] = info->precision, src[2] = info->model;
        src[3] = info->worker;
    }
    for (int i = 0; i < 4; i++)
        if (!(h->strs[i] = strdup(src[i] ? src[i] : ""))) {
            snprintf(err, errlen, "out of memory");
            worker_http_stop(h);
            return 1;
        }
    h->info = (worker_metrics_info_t){h->strs[0], h->strs[1], h->strs[2], h->strs[3]};
    /* scrapers and probes are few: bound connections and idle time so a stuck client costs
     * nothing */
    h->d = MHD_start_daemon(flags, (uint16_t)port, NULL, NULL, on_request, h, MHD_OPTION_SOCK_ADDR,
                            sa, MHD_OPTION_CONNECTION_LIMIT, (unsigned)64,
                            MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)10, MHD_OPTION_END);
    if (!h->d) {
        snprintf(err, errlen,
                 "cannot serve HTTP on %s:%d (port in use or not allowed): pick another "
                 "--http-port",
                 addr, port);
        worker_http_stop(h);
        return 1;
    }
    const union MHD_DaemonInfo *di = MHD_get_daemon_info(h->d, MHD_DAEMON_INFO_BIND_PORT);
    h->port = di ? di->port : port;
    *out = h;
    return 0;
}
