/* End to end for the job format: `reclass dev-broker` -> `reclass submit` (CSV and JSONL,
 * both framings) -> a plain librdkafka consumer -> every record decodes with the right key,
 * fields and text; failures exit non-zero. Runs the real executable (RECLASS_BIN). */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>
#include <librdkafka/rdkafka.h>

#include "consumers/avro_codec.h"
#include "consumers/csv.h"

#define SCHEMAS RECLASS_SOURCE_DIR "/consumers/schemas"
#define EXCERPT RECLASS_FIXTURES "/cfpb_excerpt.csv"

static pid_t broker_pid;
static char bootstrap[128];

/* Starts `reclass dev-broker ARGS` and reads the address it prints. */
static void broker_start(const char *port, const char *topic) {
    int fds[2];
    assert_int_equal(pipe(fds), 0);
    broker_pid = fork();
    assert_true(broker_pid >= 0);
    if (broker_pid == 0) {
        dup2(fds[1], 1);
        close(fds[0]);
        close(fds[1]);
        execl(RECLASS_BIN, RECLASS_BIN, "dev-broker", "--port", port, "--partitions", "3",
              "--topic", topic, (char *)NULL);
        _exit(127);
    }
    close(fds[1]);
    FILE *f = fdopen(fds[0], "r");
    assert_non_null(fgets(bootstrap, sizeof(bootstrap), f));
    fclose(f);
    bootstrap[strcspn(bootstrap, "\n")] = '\0';
    assert_non_null(strstr(bootstrap, "127.0.0.1:"));
}

