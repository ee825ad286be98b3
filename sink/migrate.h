/* Schema migrations: NNN_name.sql files applied in number order, each in its own transaction,
 * under a session advisory lock so concurrent migrators (several workers starting at once)
 * apply each file exactly once; recorded with an md5 checksum in schema_migrations, and an
 * applied file that changed since is refused. */
#ifndef RECLASS_SINK_MIGRATE_H
#define RECLASS_SINK_MIGRATE_H

#include <stddef.h>

#include <stdio.h>

#include "common/err.h"
#include "common/status.h"

/* pg_advisory_lock key: "reclass" in ASCII. Fixed, so every migrator contends on it. */
#define SINK_MIGRATE_LOCK_KEY 0x007265636c617373LL

typedef struct {
    int dry_run; /* list what is pending, apply nothing */
    FILE *log;   /* one line per migration applied (or pending, with dry_run); NULL: quiet */
} sink_migrate_opts_t;

/* Returns COMMON_OK, COMMON_RETRY (server unreachable) or COMMON_FATAL (bad file, changed checksum,
 * failing SQL: e names the file). *applied: migrations run (pending ones with
 * dry_run). opts may be NULL. */
common_status_t sink_migrate_ex(const char *conninfo, const char *dir,
                                const sink_migrate_opts_t *opts, int *applied, common_err_t *e);

/* The default migrations directory: $RECLASS_MIGRATIONS, else <exe>/../migrations (build dir
 * inside the source tree), else <exe>/../share/reclass/migrations (installed layout, e.g.
 * /usr/bin + /usr/share), else /usr/share/reclass/migrations (common_data_dir). Returns 0
 * with out filled, -1 when none of them is a directory (out then lists what was tried). */
int sink_migrations_dir_default(char *out, size_t outlen);

#endif
