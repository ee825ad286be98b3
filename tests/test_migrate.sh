#!/usr/bin/env bash
# reclass migrate against a throwaway PostgreSQL (started here, always stopped):
# idempotence, concurrent migrators, checksum guard, failing migration rollback, directory
# lookup (flag, env, build tree, installed layout), 005_tenant and 008_job_failures carrying
# old data over, CLI errors.
#   test_migrate.sh RECLASS_BIN
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
src=$(cd "$here/.." && pwd)
bin=${1:?reclass binary}
tmp=$(mktemp -d /tmp/reclass-migrate.XXXXXX)
cleanup() {
    bash "$here/lib/pg_tmp.sh" stop "$tmp/pg" || true
    rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
url=$(bash "$here/lib/pg_tmp.sh" start "$tmp/pg") || { echo "could not start PostgreSQL"; exit 1; }
base=${url%/*}
unset RECLASS_DB RECLASS_MIGRATIONS

passed=0 failed=0
ok() { passed=$((passed + 1)); echo "ok   $1"; }
bad() { failed=$((failed + 1)); echo "FAIL $1"; [ -n "${2:-}" ] && sed 's/^/     /' <<<"$2"; }
# check NAME EXPECTED ACTUAL
check() { if [ "$2" = "$3" ]; then ok "$1"; else bad "$1" "expected [$2], got [$3]"; fi; }
# has NAME NEEDLE HAYSTACK
has() { if grep -qF -- "$2" <<<"$3"; then ok "$1"; else bad "$1" "no [$2] in: $3"; fi; }
sql() { psql -X -qtA "$1" -c "$2" 2>&1; }
newdb() { sql "$base/postgres" "CREATE DATABASE $1" >/dev/null; echo "$base/$1"; }

n_files=$(ls "$src"/migrations/[0-9]*_*.sql | wc -l)

# 0. the read-side commands on a database without migrations: the server's SQLSTATE
# (undefined function 42883, undefined table 42P01) tells them to say what to run
out=$("$bin" drift report --db "$url" 2>&1); rc=$?
check "drift report before migrate exits 1" 1 $rc
has "drift report before migrate says to migrate" "; run reclass migrate --db URL" "$out"
out=$("$bin" report --db "$url" --job j --out "$tmp/r.html" 2>&1); rc=$?
has "report before migrate says to migrate" "; run reclass migrate --db URL" "$out"

# 1. first run applies every file, a second run none
out=$("$bin" migrate --db "$url" --migrations "$src/migrations" 2>&1); rc=$?
check "first migrate exits 0" 0 $rc
has "first migrate applies 001_init.sql" "applied 001_init.sql" "$out"
has "first migrate reports the count" "$n_files applied" "$out"
before=$(sql "$url" "SELECT string_agg(version || ':' || applied_at, ',' ORDER BY version) FROM schema_migrations")
out=$("$bin" migrate --db "$url" --migrations "$src/migrations" 2>&1); rc=$?
check "second migrate exits 0" 0 $rc
has "second migrate is a no-op" "0 pending" "$out"
after=$(sql "$url" "SELECT string_agg(version || ':' || applied_at, ',' ORDER BY version) FROM schema_migrations")
check "schema_migrations unchanged by the second run" "$before" "$after"
check "one schema_migrations row per file" "$n_files" "$(sql "$url" "SELECT count(*) FROM schema_migrations")"
check "tables and view exist" "t|t|t|t|t" \
    "$(sql "$url" "SELECT to_regclass('jobs') IS NOT NULL, to_regclass('ticket_results') IS NOT NULL, to_regclass('batches') IS NOT NULL, to_regclass('job_label_counts') IS NOT NULL, to_regclass('ticket_results_job_label') IS NULL")"
# ticket_results' indexes (018): its primary key, label included for the label queries, tenant_time
check "ticket_results keeps its two indexes" "ticket_results_pkey ticket_results_tenant_time" \
    "$(sql "$url" "SELECT string_agg(indexrelid::regclass::text, ' ' ORDER BY indexrelid::regclass::text) FROM pg_index WHERE indrelid = 'ticket_results'::regclass")"
check "018: the primary key includes label" "PRIMARY KEY (job_id, ticket_id, job_month) INCLUDE (label)" \
    "$(sql "$url" "SELECT pg_get_constraintdef(oid) FROM pg_constraint WHERE conname = 'ticket_results_pkey'")"
check "checksum recorded is md5 of the file" "$(md5sum <"$src/migrations/001_init.sql" | cut -d' ' -f1)" \
    "$(sql "$url" "SELECT checksum FROM schema_migrations WHERE version = 1")"

# 2. dry run on a fresh database lists and creates nothing
db=$(newdb dry)
out=$("$bin" migrate --db "$db" --migrations "$src/migrations" --dry-run 2>&1); rc=$?
check "dry run exits 0" 0 $rc
has "dry run lists 001" "pending 001_init.sql" "$out"
check "dry run created nothing" "f" "$(sql "$db" "SELECT to_regclass('schema_migrations') IS NOT NULL OR to_regclass('jobs') IS NOT NULL")"

# 3. two migrators at once (a slow first file widens the race): each file applied once
mkdir -p "$tmp/slow" && cp "$src"/migrations/*.sql "$tmp/slow/"
echo "SELECT pg_sleep(1);" >"$tmp/slow/000_slow.sql"
db=$(newdb conc)
"$bin" migrate --db "$db" --migrations "$tmp/slow" >"$tmp/m1.out" 2>&1 & p1=$!
"$bin" migrate --db "$db" --migrations "$tmp/slow" >"$tmp/m2.out" 2>&1 & p2=$!
wait $p1; rc1=$?; wait $p2; rc2=$?
check "concurrent migrators both succeed" "0 0" "$rc1 $rc2"
check "concurrent: 000_slow applied by exactly one" 1 "$(cat "$tmp/m1.out" "$tmp/m2.out" | grep -c 'applied 000_slow.sql')"
check "concurrent: the other found nothing pending" 1 "$(cat "$tmp/m1.out" "$tmp/m2.out" | grep -c '^0 pending')"
check "concurrent: one row per file" "$((n_files + 1))" "$(sql "$db" "SELECT count(*) FROM schema_migrations")"

# 4. a new file applies alone; a changed applied file is refused
echo "CREATE TABLE extra_marker (x int);" >"$tmp/slow/900_extra.sql"
out=$("$bin" migrate --db "$db" --migrations "$tmp/slow" 2>&1); rc=$?
check "new migration exits 0" 0 $rc
has "only the new migration runs" "1 applied" "$out"
echo "-- edited after the fact" >>"$tmp/slow/001_init.sql"
out=$("$bin" migrate --db "$db" --migrations "$tmp/slow" 2>&1); rc=$?
check "changed applied file exits 1" 1 $rc
has "changed applied file is named" "001_init.sql was changed after it was applied" "$out"
cp "$src/migrations/001_init.sql" "$tmp/slow/001_init.sql"

# 5. a failing migration leaves nothing behind and is not recorded
printf 'CREATE TABLE half_done (x int);\nSELECT * FROM no_such_table;\n' >"$tmp/slow/901_bad.sql"
out=$("$bin" migrate --db "$db" --migrations "$tmp/slow" 2>&1); rc=$?
check "failing migration exits 1" 1 $rc
has "failing migration is named with the server's message" "901_bad.sql" "$out"
has "server message shown" "no_such_table" "$out"
check "failed migration rolled back" "f|0" \
    "$(sql "$db" "SELECT to_regclass('half_done') IS NOT NULL, (SELECT count(*) FROM schema_migrations WHERE version = 901)")"
rm "$tmp/slow/901_bad.sql"
printf 'CREATE TABLE a (x int);\nCOMMIT;\n' >"$tmp/slow/902_commit.sql"
out=$("$bin" migrate --db "$db" --migrations "$tmp/slow" 2>&1); rc=$?
check "a file that commits by itself is refused" 1 $rc
has "and says why" "BEGIN/COMMIT" "$out"
rm "$tmp/slow/902_commit.sql"

# 6. directory lookup: env var, installed layout (<prefix>/bin + <prefix>/share/reclass/migrations)
db=$(newdb envdir)
out=$(RECLASS_DB=$db RECLASS_MIGRATIONS=$tmp/slow "$bin" migrate 2>&1); rc=$?
check "RECLASS_DB + RECLASS_MIGRATIONS exit 0" 0 $rc
has "RECLASS_MIGRATIONS is used" "applied 000_slow.sql" "$out"
mkdir -p "$tmp/prefix/bin" "$tmp/prefix/share/reclass/migrations"
cp "$bin" "$tmp/prefix/bin/reclass"
cp "$src"/migrations/*.sql "$tmp/prefix/share/reclass/migrations/"
echo "CREATE TABLE installed_marker (x int);" >"$tmp/prefix/share/reclass/migrations/950_installed.sql"
db=$(newdb installed)
out=$("$tmp/prefix/bin/reclass" migrate --db "$db" 2>&1); rc=$?
check "installed layout exits 0" 0 $rc
check "installed layout finds share/reclass/migrations" "t" "$(sql "$db" "SELECT to_regclass('installed_marker') IS NOT NULL")"
db=$(newdb builddir)
out=$("$bin" migrate --db "$db" 2>&1); rc=$?
check "no --migrations from the build tree exits 0" 0 $rc
has "build tree finds the repo's migrations" "$n_files applied" "$out"

# 7. 005_tenant carries a database of the old schema over, in the state one tenant's records
# could leave another's job in (rows overwritten, "done 100, total 50"), and from then on
# refuses that
mkdir -p "$tmp/upto4" && cp "$src"/migrations/00[1-4]_*.sql "$tmp/upto4/"
db=$(newdb legacy)
"$bin" migrate --db "$db" --migrations "$tmp/upto4" >/dev/null 2>&1
row="label, label_id, confidence, tokens, model) SELECT"
sql "$db" "INSERT INTO jobs (job_id, tenant, total, done) VALUES ('shared', 'tenantX', 50, 100),
             ('unowned', NULL, 3, 3), ('mixed', NULL, 2, 2);
           INSERT INTO ticket_results (job_id, tenant, ticket_id, $row 'shared',
             CASE WHEN i <= 50 THEN 'tenantY' ELSE 'tenantX' END, 't' || i, 'l', 0, 0.5, 1, 'm'
             FROM generate_series(1, 100) i;
           INSERT INTO ticket_results (job_id, tenant, ticket_id, $row 'unowned', 'acme', 't' || i,
             'l', 0, 0.5, 1, 'm' FROM generate_series(1, 3) i;
           INSERT INTO ticket_results (job_id, tenant, ticket_id, $row 'mixed', 'a' || i, 't' || i,
             'l', 0, 0.5, 1, 'm' FROM generate_series(1, 2) i" >/dev/null
out=$("$bin" migrate --db "$db" --migrations "$src/migrations" 2>&1); rc=$?
check "005 over old data exits 0" 0 $rc
check "005: every row kept" 105 "$(sql "$db" "SELECT count(*) FROM ticket_results")"
check "005: owners kept, taken from agreeing results, left open when they disagree" \
    "mixed||2|shared|tenantX|100|unowned|acme|3" \
    "$(sql "$db" "SELECT string_agg(concat_ws('|', job_id, coalesce(tenant, ''), total), '|' ORDER BY job_id) FROM jobs")"
out=$(sql "$db" "INSERT INTO ticket_results (job_id, tenant, ticket_id, $row 'shared', 'tenantY', 'new', 'l', 0, 0.5, 1, 'm'")
has "005: another tenant's row for an owned job is refused" "job shared belongs to another tenant" "$out"
out=$(sql "$db" "UPDATE ticket_results SET tenant = 'tenantY' WHERE job_id = 'shared' AND ticket_id = 't99'")
has "005: and so is taking over a row" "job shared belongs to another tenant" "$out"
check "006: what was counted stays counted (jobs sums job_progress)" "2|100|3" \
    "$(sql "$db" "SELECT string_agg(done::text, '|' ORDER BY job_id) FROM jobs")"
out=$(sql "$db" "SELECT job_progress_guard('shared', 101, 100)")
has "006: done past total is refused" "would exceed its total" "$out"
out=$(sql "$db" "INSERT INTO ticket_results (job_id, tenant, ticket_id, $row 'unowned', 'acme', 'new', 'l', 0, 1.5, 1, 'm'")
has "005: a confidence above 1 is refused" "ticket_results_confidence" "$out"

# 7b. 008_job_failures over a database of schema 007 with rows as the sink of 007 wrote them
# (job_info, a job_progress counter per writer, ticket_results): nothing lost, counts as they
# were, failed 0; from then on a failure counts once and completes its job, a total is fixed
mkdir -p "$tmp/upto7" && cp "$src"/migrations/00[1-7]_*.sql "$tmp/upto7/"
db=$(newdb before008)
"$bin" migrate --db "$db" --migrations "$tmp/upto7" >/dev/null 2>&1
sql "$db" "INSERT INTO ticket_results (job_id, tenant, ticket_id, $row 'j1', 'acme', 't' || i,
             'l', 0, 0.5, 1, 'm' FROM generate_series(1, 10) i;
           INSERT INTO ticket_results (job_id, tenant, ticket_id, $row 'j2', 'acme', 't' || i,
             'l', 0, 0.5, 1, 'm' FROM generate_series(1, 5) i;
           UPDATE job_info SET total = 10, completed_at = now() WHERE job_id = 'j1';
           UPDATE job_info SET total = 6 WHERE job_id = 'j2';
           INSERT INTO job_progress (job_id, writer, done) VALUES ('j1', 'h:1:0', 7), ('j1', 'h:2:0', 3),
             ('j2', 'h:1:0', 5)" >/dev/null
before=$(sql "$db" "SELECT string_agg(job_id || ':' || tenant || ':' || total || ':' || done || ':' || (completed_at IS NOT NULL), ',' ORDER BY job_id) FROM jobs")
out=$("$bin" migrate --db "$db" --migrations "$src/migrations" 2>&1); rc=$?
check "008 over rows of 007 exits 0" 0 $rc
check "008: every row kept" 15 "$(sql "$db" "SELECT count(*) FROM ticket_results")"
check "008: the jobs' columns as they were" "$before" \
    "$(sql "$db" "SELECT string_agg(job_id || ':' || tenant || ':' || total || ':' || done || ':' || (completed_at IS NOT NULL), ',' ORDER BY job_id) FROM jobs")"
check "008: failed and state" "j1:0:complete,j2:0:running" \
    "$(sql "$db" "SELECT string_agg(job_id || ':' || failed || ':' || state, ',' ORDER BY job_id) FROM jobs")"
fail1="SELECT job_failure_record('tickets', 1, 42, 'j2', 'acme', 't6', 6, 'trailing bytes')"
sql "$db" "$fail1" >/dev/null
sql "$db" "$fail1" >/dev/null # the same record read again
sql "$db" "SELECT job_complete(ARRAY['j2'])" >/dev/null
check "008: a failure counts once and completes its job" "5|1|complete with failures|t" \
    "$(sql "$db" "SELECT done, failed, state, completed_at IS NOT NULL FROM jobs WHERE job_id = 'j2'")"
sql "$db" "SELECT job_failure_record('tickets', 2, 7, 'j2', 'acme', 't1', 6, 'dead-lettered')" >/dev/null
check "008: a ticket with a result row does not count as failed too" 1 \
    "$(sql "$db" "SELECT failed FROM jobs WHERE job_id = 'j2'")"
sql "$db" "SELECT job_failure_record('tickets', 2, 8, 'j1', 'other', 'x', 10, 'another tenant')" >/dev/null
check "008: another tenant's failure does not count" 0 "$(sql "$db" "SELECT failed FROM jobs WHERE job_id = 'j1'")"
out=$(sql "$db" "SELECT job_total_check('j1', 2147483647)")
has "008: a total is fixed once" "its total is 10, a ticket says 2147483647" "$out"

# 7c. 012_results_partitioned over a database of schema 011 holding results of jobs first seen
# in three months, one row violating 005's (NOT VALID) checks: every row kept as it was, each
# in its job's month's partition, none in the default; the views still answer; a redelivery's
# row stays unique across the key (job_id, ticket_id, job_month)
mkdir -p "$tmp/upto11" && cp "$src"/migrations/0[01]*_*.sql "$tmp/upto11/" && rm -f "$tmp"/upto11/01[2-9]_*.sql
db=$(newdb before012)
"$bin" migrate --db "$db" --migrations "$tmp/upto11" >/dev/null 2>&1
sql "$db" "INSERT INTO ticket_results (job_id, tenant, ticket_id, label, label_id, confidence, tokens, model,
             top_k, \"partition\", \"offset\", enqueued_at, classified_at)
           SELECT 'm' || (i % 3), 'acme', 't' || i, 'l' || (i % 4), i % 4, 0.5, 7, 'm', '[{\"p\": 0.5}]',
             i % 2, i, now() - interval '1 hour', now() - (i % 3) * interval '40 days' FROM generate_series(1, 300) i;
           UPDATE job_info SET first_seen = now() - substr(job_id, 2)::int * interval '40 days';
           ALTER TABLE ticket_results DROP CONSTRAINT ticket_results_confidence;
           INSERT INTO ticket_results (job_id, tenant, ticket_id, label, label_id, confidence, tokens, model)
             VALUES ('m0', 'acme', 'old', 'l', 1, 1.5, 1, 'm');
           ALTER TABLE ticket_results ADD CONSTRAINT ticket_results_confidence
             CHECK (confidence >= 0 AND confidence <= 1) NOT VALID" >/dev/null
rows_digest="SELECT count(*) || ' ' || md5(string_agg(concat_ws(',', job_id, ticket_id, tenant, label, label_id, confidence,
               top_k, tokens, truncated, model, \"partition\", \"offset\", enqueued_at, classified_at), '|' ORDER BY job_id, ticket_id))
             FROM ticket_results"
before=$(sql "$db" "$rows_digest")
views="SELECT (SELECT string_agg(job_id || ':' || label || ':' || tickets, ',' ORDER BY job_id, label) FROM job_label_counts)
              || (SELECT string_agg(job_id || ':' || tickets, ',' ORDER BY job_id) FROM job_latency)"
views_before=$(sql "$db" "$views")
out=$("$bin" migrate --db "$db" --migrations "$src/migrations" 2>&1); rc=$?
check "012 over rows of 011 exits 0" 0 $rc
check "012: every row kept as it was (rows before = rows after)" "$before" "$(sql "$db" "$rows_digest")"
check "012: the views answer as before" "$views_before" "$(sql "$db" "$views")"
check "012: ticket_results is partitioned" p "$(sql "$db" "SELECT relkind FROM pg_class WHERE relname = 'ticket_results'")"
check "012: each row in its job's month's partition" "0|3" \
    "$(sql "$db" "SELECT (SELECT count(*) FROM ticket_results_default) || '|' || count(DISTINCT tableoid) FROM ticket_results")"
check "012: rows by their jobs' months" "0" "$(sql "$db" "SELECT count(*) FROM ticket_results r JOIN job_info j USING (job_id)
    WHERE r.job_month <> ticket_results_month(j.first_seen)")"
out=$(sql "$db" "INSERT INTO ticket_results (job_id, tenant, ticket_id, label, label_id, confidence, tokens, model)
                 VALUES ('m2', 'acme', 't2', 'l', 0, 0.5, 1, 'm')")
has "012: a row of an older job outside its month is refused" "job_month is not the month of the job's first record" "$out"
out=$(sql "$db" "INSERT INTO ticket_results (job_id, tenant, ticket_id, label, label_id, confidence, tokens, model, job_month)
                 SELECT 'm2', 'acme', 't2', 'l', 0, 0.5, 1, 'm', ticket_results_month(first_seen) FROM job_info WHERE job_id = 'm2'")
has "012: a ticket stored twice in its job's month is refused" "duplicate key value" "$out"
check "012: retention 'forever' drops nothing" 0 "$(sql "$db" "SELECT ticket_results_partitions_maintain()")"
sql "$db" "UPDATE reclass_settings SET value = '60 days' WHERE name = 'ticket_results_retention'" >/dev/null
check "012: a retention drops the whole months before it" "1 201" \
    "$(sql "$db" "SELECT ticket_results_partitions_maintain()") $(sql "$db" "SELECT count(*) FROM ticket_results")"

# 7d. 016_results_copy_target: every partition carries the owner check (a row stored through
# a partition named itself is checked as one routed through ticket_results), a month made later
# too; the sink's COPY target is this month's partition, NULL once it lacks the check
check "016: the owner check on every partition" "$(sql "$db" "SELECT count(*) FROM pg_inherits WHERE inhparent = 'ticket_results'::regclass")" \
    "$(sql "$db" "SELECT count(*) FROM pg_trigger t JOIN pg_inherits i ON i.inhrelid = t.tgrelid
                  WHERE i.inhparent = 'ticket_results'::regclass AND t.tgname = 'ticket_results_owner_insert'")"
part=$(sql "$db" "SELECT ticket_results_copy_target()")
check "016: the COPY target is this month's partition" "ticket_results_$(date -u +%Y%m)" "$part"
out=$(sql "$db" "INSERT INTO $part (job_id, tenant, ticket_id, label, label_id, confidence, tokens, model)
                 VALUES ('m0', 'other', 'p1', 'l', 0, 0.5, 1, 'm')")
has "016: another tenant's row through the partition is refused" "belongs to another tenant" "$out"
sql "$db" "INSERT INTO $part (job_id, tenant, ticket_id, label, label_id, confidence, tokens, model)
           VALUES ('p-new', 'acme', 'p1', 'l', 0, 0.5, 1, 'm')" >/dev/null
check "016: a new job's row through the partition makes its job_info row" "acme" \
    "$(sql "$db" "SELECT tenant FROM job_info WHERE job_id = 'p-new'")"
sql "$db" "SELECT ticket_results_partitions_ensure(now() + interval '5 months', now() + interval '6 months')" >/dev/null
check "016: a month made later carries the owner check" 1 "$(sql "$db" "SELECT count(*) FROM pg_trigger
    WHERE tgrelid = to_regclass('ticket_results_' || to_char(now() + interval '5 months', 'YYYYMM'))
      AND tgname = 'ticket_results_owner_insert'")"
sql "$db" "ALTER TABLE $part DISABLE TRIGGER ticket_results_owner_insert" >/dev/null
check "016: no COPY target when the month's partition lacks the check" "" "$(sql "$db" "SELECT ticket_results_copy_target()")"
sql "$db" "ALTER TABLE $part ENABLE TRIGGER ticket_results_owner_insert" >/dev/null

# 7e. 018_results_one_index_less over a database of schema 017 holding results: every row kept,
# the views answer as before, a job's label counts still come from an index alone (the primary
# key, label included), and the sink's upsert still finds its conflict target
mkdir -p "$tmp/upto17" && cp "$src"/migrations/0[01]*_*.sql "$tmp/upto17/" && rm -f "$tmp"/upto17/01[89]_*.sql
db=$(newdb before018)
"$bin" migrate --db "$db" --migrations "$tmp/upto17" >/dev/null 2>&1
sql "$db" "INSERT INTO ticket_results (job_id, tenant, ticket_id, label, label_id, confidence, tokens, model, top_k)
           SELECT 'k' || (i % 3), 'acme', 't' || i, 'l' || (i % 4), i % 4, 0.5, 7, 'm', '[{\"p\": 0.5}]'
           FROM generate_series(1, 300) i" >/dev/null
before=$(sql "$db" "$rows_digest")
views_before=$(sql "$db" "$views")
out=$("$bin" migrate --db "$db" --migrations "$src/migrations" 2>&1); rc=$?
check "018 over rows of 017 exits 0" 0 $rc
check "018: every row kept as it was" "$before" "$(sql "$db" "$rows_digest")"
check "018: the views answer as before" "$views_before" "$(sql "$db" "$views")"
sql "$db" "VACUUM ANALYZE ticket_results" >/dev/null
has "018: a job's label counts read the primary key alone" "Index Only Scan using ticket_results_$(date -u +%Y%m)_pkey" \
    "$(sql "$db" "SET enable_seqscan = off; SET enable_bitmapscan = off; EXPLAIN SELECT label, count(*) FROM ticket_results WHERE job_id = 'k1' GROUP BY label")"
check "018: the upsert's conflict target is the key" "2" \
    "$(sql "$db" "INSERT INTO ticket_results AS t (job_id, tenant, ticket_id, label, label_id, confidence, tokens, model)
                  VALUES ('k1', 'acme', 't1', 'l9', 9, 0.5, 7, 'm')
                  ON CONFLICT (job_id, ticket_id, job_month) DO UPDATE SET label = excluded.label, writes = t.writes + 1
                  RETURNING writes")"

# 7f. 020_drift_worker_judge over a database of schema 019 holding drift windows, their
# roll-ups, judged windows and statuses: every row kept as it was (the new columns empty), the
# judged windows' mark after the newest judged hour, the views and reports answer as before
mkdir -p "$tmp/upto19" && cp "$src"/migrations/0*_*.sql "$tmp/upto19/" && rm -f "$tmp"/upto19/02[0-9]_*.sql
db=$(newdb before020)
"$bin" migrate --db "$db" --migrations "$tmp/upto19" >/dev/null 2>&1
sql "$db" "SELECT drift_partitions_ensure(now() - interval '3 days', now() + interval '1 day')" >/dev/null
sql "$db" "INSERT INTO drift_windows (window_start, window_s, tenant, model, worker, tickets, label_counts, confidence_hist)
           SELECT date_trunc('hour', now()) - g * interval '1 hour', 3600, 't' || k, 'm', 'w1', 10 + k,
                  jsonb_build_object('a', 5 + g % 3, 'b', 5 + k), ARRAY[0, 0, 0, 0, 1, 1, 2, 3, 3, 10 + k + g % 3]
           FROM generate_series(1, 40) g, generate_series(0, 2) k" >/dev/null
sql "$db" "SELECT drift_status_refresh('m', now() - interval '2 days')" >/dev/null
drift_digest="SELECT md5(string_agg(x, ',' ORDER BY x)) FROM (
    SELECT 'w' || (window_start, tenant, model, worker, tickets, label_counts, confidence_hist)::text x FROM drift_windows
    UNION ALL SELECT 'h' || h::text FROM drift_hourly h UNION ALL SELECT 'd' || d::text FROM drift_daily d
    UNION ALL SELECT 'j' || (j.window_start, j.tenant, j.status, j.label_psi, j.reference)::text FROM drift_judged j
    UNION ALL SELECT 's' || (s.tenant, s.window_start, s.status, s.level, s.label_psi)::text FROM drift_status s) u"
drift_reads="SELECT (SELECT count(*) || ':' || sum(buckets) FROM drift_report_tenants('window', now() - interval '3 days')),
    (SELECT count(*) FROM drift_scores('hour', now() - interval '3 days', 't1'))"
before=$(sql "$db" "$drift_digest")
reads_before=$(sql "$db" "$drift_reads")
out=$("$bin" migrate --db "$db" --migrations "$src/migrations" 2>&1); rc=$?
check "020 over drift rows of 019 exits 0" 0 $rc
check "020: every drift row kept as it was" "$before" "$(sql "$db" "$drift_digest")"
check "020: the reports and scores answer as before" "$reads_before" "$(sql "$db" "$drift_reads")"
check "020: the judged windows' mark after the newest judged hour" "t" \
    "$(sql "$db" "SELECT done_before = date_trunc('hour', now()) FROM drift_rollup_mark WHERE rollup = 'drift_judged'")"
check "020: no window judged by a worker yet, no reference stored" "0 0" \
    "$(sql "$db" "SELECT (SELECT count(*) FROM drift_windows WHERE judged_at IS NOT NULL) || ' ' || (SELECT count(*) FROM drift_status WHERE ref_end IS NOT NULL)")"

# 7g. 021_batches_encoder over a database of the schema before it holding batches rows: every
# row kept as it was, their encoder and device NULL (one encoder, the worker's --device), the
# hourly view as before; a new row names its encoder, and its device or none (the cpu)
mkdir -p "$tmp/upto20" && cp "$src"/migrations/0*_*.sql "$tmp/upto20/" && rm -f "$tmp"/upto20/02[1-9]_*.sql
db=$(newdb before021)
"$bin" migrate --db "$db" --migrations "$tmp/upto20" >/dev/null 2>&1
sql "$db" "INSERT INTO batches (tickets, real_tokens, padded_tokens, wait_ms, compute_ms, backend,
             device_used_bytes, arena_bytes)
           SELECT i, 10 * i, 12 * i, 0.5, 2.5, CASE WHEN i % 2 = 0 THEN 'cuda' ELSE 'cpu' END,
             i * 1024, 4096 FROM generate_series(1, 50) i" >/dev/null
batches_digest="SELECT count(*) || ' ' || md5(string_agg(concat_ws(',', id, at, tickets, real_tokens, padded_tokens,
                  wait_ms, compute_ms, backend, device_used_bytes, arena_bytes), '|' ORDER BY id)) FROM batches"
before=$(sql "$db" "$batches_digest")
hourly="SELECT string_agg(concat_ws(',', hour, backend, batches, tickets, padding_waste), '|' ORDER BY hour, backend) FROM batch_stats_hourly"
hourly_before=$(sql "$db" "$hourly")
out=$("$bin" migrate --db "$db" --migrations "$src/migrations" 2>&1); rc=$?
check "021 over rows of 020 exits 0" 0 $rc
check "021: every batches row kept as it was" "$before" "$(sql "$db" "$batches_digest")"
check "021: the rows before it name no encoder or device" 50 \
    "$(sql "$db" "SELECT count(*) FROM batches WHERE encoder IS NULL AND device IS NULL")"
check "021: batch_stats_hourly answers as before" "$hourly_before" "$(sql "$db" "$hourly")"
check "021: encoder and device are smallint" "smallint smallint" \
    "$(sql "$db" "SELECT string_agg(data_type, ' ' ORDER BY column_name DESC) FROM information_schema.columns
                  WHERE table_name = 'batches' AND column_name IN ('encoder', 'device')")"
sql "$db" "INSERT INTO batches (tickets, real_tokens, padded_tokens, backend, encoder, device)
           VALUES (1, 1, 1, 'cuda', 1, 0), (1, 1, 1, 'cpu', 0, NULL)" >/dev/null
check "021: new rows name their encoder and device" "cpu:0:|cuda:1:0" \
    "$(sql "$db" "SELECT string_agg(concat_ws(':', backend, encoder, coalesce(device::text, '')), '|' ORDER BY backend)
                  FROM batches WHERE encoder IS NOT NULL")"

# 7h. 023_batches_worker over a database of the schema before it: the cpu's gpu_memory rows
# (device 0 as 019 wrote it, told apart by their backend) name no device, as its batches rows;
# a GPU's rows and the rows before 019 keep theirs; every batches row kept, naming no worker;
# a new batches row names its worker, as gpu_memory does
mkdir -p "$tmp/upto22" && cp "$src"/migrations/0*_*.sql "$tmp/upto22/" && rm -f "$tmp"/upto22/02[3-9]_*.sql
db=$(newdb before023)
"$bin" migrate --db "$db" --migrations "$tmp/upto22" >/dev/null 2>&1
sql "$db" "INSERT INTO gpu_memory (worker, backend, arena_bytes, device, encoder)
           VALUES ('w1', 'cpu', 1, 0, 0), ('w1', 'cpu', 1, 0, 1), ('w2', 'cuda', 1, 0, 0),
                  ('w2', 'cuda', 1, 1, 1), ('w0', 'cpu', 1, NULL, NULL)" >/dev/null
sql "$db" "INSERT INTO batches (tickets, real_tokens, padded_tokens, backend, encoder, device)
           SELECT i, i, i, 'cpu', i % 2, NULL FROM generate_series(1, 20) i" >/dev/null
before=$(sql "$db" "$batches_digest")
gpu_digest="SELECT md5(string_agg(concat_ws(',', at, worker, backend, arena_bytes, encoder), '|' ORDER BY worker, encoder)) FROM gpu_memory"
gpu_before=$(sql "$db" "$gpu_digest")
out=$("$bin" migrate --db "$db" --migrations "$src/migrations" 2>&1); rc=$?
check "023 over rows of 022 exits 0" 0 $rc
check "023: the cpu's gpu_memory rows name no device, a GPU's keep theirs" "w0::|w1::0|w1::1|w2:0:0|w2:1:1" \
    "$(sql "$db" "SELECT string_agg(concat_ws(':', worker, coalesce(device::text, ''), coalesce(encoder::text, '')), '|' ORDER BY worker, encoder)
                  FROM gpu_memory")"
check "023: gpu_memory's other columns as they were" "$gpu_before" "$(sql "$db" "$gpu_digest")"
check "023: every batches row kept as it was" "$before" "$(sql "$db" "$batches_digest")"
check "023: the batches rows before it name no worker" 20 \
    "$(sql "$db" "SELECT count(*) FROM batches WHERE worker IS NULL")"
check "023: batches.worker is text, nullable, no default" "text YES " \
    "$(sql "$db" "SELECT concat_ws(' ', data_type, is_nullable, coalesce(column_default, '')) FROM information_schema.columns
                  WHERE table_name = 'batches' AND column_name = 'worker'")"
sql "$db" "INSERT INTO batches (tickets, real_tokens, padded_tokens, backend, worker, encoder, device)
           VALUES (1, 1, 1, 'cpu', 'w1', 1, NULL)" >/dev/null
check "023: a new batches row finds its encoder's gpu_memory rows" 1 \
    "$(sql "$db" "SELECT count(*) FROM batches b JOIN gpu_memory g ON g.worker = b.worker AND g.encoder = b.encoder
                  AND g.device IS NOT DISTINCT FROM b.device")"

# 8. CLI errors: input errors exit 2 with what to fix, an unreachable server exits 1
out=$("$bin" migrate 2>&1); rc=$?
check "no database exits 2" 2 $rc
has "no database says what to pass" "--db URL or set RECLASS_DB" "$out"
out=$("$bin" migrate --db "$url" --bogus 2>&1); rc=$?
check "unknown option exits 2" 2 $rc
out=$("$bin" migrate --db "$url" --migrations "$tmp/nope" 2>&1); rc=$?
check "missing migrations dir exits 2" 2 $rc
out=$("$bin" migrate --db "host=127.0.0.1 port" 2>&1); rc=$?
check "malformed conninfo exits 2" 2 $rc
out=$("$bin" migrate --db "postgresql://postgres@127.0.0.1:1/x?connect_timeout=2" --migrations "$src/migrations" 2>&1); rc=$?
check "unreachable server exits 1" 1 $rc
has "unreachable server message" "cannot connect to PostgreSQL" "$out"
out=$("$bin" migrate --help 2>&1); rc=$?
check "--help exits 0" 0 $rc

echo "test_migrate: $passed passed, $failed failed"
[ "$failed" = 0 ]
