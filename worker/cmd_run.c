/* Placeholder until this command lands; replaced by its real implementation. */
#include <stdio.h>

#include "worker/cli.h"

int worker_cmd_run(int argc, char **argv) {
    fprintf(stderr, "reclass: '%s' is not built yet\n", argv[0]);
    return 1;
}
