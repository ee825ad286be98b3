/* The pipeline in-process against the embedded Kafka (consumers/mock_broker.h) and a
 * throwaway PostgreSQL (tests/lib/pg_tmp.sh): every ticket becomes exactly one row, the job
 * completes, and the group's committed offsets reach the end of every partition; also with
 * two workers of one group, the second joining mid-job (cooperative rebalance: partitions are
 * revoked from the first while it has work in flight); and with decode on several pool threads,
 * poison records between good ones dead-lettered in each partition's order; --idle-exit
 * under fetches slower than its bound; and a result writer that takes every batch waiting for
 * it into one transaction, stores no offset before it commits and still isolates a refused
 * row. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <librdkafka/rdkafka.h>
#include <librdkafka/rdkafka_mock.h>
#include <libpq-fe.h>
#include <pthread.h>

#include "consumers/avro_codec.h"
#include "tests/lib/pipe_mock.h"
#include "worker/observe/metrics.h"
#include "worker/pipeline/pipeline.h"

static void test_one_worker_exactly_n(void **state) {
    const int n = 1500;
    produce_job("t1", "job-one", n);
    worker_run_cfg_t cfg;
    common_err_t e;
    cfg_for(&cfg, "t1", "g1", 4);
    assert_int_equal(worker_pipeline_run(&cfg, &e), 0);
    assert_int_equal(db_long("SELECT count(*) FROM ticket_results WHERE job_id=$1", "job-one"), n);
    assert_int_equal(db_long("SELECT done FROM jobs WHERE job_id=$1", "job-one"), n);
    assert_int_equal(db_long("SELECT total FROM jobs WHERE job_id=$1", "job-one"), n);
    assert_int_equal(
        db_long("SELECT count(*) FROM jobs WHERE job_id=$1 AND completed_at IS NOT NULL",
                "job-one"),
        1);
    assert_int_equal(group_lag("t1", "g1"), 0);
    /* a second run of the same group finds nothing left and writes nothing */
    assert_int_equal(worker_pipeline_run(&cfg, &e), 0);
    assert_int_equal(db_long("SELECT count(*) FROM ticket_results WHERE job_id=$1", "job-one"), n);
}

typedef struct {
    worker_run_cfg_t cfg;
    worker_pipeline_stats_t st;
    common_err_t e;
    int rc;
} worker_t;

static void *run_thread(void *arg) {
    worker_t *w = arg;
    w->rc = worker_pipeline_run_ex(&w->cfg, &w->st, &w->e);
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
    common_err_t e;
    assert_int_equal(consumers_mock_topic_create(mock, "t3", PARTS, &e), 0);
    assert_int_equal(consumers_mock_topic_create(mock, "t3.dlq", 1, &e), 0);
    pipe_producer_t pr = pipe_mock_producer();
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
                assert_int_equal(consumers_codec_encode(pr.codec, &t, 1, &buf, &len, &e), 0);
                good++;
            }
            pipe_mock_send(&pr, "t3", p, key, buf, len);
        }
    pipe_mock_producer_close(&pr);
    assert_int_equal(good, n_good);

    worker_run_cfg_t cfg;
    cfg_for(&cfg, "t3", "g3", 4);
    cfg.cls.threads = 4;
    worker_pipeline_stats_t st;
    assert_int_equal(worker_pipeline_run_ex(&cfg, &st, &e), 0);
    assert_int_equal(st.dead_letters, PARTS * (per_part / every));
    assert_int_equal(db_long("SELECT count(*) FROM ticket_results WHERE job_id=$1", "job-order"),
                     n_good);
    assert_int_equal(db_long("SELECT done FROM jobs WHERE job_id=$1", "job-order"), n_good);
    assert_int_equal(group_lag("t3", "g3"), 0);

    /* the dead-letter topic, in order: each source partition's offsets rise */
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    rd_kafka_conf_set(conf, "bootstrap.servers", bootstrap, err, sizeof(err));
    rd_kafka_conf_set(conf, "group.id", "g3-reader", err, sizeof(err));
    rd_kafka_conf_set(conf, "auto.offset.reset", "earliest", err, sizeof(err));
    rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_CONSUMER, conf, err, sizeof(err));
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

