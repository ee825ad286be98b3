#include "sink/migrate.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <libpq-fe.h>

#include "common/file.h"
#include "common/paths.h"
#include "sink/pgutil.h"
#include "sink/sink.h"

typedef struct {
    long version;
    char *name; /* file name, e.g. 001_init.sql */
    char *path;
} mig_file_t;

typedef struct {
    mig_file_t *files; /* (n) sorted by version */
    int n;
} mig_list_t;

static void mig_list_free(mig_list_t *l) {
    for (int i = 0; i < l->n; i++) {
        free(l->files[i].name);
        free(l->files[i].path);
    }
    free(l->files);
    l->files = NULL;
    l->n = 0;
}

static int mig_cmp(const void *a, const void *b) {
    long va = ((const mig_file_t *)a)->version, vb = ((const mig_file_t *)b)->version;
    return (va > vb) - (va < vb);
}

/* NNN_name.sql: digits, an underscore, at least one more character, ".sql". */
static int mig_name_version(const char *name, long *version) {
    size_t n = strlen(name), d = 0;
    while (isdigit((unsigned char)name[d]))
        d++;
    if (d == 0 || d > 9 || name[d] != '_' || n < d + 6 || strcmp(name + n - 4, ".sql") != 0)
        return -1;
    *version = strtol(name, NULL, 10);
    return 0;
}

static common_status_t mig_scan(const char *dir, mig_list_t *l, common_err_t *e) {
    memset(l, 0, sizeof(*l));
    DIR *d = opendir(dir);
    if (!d)
        return common_err_set(e, COMMON_FATAL, "cannot open migrations directory %s: %s", dir,
                              strerror(errno));
    int cap = 0, rc = COMMON_OK;
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        long v;
        if (de->d_name[0] == '.' || mig_name_version(de->d_name, &v) != 0) continue;
        if (l->n == cap) {
            cap = cap ? cap * 2 : 16;
            mig_file_t *f = realloc(l->files, (size_t)cap * sizeof(*f));
            if (!f) {
                rc = COMMON_FATAL;
                break;
            }
            l->files = f;
        }
        mig_file_t *f = &l->files[l->n];
        f->version = v;
        f->name = strdup(de->d_name);
        f->path = malloc(strlen(dir) + strlen(de->d_name) + 2);
        if (!f->name || !f->path) {
            free(f->name);
            free(f->path);
            rc = COMMON_FATAL;
            break;
        }
        sprintf(f->path, "%s/%s", dir, de->d_name);
        l->n++;
    }
    closedir(d);
    if (rc != COMMON_OK) {
        mig_list_free(l);
        return common_err_set(e, rc, "out of memory listing %s", dir);
    }
    if (l->n == 0)
        return common_err_set(e, COMMON_FATAL, "no migrations (NNN_name.sql) in %s", dir);
    qsort(l->files, (size_t)l->n, sizeof(*l->files), mig_cmp);
    for (int i = 1; i < l->n; i++)
        if (l->files[i].version == l->files[i - 1].version) {
            common_err_set(e, COMMON_FATAL, "two migrations share number %ld: %s and %s",
                           l->files[i].version, l->files[i - 1].name, l->files[i].name);
            common_err_hint(e, "renumber one");
            mig_list_free(l);
            return COMMON_FATAL;
        }
    return COMMON_OK;
}

/* Whole file as a NUL-terminated string; NULL with e set on failure or embedded NUL. */
static char *mig_read(const char *path, common_err_t *e) {
    size_t len;
    char *buf = common_file_read(path, 0, &len, e);
    if (!buf) {
        e->code = COMMON_FATAL; /* a migration file the release ships */
    } else if (strlen(buf) != len) {
        common_err_set(e, COMMON_FATAL, "%s contains a NUL byte: not an SQL text file", path);
        free(buf);
        return NULL;
    }
    return buf;
}

/* md5 of the file's bytes, computed by the server: one definition of the checksum, the one
 * an operator can reproduce with SELECT md5(pg_read_file(...)). */
