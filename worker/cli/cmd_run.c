/* reclass run: the production worker (see worker/pipeline/pipeline.h). */
#include <stdio.h>

#include "common/err.h"
#include "worker/cli/cli.h"
#include "worker/cli/config.h"
#include "worker/pipeline/pipeline.h"

common_status_t worker_cmd_run(int argc, char **argv) {
    worker_run_cfg_t cfg;
    common_err_t e;
    common_status_t rc = worker_run_cfg_parse(&cfg, argc, argv, &e);
    if (rc == COMMON_DONE) return rc; /* --help */
    if (rc) {
        common_err_print(stderr, &e);
        return rc;
    }
    if ((rc = worker_cli_require_kafka())) return rc;
    if ((rc = worker_pipeline_run(&cfg, &e)) && e.message[0]) common_err_print(stderr, &e);
    return rc;
}
