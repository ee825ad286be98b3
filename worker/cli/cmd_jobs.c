/* reclass jobs [show J]: how the bulk jobs are going, read from PostgreSQL (jobs, the
 * results' label counts, drift_status of migration 009). Plain text when stdout is not a
 * terminal, a progress bar when it is, --json for scripts; --watch S redraws every S seconds
 * (`jobs show J --watch` stops once the job completes). */
#include <jansson.h>
#include <libpq-fe.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/err.h"
#include "worker/cli/cli.h"
#include "worker/cli/db.h"

typedef struct {
    const char *db, *tenant;
    int limit, all, json, watch_s;
} jobs_args_t;

static jobs_args_t jobs_a;

/* The options, set into jobs_a. */
#define JOBS_N_OPTS 6
static void jobs_opts(cli_opt_t out[JOBS_N_OPTS + 1]) {
    const cli_opt_t t[] = {
        worker_cli_opt_db(&jobs_a.db, NULL),
        {"tenant", CLI_STR, &jobs_a.tenant, 0, 0, NULL, "T", "only this tenant's jobs", NULL},
        {"limit", CLI_INT, &jobs_a.limit, 1, 100000, NULL, NULL, "jobs listed", "20"},
        {"all", CLI_FLAG, &jobs_a.all, 0, 0, NULL, NULL,
         "also jobs completed more than a day ago (default: running ones and the last day's)",
         NULL},
        {"json", CLI_FLAG, &jobs_a.json, 0, 0, NULL, NULL, "one JSON object per job, a line each",
         NULL},
        {"watch", CLI_INT, &jobs_a.watch_s, 1, 3600, NULL, "S",
         "redraw every S seconds until interrupted (show: until the job completes)", NULL},
        {NULL, CLI_FLAG, NULL, 0, 0, NULL, NULL, NULL, NULL},
    };
    _Static_assert(sizeof(t) / sizeof(t[0]) == JOBS_N_OPTS + 1, "JOBS_N_OPTS");
    memcpy(out, t, sizeof(t));
}

static void jobs_usage(FILE *f) {
    fprintf(f,
            "usage: reclass jobs --db URL [--tenant T] [--limit N] [--all] [--json] [--watch S]\n"
            "       reclass jobs show J --db URL [--json] [--watch S]\n\n"
            "Lists bulk jobs, newest activity first: tenant, done/total, rate, ETA, state\n"
            "(waiting, running, stalled: no progress for 5 minutes, complete, complete with\n"
            "failures: done + failed = total), failed (dead-lettered) tickets, and the\n"
            "tenant's newest drift status. `show J`\n"
            "adds the job's times, its label mix, mean confidence and the first failures'\n"
            "reasons with their records (topic/partition/offset). Exit 1 when J does\n"
            "not exist.\n\n");
    cli_opt_t opts[JOBS_N_OPTS + 1];
    jobs_opts(opts);
    worker_cli_print_opts(f, opts);
}

#define JOBS_STALLED_S 300 /* no progress for this long reads "stalled" */

/* $1 tenant or NULL, $2 limit, $3 'true' to include old completed jobs, $4 job id or NULL.
 * Columns: job, tenant, total, done, elapsed s (first record to last write), idle s (since
 * the last write), completed, first seen (UTC text), drift status (drift_status of migration
 * 009, the worst model's, by its primary key), failed and state
 * (migrations/008_job_failures.sql). The rows are the jobs view's, found through indexes by
 * jobs_recent (migrations/014_jobs_recent.sql): the listing reads about $2 jobs, not all. */
static const char SQL_JOBS[] =
    "SELECT j.job_id, coalesce(j.tenant, ''), j.total, j.done,"
    "  extract(epoch FROM j.updated_at - j.first_seen)::float8,"
    "  extract(epoch FROM now() - j.updated_at)::float8, j.completed_at IS NOT NULL,"
    "  to_char(j.first_seen AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI:SS'),"
    "  coalesce(d.status, '-'), j.failed::bigint, j.state"
    " FROM jobs_recent($1::text, $2::integer, $3::boolean, $4::text) j"
    " LEFT JOIN LATERAL (SELECT z.status FROM drift_status z"
    "  WHERE z.tenant = j.tenant AND z.window_start > now() - interval '1 day'"
    "  ORDER BY z.level DESC LIMIT 1) d ON true"
    " ORDER BY j.updated_at DESC, j.job_id";

