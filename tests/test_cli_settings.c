/* Every default --help prints is the value parsing leaves when the option is not given: for
 * `reclass run`'s rows (worker/cli/config.c) and the rows several commands share
 * (worker/cli/settings_opts.c), the "(default X)" of --help is read back from the printed text
 * and compared with the row's default and with the parsed variable. A default written into
 * help text, or set in code after parsing, fails here. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "gpu/model/model.h"
#include "worker/cli/cli.h"
#include "worker/cli/config.h"

/* The "(default X)" --help printed for --name in help (a whole usage text), copied to out;
 * 0 when found, -1 when the option is listed without one, -2 when it is not listed. */
static int help_default(const char *help, const char *name, char *out, size_t n) {
    char head[96];
    snprintf(head, sizeof(head), "\n  --%s", name);
    const char *p = strstr(help, head);
    while (p && p[strlen(head)] != ' ' && p[strlen(head)] != '\n') /* --max-len vs --max-lens */
        p = strstr(p + 1, head);
    if (!p) return -2;
    p += strlen(head);
    const char *end = strstr(p, "\n  --"); /* the option's block ends at the next one */
    if (!end) end = p + strlen(p);
    const char *d = strstr(p, "(default ");
    if (!d || d > end) return -1;
    d += strlen("(default ");
    const char *close = strchr(d, ')');
    assert_non_null(close);
    snprintf(out, n, "%.*s", (int)(close - d), d);
    return 0;
}

/* The value o's variable holds, as its option would be written. */
static void row_value(const cli_opt_t *o, char *out, size_t n) {
    switch (o->kind) {
    case CLI_INT:
        snprintf(out, n, "%d", *(const int *)o->dst);
        return;
    case CLI_LONG:
        snprintf(out, n, "%ld", *(const long *)o->dst);
        return;
    case CLI_STR: {
        const char *s = *(const char *const *)o->dst;
        snprintf(out, n, "%s", s ? s : "(unset)");
        return;
    }
    default:
        snprintf(out, n, "(not a value)");
    }
}

/* Each listed row of opts: --help's default (in help) is its row's, and the parsed variable
 * holds it. Returns how many rows had a default. */
static int check_rows(const cli_opt_t *opts, const char *help) {
    int with_default = 0;
    for (const cli_opt_t *o = opts; o->name; o++) {
        char shown[128], parsed[128];
        int rc = help_default(help, o->name, shown, sizeof(shown));
        if (!o->help) {
            assert_int_equal(rc, -2);
            continue;
        }
        if (!o->def) {
            if (rc == 0)
                fail_msg("--%s: --help shows (default %s) but its row has none", o->name, shown);
            assert_int_equal(rc, -1);
            continue;
        }
        with_default++;
        if (rc != 0) fail_msg("--%s: its row's default %s is not in --help", o->name, o->def);
        row_value(o, parsed, sizeof(parsed));
        if (strcmp(shown, parsed) || strcmp(shown, o->def))
            fail_msg("--%s: --help says (default %s), its row %s, parsing left %s", o->name, shown,
                     o->def, parsed);
    }
    return with_default;
}

/* No RECLASS_* variable of the rows may stand in for a default. */
static void clear_env(const cli_opt_t *opts) {
    for (const cli_opt_t *o = opts; o->name; o++)
        if (o->env) unsetenv(o->env);
}

static char *usage_text(void (*usage)(FILE *)) {
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    assert_non_null(f);
    fputc('\n', f); /* every option's line then starts "\n  --" */
    usage(f);
    fclose(f);
    return buf;
}

static void test_run_defaults(void **state) {
    (void)state;
    worker_run_cfg_t cfg;
    cli_list_t kafka = {cfg.kafka_props, 0, WORKER_RUN_MAX_KAFKA_PROPS};
    cli_opt_t opts[WORKER_RUN_N_OPTS + 1];
    worker_run_cfg_opts(&cfg, &kafka, opts); /* rows only: their variables point into cfg */
    clear_env(opts);
    char *argv[] = {"run", "--db", "postgresql:///x", "--model", "/m", "--schemas", "/s", NULL};
    common_err_t err;
    common_status_t rc = worker_run_cfg_parse(&cfg, 7, argv, &err);
    if (rc != COMMON_OK) fail_msg("parse: %s", err.message);
    char *help = usage_text(worker_run_cfg_usage);
    assert_true(check_rows(opts, help) >= 20); /* run's defaults are many: all were checked */
    free(help);
}

