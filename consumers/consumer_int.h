/* The consumer's state, shared by consumer.c (the group: join, poll, pause, commit, close) and
 * consumer_state.c (what it can say of its topics, lanes and progress). Private to consumers/. */
#ifndef RECLASS_CONSUMERS_CONSUMER_INT_H
#define RECLASS_CONSUMERS_CONSUMER_INT_H

#include <stdio.h>
#include <time.h>

#include <librdkafka/rdkafka.h>

#include "consumers/consumer.h"

struct consumers_consumer {
    rd_kafka_t *rk;
    char *topic;                        /* the first topic (messages, the dead-letter default) */
    char *topics[CONSUMERS_MAX_TOPICS]; /* (n_topics) owned */
    int prio[CONSUMERS_MAX_TOPICS];     /* each topic's priority */
    int lane[CONSUMERS_MAX_TOPICS];     /* each topic's lane: rank of its priority, 0 = urgent */
    int held[CONSUMERS_MAX_TOPICS];     /* 1 while a priority hold stops the topic */
    int n_topics, n_lanes;
    FILE *log; /* cfg.log: NULL, quiet */
    /* (n_lanes) with several lanes: each lane's partitions are forwarded here, read most
     * urgent first; NULL with one lane (the consumer queue serves it) */
    rd_kafka_queue_t *lane_q[CONSUMERS_MAX_TOPICS];
    consumers_rebalance_t rb;
    int paused;
    int closed;
    long rebalances; /* assign + revoke callbacks so far */
    int ever_assigned;
    int fatal;
    char fatal_msg[512];
    rd_kafka_resp_err_t last_err; /* to log a repeating error once, not per poll */
    time_t last_err_at;
};
#endif