static common_status_t mig_checksum(PGconn *conn, const char *sql, const char *name, char *out,
                                    size_t outlen, common_err_t *e) {
    const char *params[1] = {sql};
    PGresult *res = PQexecParams(conn, "SELECT md5($1::text)", 1, NULL, params, NULL, NULL, 0);
    if (!res || PQresultStatus(res) != PGRES_TUPLES_OK || PQntuples(res) != 1) {
        char step[300];
        snprintf(step, sizeof step, "checksum of %s", name);
        return sink_pg_fail(conn, res, step, e);
    }
    snprintf(out, outlen, "%s", PQgetvalue(res, 0, 0));
    PQclear(res);
    return COMMON_OK;
}

static common_status_t mig_apply(PGconn *conn, const mig_file_t *f, const char *sql,
                                 const char *sum, common_err_t *e) {
    char step[300];
    snprintf(step, sizeof step, "migration %s", f->name);
    common_status_t rc = sink_pg_exec(conn, "BEGIN", PGRES_COMMAND_OK, step, e);
    if (rc != COMMON_OK) return rc;
    /* One simple-protocol call runs every statement of the file inside this transaction;
     * libpq stops at the first failing one and returns its error. */
    PGresult *res = PQexec(conn, sql);
    ExecStatusType st = res ? PQresultStatus(res) : PGRES_FATAL_ERROR;
    if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK && st != PGRES_EMPTY_QUERY) {
        rc = sink_pg_fail(conn, res, step, e);
        sink_pg_rollback(conn);
        return rc;
    }
    PQclear(res);
    if (PQtransactionStatus(conn) != PQTRANS_INTRANS) {
        common_err_set(e, COMMON_FATAL, "%s: the file ends the transaction itself", step);
        common_err_hint(e, "remove BEGIN/COMMIT from it");
        sink_pg_rollback(conn);
        return COMMON_FATAL;
    }
    char version[24];
    snprintf(version, sizeof version, "%ld", f->version);
    const char *params[3] = {version, f->name, sum};
    res = PQexecParams(conn,
                       "INSERT INTO schema_migrations (version, name, checksum)"
                       " VALUES ($1::integer, $2, $3)",
                       3, NULL, params, NULL, NULL, 0);
    if (!res || PQresultStatus(res) != PGRES_COMMAND_OK) {
        rc = sink_pg_fail(conn, res, step, e);
        sink_pg_rollback(conn);
        return rc;
    }
    PQclear(res);
    rc = sink_pg_exec(conn, "COMMIT", PGRES_COMMAND_OK, step, e);
    if (rc != COMMON_OK) sink_pg_rollback(conn);
    return rc;
}

/* Index of version in the applied set (res rows: version, name, checksum), or -1. */
static int mig_find_applied(const PGresult *applied, long version) {
    for (int i = 0; i < PQntuples(applied); i++)
        if (strtol(PQgetvalue(applied, i, 0), NULL, 10) == version) return i;
    return -1;
}

