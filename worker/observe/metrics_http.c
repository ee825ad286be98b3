/* /healthz, /readyz and /metrics on one thread of their own (see worker/observe/metrics.h).
 * Requests only read atomics, so the pipeline never waits for a scrape.
 *
 * Built so that no client can starve the probes: the thread accepts every connection at once
 * (epoll), a connection has HTTP_HEAD_MS to send its request head and HTTP_DONE_MS to take
 * its answer, and when all HTTP_MAX_CONNS slots are taken a new connection evicts the oldest
 * one still sending its head (idle or slow), so a probe, which sends its request in one
 * packet, is always read and answered within a turn of the loop. One request per connection
 * (Connection: close): probes and scrapers open one each time anyway. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/err.h"
#include "worker/observe/metrics.h"

#define HTTP_MAX_CONNS  256  /* far below a process's file limit, far above probes + scrapers */
#define HTTP_HEAD_BYTES 2048 /* a request head longer than this is refused (431) */
#define HTTP_HEAD_MS    1000 /* from accept to the end of the request head */
#define HTTP_DONE_MS    5000 /* from accept to the last byte of the answer */
#define HTTP_TICK_MS    50   /* how often the deadlines are checked */

typedef struct {
    int fd;            /* -1 = free */
    int64_t opened_ms; /* accept time (common_now_ms) */
    char *head;        /* (HTTP_HEAD_BYTES) the request head so far; a slice of one block */
    size_t head_len;
    char *out; /* malloc'd answer (status line, headers, body) once the head is in; else NULL */
    size_t out_len, out_off;
} http_conn_t;

struct worker_http {
    const worker_metrics_t *m;
    worker_metrics_info_t info; /* strings below, owned */
    char *strs[4];
    int port;
    int listen_fd, wake_fd, ep; /* -1 when not open */
    pthread_t thread;
    int running;
    http_conn_t conns[HTTP_MAX_CONNS];
    char *heads; /* (HTTP_MAX_CONNS * HTTP_HEAD_BYTES) the conns' head buffers */
};

/* epoll data: the slot index, or these for the two other descriptors */
#define HTTP_EV_LISTEN ((uint64_t)HTTP_MAX_CONNS)
#define HTTP_EV_WAKE   ((uint64_t)HTTP_MAX_CONNS + 1)

static void conn_close(worker_http_t *h, http_conn_t *c) {
    if (c->fd < 0) return;
    epoll_ctl(h->ep, EPOLL_CTL_DEL, c->fd, NULL);
    close(c->fd);
    free(c->out);
    *c = (http_conn_t){.fd = -1, .head = c->head};
}

/* Builds the whole answer into c->out; NULL body = out of memory (a 500 without one). */
static void answer(http_conn_t *c, int status, const char *type, char *body, int head_only) {
    const char *reason = status == 200   ? "OK"
                         : status == 404 ? "Not Found"
                         : status == 405 ? "Method Not Allowed"
                         : status == 431 ? "Request Header Fields Too Large"
                         : status == 503 ? "Service Unavailable"
                                         : "Internal Server Error";
    size_t blen = body ? strlen(body) : 0;
    char hdr[256];
    int n = snprintf(hdr, sizeof(hdr),
                     "HTTP/1.1 %d %s\r\nContent-Type: %s\r\nCache-Control: no-store\r\n"
                     "Content-Length: %zu\r\nConnection: close\r\n\r\n",
                     status, reason, type, blen);
    size_t send_body = head_only ? 0 : blen;
    if ((c->out = malloc((size_t)n + send_body + 1))) {
        memcpy(c->out, hdr, (size_t)n);
        if (send_body) memcpy(c->out + n, body, send_body);
        c->out_len = (size_t)n + send_body;
        c->out_off = 0;
    }
    free(body);
}

static void answer_text(http_conn_t *c, int status, const char *text, int head_only) {
    answer(c, status, "text/plain; charset=utf-8", strdup(text), head_only);
}

/* The request head is in c->head: picks the answer. */
static void route(worker_http_t *h, http_conn_t *c) {
    char method[8] = "", path[256] = "";
    c->head[c->head_len] = '\0';
    if (sscanf(c->head, "%7s %255[^ ?\r\n]", method, path) != 2) {
        answer_text(c, 405, "GET only\n", 0);
        return;
    }
    int head_only = !strcmp(method, "HEAD");
    if (strcmp(method, "GET") && !head_only) {
        answer_text(c, 405, "GET only\n", 0);
        return;
    }
    int64_t now = common_now_ms();
    if (!strcmp(path, "/healthz")) {
        if (worker_metrics_healthy(h->m, now))
            answer_text(c, 200, "ok\n", head_only);
        else
            answer_text(c, 503, "poll loop stalled (no turn in the last 30 s)\n", head_only);
    } else if (!strcmp(path, "/readyz")) {
        if (worker_metrics_ready(h->m))
            answer_text(c, 200, "ready\n", head_only);
        else
            answer_text(c, 503,
                        "not ready: consumer group not joined or PostgreSQL not connected\n",
                        head_only);
    } else if (!strcmp(path, "/metrics")) {
        char *body = worker_metrics_render(h->m, &h->info, now);
        if (body)
            answer(c, 200, "text/plain; version=0.0.4; charset=utf-8", body, head_only);
        else
            answer_text(c, 500, "out of memory\n", head_only);
    } else {
        answer_text(c, 404, "not found: try /healthz, /readyz or /metrics\n", head_only);
    }
}

