/* librdkafka mock cluster wrapper plus an optional fixed-port bootstrap relay.
 *
 * librdkafka's mock broker takes a kernel-chosen port and there is no call to pick one, so
 * a fixed --port is served by a relay thread: it accepts on 127.0.0.1:port and copies bytes
 * both ways to the broker. Clients only use it to bootstrap; the metadata they get back names
 * the broker's own loopback address, which they then use directly. */
#include "consumers/mock_broker.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <librdkafka/rdkafka.h>
#include <librdkafka/rdkafka_mock.h>

#include "common/err.h"

#define RELAY_MAX_CONNS 64
#define RELAY_BUF       65536

typedef struct {
    int fd[2];    /* [0] client side, [1] broker side; -1 when unused */
    char *buf[2]; /* buf[i]: bytes read from fd[i] not yet written to fd[1-i] */
    size_t len[2], off[2];
    int eof[2]; /* fd[i] has reached end of stream */
} relay_conn_t;

struct consumers_mock {
    rd_kafka_t *rk; /* owns the mock cluster; never produces */
    rd_kafka_mock_cluster_t *mcluster;
    int partitions;
    char bootstrap[64];
    struct sockaddr_in broker_addr;
    int listen_fd; /* -1 without a relay */
    int stop_pipe[2];
    pthread_t relay;
    int relay_running;
    relay_conn_t conns[RELAY_MAX_CONNS];
};

static void conn_close(relay_conn_t *c) {
    for (int i = 0; i < 2; i++) {
        if (c->fd[i] >= 0) close(c->fd[i]);
        c->fd[i] = -1;
        free(c->buf[i]);
        c->buf[i] = NULL;
        c->len[i] = c->off[i] = 0;
        c->eof[i] = 0;
    }
}

static int set_nonblock(int fd) {
    int fl = fcntl(fd, F_GETFL, 0);
    return fl < 0 ? -1 : fcntl(fd, F_SETFL, fl | O_NONBLOCK);
}

static void relay_accept(consumers_mock_t *m) {
    int cfd = accept(m->listen_fd, NULL, NULL);
    if (cfd < 0) return;
    relay_conn_t *slot = NULL;
    for (int i = 0; i < RELAY_MAX_CONNS && !slot; i++)
        if (m->conns[i].fd[0] < 0) slot = &m->conns[i];
    int bfd = slot ? socket(AF_INET, SOCK_STREAM, 0) : -1;
    /* A blocking connect to loopback completes at once; only then go non-blocking. */
    if (bfd < 0 || connect(bfd, (struct sockaddr *)&m->broker_addr, sizeof(m->broker_addr)) != 0) {
        if (bfd >= 0) close(bfd);
        close(cfd);
        return;
    }
    slot->buf[0] = malloc(RELAY_BUF);
    slot->buf[1] = malloc(RELAY_BUF);
    slot->fd[0] = cfd;
    slot->fd[1] = bfd;
    if (!slot->buf[0] || !slot->buf[1] || set_nonblock(cfd) || set_nonblock(bfd)) conn_close(slot);
}

/* Moves bytes for one connection after poll; returns -1 when the pair is finished. */
static int relay_pump(relay_conn_t *c, const short *revents) {
    for (int i = 0; i < 2; i++) {
        int src = c->fd[i], dst = c->fd[1 - i];
        if (c->len[i] == 0 && !c->eof[i] && (revents[i] & (POLLIN | POLLHUP | POLLERR))) {
            ssize_t n = read(src, c->buf[i], RELAY_BUF);
            if (n > 0) {
                c->len[i] = (size_t)n;
                c->off[i] = 0;
            } else if (n == 0 || (errno != EAGAIN && errno != EINTR)) {
                c->eof[i] = 1;
            }
        }
        if (c->len[i] > c->off[i]) {
            ssize_t n = write(dst, c->buf[i] + c->off[i], c->len[i] - c->off[i]);
            if (n > 0)
                c->off[i] += (size_t)n;
            else if (n < 0 && errno != EAGAIN && errno != EINTR)
                return -1;
            if (c->off[i] == c->len[i]) c->len[i] = c->off[i] = 0;
        }
    }
    /* Kafka has no half-close use: either side gone with nothing pending ends the pair. */
    if ((c->eof[0] && c->len[0] == 0) || (c->eof[1] && c->len[1] == 0)) return -1;
    return 0;
}

