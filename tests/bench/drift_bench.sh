#!/usr/bin/env bash
# The user-facing and worker queries of a busy shop, timed on synthetic rows shaped like the
# sink's, loaded with SQL (generate_series) into a throwaway PostgreSQL (tests/lib/pg_tmp.sh,
# default settings but fsync off) or into $RECLASS_BENCH_DB (an empty database).
#   drift_bench.sh RECLASS_BIN [ROWS] [TENANTS] [DAYS] [WINDOW_S]
# ROWS ticket_results rows (default 10,000,000) in ROWS / 1,000 jobs; TENANTS tenants (1,000)
# with one drift window each WINDOW_S seconds (60) over DAYS days (30), one model, one worker.
# Prints a markdown table: each query's median of 3 runs (psql's \timing, or the command's
# wall time), and the row counts. Not a test: run by hand, results in RESULTS-drift.md.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
bin=${1:?reclass binary}
ROWS=${2:-10000000} TENANTS=${3:-1000} DAYS=${4:-30} WINDOW_S=${5:-60}
JOBS=$((ROWS / 1000))
[ "$JOBS" -ge 1 ] || { echo "ROWS must be >= 1000" >&2; exit 2; }
tmp=$(mktemp -d /tmp/reclass-drift-bench.XXXXXX)
cleanup() {
    [ -n "${RECLASS_BENCH_DB:-}" ] || bash "$here/../lib/pg_tmp.sh" stop "$tmp/pg" || true
    rm -rf "$tmp"
}
trap cleanup EXIT
url=${RECLASS_BENCH_DB:-$(bash "$here/../lib/pg_tmp.sh" start "$tmp/pg")}
# RECLASS_BENCH_REUSE=1: $RECLASS_BENCH_DB already holds an earlier run's rows (same
# arguments): time the queries again without loading
reuse=${RECLASS_BENCH_REUSE:-}
[ -z "$reuse" ] || [ -n "${RECLASS_BENCH_DB:-}" ] || { echo "RECLASS_BENCH_REUSE needs RECLASS_BENCH_DB" >&2; exit 2; }
"$bin" migrate --db "$url" --migrations "$here/../../migrations" >/dev/null
sql() { psql -X -qtA -v ON_ERROR_STOP=1 "$url" -c "$1"; }
now_s() { date +%s.%N; }

# ---- load --------------------------------------------------------------------------------
t0=$(now_s) t1=$t0
if [ -z "$reuse" ]; then
# jobs: job j belongs to tenant j % TENANTS, its 1,000 tickets classified over an hour, the
# jobs spread evenly over the DAYS days (job 1 the newest)
sql "INSERT INTO job_info (job_id, tenant, total, first_seen, completed_at, updated_at)
     SELECT format('job-%s', lpad(j::text, 6, '0')), format('tenant%s', lpad((j % $TENANTS)::text, 4, '0')),
            1000, t, t + interval '1 hour', t + interval '1 hour'
     FROM generate_series(1, $JOBS) j, LATERAL (SELECT now() - (j - 1) * interval '$DAYS days' / $JOBS
                                                       - interval '1 hour' AS t) x"
sql "INSERT INTO job_progress (job_id, writer, done, updated_at)
     SELECT job_id, 'bench:1:0', total, updated_at FROM job_info"
# the months of the jobs' first records (ticket_results' partitions)
sql "SELECT ticket_results_partitions_ensure(now() - interval '$((DAYS + 1)) days', now())" >/dev/null
chunk=$(( JOBS < 1000 ? JOBS : 1000 ))
for ((lo = 1; lo <= JOBS; lo += chunk)); do
    hi=$(( lo + chunk - 1 < JOBS ? lo + chunk - 1 : JOBS ))
    sql "INSERT INTO ticket_results (job_id, ticket_id, tenant, label, label_id, confidence, tokens,
                                     model, \"partition\", \"offset\", enqueued_at, classified_at, job_month)
         SELECT j.job_id, 't' || i, j.tenant, 'l' || (h % 20), h % 20, 0.5 + (h % 50) / 100.0,
                20 + h % 200, 'm', i % 12, i, j.first_seen + i * interval '3.6 s' - interval '1 s',
                j.first_seen + i * interval '3.6 s', ticket_results_month(j.first_seen)
         FROM job_info j, generate_series(0, 999) i, LATERAL (SELECT abs(hashtext(j.job_id || i)) AS h) x
         WHERE j.job_id BETWEEN format('job-%s', lpad('$lo', 6, '0')) AND format('job-%s', lpad('$hi', 6, '0'))"
