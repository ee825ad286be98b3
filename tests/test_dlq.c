/* The dead-letter producer against librdkafka's mock cluster, with the broker's answers
 * injected: a record larger than librdkafka's default message.max.bytes (1 MB) goes out whole;
 * refused deliveries are retried with a backoff and land whole; a letter refused for its size,
 * or past CONSUMERS_DLQ_FULL_ATTEMPTS, lands truncated with headers saying what was cut and
 * why; the source offset is reported done exactly once in every case. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <librdkafka/rdkafka.h>
#include <librdkafka/rdkafka_mock.h>

#include "consumers/dlq.h"

#define TOPIC       "t.dlq"
#define API_PRODUCE 0 /* Kafka protocol ApiKey of Produce */

static rd_kafka_t *mock_rk; /* owns the mock cluster */
static rd_kafka_mock_cluster_t *mc;
static const char *bootstrap;

typedef struct {
    int done;
    int64_t offset, tag;
} done_t;

static void on_done(void *ctx, int32_t partition, int64_t offset, int64_t tag) {
    done_t *d = ctx;
    d->done++;
    d->offset = offset;
    d->tag = tag;
}

static int setup(void **state) {
    char e[256];
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    if (rd_kafka_conf_set(conf, "test.mock.num.brokers", "1", e, sizeof(e))) return -1;
    mock_rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, e, sizeof(e));
    if (!mock_rk) return -1;
    mc = rd_kafka_handle_mock_cluster(mock_rk);
    bootstrap = rd_kafka_mock_cluster_bootstraps(mc);
    return rd_kafka_mock_topic_create(mc, TOPIC, 1, 1) ? -1 : 0;
}

static int teardown(void **state) {
    rd_kafka_destroy(mock_rk);
    return 0;
}

/* A consumed-looking record of len bytes (value byte i = i % 251) from tickets[3] @ offset
 * (consumer.c hands librdkafka's message out as the opaque consumers_record_t). */
static rd_kafka_message_t fake_record(size_t len, int64_t offset) {
    unsigned char *v = malloc(len);
    for (size_t i = 0; i < len; i++)
        v[i] = (unsigned char)(i % 251);
    return (rd_kafka_message_t){
        .partition = 3, .offset = offset, .payload = v, .len = len, .key = "k", .key_len = 1};
}

/* Sends one letter and waits until it is acknowledged; returns how many done calls came. */
static int send_and_wait(consumers_dlq_t *d, done_t *dn, size_t len, int64_t offset) {
    rd_kafka_message_t m = fake_record(len, offset);
    assert_int_equal(consumers_dlq_send(d, (const consumers_record_t *)&m, "bad record", 42), 0);
    free(m.payload); /* the producer keeps its own copy */
    assert_int_equal(consumers_dlq_flush(d, 20000), 0);
    assert_int_equal(consumers_dlq_outstanding(d), 0);
    assert_int_equal(dn->offset, offset);
    assert_int_equal(dn->tag, 42);
    return dn->done;
}

typedef struct {
    size_t len;
    char truncated[32], reason[160], error[64], offset[24];
} got_t;

static void header(const rd_kafka_message_t *m, const char *name, char *out, size_t cap) {
    rd_kafka_headers_t *h;
    const void *v;
    size_t n;
    out[0] = '\0';
    if (rd_kafka_message_headers(m, &h) || rd_kafka_header_get_last(h, name, &v, &n)) return;
    snprintf(out, cap, "%.*s", (int)n, (const char *)v);
}

/* Reads the dead-letter topic from the start; returns the letter of source offset src. */
static got_t read_letter(int64_t src) {
    char e[256], want[24];
    snprintf(want, sizeof(want), "%lld", (long long)src);
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    rd_kafka_conf_set(conf, "bootstrap.servers", bootstrap, e, sizeof(e));
    rd_kafka_conf_set(conf, "group.id", "test-reader", e, sizeof(e));
    rd_kafka_conf_set(conf, "enable.partition.eof", "true", e, sizeof(e));
    rd_kafka_t *c = rd_kafka_new(RD_KAFKA_CONSUMER, conf, e, sizeof(e));
    assert_non_null(c);
    rd_kafka_topic_partition_list_t *l = rd_kafka_topic_partition_list_new(1);
    rd_kafka_topic_partition_list_add(l, TOPIC, 0)->offset = RD_KAFKA_OFFSET_BEGINNING;
    rd_kafka_assign(c, l);
    rd_kafka_topic_partition_list_destroy(l);
    got_t g = {0};
    int eof = 0;
    for (int i = 0; i < 200 && !eof; i++) {
        rd_kafka_message_t *m = rd_kafka_consumer_poll(c, 100);
        if (!m) continue;
        eof = m->err == RD_KAFKA_RESP_ERR__PARTITION_EOF;
        char off[24];
        if (!m->err) header(m, "reclass.source.offset", off, sizeof(off));
        if (!m->err && !strcmp(off, want)) {
            g.len = m->len;
            const unsigned char *v = m->payload;
            for (size_t k = 0; k < m->len; k++)
                assert_int_equal(v[k], k % 251); /* the original's bytes, a prefix at most */
            header(m, "reclass.truncated", g.truncated, sizeof(g.truncated));
            header(m, "reclass.truncated.reason", g.reason, sizeof(g.reason));
            header(m, "reclass.error", g.error, sizeof(g.error));
            snprintf(g.offset, sizeof(g.offset), "%s", off);
        }
        rd_kafka_message_destroy(m);
    }
    rd_kafka_consumer_close(c);
    rd_kafka_destroy(c);
    assert_true(g.len > 0);
    return g;
}

