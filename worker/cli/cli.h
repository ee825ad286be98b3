/* Subcommands of the reclass executable (git style). Each returns the process exit code:
 * 0 ok, 1 runtime failure, 2 usage or input error (the message says what to fix). */
#ifndef RECLASS_WORKER_CLI_H
#define RECLASS_WORKER_CLI_H

#include <stddef.h>
#include <stdio.h>

typedef struct {
    const char *name;
    const char *summary;
    int (*run)(int argc, char **argv); /* argv[0] is the subcommand name */
} worker_cmd_t;

int worker_cmd_tokenize(int argc, char **argv);
int worker_cmd_classify(int argc, char **argv);
int worker_cmd_bench(int argc, char **argv);
int worker_cmd_plan_memory(int argc, char **argv);
int worker_cmd_run(int argc, char **argv);
int worker_cmd_submit(int argc, char **argv);
int worker_cmd_dev_broker(int argc, char **argv);
int worker_cmd_migrate(int argc, char **argv);
/* drift: exit 3 from "drift report" when some window reads drift */
int worker_cmd_drift(int argc, char **argv);
int worker_cmd_report(int argc, char **argv);
int worker_cmd_jobs(int argc, char **argv);

/* True when argv holds -h or --help. */
int worker_cli_wants_help(int argc, char **argv);

/* The option table every subcommand declares (worker/cli/cli.c): one row per long option
 * (name without "--") with what it takes, the variable it sets, its environment variable and
 * its --help text. The table drives parsing, the environment defaults and the option list of
 * --help. Kinds: FLAG sets an int to 1; STR a const char * (an empty value is refused); INT /
 * LONG an int / long within [lo, hi]; LIST appends to a cli_list_t (items: the caller's array
 * of cap entries), for options that may repeat; KV is a LIST whose values are KEY=VALUE.
 * env: a variable whose non-empty value is taken before argv (a flag beats its variable), or
 * NULL. arg: the value's name in --help (NULL: N for numbers, VALUE otherwise). help: the
 * --help text (continuation lines indented by 6), NULL to leave the option unlisted. The
 * table ends with a NULL name; rows may stop after hi (the rest is then NULL). */
typedef enum { CLI_FLAG, CLI_STR, CLI_INT, CLI_LONG, CLI_LIST, CLI_KV } cli_kind_t;
typedef struct {
    const char *name;
    cli_kind_t kind;
    void *dst;
    long lo, hi;
    const char *env;
    const char *arg;
    const char *help;
} cli_opt_t;
typedef struct {
    const char **items;
    int n, cap;
} cli_list_t;

/* A whole decimal integer in [lo, hi] (no sign of trouble left: overflow, trailing text, empty
 * string all refuse): 0 and *out set, or -1. Callers word their own message. */
int worker_cli_long(const char *s, long lo, long hi, long *out);

/* Parses the environment (rows with env) then argv[1..argc). --help / -h prints usage to
 * stdout: returns 0. A usage error prints "reclass CMD: ..." to stderr: returns 2. Otherwise
 * returns -1 (go on) with *first_arg the index of the first positional argument; with
 * first_arg NULL, positional arguments are an error. */
int worker_cli_parse(const char *cmd, int argc, char **argv, const cli_opt_t *opts,
                     void (*usage)(FILE *), int *first_arg);

/* worker_cli_parse with the usage error's message (without "reclass CMD: ") left in err
 * instead of printed. */
int worker_cli_parse_err(const char *cmd, int argc, char **argv, const cli_opt_t *opts,
                         void (*usage)(FILE *), int *first_arg, char *err, size_t errlen);

/* The option list of --help: a row per listed option, its variable beside it, its help
 * below. */
void worker_cli_print_opts(FILE *f, const cli_opt_t *opts);

#endif