done
t1=$(now_s)
# drift windows, one statement per day (the roll-up trigger sums each statement): tenant k's
# label mix and confidences vary with the window, tenant0007 shifts in its last day
per_day=$((86400 / WINDOW_S))
# a partition per loaded day, as drift_partitions_maintain keeps them for a running worker
sql "SELECT drift_partitions_ensure(now() - interval '$((DAYS + 1)) days', now())" >/dev/null
for ((d = DAYS; d >= 1; d--)); do
    sql "INSERT INTO drift_windows (window_start, window_s, tenant, model, worker, tickets,
                                    label_counts, confidence_hist, confidence_sum, tokens)
         SELECT w, $WINDOW_S, format('tenant%s', lpad(k::text, 4, '0')), 'm', 'bench:1',
                a + b + c + e, jsonb_build_object('l0', a, 'l1', b, 'l2', c, 'l' || (3 + k % 17), e),
                ARRAY[0, 0, 0, 0, 1, 1, 2, c, b, a + e - 4], 0.8 * (a + b + c + e), 25 * (a + b + c + e)
         FROM generate_series(date_trunc('day', now()) - interval '$d days',
                              date_trunc('day', now()) - interval '$((d - 1)) days' - interval '1 s',
                              interval '$WINDOW_S s') w,
              generate_series(0, $TENANTS - 1) k,
              LATERAL (SELECT CASE WHEN k = 7 AND w > now() - interval '1 day' THEN 2 ELSE 10 + (k + extract(minute FROM w)::int) % 5 END AS a,
                              5 + k % 3 AS b, 3 + (k * 7 + extract(hour FROM w)::int) % 4 AS c,
                              CASE WHEN k = 7 AND w > now() - interval '1 day' THEN 12 ELSE 2 + k % 2 END AS e) x"
done
# the scores the worker stores as it judges each window (drift_judged, its hourly roll-up):
# synthetic, shaped as the judge writes them (tenant0007 drifts in its last day)
sql "SELECT drift_partitions_ensure(now() - interval '$((DAYS + 1)) days', now())" >/dev/null
for ((d = DAYS; d >= 1; d--)); do
    sql "INSERT INTO drift_judged (window_start, tenant, model, window_s, tickets, status, rank, label_psi,
                                   label_js, confidence_psi, confidence_js, low_confidence_share,
                                   low_confidence_change, labels_new, labels_gone, reference, ref_tickets, overflow)
         SELECT window_start, tenant, model, window_s, tickets, s, drift_rank(s), lp, lp / 4, cp, cp / 4, 0.05,
                0.01, '{}', '{}', 'trailing 7 days', 100000, false
         FROM drift_windows, LATERAL (SELECT (abs(hashtext(tenant || window_start)) % 1000) / 5000.0 AS lp,
                                             (abs(hashtext(window_start || tenant)) % 1000) / 8000.0 AS cp) x,
              LATERAL (SELECT CASE WHEN tenant = 'tenant0007' AND window_start > now() - interval '1 day' THEN 'drift'
                                   WHEN greatest(lp, cp) >= 0.1 THEN 'watch' ELSE 'ok' END AS s) y
         WHERE window_start >= date_trunc('day', now()) - interval '$d days'
           AND window_start < date_trunc('day', now()) - interval '$((d - 1)) days'"
done
sql "INSERT INTO drift_judged_hourly
     SELECT tenant, model, date_trunc('hour', window_start, 'UTC'), count(*), count(*) FILTER (WHERE status = 'drift'),
            sum(tickets), max(rank), max(label_psi), max(confidence_psi), min(window_start) FILTER (WHERE status = 'drift'),
            'trailing 7 days', max(window_start)
     FROM drift_judged GROUP BY 1, 2, 3"
