#!/usr/bin/env bash
# Migration 009 at scale, in a throwaway PostgreSQL (started here, always stopped); not timed.
# (1) Upgrade: a database at today's schema (every migration before 009) holding rows of every
#     table is migrated; nothing is lost (row-for-row digests before and after), the roll-ups
#     equal sums of the raw windows, every tenant gets a drift_status row; 010's judging (stored
#     references moved a window at a time) gives 004's scores.
# (2) Plans: with enough rows that the planner would scan (2,000 tenants, 6 hours of 5-minute
#     windows, 150k results of 3,000 jobs over three months), the user-facing and per-window
#     queries, and the statements the drift functions run inside (auto_explain), use indexes
#     or partition pruning: no sequential scan of drift_windows, drift_judged, their
#     partitions, the roll-ups, drift_status, ticket_results' partitions, job_info or
#     job_progress.
# (3) 011: the judge stores every judged window's scores (equal to drift_scores'), rolls them
#     up by hour (and, 015, by day; 017: days once an hour) and a pinned baseline re-scores them; the
#     report reads them.
#   test_drift_scale.sh RECLASS_BIN
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
src=$(cd "$here/.." && pwd)
bin=${1:?reclass binary}
tmp=$(mktemp -d /tmp/reclass-drift-scale.XXXXXX)
cleanup() {
    bash "$here/lib/pg_tmp.sh" stop "$tmp/pg" || true
    rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
url=$(bash "$here/lib/pg_tmp.sh" start "$tmp/pg") || { echo "could not start PostgreSQL"; exit 1; }
failed=0
ok() { echo "ok   $1"; }
bad() { failed=$((failed + 1)); echo "FAIL $1"; [ -n "${2:-}" ] && sed 's/^/     /' <<<"$2"; }
check() { if [ "$2" = "$3" ]; then ok "$1"; else bad "$1" "expected [$2], got [$3]"; fi; }
sql() { psql -X -qtA -v ON_ERROR_STOP=1 "$url" -c "$1"; }

# ---- (1) upgrade ---------------------------------------------------------------------------
mkdir -p "$tmp/before"
for f in "$src"/migrations/[0-9]*_*.sql; do
    [ "$(basename "$f" | cut -c1-3)" -lt 9 ] && cp "$f" "$tmp/before/"
done
"$bin" migrate --db "$url" --migrations "$tmp/before" >/dev/null || { echo "FAIL migrate before 009"; exit 1; }
sql "INSERT INTO ticket_results (job_id, ticket_id, tenant, label, label_id, confidence, tokens, model, classified_at)
     SELECT 'job' || (i % 40), 't' || i, 'tenant' || (i % 40 % 7), 'l' || (i % 9), i % 9, (i % 100) / 100.0, 30, 'm',
            now() - i * interval '13 s' FROM generate_series(1, 20000) i" >/dev/null
sql "UPDATE job_info SET total = 500" >/dev/null
sql "INSERT INTO job_progress (job_id, writer, done) SELECT job_id, 'w:1:0', 500 FROM job_info" >/dev/null
sql "INSERT INTO drift_windows (window_start, window_s, tenant, model, worker, overflow, tickets, label_counts,
                                confidence_hist, confidence_sum, mean_confidence, truncated, tokens, updated_at)
     SELECT date_trunc('minute', now()) - g * interval '1 minute', 60, 'tenant' || (g % 7), 'm', 'w' || (g % 2),
            g % 50 = 0, 10 + g % 3, jsonb_build_object('l0', 5, 'l' || (1 + g % 8), 5 + g % 3),
            ARRAY[0, 0, 0, 0, 0, 1, 2, 3, 4, g % 3], 8.5, 0.85, g % 2, 300, now()
     FROM generate_series(0, 12 * 24 * 60) g" >/dev/null
sql "INSERT INTO drift_baselines (tenant, model, label_counts, confidence_hist, tickets, source)
     VALUES ('tenant3', 'm', '{\"l0\": 50, \"l1\": 50}', '{0,0,0,0,0,10,20,30,40,0}', 100, 'windows')" >/dev/null
