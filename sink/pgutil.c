#include "sink/pgutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/redact.h"
#include "sink/sink.h"

static void pg_quiet(void *arg, const char *message) {
    (void)arg;
    (void)message;
}

/* e's message and detail with the secrets a conninfo quoted back by libpq may carry hidden */
static void pg_err_redact(common_err_t *e) {
    if (!e) return;
    common_redact(e->message, e->message, sizeof e->message);
    common_redact(e->detail, e->detail, sizeof e->detail);
}

common_status_t sink_pg_connect(const char *conninfo, PGconn **out, common_err_t *e) {
    *out = NULL;
    if (!conninfo) conninfo = "";
    /* A plain database name has neither '=' nor "://"; everything else must parse, and a
     * parse error is the user's to fix, not a reason to retry. */
    if (strchr(conninfo, '=') || strstr(conninfo, "://")) {
        char *perr = NULL;
        PQconninfoOption *opts = PQconninfoParse(conninfo, &perr);
        if (!opts) {
            char *nl = perr ? strchr(perr, '\n') : NULL;
            if (nl) *nl = 0;
            common_err_set(e, COMMON_USAGE, "invalid database connection string: %s",
                           perr ? perr : "out of memory");
            PQfreemem(perr);
            pg_err_redact(e); /* libpq quotes the string, password and all */
            return COMMON_USAGE;
        }
        PQconninfoFree(opts);
    }
    /* expand_dbname=1: the conninfo string is used whole, as PQconnectdb would. Keywords
     * before "dbname" are only defaults: anything the conninfo says wins. The defaults bound
     * how long a dead server or a half-open connection can stall a write or a reconnect
     * (libpq would otherwise wait for the OS: minutes to hours); PGCONNECT_TIMEOUT, when set,
     * is left to libpq. */
    const char *keys[8], *vals[8];
    int n = 0;
    if (!getenv("PGCONNECT_TIMEOUT")) keys[n] = "connect_timeout", vals[n++] = "10";
    keys[n] = "keepalives_idle", vals[n++] = "30";
    keys[n] = "keepalives_interval", vals[n++] = "10";
    keys[n] = "keepalives_count", vals[n++] = "3";
    keys[n] = "tcp_user_timeout", vals[n++] = "60000"; /* ms of unacknowledged sends */
    keys[n] = "fallback_application_name", vals[n++] = "reclass";
    keys[n] = "dbname", vals[n++] = conninfo;
    keys[n] = NULL, vals[n] = NULL;
    PGconn *conn = PQconnectdbParams(keys, vals, 1);
    if (!conn)
        return common_err_set(e, COMMON_RETRY, "cannot connect to PostgreSQL: out of memory");
    if (PQstatus(conn) != CONNECTION_OK) {
        sink_pg_err(e, COMMON_RETRY, "cannot connect to PostgreSQL", conn, NULL);
        pg_err_redact(e);
        PQfinish(conn);
        return COMMON_RETRY;
    }
    PQsetNoticeProcessor(conn, pg_quiet, NULL);
    if (PQsetClientEncoding(conn, "UTF8") != 0) {
        common_status_t rc =
            sink_pg_err(e, sink_pg_classify(conn, NULL), "set client_encoding", conn, NULL);
        PQfinish(conn);
        return rc;
    }
    *out = conn;
    return COMMON_OK;
}

common_status_t sink_pg_classify(PGconn *conn, const PGresult *res) {
    if (!conn || PQstatus(conn) != CONNECTION_OK) return COMMON_RETRY;
    const char *st = res ? PQresultErrorField(res, PG_DIAG_SQLSTATE) : NULL;
    if (!st) return res ? COMMON_FATAL : COMMON_RETRY;  /* no result at all: out of memory or I/O */
    if (strncmp(st, "08", 2) == 0) return COMMON_RETRY; /* connection exception */
    static const char *const retry[] = {
        "40001", /* serialization_failure */
        "40P01", /* deadlock_detected */
        "57P01", /* admin_shutdown */
        "57P02", /* crash_shutdown */
        "57P03", /* cannot_connect_now (starting up, recovery) */
        "53300", /* too_many_connections */
        "53100", /* disk_full: an operator frees space while the worker waits */
        "53200", /* out_of_memory (the server's) */
    };
    for (size_t i = 0; i < sizeof(retry) / sizeof(retry[0]); i++)
        if (strcmp(st, retry[i]) == 0) return COMMON_RETRY;
    return COMMON_FATAL;
}