# and their days, every loaded hour in them (as drift_judged_store leaves them: 017's mark after
# the newest hour)
sql "INSERT INTO drift_judged_daily
     SELECT tenant, model, date_trunc('day', bucket_start, 'UTC'), sum(windows), sum(drifting), sum(tickets), max(rank),
            max(label_psi), max(confidence_psi), min(first_drift), 'trailing 7 days', max(reference_at)
     FROM drift_judged_hourly GROUP BY 1, 2, 3"
sql "UPDATE drift_rollup_mark SET done_before = (SELECT max(bucket_start) + interval '1 hour' FROM drift_judged_hourly)
     WHERE rollup = 'drift_judged_daily'"
sql "ANALYZE"
else
    # an earlier run's timed windows (this hour's and later) and the references they moved
    # out: the write then meets no reference, as the worker's newest window does; the marks of
    # the days (017), the hours and the judged hours (020) back to this hour (none of its hours
    # or later ones hold rows now: this hour not closed)
    sql "DELETE FROM drift_windows WHERE window_start >= date_trunc('hour', now(), 'UTC')"
    sql "UPDATE drift_rollup_mark SET done_before = least(done_before, date_trunc('hour', now(), 'UTC'))
         WHERE rollup IN ('drift_hourly', 'drift_daily', 'drift_judged')"
    sql "DELETE FROM drift_reference"
fi
t2=$(now_s)