digest() {
    sql "SELECT '$1 ' || count(*) || ' ' || coalesce(md5(string_agg(r::text, '|' ORDER BY r::text)), '-') FROM (SELECT $2 FROM $1) r"
}
snap() {
    digest ticket_results "job_id, ticket_id, tenant, label, label_id, confidence, tokens, model, classified_at"
    digest drift_windows "window_start, window_s, tenant, model, worker, overflow, tickets, label_counts, confidence_hist, confidence_sum, mean_confidence, truncated, tokens, updated_at"
    digest jobs "job_id, tenant, total, done, completed_at"
    digest drift_baselines "id, tenant, model, label_counts, confidence_hist, tickets"
    digest drift_by_window "window_start, tenant, model, tickets, workers"
}
before=$(snap)
# scores of whole hours (a bucket holding p_since is now whole), to 9 decimals (sums may add in
# another order)
scores="SELECT md5(string_agg(concat_ws(',', bucket_start, tenant, tickets, round(label_psi::numeric, 9),
               round(confidence_psi::numeric, 9), round(label_js::numeric, 9), status, reference, ref_tickets), '|'
               ORDER BY bucket_start, tenant)) FROM drift_scores('hour', date_trunc('hour', now() - interval '3 days'))"
old_scores=$(sql "$scores")
out=$("$bin" migrate --db "$url" --migrations "$src/migrations" 2>&1) || bad "migrate to 009" "$out"
after=$(snap)
check "every row of every table kept" "$before" "$after"
check "drift_scores('hour') unchanged by the roll-ups" "$old_scores" \
    "$(sql "$scores")"
check "drift_windows is partitioned" "p" "$(sql "SELECT relkind FROM pg_class WHERE relname = 'drift_windows'")"
check "old rows sit in daily partitions, not the default" "0" "$(sql "SELECT count(*) FROM drift_windows_default")"
check "hour roll-ups equal the raw sums" "0" "$(sql "SELECT count(*) FROM
    (SELECT tenant, model, date_trunc('hour', window_start, 'UTC') b, sum(tickets) n, drift_labels_sum(label_counts) lc,
            drift_hist_sum(confidence_hist::bigint[]) h, bool_or(overflow) o FROM drift_windows GROUP BY 1, 2, 3) r
    FULL JOIN drift_hourly d ON d.tenant = r.tenant AND d.model = r.model AND d.bucket_start = r.b
    WHERE r.n IS DISTINCT FROM d.tickets OR r.lc IS DISTINCT FROM d.label_counts OR r.h IS DISTINCT FROM d.confidence_hist
       OR r.o IS DISTINCT FROM d.overflow")"
check "day roll-ups equal the raw sums" "0" "$(sql "SELECT count(*) FROM
    (SELECT tenant, model, date_trunc('day', window_start, 'UTC') b, sum(tickets) n, drift_labels_sum(label_counts) lc
     FROM drift_windows GROUP BY 1, 2, 3) r
    FULL JOIN drift_daily d ON d.tenant = r.tenant AND d.model = r.model AND d.bucket_start = r.b
    WHERE r.n IS DISTINCT FROM d.tickets OR r.lc IS DISTINCT FROM d.label_counts")"
check "a drift_status row per tenant" "7" "$(sql "SELECT count(*) FROM drift_status")"
check "tenant3 judged against its pinned baseline" "t" \
    "$(sql "SELECT reference LIKE 'baseline%' FROM drift_status WHERE tenant = 'tenant3'")"
# an upsert that adds to a window (as a second write of the same worker does) and a delete
sql "INSERT INTO drift_windows AS d (window_start, window_s, tenant, model, worker, tickets, label_counts, confidence_hist)
     SELECT window_start, 60, tenant, model, worker, 4, '{\"zz\": 4}', '{0,0,0,0,0,0,0,0,0,4}' FROM drift_windows
     WHERE tenant = 'tenant1' AND window_start > now() - interval '3 hours'
     ON CONFLICT (window_start, tenant, model, worker) DO UPDATE SET tickets = d.tickets + excluded.tickets,
        label_counts = drift_labels_add(d.label_counts, excluded.label_counts),
        confidence_hist = ARRAY(SELECT a + b FROM unnest(d.confidence_hist, excluded.confidence_hist) u(a, b))" >/dev/null
