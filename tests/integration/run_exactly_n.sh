#!/usr/bin/env bash
# (a) N tickets submitted -> exactly N rows, the job complete (done == total, completed_at set),
# the exit statistics line printed, and the group's offsets committed to the end.
#   run_exactly_n.sh RECLASS_BIN
source "$(dirname "$0")/lib.sh" "$1"
N=1500
it_start_pg
it_watch_completions
it_start_broker tickets
it_make_input "$TMP/in.jsonl" $((N - 3))
# three texts far over the model's 512 positions: truncated and flagged, never rejected
python3 - "$TMP/in.jsonl" <<'PY'
import json, sys
with open(sys.argv[1], "a", encoding="utf-8") as f:
    for i in range(3):
        f.write(json.dumps({"id": "long-%d" % i, "text": "my card was declined again " * (300 + i)}) + "\n")
PY
it_submit tickets job-a "$TMP/in.jsonl"
it_run_worker "$TMP/worker.log" --topic tickets --group g --idle-exit 5
wait "$WORKER_PID" || fail "worker exited with $?"
it_check_job job-a "$N"
long=$(psql_q "SELECT count(*) FROM ticket_results WHERE job_id = 'job-a' AND truncated AND tokens = 512")
[ "$long" = 3 ] || fail "want 3 truncated rows of 512 tokens, got $long"
stats=$(tail -n1 "$TMP/worker.log.out")
echo "stats: $stats"
python3 - "$stats" "$N" <<'PY' || fail "bad statistics line"
import json, sys
s = json.loads(sys.argv[1])
assert s["tickets"] == int(sys.argv[2]), s
assert s["truncated"] == 3, s
assert s["tickets_per_s"] > 0 and 0 <= s["non_encoder_share"] <= 1, s
assert s["encoder_seconds"] > 0 and s["seconds"] >= s["encoder_seconds"] * 0.99, s
PY
# nothing left for the group: a second worker (configured through the environment this time)
# writes nothing and exits on idle
RECLASS_TOPIC=tickets RECLASS_GROUP=g RECLASS_IDLE_EXIT=3 it_run_worker "$TMP/worker2.log"
wait "$WORKER_PID" || fail "second worker exited with $?"
grep -q '"tickets":0,' "$TMP/worker2.log.out" || fail "second worker re-processed records"
it_check_job job-a "$N"
echo PASS