/* Runs under the advisory lock: reads what is applied, checks checksums, applies the rest. */
static common_status_t mig_run_locked(PGconn *conn, const mig_list_t *l,
                                      const sink_migrate_opts_t *o, int *applied, common_err_t *e) {
    common_status_t rc;
    if (!o->dry_run) {
        rc = sink_pg_exec(conn,
                          "CREATE TABLE IF NOT EXISTS schema_migrations ("
                          " version integer PRIMARY KEY, name text NOT NULL,"
                          " applied_at timestamptz NOT NULL DEFAULT now(),"
                          " checksum text NOT NULL)",
                          PGRES_COMMAND_OK, "create schema_migrations", e);
        if (rc != COMMON_OK) return rc;
    }
    /* A dry run must not create anything: an absent table reads as "nothing applied". */
    PGresult *done = PQexec(conn, "SELECT version, name, checksum FROM schema_migrations");
    const char *st = done ? PQresultErrorField(done, PG_DIAG_SQLSTATE) : NULL;
    if (o->dry_run && st && strcmp(st, "42P01") == 0) { /* undefined_table */
        PQclear(done);
        done = PQexec(conn, "SELECT 0, '', '' WHERE false");
    }
    if (!done || PQresultStatus(done) != PGRES_TUPLES_OK) {
        rc = sink_pg_fail(conn, done, "read schema_migrations", e);
        return rc;
    }
    rc = COMMON_OK;
    for (int i = 0; i < l->n && rc == COMMON_OK; i++) {
        const mig_file_t *f = &l->files[i];
        char *sql = mig_read(f->path, e);
        if (!sql) {
            rc = COMMON_FATAL;
            break;
        }
        char sum[64];
        rc = mig_checksum(conn, sql, f->name, sum, sizeof sum, e);
        int at = rc == COMMON_OK ? mig_find_applied(done, f->version) : -1;
        if (rc != COMMON_OK) {
            /* reported by mig_checksum */
        } else if (at >= 0) {
            if (strcmp(PQgetvalue(done, at, 2), sum) != 0) {
                rc =
                    common_err_set(e, COMMON_FATAL, "%s was changed after it was applied", f->path);
                common_err_detail(e, "checksum %s, applied as %s %s", sum, PQgetvalue(done, at, 1),
                                  PQgetvalue(done, at, 2));
                common_err_hint(e, "restore it and put the change in a new migration");
            }
        } else if (o->dry_run) {
            if (o->log) fprintf(o->log, "pending %s\n", f->name);
            (*applied)++;
        } else {
            rc = mig_apply(conn, f, sql, sum, e);
            if (rc == COMMON_OK) {
                if (o->log) fprintf(o->log, "applied %s\n", f->name);
                (*applied)++;
            }
        }
        free(sql);
    }
    PQclear(done);
    return rc;
}

common_status_t sink_migrate_ex(const char *conninfo, const char *dir,
                                const sink_migrate_opts_t *opts, int *applied, common_err_t *e) {
    static const sink_migrate_opts_t quiet = {0, NULL};
    const sink_migrate_opts_t *o = opts ? opts : &quiet;
    int dummy;
    if (!applied) applied = &dummy;
    *applied = 0;
    mig_list_t l;
    common_status_t rc = mig_scan(dir, &l, e);
    if (rc != COMMON_OK) return rc;
    PGconn *conn;
    rc = sink_pg_connect(conninfo, &conn, e);
    if (rc != COMMON_OK) {
        mig_list_free(&l);
        return rc;
    }
    /* Session-level lock: held across the per-file transactions, released on unlock or when
     * the connection ends, whichever comes first (a crashed migrator never leaves it held). */
    char key[32];
    snprintf(key, sizeof key, "%lld", (long long)SINK_MIGRATE_LOCK_KEY);
    const char *params[1] = {key};
    PGresult *res =
        PQexecParams(conn, "SELECT pg_advisory_lock($1::bigint)", 1, NULL, params, NULL, NULL, 0);
    if (!res || PQresultStatus(res) != PGRES_TUPLES_OK)
        rc = sink_pg_fail(conn, res, "take the migration lock", e);
    else
        PQclear(res);
    if (rc == COMMON_OK) {
        rc = mig_run_locked(conn, &l, o, applied, e);
        PQclear(PQexecParams(conn, "SELECT pg_advisory_unlock($1::bigint)", 1, NULL, params, NULL,
                             NULL, 0));
    }
    PQfinish(conn);
    mig_list_free(&l);
    return rc;
}

int sink_migrations_dir_default(char *out, size_t outlen) {
    const char *env = getenv("RECLASS_MIGRATIONS");
    if (env && *env) {
        snprintf(out, outlen, "%s", env);
        return common_is_dir(out, outlen) ? 0 : -1;
    }
    return common_data_dir("migrations", "migrations", out, outlen);
}