sql "DELETE FROM drift_windows WHERE tenant = 'tenant2' AND window_start < now() - interval '5 days'" >/dev/null
check "roll-ups follow upserts and deletes" "0" "$(sql "SELECT count(*) FROM
    (SELECT tenant, model, date_trunc('hour', window_start, 'UTC') b, sum(tickets) n, drift_labels_sum(label_counts) lc
     FROM drift_windows GROUP BY 1, 2, 3) r
    FULL JOIN (SELECT * FROM drift_hourly WHERE tickets <> 0) d ON d.tenant = r.tenant AND d.model = r.model AND d.bucket_start = r.b
    WHERE r.n IS DISTINCT FROM d.tickets OR r.lc IS DISTINCT FROM d.label_counts")"
# 017: the days take whole hours once an hour. Windows of the next hours (each statement a later
# hour than the mark), then a late one of an hour already in its day: the days hold the hours
# before the mark, drift_hourly the rest, and the range sums below read both
for k in 1 2 3; do
    sql "INSERT INTO drift_windows (window_start, window_s, tenant, model, worker, tickets, label_counts, confidence_hist)
         SELECT date_trunc('hour', now()) + $k * interval '1 hour' + g * interval '1 minute', 60, 'tenant' || (g % 7), 'm', 'w0',
                3 + g % 4, jsonb_build_object('l' || (g % 5), 3 + g % 4), ARRAY[0, 0, 0, 0, 0, 0, 0, 0, 0, 3 + g % 4]
         FROM generate_series(0, 29) g" >/dev/null
done
sql "INSERT INTO drift_windows (window_start, window_s, tenant, model, worker, tickets, label_counts, confidence_hist)
     VALUES (date_trunc('hour', now()) + interval '2 hours 40 minutes', 60, 'tenant1', 'm', 'w1', 2, '{\"late\": 2}',
             '{0,0,0,0,0,0,0,0,0,2}')" >/dev/null
# (020: the days take whole days, once a day: the mark moves to the newest day written, from
# where 017 left it, after the newest hour)
check "the day roll-up mark follows the newest day written" "t" \
    "$(sql "SELECT done_before = greatest(date_trunc('hour', now()) + interval '1 hour',
                                          date_trunc('day', date_trunc('hour', now()) + interval '3 hours', 'UTC'))
            FROM drift_rollup_mark WHERE rollup = 'drift_daily'")"
check "days hold every hour before the mark, none after" "0" "$(sql "SELECT count(*) FROM
    (SELECT tenant, model, date_trunc('day', window_start, 'UTC') b, sum(tickets) n, drift_labels_sum(label_counts) lc
     FROM drift_windows WHERE window_start < (SELECT done_before FROM drift_rollup_mark WHERE rollup = 'drift_daily')
     GROUP BY 1, 2, 3) r
    FULL JOIN (SELECT * FROM drift_daily WHERE tickets <> 0) d ON d.tenant = r.tenant AND d.model = r.model AND d.bucket_start = r.b
    WHERE r.n IS DISTINCT FROM d.tickets OR r.lc IS DISTINCT FROM d.label_counts")"
check "range sums from roll-ups equal raw sums (200 ragged ranges)" "0" "$(sql "SELECT count(*)
    FROM generate_series(1, 200) k,
         LATERAL (SELECT now() - k * interval '47 minutes 13 seconds' AS f, now() - k * interval '7 minutes' + interval '29 hours' AS t) x,
         LATERAL drift_windows_sum('tenant1', 'm', x.f, x.t) a,
         LATERAL (SELECT nullif(drift_labels_sum(label_counts), '{}') lc, drift_hist_sum(confidence_hist::bigint[]) h,
                         sum(tickets)::bigint n FROM drift_windows
                  WHERE tenant = 'tenant1' AND model = 'm' AND window_start >= x.f AND window_start < x.t) b
    WHERE a.label_counts IS DISTINCT FROM b.lc OR a.confidence_hist IS DISTINCT FROM b.h OR a.tickets IS DISTINCT FROM b.n")"