/* $1 job: label, tickets, mean confidence; then (one row) truncated tickets. */
static const char SQL_LABELS[] = "SELECT label, tickets, mean_confidence FROM job_label_counts"
                                 " WHERE job_id = $1 ORDER BY tickets DESC, label LIMIT 10";
static const char SQL_DETAIL[] =
    "SELECT count(*) FILTER (WHERE truncated), avg(confidence)::float8,"
    " to_char(max(classified_at) AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI:SS'),"
    " string_agg(DISTINCT model, ',') FROM ticket_results WHERE job_id = $1";

/* $1 job: its first failures (migrations/008_job_failures.sql), where their records are. */
static const char SQL_FAILURES[] =
    "SELECT topic, \"partition\", \"offset\", coalesce(ticket_id, '-'), reason, counted"
    " FROM job_failures WHERE job_id = $1"
    " ORDER BY failed_at, topic, \"partition\", \"offset\" LIMIT 5";

typedef struct {
    const char *id, *tenant, *first_seen, *drift;
    long total, done, dead; /* dead: failed tickets; < 0: not counted by this schema */
    double elapsed_s, idle_s, rate, eta_s;
    int completed;
    const char *state;
} job_row_t;

static job_row_t row_of(const PGresult *r, int i) {
    job_row_t j = {0};
    j.id = PQgetvalue(r, i, 0);
    j.tenant = PQgetvalue(r, i, 1);
    j.total = atol(PQgetvalue(r, i, 2));
    j.done = atol(PQgetvalue(r, i, 3));
    j.elapsed_s = atof(PQgetvalue(r, i, 4));
    j.idle_s = atof(PQgetvalue(r, i, 5));
    j.completed = PQgetvalue(r, i, 6)[0] == 't';
    j.first_seen = PQgetvalue(r, i, 7);
    j.drift = PQgetvalue(r, i, 8);
    j.dead = PQgetisnull(r, i, 9) ? -1 : atol(PQgetvalue(r, i, 9));
    const char *state = PQgetisnull(r, i, 10) ? NULL : PQgetvalue(r, i, 10);
    j.rate = j.elapsed_s > 0 ? j.done / j.elapsed_s : 0;
    j.eta_s = !j.completed && j.rate > 0 ? (j.total - j.done) / j.rate : -1;
    int ended = j.completed || (state && strncmp(state, "complete", 8) == 0);
    if (ended) j.completed = 1;
    j.eta_s = ended ? -1 : j.eta_s;
    j.state = ended                                     ? (state ? state : "complete")
              : j.done + (j.dead > 0 ? j.dead : 0) == 0 ? "waiting"
              : j.idle_s > JOBS_STALLED_S               ? "stalled"
                                                        : "running";
    return j;
}

/* "1h02m", "4m05s", "12s"; "-" when unknown. */
static const char *fmt_dur(char *buf, size_t n, double s) {
    if (s < 0) return "-";
    long t = (long)(s + 0.5);
    if (t >= 3600)
        snprintf(buf, n, "%ldh%02ldm", t / 3600, t / 60 % 60);
    else if (t >= 60)
        snprintf(buf, n, "%ldm%02lds", t / 60, t % 60);
    else
        snprintf(buf, n, "%lds", t);
    return buf;
}

static void print_bar(FILE *f, long done, long total) {
    enum { W = 20 };
    double frac = total > 0 ? (double)done / (double)total : 0;
    if (frac > 1) frac = 1;
    int fill = (int)(frac * W + 0.5);
    fputc('[', f);
    for (int i = 0; i < W; i++)
        fputc(i < fill ? '#' : '.', f);
    fprintf(f, "] %5.1f%%", 100 * frac);
}

static json_t *row_json(const job_row_t *j) {
    json_t *o =
        json_pack("{s:s, s:s, s:I, s:I, s:s, s:f, s:s, s:s}", "job_id", j->id, "tenant", j->tenant,
                  "total", (json_int_t)j->total, "done", (json_int_t)j->done, "state", j->state,
                  "rate", j->rate, "first_seen", j->first_seen, "drift", j->drift);
    json_object_set_new(o, "eta_s", j->eta_s >= 0 ? json_real(j->eta_s) : json_null());
    json_object_set_new(o, "failed", j->dead >= 0 ? json_integer(j->dead) : json_null());
    return o;
}

