/* reclass migrate: applies pending SQL migrations (sink/migrate.h does the work). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <libpq-fe.h>

#include "sink/migrate.h"
#include "sink/sink.h"
#include "worker/cli/cli.h"

static void migrate_usage(FILE *f) {
    fprintf(f, "usage: reclass migrate [--db URL] [--migrations DIR] [--dry-run]\n\n"
               "Applies pending NNN_name.sql migrations in order, each in its own transaction,\n"
               "under an advisory lock (safe to run from several workers at once); recorded in\n"
               "schema_migrations. Running it again applies nothing.\n\n"
               "  --db URL          PostgreSQL URL or conninfo (default: $RECLASS_DB)\n"
               "  --migrations DIR  directory of migrations (default: $RECLASS_MIGRATIONS, else\n"
               "                    <exe>/../migrations, <exe>/../share/reclass/migrations,\n"
               "                    the source tree's)\n"
               "  --dry-run         list pending migrations, apply nothing\n");
}

int worker_cmd_migrate(int argc, char **argv) {
    if (worker_cli_wants_help(argc, argv)) {
        migrate_usage(stdout);
        return 0;
    }
    const char *db = getenv("RECLASS_DB"), *dir = NULL;
    int dry_run = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char **dst = strcmp(a, "--db") == 0           ? &db
                           : strcmp(a, "--migrations") == 0 ? &dir
                                                            : NULL;
        if (dst) {
            if (i + 1 >= argc) {
                fprintf(stderr, "reclass migrate: %s needs a value\n", a);
                return 2;
            }
            *dst = argv[++i];
        } else if (strncmp(a, "--db=", 5) == 0) {
            db = a + 5;
        } else if (strncmp(a, "--migrations=", 13) == 0) {
            dir = a + 13;
        } else if (strcmp(a, "--dry-run") == 0) {
            dry_run = 1;
        } else {
            fprintf(stderr, "reclass migrate: unknown option '%s' (see reclass migrate --help)\n",
                    a);
            return 2;
        }
    }
    if (!db || !*db) {
        fprintf(stderr, "reclass migrate: no database: pass --db URL or set RECLASS_DB\n");
        return 2;
    }
    if (strchr(db, '=') || strstr(db, "://")) {
        char *perr = NULL;
        PQconninfoOption *o = PQconninfoParse(db, &perr);
        if (!o) {
            char *nl = perr ? strchr(perr, '\n') : NULL;
            if (nl) *nl = 0;
            fprintf(stderr, "reclass migrate: bad --db connection string: %s\n",
                    perr ? perr : "out of memory");
            PQfreemem(perr);
            return 2;
        }
        PQconninfoFree(o);
    }
    char dbuf[4096];
    if (!dir) {
        if (sink_migrations_dir_default(dbuf, sizeof dbuf) != 0) {
            fprintf(stderr,
                    "reclass migrate: no migrations directory found (tried %s): pass "
                    "--migrations DIR or set RECLASS_MIGRATIONS\n",
                    dbuf);
            return 2;
        }
        dir = dbuf;
    }
    struct stat st;
    if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode)) {
        fprintf(stderr, "reclass migrate: %s is not a directory: pass --migrations DIR\n", dir);
        return 2;
    }
    sink_migrate_opts_t opts = {.dry_run = dry_run, .log = stdout};
    int n = 0;
    char err[1024];
    int rc = sink_migrate_ex(db, dir, &opts, &n, err, sizeof err);
    fflush(stdout);
    if (rc != SINK_OK) {
        fprintf(stderr, "reclass migrate: %s\n", err);
        return 1;
    }
    if (dry_run || n == 0)
        printf("%d pending (%s)\n", n, dir);
    else
        printf("%d applied (%s)\n", n, dir);
    return 0;
}
