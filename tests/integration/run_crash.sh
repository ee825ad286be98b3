#!/usr/bin/env bash
# (b) SIGTERM mid-job -> exit 0 after finishing in-flight batches, with exactly the written
# rows' offsets committed (their sum equals the rows in the database). Then SIGKILL mid-job and
# a restart -> still exactly N distinct rows and the job complete. The mock cluster lives in
# the dev-broker process, so committed offsets survive the workers.
#   run_crash.sh RECLASS_BIN
source "$(dirname "$0")/lib.sh" "$1"
N=3000
it_start_pg
it_watch_completions
it_start_broker tickets
it_make_input "$TMP/in.jsonl" "$N"
it_submit tickets job-b "$TMP/in.jsonl"
small=(--topic tickets --group g --token-budget 1024 --sink-rows 64 --threads 1 --max-pending 256)

it_run_worker "$TMP/w1.log" "${small[@]}"
it_wait_rows job-b 300 60
kill -TERM "$WORKER_PID"
rc=0
wait "$WORKER_PID" || rc=$?
[ "$rc" = 0 ] || fail "worker exited with $rc after SIGTERM"
after_term=$(it_rows job-b)
echo "SIGTERM: clean exit at $after_term rows"
[ "$after_term" -lt "$N" ] || fail "job finished before SIGTERM: nothing tested"
stored=$(python3 -c 'import json,sys; s=json.loads(open(sys.argv[1]).read().splitlines()[-1]); print(sum(s["stored_offsets"].values()))' "$TMP/w1.log.out")
echo "offsets committed at exit cover $stored records"
# the topic holds only this job, from offset 0: committed offsets == rows written
[ "$stored" = "$after_term" ] || fail "committed offsets cover $stored records, $after_term rows written"
# --max-pending 256 is far below the backlog: consumption must have been held back (backlogs
# under a second are waited out without polling, longer ones pause the partitions)
read -r pauses holds < <(python3 -c 'import json,sys; s=json.loads(open(sys.argv[1]).read().splitlines()[-1]); print(s["pauses"], s["holds"])' "$TMP/w1.log.out")
echo "backpressure: $pauses pauses, $holds holds"
[ $((pauses + holds)) -gt 0 ] || fail "consumption was never held back: backpressure not exercised"

# two result writers from here on: their commits land in any order
it_run_worker "$TMP/w2.log" "${small[@]}" --sink-connections 2
it_wait_rows job-b $((after_term + 300)) 60
kill -KILL "$WORKER_PID"
wait "$WORKER_PID" 2>/dev/null && fail "worker survived SIGKILL"
at_kill=$(it_rows job-b)
echo "SIGKILL at $at_kill rows"
[ "$at_kill" -lt "$N" ] || fail "job finished before the kill: nothing tested"

it_run_worker "$TMP/w3.log" "${small[@]}" --idle-exit 5 --sink-connections 2
wait "$WORKER_PID" || fail "last worker exited with $?"
it_check_job job-b "$N"
echo PASS
