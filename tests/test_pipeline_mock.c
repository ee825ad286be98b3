/* The pipeline in-process against the embedded Kafka (consumers/mock_broker.h) and a
 * throwaway PostgreSQL (tests/lib/pg_tmp.sh): every ticket becomes exactly one row, the job
 * completes, and the group's committed offsets reach the end of every partition; also with
 * two workers of one group, the second joining mid-job (cooperative rebalance: partitions are
 * revoked from the first while it has work in flight); and with decode on several pool threads,
 * poison records between good ones dead-lettered in each partition's order. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <jansson.h>
#include <libpq-fe.h>
#include <librdkafka/rdkafka.h>
#include <pthread.h>

#include "consumers/avro_codec.h"
#include "consumers/mock_broker.h"
#include "worker/cli/config.h"
#include "worker/pipeline/pipeline.h"
#include "sink/migrate.h"
#include "sink/sink.h"

#define PARTS 4

static char pg_dir[256];
static char db_url[256];
static consumers_mock_t *mock;
static const char *bootstrap;
static char **texts;
static int n_texts;

static int load_texts(void) {
    FILE *f = fopen(RECLASS_FIXTURES "/golden_clinc150_test.jsonl", "r");
    if (!f) return -1;
    char *line = NULL;
    size_t cap = 0;
    int cap_t = 6000;
    texts = calloc((size_t)cap_t, sizeof(*texts));
    while (getline(&line, &cap, f) > 0 && n_texts < cap_t) {
        json_t *j = json_loads(line, 0, NULL);
        if (!j) continue;
        texts[n_texts++] = strdup(json_string_value(json_object_get(j, "text")));
        json_decref(j);
    }
    free(line);
    fclose(f);
    return n_texts > 0 ? 0 : -1;
}

static int setup(void **state) {
    if (load_texts()) return -1;
    char err[512];
    if (consumers_mock_start(PARTS, 0, &mock, &bootstrap, err, sizeof(err))) {
        fprintf(stderr, "mock: %s\n", err);
        return -1;
    }
    snprintf(pg_dir, sizeof(pg_dir), "/tmp/reclass-pipe-test-XXXXXX");
    if (!mkdtemp(pg_dir)) return -1;
    char cmd[512];
    snprintf(cmd, sizeof(cmd), "bash %s/tests/lib/pg_tmp.sh start %s/pg", RECLASS_SOURCE_DIR,
             pg_dir);
    FILE *p = popen(cmd, "r");
    if (!p || !fgets(db_url, sizeof(db_url), p)) return -1;
    if (pclose(p)) return -1;
    db_url[strcspn(db_url, "\n")] = 0;
    int applied = 0;
    if (sink_migrate_ex(db_url, RECLASS_SOURCE_DIR "/migrations", NULL, &applied, err,
                        sizeof(err))) {
        fprintf(stderr, "migrate: %s\n", err);
        return -1;
    }
    return 0;
}

static int teardown(void **state) {
    char cmd[600];
    snprintf(cmd, sizeof(cmd), "bash %s/tests/lib/pg_tmp.sh stop %s/pg; rm -rf %s",
             RECLASS_SOURCE_DIR, pg_dir, pg_dir);
    if (system(cmd)) fprintf(stderr, "cleanup failed\n");
    consumers_mock_stop(mock);
    for (int i = 0; i < n_texts; i++)
        free(texts[i]);
    free(texts);
    return 0;
}

/* Produces tickets [from, to) of an n-ticket job_id to topic (created with PARTS partitions
 * when from is 0). */
static void produce_range(const char *topic, const char *job_id, int from, int to, int n) {
    char err[512];
    if (from == 0)
        assert_int_equal(consumers_mock_topic_create(mock, topic, PARTS, err, sizeof(err)), 0);
    consumers_codec_t *codec;
    assert_int_equal(
        consumers_codec_init(RECLASS_SOURCE_DIR "/consumers/schemas", &codec, err, sizeof(err)), 0);
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    assert_int_equal(rd_kafka_conf_set(conf, "bootstrap.servers", bootstrap, err, sizeof(err)),
                     RD_KAFKA_CONF_OK);
    rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, err, sizeof(err));
    assert_non_null(rk);
    for (int i = from; i < to; i++) {
        char tid[32];
        snprintf(tid, sizeof(tid), "t%06d", i);
        consumers_ticket_t t = {.job_id = (char *)job_id,
                                .tenant = "acme",
                                .ticket_id = tid,
                                .text = texts[i % n_texts],
                                .text_len = strlen(texts[i % n_texts]),
                                .job_total = n,
                                .enqueued_at_ms = 1700000000000LL + i,
                                .partition = -1};
        void *buf;
        size_t len;
        assert_int_equal(consumers_codec_encode(codec, &t, 1, &buf, &len, err, sizeof(err)), 0);
        rd_kafka_resp_err_t re;
        while ((re = rd_kafka_producev(rk, RD_KAFKA_V_TOPIC(topic),
                                       RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_FREE),
                                       RD_KAFKA_V_KEY(tid, strlen(tid)), RD_KAFKA_V_VALUE(buf, len),
                                       RD_KAFKA_V_END)) == RD_KAFKA_RESP_ERR__QUEUE_FULL)
            rd_kafka_poll(rk, 50);
        assert_int_equal(re, 0);
        rd_kafka_poll(rk, 0);
    }
    assert_int_equal(rd_kafka_flush(rk, 30000), 0);
    rd_kafka_destroy(rk);
    consumers_codec_free(codec);
}