/* run's --devices and --encoders: what they parse to, and what they refuse. */
static common_status_t parse_run(worker_run_cfg_t *cfg, const char *backend, const char *flag,
                                 const char *value) {
    char *argv[] = {"run", "--db",      "postgresql:///x", "--model",    "/m",          "--schemas",
                    "/s",  "--backend", (char *)backend,   (char *)flag, (char *)value, NULL};
    common_err_t err;
    return worker_run_cfg_parse(cfg, 11, argv, &err);
}

static void test_run_devices(void **state) {
    (void)state;
    worker_run_cfg_t cfg;
    assert_int_equal(parse_run(&cfg, "cuda", "--devices", "2,0,5"), COMMON_OK);
    assert_int_equal(cfg.n_devices, 3);
    assert_int_equal(cfg.device_ids[0], 2);
    assert_int_equal(cfg.device_ids[2], 5);
    assert_int_equal(cfg.device_all, 0);
    assert_int_equal(cfg.encoders, 1);
    assert_int_equal(parse_run(&cfg, "cuda", "--devices", "all"), COMMON_OK);
    assert_int_equal(cfg.device_all, 1);
    assert_int_equal(cfg.n_devices, 0);
    assert_int_equal(parse_run(&cfg, "cuda", "--encoders", "16"), COMMON_OK);
    assert_int_equal(cfg.encoders, 16);
    assert_int_equal(cfg.n_devices, 0); /* --device's one */
    assert_int_equal(parse_run(&cfg, "cpu", "--encoders", "3"), COMMON_OK);
    assert_int_equal(cfg.encoders, 3);
    static const char *const bad[][3] = {
        {"cpu", "--devices", "0"}, /* the cpu backend has one device */
        {"cuda", "--devices", "0,0"},
        {"cuda", "--devices", "0,"},
        {"cuda", "--devices", ""},
        {"cuda", "--devices", "one"},
        {"cuda", "--devices", "-1"},
        {"cuda", "--encoders", "0"},
        {"cuda", "--encoders", "17"},
        {"cuda", "--devices", "0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        if (parse_run(&cfg, bad[i][0], bad[i][1], bad[i][2]) != COMMON_USAGE)
            fail_msg("--backend %s %s '%s' was taken", bad[i][0], bad[i][1], bad[i][2]);
    }
}

/* The shared rows as classify, bench, submit and the database commands take them. */
static struct {
    cls_settings_t cls;
    const char *db, *brokers, *topic, *schemas, *plain, *auth, *ca, *model, *registry;
    int top_k, labels;
    const char *kv[4];
    cli_list_t kafka;
    cli_opt_t opts[32];
} shared;

static void shared_usage(FILE *f) {
    worker_cli_print_opts(f, shared.opts);
}

static void test_shared_defaults(void **state) {
    (void)state;
    memset(&shared, 0, sizeof(shared));
    shared.kafka = (cli_list_t){shared.kv, 0, 4};
    int n = worker_cli_settings_opts(&shared.cls, CLI_SET_ALL, 1, shared.opts);
    shared.opts[n++] = worker_cli_opt_db(&shared.db, NULL);
    shared.opts[n++] = worker_cli_opt_brokers(&shared.brokers);
    shared.opts[n++] = worker_cli_opt_topic(&shared.topic, "T", "topic");
    shared.opts[n++] = worker_cli_opt_schemas(&shared.schemas);
    shared.opts[n++] = worker_cli_opt_plain_schema(&shared.plain, "plain");
    shared.opts[n++] = worker_cli_opt_registry_auth(&shared.auth);
    shared.opts[n++] = worker_cli_opt_registry_ca(&shared.ca);
    shared.opts[n++] = worker_cli_opt_kafka(&shared.kafka);
    shared.opts[n++] = worker_cli_opt_model(&shared.model, 1, 0, NULL);
    shared.opts[n++] = worker_cli_opt_top_k(&shared.top_k, 0, 1, "labels");
    shared.opts[n++] = worker_cli_opt_registry(&shared.registry, "registry");
    shared.opts[n++] = worker_cli_opt_labels(&shared.labels);
    clear_env(shared.opts);
    char *argv[] = {"shared", NULL};
    common_err_t err;
    common_status_t rc =
        worker_cli_parse_err("shared", 1, argv, shared.opts, shared_usage, NULL, &err);
    if (rc != COMMON_OK) fail_msg("parse: %s", err.message);
    char *help = usage_text(shared_usage);
    assert_true(check_rows(shared.opts, help) >= 9);
    free(help);
}

/* The checker itself: a variable changed after parsing, or a default only in help, fails. */
static void test_checker_sees_a_disagreement(void **state) {
    (void)state;
    int v = 0;
    const char *s = NULL;
    cli_opt_t rows[] = {
        {"n", CLI_INT, &v, 0, 100, NULL, NULL, "a number", "7"},
        {"s", CLI_STR, &s, 0, 0, NULL, NULL, "a string", "x"},
        {NULL, CLI_FLAG, NULL, 0, 0, NULL, NULL, NULL, NULL},
    };
    v = 7, s = "x";
    assert_int_equal(check_rows(rows, "\n  --n N\n      a number (default 7)\n  --s VALUE\n"
                                      "      a string (default x)\n"),
                     2);
    char shown[16];
    assert_int_equal(help_default("\n  --n N\n      a number (default 8)\n", "n", shown, 16), 0);
    assert_string_equal(shown, "8"); /* check_rows would stop at 8 != 7 */
    assert_int_equal(
        help_default("\n  --n N\n      a number\n  --s X (default x)\n", "n", shown, 16),
        -1); /* the next option's default is not this one's */
    assert_int_equal(help_default("\n  --nn N\n      (default 1)\n", "n", shown, 16), -2);
}

static void no_usage(FILE *f) {
    (void)f;
}

/* --labels (bench and plan-memory, one row): a --geometry model takes as many labels as a
 * checkpoint may have (the model loader's GPU_MODEL_MAX_LABELS), and no more. */
static void test_labels_range(void **state) {
    (void)state;
    int labels = 0;
    cli_opt_t rows[] = {worker_cli_opt_labels(&labels),
                        {NULL, CLI_FLAG, NULL, 0, 0, NULL, NULL, NULL, NULL}};
    assert_int_equal(rows[0].hi, GPU_MODEL_MAX_LABELS);
    common_err_t err;
    char *most[] = {"cmd", "--labels", "16777216", NULL};
    assert_int_equal(worker_cli_parse_err("cmd", 3, most, rows, no_usage, NULL, &err), COMMON_OK);
    assert_int_equal(labels, 16777216);
    char *over[] = {"cmd", "--labels", "16777217", NULL};
    assert_int_equal(worker_cli_parse_err("cmd", 3, over, rows, no_usage, NULL, &err),
                     COMMON_USAGE);
}

/* A row whose default does not parse within its range is the table's bug: every parse says so
 * (COMMON_BUG naming the option), --help included, so that `reclass CMD --help` exiting 0
 * (tests/test_cli_defaults.sh, every command) means every row's default parses. */
static void test_bad_default_fails_help(void **state) {
    (void)state;
    int v = 0;
    const char *s = NULL;
    cli_opt_t rows[] = {
        {"n", CLI_INT, &v, 1, 100, NULL, NULL, "a number", "0"}, /* below its range */
        {"s", CLI_STR, &s, 0, 0, NULL, NULL, "a string", "x"},
        {NULL, CLI_FLAG, NULL, 0, 0, NULL, NULL, NULL, NULL},
    };
    common_err_t err;
    char *help[] = {"cmd", "--help", NULL};
    assert_int_equal(worker_cli_parse_err("cmd", 2, help, rows, no_usage, NULL, &err), COMMON_BUG);
    assert_non_null(strstr(err.message, "the default of --n"));
    char *plain[] = {"cmd", NULL};
    assert_int_equal(worker_cli_parse_err("cmd", 1, plain, rows, no_usage, NULL, &err), COMMON_BUG);
    rows[0].def = "100"; /* within range: --help is done, and the variables hold the defaults */
    assert_int_equal(worker_cli_parse_err("cmd", 2, help, rows, no_usage, NULL, &err), COMMON_DONE);
    assert_int_equal(v, 100);
    assert_string_equal(s, "x");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_run_defaults),
        cmocka_unit_test(test_run_devices),
        cmocka_unit_test(test_shared_defaults),
        cmocka_unit_test(test_checker_sees_a_disagreement),
        cmocka_unit_test(test_bad_default_fails_help),
        cmocka_unit_test(test_labels_range),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
