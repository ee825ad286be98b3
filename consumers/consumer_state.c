/* What the consumer can say without changing anything: its topics and lanes, how a record maps
 * to a track, and how far it has read. */
#include <limits.h>
#include <stdint.h>
#include <string.h>

#include <librdkafka/rdkafka.h>

#include "common/clock.h"
#include "consumers/consumer_int.h"

int consumers_consumer_n_topics(const consumers_consumer_t *c) {
    return c->n_topics;
}

int consumers_consumer_n_lanes(const consumers_consumer_t *c) {
    return c->n_lanes;
}

int consumers_consumer_topic_lane(const consumers_consumer_t *c, int topic_index) {
    return c->lane[topic_index];
}

int consumers_consumer_lane_priority(const consumers_consumer_t *c, int lane) {
    for (int t = 0; t < c->n_topics; t++)
        if (c->lane[t] == lane) return c->prio[t];
    return INT_MAX;
}

int consumers_consumer_track_topic(const consumers_consumer_t *c, int32_t track) {
    return track < 0 ? -1 : track % c->n_topics;
}

int consumers_consumer_topic_priority(const consumers_consumer_t *c, int topic_index) {
    return c->prio[topic_index];
}

const char *consumers_consumer_topic_name(const consumers_consumer_t *c, int topic_index) {
    return c->topics[topic_index];
}

long consumers_consumer_rebalances(const consumers_consumer_t *c) {
    return c->rebalances;
}

const char *consumers_consumer_topic(const consumers_consumer_t *c) {
    return c->topic;
}

long consumers_consumer_lag(consumers_consumer_t *c) {
    rd_kafka_topic_partition_list_t *a = NULL;
    if (rd_kafka_assignment(c->rk, &a)) return -1;
    long lag = 0;
    if (a->cnt > 0 && rd_kafka_position(c->rk, a) == RD_KAFKA_RESP_ERR_NO_ERROR) {
        for (int i = 0; i < a->cnt; i++) {
            int64_t lo = 0, hi = 0;
            /* cached from fetch responses: no broker round trip on the poll thread */
            if (rd_kafka_get_watermark_offsets(c->rk, a->elems[i].topic, a->elems[i].partition, &lo,
                                               &hi) ||
                hi < 0)
                continue;
            int64_t pos = a->elems[i].offset >= 0 ? a->elems[i].offset : lo;
            if (hi > pos) lag += (long)(hi - pos);
        }
    }
    rd_kafka_topic_partition_list_destroy(a);
    return lag;
}

/* Where a partition this member has read nothing from in this assignment starts: librdkafka
 * resets its position on assignment and moves it only as records reach the application. */
static int64_t start_of(consumers_consumer_t *c, const rd_kafka_topic_partition_list_t *committed,
                        const char *topic, int32_t partition, int64_t lo, int64_t hi) {
    rd_kafka_topic_partition_t *p = rd_kafka_topic_partition_list_find(committed, topic, partition);
    if (p && p->offset >= 0) return p->offset;
    char reset[32];
    size_t n = sizeof(reset);
    if (rd_kafka_conf_get(rd_kafka_conf(c->rk), "auto.offset.reset", reset, &n) != RD_KAFKA_CONF_OK)
        return lo;
    return !strcmp(reset, "latest") || !strcmp(reset, "largest") || !strcmp(reset, "end") ? hi : lo;
}

int consumers_consumer_caught_up(consumers_consumer_t *c, int timeout_ms) {
    rd_kafka_topic_partition_list_t *a = NULL;
    if (rd_kafka_assignment(c->rk, &a)) return -1;
    int rc = a->cnt > 0 && rd_kafka_position(c->rk, a) ? -1 : 1;
    rd_kafka_topic_partition_list_t *unread = rd_kafka_topic_partition_list_new(a->cnt + 1);
    for (int i = 0; i < a->cnt; i++)
        if (a->elems[i].offset < 0)
            rd_kafka_topic_partition_list_add(unread, a->elems[i].topic, a->elems[i].partition);
    const int64_t deadline = common_now_ms() + timeout_ms;
    if (rc == 1 && unread->cnt > 0 && rd_kafka_committed(c->rk, unread, timeout_ms)) rc = -1;
    for (int i = 0; rc == 1 && i < a->cnt; i++) {
        int64_t lo = 0, hi = 0, left = deadline - common_now_ms();
        const rd_kafka_topic_partition_t *p = &a->elems[i];
        if (left <= 0 ||
            rd_kafka_query_watermark_offsets(c->rk, p->topic, p->partition, &lo, &hi, (int)left)) {
            rc = -1;
            break;
        }
        int64_t pos =
            p->offset >= 0 ? p->offset : start_of(c, unread, p->topic, p->partition, lo, hi);
        if (pos < hi) rc = 0;
    }
    rd_kafka_topic_partition_list_destroy(unread);
    rd_kafka_topic_partition_list_destroy(a);
    return rc;
}
