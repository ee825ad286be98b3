#include "worker/report/report.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sink/pgutil.h"
#include "worker/report/html.h"

/* One query with the job id as $1; NULL (e set: the server's answer) on failure. */
static PGresult *report_q(PGconn *conn, const char *sql, const char *job, common_err_t *e) {
    const char *p[] = {job};
    PGresult *r = PQexecParams(conn, sql, 1, NULL, p, NULL, NULL, 0);
    if (r && PQresultStatus(r) == PGRES_TUPLES_OK) return r;
    sink_pg_err(e, sink_pg_classify(conn, r), "query", conn, r);
    if (sink_pg_unmigrated(r)) common_err_hint(e, "run reclass migrate --db URL");
    PQclear(r);
    return NULL;
}

static const char *report_v(const PGresult *r, int row, int col) {
    return PQgetisnull(r, row, col) ? "-" : PQgetvalue(r, row, col);
}

static double report_d(const PGresult *r, int row, int col) {
    return PQgetisnull(r, row, col) ? 0 : atof(PQgetvalue(r, row, col));
}

static const char report_style[] =
    "body{font:14px/1.4 system-ui,sans-serif;margin:24px auto;max-width:980px;color:#111}"
    "h1{font-size:22px}h2{font-size:17px;margin-top:28px;border-bottom:1px solid #ddd}"
    "table{border-collapse:collapse}td,th{padding:3px 8px;border-bottom:1px solid #eee;"
    "text-align:right}td:first-child,th:first-child{text-align:left}"
    ".chart text{font:11px system-ui,sans-serif;fill:#333}.note{color:#666}"
    ".st{font-weight:600;padding:1px 6px;border-radius:3px;color:#fff}"
    ".ok{background:#16a34a}.watch{background:#ea580c}.drift{background:#dc2626}"
    ".sparse,.no_baseline{background:#6b7280}.kv td{text-align:left}.mem td{white-space:nowrap}";

static void report_status(FILE *f, const char *s) {
    fprintf(f, "<span class=\"st ");
    report_html_text(f, s);
    fprintf(f, "\">");
    report_html_text(f, s);
    fprintf(f, "</span>");
}

#define REPORT_HIST_SQL                                                                            \
    "SELECT b, coalesce(c, 0) FROM generate_series(0, 9) AS b LEFT JOIN"                           \
    " (SELECT least(floor(confidence * 10)::int, 9) AS bin, count(*) AS c FROM ticket_results"     \
    " WHERE job_id = $1 GROUP BY 1) x ON x.bin = b ORDER BY b"

static const char q_job[] =
    "SELECT j.tenant, j.total, j.done, to_char(j.first_seen AT TIME ZONE 'UTC',"
    " 'YYYY-MM-DD HH24:MI:SS'), to_char(j.completed_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"
    " HH24:MI:SS'), t.n, t.mean_conf, t.low, t.trunc, t.labels, t.tokens, t.models,"
    " extract(epoch FROM t.t1 - t.t0) FROM (SELECT count(*) AS n, avg(confidence) AS mean_conf,"
    " avg((confidence < 0.5)::int) AS low, count(*) FILTER (WHERE truncated) AS trunc,"
    " count(DISTINCT label) AS labels, sum(tokens) AS tokens, min(classified_at) AS t0,"
    " max(classified_at) AS t1, string_agg(DISTINCT model, ', ') AS models FROM ticket_results"
    " WHERE job_id = $1) t LEFT JOIN jobs j ON j.job_id = $1";

