/* reclass dev-broker: an in-memory Kafka on loopback (librdkafka's mock cluster) for
 * development, demos and tests. Prints its bootstrap address as the first stdout line and
 * runs until SIGINT/SIGTERM. */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/err.h"
#include "consumers/mock_broker.h"
#include "worker/cli/cli.h"

#define DEV_BROKER_MAX_TOPICS 64

static volatile sig_atomic_t dev_broker_stop;
static void on_signal(int sig) {
    (void)sig;
    dev_broker_stop = 1;
}

/* The options, set into the caller's variables; the log bound's defaults are the wrapper's
 * (consumers/mock_broker.h). */
#define DEV_BROKER_OPTS(port, partitions, topics, log_mb, log_batches)                             \
    {                                                                                              \
        {"port", CLI_INT, port, 0, 65535, NULL, "P", "bootstrap port (0 = any free port)", "0"},   \
            {"partitions",                                                                         \
             CLI_INT,                                                                              \
             partitions,                                                                           \
             1,                                                                                    \
             10000,                                                                                \
             NULL,                                                                                 \
             "N",                                                                                  \
             "partitions of the --topic topics (topics that clients create on first use\n"         \
             "      get 4)",                                                                       \
             "4"},                                                                                 \
            {"topic", CLI_LIST, topics, 0, 0, NULL, "T", "create topic T at start (repeatable)",   \
             NULL},                                                                                \
            {"partition-mb",                                                                       \
             CLI_LONG,                                                                             \
             log_mb,                                                                               \
             1,                                                                                    \
             1L << 20,                                                                             \
             NULL,                                                                                 \
             "N",                                                                                  \
             "log bytes each partition keeps, in MiB",                                             \
             CLS_STR(CONSUMERS_MOCK_LOG_MB)},                                                      \
            {"partition-max-batches",                                                              \
             CLI_LONG,                                                                             \
             log_batches,                                                                          \
             1,                                                                                    \
             1L << 40,                                                                             \
             NULL,                                                                                 \
             "N",                                                                                  \
             "record batches each partition keeps (a producer batch holds\n"                       \
             "      many records)",                                                                \
             CLS_STR(CONSUMERS_MOCK_LOG_BATCHES)},                                                 \
        {                                                                                          \
            NULL, CLI_FLAG, NULL, 0, 0, NULL, NULL, NULL, NULL                                     \
        }                                                                                          \
    }

static void usage(FILE *f) {
    fprintf(f,
            "usage: reclass dev-broker [--port P] [--partitions N] [--topic T]...\n"
            "                          [--partition-mb N] [--partition-max-batches N]\n\n"
            "Runs an in-memory Kafka broker on 127.0.0.1 (librdkafka's mock cluster) until\n"
            "SIGINT/SIGTERM, and prints its bootstrap address on stdout. For development and\n"
            "tests only: nothing is persisted, everything is held in memory. Each partition\n"
            "keeps at most --partition-mb MiB and --partition-max-batches record batches; beyond\n"
            "either its oldest records are deleted, as a real broker's retention would (the\n"
            "low watermark moves up and consumers never see them).\n\n");
    int port, partitions;
    long log_mb, log_batches;
    cli_list_t topics = {NULL, 0, 0};
    const cli_opt_t opts[] = DEV_BROKER_OPTS(&port, &partitions, &topics, &log_mb, &log_batches);
    worker_cli_print_opts(f, opts);
}

common_status_t worker_cmd_dev_broker(int argc, char **argv) {
    int port, partitions;
    long log_mb, log_batches;
    const char *topics[DEV_BROKER_MAX_TOPICS];
    cli_list_t topic_list = {topics, 0, DEV_BROKER_MAX_TOPICS};
    const cli_opt_t opts[] =
        DEV_BROKER_OPTS(&port, &partitions, &topic_list, &log_mb, &log_batches);
    int rc = worker_cli_parse("dev-broker", argc, argv, opts, usage, NULL);
    if (rc != COMMON_OK) return rc;
    int n_topics = topic_list.n;
    /* a bound other than the wrapper's needs the patched mock cluster */
    if ((log_mb != CONSUMERS_MOCK_LOG_MB || log_batches != CONSUMERS_MOCK_LOG_BATCHES) &&
        !consumers_mock_log_limits_settable()) {
        common_logf(stderr,
                    "--partition-mb and --partition-max-batches need the vendored "
                    "librdkafka (this build uses the system one, whose mock cluster keeps a fixed "
                    "5 MiB / 100000 batches per partition); rebuild without "
                    "-DRECLASS_SYSTEM_RDKAFKA=ON\n");
        return COMMON_USAGE;
    }
    if ((rc = worker_cli_require_kafka())) return rc;
    long log_bytes = log_mb << 20;

    /* Block the signals first so no thread the mock starts can take them. */
    sigset_t set, old;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &set, &old);

    consumers_mock_t *mock;
    const char *bootstrap;
    common_err_t e;
    if ((rc = consumers_mock_start(partitions, port, &mock, &bootstrap, &e))) {
        common_err_print(stderr, &e);
        return rc;
    }
    if (consumers_mock_log_limits_settable())
        rc = consumers_mock_set_log_limits(mock, log_bytes, log_batches, &e);
    for (int i = 0; !rc && i < n_topics; i++)
        rc = consumers_mock_topic_create(mock, topics[i], partitions, &e);
    if (rc) {
        common_err_print(stderr, &e);
        consumers_mock_stop(mock);
        return rc;
    }
    printf("%s\n", bootstrap);
    fflush(stdout);
    if (consumers_mock_log_limits_settable())
        common_logf(stderr,
                    "each partition keeps %ld MiB / %ld batches; older records "
                    "are deleted\n",
                    log_bytes >> 20, log_batches);
    else
        common_logf(stderr, "each partition keeps 5 MiB / 100000 batches (system "
                            "librdkafka); older records are deleted\n");
    common_logf(stderr,
                "listening on %s (%d topic(s) pre-created); stop with "
                "Ctrl-C or SIGTERM\n",
                bootstrap, n_topics);

    struct sigaction sa = {.sa_handler = on_signal};
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigset_t wait_mask = old; /* still blocked here: no signal is lost before sigsuspend */
    sigdelset(&wait_mask, SIGINT);
    sigdelset(&wait_mask, SIGTERM);
    while (!dev_broker_stop)
        sigsuspend(&wait_mask);
    pthread_sigmask(SIG_SETMASK, &old, NULL);

    consumers_mock_stop(mock);
    common_logf(stderr, "stopped\n");
    return 0;
}
