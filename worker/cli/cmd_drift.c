/* reclass drift baseline | report: pins a drift baseline and prints the worst-drifting
 * tenants and windows. The scores are SQL (migrations/004_drift.sql: drift_scores,
 * drift_baseline_pin_*; 011_drift_judged.sql: the stored scores the report reads); this file
 * only passes arguments and prints. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <libpq-fe.h>

#include "common/err.h"
#include "worker/cli/cli.h"
#include "worker/cli/db.h"

typedef struct {
    const char *db, *tenant, *model, *from, *to, *job, *since, *bucket;
    int limit;
} drift_args_t;

/* The options of the two subcommands, set into a. */
#define DRIFT_BASELINE_N 6
static void drift_baseline_opts(drift_args_t *a, cli_opt_t out[DRIFT_BASELINE_N + 1]) {
    const cli_opt_t t[] = {
        worker_cli_opt_db(&a->db, NULL),
        {"tenant", CLI_STR, &a->tenant, 0, 0, NULL, "T", "whose baseline (required)", NULL},
        {"model", CLI_STR, &a->model, 0, 0, NULL, "M",
         "the model, as drift_windows.model and ticket_results.model name it (required)", NULL},
        {"from", CLI_STR, &a->from, 0, 0, NULL, "TS", "start of a range of stored drift windows",
         NULL},
        {"to", CLI_STR, &a->to, 0, 0, NULL, "TS", "its end (exclusive)", NULL},
        {"job", CLI_STR, &a->job, 0, 0, NULL, "J",
         "a finished job whose own tickets are the reference (instead of --from/--to)", NULL},
        {NULL, CLI_FLAG, NULL, 0, 0, NULL, NULL, NULL, NULL},
    };
    _Static_assert(sizeof(t) / sizeof(t[0]) == DRIFT_BASELINE_N + 1, "DRIFT_BASELINE_N");
    memcpy(out, t, sizeof(t));
}

#define DRIFT_REPORT_N 6
static void drift_report_opts(drift_args_t *a, cli_opt_t out[DRIFT_REPORT_N + 1]) {
    const cli_opt_t t[] = {
        worker_cli_opt_db(&a->db, NULL),
        {"tenant", CLI_STR, &a->tenant, 0, 0, NULL, "T", "only this tenant", NULL},
        {"model", CLI_STR, &a->model, 0, 0, NULL, "M", "only this model", NULL},
        {"since", CLI_STR, &a->since, 0, 0, NULL, "S",
         "an interval back from now ('24 hours') or a timestamp", "7 days"},
        {"bucket", CLI_STR, &a->bucket, 0, 0, NULL, "B", "window, hour or day: roll windows up",
         "window"},
        {"limit", CLI_INT, &a->limit, 1, 100000, NULL, NULL, "windows listed", "20"},
        {NULL, CLI_FLAG, NULL, 0, 0, NULL, NULL, NULL, NULL},
    };
    _Static_assert(sizeof(t) / sizeof(t[0]) == DRIFT_REPORT_N + 1, "DRIFT_REPORT_N");
    memcpy(out, t, sizeof(t));
}

static void drift_baseline_usage(FILE *f) {
    fprintf(f, "usage: reclass drift baseline --db URL --tenant T --model M\n"
               "                              (--from TS --to TS | --job J)\n\n"
               "Pins the reference that drift scores of tenant T and model M compare against (a\n"
               "row of drift_baselines; the latest pinned one is used): the label mix and\n"
               "confidence histogram of the drift windows in [--from, --to), or of job J's own\n"
               "tickets (ticket_results, exact). Without a pinned baseline the scores compare\n"
               "with the trailing 7 days. Prints the new baseline's id and size.\n\n");
    drift_args_t a;
    cli_opt_t opts[DRIFT_BASELINE_N + 1];
    drift_baseline_opts(&a, opts);
    worker_cli_print_opts(f, opts);
}

static void drift_report_usage(FILE *f) {
    fprintf(f, "usage: reclass drift report --db URL [--tenant T] [--model M] [--since S]\n"
               "                            [--bucket window|hour|day] [--limit N]\n\n"
               "Prints the tenants ranked by their worst drift status, since when they drift,\n"
               "then the worst windows: the scores stored as the worker judged each window\n"
               "(PSI and Jensen-Shannon divergence of the label mix and confidence histogram\n"
               "against the baseline; pinning a baseline re-scores the stored windows). Hour\n"
               "and day buckets show their windows' worst status and highest PSIs.\n"
               "Statuses: drift (a PSI >= 0.25), watch (>= 0.1), ok, sparse (too few tickets\n"
               "to judge), no_baseline. Exit status 3 when any window reads drift (for cron\n"
               "alerts), 0 otherwise.\n\n");
    drift_args_t a;
    cli_opt_t opts[DRIFT_REPORT_N + 1];
    drift_report_opts(&a, opts);
    worker_cli_print_opts(f, opts);
}