static void report_summary(FILE *f, const PGresult *j, const char *job) {
    fprintf(f, "<h1>reclass report: job ");
    report_html_text(f, job);
    fprintf(f, "</h1>\n");
    long total = atol(report_v(j, 0, 1)), done = atol(report_v(j, 0, 2));
    if (PQgetisnull(j, 0, 4))
        fprintf(f, "<p class=\"note\">not complete: %ld of %ld tickets stored so far</p>\n", done,
                total);
    double secs = report_d(j, 0, 12), n = report_d(j, 0, 5);
    char mean[32], low[32];
    report_fmt_value(mean, sizeof mean, report_d(j, 0, 6), REPORT_FMT_SHARE);
    report_fmt_value(low, sizeof low, report_d(j, 0, 7), REPORT_FMT_SHARE);
    fprintf(f, "<table class=\"kv\">\n");
    const char *rows[][2] = {
        {"tenant", report_v(j, 0, 0)},
        {"model", report_v(j, 0, 11)},
        {"tickets stored", report_v(j, 0, 5)},
        {"job total", report_v(j, 0, 1)},
        {"first seen (UTC)", report_v(j, 0, 3)},
        {"completed (UTC)", report_v(j, 0, 4)},
        {"mean confidence", mean},
        {"confidence below 0.5", low},
        {"labels used", report_v(j, 0, 9)},
        {"truncated texts", report_v(j, 0, 8)},
        {"tokens", report_v(j, 0, 10)},
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        fprintf(f, "<tr><th>%s</th><td>", rows[i][0]);
        report_html_text(f, rows[i][1]);
        fprintf(f, "</td></tr>\n");
    }
    fprintf(f,
            "<tr><th>classification time</th><td>%.1f s (%.0f tickets/s, first to last row)"
            "</td></tr>\n</table>\n",
            secs, secs > 0 ? n / secs : 0);
}

static void report_labels(FILE *f, const PGresult *r, double total) {
    int n = PQntuples(r), shown = n < 30 ? n : 30;
    const char **labels = calloc((size_t)shown + 1, sizeof *labels);
    double *v = calloc((size_t)shown + 1, sizeof *v);
    if (labels && v) {
        for (int i = 0; i < shown; i++) {
            labels[i] = PQgetvalue(r, i, 0);
            v[i] = report_d(r, i, 1);
        }
        fprintf(f, "<h2>Label distribution</h2>\n");
        if (n > shown) fprintf(f, "<p class=\"note\">top %d of %d labels</p>\n", shown, n);
        report_svg_hbars(f, shown, labels, v, total, REPORT_FMT_COUNT);
    }
    free(labels);
    free(v);
}

static void report_hist(FILE *f, const PGresult *r) {
    static const char *const bins[10] = {"0-.1",  ".1-.2", ".2-.3", ".3-.4", ".4-.5",
                                         ".5-.6", ".6-.7", ".7-.8", ".8-.9", ".9-1"};
    double v[10] = {0};
    for (int i = 0; i < PQntuples(r) && i < 10; i++)
        v[i] = report_d(r, i, 1);
    fprintf(f, "<h2>Confidence histogram</h2>\n");
    report_svg_vbars(f, 10, bins, v, REPORT_FMT_COUNT);
}

static const char q_least[] =
    "SELECT ticket_id, label, round(confidence::numeric, 4), top_k -> 1 ->> 'label',"
    " round((top_k -> 1 ->> 'p')::numeric, 4), truncated FROM ticket_results WHERE job_id = $1"
    " ORDER BY confidence, ticket_id LIMIT 25";

static void report_table(FILE *f, const PGresult *r, const char *const *heads, int ncols) {
    fprintf(f, "<table><tr>");
    for (int c = 0; c < ncols; c++)
        fprintf(f, "<th>%s</th>", heads[c]);
    fprintf(f, "</tr>\n");
    for (int i = 0; i < PQntuples(r); i++) {
        fprintf(f, "<tr>");
        for (int c = 0; c < ncols; c++) {
            fprintf(f, "<td>");
            if (!strcmp(heads[c], "status"))
                report_status(f, report_v(r, i, c));
            else
                report_html_text(f, report_v(r, i, c));
            fprintf(f, "</td>");
        }
        fprintf(f, "</tr>\n");
    }
    fprintf(f, "</table>\n");
}