/* Produces n tickets of job_id to topic (created with PARTS partitions). */
static void produce_job(const char *topic, const char *job_id, int n) {
    produce_range(topic, job_id, 0, n, n);
}

static long db_long(const char *sql, const char *param) {
    PGconn *c = PQconnectdb(db_url);
    assert_int_equal(PQstatus(c), CONNECTION_OK);
    const char *params[1] = {param};
    PGresult *r = PQexecParams(c, sql, param ? 1 : 0, NULL, params, NULL, NULL, 0);
    assert_int_equal(PQresultStatus(r), PGRES_TUPLES_OK);
    long v = PQgetisnull(r, 0, 0) ? -1 : atol(PQgetvalue(r, 0, 0));
    PQclear(r);
    PQfinish(c);
    return v;
}

/* Sum over partitions of (high watermark - committed offset of group): 0 when all stored. */
static long group_lag(const char *topic, const char *group) {
    char err[512];
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    rd_kafka_conf_set(conf, "bootstrap.servers", bootstrap, err, sizeof(err));
    rd_kafka_conf_set(conf, "group.id", group, err, sizeof(err));
    rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_CONSUMER, conf, err, sizeof(err));
    assert_non_null(rk);
    rd_kafka_topic_partition_list_t *l = rd_kafka_topic_partition_list_new(PARTS);
    for (int p = 0; p < PARTS; p++)
        rd_kafka_topic_partition_list_add(l, topic, p);
    assert_int_equal(rd_kafka_committed(rk, l, 10000), 0);
    long lag = 0;
    for (int p = 0; p < PARTS; p++) {
        int64_t lo, hi;
        assert_int_equal(rd_kafka_query_watermark_offsets(rk, topic, p, &lo, &hi, 10000), 0);
        int64_t c = l->elems[p].offset < 0 ? 0 : l->elems[p].offset;
        assert_true(c <= hi);
        lag += (long)(hi - c);
    }
    rd_kafka_topic_partition_list_destroy(l);
    rd_kafka_destroy(rk);
    return lag;
}

static void cfg_for(worker_run_cfg_t *cfg, const char *topic, const char *group, int idle) {
    char err[256];
    char *argv[] = {"run",
                    "--db",
                    db_url,
                    "--model",
                    RECLASS_DEMO_MODEL,
                    "--schemas",
                    RECLASS_SOURCE_DIR "/consumers/schemas",
                    NULL};
    assert_int_equal(worker_run_cfg_parse(cfg, 7, argv, err, sizeof(err)), 0);
    cfg->brokers = bootstrap;
    cfg->topic = topic;
    cfg->n_topics = 0; /* the one topic above, not the parsed list */
    cfg->group = group;
    snprintf(cfg->dlq_buf, sizeof(cfg->dlq_buf), "%s.dlq", topic);
    cfg->dlq_topic = cfg->dlq_buf;
    cfg->idle_exit_s = idle;
    cfg->cls.token_budget = 2048;
    cfg->cls.max_wait_ms = 50;
    cfg->log_every = 20;
    /* the mock broker delays a rebalance by the session timeout: keep it short */
    static const char *props[] = {"session.timeout.ms=3000", "heartbeat.interval.ms=300", NULL};
    cfg->kafka_props[0] = props[0];
    cfg->kafka_props[1] = props[1];
    cfg->kafka_props[2] = NULL;
}