# 010: drift_status (stored references, scores over bins grouped by tenant) equals 004's scores
# (drift_scores_between) of each tenant's newest window: references summed afresh, then moved
# one window on, then after a late write and a delete inside the references
judged_vs_scores() {
    sql "SELECT count(*) FILTER (WHERE s.status IS DISTINCT FROM x.status OR s.tickets <> x.tickets
             OR s.reference IS DISTINCT FROM x.reference
             OR round(s.label_psi::numeric, 9) IS DISTINCT FROM round(x.label_psi::numeric, 9)
             OR round(s.confidence_psi::numeric, 9) IS DISTINCT FROM round(x.confidence_psi::numeric, 9))
             || ' of ' || count(*)
         FROM drift_status s CROSS JOIN LATERAL drift_scores_between('window', s.window_start,
              s.window_start + interval '1 microsecond', s.tenant, s.model) x"
}
next_window() {
    sql "INSERT INTO drift_windows (window_start, window_s, tenant, model, worker, tickets, label_counts, confidence_hist)
         SELECT (SELECT max(window_start) FROM drift_windows) + interval '1 minute', 60, 'tenant' || k, 'm', 'w0',
                150 + 10 * k, jsonb_build_object('l0', 100, 'l' || k, 50 + 10 * k), ARRAY[0, 0, 0, 0, 10, 10, 20, 30, 40, 40 + 10 * k]
         FROM generate_series(0, 7) k" >/dev/null
}
n_judged=$(sql "SELECT count(*) FROM drift_status")
next_window; sql "SELECT drift_status_refresh('m', now() - interval '1 day')" >/dev/null
check "judged = drift_scores, references summed afresh" "0 of $((n_judged + 1))" "$(judged_vs_scores)"
next_window; sql "SELECT drift_status_refresh('m', now() - interval '1 day')" >/dev/null
check "judged = drift_scores, references moved a window on" "0 of $((n_judged + 1))" "$(judged_vs_scores)"
sql "UPDATE drift_windows SET tickets = tickets + 40, label_counts = label_counts || '{\"l9\": 40}'
     WHERE tenant IN ('tenant2', 'tenant3') AND window_start BETWEEN now() - interval '3 days' AND now() - interval '2 days'" >/dev/null
sql "DELETE FROM drift_windows WHERE tenant = 'tenant4' AND window_start BETWEEN now() - interval '5 hours' AND now() - interval '4 hours'" >/dev/null
next_window; sql "SELECT drift_status_refresh('m', now() - interval '1 day')" >/dev/null
check "judged = drift_scores after writes inside the references" "0 of $((n_judged + 1))" "$(judged_vs_scores)"
# 011: every judged window's stored scores (all of drift_compare's columns) equal 004's for the
# newest windows, and its hour counts each window once (the step above judged one window again)
stored_vs_scores() {
    sql "SELECT count(*) FILTER (WHERE j.status IS DISTINCT FROM x.status OR j.tickets <> x.tickets
             OR j.reference IS DISTINCT FROM x.reference OR j.ref_tickets IS DISTINCT FROM x.ref_tickets
             OR j.labels_new IS DISTINCT FROM x.labels_new OR j.labels_gone IS DISTINCT FROM x.labels_gone
             OR (SELECT bool_or(round(a::numeric, 9) IS DISTINCT FROM round(b::numeric, 9)) FROM unnest(
                   ARRAY[j.label_psi, j.label_js, j.confidence_psi, j.confidence_js, j.low_confidence_share, j.low_confidence_change],
                   ARRAY[x.label_psi, x.label_js, x.confidence_psi, x.confidence_js, x.low_confidence_share, x.low_confidence_change]) u(a, b)))
             || ' of ' || count(*)
         FROM drift_judged j CROSS JOIN LATERAL drift_scores_between('window', j.window_start,
              j.window_start + interval '1 microsecond', j.tenant, j.model) x
         WHERE $1"
}
check "stored scores = drift_scores (newest windows)" "0 of $((n_judged + 1))" \
    "$(stored_vs_scores "(j.tenant, j.model, j.window_start) IN (SELECT tenant, model, window_start FROM drift_status)")"
