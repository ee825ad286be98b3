/* The consumer's lanes against librdkafka's mock cluster: two topics with priorities, tracks
 * that name topic and partition, a hold on the bulk lane that stops its records and a release
 * after which every bulk record arrives exactly once (offsets untouched by the hold), the
 * urgent lane read first once both have records waiting, and offsets stored by track landing
 * on the right topic. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>
#include <librdkafka/rdkafka.h>

#include "consumers/consumer.h"
#include "consumers/mock_broker.h"

#define N_BULK   400
#define N_URGENT 50

static consumers_mock_t *mock;

/* A record's value as a NUL-terminated string (the test's values are short). */
static const char *value_of(const consumers_record_t *m) {
    static char buf[64];
    size_t n;
    const void *v = consumers_record_value(m, &n);
    if (n >= sizeof(buf)) n = sizeof(buf) - 1;
    memcpy(buf, v, n);
    buf[n] = 0;
    return buf;
}
static const char *bootstrap;

static void produce(const char *topic, int n, int partitions) {
    char e[512];
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    assert_int_equal(rd_kafka_conf_set(conf, "bootstrap.servers", bootstrap, e, sizeof(e)), 0);
    rd_kafka_t *p = rd_kafka_new(RD_KAFKA_PRODUCER, conf, e, sizeof(e));
    assert_non_null(p);
    for (int i = 0; i < n; i++) {
        char v[32];
        snprintf(v, sizeof(v), "%s-%d", topic, i);
        assert_int_equal(
            rd_kafka_producev(p, RD_KAFKA_V_TOPIC(topic), RD_KAFKA_V_PARTITION(i % partitions),
                              RD_KAFKA_V_VALUE(v, strlen(v)),
                              RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY), RD_KAFKA_V_END),
            0);
    }
    assert_int_equal(rd_kafka_flush(p, 10000), 0);
    rd_kafka_destroy(p);
}

static int setup(void **state) {
    (void)state;
    common_err_t e;
    if (consumers_mock_start(2, 0, &mock, &bootstrap, &e)) return -1;
    if (consumers_mock_topic_create(mock, "lane.urgent", 2, &e) ||
        consumers_mock_topic_create(mock, "lane.bulk", 2, &e))
        return -1;
    return 0;
}

static int teardown(void **state) {
    (void)state;
    consumers_mock_stop(mock);
    return 0;
}