int sink_pg_data_error(const char *st) {
    return st &&
           (strncmp(st, "22", 2) == 0 || strncmp(st, "23", 2) == 0 || strncmp(st, "54", 2) == 0);
}

int sink_pg_unmigrated(const PGresult *res) {
    const char *st = res ? PQresultErrorField(res, PG_DIAG_SQLSTATE) : NULL;
    return st && (!strcmp(st, "42P01") || !strcmp(st, "42703") || !strcmp(st, "42883"));
}

/* Appends s with line breaks and tabs folded to spaces: the field stays on one line. */
static void field_append(char *field, size_t size, size_t *at, const char *s) {
    for (; *s && *at + 1 < size; s++)
        field[(*at)++] = (*s == '\n' || *s == '\r' || *s == '\t') ? ' ' : *s;
    field[*at] = 0;
}

static void field_trim(char *field, size_t *at) {
    while (*at > 0 && field[*at - 1] == ' ')
        field[--(*at)] = 0;
}

common_status_t sink_pg_err(common_err_t *e, common_status_t code, const char *step, PGconn *conn,
                            const PGresult *res) {
    if (!e) return code;
    common_err_set(e, code, "%s", ""); /* code set, every field cleared */
    size_t at = 0;
    const char *primary = res ? PQresultErrorField(res, PG_DIAG_MESSAGE_PRIMARY) : NULL;
    if (!primary) { /* no server message: libpq's own (a lost connection, out of memory) */
        const char *m = res ? PQresultErrorMessage(res) : "";
        if (!m || !*m) m = conn ? PQerrorMessage(conn) : "no connection";
        if (!m || !*m) m = "unknown error";
        const char *msg[] = {step, ": ", m};
        for (size_t i = 0; i < sizeof(msg) / sizeof(msg[0]); i++)
            field_append(e->message, sizeof e->message, &at, msg[i]);
        field_trim(e->message, &at);
        return code;
    }
    const char *st = PQresultErrorField(res, PG_DIAG_SQLSTATE);
    const char *msg[] = {step, ": ", primary, st ? " (SQLSTATE " : "", st ? st : "", st ? ")" : ""};
    for (size_t i = 0; i < sizeof(msg) / sizeof(msg[0]); i++)
        field_append(e->message, sizeof e->message, &at, msg[i]);
    field_trim(e->message, &at);
    const char *detail = PQresultErrorField(res, PG_DIAG_MESSAGE_DETAIL);
    const char *context = PQresultErrorField(res, PG_DIAG_CONTEXT);
    at = 0;
    if (detail) field_append(e->detail, sizeof e->detail, &at, detail);
    if (detail && context) field_append(e->detail, sizeof e->detail, &at, "; ");
    if (context) {
        field_append(e->detail, sizeof e->detail, &at, "context: ");
        field_append(e->detail, sizeof e->detail, &at, context);
    }
    field_trim(e->detail, &at);
    const char *hint = PQresultErrorField(res, PG_DIAG_MESSAGE_HINT);
    at = 0;
    if (hint) field_append(e->hint, sizeof e->hint, &at, hint);
    field_trim(e->hint, &at);
    return code;
}

common_status_t sink_pg_fail(PGconn *conn, PGresult *res, const char *step, common_err_t *e) {
    common_status_t rc = sink_pg_err(e, sink_pg_classify(conn, res), step, conn, res);
    PQclear(res);
    return rc;
}

common_status_t sink_pg_exec(PGconn *conn, const char *sql, ExecStatusType want, const char *step,
                             common_err_t *e) {
    PGresult *res = PQexec(conn, sql);
    if (res && PQresultStatus(res) == want) {
        PQclear(res);
        return COMMON_OK;
    }
    return sink_pg_fail(conn, res, step, e);
}
void sink_pg_rollback(PGconn *conn) {
    if (!conn || PQstatus(conn) != CONNECTION_OK) return;
    if (PQtransactionStatus(conn) == PQTRANS_IDLE) return;
    PQclear(PQexec(conn, "ROLLBACK"));
}