/* Sends what the socket takes; closes the connection once the answer is out. */
static void conn_write(worker_http_t *h, http_conn_t *c) {
    while (c->out_off < c->out_len) {
        ssize_t w = send(c->fd, c->out + c->out_off, c->out_len - c->out_off, MSG_NOSIGNAL);
        if (w < 0 && (errno == EAGAIN || errno == EINTR)) {
            struct epoll_event ev = {.events = EPOLLOUT, .data.u64 = (uint64_t)(c - h->conns)};
            epoll_ctl(h->ep, EPOLL_CTL_MOD, c->fd, &ev);
            return;
        }
        if (w <= 0) break;
        c->out_off += (size_t)w;
    }
    conn_close(h, c);
}

static void conn_read(worker_http_t *h, http_conn_t *c) {
    for (;;) {
        size_t room = HTTP_HEAD_BYTES - 1 - c->head_len;
        if (room == 0) {
            answer_text(c, 431, "request head too long\n", 0);
            break;
        }
        ssize_t r = recv(c->fd, c->head + c->head_len, room, 0);
        if (r < 0 && (errno == EAGAIN || errno == EINTR)) return;
        if (r <= 0) {
            conn_close(h, c);
            return;
        }
        c->head_len += (size_t)r;
        c->head[c->head_len] = '\0';
        if (strstr(c->head, "\r\n\r\n") || strstr(c->head, "\n\n")) {
            route(h, c);
            break;
        }
    }
    if (!c->out) {
        conn_close(h, c); /* out of memory: nothing to send */
        return;
    }
    conn_write(h, c);
}

/* A free slot, evicting the oldest connection still sending its head (else the oldest) when
 * every slot is taken. */
static http_conn_t *free_slot(worker_http_t *h) {
    http_conn_t *oldest = NULL, *oldest_reading = NULL;
    for (int i = 0; i < HTTP_MAX_CONNS; i++) {
        http_conn_t *c = &h->conns[i];
        if (c->fd < 0) return c;
        if (!oldest || c->opened_ms < oldest->opened_ms) oldest = c;
        if (!c->out && (!oldest_reading || c->opened_ms < oldest_reading->opened_ms))
            oldest_reading = c;
    }
    http_conn_t *victim = oldest_reading ? oldest_reading : oldest;
    conn_close(h, victim);
    return victim;
}

