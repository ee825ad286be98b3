/* reclass report: one finished job as a self-contained HTML page (summary, label mix,
 * confidence histogram, least-confident tickets, drift scores, throughput, device memory),
 * read from PostgreSQL (ticket_results, jobs, drift_scores() of migration 004, gpu_memory). */
#ifndef RECLASS_WORKER_REPORT_REPORT_H
#define RECLASS_WORKER_REPORT_REPORT_H

#include <stddef.h>
#include <stdio.h>

#include <libpq-fe.h>

#include "common/err.h"

/* Writes job's report to out. Returns COMMON_OK; COMMON_USAGE when the job has no row in jobs
 * nor any ticket (e names it); a failed query's code with e the server's answer (COMMON_RETRY
 * the database away, else COMMON_FATAL). */
common_status_t report_job_write(PGconn *conn, const char *job, FILE *out, common_err_t *e);

#endif
