/* The option parser every subcommand shares: a table of long options (worker/cli/cli.h), each
 * with the variable it sets and its environment variable, on getopt_long; every usage error
 * says what to fix and makes the command exit 2. */
#include "worker/cli/cli.h"

#include <errno.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "common/err.h"
#include "consumers/kafka_version.h"

#define CLI_MAX_OPTS 48

int worker_cli_long(const char *s, long lo, long hi, long *out) {
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > hi) return -1;
    *out = v;
    return 0;
}

/* Sets o's variable from val; from names where val came from (--flag or the variable). 0, or
 * COMMON_USAGE with e. */
static common_status_t cli_set(const cli_opt_t *o, const char *val, const char *from,
                               common_err_t *e) {
    long v;
    switch (o->kind) {
    case CLI_FLAG:
        *(int *)o->dst = 1;
        return 0;
    case CLI_STR:
        if (!*val) return common_err_set(e, COMMON_USAGE, "%s is empty: give it a value", from);
        *(const char **)o->dst = val;
        return 0;
    case CLI_INT:
    case CLI_LONG:
        if (worker_cli_long(val, o->lo, o->hi, &v) != 0)
            return common_err_set(e, COMMON_USAGE, "%s: '%s' is not an integer in %ld..%ld", from,
                                  val, o->lo, o->hi);
        if (o->kind == CLI_INT)
            *(int *)o->dst = (int)v;
        else
            *(long *)o->dst = v;
        return 0;
    case CLI_LIST:
    case CLI_KV: {
        cli_list_t *l = (cli_list_t *)o->dst;
        if (o->kind == CLI_KV && !strchr(val, '='))
            return common_err_set(e, COMMON_USAGE, "%s needs KEY=VALUE", from);
        if (!*val) return common_err_set(e, COMMON_USAGE, "%s is empty: give it a value", from);
        if (l->n == l->cap)
            return common_err_set(e, COMMON_USAGE, "at most %d %s values", l->cap, from);
        l->items[l->n++] = val;
        return 0;
    }
    }
    return 0;
}

/* The rows' defaults, each set as if given: one that does not parse (out of its row's range,
 * an empty string, ...) is a bug of the table, COMMON_BUG with e naming the option. */
static common_status_t cli_defaults(const cli_opt_t *opts, common_err_t *e) {
    common_err_t why;
    for (const cli_opt_t *o = opts; o->name; o++)
        if (o->def && cli_set(o, o->def, o->name, &why))
            return common_err_set(e, COMMON_BUG, "the default of --%s: %s", o->name, why.message);
    return COMMON_OK;
}

/* The environment's values: non-empty variables of the rows that name one. */
static common_status_t cli_env(const cli_opt_t *opts, common_err_t *e) {
    for (const cli_opt_t *o = opts; o->name; o++) {
        const char *v = o->env ? getenv(o->env) : NULL;
        if (!v || !*v) continue;
        common_status_t rc = o->kind == CLI_FLAG ? COMMON_OK : cli_set(o, v, o->env, e);
        if (rc) return rc;
        if (o->kind == CLI_FLAG) *(int *)o->dst = strcmp(v, "0") != 0;
    }
    return 0;
}

common_status_t worker_cli_parse_err(const char *cmd, int argc, char **argv, const cli_opt_t *opts,
                                     void (*usage)(FILE *), int *first_arg, common_err_t *e) {
    struct option lo[CLI_MAX_OPTS + 2];
    int n = 0;
    for (; opts[n].name; n++) {
        if (n == CLI_MAX_OPTS)
            return common_err_set(e, COMMON_BUG, "too many options for the parser");
        lo[n] = (struct option){opts[n].name,
                                opts[n].kind == CLI_FLAG ? no_argument : required_argument, NULL,
                                256 + n};
    }
    lo[n] = (struct option){"help", no_argument, NULL, 'h'};
    lo[n + 1] = (struct option){NULL, 0, NULL, 0};
    /* the defaults first: --help prints them, so one that does not parse fails --help too */
    common_status_t rc = cli_defaults(opts, e);
    if (rc) return rc;
    for (int i = 1; i < argc; i++) /* --help wins over any usage error, the environment's too */
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            usage(stdout);
            return COMMON_DONE;
        }
    if ((rc = cli_env(opts, e))) return rc;
    optind = 0; /* glibc: a full re-initialisation (argv[0] is the subcommand) */
    opterr = 0;
    int ch;
    while ((ch = getopt_long(argc, argv, ":h", lo, NULL)) != -1) {
        if (ch == 'h') {
            usage(stdout);
            return COMMON_DONE;
        }
        if (ch == ':')
            return common_err_set(e, COMMON_USAGE, "%s needs a value (see --help)",
                                  argv[optind - 1]);
        if (ch < 256 || ch >= 256 + n)
            return common_err_set(e, COMMON_USAGE, "unknown option '%s' (see reclass %s --help)",
                                  argv[optind - 1], cmd);
        const cli_opt_t *o = &opts[ch - 256];
        char from[64];
        snprintf(from, sizeof(from), "--%s", o->name);
        if ((rc = cli_set(o, optarg, from, e))) return rc;
    }
    if (first_arg)
        *first_arg = optind;
    else if (optind < argc)
        return common_err_set(e, COMMON_USAGE, "unexpected argument '%s' (see --help)",
                              argv[optind]);
    return COMMON_OK;
}

common_status_t worker_cli_parse(const char *cmd, int argc, char **argv, const cli_opt_t *opts,
                                 void (*usage)(FILE *), int *first_arg) {
    common_err_t e;
    common_status_t rc = worker_cli_parse_err(cmd, argc, argv, opts, usage, first_arg, &e);
    if (rc != COMMON_OK && rc != COMMON_DONE) common_err_print(stderr, &e);
    return rc;
}

void worker_cli_print_opts(FILE *f, const cli_opt_t *opts) {
    for (const cli_opt_t *o = opts; o->name; o++) {
        if (!o->help) continue;
        const char *arg = o->arg                                      ? o->arg
                          : o->kind == CLI_FLAG                       ? NULL
                          : o->kind == CLI_INT || o->kind == CLI_LONG ? "N"
                                                                      : "VALUE";
        char head[64];
        snprintf(head, sizeof(head), "--%s%s%s", o->name, arg ? " " : "", arg ? arg : "");
        if (o->env)
            fprintf(f, "  %-22s $%s\n", head, o->env);
        else
            fprintf(f, "  %s\n", head);
        if (o->def)
            fprintf(f, "      %s (default %s)\n", o->help, o->def);
        else
            fprintf(f, "      %s\n", o->help);
    }
}

common_status_t worker_cli_require_kafka(void) {
    common_err_t e;
    common_status_t st = consumers_kafka_check_version(&e);
    if (st) common_err_print(stderr, &e);
    return st;
}