static void print_list(FILE *f, const PGresult *r, int tty) {
    int n = PQntuples(r);
    if (!n) {
        fprintf(f, "no jobs%s\n", jobs_a.tenant ? " of this tenant" : "");
        return;
    }
    fprintf(f, "%-24s %-12s ", "JOB", "TENANT");
    if (tty) fprintf(f, "%-28s ", "PROGRESS");
    fprintf(f, "%-17s %10s %9s %-22s %6s %s\n", "DONE/TOTAL", "TICKETS/S", "ETA", "STATE", "FAILED",
            "DRIFT");
    for (int i = 0; i < n; i++) {
        job_row_t j = row_of(r, i);
        char eta[32], dead[24], dt[40];
        snprintf(dead, sizeof dead, j.dead >= 0 ? "%ld" : "-", j.dead);
        snprintf(dt, sizeof dt, "%ld/%ld", j.done, j.total);
        fprintf(f, "%-24s %-12s ", j.id, j.tenant[0] ? j.tenant : "-");
        if (tty) {
            print_bar(f, j.done, j.total);
            fprintf(f, " ");
        }
        fprintf(f, "%-17s %10.0f %9s %-22s %6s %s\n", dt, j.rate, fmt_dur(eta, sizeof eta, j.eta_s),
                j.state, dead, j.drift);
    }
}

/* The detail of one job (r has its one row). Returns 0, or 1 when a query failed. */
static int print_show(FILE *f, PGconn *conn, const PGresult *r, int tty) {
    job_row_t j = row_of(r, 0);
    const char *p[1] = {j.id};
    PGresult *labels = worker_cli_db_query(conn, SQL_LABELS, 1, p, NULL);
    PGresult *det = labels ? worker_cli_db_query(conn, SQL_DETAIL, 1, p, NULL) : NULL;
    PGresult *fails =
        det && j.dead >= 0 ? worker_cli_db_query(conn, SQL_FAILURES, 1, p, NULL) : NULL;
    if (!det || (j.dead >= 0 && !fails)) {
        PQclear(labels);
        PQclear(det);
        return COMMON_FATAL;
    }
    int n_fails = fails ? PQntuples(fails) : 0;
    if (jobs_a.json) {
        json_t *o = row_json(&j), *ls = json_array();
        for (int i = 0; i < PQntuples(labels); i++)
            json_array_append_new(ls,
                                  json_pack("{s:s, s:I, s:f}", "label", PQgetvalue(labels, i, 0),
                                            "tickets", (json_int_t)atol(PQgetvalue(labels, i, 1)),
                                            "mean_confidence", atof(PQgetvalue(labels, i, 2))));
        json_object_set_new(o, "labels", ls);
        json_object_set_new(o, "truncated", json_integer(atol(PQgetvalue(det, 0, 0))));
        json_t *fs = json_array();
        for (int i = 0; i < n_fails; i++)
            json_array_append_new(
                fs, json_pack("{s:s, s:I, s:I, s:s, s:s, s:b}", "topic", PQgetvalue(fails, i, 0),
                              "partition", (json_int_t)atol(PQgetvalue(fails, i, 1)), "offset",
                              (json_int_t)atoll(PQgetvalue(fails, i, 2)), "ticket_id",
                              PQgetvalue(fails, i, 3), "reason", PQgetvalue(fails, i, 4), "counted",
                              PQgetvalue(fails, i, 5)[0] == 't'));
        json_object_set_new(o, "failures", fs);
        json_dumpf(o, f, JSON_COMPACT);
        fputc('\n', f);
        json_decref(o);
    } else {
        char a[32], b[32];
        fprintf(f, "job:          %s\ntenant:       %s\n", j.id, j.tenant[0] ? j.tenant : "-");
        fprintf(f, "progress:     ");
        if (tty) {
            print_bar(f, j.done, j.total);
            fputc(' ', f);
        }
        fprintf(f, "%ld/%ld (%s)\n", j.done, j.total, j.state);
        fprintf(f, "rate:         %.0f tickets/s over %s; ETA %s\n", j.rate,
                fmt_dur(a, sizeof a, j.elapsed_s), fmt_dur(b, sizeof b, j.eta_s));
        fprintf(f, "first seen:   %s UTC\nlast stored:  %s UTC\n", j.first_seen,
                worker_cli_db_str(det, 0, 2, "-"));
        fprintf(f, "model:        %s\n", worker_cli_db_str(det, 0, 3, "-"));
        fprintf(f, "truncated:    %s\n", PQgetvalue(det, 0, 0));
        if (j.dead >= 0) fprintf(f, "failed:       %ld (dead-lettered)\n", j.dead);
        fprintf(f, "drift:        %s (tenant's newest window)\n", j.drift);
        if (!PQgetisnull(det, 0, 1))
            fprintf(f, "confidence:   %.3f mean\n", atof(PQgetvalue(det, 0, 1)));
        if (PQntuples(labels)) fprintf(f, "labels (top %d):\n", PQntuples(labels));
        for (int i = 0; i < PQntuples(labels); i++)
            fprintf(f, "  %-32s %8s  %.3f\n", PQgetvalue(labels, i, 0), PQgetvalue(labels, i, 1),
                    atof(PQgetvalue(labels, i, 2)));
        if (n_fails)
            fprintf(f, "failures (first %d; topic/partition/offset ticket: reason):\n", n_fails);
        for (int i = 0; i < n_fails; i++)
            fprintf(f, "  %s/%s/%s %s: %s%s\n", PQgetvalue(fails, i, 0), PQgetvalue(fails, i, 1),
                    PQgetvalue(fails, i, 2), PQgetvalue(fails, i, 3), PQgetvalue(fails, i, 4),
                    PQgetvalue(fails, i, 5)[0] == 't'
                        ? ""
                        : " (not counted: another tenant's, or past the total)");
    }
    PQclear(fails);
    PQclear(labels);
    PQclear(det);
    return 0;
}