static void test_one_worker_exactly_n(void **state) {
    const int n = 1500;
    produce_job("t1", "job-one", n);
    worker_run_cfg_t cfg;
    cfg_for(&cfg, "t1", "g1", 4);
    assert_int_equal(worker_pipeline_run(&cfg), 0);
    assert_int_equal(db_long("SELECT count(*) FROM ticket_results WHERE job_id=$1", "job-one"), n);
    assert_int_equal(db_long("SELECT done FROM jobs WHERE job_id=$1", "job-one"), n);
    assert_int_equal(db_long("SELECT total FROM jobs WHERE job_id=$1", "job-one"), n);
    assert_int_equal(
        db_long("SELECT count(*) FROM jobs WHERE job_id=$1 AND completed_at IS NOT NULL",
                "job-one"),
        1);
    assert_int_equal(group_lag("t1", "g1"), 0);
    /* a second run of the same group finds nothing left and writes nothing */
    assert_int_equal(worker_pipeline_run(&cfg), 0);
    assert_int_equal(db_long("SELECT count(*) FROM ticket_results WHERE job_id=$1", "job-one"), n);
}

typedef struct {
    worker_run_cfg_t cfg;
    worker_pipeline_stats_t st;
    int rc;
} worker_t;

static void *run_thread(void *arg) {
    worker_t *w = arg;
    w->rc = worker_pipeline_run_ex(&w->cfg, &w->st);
    return NULL;
}

static void test_two_workers_rebalance(void **state) {
    /* The job arrives over about 8 s, slower than one worker classifies it, so the job is still
     * running when the rebalance (within about 3 s of the second worker joining) lands,
     * however fast the machine: the second worker always gets records. */
    const int n = 6000, first = 1200, chunk = 300;
    produce_range("t2", "job-two", 0, first, n);
    static worker_t a, b;
    cfg_for(&a.cfg, "t2", "g2", 8);
    cfg_for(&b.cfg, "t2", "g2", 15);
    a.cfg.cls.threads = b.cfg.cls.threads = 1;
    pthread_t ta, tb;
    assert_int_equal(pthread_create(&ta, NULL, run_thread, &a), 0);
    /* let the first worker own every partition and get going, then join a second one */
    for (int i = 0; i < 100; i++) {
        if (db_long("SELECT count(*) FROM ticket_results WHERE job_id=$1", "job-two") > 100) break;
        usleep(100000);
    }
    assert_int_equal(pthread_create(&tb, NULL, run_thread, &b), 0);
    for (int from = first; from < n; from += chunk) {
        usleep(500000);
        produce_range("t2", "job-two", from, from + chunk < n ? from + chunk : n, n);
    }
    pthread_join(ta, NULL);
    pthread_join(tb, NULL);
    assert_int_equal(a.rc, 0);
    assert_int_equal(b.rc, 0);
    fprintf(stderr,
            "worker a: %ld tickets, %ld partitions revoked, %ld in flight dropped; "
            "worker b: %ld tickets\n",
            a.st.tickets, a.st.revoked_partitions, a.st.dropped_in_flight, b.st.tickets);
    /* the group really was shared: the first lost partitions mid-job to the second */
    assert_true(b.st.tickets > 0);
    assert_true(a.st.revoked_partitions >= 4); /* 2 moved to b mid-job, 2 more at close */
    assert_true(a.st.tickets + b.st.tickets >= n);
    assert_int_equal(db_long("SELECT count(*) FROM ticket_results WHERE job_id=$1", "job-two"), n);
    assert_int_equal(db_long("SELECT done FROM jobs WHERE job_id=$1", "job-two"), n);
    assert_int_equal(
        db_long("SELECT count(*) FROM jobs WHERE job_id=$1 AND completed_at IS NOT NULL",
                "job-two"),
        1);
    assert_int_equal(group_lag("t2", "g2"), 0);
}

/* Every partition holds good tickets with a poison record every 7th offset; decoded on four
 * pool threads, the dead letters still leave in each partition's order (the dead-letter topic
 * has one partition, so its order is the order they were sent in), every good ticket is one
 * row and every offset is stored. */