check "hourly roll-up of the stored scores counts each window once" "0" "$(sql "SELECT count(*) FROM
    (SELECT tenant, model, date_trunc('hour', window_start, 'UTC') b, count(*) n, sum(tickets) t,
            count(*) FILTER (WHERE status = 'drift') d, max(rank) r FROM drift_judged GROUP BY 1, 2, 3) a
    FULL JOIN drift_judged_hourly h ON h.tenant = a.tenant AND h.model = a.model AND h.bucket_start = a.b
    WHERE a.n IS DISTINCT FROM h.windows OR a.t IS DISTINCT FROM h.tickets OR a.d IS DISTINCT FROM h.drifting
       OR a.r IS DISTINCT FROM h.rank")"
# an hour rolled up long ago (its windows past the retention) outlives the re-scoring
sql "INSERT INTO drift_judged_hourly VALUES ('tenant5', 'm', date_trunc('hour', now() - interval '90 days'), 1, 1, 9, 4,
     1.5, 0.5, date_trunc('hour', now() - interval '90 days'), 'trailing 7 days', date_trunc('hour', now() - interval '90 days'))" >/dev/null
sql "SELECT drift_baseline_pin_windows('tenant5', 'm', now() - interval '3 days', now() - interval '2 days')" >/dev/null
check "pinning a baseline re-scores the tenant's stored windows" "0 of $(sql "SELECT count(DISTINCT window_start) FROM drift_windows WHERE tenant = 'tenant5'")" \
    "$(stored_vs_scores "j.tenant = 'tenant5'")"
check "re-scoring keeps the roll-up of hours past the retention" "1" \
    "$(sql "SELECT count(*) FROM drift_judged_hourly WHERE tenant = 'tenant5' AND bucket_start < now() - interval '80 days'")"
check "the report's tenants come from the stored scores" "tenant5 $(sql "SELECT count(DISTINCT window_start) FROM drift_windows WHERE tenant = 'tenant5' AND window_start >= now() - interval '2 days'")" \
    "$(sql "SELECT tenant || ' ' || buckets FROM drift_report_tenants('window', now() - interval '2 days', 'tenant5')")"
# 015: the days of the stored scores sum their hours (but the hour written above by hand); the
# report's tenants over a ragged range (windows, then hours, then whole days) equal sums over
# the stored windows
check "daily roll-up of the stored scores = its hours before the mark (017)" "0" "$(sql "SELECT count(*) FROM
    (SELECT tenant, model, date_trunc('day', bucket_start, 'UTC') b, sum(windows) n, sum(drifting) d, sum(tickets) t,
            max(rank) r, min(first_drift) f FROM drift_judged_hourly WHERE bucket_start > now() - interval '80 days'
              AND bucket_start < (SELECT done_before FROM drift_rollup_mark WHERE rollup = 'drift_judged_daily')
     GROUP BY 1, 2, 3) a
    FULL JOIN (SELECT * FROM drift_judged_daily WHERE bucket_start > now() - interval '80 days') h
        ON h.tenant = a.tenant AND h.model = a.model AND h.bucket_start = a.b
    WHERE a.n IS DISTINCT FROM h.windows OR a.t IS DISTINCT FROM h.tickets OR a.d IS DISTINCT FROM h.drifting
       OR a.r IS DISTINCT FROM h.rank OR a.f IS DISTINCT FROM h.first_drift")"
since="date_trunc('minute', now()) - interval '2 days 3 hours 17 minutes'"
check "the report's tenants over windows, hours and days = sums of the stored windows" "0 of 8" "$(sql "SELECT
    count(*) FILTER (WHERE (r.worst, r.buckets, r.drifting, r.tickets, r.drift_since) IS DISTINCT FROM
                           (x.worst, x.n, x.d, x.t, x.f)) || ' of ' || count(*)
    FROM (SELECT tenant, model, drift_rank_status(max(rank)) worst, count(*) n, count(*) FILTER (WHERE status = 'drift') d,
                 sum(tickets)::bigint t, min(window_start) FILTER (WHERE status = 'drift') f
          FROM drift_judged WHERE window_start >= $since GROUP BY 1, 2) x
    FULL JOIN drift_report_tenants('window', $since) r ON r.tenant = x.tenant AND r.model = x.model")"
