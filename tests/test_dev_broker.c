/* reclass dev-broker's partition log bound and the librdkafka version gate.
 *
 * librdkafka's mock cluster deletes a partition's oldest record batches beyond 5 MiB, so a
 * larger submit used to lose tickets silently. The vendored librdkafka is patched to make the
 * bound settable (third_party/librdkafka/patches/0001-...): with dev-broker's default bound
 * a partition keeps more than 5 MiB (low watermark stays 0), and --partition-mb 1 trims it.
 * A build on the system librdkafka must refuse the flags instead. */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>
#include <librdkafka/rdkafka.h>

#include "consumers/kafka_version.h"
#include "consumers/mock_broker.h"

#define MSG_BYTES (100 * 1024)
#define MSG_COUNT 80 /* 8 MiB into one partition: over the mock's built-in 5 MiB */
#define TOPIC     "big"

static void test_version_gate(void **state) {
    common_err_t e;
    char line[COMMON_ERR_LINE_MAX];
    assert_int_equal(consumers_kafka_version_ok(0x020002ff, &e), COMMON_FATAL); /* 2.0.2 */
    common_err_line(&e, line, sizeof(line));
    assert_non_null(strstr(line, "2.0.2"));
    assert_non_null(strstr(line, "ApiVersions"));
    assert_non_null(strstr(line, "vendored"));
    assert_int_equal(consumers_kafka_version_ok(0x020100ff, &e), COMMON_FATAL); /* 2.1.0 */
    assert_int_equal(consumers_kafka_version_ok(0x020200ff, &e), 0);
    assert_int_equal(consumers_kafka_version_ok(0x020f00ff, &e), 0);
    char desc[96];
    consumers_kafka_version_describe(desc, sizeof(desc));
    assert_non_null(strstr(desc, rd_kafka_version_str()));
#ifdef RECLASS_RDKAFKA_VENDORED
    assert_int_equal(consumers_kafka_check_version(&e), 0);
    assert_string_equal(desc, "2.15.0 (vendored)");
#endif
}

static void test_help_documents_the_bound(void **state) {
    FILE *p = popen(RECLASS_BIN " dev-broker --help", "r");
    assert_non_null(p);
    char out[4096];
    size_t n = fread(out, 1, sizeof(out) - 1, p);
    out[n] = '\0';
    assert_int_equal(pclose(p), 0);
    assert_non_null(strstr(out, "--partition-mb"));
    assert_non_null(strstr(out, "--partition-max-batches"));
    assert_non_null(strstr(out, "deleted"));
}

#ifdef RECLASS_RDKAFKA_VENDORED
typedef struct {
    pid_t pid;
    char bootstrap[128];
} broker_t;

/* Starts RECLASS_BIN dev-broker with extra args and reads its bootstrap line. */
static int broker_start(broker_t *b, const char *const *extra) {
    const char *argv[16] = {RECLASS_BIN, "dev-broker", "--partitions", "1", "--topic", TOPIC};
    int n = 6;
    for (; extra && *extra && n < 15; extra++)
        argv[n++] = *extra;
    argv[n] = NULL;
    int fd[2];
    if (pipe(fd)) return -1;
    b->pid = fork();
    if (b->pid == 0) {
        dup2(fd[1], STDOUT_FILENO);
        close(fd[0]);
        close(fd[1]);
        execv(RECLASS_BIN, (char *const *)argv);
        _exit(127);
    }
    close(fd[1]);
    FILE *f = fdopen(fd[0], "r");
    int ok = f && fgets(b->bootstrap, sizeof(b->bootstrap), f);
    if (f) fclose(f);
    if (!ok) return -1;
    b->bootstrap[strcspn(b->bootstrap, "\n")] = '\0';
    return 0;
}

static void broker_stop(broker_t *b) {
    int status;
    kill(b->pid, SIGTERM);
    waitpid(b->pid, &status, 0);
}