static void *relay_main(void *arg) {
    consumers_mock_t *m = arg;
    struct pollfd pfd[2 + 2 * RELAY_MAX_CONNS];
    int owner[2 + 2 * RELAY_MAX_CONNS]; /* connection index of each pollfd from 2 on */
    for (;;) {
        int n = 0;
        pfd[n++] = (struct pollfd){.fd = m->stop_pipe[0], .events = POLLIN};
        pfd[n++] = (struct pollfd){.fd = m->listen_fd, .events = POLLIN};
        for (int i = 0; i < RELAY_MAX_CONNS; i++) {
            relay_conn_t *c = &m->conns[i];
            if (c->fd[0] < 0) continue;
            for (int s = 0; s < 2; s++) {
                short ev = 0;
                if (c->len[s] == 0 && !c->eof[s]) ev |= POLLIN;
                if (c->len[1 - s] > c->off[1 - s]) ev |= POLLOUT;
                owner[n] = i;
                pfd[n++] = (struct pollfd){.fd = c->fd[s], .events = ev};
            }
        }
        if (poll(pfd, (nfds_t)n, 1000) < 0) {
            if (errno == EINTR) continue;
            break;
        }
        if (pfd[0].revents) break;
        if (pfd[1].revents & POLLIN) relay_accept(m);
        for (int k = 2; k < n; k += 2) {
            short rev[2] = {pfd[k].revents, pfd[k + 1].revents};
            relay_conn_t *c = &m->conns[owner[k]];
            if (c->fd[0] != pfd[k].fd) continue; /* slot reused by relay_accept this round */
            if ((rev[0] | rev[1]) && relay_pump(c, rev) < 0) conn_close(c);
        }
    }
    for (int i = 0; i < RELAY_MAX_CONNS; i++)
        conn_close(&m->conns[i]);
    return NULL;
}

static common_status_t relay_start(consumers_mock_t *m, int port, common_err_t *e) {
    const char *bs = rd_kafka_mock_cluster_bootstraps(m->mcluster);
    const char *colon = bs ? strrchr(bs, ':') : NULL;
    if (!colon) {
        common_err_set(e, COMMON_FATAL, "mock cluster gave no bootstrap address");
        common_err_detail(e, "%s", bs ? bs : "");
        return COMMON_FATAL;
    }
    m->broker_addr.sin_family = AF_INET;
    m->broker_addr.sin_port = htons((uint16_t)atoi(colon + 1));
    m->broker_addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);

    m->listen_fd = socket(AF_INET, SOCK_STREAM, 0);
    int on = 1;
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (m->listen_fd < 0 ||
        setsockopt(m->listen_fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof(on)) != 0 ||
        bind(m->listen_fd, (struct sockaddr *)&a, sizeof(a)) != 0 ||
        listen(m->listen_fd, 16) != 0 || set_nonblock(m->listen_fd) != 0)
        return common_err_set(e, COMMON_USAGE,
                              "cannot listen on 127.0.0.1:%d: %s (pick another --port)", port,
                              strerror(errno));
    if (pipe(m->stop_pipe) != 0)
        return common_err_set(e, COMMON_FATAL, "pipe: %s", strerror(errno));
    if (pthread_create(&m->relay, NULL, relay_main, m) != 0)
        return common_err_set(e, COMMON_FATAL, "cannot start the relay thread");
    m->relay_running = 1;
    snprintf(m->bootstrap, sizeof(m->bootstrap), "127.0.0.1:%d", port);
    return COMMON_OK;
}