check "the report's days = the days of the stored windows" "0 of 8" "$(sql "SELECT
    count(*) FILTER (WHERE (r.buckets, r.tickets) IS DISTINCT FROM (x.n, x.t)) || ' of ' || count(*)
    FROM (SELECT tenant, model, count(DISTINCT date_trunc('day', window_start, 'UTC')) n, sum(tickets)::bigint t
          FROM drift_judged WHERE window_start >= date_trunc('day', $since, 'UTC') GROUP BY 1, 2) x
    FULL JOIN drift_report_tenants('day', $since) r ON r.tenant = x.tenant AND r.model = x.model")"
check "stored references = range sums" "0" "$(sql "SELECT count(*) FROM drift_reference r,
    drift_windows_sum(r.tenant, r.model, r.ref_end - interval '7 days', r.ref_end) f
    WHERE f.tickets IS DISTINCT FROM r.tickets OR f.confidence_hist IS DISTINCT FROM r.confidence_hist
       OR coalesce(f.label_counts, '{}') <> r.label_counts")"
# retention: a window older than the setting goes with its day (one partition), its roll-ups stay
sql "SELECT drift_partitions_ensure(now() - interval '60 days', now() - interval '60 days')" >/dev/null
sql "INSERT INTO drift_windows (window_start, window_s, tenant, model, worker, tickets, label_counts, confidence_hist)
     VALUES (date_trunc('day', now() - interval '60 days') + interval '1 hour', 60, 'old', 'm', 'w', 3, '{\"l0\": 3}', '{0,0,0,0,0,0,0,0,0,3}')" >/dev/null
# (the day's drift_windows and drift_judged partitions)
check "retention drops the days past drift_windows_retention" "2" "$(sql "SELECT drift_partitions_maintain()")"
check "roll-ups outlive the raw windows" "0 3" \
    "$(sql "SELECT (SELECT count(*) FROM drift_windows WHERE tenant = 'old') || ' ' || (SELECT sum(tickets) FROM drift_daily WHERE tenant = 'old')")"

# ---- (2) plans at scale ----------------------------------------------------------------------
sql "INSERT INTO drift_windows (window_start, window_s, tenant, model, worker, tickets, label_counts, confidence_hist)
     SELECT w, 300, format('t%s', lpad(k::text, 4, '0')), 'm', 'w1', 12, jsonb_build_object('l0', 7, 'l' || (1 + k % 9), 5),
            '{0,0,0,0,0,1,2,3,4,2}'
     FROM generate_series(date_trunc('hour', now()) - interval '6 hours', now(), interval '5 minutes') w,
          generate_series(0, 1999) k" >/dev/null
# results of 3,000 jobs first seen over three months (012: a partition each)
sql "SELECT ticket_results_partitions_ensure(now() - interval '3 months', now())" >/dev/null
sql "INSERT INTO job_info (job_id, tenant, total, first_seen)
     SELECT format('big%s', j), format('t%s', lpad((j % 2000)::text, 4, '0')), 0, now() - (j % 3) * interval '1 month'
     FROM generate_series(0, 2999) j" >/dev/null
sql "INSERT INTO ticket_results (job_id, ticket_id, tenant, label, label_id, confidence, tokens, model, classified_at, job_month)
     SELECT format('big%s', i % 3000), 'b' || i, format('t%s', lpad((i % 3000 % 2000)::text, 4, '0')), 'l' || (i % 9),
            i % 9, 0.7, 30, 'm', now() - i * interval '8 s', ticket_results_month(now() - (i % 3000 % 3) * interval '1 month')
     FROM generate_series(1, 150000) i" >/dev/null