/* The job's own tickets against the tenant's latest pinned baseline (drift_compare). */
static const char q_job_drift[] =
    "WITH lc AS (SELECT jsonb_object_agg(label, c) AS v, sum(c)::bigint AS n, min(model) AS m"
    " FROM (SELECT label, min(model) AS model, count(*) AS c FROM ticket_results"
    " WHERE job_id = $1 GROUP BY label) x),"
    " h AS (SELECT array_agg(c ORDER BY b) AS v FROM (" REPORT_HIST_SQL ") y(b, c)),"
    " pin AS (SELECT z.* FROM drift_baselines z, jobs j, lc WHERE j.job_id = $1"
    " AND z.tenant = j.tenant AND z.model = lc.m ORDER BY z.created_at DESC, z.id DESC LIMIT 1)"
    " SELECT s.status, lc.n, round(s.label_psi::numeric, 4), round(s.label_js::numeric, 4),"
    " round(s.confidence_psi::numeric, 4), round(s.confidence_js::numeric, 4),"
    " round(s.low_confidence_share::numeric, 3), round(s.low_confidence_change::numeric, 3),"
    " cardinality(s.labels_new), cardinality(s.labels_gone),"
    " format('baseline %s (%s%s)', pin.id, pin.source, coalesce(' ' || pin.source_job, ''))"
    " FROM lc, h, pin, LATERAL drift_compare(lc.v, h.v, lc.n, pin.label_counts,"
    " pin.confidence_hist, pin.tickets) s";

/* The tenant's drift windows that overlap the job (other traffic of the tenant included):
 * scored from the window holding the job's first record (found by index) to its end. */
static const char q_windows[] =
    "WITH j0 AS (SELECT tenant, first_seen, coalesce(completed_at, now()) AS t1 FROM jobs"
    " WHERE job_id = $1),"
    " j AS (SELECT j0.*, coalesce((SELECT max(d.window_start) FROM drift_windows d"
    " WHERE d.tenant = j0.tenant AND d.window_start <= j0.first_seen"
    " AND d.window_start > j0.first_seen - interval '1 day'), j0.first_seen) AS t0 FROM j0)"
    " SELECT to_char(s.bucket_start AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI:SS'), s.bucket_s,"
    " s.status, s.tickets, round(s.label_psi::numeric, 4), round(s.label_js::numeric, 4),"
    " round(s.confidence_psi::numeric, 4), round(s.confidence_js::numeric, 4),"
    " round(s.low_confidence_share::numeric, 3), s.reference, extract(epoch FROM s.bucket_start)"
    " FROM j, drift_scores_between('window', j.t0, j.t1 + interval '1 microsecond', j.tenant) s"
    " WHERE s.bucket_start + s.bucket_s * interval '1 second' > j.first_seen"
    " AND s.bucket_start <= j.t1 ORDER BY s.bucket_start";

static void report_drift(FILE *f, const PGresult *jd, const PGresult *w, const char *tenant) {
    static const char *const jh[] = {"status",    "tickets",  "label PSI", "label JS",
                                     "conf. PSI", "conf. JS", "low-conf.", "change",
                                     "new",       "gone",     "reference"};
    static const char *const wh[] = {"window start (UTC)", "s",        "status",    "tickets",
                                     "label PSI",          "label JS", "conf. PSI", "conf. JS",
                                     "low-conf.",          "reference"};
    fprintf(f, "<h2>Drift</h2>\n<p class=\"note\">population stability index (PSI) and "
               "Jensen-Shannon divergence (JS, base 2) of the label mix and of the confidence "
               "histogram against the baseline; drift when a PSI reaches 0.25, watch from 0.1 "
               "(migration 004_drift.sql).</p>\n<h3>The job's tickets</h3>\n");
    if (PQntuples(jd))
        report_table(f, jd, jh, 11);
    else {
        fprintf(f, "<p class=\"note\">no pinned baseline for tenant ");
        report_html_text(f, tenant);
        fprintf(f, " and this model (reclass drift baseline pins one)</p>\n");
    }
    fprintf(f, "<h3>Drift windows of tenant ");
    report_html_text(f, tenant);
    fprintf(f, " during the job</h3>\n");
    int n = PQntuples(w);
    if (!n) {
        fprintf(f, "<p class=\"note\">no drift windows recorded during the job</p>\n");
        return;
    }
    report_table(f, w, wh, 10);
    double *x = calloc((size_t)n, sizeof *x), *lp = calloc((size_t)n, sizeof *lp),
           *cp = calloc((size_t)n, sizeof *cp);
    if (x && lp && cp && n > 1) {
        for (int i = 0; i < n; i++) {
            x[i] = report_d(w, i, 10);
            lp[i] = report_d(w, i, 4);
            cp[i] = report_d(w, i, 6);
        }
        report_series_t s[2] = {{"label PSI", x, lp, n}, {"confidence PSI", x, cp, n}};
        const double th[2] = {0.1, 0.25};
        report_svg_lines(f, 2, s, REPORT_FMT_SCORE, 2, th);
    }
    free(x);
    free(lp);
    free(cp);
}

