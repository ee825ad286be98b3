/* reclass report: one finished job as a self-contained HTML page (summary, label mix,
 * confidence histogram, least-confident tickets, drift scores, throughput, device memory),
 * read from PostgreSQL (ticket_results, jobs, drift_scores() of migration 004, gpu_memory). */
#ifndef RECLASS_WORKER_REPORT_REPORT_H
#define RECLASS_WORKER_REPORT_REPORT_H

#include <stddef.h>
#include <stdio.h>

#include <libpq-fe.h>

/* Writes job's report to out. Returns 0; 2 when the job has no row in jobs nor any ticket
 * (the message in err names it); 1 when a query failed (err: the server's message). */
int report_job_write(PGconn *conn, const char *job, FILE *out, char *err, size_t errlen);

#endif
