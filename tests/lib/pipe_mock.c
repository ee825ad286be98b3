/* The pipeline tests' shared set-up and helpers (tests/lib/pipe_mock.h). */
#include "tests/lib/pipe_mock.h"

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

#include "worker/cli/config.h"
#include "sink/migrate.h"

static char pg_dir[256];
char db_url[256];
consumers_mock_t *mock;
const char *bootstrap;
char **texts;
int n_texts;

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

int pipe_setup(void **state) {
    if (load_texts()) return -1;
    common_err_t e;
    if (consumers_mock_start(PARTS, 0, &mock, &bootstrap, &e)) {
        fprintf(stderr, "mock: %s\n", e.message);
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
    if (sink_migrate_ex(db_url, RECLASS_SOURCE_DIR "/migrations", NULL, &applied, &e)) {
        fprintf(stderr, "migrate: %s\n", e.message);
        return -1;
    }
    return 0;
}

int pipe_teardown(void **state) {
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

void topic_create(const char *topic) {
    common_err_t e;
    assert_int_equal(consumers_mock_topic_create(mock, topic, PARTS, &e), COMMON_OK);
}

pipe_producer_t pipe_mock_producer(void) {
    char err[512];
    common_err_t e;
    pipe_producer_t p;
    assert_int_equal(consumers_codec_init(RECLASS_SOURCE_DIR "/consumers/schemas", &p.codec, &e),
                     0);
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    assert_int_equal(rd_kafka_conf_set(conf, "bootstrap.servers", bootstrap, err, sizeof(err)),
                     RD_KAFKA_CONF_OK);
    p.rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, err, sizeof(err));
    assert_non_null(p.rk);
    return p;
}

void pipe_mock_send(pipe_producer_t *p, const char *topic, int32_t partition, const char *key,
                    void *buf, size_t len) {
    rd_kafka_resp_err_t re;
    while ((re = rd_kafka_producev(
                p->rk, RD_KAFKA_V_TOPIC(topic),
                RD_KAFKA_V_PARTITION(partition < 0 ? RD_KAFKA_PARTITION_UA : partition),
                RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_FREE), RD_KAFKA_V_KEY(key, strlen(key)),
                RD_KAFKA_V_VALUE(buf, len), RD_KAFKA_V_END)) == RD_KAFKA_RESP_ERR__QUEUE_FULL)
        rd_kafka_poll(p->rk, 50);
    assert_int_equal(re, 0);
    rd_kafka_poll(p->rk, 0);
}

void pipe_mock_producer_close(pipe_producer_t *p) {
    assert_int_equal(rd_kafka_flush(p->rk, 30000), 0);
    rd_kafka_destroy(p->rk);
    consumers_codec_free(p->codec);
}

void produce_tenant(const char *topic, const char *job_id, const char *tenant, int from, int to,
                    int n) {
    common_err_t e;
    pipe_producer_t p = pipe_mock_producer();
    for (int i = from; i < to; i++) {
        char tid[32];
        snprintf(tid, sizeof(tid), "t%06d", i);
        consumers_ticket_t t = {.job_id = (char *)job_id,
                                .tenant = (char *)tenant,
                                .ticket_id = tid,
                                .text = texts[i % n_texts],
                                .text_len = strlen(texts[i % n_texts]),
                                .job_total = n,
                                .enqueued_at_ms = 1700000000000LL + i,
                                .partition = -1};
        void *buf;
        size_t len;
        assert_int_equal(consumers_codec_encode(p.codec, &t, 1, &buf, &len, &e), 0);
        pipe_mock_send(&p, topic, -1, tid, buf, len);
    }
    pipe_mock_producer_close(&p);
}

void produce_range(const char *topic, const char *job_id, int from, int to, int n) {
    if (from == 0) topic_create(topic);
    produce_tenant(topic, job_id, "acme", from, to, n);
}

void produce_job(const char *topic, const char *job_id, int n) {
    produce_range(topic, job_id, 0, n, n);
}

long db_long(const char *sql, const char *param) {
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

long group_lag(const char *topic, const char *group) {
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

void cfg_for(worker_run_cfg_t *cfg, const char *topic, const char *group, int idle) {
    common_err_t err;
    char *argv[] = {"run",
                    "--db",
                    db_url,
                    "--model",
                    RECLASS_DEMO_MODEL,
                    "--schemas",
                    RECLASS_SOURCE_DIR "/consumers/schemas",
                    NULL};
    assert_int_equal(worker_run_cfg_parse(cfg, 7, argv, &err), 0);
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
