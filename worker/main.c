#include <stdio.h>
#include <string.h>

#include "worker/cli.h"

#ifndef RECLASS_VERSION
#define RECLASS_VERSION "0.1.0"
#endif

static const worker_cmd_t cmds[] = {
    {"run", "drain bulk re-classification jobs from Kafka into PostgreSQL", worker_cmd_run},
    {"classify", "classify texts from stdin with a model (JSON lines out)", worker_cmd_classify},
    {"tokenize", "tokenize texts from stdin (BERT WordPiece, as Hugging Face)",
     worker_cmd_tokenize},
    {"submit", "send a CSV/JSONL file of tickets to Kafka as a bulk job", worker_cmd_submit},
    {"migrate", "apply pending SQL migrations to PostgreSQL", worker_cmd_migrate},
    {"dev-broker", "run an embedded Kafka (mock cluster) on loopback", worker_cmd_dev_broker},
    {"bench", "measure encoder throughput on a workload", worker_cmd_bench},
    {"plan-memory", "print the device memory plan without touching a GPU", worker_cmd_plan_memory},
};
#define N_CMDS (int)(sizeof(cmds) / sizeof(cmds[0]))

static void usage(FILE *f) {
    fprintf(f,
            "reclass %s: bulk re-classification of support tickets\n\n"
            "usage: reclass <command> [options]\n\ncommands:\n",
            RECLASS_VERSION);
    for (int i = 0; i < N_CMDS; i++)
        fprintf(f, "  %-12s %s\n", cmds[i].name, cmds[i].summary);
    fprintf(f, "  %-12s %s\n", "help", "list commands (reclass help CMD = reclass CMD --help)");
    fprintf(f, "  %-12s %s\n", "version", "print the version");
    fprintf(f, "\nrun 'reclass <command> --help' for a command's options.\n");
}

int worker_cli_wants_help(int argc, char **argv) {
    for (int i = 1; i < argc; i++)
        if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) return 1;
    return 0;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    const char *name = argv[1];
    if (strcmp(name, "help") == 0 || strcmp(name, "--help") == 0 || strcmp(name, "-h") == 0) {
        if (argc >= 3) {
            for (int i = 0; i < N_CMDS; i++)
                if (strcmp(argv[2], cmds[i].name) == 0) {
                    char *hargv[] = {argv[2], "--help", NULL};
                    return cmds[i].run(2, hargv);
                }
            fprintf(stderr, "reclass: unknown command '%s'\n", argv[2]);
            return 2;
        }
        usage(stdout);
        return 0;
    }
    if (strcmp(name, "version") == 0 || strcmp(name, "--version") == 0) {
        printf("reclass %s\n", RECLASS_VERSION);
        return 0;
    }
    for (int i = 0; i < N_CMDS; i++)
        if (strcmp(name, cmds[i].name) == 0) return cmds[i].run(argc - 1, argv + 1);
    fprintf(stderr, "reclass: unknown command '%s' (see 'reclass help')\n", name);
    return 2;
}