static int assigned;
static void on_assign(void *ctx, const int32_t *parts, int n) {
    (void)ctx;
    (void)parts;
    assigned += n;
}
static void on_revoke(void *ctx, const int32_t *parts, int n, int lost) {
    (void)ctx;
    (void)parts;
    (void)lost;
    assigned -= n;
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void test_hold_release_exactly_once(void **state) {
    (void)state;
    const char *topics[] = {"lane.bulk", "lane.urgent"}; /* order does not set the lanes */
    const int prio[] = {1, 0};
    static const char *props[] = {"session.timeout.ms=6000", "heartbeat.interval.ms=500", NULL};
    consumers_consumer_cfg_t cfg = {.brokers = bootstrap,
                                    .group = "lanes",
                                    .topics = topics,
                                    .priorities = prio,
                                    .n_topics = 2,
                                    .extra = props};
    consumers_rebalance_t rb = {on_assign, on_revoke, NULL};
    consumers_consumer_t *c;
    common_err_t e;
    assert_int_equal(consumers_consumer_init(&cfg, &rb, &c, &e), COMMON_OK);
    assert_int_equal(consumers_consumer_n_lanes(c), 2);
    assert_int_equal(consumers_consumer_topic_lane(c, 0), 1);
    assert_int_equal(consumers_consumer_topic_lane(c, 1), 0);
    assert_int_equal(consumers_consumer_lane_priority(c, 1), 1);
    /* the bulk lane held from the start: nothing of it may arrive */
    assert_int_equal(consumers_consumer_hold_above(c, 0), 1);
    assert_int_equal(consumers_consumer_hold_above(c, 0), 0); /* no change */
    produce("lane.bulk", N_BULK, 2);
    produce("lane.urgent", N_URGENT, 2);
    static int seen_bulk[N_BULK], seen_urgent[N_URGENT];
    int n_bulk = 0, n_urgent = 0;
    double until = now_s() + 30;
    while (n_urgent < N_URGENT && now_s() < until) {
        consumers_record_t *m = consumers_consumer_poll(c, 100);
        if (!m) continue;
        int32_t tr = consumers_consumer_track(c, m);
        int t = consumers_consumer_track_topic(c, tr);
        assert_int_equal(
            tr / 2, consumers_record_partition(m)); /* two topics: track = partition * 2 + topic */
        assert_string_equal(consumers_consumer_topic_name(c, t), consumers_record_topic(m));
        assert_int_equal(t, 1); /* held: no bulk record */
        int i = atoi(value_of(m) + strlen("lane.urgent-"));
        assert_int_equal(seen_urgent[i]++, 0);
        n_urgent++;
        assert_int_equal(consumers_consumer_store(c, tr, consumers_record_offset(m) + 1), 0);
        consumers_record_free(m);
    }
    assert_int_equal(n_urgent, N_URGENT);
    assert_int_equal(assigned, 2 * 2); /* tracks of both topics */
    /* a while longer: still nothing of the held lane */
    until = now_s() + 1.0;
    while (now_s() < until) {
        consumers_record_t *m = consumers_consumer_poll(c, 50);
        if (m) fail_msg("a record of a held lane arrived");
    }
    /* released: every bulk record once, from offset 0 of each partition */
    assert_int_equal(consumers_consumer_hold_above(c, 1 << 30), 1);
    int64_t next[2] = {0, 0};
    until = now_s() + 30;
    while (n_bulk < N_BULK && now_s() < until) {
        consumers_record_t *m = consumers_consumer_poll(c, 100);
        if (!m) continue;
        assert_string_equal(consumers_record_topic(m), "lane.bulk");
        assert_int_equal(consumers_record_offset(m), next[consumers_record_partition(m)]++);
        int i = atoi(value_of(m) + strlen("lane.bulk-"));
        assert_int_equal(seen_bulk[i]++, 0);
        n_bulk++;
        consumers_record_free(m);
    }
    assert_int_equal(n_bulk, N_BULK);
    /* offsets stored by track went to lane.urgent, none to lane.bulk */
    assert_int_equal(consumers_consumer_commit(c, &e), 0);
    consumers_consumer_close(c);
    consumers_consumer_free(c);

    char why[512];
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    assert_int_equal(rd_kafka_conf_set(conf, "bootstrap.servers", bootstrap, why, sizeof(why)), 0);
    assert_int_equal(rd_kafka_conf_set(conf, "group.id", "lanes", why, sizeof(why)), 0);
    rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_CONSUMER, conf, why, sizeof(why));
    assert_non_null(rk);
    rd_kafka_topic_partition_list_t *l = rd_kafka_topic_partition_list_new(4);
    for (int p = 0; p < 2; p++) {
        rd_kafka_topic_partition_list_add(l, "lane.urgent", p);
        rd_kafka_topic_partition_list_add(l, "lane.bulk", p);
    }
    assert_int_equal(rd_kafka_committed(rk, l, 10000), 0);
    long urgent_committed = 0;
    for (int i = 0; i < l->cnt; i++) {
        if (!strcmp(l->elems[i].topic, "lane.bulk"))
            assert_true(l->elems[i].offset < 0); /* nothing stored */
        else
            urgent_committed += l->elems[i].offset;
    }
    assert_int_equal(urgent_committed, N_URGENT);
    rd_kafka_topic_partition_list_destroy(l);
    rd_kafka_destroy(rk);
}

/* Both lanes' records fetched and waiting: every urgent one comes before any bulk one. */
static void test_urgent_first(void **state) {
    (void)state;
    const char *topics[] = {"lane.urgent", "lane.bulk"};
    const int prio[] = {0, 1};
    static const char *props[] = {"session.timeout.ms=6000", "heartbeat.interval.ms=500", NULL};
    consumers_consumer_cfg_t cfg = {.brokers = bootstrap,
                                    .group = "lanes-order",
                                    .topics = topics,
                                    .priorities = prio,
                                    .n_topics = 2,
                                    .extra = props};
    consumers_rebalance_t rb = {on_assign, on_revoke, NULL};
    consumers_consumer_t *c;
    common_err_t e;
    assigned = 0;
    assert_int_equal(consumers_consumer_init(&cfg, &rb, &c, &e), COMMON_OK);
    assert_int_equal(consumers_consumer_hold_above(c, -1), 2); /* both held while joining */
    double until = now_s() + 30;
    while (assigned < 4 && now_s() < until)
        assert_null(consumers_consumer_poll(c, 100));
    assert_int_equal(assigned, 4);
    assert_int_equal(consumers_consumer_hold_above(c, 1 << 30), 2);
    struct timespec ts = {1, 500000000L}; /* the fetcher fills both lane queues meanwhile */
    nanosleep(&ts, NULL);
    int n = 0, urgent_before_bulk = 0, bulk_seen = 0;
    until = now_s() + 30;
    while (n < N_URGENT + N_BULK && now_s() < until) {
        consumers_record_t *m = consumers_consumer_poll(c, 100);
        if (!m) continue;
        int urgent = !strcmp(consumers_record_topic(m), "lane.urgent");
        if (urgent && !bulk_seen) urgent_before_bulk++;
        if (!urgent) bulk_seen = 1;
        n++;
        consumers_record_free(m);
    }
    assert_int_equal(n, N_URGENT + N_BULK);
    assert_int_equal(urgent_before_bulk, N_URGENT);
    consumers_consumer_free(c);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_hold_release_exactly_once),
        cmocka_unit_test(test_urgent_first),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
