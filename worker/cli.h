/* Subcommands of the reclass executable (git style). Each returns the process exit code:
 * 0 ok, 1 runtime failure, 2 usage or input error (the message says what to fix). */
#ifndef RECLASS_WORKER_CLI_H
#define RECLASS_WORKER_CLI_H

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

/* True when argv holds -h or --help. */
int worker_cli_wants_help(int argc, char **argv);

#endif