static int drift_baseline(int argc, char **argv) {
    drift_args_t a = {0};
    cli_opt_t opts[DRIFT_BASELINE_N + 1];
    drift_baseline_opts(&a, opts);
    int prc = worker_cli_parse("drift baseline", argc, argv, opts, drift_baseline_usage, NULL);
    if (prc != COMMON_OK) return prc;
    const char *why = !a.tenant                   ? "--tenant T is required"
                      : !a.model                  ? "--model M is required"
                      : a.job && (a.from || a.to) ? "pass --job or --from/--to, not both"
                      : !a.job && !(a.from && a.to)
                          ? "pass --from TS --to TS (stored windows) or --job J (a job's tickets)"
                          : NULL;
    if (why) {
        common_logf(stderr, "%s (see --help)\n", why);
        return COMMON_USAGE;
    }
    PGconn *conn;
    int rc = worker_cli_db_connect(a.db, &conn);
    if (rc) return rc;
    const char *job_params[] = {a.tenant, a.model, a.job};
    const char *win_params[] = {a.tenant, a.model, a.from, a.to};
    /* the pin functions return the new row (a later statement would need a new snapshot) */
    const char *sql = a.job ? "SELECT id, tickets, source, from_ts, to_ts"
                              " FROM drift_baseline_pin_job($1, $2, $3)"
                            : "SELECT id, tickets, source, from_ts, to_ts"
                              " FROM drift_baseline_pin_windows($1, $2, $3::timestamptz,"
                              " $4::timestamptz)";
    char state[6];
    PGresult *r =
        worker_cli_db_query(conn, sql, a.job ? 3 : 4, a.job ? job_params : win_params, state);
    if (!r) {
        PQfinish(conn);
        /* no_data_found (nothing to pin) and bad timestamps are the user's to fix */
        return !strcmp(state, "P0002") || !strncmp(state, "22", 2) ? 2 : 1;
    }
    if (PQntuples(r) != 1 || PQgetisnull(r, 0, 0)) {
        common_logf(stderr, "no baseline came back (is migration 004 applied?)\n");
        PQclear(r);
        PQfinish(conn);
        return COMMON_FATAL;
    }
    printf("baseline %s pinned for tenant %s, model %s: %s tickets from %s%s%s (%s .. %s)\n",
           PQgetvalue(r, 0, 0), a.tenant, a.model, PQgetvalue(r, 0, 1), PQgetvalue(r, 0, 2),
           a.job ? " " : "", a.job ? a.job : "", worker_cli_db_str(r, 0, 3, "?"),
           worker_cli_db_str(r, 0, 4, "?"));
    PQclear(r);
    PQfinish(conn);
    return 0;
}

/* The scores stored as windows were judged (migrations/011_drift_judged.sql): the report reads
 * them and their hourly roll-up, it scores nothing. */
static const char drift_tenants_sql[] =
    "SELECT tenant, model, worst, buckets, drifting, tickets,"
    " to_char(drift_since AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI'),"
    " round(max_label_psi::numeric, 3), round(max_confidence_psi::numeric, 3), reference"
    " FROM drift_report_tenants($1, drift_since($2), $3, $4)";

static const char drift_windows_sql[] =
    "SELECT to_char(bucket_start AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI:SS'), bucket_s, tenant,"
    " model, status, tickets, round(label_psi::numeric, 3), round(label_js::numeric, 3),"
    " round(confidence_psi::numeric, 3), round(confidence_js::numeric, 3),"
    " round(low_confidence_share::numeric, 3), round(low_confidence_change::numeric, 3),"
    " labels_new, labels_gone"
    " FROM drift_report_worst($1, drift_since($2), $3, $4, $5::integer)";

