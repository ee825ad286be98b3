/* Parsing the settings of `reclass run` (worker_run_cfg_t, worker/pipeline/pipeline.h): every
 * flag has an environment variable (RECLASS_*); a flag beats its variable, the variable beats
 * the default. */
#ifndef RECLASS_WORKER_CONFIG_H
#define RECLASS_WORKER_CONFIG_H

#include <stddef.h>
#include <stdio.h>

#include "common/status.h"
#include "worker/cli/cli.h"
#include "worker/pipeline/pipeline.h" /* worker_run_cfg_t */

/* Fills cfg from the environment and argv (argv[0] is "run"). Returns COMMON_OK;
 * COMMON_USAGE with e saying what to fix; COMMON_DONE when --help was printed. The strings
 * point into argv or the environment. */
common_status_t worker_run_cfg_parse(worker_run_cfg_t *cfg, int argc, char **argv, common_err_t *e);

void worker_run_cfg_usage(FILE *f);

/* The option rows of `reclass run` that parse and --help both read (its own, then the shared
 * classification settings), their variables in c and kafka (items: c->kafka_props), ending
 * in a NULL name: tests/test_cli_settings.c checks each default --help prints against the
 * value parsing leaves. */
#define WORKER_RUN_N_OPTS 39
void worker_run_cfg_opts(worker_run_cfg_t *c, cli_list_t *kafka,
                         cli_opt_t out[WORKER_RUN_N_OPTS + 1]);

#endif