sql "SELECT drift_status_refresh('m', now() - interval '2 days')" >/dev/null
# 014: jobs with their activity spread (job_info and job_progress, some completed long ago):
# jobs_recent lists the rows the jobs view lists, in its order
sql "UPDATE job_info SET updated_at = now() - (abs(hashtext(job_id)) % 5000) * interval '1 minute',
         completed_at = CASE WHEN abs(hashtext(job_id)) % 3 = 0 THEN now() - interval '2 days' END
     WHERE job_id LIKE 'big%'" >/dev/null
sql "INSERT INTO job_progress (job_id, writer, done, updated_at)
     SELECT job_id, 'w:' || k, 10, now() - (abs(hashtext(job_id || k)) % 5000) * interval '1 minute'
     FROM job_info, generate_series(1, 3) k WHERE job_id LIKE 'big%' AND abs(hashtext(job_id)) % 4 <> 1" >/dev/null
jobs_rows() { # SQL of rows -> their digest
    sql "SELECT count(*) || ' ' || md5(string_agg(r::text, '|' ORDER BY n)) FROM (SELECT row_number() OVER () n, x AS r FROM ($1) x) y"
}
for args in "NULL 20 false" "NULL 1 true" "NULL 500 true" "'t0042' 20 false" "'t0042' 2 true" "NULL 20 true 'big7'"; do
    set -- $args
    filt="(${1}::text IS NULL OR tenant = ${1}) AND (${4:-NULL}::text IS NULL OR job_id = ${4:-NULL})
          AND ($3 OR completed_at IS NULL OR completed_at > now() - interval '1 day')"
    check "jobs_recent($args) = the jobs view's rows" \
        "$(jobs_rows "SELECT * FROM jobs WHERE $filt ORDER BY updated_at DESC, job_id LIMIT $2")" \
        "$(jobs_rows "SELECT * FROM jobs_recent($1, $2, $3, ${4:-NULL})")"
done
sql "ANALYZE" >/dev/null
# plan NAME SQL: the plan of SQL and of every statement run inside it. enable_seqscan off: a
# sequential scan is then planned only where no index or pruning serves the query, whatever the
# tables' sizes; the newest day's partition is small or large by the time of day (just after
# midnight UTC it holds a few windows, and reading all of them whole is the cheapest plan).
plan() {
    psql -X -qtA "$url" 2>&1 <<EOF
SET enable_seqscan = off;
LOAD 'auto_explain';
SET auto_explain.log_min_duration = 0;
SET auto_explain.log_analyze = on;
SET auto_explain.log_timing = off;
SET auto_explain.log_nested_statements = on;
SET client_min_messages = log;
EXPLAIN $2;
$2;
EOF
}
# the tables that hold rows (an empty partition is scanned in no time, and the planner knows it)
big="($(sql "SELECT string_agg(c.relname, '|') FROM pg_class c
             WHERE c.relname IN ('drift_hourly', 'drift_daily', 'drift_status', 'ticket_results', 'drift_judged_hourly', 'drift_judged_daily',
                                 'job_info', 'job_progress')
                OR (c.relname ~ '^(drift_(windows|judged)|ticket_results)_' AND c.relkind = 'r' AND c.reltuples > 0)"))( |$)"
scanless() { # NAME SQL: no sequential scan of the big tables
    local p
    p=$(plan "$1" "$2")
    if grep -Eq "Seq Scan on $big" <<<"$p"; then
        bad "$1: no sequential scan" "$(grep -E "Seq Scan on $big" <<<"$p" | sort | uniq -c | head)"
    else
        ok "$1: no sequential scan"
    fi
}
scanless "reclass jobs: the listing (jobs_recent)" \
    "SELECT j.job_id, d.status FROM jobs_recent(NULL, 20, false) j LEFT JOIN LATERAL (SELECT z.status FROM drift_status z WHERE z.tenant = j.tenant AND z.window_start > now() - interval '1 day' ORDER BY z.level DESC LIMIT 1) d ON true"
scanless "reclass jobs --tenant T (jobs_recent)" "SELECT count(*) FROM jobs_recent('t0042', 20, true)"
scanless "reclass jobs (drift_status by key)" \
    "SELECT j.job_id, d.status FROM jobs j LEFT JOIN LATERAL (SELECT z.status FROM drift_status z WHERE z.tenant = j.tenant AND z.window_start > now() - interval '1 day' ORDER BY z.level DESC LIMIT 1) d ON true WHERE j.job_id = 'big7'"