static void test_decode_order_per_partition(void **state) {
    const int per_part = 700, every = 7;
    const int n_good = PARTS * (per_part - per_part / every);
    char err[512];
    assert_int_equal(consumers_mock_topic_create(mock, "t3", PARTS, err, sizeof(err)), 0);
    assert_int_equal(consumers_mock_topic_create(mock, "t3.dlq", 1, err, sizeof(err)), 0);
    consumers_codec_t *codec;
    assert_int_equal(
        consumers_codec_init(RECLASS_SOURCE_DIR "/consumers/schemas", &codec, err, sizeof(err)), 0);
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    assert_int_equal(rd_kafka_conf_set(conf, "bootstrap.servers", bootstrap, err, sizeof(err)),
                     RD_KAFKA_CONF_OK);
    rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, err, sizeof(err));
    assert_non_null(rk);
    int good = 0;
    for (int p = 0; p < PARTS; p++)
        for (int o = 0; o < per_part; o++) {
            char key[32];
            void *buf;
            size_t len;
            if (o % every == every - 1) { /* framed with a schema id no one knows */
                snprintf(key, sizeof(key), "poison-%d-%d", p, o);
                static const char bad[] = "\x00\x00\x00\x00\x63 not a ticket";
                len = sizeof(bad) - 1;
                buf = malloc(len);
                memcpy(buf, bad, len);
            } else {
                snprintf(key, sizeof(key), "o%06d", good);
                const char *text = texts[good % n_texts];
                consumers_ticket_t t = {.job_id = "job-order",
                                        .tenant = "acme",
                                        .ticket_id = key,
                                        .text = (char *)text,
                                        .text_len = strlen(text),
                                        .job_total = n_good,
                                        .enqueued_at_ms = 1700000000000LL + good,
                                        .partition = -1};
                assert_int_equal(consumers_codec_encode(codec, &t, 1, &buf, &len, err, sizeof(err)),
                                 0);
                good++;
            }
            rd_kafka_resp_err_t re;
            while ((re = rd_kafka_producev(rk, RD_KAFKA_V_TOPIC("t3"), RD_KAFKA_V_PARTITION(p),
                                           RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_FREE),
                                           RD_KAFKA_V_KEY(key, strlen(key)),
                                           RD_KAFKA_V_VALUE(buf, len), RD_KAFKA_V_END)) ==
                   RD_KAFKA_RESP_ERR__QUEUE_FULL)
                rd_kafka_poll(rk, 50);
            assert_int_equal(re, 0);
            rd_kafka_poll(rk, 0);
        }
    assert_int_equal(rd_kafka_flush(rk, 30000), 0);
    rd_kafka_destroy(rk);
    consumers_codec_free(codec);
    assert_int_equal(good, n_good);

    worker_run_cfg_t cfg;
    cfg_for(&cfg, "t3", "g3", 4);
    cfg.cls.threads = 4;
    worker_pipeline_stats_t st;
    assert_int_equal(worker_pipeline_run_ex(&cfg, &st), 0);
    assert_int_equal(st.dead_letters, PARTS * (per_part / every));
    assert_int_equal(db_long("SELECT count(*) FROM ticket_results WHERE job_id=$1", "job-order"),
                     n_good);
    assert_int_equal(db_long("SELECT done FROM jobs WHERE job_id=$1", "job-order"), n_good);
    assert_int_equal(group_lag("t3", "g3"), 0);

    /* the dead-letter topic, in order: each source partition's offsets rise */
    conf = rd_kafka_conf_new();
    rd_kafka_conf_set(conf, "bootstrap.servers", bootstrap, err, sizeof(err));
    rd_kafka_conf_set(conf, "group.id", "g3-reader", err, sizeof(err));
    rd_kafka_conf_set(conf, "auto.offset.reset", "earliest", err, sizeof(err));
    rk = rd_kafka_new(RD_KAFKA_CONSUMER, conf, err, sizeof(err));
    assert_non_null(rk);
    rd_kafka_topic_partition_list_t *l = rd_kafka_topic_partition_list_new(1);
    rd_kafka_topic_partition_list_add(l, "t3.dlq", 0)->offset = RD_KAFKA_OFFSET_BEGINNING;
    assert_int_equal(rd_kafka_assign(rk, l), 0);
    rd_kafka_topic_partition_list_destroy(l);
    int64_t last[PARTS];
    for (int p = 0; p < PARTS; p++)
        last[p] = -1;
    int seen = 0;
    for (int tries = 0; seen < PARTS * (per_part / every) && tries < 200;) {
        rd_kafka_message_t *m = rd_kafka_consumer_poll(rk, 100);
        if (!m) {
            tries++;
            continue;
        }
        assert_int_equal(m->err, 0);
        char key[32] = "";
        if (m->key && m->key_len < sizeof(key)) memcpy(key, m->key, m->key_len);
        int p = -1, o = -1;
        assert_int_equal(sscanf(key, "poison-%d-%d", &p, &o), 2);
        assert_true(p >= 0 && p < PARTS);
        assert_true(o > last[p]); /* in its partition's order */
        last[p] = o;
        seen++;
        rd_kafka_message_destroy(m);
    }
    rd_kafka_consumer_close(rk);
    rd_kafka_destroy(rk);
    assert_int_equal(seen, PARTS * (per_part / every));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_one_worker_exactly_n),
        cmocka_unit_test(test_two_workers_rebalance),
        cmocka_unit_test(test_decode_order_per_partition),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