static int broker_stop(void) {
    int st;
    kill(broker_pid, SIGTERM);
    assert_int_equal(waitpid(broker_pid, &st, 0), broker_pid);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* Runs argv, returns its exit code; its stdout goes to out. */
static int run(char *const argv[], char *out, size_t outlen) {
    int fds[2];
    assert_int_equal(pipe(fds), 0);
    pid_t pid = fork();
    if (pid == 0) {
        dup2(fds[1], 1);
        close(fds[0]);
        close(fds[1]);
        execv(argv[0], argv);
        _exit(127);
    }
    close(fds[1]);
    size_t n = 0;
    ssize_t r;
    while ((r = read(fds[0], out + n, outlen - 1 - n)) > 0)
        n += (size_t)r;
    out[n] = '\0';
    close(fds[0]);
    int st;
    waitpid(pid, &st, 0);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

typedef struct {
    consumers_ticket_t t[64];
    char key[64][64];
    int confluent[64];
    int n;
} consumed_t;

/* Reads every partition of topic from the start to its end with a plain consumer. */
static void consume_all(const char *topic, int partitions, consumed_t *c,
                        consumers_codec_t *codec) {
    char errstr[256];
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    assert_int_equal(
        rd_kafka_conf_set(conf, "bootstrap.servers", bootstrap, errstr, sizeof(errstr)),
        RD_KAFKA_CONF_OK);
    rd_kafka_conf_set(conf, "group.id", "test-codec-submit", errstr, sizeof(errstr));
    rd_kafka_conf_set(conf, "enable.partition.eof", "true", errstr, sizeof(errstr));
    rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_CONSUMER, conf, errstr, sizeof(errstr));
    assert_non_null(rk);
    rd_kafka_poll_set_consumer(rk);
    rd_kafka_topic_partition_list_t *parts = rd_kafka_topic_partition_list_new(partitions);
    for (int p = 0; p < partitions; p++)
        rd_kafka_topic_partition_list_add(parts, topic, p)->offset = RD_KAFKA_OFFSET_BEGINNING;
    assert_int_equal(rd_kafka_assign(rk, parts), 0);
    rd_kafka_topic_partition_list_destroy(parts);
    memset(c, 0, sizeof(*c));
    int eofs = 0;
    time_t deadline = time(NULL) + 30;
    while (eofs < partitions && time(NULL) < deadline) {
        rd_kafka_message_t *m = rd_kafka_consumer_poll(rk, 200);
        if (!m) continue;
        if (m->err == RD_KAFKA_RESP_ERR__PARTITION_EOF) {
            eofs++;
        } else {
            assert_int_equal(m->err, 0);
            assert_true(c->n < 64);
            common_err_t e;
            int rc = consumers_codec_decode(codec, m->payload, m->len, &c->t[c->n], &e);
            if (rc) fprintf(stderr, "decode: %s\n", e.message);
            assert_int_equal(rc, 0);
            snprintf(c->key[c->n], sizeof(c->key[0]), "%.*s", (int)m->key_len,
                     (const char *)m->key);
            c->confluent[c->n] = ((const uint8_t *)m->payload)[0] == 0;
            c->n++;
        }
        rd_kafka_message_destroy(m);
    }
    assert_int_equal(eofs, partitions);
    rd_kafka_consumer_close(rk);
    rd_kafka_destroy(rk);
}

static void free_consumed(consumed_t *c) {
    for (int i = 0; i < c->n; i++)
        consumers_ticket_free(&c->t[i]);
}

static int64_t now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void test_csv_job(void **state) {
    consumers_codec_t *codec;
    char out[4096];
    common_err_t e;
    assert_int_equal(consumers_codec_init(SCHEMAS, &codec, &e), COMMON_OK);
    broker_start("0", "tickets");

    int64_t t0 = now_ms();
    char *argv[] = {RECLASS_BIN,   "submit",        "--brokers",
                    bootstrap,     "--topic",       "tickets",
                    "--job-id",    "job-e2e",       "--tenant",
                    "acme",        "--text-column", "Consumer complaint narrative",
                    "--id-column", "Complaint ID",  "--priority",
                    "7",           "--no-progress", EXCERPT,
                    NULL};
    assert_int_equal(run(argv, out, sizeof(out)), 0);
    assert_string_equal(out, "submitted 30 tickets of job job-e2e to tickets\n");
    int64_t t1 = now_ms();

    consumed_t c;
    consume_all("tickets", 3, &c, codec);
    assert_int_equal(c.n, 30);

    /* Expected: the excerpt's non-empty narratives, by Complaint ID. */
    FILE *f = fopen(EXCERPT, "rb");
    consumers_csv_t *csv;
    consumers_csv_row_t row;
    consumers_csv_init(f, &csv);
    assert_int_equal(consumers_csv_next(csv, &row, &e), COMMON_OK);
    int found = 0;
    while (consumers_csv_next(csv, &row, &e) == COMMON_OK) {
        if (row.len[5] == 0) continue;
        int hit = -1;
        for (int i = 0; i < c.n; i++)
            if (strcmp(c.key[i], row.field[17]) == 0) hit = hit < 0 ? i : -2;
        assert_true(hit >= 0); /* present exactly once */
        consumers_ticket_t *t = &c.t[hit];
        assert_string_equal(t->ticket_id, row.field[17]);
        assert_string_equal(t->job_id, "job-e2e");
        assert_string_equal(t->tenant, "acme");
        assert_int_equal(t->job_total, 30);
        assert_int_equal(t->text_len, row.len[5]);
        assert_memory_equal(t->text, row.field[5], row.len[5]);
        assert_true(t->enqueued_at_ms >= t0 && t->enqueued_at_ms <= t1);
        assert_int_equal(t->has_priority, 1);
        assert_int_equal(t->priority, 7);
        assert_true(c.confluent[hit]);
        found++;
    }
    assert_int_equal(found, 30);
    consumers_csv_free(csv);
    fclose(f);
    free_consumed(&c);

    /* Input errors exit 2 and send nothing. */
    char dup_path[] = "/tmp/reclass-dup-XXXXXX.csv";
    int fd = mkstemps(dup_path, 4);
    assert_true(fd >= 0);
    dprintf(fd, "id,text\r\na,\"one\"\r\na,two\r\n");
    close(fd);
    char *dup_argv[] = {RECLASS_BIN,   "submit",   "--brokers", bootstrap,  "--topic",
                        "dups",        "--job-id", "j",         "--tenant", "t",
                        "--id-column", "id",       dup_path,    NULL};
    assert_int_equal(run(dup_argv, out, sizeof(out)), 2);
    unlink(dup_path);
    char *miss_argv[] = {RECLASS_BIN, "submit", "--brokers", bootstrap,
                         "--tenant",  "t",      EXCERPT,     NULL};
    assert_int_equal(run(miss_argv, out, sizeof(out)), 2);

    assert_int_equal(broker_stop(), 0);

    /* The broker is gone: delivery cannot happen, so submit must fail. */
    char *dead_argv[] = {RECLASS_BIN,
                         "submit",
                         "--brokers",
                         bootstrap,
                         "--topic",
                         "tickets",
                         "--job-id",
                         "j",
                         "--tenant",
                         "t",
                         "--text-column",
                         "Consumer complaint narrative",
                         "--no-progress",
                         EXCERPT,
                         NULL};
    assert_int_equal(run(dead_argv, out, sizeof(out)), 1);
    assert_string_equal(out, "");
    consumers_codec_free(codec);
}

/* JSONL input, plain Avro, a fixed --port (served through the bootstrap relay). */
static void test_jsonl_plain_fixed_port(void **state) {
    int s = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t al = sizeof(a);
    assert_int_equal(bind(s, (struct sockaddr *)&a, sizeof(a)), 0);
    getsockname(s, (struct sockaddr *)&a, &al);
    char port[16];
    snprintf(port, sizeof(port), "%d", ntohs(a.sin_port));
    close(s); /* a free port; nothing else on this machine should grab it right now */
    broker_start(port, "jobs");
    char expect[64];
    snprintf(expect, sizeof(expect), "127.0.0.1:%s", port);
    assert_string_equal(bootstrap, expect);

    char path[] = "/tmp/reclass-jsonl-XXXXXX.jsonl";
    int fd = mkstemps(path, 6);
    dprintf(fd, "{\"text\": \"card arrived broken\", \"id\": \"T1\", \"label\": \"x\"}\n"
                "\n"
                "{\"text\": \"\\u00e9t\\u00e9 \\\"quoted\\\"\\nnewline\", \"id\": 2}\n"
                "{\"text\": \"\", \"id\": \"empty\"}\n");
    close(fd);
    char out[1024];
    common_err_t e;
    char *argv[] = {RECLASS_BIN,    "submit",        "--brokers", bootstrap,  "--topic",
                    "jobs",         "--job-id",      "jl",        "--tenant", "t9",
                    "--plain-avro", "--no-progress", path,        NULL};
    assert_int_equal(run(argv, out, sizeof(out)), 0);
    assert_string_equal(out, "submitted 2 tickets of job jl to jobs\n");
    unlink(path);

    consumers_codec_t *codec;
    assert_int_equal(consumers_codec_init(SCHEMAS, &codec, &e), 0);
    consumed_t c;
    consume_all("jobs", 3, &c, codec);
    assert_int_equal(c.n, 2);
    for (int i = 0; i < 2; i++) {
        assert_false(c.confluent[i]);
        assert_int_equal(c.t[i].job_total, 2);
        assert_int_equal(c.t[i].has_priority, 0);
        assert_string_equal(c.key[i], c.t[i].ticket_id);
        if (strcmp(c.key[i], "T1") == 0) {
            assert_string_equal(c.t[i].text, "card arrived broken");
        } else {
            assert_string_equal(c.key[i], "2");
            assert_string_equal(c.t[i].text, "\xc3\xa9t\xc3\xa9 \"quoted\"\nnewline");
        }
    }
    free_consumed(&c);
    consumers_codec_free(codec);
    assert_int_equal(broker_stop(), 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_csv_job),
        cmocka_unit_test(test_jsonl_plain_fixed_port),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