static volatile sig_atomic_t jobs_stop;
static void on_signal(int sig) {
    (void)sig;
    jobs_stop = 1;
}

/* One screen. Returns 0, 1 on a failed query or a missing job, or 3 when `show` found the
 * job completed (the watch ends). */
static int draw(PGconn *conn, const char *job, int tty) {
    char lim[16];
    snprintf(lim, sizeof lim, "%d", job ? 1 : jobs_a.limit);
    const char *p[4] = {jobs_a.tenant, lim, (jobs_a.all || job) ? "true" : "false", job};
    PGresult *r = worker_cli_db_query(conn, SQL_JOBS, 4, p, NULL);
    if (!r) return COMMON_FATAL;
    int rc = 0;
    if (tty && jobs_a.watch_s && !jobs_a.json) fputs("\033[H\033[2J", stdout);
    if (job) {
        if (PQntuples(r) == 0) {
            common_logf(stderr, "no job %s (reclass jobs lists them)\n", job);
            rc = 1;
        } else {
            rc = print_show(stdout, conn, r, tty);
            if (!rc && PQgetvalue(r, 0, 6)[0] == 't') rc = 3;
        }
    } else if (jobs_a.json) {
        for (int i = 0; i < PQntuples(r); i++) {
            job_row_t j = row_of(r, i);
            json_t *o = row_json(&j);
            json_dumpf(o, stdout, JSON_COMPACT);
            fputc('\n', stdout);
            json_decref(o);
        }
    } else {
        print_list(stdout, r, tty);
    }
    PQclear(r);
    fflush(stdout);
    return rc;
}

common_status_t worker_cmd_jobs(int argc, char **argv) {
    memset(&jobs_a, 0, sizeof jobs_a);
    int first = 0;
    cli_opt_t opts[JOBS_N_OPTS + 1];
    jobs_opts(opts);
    common_status_t st = worker_cli_parse("jobs", argc, argv, opts, jobs_usage, &first);
    if (st != COMMON_OK) return st;
    int rc;
    const char *job = NULL;
    if (first < argc) {
        if (strcmp(argv[first], "show") || first + 2 != argc) {
            common_logf(stderr, "expected no argument or `show JOB` (reclass jobs "
                                "--help)\n");
            return COMMON_USAGE;
        }
        job = argv[first + 1];
    }
    PGconn *conn = NULL;
    if ((rc = worker_cli_db_connect(jobs_a.db, &conn)) != 0) return rc;
    int tty = isatty(STDOUT_FILENO);
    signal(SIGINT, on_signal);
    signal(SIGTERM, on_signal);
    for (;;) {
        rc = draw(conn, job, tty);
        if (rc || !jobs_a.watch_s || jobs_stop) break;
        for (int i = 0; i < jobs_a.watch_s * 10 && !jobs_stop; i++)
            nanosleep(&(struct timespec){0, 100000000L}, NULL);
        if (jobs_stop) break;
        if (!tty && !jobs_a.json) printf("\n");
        if (PQstatus(conn) != CONNECTION_OK) PQreset(conn); /* a restarted server: go on */
    }
    PQfinish(conn);
    return rc == 0 || rc == 3 ? COMMON_OK : COMMON_FATAL; /* 3: the shown job completed */
}