# ---- queries ------------------------------------------------------------------------------
tenant=tenant0007 job=job-000008 model=m
median3() { sort -g | sed -n 2p; }
median7() { sort -g | sed -n 4p; }
# time_sql NAME [SETUP] SQL: median of 3 server round trips of SQL (psql \timing), ms, each
# after SETUP when given
time_sql() {
    local name=$1 setup=() q=$2 runs
    [ $# -gt 2 ] && { setup=(-c "$2"); q=$3; }
    runs=$(for _ in 1 2 3; do
        PGOPTIONS="-c statement_timeout=120s" psql -X -q "$url" "${setup[@]}" -c '\timing on' -c "$q" 2>/dev/null | sed -n 's/^Time: \([0-9.]*\) ms.*/\1/p' | tail -1
    done | median3)
    printf '| %s | %s ms |\n' "$name" "$runs"
}
# time_cmd NAME CMD...: median of 3 wall times of a reclass command, ms; exit 0 or 3 (drift
# found) counts, a run past 120 s is stopped (server side too: statement_timeout)
time_cmd() {
    local name=$1 runs a b rc
    shift
    runs=$(for _ in 1 2 3; do
        a=$(now_s)
        rc=0
        PGOPTIONS="-c statement_timeout=120s" timeout 125 "$@" >/dev/null 2>&1 || rc=$?
        b=$(now_s)
        if [ "$rc" = 0 ] || [ "$rc" = 3 ]; then echo "($b - $a) * 1000" | bc -l; else echo 999999999; fi
    done | median3)
    if [ "${runs%%.*}" = 999999999 ]; then
        printf '| %s | > 120 s (stopped) |\n' "$name"
    else
        printf '| %s | %.1f ms |\n' "$name" "$runs"
    fi
}
# time_cpu NAME SETUP SQL [K]: median of 7 CPU times (user + system, 10 ms ticks) of the server
# process running SQL (one statement, one row out) K times (default 1; the time of one, to a
# tenth of a tick over K), each in a new session after SETUP: on a shared machine wall time
# counts the other processes' load, CPU time does not (7 runs: the ticks and a loaded
# machine's caches spread it by a few ticks). Only for a server on this machine.
time_cpu() {
    local name=$1 setup=$2 q=$3 k=${4:-1} runs pid x a b cpid i
    runs=$(for _ in 1 2 3 4 5 6 7; do
        coproc P { psql -X -qtA "$url" 2>&1; }
        cpid=$P_PID
        echo "SELECT pg_backend_pid();" >&"${P[1]}"; read -r pid <&"${P[0]}"
        [ -r "/proc/$pid/stat" ] || { echo "\\q" >&"${P[1]}"; wait "$cpid"; echo -1; continue; }
        echo "$setup; SELECT 1;" >&"${P[1]}"; read -r x <&"${P[0]}"
        a=$(awk '{print $14 + $15}' "/proc/$pid/stat")
        for ((i = 0; i < k; i++)); do echo "$q;" >&"${P[1]}"; read -r x <&"${P[0]}"; done
        b=$(awk '{print $14 + $15}' "/proc/$pid/stat")
        echo "\\q" >&"${P[1]}"; wait "$cpid" || true
        awk -v d=$((b - a)) -v t="$(getconf CLK_TCK)" -v k="$k" 'BEGIN { printf "%g\n", d * 1000 / t / k }'
    done | median7)
    [ "${runs%%.*}" -ge 0 ] && printf '| %s | %s ms CPU |\n' "$name" "$runs" || printf '| %s | (server not on this machine) |\n' "$name"
}
# the worker's write of one window of every tenant, then its drift-status statements
win="date_trunc('minute', now())"
window_write="INSERT INTO drift_windows AS d (window_start, window_s, tenant, model, worker, tickets, label_counts, confidence_hist)
    SELECT $win, $WINDOW_S, format('tenant%s', lpad(k::text, 4, '0')), 'm', 'bench:2', 10, '{\"l0\": 6, \"l1\": 4}', '{0,0,0,0,0,1,2,3,4,0}'
    FROM generate_series(0, $TENANTS - 1) k
    ON CONFLICT (window_start, tenant, model, worker) DO UPDATE SET tickets = d.tickets + excluded.tickets"

echo "| query | median of 3 |"
echo "|---|---:|"
time_cmd '`reclass jobs`' "$bin" jobs --db "$url"
time_cmd '`reclass jobs show J`' "$bin" jobs show "$job" --db "$url"
time_cmd '`reclass drift report` (window buckets, 7 days, all tenants)' "$bin" drift report --db "$url"
# the report's two statements (its tenants, its worst windows), server CPU time
time_cpu '`reclass drift report` (window buckets, 7 days), server CPU time' "SET application_name = 'drift_bench'" \
    "SELECT (SELECT count(*) FROM drift_report_tenants('window', drift_since('7 days')))
            + (SELECT count(*) FROM drift_report_worst('window', drift_since('7 days'), NULL, NULL, 20))"
time_cmd '`reclass drift report --bucket hour --since "24 hours"`' "$bin" drift report --db "$url" --bucket hour --since "24 hours"
time_sql '`drift_window_scores`, one tenant, last hour' \
    "SELECT count(*) FROM drift_window_scores WHERE tenant = '$tenant' AND bucket_start > now() - interval '1 hour'"
time_cmd '`reclass report` for one job' "$bin" report --db "$url" --job "$job" --out "$tmp/report.html"
time_sql 'worker: write one window of every tenant' "$window_write"
# (as another worker writes its rows of the window: each run a worker of its own)
time_cpu 'worker: write one window of every tenant, server CPU time' "SET application_name = 'drift_bench'" \
    "WITH w AS (${window_write/\'bench:2\'/\'bench:\' || pg_backend_pid()} RETURNING 1) SELECT count(*) FROM w"
# the worker's statements of one window since 020 (it judges in C: sink/drift_judge.c): the
# window's lock, the rows stored of the window for its tenants (the other workers') and the
# references stored for its hour, the write (the window's rows with their scores, every
# tenant's status; the roll-up trigger: nothing before the hour's close); once an hour every
# tenant's reference (drift_reference_refresh), the hour's roll-up (drift_hours_close) and its
# judged windows (drift_judged_close). Each run a
# window of its own inside this hour (after the REUSE clean-up above: the newest); the scores
# are given. Each timed in a session that ran it once before (rolled back): the worker's
# session is long-lived, its functions and triggers compiled and planned; the per-window ones
# 5 times a session (a tenth of a tick).
labels="ARRAY[$(for i in $(seq 0 19); do printf "'l%d'%s" "$i" "$([ "$i" = 19 ] || echo ,)"; done)]"
tenants="ARRAY(SELECT format('tenant%s', lpad(k::text, 4, '0')) FROM generate_series(0, $TENANTS - 1) k)"
hour="date_trunc('hour', now(), 'UTC')"
# quiet SQL: SQL run for its effects, its rows dropped (time_cpu's set-up prints one row only)
quiet() { printf 'DO $quiet$BEGIN EXECUTE $q$%s$q$; END$quiet$' "$1"; }
refresh="SELECT count(*) FROM drift_reference_refresh('$model', $hour, $labels, $tenants)"
time_cpu 'since 020, once an hour: every tenant'"'"'s reference (`drift_reference_refresh`), server CPU time' \
    "BEGIN; $(quiet "$refresh"); ROLLBACK" "$refresh"
w_rows="CREATE TEMP TABLE wr AS SELECT extract(epoch FROM $win + (pg_backend_pid() % 40) * interval '1 s')::bigint AS b,
    jsonb_agg(jsonb_build_object('tenant', format('tenant%s', lpad(k::text, 4, '0')), 'overflow', false, 'tickets', 10,
    'label_counts', '{\"l0\": 6, \"l1\": 4}'::jsonb, 'confidence_hist', '[0,0,0,0,0,1,2,3,4,0]'::jsonb,
    'confidence_sum', 7.5, 'truncated', 0, 'tokens', 250)
    || jsonb_build_object('status', 'ok', 'label_psi', 0.01, 'label_js', 0.005,
    'confidence_psi', 0.02, 'confidence_js', 0.01, 'low_share', 0.1, 'low_change', 0.0, 'labels_new', '[]'::jsonb,
    'labels_gone', '[]'::jsonb, 'reference', 'trailing 7 days', 'ref_tickets', 100000, 'judged_tickets', 10,
    'judged_overflow', false) ORDER BY k) AS j FROM generate_series(0, $TENANTS - 1) k"
# c_sql NAME: a statement of sink/drift_judge.c as its C string holds it
c_sql() { sed -n "/^static const char $1\\[\\] =/,/;\$/p" "$here/../../sink/drift_judge.c" | sed '1{/=$/d;s/^.*= *//}' | sed 's/^ *"//;s/" *[;]*$//' | tr -d '\n'; }
w_others=$(c_sql SQL_OTHERS) w_refs=$(c_sql SQL_REFS) w_write=$(c_sql SQL_WRITE)
# (each write a worker of its own: K writes in a session insert their rows, as one would)
q_model="'$model'" q_worker="('bench:' || pg_backend_pid() || ':' || nextval('bench_worker'))"
# the read's window and hour as literals, as the worker's parameters (the planner prunes the
# partitions with them): a window of this minute no run writes (the write's are at 0-39 s)
rb=$(sql "SELECT extract(epoch FROM $win)::bigint + 50") hb=$(sql "SELECT extract(epoch FROM $hour)::bigint")
w_others=${w_others//\$1::bigint/$rb}; w_others=${w_others//\$2::text/$q_model}
w_others=${w_others//\$3::jsonb/to_jsonb($tenants)}
w_refs=${w_refs//\$1::text/$q_model}; w_refs=${w_refs//\$2::jsonb/to_jsonb($tenants)}
w_refs=${w_refs//\$3::bigint/$hb}; w_refs=${w_refs//\$4::jsonb/to_jsonb($labels)}
w_write=${w_write//\$1::bigint/(SELECT b FROM wr)}; w_write=${w_write//\$2::integer/$WINDOW_S}
w_write=${w_write//\$3::text/$q_model}; w_write=${w_write//\$4::text/$q_worker}
w_write=${w_write//\$5::jsonb/(SELECT j FROM wr)}
w_read="SELECT drift_window_lock('$model', to_timestamp($rb)), (SELECT count(*) FROM ($w_others) x),
    (SELECT count(*) FROM ($w_refs) y)"
time_cpu 'since 020, per window: the window'"'"'s lock and the stored rows and references of its tenants, server CPU time' \
    "$w_rows; $(quiet "$w_read")" "$w_read" 5
time_cpu 'since 020, per window: the write (rows with scores, status; the roll-up trigger), server CPU time' \
    "$w_rows; CREATE TEMP SEQUENCE bench_worker; BEGIN; $(quiet "$w_write"); ROLLBACK" "$w_write" 5
# (the last loaded hour: yesterday's last, its windows judged as the worker leaves them, and
# not in drift_hourly yet)
hc="date_trunc('day', now(), 'UTC') - interval '1 hour'"
time_cpu 'since 020, once an hour: the hour'"'"'s roll-up (`drift_hours_close`, one window of every tenant), server CPU time' \
    "BEGIN; UPDATE drift_rollup_mark SET done_before = $hc WHERE rollup = 'drift_hourly'; DELETE FROM drift_hourly WHERE bucket_start = $hc" \
    "SELECT drift_hours_close($hc + interval '1 hour')"
time_cpu 'since 020, once an hour: the hour'"'"'s judged windows (`drift_judged_close`, one window of every tenant), server CPU time' \
    "BEGIN; UPDATE drift_rollup_mark SET done_before = $hc WHERE rollup = 'drift_judged'; UPDATE drift_windows SET status = 'ok', label_psi = 0.01, label_js = 0.005, confidence_psi = 0.02, confidence_js = 0.01, low_confidence_share = 0.1, low_confidence_change = 0, labels_new = '{}', labels_gone = '{}', reference = 'trailing 7 days', ref_tickets = 100000, judged_tickets = tickets, judged_overflow = false, judged_at = now() WHERE window_start >= $hc AND window_start < $hc + interval '1 hour' AND model = '$model'" \
    "SELECT drift_judged_close('$model', $hc + interval '1 hour')"
# what one statement per window costs when the worker scores (the scores
# computed in C, worker/observe/drift_score.c): the window's rows (through today's roll-up and
# reference triggers), its judged rows (drift_judged_store) and every tenant's status, each run
# a window of its own inside the hour; then less the reference trigger (a reference the worker
# holds), and the parts alone. Before the judge below moves the references (none holds the
# window then, as none holds a worker's newest window); the status a day ahead (every row
# replaced, as a newer window's status replaces it), from no status and back to none (the
# judge's first run below stores every tenant's again).
sql "DELETE FROM drift_status"
# (no earlier than the judged days' mark: a worker's newest window is never before it, and a
# REUSE run's earlier judging left it ahead)
one_window="SELECT greatest($win, drift_rollup_done_before('drift_judged_daily')) + (pg_backend_pid() % 40) * interval '1 s'"
one_rows="SELECT ($one_window) AS b, format('tenant%s', lpad(k::text, 4, '0')) AS t FROM generate_series(0, $TENANTS - 1) k"
one_write="INSERT INTO drift_windows (window_start, window_s, tenant, model, worker, tickets, label_counts, confidence_hist)
    SELECT b, $WINDOW_S, t, 'm', 'bench:2', 10, '{\"l0\": 6, \"l1\": 4}', '{0,0,0,0,0,1,2,3,4,0}' FROM ($one_rows) r"
one_judged="SELECT drift_judged_store(array_agg(ROW(b, t, 'm', $WINDOW_S, 10, 'ok', 2::smallint, 0.01, 0.005, 0.02, 0.01,
    0.1, 0.0, '{}'::text[], '{}'::text[], 'trailing 7 days', 100000, false, now())::drift_judged)) FROM ($one_rows) r"
one_status="INSERT INTO drift_status AS s (tenant, model, window_start, window_s, tickets, status, level, label_psi,
    confidence_psi, reference, overflow)
    SELECT t, 'm', now() + interval '1 day', $WINDOW_S, 10, 'ok', 1, 0.01, 0.02, 'trailing 7 days', false FROM ($one_rows) r
    ON CONFLICT (tenant, model) DO UPDATE SET window_start = excluded.window_start, window_s = excluded.window_s,
        tickets = excluded.tickets, status = excluded.status, level = excluded.level, label_psi = excluded.label_psi,
        confidence_psi = excluded.confidence_psi, reference = excluded.reference, overflow = excluded.overflow,
        updated_at = now()
    WHERE excluded.window_start >= s.window_start"
one_stmt="WITH w AS ($one_write RETURNING 1), j AS ($one_judged), s AS ($one_status RETURNING 1)
    SELECT (SELECT count(*) FROM w) + (SELECT * FROM j) + (SELECT count(*) FROM s)"
no_ref="BEGIN; ALTER TABLE drift_windows DISABLE TRIGGER drift_windows_reference_insert"
time_cpu 'scored in C: one statement per window (window, roll-ups, judged rows, status), server CPU time' \
    "SET application_name = 'drift_bench'" "$one_stmt"
time_cpu 'scored in C: the same without the reference trigger, server CPU time' "$no_ref" "$one_stmt"
time_cpu 'scored in C, parts: the window'"'"'s rows without triggers, server CPU time' \
    "$no_ref; ALTER TABLE drift_windows DISABLE TRIGGER drift_windows_rollup_insert" \
    "WITH w AS ($one_write RETURNING 1) SELECT count(*) FROM w"
time_cpu 'scored in C, parts: the hour roll-up trigger, window and roll-up, server CPU time' "$no_ref" \
    "WITH w AS ($one_write RETURNING 1) SELECT count(*) FROM w"
time_cpu 'scored in C, parts: the judged rows (`drift_judged_store`), server CPU time' \
    "SET application_name = 'drift_bench'" "$one_judged"
time_cpu 'scored in C, parts: every tenant'"'"'s status, server CPU time' \
    "SET application_name = 'drift_bench'" "WITH s AS ($one_status RETURNING 1) SELECT count(*) FROM s"
sql "DELETE FROM drift_status"
# the worker judges each window after writing it: the first judging sums every tenant's
# reference from the roll-ups (untimed); each timed run writes the next window (untimed: the
# window_write above) and judges it, moving every reference one window on
judge="SELECT drift_status_refresh('$model', now() - interval '$((2 * WINDOW_S)) s')"
sql "$judge" >/dev/null
next_window="INSERT INTO drift_windows (window_start, window_s, tenant, model, worker, tickets, label_counts, confidence_hist)
    SELECT (SELECT max(window_start) FROM drift_windows WHERE tenant = 'tenant0000' AND model = 'm') + interval '$WINDOW_S s',
           $WINDOW_S, format('tenant%s', lpad(k::text, 4, '0')), 'm', 'bench:2', 10, '{\"l0\": 6, \"l1\": 4}', '{0,0,0,0,0,1,2,3,4,0}'
    FROM generate_series(0, $TENANTS - 1) k"
time_sql 'worker: judge the window (`drift_status_refresh`, every tenant)' "$next_window" "$judge"
time_cpu 'worker: judge the window, server CPU time' "$next_window" "$judge"
# the write of a window starting an hour (every window here is an hour long) also adds the
# hour before to its day (017); the timed write above is a window inside the hour
time_cpu 'worker: write the first window of an hour, server CPU time' "SET application_name = 'drift_bench'" \
    "WITH w AS ($next_window RETURNING 1) SELECT count(*) FROM w"
time_sql 'worker: read the worst tenants (`reclass_drift_status`)' \
    "SELECT tenant, level FROM drift_status WHERE model = '$model' AND window_start >= now() - interval '$((2 * WINDOW_S)) s' ORDER BY level DESC, window_start DESC, tenant LIMIT 64"
time_sql 'worker: count tenants per status' \
    "SELECT status, count(*) FROM drift_status WHERE model = '$model' AND window_start >= now() - interval '$((2 * WINDOW_S)) s' GROUP BY status"
time_sql "README: \`drift_scores('hour', now() - interval '1 day', T)\`" \
    "SELECT count(*) FROM drift_scores('hour', now() - interval '1 day', '$tenant')"
time_sql 'one tenant'"'"'s label mix over 24 h (`ticket_results`)' \
    "SELECT label, count(*) FROM ticket_results WHERE tenant = '$tenant' AND classified_at > now() - interval '24 hours' GROUP BY label"
time_sql 'jobs listing without the drift column (`jobs_recent`)' \
    "SELECT job_id, tenant, total, done FROM jobs_recent(NULL, 50, true)"
echo
echo "rows: ticket_results $(sql "SELECT count(*) FROM ticket_results"), jobs $JOBS," \
     "drift_windows $(sql "SELECT count(*) FROM drift_windows"), drift_hourly $(sql "SELECT count(*) FROM drift_hourly")," \
     "drift_judged $(sql "SELECT count(*) FROM drift_judged")," \
     "tenants $TENANTS, window $WINDOW_S s, $DAYS days"
echo "load: results $(echo "$t1 - $t0" | bc) s, windows, roll-ups and stored scores $(echo "$t2 - $t1" | bc) s;" \
     "$(sql "SHOW server_version") ($(nproc) CPUs)"
