/* reclass report: a finished job's report as one self-contained HTML file (worker/report/
 * writes it; this file parses options and picks the output). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <libpq-fe.h>

#include "common/err.h"
#include "worker/cli/cli.h"
#include "worker/cli/db.h"
#include "worker/report/report.h"

typedef struct {
    const char *db, *job, *out;
} report_args_t;

/* The options, set into a. */
#define REPORT_N_OPTS 3
static void report_opts(report_args_t *a, cli_opt_t out[REPORT_N_OPTS + 1]) {
    const cli_opt_t t[] = {
        worker_cli_opt_db(&a->db, NULL),
        {"job", CLI_STR, &a->job, 0, 0, NULL, "J", "the job (required)", NULL},
        {"out", CLI_STR, &a->out, 0, 0, NULL, "FILE",
         "write the HTML there (default: standard output)", NULL},
        {NULL, CLI_FLAG, NULL, 0, 0, NULL, NULL, NULL, NULL},
    };
    _Static_assert(sizeof(t) / sizeof(t[0]) == REPORT_N_OPTS + 1, "REPORT_N_OPTS");
    memcpy(out, t, sizeof(t));
}

static void report_usage(FILE *f) {
    fprintf(f, "usage: reclass report --db URL --job J [--out report.html]\n\n"
               "Writes job J's report as one HTML file that needs nothing else (inline SVG, no\n"
               "script, no network): summary, drift scores of the job and of its tenant's\n"
               "windows against the pinned baseline, label distribution, confidence histogram,\n"
               "least-confident tickets, throughput and device memory over time.\n\n");
    report_args_t a;
    cli_opt_t opts[REPORT_N_OPTS + 1];
    report_opts(&a, opts);
    worker_cli_print_opts(f, opts);
}

common_status_t worker_cmd_report(int argc, char **argv) {
    report_args_t a = {0};
    cli_opt_t opts[REPORT_N_OPTS + 1];
    report_opts(&a, opts);
    int prc = worker_cli_parse("report", argc, argv, opts, report_usage, NULL);
    if (prc != COMMON_OK) return prc;
    if (!a.job) {
        common_logf(stderr, "--job J is required (see --help)\n");
        return COMMON_USAGE;
    }
    PGconn *conn;
    int rc = worker_cli_db_connect(a.db, &conn);
    if (rc) return rc;
    /* written to a temporary file first: a failed report never leaves half a page at --out */
    char *tmp = NULL;
    FILE *f = stdout;
    if (a.out) {
        size_t n = strlen(a.out) + 8;
        tmp = malloc(n);
        if (tmp) snprintf(tmp, n, "%s.tmp", a.out);
        f = tmp ? fopen(tmp, "w") : NULL;
        if (!f) {
            common_logf(stderr, "cannot write %s.tmp: check --out\n", a.out);
            free(tmp);
            PQfinish(conn);
            return COMMON_USAGE;
        }
    }
    common_err_t e;
    rc = report_job_write(conn, a.job, f, &e);
    PQfinish(conn);
    int wrc = a.out ? fclose(f) : fflush(f);
    if (rc == 0 && wrc != 0) rc = common_err_set(&e, COMMON_FATAL, "writing the report failed");
    if (rc == 0 && a.out && rename(tmp, a.out) != 0)
        rc = common_err_set(&e, COMMON_FATAL, "cannot rename %s to %s", tmp, a.out);
    if (rc != 0) {
        if (tmp) remove(tmp);
        common_err_print(stderr, &e);
    } else if (a.out)
        common_logf(stderr, "wrote %s\n", a.out);
    free(tmp);
    return rc;
}
