/* Subcommands of the reclass executable (git style). Each returns a common_status_t
 * (common/status.h), which worker/cli/main.c alone turns into the process exit code. */
#ifndef RECLASS_WORKER_CLI_H
#define RECLASS_WORKER_CLI_H

#include <stddef.h>
#include <stdio.h>

#include "common/err.h"
#include "common/status.h"
#include "worker/classify/settings.h"

typedef struct {
    const char *name;
    const char *summary;
    common_status_t (*run)(int argc, char **argv); /* argv[0] is the subcommand name */
} worker_cmd_t;

common_status_t worker_cmd_tokenize(int argc, char **argv);
common_status_t worker_cmd_classify(int argc, char **argv);
common_status_t worker_cmd_bench(int argc, char **argv);
common_status_t worker_cmd_plan_memory(int argc, char **argv);
common_status_t worker_cmd_run(int argc, char **argv);
common_status_t worker_cmd_submit(int argc, char **argv);
common_status_t worker_cmd_dev_broker(int argc, char **argv);
common_status_t worker_cmd_migrate(int argc, char **argv);
/* drift: COMMON_FOUND from "drift report" when some window reads drift */
common_status_t worker_cmd_drift(int argc, char **argv);
common_status_t worker_cmd_report(int argc, char **argv);
common_status_t worker_cmd_jobs(int argc, char **argv);

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
 * --help text (continuation lines indented by 6), NULL to leave the option unlisted. def: the
 * default as the option would be written (set before the environment and argv, and printed by
 * --help as "(default DEF)" after the help text: the one place a default is written), or NULL
 * when there is none or it is no single value (the help text then says what happens). The
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
    const char *def;
} cli_opt_t;
typedef struct {
    const char **items;
    int n, cap;
} cli_list_t;

/* A whole decimal integer in [lo, hi] (no sign of trouble left: overflow, trailing text, empty
 * string all refuse): 0 and *out set, or -1. Callers word their own message. */
int worker_cli_long(const char *s, long lo, long hi, long *out);

/* Sets the rows' defaults, then parses the environment (rows with env), then argv[1..argc).
 * A default that does not parse within its row is COMMON_BUG (printed), --help included.
 * --help / -h prints usage to stdout: returns COMMON_DONE. A usage error prints its message
 * to stderr (common_logf: after the command's prefix): returns COMMON_USAGE. cmd names the
 * command in "see reclass CMD --help". Otherwise returns COMMON_OK (go on) with *first_arg the
 * index of the first positional argument; with first_arg NULL, positional arguments are an
 * error. */
common_status_t worker_cli_parse(const char *cmd, int argc, char **argv, const cli_opt_t *opts,
                                 void (*usage)(FILE *), int *first_arg);

/* worker_cli_parse with the usage error left in e instead of printed (COMMON_USAGE; COMMON_BUG
 * for a table whose default does not parse). */
common_status_t worker_cli_parse_err(const char *cmd, int argc, char **argv, const cli_opt_t *opts,
                                     void (*usage)(FILE *), int *first_arg, common_err_t *e);

/* The rows of the shared classification settings (worker/cli/settings_opts.c), in this order;
 * rows: a mask of them. */
enum {
    CLI_SET_BACKEND = 1 << 0,
    CLI_SET_PRECISION = 1 << 1,
    CLI_SET_TOKEN_BUDGET = 1 << 2,
    CLI_SET_MAX_LEN = 1 << 3,
    CLI_SET_THREADS = 1 << 4,
    CLI_SET_DEVICE = 1 << 5,
    CLI_SET_MAX_PENDING = 1 << 6,
    CLI_SET_MAX_PENDING_TOKENS = 1 << 7,
    CLI_SET_ALL = (1 << 8) - 1,
};
/* Writes the rows of mask rows, set into s, to out (room for 8); env: with their RECLASS_*
 * variables (`run`), else none. Returns how many it wrote. */
int worker_cli_settings_opts(cls_settings_t *s, unsigned rows, int env, cli_opt_t *out);

/* The rows several commands share (worker/cli/settings_opts.c), dst their variable: one
 * wording, one environment variable and one default per option. help: the command's own
 * wording where it says more, NULL for the shared one. */
cli_opt_t worker_cli_opt_db(const char **dst, const char *help);
/* --top-k K (run, classify): labels listed per result, lo..64; env: with RECLASS_TOP_K. */
cli_opt_t worker_cli_opt_top_k(int *dst, long lo, int env, const char *help);
/* --labels N (bench, plan-memory): a --geometry model's classifier labels. */
cli_opt_t worker_cli_opt_labels(int *dst);
/* --schema-registry URL (run, submit). */
cli_opt_t worker_cli_opt_registry(const char **dst, const char *help);
cli_opt_t worker_cli_opt_brokers(const char **dst);
cli_opt_t worker_cli_opt_topic(const char **dst, const char *arg, const char *help);
cli_opt_t worker_cli_opt_schemas(const char **dst);
/* --schemas not given: the directory its row's help names, found next to the executable, into
 * buf (n bytes), *schemas pointing at it. COMMON_OK (also when *schemas was given), or
 * COMMON_USAGE with e saying what to give. */
common_status_t worker_cli_schemas_default(const char **schemas, char *buf, size_t n,
                                           common_err_t *e);
cli_opt_t worker_cli_opt_plain_schema(const char **dst, const char *help);
cli_opt_t worker_cli_opt_registry_auth(const char **dst);
cli_opt_t worker_cli_opt_registry_ca(const char **dst);
cli_opt_t worker_cli_opt_kafka(cli_list_t *dst);
/* --model DIR (run, classify, bench, plan-memory, tokenize); env: with RECLASS_MODEL (`run`);
 * help NULL: the families of the registry, then " (required)" when required; --geometry NAME,
 * listing the registry's geometries. */
cli_opt_t worker_cli_opt_model(const char **dst, int env, int required, const char *help);
cli_opt_t worker_cli_opt_geometry(const char **dst);

/* For the commands that talk to Kafka (run, submit, dev-broker): prints why (common_logf)
 * and answers COMMON_FATAL when the runtime librdkafka is too old, else COMMON_OK. */
common_status_t worker_cli_require_kafka(void);

/* The option list of --help: a row per listed option, its variable beside it, its help
 * below. */
void worker_cli_print_opts(FILE *f, const cli_opt_t *opts);

#endif
