/* reclass migrate: applies pending SQL migrations (sink/migrate.h does the work). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <libpq-fe.h>

#include "common/err.h"
#include "common/redact.h"
#include "sink/migrate.h"
#include "sink/sink.h"
#include "worker/cli/cli.h"

#define MIGRATE_OPTS(db, dir, dry_run)                                                             \
    {                                                                                              \
        worker_cli_opt_db(db, NULL),                                                               \
            {"migrations",                                                                         \
             CLI_STR,                                                                              \
             dir,                                                                                  \
             0,                                                                                    \
             0,                                                                                    \
             NULL,                                                                                 \
             "DIR",                                                                                \
             "directory of migrations (default: $RECLASS_MIGRATIONS, else\n"                       \
             "      <exe>/../migrations, <exe>/../share/reclass/migrations, the source tree's)",   \
             NULL},                                                                                \
            {"dry-run", CLI_FLAG, dry_run, 0,                                                      \
             0,         NULL,     NULL,    "list pending migrations, apply nothing",               \
             NULL},                                                                                \
        {                                                                                          \
            NULL, CLI_FLAG, NULL, 0, 0, NULL, NULL, NULL, NULL                                     \
        }                                                                                          \
    }

static void migrate_usage(FILE *f) {
    fprintf(f, "usage: reclass migrate [--db URL] [--migrations DIR] [--dry-run]\n\n"
               "Applies pending NNN_name.sql migrations in order, each in its own transaction,\n"
               "under an advisory lock (safe to run from several workers at once); recorded in\n"
               "schema_migrations. Running it again applies nothing.\n\n");
    const char *db, *dir;
    int dry_run;
    const cli_opt_t opts[] = MIGRATE_OPTS(&db, &dir, &dry_run);
    worker_cli_print_opts(f, opts);
}

common_status_t worker_cmd_migrate(int argc, char **argv) {
    const char *db = NULL, *dir = NULL;
    int dry_run = 0;
    const cli_opt_t cli[] = MIGRATE_OPTS(&db, &dir, &dry_run);
    int prc = worker_cli_parse("migrate", argc, argv, cli, migrate_usage, NULL);
    if (prc != COMMON_OK) return prc;
    if (!db || !*db) {
        common_logf(stderr, "no database: pass --db URL or set RECLASS_DB\n");
        return COMMON_USAGE;
    }
    if (strchr(db, '=') || strstr(db, "://")) {
        char *perr = NULL;
        PQconninfoOption *o = PQconninfoParse(db, &perr);
        if (!o) {
            char *nl = perr ? strchr(perr, '\n') : NULL;
            if (nl) *nl = 0;
            char msg[512];
            common_logf(stderr, "bad --db connection string: %s\n",
                        common_redact(perr ? perr : "out of memory", msg, sizeof(msg)));
            PQfreemem(perr);
            return COMMON_USAGE;
        }
        PQconninfoFree(o);
    }
    char dbuf[4096];
    if (!dir) {
        if (sink_migrations_dir_default(dbuf, sizeof dbuf) != 0) {
            common_logf(stderr,
                        "no migrations directory found (tried %s): pass "
                        "--migrations DIR or set RECLASS_MIGRATIONS\n",
                        dbuf);
            return COMMON_USAGE;
        }
        dir = dbuf;
    }
    struct stat st;
    if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode)) {
        common_logf(stderr, "%s is not a directory: pass --migrations DIR\n", dir);
        return COMMON_USAGE;
    }
    sink_migrate_opts_t opts = {.dry_run = dry_run, .log = stdout};
    int n = 0;
    common_err_t e;
    common_status_t rc = sink_migrate_ex(db, dir, &opts, &n, &e);
    fflush(stdout);
    if (rc != COMMON_OK) {
        common_err_print(stderr, &e);
        return rc;
    }
    if (dry_run || n == 0)
        printf("%d pending (%s)\n", n, dir);
    else
        printf("%d applied (%s)\n", n, dir);
    return 0;
}