/* --idle-exit counts time with nothing left to read, not time without a record: fetches slower
 * than the idle bound (a loaded or distant broker) must not make the worker leave with its
 * partitions unread, the job unfinished and exit 0. A cluster of its own, whose first Fetch
 * responses are held 2.5 s each against an idle bound of 1 s. */
static void test_slow_fetch_is_not_idle(void **state) {
    const int n = 300;
    char err[512];
    rd_kafka_t *h = rd_kafka_new(RD_KAFKA_PRODUCER, rd_kafka_conf_new(), err, sizeof(err));
    assert_non_null(h);
    rd_kafka_mock_cluster_t *mc = rd_kafka_mock_cluster_new(h, 1);
    assert_non_null(mc);
    const char *shared = bootstrap;
    bootstrap = rd_kafka_mock_cluster_bootstraps(mc);
    assert_int_equal(rd_kafka_mock_topic_create(mc, "t5", PARTS, 1), 0);
    assert_int_equal(rd_kafka_mock_topic_create(mc, "t5.dlq", 1, 1), 0);
    produce_tenant("t5", "job-slow", "acme", 0, n, n);
    assert_int_equal(rd_kafka_mock_broker_push_request_error_rtts(
                         mc, 1, 1 /* Fetch */, 3, RD_KAFKA_RESP_ERR_NO_ERROR, 2500,
                         RD_KAFKA_RESP_ERR_NO_ERROR, 2500, RD_KAFKA_RESP_ERR_NO_ERROR, 2500),
                     0);
    worker_run_cfg_t cfg;
    common_err_t e;
    cfg_for(&cfg, "t5", "g5", 1);
    assert_int_equal(worker_pipeline_run(&cfg, &e), 0);
    assert_int_equal(group_lag("t5", "g5"), 0);
    bootstrap = shared;
    rd_kafka_mock_cluster_destroy(mc);
    rd_kafka_destroy(h);
    assert_int_equal(db_long("SELECT count(*) FROM ticket_results WHERE job_id=$1", "job-slow"), n);
    assert_int_equal(
        db_long("SELECT count(*) FROM jobs WHERE job_id=$1 AND completed_at IS NOT NULL",
                "job-slow"),
        1);
}

static void exec_ok(PGconn *c, const char *sql) {
    PGresult *r = PQexec(c, sql);
    if (PQresultStatus(r) != PGRES_COMMAND_OK) fail_msg("%s: %s", sql, PQerrorMessage(c));
    PQclear(r);
}

/* Runs job_id (n tickets on topic, group) with the result writers held at their first
 * transaction (job_progress locked) until the encoder has queued every batch; returns the
 * encoder's batches. While held, no offset is stored. */
static long run_held_writer(const char *topic, const char *group, const char *job_id, int n,
                            int writers, int sink_rows) {
    topic_create(topic);
    static worker_t w;
    memset(&w, 0, sizeof(w));
    cfg_for(&w.cfg, topic, group, 3);
    w.cfg.cls.max_len = 32;
    w.cfg.cls.token_budget = 128; /* a few tickets a batch: many batches */
    w.cfg.sink_connections = writers;
    w.cfg.sink_rows = sink_rows;
    worker_metrics_reset(&worker_metrics);
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, run_thread, &w), 0);
    /* the writer prepares its statements (which lock job_progress too) before the group is
     * joined: hold it from then on */
    for (int i = 0; i < 300 && atomic_load(&worker_metrics.partitions_assigned) == 0; i++)
        usleep(100000);
    assert_int_not_equal(atomic_load(&worker_metrics.partitions_assigned), 0);
    PGconn *lock = PQconnectdb(db_url);
    assert_int_equal(PQstatus(lock), CONNECTION_OK);
    exec_ok(lock, "BEGIN");
    exec_ok(lock, "LOCK TABLE job_progress IN EXCLUSIVE MODE"); /* the sink's upsert waits */
    produce_tenant(topic, job_id, "acme", 0, n, n);
    /* every ticket consumed and batched, and the batch count still for a while: every batch is
     * queued behind the held writer */
    long last = -1;
    int still = 0;
    for (int i = 0; i < 600 && still < 5; i++) {
        usleep(100000);
        long b = atomic_load(&worker_metrics.batches);
        still = b == last && b > 0 && atomic_load(&worker_metrics.tickets_consumed) >= n &&
                        atomic_load(&worker_metrics.pending_items) == 0
                    ? still + 1
                    : 0;
        last = b;
    }
    assert_true(still >= 5);
    assert_int_equal(db_long("SELECT count(*) FROM ticket_results WHERE job_id=$1", job_id), 0);
    assert_int_equal(group_lag(topic, group), n); /* nothing committed: nothing stored */
    exec_ok(lock, "COMMIT");
    PQfinish(lock);
    pthread_join(th, NULL);
    assert_int_equal(w.rc, 0);
    assert_int_equal(group_lag(topic, group), 0);
    return w.st.batches;
}

