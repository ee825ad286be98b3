/* The health port cannot be starved: with 2,000 connections held open against it (half of
 * them idle, half with a request sent only in part, re-opened after the server drops them),
 * /healthz and /readyz still answer every probe within 100 ms. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "common/clock.h"
#include "worker/observe/metrics.h"

#define HELD      2000
#define PROBES    40
#define BUDGET_MS 100

static int64_t now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static struct sockaddr_in addr_of(int port) {
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    return a;
}

/* A held connection: non-blocking connect, then (odd i) the first half of a request. */
static int hold(int port, int i) {
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    assert_true(fd >= 0);
    struct sockaddr_in a = addr_of(port);
    if (connect(fd, (struct sockaddr *)&a, sizeof(a)) && errno != EINPROGRESS) {
        close(fd);
        return -1;
    }
    if (i % 2) {
        struct pollfd p = {fd, POLLOUT, 0};
        if (poll(&p, 1, 0) == 1) (void)!send(fd, "GET /healthz HTTP/1.1\r\nHost: x\r\n", 32, 0);
    }
    return fd;
}

/* Re-opens every held connection the server has closed (the attacker keeps the pressure). */
static void rehold(int port, int *fds) {
    struct pollfd *p = calloc(HELD, sizeof(*p));
    assert_non_null(p);
    for (int i = 0; i < HELD; i++)
        p[i] = (struct pollfd){fds[i], POLLIN, 0};
    poll(p, HELD, 0);
    char buf[512];
    for (int i = 0; i < HELD; i++) {
        if (fds[i] >= 0 && !(p[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
        if (fds[i] >= 0 && recv(fds[i], buf, sizeof(buf), 0) > 0) continue;
        if (fds[i] >= 0) close(fds[i]);
        fds[i] = hold(port, i);
    }
    free(p);
}

/* One probe: connect, send the request, read the whole answer. Its ms, or -1 when it did not
 * complete within 1 s; *status the HTTP status. */
static int64_t probe(int port, const char *path, int *status) {
    int64_t t0 = now_ms();
    *status = 0;
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    assert_true(fd >= 0);
    struct sockaddr_in a = addr_of(port);
    char req[128], resp[1024];
    int n = snprintf(req, sizeof(req), "GET %s HTTP/1.1\r\nHost: probe\r\n\r\n", path);
    size_t got = 0, sent = 0;
    int connected = connect(fd, (struct sockaddr *)&a, sizeof(a)) == 0;
    if (!connected && errno != EINPROGRESS) {
        close(fd);
        return -1;
    }
    for (;;) {
        int left = (int)(t0 + 1000 - now_ms());
        if (left <= 0) break;
        struct pollfd p = {fd, (short)(sent < (size_t)n ? POLLOUT : POLLIN), 0};
        if (poll(&p, 1, left) != 1) continue;
        if (sent < (size_t)n) {
            ssize_t w = send(fd, req + sent, (size_t)n - sent, MSG_NOSIGNAL);
            if (w < 0 && errno != EAGAIN) break;
            if (w > 0) sent += (size_t)w;
            continue;
        }
        ssize_t r = recv(fd, resp + got, sizeof(resp) - 1 - got, 0);
        if (r < 0 && errno == EAGAIN) continue;
        if (r <= 0) break; /* the server closes after the answer */
        got += (size_t)r;
        if (got == sizeof(resp) - 1) break;
    }
    close(fd);
    resp[got] = '\0';
    if (sscanf(resp, "HTTP/1.%*d %d", status) != 1) return -1;
    return now_ms() - t0;
}

static void test_health_under_held_sockets(void **state) {
    (void)state;
    struct rlimit rl;
    assert_int_equal(getrlimit(RLIMIT_NOFILE, &rl), 0);
    if (rl.rlim_cur < 3 * HELD) { /* the held sockets and the server's own, in one process */
        rl.rlim_cur = rl.rlim_max < 3 * HELD ? rl.rlim_max : 3 * HELD;
        assert_int_equal(setrlimit(RLIMIT_NOFILE, &rl), 0);
    }
    assert_true(rl.rlim_cur >= HELD + 512);

    worker_metrics_t m;
    worker_metrics_reset(&m);
    atomic_store(&m.last_poll_ms, common_now_ms());
    atomic_store(&m.group_joined, 1);
    atomic_store(&m.sink_connected, 1);
    worker_http_t *h = NULL;
    common_err_t err;
    assert_int_equal(worker_http_start("127.0.0.1", 0, &m, NULL, &h, &err), 0);
    int port = worker_http_port(h);

    int *fds = malloc(sizeof(*fds) * HELD);
    assert_non_null(fds);
    for (int i = 0; i < HELD; i++)
        fds[i] = hold(port, i);
    usleep(200 * 1000);

    int64_t worst = 0;
    for (int i = 0; i < PROBES; i++) {
        if (i % 4 == 0) rehold(port, fds); /* each round re-opens ~1,750: a few suffice */
        atomic_store(&m.last_poll_ms, common_now_ms());
        int status;
        const char *path = i % 2 ? "/readyz" : "/healthz";
        int64_t ms = probe(port, path, &status);
        if (ms < 0 || ms >= BUDGET_MS || status != 200)
            fail_msg("probe %d of %s with %d connections held: %lld ms, status %d (want 200 "
                     "within %d ms)",
                     i, path, HELD, (long long)ms, status, BUDGET_MS);
        if (ms > worst) worst = ms;
        usleep(20 * 1000);
    }
    printf("%d probes with %d connections held: slowest %lld ms\n", PROBES, HELD, (long long)worst);
    for (int i = 0; i < HELD; i++)
        if (fds[i] >= 0) close(fds[i]);
    free(fds);
    /* once the pressure is gone, /metrics answers as before */
    int status;
    assert_true(probe(port, "/metrics", &status) >= 0);
    assert_int_equal(status, 200);
    worker_http_stop(h);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_health_under_held_sockets),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
