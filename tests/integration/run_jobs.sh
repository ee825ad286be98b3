#!/usr/bin/env bash
# `reclass jobs`: while a job runs, `--watch` under a terminal (script(1) gives it one) draws
# progress bars and the list reads "running"; once done, the plain list, --json and
# `jobs show` agree with the jobs table and the results; a missing job exits 1, a bad
# argument 2.
#   run_jobs.sh RECLASS_BIN
source "$(dirname "$0")/lib.sh" "$1"
NA=20000 NB=300
it_start_pg
it_start_broker tickets
it_make_input "$TMP/a.jsonl" $NA a
it_make_input "$TMP/b.jsonl" $NB b
it_submit tickets job-a "$TMP/a.jsonl"
"$RECLASS" submit --brokers "$BROKERS" --topic tickets --job-id job-b --tenant globex \
    --no-progress "$TMP/b.jsonl" >>"$TMP/submit.log" 2>&1 || fail "submit job-b"
it_run_worker "$TMP/worker.log" --topic tickets --group g --idle-exit 5
it_wait_rows job-a 1 120
# a terminal capture of --watch during the job (script -q: no banner; -f: flush each write)
timeout -s INT 4 script -qfec "$RECLASS jobs --db '$DB' --watch 1" "$TMP/watch.tty" >/dev/null 2>&1 || true
tr -d '\r' <"$TMP/watch.tty" | sed 's/\x1b\[H\x1b\[2J/\n--- redraw ---\n/g' >"$TMP/watch.txt"
cat "$TMP/watch.txt"
grep -q 'job-a .*\[[#.]\{20\}\] *[0-9.]*%' "$TMP/watch.txt" || fail "no progress bar for job-a under a terminal"
[ "$(grep -c -- '--- redraw ---' "$TMP/watch.txt")" -ge 2 ] || fail "--watch 1 redrew fewer than twice in 4 s"
wait "$WORKER_PID" || fail "worker exited with $?"
it_check_job job-a $NA
it_check_job job-b $NB

"$RECLASS" jobs --db "$DB" >"$TMP/list.txt" || fail "jobs exited $?"
cat "$TMP/list.txt"
grep -q '\[' "$TMP/list.txt" && fail "a bar in plain (non-terminal) output"
grep -q "^job-a  *acme  *$NA/$NA .* complete " "$TMP/list.txt" || fail "job-a not listed as complete $NA/$NA"
grep -q "^job-b  *globex  *$NB/$NB .* complete " "$TMP/list.txt" || fail "job-b not listed as complete"
"$RECLASS" jobs --db "$DB" --json --tenant globex >"$TMP/list.json" || fail "jobs --json"
python3 - "$TMP/list.json" "$NB" <<'PY' || fail "jobs --json"
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
assert len(rows) == 1 and rows[0]["job_id"] == "job-b", rows
r = rows[0]
assert r["done"] == r["total"] == int(sys.argv[2]) and r["state"] == "complete" and r["eta_s"] is None, r
assert r["tenant"] == "globex" and r["rate"] > 0, r
PY
"$RECLASS" jobs show job-a --db "$DB" >"$TMP/show.txt" || fail "jobs show"
cat "$TMP/show.txt"
grep -q "^progress: *$NA/$NA (complete)" "$TMP/show.txt" || fail "show: progress"
top=$(psql_q "SELECT label || ' ' || count(*) FROM ticket_results WHERE job_id = 'job-a' GROUP BY label ORDER BY count(*) DESC, label LIMIT 1")
grep -q "^  ${top% *} *${top#* } " "$TMP/show.txt" || fail "show: top label '$top' missing"
"$RECLASS" jobs show job-a --db "$DB" --json | python3 -c '
import json, sys
o = json.load(sys.stdin)
assert o["done"] == o["total"] and sum(l["tickets"] for l in o["labels"]) <= o["done"] and o["labels"], o' ||
    fail "show --json"
# show --watch ends by itself on a completed job
timeout 10 "$RECLASS" jobs show job-b --db "$DB" --watch 1 >/dev/null || fail "show --watch on a done job must return 0 at once"
rc=0; "$RECLASS" jobs show nope --db "$DB" 2>"$TMP/nope.err" || rc=$?
[ "$rc" = 1 ] && grep -q "no job nope" "$TMP/nope.err" || fail "missing job: exit $rc, $(cat "$TMP/nope.err")"
rc=0; "$RECLASS" jobs frob --db "$DB" 2>/dev/null || rc=$?
[ "$rc" = 2 ] || fail "bad argument: exit $rc, want 2"
echo PASS