static void accept_all(worker_http_t *h) {
    for (;;) {
        int fd = accept4(h->listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0 && (errno == EMFILE || errno == ENFILE)) {
            conn_close(h, free_slot(h)); /* out of descriptors: give one back, then retry */
            fd = accept4(h->listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        }
        if (fd < 0) return; /* EAGAIN: none left; else try again on the next event */
        http_conn_t *c = free_slot(h);
        struct epoll_event ev = {.events = EPOLLIN, .data.u64 = (uint64_t)(c - h->conns)};
        if (epoll_ctl(h->ep, EPOLL_CTL_ADD, fd, &ev)) {
            close(fd);
            continue;
        }
        c->fd = fd;
        c->opened_ms = common_now_ms();
        c->head_len = 0;
        conn_read(h, c); /* a probe's request is usually there already */
    }
}

static void expire(worker_http_t *h, int64_t now) {
    for (int i = 0; i < HTTP_MAX_CONNS; i++) {
        http_conn_t *c = &h->conns[i];
        if (c->fd < 0) continue;
        int64_t age = now - c->opened_ms;
        if (age > HTTP_DONE_MS || (!c->out && age > HTTP_HEAD_MS)) conn_close(h, c);
    }
}

static void *serve(void *arg) {
    worker_http_t *h = arg;
    struct epoll_event evs[64];
    int64_t last_expire = 0;
    for (;;) {
        int n = epoll_wait(h->ep, evs, 64, HTTP_TICK_MS);
        for (int i = 0; i < n; i++) {
            uint64_t id = evs[i].data.u64;
            if (id == HTTP_EV_WAKE) return NULL;
            if (id == HTTP_EV_LISTEN) {
                accept_all(h);
                continue;
            }
            http_conn_t *c = &h->conns[id];
            if (c->fd < 0) continue; /* evicted earlier in this turn */
            if (evs[i].events & (EPOLLERR | EPOLLHUP) && !(evs[i].events & EPOLLIN))
                conn_close(h, c);
            else if (c->out)
                conn_write(h, c);
            else
                conn_read(h, c);
        }
        int64_t now = common_now_ms();
        if (now - last_expire >= HTTP_TICK_MS) {
            expire(h, now);
            last_expire = now;
        }
    }
}

int worker_http_port(const worker_http_t *h) {
    return h ? h->port : 0;
}

void worker_http_stop(worker_http_t *h) {
    if (!h) return;
    if (h->running) {
        uint64_t one = 1;
        (void)!write(h->wake_fd, &one, sizeof(one));
        pthread_join(h->thread, NULL);
    }
    for (int i = 0; i < HTTP_MAX_CONNS; i++)
        if (h->conns[i].fd >= 0) conn_close(h, &h->conns[i]);
    if (h->ep >= 0) close(h->ep);
    if (h->wake_fd >= 0) close(h->wake_fd);
    if (h->listen_fd >= 0) close(h->listen_fd);
    for (int i = 0; i < 4; i++)
        free(h->strs[i]);
    free(h->heads);
    free(h);
}

/* Binds and listens on sa; 0, or -1. Sets h->listen_fd and h->port. */
static int http_listen(worker_http_t *h, const struct sockaddr *sa, socklen_t salen) {
    h->listen_fd = socket(sa->sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (h->listen_fd < 0) return -1;
    int one = 1;
    setsockopt(h->listen_fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (bind(h->listen_fd, sa, salen) || listen(h->listen_fd, SOMAXCONN)) return -1;
    struct sockaddr_storage got;
    socklen_t len = sizeof(got);
    if (getsockname(h->listen_fd, (struct sockaddr *)&got, &len)) return -1;
    h->port = ntohs(got.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&got)->sin6_port
                                              : ((struct sockaddr_in *)&got)->sin_port);
    return 0;
}

common_status_t worker_http_start(const char *addr, int port, const worker_metrics_t *m,
                                  const worker_metrics_info_t *info, worker_http_t **out,
                                  common_err_t *e) {
    *out = NULL;
    struct sockaddr_in6 a6 = {0};
    struct sockaddr_in a4 = {0};
    struct sockaddr *sa;
    socklen_t salen;
    if (!addr) addr = "0.0.0.0";
    if (port < 0 || port > 65535) {
        return common_err_set(e, COMMON_USAGE, "--http-port %d: use 0..65535", port);
    }
    if (inet_pton(AF_INET, addr, &a4.sin_addr) == 1) {
        a4.sin_family = AF_INET;
        a4.sin_port = htons((uint16_t)port);
        sa = (struct sockaddr *)&a4, salen = sizeof(a4);
    } else if (inet_pton(AF_INET6, addr, &a6.sin6_addr) == 1) {
        a6.sin6_family = AF_INET6;
        a6.sin6_port = htons((uint16_t)port);
        sa = (struct sockaddr *)&a6, salen = sizeof(a6);
    } else {
        return common_err_set(
            e, COMMON_USAGE, "--http-addr '%s': give an IPv4 or IPv6 address (e.g. 0.0.0.0)", addr);
    }
    worker_http_t *h = calloc(1, sizeof(*h));
    if (!h) return common_err_set(e, COMMON_FATAL, "out of memory");
    h->listen_fd = h->wake_fd = h->ep = -1;
    h->m = m;
    h->heads = malloc((size_t)HTTP_MAX_CONNS * HTTP_HEAD_BYTES);
    for (int i = 0; i < HTTP_MAX_CONNS; i++)
        h->conns[i] = (http_conn_t){.fd = -1, .head = h->heads + (size_t)i * HTTP_HEAD_BYTES};
    const char *src[4] = {0};
    if (info) {
        src[0] = info->backend, src[1] = info->precision, src[2] = info->model;
        src[3] = info->worker;
    }
    int oom = !h->heads;
    for (int i = 0; i < 4; i++)
        oom |= !(h->strs[i] = strdup(src[i] ? src[i] : ""));
    if (oom) {
        worker_http_stop(h);
        return common_err_set(e, COMMON_FATAL, "out of memory");
    }
    h->info = (worker_metrics_info_t){h->strs[0], h->strs[1], h->strs[2], h->strs[3]};
    if (http_listen(h, sa, salen)) {
        common_err_set(e, COMMON_FATAL, "cannot serve HTTP on %s:%d", addr, port);
        common_err_detail(e, "%s: port in use or not allowed", strerror(errno));
        common_err_hint(e, "pick another --http-port");
        worker_http_stop(h);
        return COMMON_FATAL;
    }
    struct epoll_event lev = {.events = EPOLLIN, .data.u64 = HTTP_EV_LISTEN};
    struct epoll_event wev = {.events = EPOLLIN, .data.u64 = HTTP_EV_WAKE};
    if ((h->ep = epoll_create1(EPOLL_CLOEXEC)) < 0 ||
        (h->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) < 0 ||
        epoll_ctl(h->ep, EPOLL_CTL_ADD, h->listen_fd, &lev) ||
        epoll_ctl(h->ep, EPOLL_CTL_ADD, h->wake_fd, &wev) ||
        pthread_create(&h->thread, NULL, serve, h)) {
        common_err_set(e, COMMON_FATAL, "cannot start the HTTP thread: %s", strerror(errno));
        worker_http_stop(h);
        return COMMON_FATAL;
    }
    h->running = 1;
    *out = h;
    return COMMON_OK;
}