static const char q_throughput[] =
    "WITH r AS (SELECT greatest(1, ceil(extract(epoch FROM max(classified_at) -"
    " min(classified_at)) / 60))::int AS w FROM ticket_results WHERE job_id = $1)"
    " SELECT floor(extract(epoch FROM t.classified_at) / r.w) * r.w AS x, count(*)::float8 / r.w"
    " FROM ticket_results t, r WHERE t.job_id = $1 GROUP BY x, r.w ORDER BY x";

/* gpu_memory's samples during the job, one encoder's after another ((worker, encoder, device),
 * migration 019: NULL in rows before it, one encoder a worker), each in time order, with the
 * encoder's batches of that time (the batches rows of its worker, encoder and device: NULL
 * when none names it, as before migration 023; the device NULL on the host in both tables). */
static const char q_memory[] =
    "WITH j AS (SELECT first_seen - interval '5 seconds' AS t0,"
    " coalesce(completed_at, now()) + interval '5 seconds' AS t1 FROM jobs WHERE job_id = $1),"
    " b AS (SELECT b.worker, b.encoder, b.device, count(*) AS n, sum(b.tickets) AS tickets"
    " FROM batches b, j WHERE b.at BETWEEN j.t0 AND j.t1 AND b.worker IS NOT NULL"
    " GROUP BY 1, 2, 3)"
    " SELECT extract(epoch FROM g.at), g.device_used_bytes, g.arena_bytes, g.weights_bytes,"
    " g.allocations_after_init, g.worker, g.encoder, g.device, b.n, b.tickets"
    " FROM j CROSS JOIN gpu_memory g LEFT JOIN b ON b.worker = g.worker"
    " AND b.encoder IS NOT DISTINCT FROM g.encoder AND b.device IS NOT DISTINCT FROM g.device"
    " WHERE g.at BETWEEN j.t0 AND j.t1 ORDER BY g.worker, g.encoder, g.device, g.at";

enum {
    MEM_AT,
    MEM_USED,
    MEM_ARENA,
    MEM_WEIGHTS,
    MEM_ALLOCS,
    MEM_WORKER,
    MEM_ENCODER,
    MEM_DEVICE,
    MEM_BATCHES,
    MEM_TICKETS
};

/* The series the memory charts draw (one color each); the table lists every encoder. */
#define REPORT_MEM_CHARTED 8

/* One encoder's samples: rows [first, first + n) of q_memory. */
typedef struct {
    int first, n;
    char name[400]; /* its series' name */
    double arena0, arena_min, arena_max, used_max, weights, allocs;
} report_enc_t;

/* Whether rows i and j of q_memory are one encoder's (NULL equal to NULL). */
static int report_mem_same(const PGresult *r, int i, int j) {
    for (int c = MEM_WORKER; c <= MEM_DEVICE; c++) {
        if (PQgetisnull(r, i, c) != PQgetisnull(r, j, c)) return 0;
        if (!PQgetisnull(r, i, c) && strcmp(PQgetvalue(r, i, c), PQgetvalue(r, j, c))) return 0;
    }
    return 1;
}

/* q_memory's rows cut into encoders (enc: room for each); their count. */
static int report_mem_encoders(const PGresult *r, report_enc_t *enc) {
    int rows = PQntuples(r), n = 0, workers = 0;
    for (int i = 0; i < rows; i++) {
        if (i == 0 || !report_mem_same(r, i - 1, i)) {
            double arena = report_d(r, i, MEM_ARENA);
            enc[n++] = (report_enc_t){.first = i, .arena0 = arena, .arena_min = arena};
            workers += i == 0 ||
                       strcmp(PQgetvalue(r, i - 1, MEM_WORKER), PQgetvalue(r, i, MEM_WORKER)) != 0;
        }
        report_enc_t *x = &enc[n - 1];
        x->n++;
        double arena = report_d(r, i, MEM_ARENA);
        x->arena_min = arena < x->arena_min ? arena : x->arena_min;
        x->arena_max = arena > x->arena_max ? arena : x->arena_max;
        x->used_max = fmax(x->used_max, report_d(r, i, MEM_USED));
        x->allocs = fmax(x->allocs, report_d(r, i, MEM_ALLOCS));
        x->weights = report_d(r, i, MEM_WEIGHTS);
    }
    for (int k = 0; k < n; k++) { /* the worker named where the job had several */
        int i = enc[k].first;
        snprintf(enc[k].name, sizeof enc[k].name, "%s%sencoder %s, device %s",
                 workers > 1 ? PQgetvalue(r, i, MEM_WORKER) : "", workers > 1 ? " " : "",
                 report_v(r, i, MEM_ENCODER), report_v(r, i, MEM_DEVICE));
    }
    return n;
}