/* Produces MSG_COUNT incompressible values to partition 0, then returns its watermarks. */
static void produce_and_watermarks(const char *bootstrap, int64_t *lo, int64_t *hi) {
    char errstr[512];
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    assert_int_equal(rd_kafka_conf_set(conf, "bootstrap.servers", bootstrap, errstr, 512), 0);
    assert_int_equal(rd_kafka_conf_set(conf, "linger.ms", "5", errstr, 512), 0);
    assert_int_equal(rd_kafka_conf_set(conf, "log_level", "3", errstr, 512), 0);
    rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, errstr, sizeof(errstr));
    assert_non_null(rk);
    char *buf = malloc(MSG_BYTES);
    assert_non_null(buf);
    srand(7);
    for (int i = 0; i < MSG_COUNT; i++) {
        for (int k = 0; k < MSG_BYTES; k++)
            buf[k] = (char)(rand() & 0xff);
        rd_kafka_resp_err_t e;
        while ((e = rd_kafka_producev(rk, RD_KAFKA_V_TOPIC(TOPIC), RD_KAFKA_V_PARTITION(0),
                                      RD_KAFKA_V_VALUE(buf, MSG_BYTES),
                                      RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY), RD_KAFKA_V_END)) ==
               RD_KAFKA_RESP_ERR__QUEUE_FULL)
            rd_kafka_poll(rk, 50);
        assert_int_equal(e, 0);
    }
    free(buf);
    assert_int_equal(rd_kafka_flush(rk, 60000), 0);
    assert_int_equal(rd_kafka_query_watermark_offsets(rk, TOPIC, 0, lo, hi, 10000), 0);
    rd_kafka_destroy(rk);
}

static void test_default_keeps_more_than_5mib(void **state) {
    broker_t b;
    assert_int_equal(broker_start(&b, NULL), 0);
    int64_t lo = -1, hi = -1;
    produce_and_watermarks(b.bootstrap, &lo, &hi);
    broker_stop(&b);
    assert_int_equal(hi, MSG_COUNT);
    assert_int_equal(lo, 0); /* without the patch the mock deletes the first ~3 MiB */
}

static void test_partition_mb_trims_oldest(void **state) {
    broker_t b;
    const char *extra[] = {"--partition-mb", "1", NULL};
    assert_int_equal(broker_start(&b, extra), 0);
    int64_t lo = -1, hi = -1;
    produce_and_watermarks(b.bootstrap, &lo, &hi);
    broker_stop(&b);
    assert_int_equal(hi, MSG_COUNT);
    assert_true(lo > 0);
    assert_true(hi - lo < MSG_COUNT / 2); /* about 1 MiB of 100 KiB records is left */
}

static void test_wrapper_refuses_zero(void **state) {
    consumers_mock_t *m;
    const char *bs;
    common_err_t e;
    assert_int_equal(consumers_mock_start(1, 0, &m, &bs, &e), 0);
    assert_int_equal(consumers_mock_set_log_limits(m, 0, 10, &e), COMMON_USAGE);
    assert_int_equal(consumers_mock_set_log_limits(m, 1 << 20, 10, &e), 0);
    consumers_mock_stop(m);
}
#else
static void test_system_library_refuses_flags(void **state) {
    char cmd[512];
    snprintf(cmd, sizeof(cmd), "%s dev-broker --partition-mb 1 2>&1", RECLASS_BIN);
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    char out[1024];
    size_t n = fread(out, 1, sizeof(out) - 1, p);
    out[n] = '\0';
    int status = pclose(p);
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 2);
    assert_non_null(strstr(out, "vendored"));
}
#endif

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_version_gate),
        cmocka_unit_test(test_help_documents_the_bound),
#ifdef RECLASS_RDKAFKA_VENDORED
        cmocka_unit_test(test_default_keeps_more_than_5mib),
        cmocka_unit_test(test_partition_mb_trims_oldest),
        cmocka_unit_test(test_wrapper_refuses_zero),
#else
        cmocka_unit_test(test_system_library_refuses_flags),
#endif
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
