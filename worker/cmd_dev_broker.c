/* reclass dev-broker: an in-memory Kafka on loopback (librdkafka's mock cluster) for
 * development, demos and tests. Prints its bootstrap address as the first stdout line and
 * runs until SIGINT/SIGTERM. */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "consumers/kafka_version.h"
#include "consumers/mock_broker.h"
#include "worker/cli.h"

#define DEV_BROKER_MAX_TOPICS 64

static volatile sig_atomic_t dev_broker_stop;
static void on_signal(int sig) {
    (void)sig;
    dev_broker_stop = 1;
}

static void usage(FILE *f) {
    fprintf(f, "usage: reclass dev-broker [--port P] [--partitions N] [--topic T]...\n\n"
               "Runs an in-memory Kafka broker on 127.0.0.1 (librdkafka's mock cluster) until\n"
               "SIGINT/SIGTERM, and prints its bootstrap address on stdout. For development and\n"
               "tests only: nothing is persisted and each partition keeps about 5 MiB.\n\n"
               "  --port P        bootstrap port (default 0 = any free port)\n"
               "  --partitions N  partitions of the --topic topics (default 4; topics that\n"
               "                  clients create on first use get 4)\n"
               "  --topic T       create topic T at start (repeatable)\n");
}

int worker_cmd_dev_broker(int argc, char **argv) {
    int port = 0, partitions = 4;
    const char *topics[DEV_BROKER_MAX_TOPICS];
    cli_list_t topic_list = {topics, 0, DEV_BROKER_MAX_TOPICS};
    const cli_opt_t opts[] = {{"port", CLI_INT, &port, 0, 65535},
                              {"partitions", CLI_INT, &partitions, 1, 10000},
                              {"topic", CLI_LIST, &topic_list, 0, 0},
                              {NULL, CLI_FLAG, NULL, 0, 0}};
    int rc = worker_cli_parse("dev-broker", argc, argv, opts, usage, NULL);
    if (rc >= 0) return rc;
    if ((rc = consumers_kafka_require_version("dev-broker"))) return rc;
    int n_topics = topic_list.n;

    /* Block the signals first so no thread the mock starts can take them. */
    sigset_t set, old;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &set, &old);

    consumers_mock_t *mock;
    const char *bootstrap;
    char err[256];
    if (consumers_mock_start(partitions, port, &mock, &bootstrap, err, sizeof(err))) {
        fprintf(stderr, "reclass dev-broker: %s\n", err);
        return 1;
    }
    for (int i = 0; i < n_topics; i++)
        if (consumers_mock_topic_create(mock, topics[i], partitions, err, sizeof(err))) {
            fprintf(stderr, "reclass dev-broker: %s\n", err);
            consumers_mock_stop(mock);
            return 1;
        }
    printf("%s\n", bootstrap);
    fflush(stdout);
    fprintf(stderr,
            "reclass dev-broker: listening on %s (%d topic(s) pre-created); stop with "
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
    fprintf(stderr, "reclass dev-broker: stopped\n");
    return 0;
}