/* The device memory section: arena and device used over time, a line per encoder, and a row
 * per encoder (its arena must stay flat, with no allocation after start-up) with the batches
 * it ran meanwhile. */
static void report_memory(FILE *f, const PGresult *r) {
    static const char *const heads[] = {"worker",     "encoder",          "device",
                                        "samples",    "weights",          "arena",
                                        "arena peak", "device used peak", "allocations after init",
                                        "flat",       "batches",          "tickets"};
    int rows = PQntuples(r), keys = 0;
    for (int i = 0; i < rows; i++)
        keys += i == 0 || !report_mem_same(r, i - 1, i);
    report_enc_t *enc = calloc((size_t)keys + 1, sizeof *enc); /* (keys) */
    double *v = calloc(3 * (size_t)rows + 1, sizeof *v);       /* (3, rows): x, arena, used */
    report_series_t s[2 * REPORT_MEM_CHARTED];                 /* arena's, then used's */
    if (!enc || !v) {
        free(enc);
        free(v);
        return;
    }
    for (int i = 0; i < rows; i++) {
        v[i] = report_d(r, i, MEM_AT);
        v[rows + i] = report_d(r, i, MEM_ARENA);
        v[2 * rows + i] = report_d(r, i, MEM_USED);
    }
    int n = report_mem_encoders(r, enc), charted = n < REPORT_MEM_CHARTED ? n : REPORT_MEM_CHARTED;
    for (int k = 0; k < charted; k++) {
        const report_enc_t *x = &enc[k];
        s[k] = (report_series_t){x->name, v + x->first, v + rows + x->first, x->n};
        s[REPORT_MEM_CHARTED + k] =
            (report_series_t){x->name, v + x->first, v + 2 * rows + x->first, x->n};
    }
    if (n > charted)
        fprintf(f,
                "<p class=\"note\">the first %d of %d encoders charted; the table lists "
                "all</p>\n",
                charted, n);
    fprintf(f, "<h3>Arena, per encoder</h3>\n");
    report_svg_lines(f, charted, s, REPORT_FMT_BYTES, 0, NULL);
    fprintf(f, "<h3>Device used, per encoder (the device's, as each encoder on it saw it)"
               "</h3>\n");
    report_svg_lines(f, charted, s + REPORT_MEM_CHARTED, REPORT_FMT_BYTES, 0, NULL);
    fprintf(f, "<table class=\"mem\"><tr>");
    for (size_t c = 0; c < sizeof heads / sizeof heads[0]; c++)
        fprintf(f, "<th>%s</th>", heads[c]);
    fprintf(f, "</tr>\n");
    double allocs = 0;
    for (int k = 0; k < n; k++) {
        const report_enc_t *x = &enc[k];
        const int i = x->first;
        char b[4][32];
        report_fmt_value(b[0], sizeof b[0], x->weights, REPORT_FMT_BYTES);
        report_fmt_value(b[1], sizeof b[1], x->arena0, REPORT_FMT_BYTES);
        report_fmt_value(b[2], sizeof b[2], x->arena_max, REPORT_FMT_BYTES);
        report_fmt_value(b[3], sizeof b[3], x->used_max, REPORT_FMT_BYTES);
        fprintf(f, "<tr><td>");
        report_html_text(f, report_v(r, i, MEM_WORKER));
        fprintf(f, "</td><td>%s</td><td>%s</td><td>%d</td>", report_v(r, i, MEM_ENCODER),
                report_v(r, i, MEM_DEVICE), x->n);
        fprintf(f, "<td>%s</td><td>%s</td><td>%s</td><td>%s</td><td>%.0f</td><td>%s</td>", b[0],
                b[1], b[2], b[3], x->allocs,
                x->arena_min == x->arena_max && x->allocs == 0 ? "yes" : "no");
        fprintf(f, "<td>%s</td><td>%s</td></tr>\n", report_v(r, i, MEM_BATCHES),
                report_v(r, i, MEM_TICKETS));
        allocs = fmax(allocs, x->allocs);
    }
    fprintf(f, "</table>\n");
    fprintf(f,
            "<p>allocations_after_init: at most <b>%.0f</b> over %d samples "
            "(must stay 0: no device allocation after start-up)</p>\n",
            allocs, rows);
    fprintf(f, "<p class=\"note\">batches, tickets: what each encoder ran in that time (other "
               "jobs' tickets included; - where no batches row names the encoder, as before "
               "migration 023)</p>\n");
    free(enc);
    free(v);
}

