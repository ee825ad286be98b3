/* worker/metrics: Prometheus text exposition that parses line by line, liveness/readiness
 * rules, and the HTTP endpoints (real sockets on 127.0.0.1). */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <regex.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#include "common/clock.h"
#include "worker/observe/metrics.h"

static worker_metrics_t m; /* a private instance: the process-wide one stays untouched */

/* The value of the sample line "name value" (no labels), or -1e300 when missing. */
static double sample(const char *text, const char *name) {
    size_t n = strlen(name);
    for (const char *p = text; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL)
        if (!strncmp(p, name, n) && p[n] == ' ') return strtod(p + n + 1, NULL);
    return -1e300;
}

/* Every line is a HELP, a TYPE or a sample of a metric whose HELP and TYPE came first;
 * counters (and only they) end in _total; names are reclass_*; values parse. */
static void check_exposition(const char *text, int *n_samples) {
    regex_t sample_re;
    assert_int_equal(regcomp(&sample_re,
                             "^(reclass_[a-zA-Z0-9_:]*)(\\{([a-zA-Z_][a-zA-Z0-9_]*=\"([^\"\\\\]|"
                             "\\\\.)*\",?)*\\})? ([-+0-9.eE]+|NaN|[+-]Inf)$",
                             REG_EXTENDED),
                     0);
    char typed[64][64], types[64][16];
    int n_typed = 0, helped = 0, samples = 0;
    char *copy = strdup(text), *save = NULL;
    assert_non_null(copy);
    assert_true(strlen(text) > 0 && text[strlen(text) - 1] == '\n'); /* ends with a newline */
    for (char *line = strtok_r(copy, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        char name[64], rest[64];
        if (!strncmp(line, "# HELP ", 7)) {
            assert_int_equal(sscanf(line + 7, "%63s %63s", name, rest), 2);
            helped++;
            continue;
        }
        if (!strncmp(line, "# TYPE ", 7)) {
            assert_int_equal(sscanf(line + 7, "%63s %15s", typed[n_typed], types[n_typed]), 2);
            assert_true(!strcmp(types[n_typed], "counter") || !strcmp(types[n_typed], "gauge") ||
                        !strcmp(types[n_typed], "histogram"));
            size_t len = strlen(typed[n_typed]);
            int total = len > 6 && !strcmp(typed[n_typed] + len - 6, "_total");
            assert_int_equal(total, !strcmp(types[n_typed], "counter"));
            n_typed++;
            assert_int_equal(helped, n_typed); /* HELP then TYPE, once each */
            continue;
        }
        regmatch_t g[2];
        if (regexec(&sample_re, line, 2, g, 0) != 0) fail_msg("not exposition format: %s", line);
        int len = (int)(g[1].rm_eo - g[1].rm_so);
        assert_true(n_typed > 0);
        /* the sample belongs to the metric typed just before it (a histogram's: its _bucket,
         * _sum and _count) */
        size_t tl = strlen(typed[n_typed - 1]);
        const char *suffix = line + tl;
        int histogram = !strcmp(types[n_typed - 1], "histogram");
        assert_true((size_t)len >= tl);
        assert_memory_equal(typed[n_typed - 1], line, tl);
        if (histogram)
            assert_true(!strncmp(suffix, "_bucket{", 8) || !strncmp(suffix, "_sum{", 5) ||
                        !strncmp(suffix, "_count{", 7));
        else
            assert_int_equal((int)tl, len);
        samples++;
    }
    free(copy);
    regfree(&sample_re);
    *n_samples = samples;
}

static void test_render(void **state) {
    (void)state;
    worker_metrics_reset(&m);
    worker_metrics_add(&m.tickets_classified, 1234);
    worker_metrics_add(&m.tickets_consumed, 1240);
    worker_metrics_add(&m.dead_lettered, 6);
    atomic_store(&m.encoder_ns, 2500000000LL);
    atomic_store(&m.partitions_assigned, 3);
    atomic_store(&m.mem[0].arena_bytes, 41947136LL);
    atomic_store(&m.last_poll_ms, 10000LL);
    worker_metrics_info_t info = {"cpu", "fp32", "we\"ird\\model\nname", "host:1"};
    char *text = worker_metrics_render(&m, &info, 12500);
    assert_non_null(text);
    int n = 0;
    check_exposition(text, &n);
    assert_true(n >= 25);
    assert_true(sample(text, "reclass_tickets_classified_total") == 1234);
    assert_true(sample(text, "reclass_tickets_consumed_total") == 1240);
    assert_true(sample(text, "reclass_tickets_dead_lettered_total") == 6);
    assert_true(sample(text, "reclass_encoder_seconds_total") == 2.5);
    assert_true(sample(text, "reclass_partitions_assigned") == 3);
    assert_true(sample(text, "reclass_arena_bytes{encoder=\"0\",device=\"0\"}") == 41947136);
    assert_true(sample(text, "reclass_last_poll_age_seconds") == 2.5);
    assert_true(sample(text, "reclass_allocations_after_init{encoder=\"0\",device=\"0\"}") == 0);
    free(text);
    /* two encoders on device 1: a sample each, labelled */
    atomic_store(&m.encoders, 2);
    atomic_store(&m.mem[1].device, 1);
    atomic_store(&m.mem[1].arena_bytes, 7LL);
    text = worker_metrics_render(&m, &info, 12500);
    assert_non_null(text);
    check_exposition(text, &n);
    assert_true(sample(text, "reclass_arena_bytes{encoder=\"0\",device=\"0\"}") == 41947136);
    assert_true(sample(text, "reclass_arena_bytes{encoder=\"1\",device=\"1\"}") == 7);
    assert_non_null(strstr(text, "reclass_info{backend=\"cpu\",precision=\"fp32\","
                                 "model=\"we\\\"ird\\\\model\\nname\",worker=\"host:1\"} 1\n"));
    free(text);
    /* one sample per stage and clock */
    atomic_store(&m.stage_ns[WORKER_STAGE_TOKENIZE][1], 1500000000LL);
    text = worker_metrics_render(&m, NULL, 12500);
    assert_non_null(
        strstr(text, "\nreclass_stage_seconds_total{stage=\"tokenize\",clock=\"cpu\"} 1.5\n"));
    assert_non_null(
        strstr(text, "\nreclass_stage_seconds_total{stage=\"copy\",clock=\"wall\"} 0\n"));
    free(text);
    /* without info there is no reclass_info, and the text still parses */
    text = worker_metrics_render(&m, NULL, 12500);
    check_exposition(text, &n);
    assert_null(strstr(text, "reclass_info"));
    free(text);
}

/* A stage timer adds to the process-wide counters: a busy loop is CPU and wall time, a sleep
 * wall time only. */
static void test_stage_clock(void **state) {
    (void)state;
    worker_metrics_reset(&worker_metrics);
    worker_stage_clock_t c;
    worker_stage_begin(&c);
    volatile double x = 0;
    for (long i = 0; i < 20000000; i++)
        x += 1e-9 * (double)i;
    worker_stage_end(&c, WORKER_STAGE_SCORE);
    usleep(50000);
    worker_stage_end(&c, WORKER_STAGE_COPY);
    long long sw = atomic_load(&worker_metrics.stage_ns[WORKER_STAGE_SCORE][0]);
    long long sc = atomic_load(&worker_metrics.stage_ns[WORKER_STAGE_SCORE][1]);
    long long cw = atomic_load(&worker_metrics.stage_ns[WORKER_STAGE_COPY][0]);
    long long cc = atomic_load(&worker_metrics.stage_ns[WORKER_STAGE_COPY][1]);
    assert_true(sc > 0 && sw >= sc / 2); /* CPU and wall clocks tick at different grains */
    assert_true(cw >= 45000000 && cc < cw / 2);
    assert_string_equal(worker_stage_name(WORKER_STAGE_TOKENIZE), "tokenize");
    assert_string_equal(worker_stage_name(WORKER_STAGE_N), "unknown");
    worker_metrics_reset(&worker_metrics);
}

/* reclass_commit_latency_seconds: cumulative buckets per (lane, tenant), +Inf = _count, _sum;
 * pairs past the series bound are counted under tenant "_other" of their lane. */
static void test_latency_histogram(void **state) {
    (void)state;
    worker_metrics_reset(&m);
    worker_metrics_latency_reset();
    worker_metrics_latency_observe(0, "acme", 0.04);
    worker_metrics_latency_observe(0, "acme", 0.3);
    worker_metrics_latency_observe(0, "acme", 1.5);
    worker_metrics_latency_observe(1, "acme", 45);
    worker_metrics_latency_observe(1, "bulk\"co", -1); /* a clock ahead of ours: 0 */
    for (int i = 0; i < 2 * WORKER_METRICS_LATENCY_SERIES; i++) {
        char t[32];
        snprintf(t, sizeof(t), "t%d", i);
        worker_metrics_latency_observe(1, t, 0.2);
    }
    char *text = worker_metrics_render(&m, NULL, 1000);
    int n = 0;
    check_exposition(text, &n);
    const char *want[] = {
        "reclass_commit_latency_seconds_bucket{lane=\"0\",tenant=\"acme\",le=\"0.05\"} 1\n",
        "reclass_commit_latency_seconds_bucket{lane=\"0\",tenant=\"acme\",le=\"0.25\"} 1\n",
        "reclass_commit_latency_seconds_bucket{lane=\"0\",tenant=\"acme\",le=\"0.5\"} 2\n",
        "reclass_commit_latency_seconds_bucket{lane=\"0\",tenant=\"acme\",le=\"2\"} 3\n",
        "reclass_commit_latency_seconds_bucket{lane=\"0\",tenant=\"acme\",le=\"+Inf\"} 3\n",
        "reclass_commit_latency_seconds_count{lane=\"0\",tenant=\"acme\"} 3\n",
        "reclass_commit_latency_seconds_bucket{lane=\"1\",tenant=\"acme\",le=\"30\"} 0\n",
        "reclass_commit_latency_seconds_bucket{lane=\"1\",tenant=\"acme\",le=\"60\"} 1\n",
        "reclass_commit_latency_seconds_bucket{lane=\"1\",tenant=\"bulk\\\"co\",le=\"0.05\"} 1\n",
        NULL};
    for (int i = 0; want[i]; i++)
        if (!strstr(text, want[i])) fail_msg("missing: %s", want[i]);
    const char *sum =
        strstr(text, "reclass_commit_latency_seconds_sum{lane=\"0\",tenant=\"acme\"} ");
    assert_non_null(sum);
    assert_true(fabs(strtod(strchr(sum, '}') + 2, NULL) - 1.84) < 1e-9);
    /* 56 own series, then "_other" of lane 1 takes the remaining tenants */
    double other = -1;
    const char *o =
        strstr(text, "reclass_commit_latency_seconds_count{lane=\"1\",tenant=\"_other\"} ");
    assert_non_null(o);
    other = strtod(strchr(o, '}') + 2, NULL);
    assert_true(other ==
                2 * WORKER_METRICS_LATENCY_SERIES + 3 - (WORKER_METRICS_LATENCY_SERIES - 8));
    free(text);
    worker_metrics_latency_reset();
}

/* reclass_ticket_wait_seconds: cumulative buckets per (lane, stage) from milliseconds, a series
 * only once a ticket passed; lanes and stages out of range are not counted. */
static void test_wait_histogram(void **state) {
    (void)state;
    worker_metrics_reset(&m);
    worker_metrics_wait_reset();
    worker_metrics_wait_observe(0, WORKER_WAIT_POLL, 3);
    worker_metrics_wait_observe(0, WORKER_WAIT_POLL, 700);
    worker_metrics_wait_observe(0, WORKER_WAIT_SINK, -5); /* clamped to 0 */
    worker_metrics_wait_observe(1, WORKER_WAIT_ACCUMULATE, 90000);
    worker_metrics_wait_observe(WORKER_METRICS_WAIT_LANES, WORKER_WAIT_POLL, 1);
    worker_metrics_wait_observe(0, WORKER_WAIT_N, 1);
    char *text = worker_metrics_render(&m, NULL, 1000);
    int n = 0;
    check_exposition(text, &n);
    const char *want[] = {
        "# TYPE reclass_ticket_wait_seconds histogram\n",
        "reclass_ticket_wait_seconds_bucket{lane=\"0\",stage=\"poll\",le=\"0.0025\"} 0\n",
        "reclass_ticket_wait_seconds_bucket{lane=\"0\",stage=\"poll\",le=\"0.005\"} 1\n",
        "reclass_ticket_wait_seconds_bucket{lane=\"0\",stage=\"poll\",le=\"0.5\"} 1\n",
        "reclass_ticket_wait_seconds_bucket{lane=\"0\",stage=\"poll\",le=\"1\"} 2\n",
        "reclass_ticket_wait_seconds_count{lane=\"0\",stage=\"poll\"} 2\n",
        "reclass_ticket_wait_seconds_bucket{lane=\"0\",stage=\"sink\",le=\"0.001\"} 1\n",
        "reclass_ticket_wait_seconds_bucket{lane=\"1\",stage=\"accumulate\",le=\"60\"} 0\n",
        "reclass_ticket_wait_seconds_bucket{lane=\"1\",stage=\"accumulate\",le=\"+Inf\"} 1\n",
        NULL};
    for (int i = 0; want[i]; i++)
        if (!strstr(text, want[i])) fail_msg("missing: %s", want[i]);
    const char *absent[] = {"stage=\"encode\"", "lane=\"1\",stage=\"poll\"", "lane=\"8\"", NULL};
    for (int i = 0; absent[i]; i++)
        if (strstr(text, absent[i])) fail_msg("unexpected: %s", absent[i]);
    const char *sum = strstr(text, "reclass_ticket_wait_seconds_sum{lane=\"0\",stage=\"poll\"} ");
    assert_non_null(sum);
    assert_true(fabs(strtod(strchr(sum, '}') + 2, NULL) - 0.703) < 1e-9);
    free(text);
    worker_metrics_wait_reset();
    text = worker_metrics_render(&m, NULL, 1000);
    assert_null(strstr(text, "reclass_ticket_wait_seconds_count"));
    free(text);
}

/* reclass_drift_status: one labelled sample per tenant of the last complete set; a set being
 * built never shows, and a new set replaces the old one whole. */
static void test_drift_status(void **state) {
    (void)state;
    worker_metrics_reset(&m);
    worker_metrics_info_t info = {"cpu", "fp32", "demo", "host:1"};
    worker_metrics_drift_begin();
    worker_metrics_drift_put("acme", 3);
    worker_metrics_drift_put("glo\"bex", 1);
    worker_metrics_drift_count("drift", 1);
    worker_metrics_drift_count("sparse", 4000);
    worker_metrics_drift_count("bogus", 7); /* not a status: ignored */
    worker_metrics_drift_end();
    worker_metrics_drift_begin();
    worker_metrics_drift_put("staged", 2); /* not ended: must not show */
    char *text = worker_metrics_render(&m, &info, 1000);
    int n = 0;
    check_exposition(text, &n);
    assert_non_null(strstr(text, "reclass_drift_status{tenant=\"acme\",model=\"demo\"} 3\n"));
    assert_non_null(strstr(text, "reclass_drift_status{tenant=\"glo\\\"bex\",model=\"demo\"} 1\n"));
    assert_null(strstr(text, "staged"));
    assert_non_null(strstr(text, "reclass_drift_tenants{model=\"demo\",status=\"drift\"} 1\n"));
    assert_non_null(strstr(text, "reclass_drift_tenants{model=\"demo\",status=\"sparse\"} 4000\n"));
    assert_non_null(strstr(text, "reclass_drift_tenants{model=\"demo\",status=\"ok\"} 0\n"));
    assert_null(strstr(text, "bogus"));
    free(text);
    worker_metrics_drift_end();
    text = worker_metrics_render(&m, &info, 1000);
    assert_non_null(strstr(text, "reclass_drift_status{tenant=\"staged\",model=\"demo\"} 2\n"));
    assert_null(strstr(text, "acme"));
    free(text);
    for (int i = 0; i < WORKER_METRICS_DRIFT_TENANTS + 5; i++) /* capped, never overflows */
        worker_metrics_drift_put("t", 1);
    worker_metrics_drift_end();
    text = worker_metrics_render(&m, &info, 1000);
    int k = 0;
    for (const char *p = text; (p = strstr(p, "reclass_drift_status{")) != NULL; p++)
        k++;
    assert_int_equal(k, WORKER_METRICS_DRIFT_TENANTS);
    free(text);
    worker_metrics_drift_begin();
    worker_metrics_drift_end();
}

static void test_health_ready_rules(void **state) {
    (void)state;
    worker_metrics_reset(&m);
    assert_false(worker_metrics_healthy(&m, 100000)); /* the poll loop never ran */
    atomic_store(&m.last_poll_ms, 100000LL);
    assert_true(worker_metrics_healthy(&m, 100000 + WORKER_METRICS_STALE_MS - 1));
    assert_false(worker_metrics_healthy(&m, 100000 + WORKER_METRICS_STALE_MS));
    assert_false(worker_metrics_ready(&m));
    atomic_store(&m.group_joined, 1);
    assert_false(worker_metrics_ready(&m)); /* PostgreSQL not connected */
    atomic_store(&m.sink_connected, 1);
    assert_true(worker_metrics_ready(&m));
    atomic_store(&m.group_joined, 0);
    atomic_store(&m.partitions_assigned, 2);
    assert_true(worker_metrics_ready(&m));
    atomic_store(&m.sink_connected, 0);
    assert_false(worker_metrics_ready(&m));
}

/* One HTTP/1.0 request; returns the whole response (status line, headers, body). */
static char *http(int port, const char *method, const char *path) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    assert_true(fd >= 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
    assert_int_equal(connect(fd, (struct sockaddr *)&a, sizeof(a)), 0);
    char req[256];
    int n = snprintf(req, sizeof(req), "%s %s HTTP/1.0\r\nHost: x\r\n\r\n", method, path);
    assert_int_equal(write(fd, req, (size_t)n), n);
    size_t cap = 1 << 16, len = 0;
    char *buf = malloc(cap);
    ssize_t r;
    while ((r = read(fd, buf + len, cap - 1 - len)) > 0)
        len += (size_t)r;
    buf[len] = '\0';
    close(fd);
    return buf;
}

static int status_of(const char *resp) {
    int code = 0;
    sscanf(resp, "HTTP/1.%*d %d", &code);
    return code;
}

static void test_http_endpoints(void **state) {
    (void)state;
    worker_metrics_reset(&m);
    worker_metrics_info_t info = {"cpu", "fp32", "clinc150-bert-mini", "h:2"};
    worker_http_t *h = NULL;
    common_err_t err;
    assert_int_equal(worker_http_start("127.0.0.1", 0, &m, &info, &h, &err), 0);
    int port = worker_http_port(h);
    assert_true(port > 0);

    char *r = http(port, "GET", "/healthz");
    assert_int_equal(status_of(r), 503); /* no heartbeat yet */
    free(r);
    atomic_store(&m.last_poll_ms, (long long)common_now_ms());
    r = http(port, "GET", "/healthz");
    assert_int_equal(status_of(r), 200);
    free(r);
    atomic_store(&m.last_poll_ms, (long long)(common_now_ms() - WORKER_METRICS_STALE_MS - 1000));
    r = http(port, "GET", "/healthz");
    assert_int_equal(status_of(r), 503); /* stalled poll loop */
    free(r);

    r = http(port, "GET", "/readyz");
    assert_int_equal(status_of(r), 503);
    free(r);
    atomic_store(&m.group_joined, 1);
    atomic_store(&m.sink_connected, 1);
    r = http(port, "GET", "/readyz");
    assert_int_equal(status_of(r), 200);
    free(r);

    worker_metrics_add(&m.tickets_classified, 7);
    r = http(port, "GET", "/metrics");
    assert_int_equal(status_of(r), 200);
    assert_non_null(strstr(r, "text/plain; version=0.0.4"));
    char *body = strstr(r, "\r\n\r\n");
    assert_non_null(body);
    int n = 0;
    check_exposition(body + 4, &n);
    assert_true(sample(body + 4, "reclass_tickets_classified_total") == 7);
    assert_non_null(strstr(body, "model=\"clinc150-bert-mini\""));
    free(r);

    r = http(port, "GET", "/nothing");
    assert_int_equal(status_of(r), 404);
    free(r);
    r = http(port, "POST", "/metrics");
    assert_int_equal(status_of(r), 405);
    free(r);

    /* the port is taken now: a second server cannot bind it */
    worker_http_t *h2 = NULL;
    assert_int_equal(worker_http_start("127.0.0.1", port, &m, NULL, &h2, &err), COMMON_FATAL);
    assert_null(h2);
    char line[COMMON_ERR_LINE_MAX];
    assert_non_null(strstr(common_err_line(&err, line, sizeof line), "pick another --http-port"));
    worker_http_stop(h);
    /* stopped: nothing listens any more */
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
    assert_int_not_equal(connect(fd, (struct sockaddr *)&a, sizeof(a)), 0);
    close(fd);
}

static void test_http_bad_address(void **state) {
    (void)state;
    worker_http_t *h = NULL;
    common_err_t err;
    assert_int_equal(worker_http_start("not-an-ip", 9090, &m, NULL, &h, &err), COMMON_USAGE);
    assert_null(h);
    assert_non_null(strstr(err.message, "--http-addr"));
    /* IPv6 loopback works where the host has it; either way no crash and no leak */
    if (worker_http_start("::1", 0, &m, NULL, &h, &err) == 0) {
        assert_true(worker_http_port(h) > 0);
        worker_http_stop(h);
    }
    worker_http_stop(NULL);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_render),
        cmocka_unit_test(test_stage_clock),
        cmocka_unit_test(test_latency_histogram),
        cmocka_unit_test(test_wait_histogram),
        cmocka_unit_test(test_drift_status),
        cmocka_unit_test(test_health_ready_rules),
        cmocka_unit_test(test_http_endpoints),
        cmocka_unit_test(test_http_bad_address),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
