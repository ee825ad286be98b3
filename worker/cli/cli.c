/* The option parser the subcommands share: a table of long options, each with the variable it
 * sets, on getopt_long; every usage error says what to fix and makes the command exit 2. */
#include "worker/cli/cli.h"

#include <errno.h>
#include <getopt.h>
#include <stdlib.h>
#include <string.h>

#define CLI_MAX_OPTS 48

int worker_cli_long(const char *s, long lo, long hi, long *out) {
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > hi) return -1;
    *out = v;
    return 0;
}

static int cli_number(const char *cmd, const cli_opt_t *o, const char *val) {
    long v;
    if (worker_cli_long(val, o->lo, o->hi, &v) != 0) {
        fprintf(stderr, "reclass %s: --%s needs an integer in %ld..%ld (got '%s')\n", cmd, o->name,
                o->lo, o->hi, val);
        return -1;
    }
    if (o->kind == CLI_INT)
        *(int *)o->dst = (int)v;
    else
        *(long *)o->dst = v;
    return 0;
}

int worker_cli_parse(const char *cmd, int argc, char **argv, const cli_opt_t *opts,
                     void (*usage)(FILE *), int *first_arg) {
    struct option lo[CLI_MAX_OPTS + 2];
    int n = 0;
    for (; opts[n].name; n++) {
        if (n == CLI_MAX_OPTS) {
            fprintf(stderr, "reclass %s: too many options for the parser\n", cmd);
            return 2;
        }
        lo[n] = (struct option){opts[n].name,
                                opts[n].kind == CLI_FLAG ? no_argument : required_argument, NULL,
                                256 + n};
    }
    lo[n] = (struct option){"help", no_argument, NULL, 'h'};
    lo[n + 1] = (struct option){NULL, 0, NULL, 0};
    optind = 0; /* glibc: a full re-initialisation (argv[0] is the subcommand) */
    opterr = 0;
    int ch;
    while ((ch = getopt_long(argc, argv, ":h", lo, NULL)) != -1) {
        if (ch == 'h') {
            usage(stdout);
            return 0;
        }
        if (ch == ':') {
            fprintf(stderr, "reclass %s: %s needs a value (see --help)\n", cmd, argv[optind - 1]);
            return 2;
        }
        if (ch < 256 || ch >= 256 + n) {
            fprintf(stderr, "reclass %s: unknown option '%s' (see --help)\n", cmd,
                    argv[optind - 1]);
            return 2;
        }
        const cli_opt_t *o = &opts[ch - 256];
        switch (o->kind) {
        case CLI_FLAG:
            *(int *)o->dst = 1;
            break;
        case CLI_STR:
            *(const char **)o->dst = optarg;
            break;
        case CLI_INT:
        case CLI_LONG:
            if (cli_number(cmd, o, optarg) != 0) return 2;
            break;
        case CLI_LIST: {
            cli_list_t *l = (cli_list_t *)o->dst;
            if (l->n == l->cap || !*optarg) {
                fprintf(stderr, "reclass %s: --%s wants a non-empty value, at most %d times\n", cmd,
                        o->name, l->cap);
                return 2;
            }
            l->items[l->n++] = optarg;
            break;
        }
        }
    }
    if (first_arg) {
        *first_arg = optind;
    } else if (optind < argc) {
        fprintf(stderr, "reclass %s: unexpected argument '%s' (see --help)\n", cmd, argv[optind]);
        return 2;
    }
    return -1;
}