/* Columns 1..ncols of r as series against column 0. */
static void report_lines_of(FILE *f, const PGresult *r, int ncols, const char *const *names,
                            report_fmt_t fmt) {
    int n = PQntuples(r);
    double *buf = calloc((size_t)(n + 1) * (size_t)(ncols + 1), sizeof *buf);
    report_series_t s[8];
    if (!buf || ncols > 8) {
        free(buf);
        return;
    }
    for (int c = 0; c <= ncols; c++)
        for (int i = 0; i < n; i++)
            buf[(size_t)c * (size_t)n + (size_t)i] = report_d(r, i, c);
    for (int c = 0; c < ncols; c++)
        s[c] = (report_series_t){names[c], buf, buf + (size_t)(c + 1) * (size_t)n, n};
    report_svg_lines(f, ncols, s, fmt, 0, NULL);
    free(buf);
}

common_status_t report_job_write(PGconn *conn, const char *job, FILE *f, common_err_t *e) {
    PGresult *r[7] = {NULL};
    const char *const sql[7] = {q_job,     REPORT_HIST_SQL, q_least, q_job_drift,
                                q_windows, q_throughput,    q_memory};
    common_status_t rc = COMMON_OK;
    for (int i = 0; i < 7 && !rc; i++)
        if (!(r[i] = report_q(conn, sql[i], job, e))) rc = e->code;
    if (!rc && PQgetisnull(r[0], 0, 1) && report_d(r[0], 0, 5) == 0)
        rc = common_err_set(e, COMMON_USAGE,
                            "job %s has no row in jobs and no tickets: check the id", job);
    PGresult *labels = rc ? NULL
                          : report_q(conn,
                                     "SELECT label, count(*) FROM ticket_results WHERE job_id = $1"
                                     " GROUP BY label ORDER BY 2 DESC, 1",
                                     job, e);
    if (!rc && !labels) rc = e->code;
    if (!rc) {
        char when[32];
        time_t now = time(NULL);
        struct tm tm;
        gmtime_r(&now, &tm);
        strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S UTC", &tm);
        fprintf(f, "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
                   "<title>reclass report: job ");
        report_html_text(f, job);
        fprintf(f, "</title>\n<style>%s</style></head><body>\n", report_style);
        report_summary(f, r[0], job);
        report_drift(f, r[3], r[4], report_v(r[0], 0, 0));
        report_labels(f, labels, report_d(r[0], 0, 5));
        report_hist(f, r[1]);
        static const char *const lh[] = {"ticket",    "label",       "confidence",
                                         "runner-up", "runner-up p", "truncated"};
        fprintf(f, "<h2>Least confident tickets</h2>\n");
        report_table(f, r[2], lh, 6);
        fprintf(f, "<h2>Throughput (tickets/s, from the rows' classified_at)</h2>\n");
        static const char *const th[] = {"tickets/s"};
        report_lines_of(f, r[5], 1, th, REPORT_FMT_COUNT);
        fprintf(f, "<h2>Device memory (gpu_memory samples)</h2>\n");
        report_memory(f, r[6]);
        fprintf(f, "<p class=\"note\">generated %s by reclass report</p>\n</body></html>\n", when);
    }
    PQclear(labels);
    for (int i = 0; i < 7; i++)
        PQclear(r[i]);
    return rc;
}