static consumers_dlq_t *open_dlq(done_t *dn, const char *const *extra) {
    consumers_dlq_t *d;
    common_err_t e;
    assert_int_equal(consumers_dlq_init(bootstrap, TOPIC, extra, on_done, dn, stderr, &d, &e),
                     COMMON_OK);
    return d;
}

static void test_big_letter_whole(void **state) {
    done_t dn = {0};
    consumers_dlq_t *d = open_dlq(&dn, NULL);
    size_t big = 1200 * 1024; /* over librdkafka's default message.max.bytes */
    assert_int_equal(send_and_wait(d, &dn, big, 100), 1);
    got_t g = read_letter(100);
    assert_int_equal(g.len, big);
    assert_string_equal(g.truncated, "");
    assert_string_equal(g.error, "bad record");
    assert_string_equal(g.offset, "100");
    assert_int_equal(consumers_dlq_truncated(d), 0);
    consumers_dlq_free(d);
}

static void test_refused_then_whole(void **state) {
    done_t dn = {0};
    consumers_dlq_t *d = open_dlq(&dn, NULL);
    /* refusals librdkafka does not retry itself: the letter comes back to the dlq */
    rd_kafka_mock_push_request_errors(mc, API_PRODUCE, 2, RD_KAFKA_RESP_ERR_POLICY_VIOLATION,
                                      RD_KAFKA_RESP_ERR_POLICY_VIOLATION);
    assert_int_equal(send_and_wait(d, &dn, 5000, 101), 1);
    got_t g = read_letter(101);
    assert_int_equal(g.len, 5000);
    assert_string_equal(g.truncated, "");
    consumers_dlq_free(d);
}

static void test_size_refused_truncated(void **state) {
    done_t dn = {0};
    consumers_dlq_t *d = open_dlq(&dn, NULL);
    rd_kafka_mock_push_request_errors(mc, API_PRODUCE, 1, RD_KAFKA_RESP_ERR_MSG_SIZE_TOO_LARGE);
    assert_int_equal(send_and_wait(d, &dn, 200000, 102), 1);
    got_t g = read_letter(102);
    assert_int_equal(g.len, CONSUMERS_DLQ_TRUNCATED_BYTES);
    assert_string_equal(g.truncated, "200000");
    assert_non_null(strstr(g.reason, "too large"));
    assert_string_equal(g.error, "bad record");
    assert_int_equal(consumers_dlq_truncated(d), 1);
    consumers_dlq_free(d);
}

static void test_attempts_bound_truncated(void **state) {
    done_t dn = {0};
    consumers_dlq_t *d = open_dlq(&dn, NULL);
    rd_kafka_resp_err_t errs[CONSUMERS_DLQ_FULL_ATTEMPTS];
    for (int i = 0; i < CONSUMERS_DLQ_FULL_ATTEMPTS; i++)
        errs[i] = RD_KAFKA_RESP_ERR_POLICY_VIOLATION;
    rd_kafka_mock_push_request_errors_array(mc, API_PRODUCE, CONSUMERS_DLQ_FULL_ATTEMPTS, errs);
    assert_int_equal(send_and_wait(d, &dn, 70000, 103), 1);
    got_t g = read_letter(103);
    assert_int_equal(g.len, CONSUMERS_DLQ_TRUNCATED_BYTES);
    assert_string_equal(g.truncated, "70000");
    assert_non_null(strstr(g.reason, "olicy"));
    consumers_dlq_free(d);
}

/* A producer limit set lower by the user: refused locally, at once, and truncated. */
static void test_local_limit_truncated(void **state) {
    done_t dn = {0};
    const char *extra[] = {"message.max.bytes=100000", NULL};
    consumers_dlq_t *d = open_dlq(&dn, extra);
    assert_int_equal(send_and_wait(d, &dn, 300000, 104), 1);
    got_t g = read_letter(104);
    assert_int_equal(g.len, CONSUMERS_DLQ_TRUNCATED_BYTES);
    assert_string_equal(g.truncated, "300000");
    consumers_dlq_free(d);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_big_letter_whole),
        cmocka_unit_test(test_refused_then_whole),
        cmocka_unit_test(test_size_refused_truncated),
        cmocka_unit_test(test_attempts_bound_truncated),
        cmocka_unit_test(test_local_limit_truncated),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