scanless "reclass jobs show J: labels" \
    "SELECT label, tickets, mean_confidence FROM job_label_counts WHERE job_id = 'big7' ORDER BY tickets DESC, label LIMIT 10"
scanless "reclass jobs show J: detail" \
    "SELECT count(*) FILTER (WHERE truncated), avg(confidence)::float8, max(classified_at), string_agg(DISTINCT model, ',') FROM ticket_results WHERE job_id = 'big7'"
p=$(plan "a job's results in its month" "SELECT count(*) FROM ticket_results WHERE job_id = 'big7' AND job_month = (SELECT ticket_results_month(first_seen) FROM job_info WHERE job_id = 'big7')")
n=$(grep -E ' on ticket_results_[0-9]{6} .*actual rows' <<<"$p" | grep -oE ' on ticket_results_[0-9]{6}' | sort -u | wc -l)
check "a job's results named with its month: one partition read (pruned at run time)" 1 "$n"
scanless "drift_window_scores, one tenant, last hour" \
    "SELECT count(*) FROM drift_window_scores WHERE tenant = 't0042' AND bucket_start > now() - interval '1 hour'"
scanless "drift_scores('hour', 1 day, one tenant)" \
    "SELECT count(*) FROM drift_scores('hour', now() - interval '1 day', 't0042')"
scanless "one tenant's label mix, 24 h" \
    "SELECT label, count(*) FROM ticket_results WHERE tenant = 't0042' AND classified_at > now() - interval '24 hours' GROUP BY label"
scanless "drift report: one tenant, 7 days (stored scores)" \
    "SELECT count(*) FROM drift_report_tenants('window', now() - interval '7 days', 't0042')"
scanless "drift report: worst windows, 7 days (stored scores)" \
    "SELECT count(*) FROM drift_report_worst('window', now() - interval '7 days')"
scanless "reclass_drift_status: the worst tenants" \
    "SELECT tenant, level FROM drift_status WHERE model = 'm' AND window_start >= now() - interval '10 minutes' ORDER BY level DESC, window_start DESC, tenant LIMIT 64"
# the next window of every tenant: judging it moves each stored reference on (010)
sql "INSERT INTO drift_windows (window_start, window_s, tenant, model, worker, tickets, label_counts, confidence_hist)
     SELECT (SELECT max(window_start) FROM drift_windows WHERE tenant = 't0000') + interval '5 minutes', 300,
            format('t%s', lpad(k::text, 4, '0')), 'm', 'w1', 12, jsonb_build_object('l0', 7, 'l' || (1 + k % 9), 5),
            '{0,0,0,0,0,1,2,3,4,2}'
     FROM generate_series(0, 1999) k" >/dev/null
p=$(plan "judge a window" "SELECT drift_status_refresh('m', now() - interval '10 minutes')")
# partitions holding rows that the statements read (empty future days cost nothing; a join's
# partitions pruned as it runs show as never executed)
full=$(sql "SELECT string_agg(relname, ' ') FROM pg_class WHERE relname ~ '^drift_windows_[0-9]{8}$' AND reltuples > 0")
n=$(grep -v 'never executed' <<<"$p" | grep -oE 'on drift_windows_[0-9]{8}' | sort -u | cut -c4- | grep -cxF -f <(tr ' ' '\n' <<<"$full"))
all=$(wc -w <<<"$full")
if [ "$n" -le 4 ] && [ "$all" -ge 8 ]; then ok "judge a window: $n of the $all partitions holding rows read"; else bad "judge a window reads $n of the $all partitions holding rows"; fi
p=$(grep -v 'never executed' <<<"$p")
grep -Eq "Seq Scan on $big" <<<"$p" && bad "judge a window: a sequential scan" "$(grep -E "Seq Scan on $big" <<<"$p" | sort | uniq -c)" || ok "judge a window: no sequential scan"

[ "$failed" = 0 ] && echo "test_drift_scale: all passed" || echo "test_drift_scale: $failed failed"
exit $((failed > 0))