static int drift_report(int argc, char **argv) {
    drift_args_t a = {0};
    cli_opt_t opts[DRIFT_REPORT_N + 1];
    drift_report_opts(&a, opts);
    int prc = worker_cli_parse("drift report", argc, argv, opts, drift_report_usage, NULL);
    if (prc != COMMON_OK) return prc;
    if (strcmp(a.bucket, "window") && strcmp(a.bucket, "hour") && strcmp(a.bucket, "day")) {
        common_logf(stderr, "--bucket %s: use window, hour or day\n", a.bucket);
        return COMMON_USAGE;
    }
    PGconn *conn;
    int rc = worker_cli_db_connect(a.db, &conn);
    if (rc) return rc;
    char limit[16], state[6];
    snprintf(limit, sizeof limit, "%d", a.limit);
    const char *params[] = {a.bucket, a.since, a.tenant, a.model, limit};
    PGresult *t = worker_cli_db_query(conn, drift_tenants_sql, 4, params, state);
    PGresult *w = t ? worker_cli_db_query(conn, drift_windows_sql, 5, params, state) : NULL;
    if (!w) {
        PQclear(t);
        PQfinish(conn);
        return !strcmp(state, "22023") ? 2 : 1; /* invalid_parameter_value: a bad --since */
    }
    long drifting = 0;
    printf("drift since %s (%s buckets): %d tenant/model pair%s\n\n", a.since, a.bucket,
           PQntuples(t), PQntuples(t) == 1 ? "" : "s");
    printf("%-16s %-22s %-11s %8s %7s %10s %-16s %9s %9s  %s\n", "tenant", "model", "worst",
           "buckets", "drift", "tickets", "drift since", "max_lpsi", "max_cpsi", "reference");
    for (int i = 0; i < PQntuples(t); i++) {
        drifting += atol(PQgetvalue(t, i, 4));
        printf("%-16s %-22s %-11s %8s %7s %10s %-16s %9s %9s  %s\n", PQgetvalue(t, i, 0),
               PQgetvalue(t, i, 1), PQgetvalue(t, i, 2), PQgetvalue(t, i, 3), PQgetvalue(t, i, 4),
               PQgetvalue(t, i, 5), worker_cli_db_str(t, i, 6, "-"),
               worker_cli_db_str(t, i, 7, "-"), worker_cli_db_str(t, i, 8, "-"),
               PQgetvalue(t, i, 9));
    }
    printf("\nworst %d bucket%s (PSI: population stability index, JS: Jensen-Shannon, base 2;\n"
           "low_conf: share of confidence < 0.5 and its change against the reference)\n\n",
           PQntuples(w), PQntuples(w) == 1 ? "" : "s");
    printf("%-19s %6s %-16s %-11s %8s %9s %8s %9s %8s %8s %8s %4s %4s\n", "start (UTC)", "s",
           "tenant", "status", "tickets", "label_psi", "label_js", "conf_psi", "conf_js",
           "low_conf", "change", "new", "gone");
    for (int i = 0; i < PQntuples(w); i++)
        printf("%-19s %6s %-16s %-11s %8s %9s %8s %9s %8s %8s %8s %4s %4s\n", PQgetvalue(w, i, 0),
               PQgetvalue(w, i, 1), PQgetvalue(w, i, 2), PQgetvalue(w, i, 4), PQgetvalue(w, i, 5),
               worker_cli_db_str(w, i, 6, "-"), worker_cli_db_str(w, i, 7, "-"),
               worker_cli_db_str(w, i, 8, "-"), worker_cli_db_str(w, i, 9, "-"),
               worker_cli_db_str(w, i, 10, "-"), worker_cli_db_str(w, i, 11, "-"),
               worker_cli_db_str(w, i, 12, "-"), worker_cli_db_str(w, i, 13, "-"));
    if (drifting) printf("\n%ld bucket%s in drift\n", drifting, drifting == 1 ? "" : "s");
    PQclear(t);
    PQclear(w);
    PQfinish(conn);
    return drifting ? COMMON_FOUND : COMMON_OK;
}

common_status_t worker_cmd_drift(int argc, char **argv) {
    if (argc >= 2 && !strcmp(argv[1], "baseline")) {
        common_log_prefix("reclass drift baseline"); /* a subcommand's messages name it */
        return drift_baseline(argc - 1, argv + 1);
    }
    if (argc >= 2 && !strcmp(argv[1], "report")) {
        common_log_prefix("reclass drift report");
        return drift_report(argc - 1, argv + 1);
    }
    FILE *f = argc >= 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) ? stdout : stderr;
    fprintf(f, "usage: reclass drift baseline|report [options] (reclass drift report --help)\n\n");
    drift_baseline_usage(f);
    fprintf(f, "\n");
    drift_report_usage(f);
    return f == stdout ? COMMON_DONE : COMMON_USAGE;
}
