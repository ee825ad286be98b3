/* Who owns a job (migrations/005_tenant.sql): the tenant whose ticket first stored it. */
#ifndef RECLASS_SINK_OWNER_H
#define RECLASS_SINK_OWNER_H

#include <stddef.h>

#include "common/err.h"
#include "common/status.h"

/* Whether tenant may send tickets for job_id, asked before anything is sent (`reclass submit
 * --db`): COMMON_OK for a job not stored yet, or the tenant's own; COMMON_USAGE with e when
 * another tenant owns it (e names neither that tenant nor its data) or the database cannot
 * answer for good (malformed conninfo, schema missing: e's hint says what to run); COMMON_RETRY
 * with e when it cannot be reached (e: sink_pg_err's fields).
 * Advice, not the guarantee: a job claimed between this check and the worker's write is still
 * refused there, row by row (the ownership constraint). */
common_status_t sink_job_owner_check(const char *conninfo, const char *job_id, const char *tenant,
                                     common_err_t *e);

#endif