static long transactions_of(const char *job_id) {
    return db_long("SELECT count(DISTINCT xmin::text) FROM ticket_results WHERE job_id=$1", job_id);
}

static void test_writer_groups_batches(void **state) {
    const int n = 1200;
    long batches = run_held_writer("t6", "g6", "job-group", n, 1, 8192);
    assert_int_equal(db_long("SELECT count(*) FROM ticket_results WHERE job_id=$1", "job-group"),
                     n);
    assert_int_equal(db_long("SELECT done FROM jobs WHERE job_id=$1", "job-group"), n);
    /* the batch the writer held, then every batch that waited for it in one more */
    assert_true(batches >= 20);
    assert_true(transactions_of("job-group") <= 2);

    /* a row the database refuses is still split out alone, the rows around it written */
    PGconn *c = PQconnectdb(db_url);
    assert_int_equal(PQstatus(c), CONNECTION_OK);
    exec_ok(c, "ALTER TABLE ticket_results ADD CONSTRAINT test_refuse_one"
               " CHECK (job_id <> 'job-group-refused' OR ticket_id <> 't000321')");
    batches = run_held_writer("t7", "g7", "job-group-refused", n, 1, 8192);
    exec_ok(c, "ALTER TABLE ticket_results DROP CONSTRAINT test_refuse_one");
    PQfinish(c);
    assert_true(batches >= 20);
    assert_int_equal(
        db_long("SELECT count(*) FROM ticket_results WHERE job_id=$1", "job-group-refused"), n - 1);
    assert_int_equal(db_long("SELECT count(*) FROM ticket_results WHERE job_id='job-group-refused'"
                             " AND ticket_id=$1",
                             "t000321"),
                     0);
    assert_int_equal(
        db_long("SELECT count(*) FROM jobs WHERE job_id=$1 AND completed_at IS NOT NULL",
                "job-group-refused"),
        1);
}

/* Two writers: while one writes, the other starts a transaction only once an eighth of
 * --sink-rows waits (here 100 rows, about ten batches), not for each batch as it comes: of
 * the transactions only the first, begun while no other was writing, may be smaller. */
static void test_writers_gather_beside_a_write(void **state) {
    const int n = 1200;
    long batches = run_held_writer("t8", "g8", "job-gather", n, 2, 800);
    assert_true(batches >= 20);
    assert_int_equal(db_long("SELECT count(*) FROM ticket_results WHERE job_id=$1", "job-gather"),
                     n);
    assert_true(db_long("SELECT count(*) FROM (SELECT xmin::text, count(*) AS c"
                        " FROM ticket_results WHERE job_id=$1 GROUP BY 1) t WHERE c < 100",
                        "job-gather") <= 1);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_one_worker_exactly_n),
        cmocka_unit_test(test_two_workers_rebalance),
        cmocka_unit_test(test_decode_order_per_partition),
        cmocka_unit_test(test_slow_fetch_is_not_idle),
        cmocka_unit_test(test_writer_groups_batches),
        cmocka_unit_test(test_writers_gather_beside_a_write),
    };
    return cmocka_run_group_tests(tests, pipe_setup, pipe_teardown);
}