common_status_t consumers_mock_start(int partitions, int port, consumers_mock_t **out,
                                     const char **bootstrap, common_err_t *e) {
    *out = NULL;
    if (partitions < 1 || port < 0 || port > 65535)
        return common_err_set(e, COMMON_USAGE,
                              "mock broker: partitions must be >= 1 and port 0..65535");
    consumers_mock_t *m = calloc(1, sizeof(*m));
    if (!m) return common_err_set(e, COMMON_FATAL, "out of memory");
    m->partitions = partitions;
    m->listen_fd = -1;
    m->stop_pipe[0] = m->stop_pipe[1] = -1;
    for (int i = 0; i < RELAY_MAX_CONNS; i++)
        m->conns[i].fd[0] = m->conns[i].fd[1] = -1;

    char errstr[512];
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    /* The handle only hosts the mock; keep its own client chatter out of the logs. */
    rd_kafka_conf_set(conf, "log_level", "3", errstr, sizeof(errstr));
    m->rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, errstr, sizeof(errstr));
    if (!m->rk) {
        rd_kafka_conf_destroy(conf);
        free(m);
        return common_err_set(e, COMMON_FATAL, "mock broker: %s", errstr);
    }
    m->mcluster = rd_kafka_mock_cluster_new(m->rk, 1);
    common_status_t st = COMMON_OK;
    if (!m->mcluster)
        st = common_err_set(e, COMMON_FATAL, "mock broker: cannot create the mock cluster");
    if (!st && consumers_mock_log_limits_settable())
        st = consumers_mock_set_log_limits(m, CONSUMERS_MOCK_LOG_BYTES, CONSUMERS_MOCK_LOG_BATCHES,
                                           e);
    if (!st && port == 0)
        snprintf(m->bootstrap, sizeof(m->bootstrap), "%s",
                 rd_kafka_mock_cluster_bootstraps(m->mcluster));
    else if (!st)
        st = relay_start(m, port, e);
    if (st) {
        consumers_mock_stop(m);
        return st;
    }
    *out = m;
    if (bootstrap) *bootstrap = m->bootstrap;
    return COMMON_OK;
}

common_status_t consumers_mock_topic_create(consumers_mock_t *m, const char *topic, int partitions,
                                            common_err_t *e) {
    if (!topic || !*topic) return common_err_set(e, COMMON_USAGE, "topic name is empty");
    rd_kafka_resp_err_t re = rd_kafka_mock_topic_create(
        m->mcluster, topic, partitions > 0 ? partitions : m->partitions, 1);
    if (re)
        return common_err_set(
            e, re == RD_KAFKA_RESP_ERR_TOPIC_ALREADY_EXISTS ? COMMON_USAGE : COMMON_FATAL,
            "cannot create topic %s: %s", topic, rd_kafka_err2str(re));
    return COMMON_OK;
}

int consumers_mock_log_limits_settable(void) {
#ifdef RD_KAFKA_MOCK_HAVE_PARTITION_LOG_LIMITS
    return 1;
#else
    return 0;
#endif
}

common_status_t consumers_mock_set_log_limits(consumers_mock_t *m, long max_bytes, long max_batches,
                                              common_err_t *e) {
    if (max_bytes < 1 || max_batches < 1)
        return common_err_set(e, COMMON_USAGE,
                              "mock broker: the partition log limits must be >= 1");
#ifdef RD_KAFKA_MOCK_HAVE_PARTITION_LOG_LIMITS
    rd_kafka_resp_err_t re =
        rd_kafka_mock_set_partition_log_limits(m->mcluster, (size_t)max_bytes, (size_t)max_batches);
    if (re)
        return common_err_set(e, COMMON_FATAL,
                              "mock broker: cannot set the partition log limits: %s",
                              rd_kafka_err2str(re));
    return COMMON_OK;
#else
    (void)m;
    common_err_set(e, COMMON_USAGE,
                   "the partition log limits cannot be changed with this build's librdkafka");
    common_err_detail(e, "the system library, fixed at 5 MiB / 100000 batches per partition");
    common_err_hint(e, "build reclass with the vendored librdkafka (without "
                       "-DRECLASS_SYSTEM_RDKAFKA=ON)");
    return COMMON_USAGE;
#endif
}

void consumers_mock_stop(consumers_mock_t *m) {
    if (!m) return;
    if (m->relay_running) {
        ssize_t w = write(m->stop_pipe[1], "x", 1);
        (void)w;
        pthread_join(m->relay, NULL);
    }
    if (m->listen_fd >= 0) close(m->listen_fd);
    for (int i = 0; i < 2; i++)
        if (m->stop_pipe[i] >= 0) close(m->stop_pipe[i]);
    if (m->mcluster) rd_kafka_mock_cluster_destroy(m->mcluster);
    if (m->rk) rd_kafka_destroy(m->rk);
    free(m);
}
