#!/usr/bin/env bash
# Priority within one lane and tenant: job low (PRIO_N tickets, default 20000, priority 0) is
# submitted first, then job high (a twentieth of it, priority 9). The worker, started after
# both, reads low's records before high's; in arrival order every low ticket would commit
# before the first high one. With priority (--priority-step-ms, its 9 steps far longer than
# the worker takes to read both jobs) high's tickets go first once they are in: fewer than
# half of low's rows commit before high's last. Both jobs complete exactly.
#   run_priority.sh RECLASS_BIN
source "$(dirname "$0")/lib.sh" "$1"
NL=${PRIO_N:-20000}
NH=$((NL / 20))
it_start_pg
it_start_broker tickets
it_make_input "$TMP/low.jsonl" "$NL" low
it_make_input "$TMP/high.jsonl" "$NH" high
"$RECLASS" submit --brokers "$BROKERS" --topic tickets --job-id prio-low --tenant t \
    --priority 0 --no-progress "$TMP/low.jsonl" >>"$TMP/submit.log" 2>&1 || fail "submit prio-low"
"$RECLASS" submit --brokers "$BROKERS" --topic tickets --job-id prio-high --tenant t \
    --priority 9 --no-progress "$TMP/high.jsonl" >>"$TMP/submit.log" 2>&1 ||
    fail "submit prio-high"
# a window that holds both jobs, so high's records are read while low's still wait
it_run_worker "$TMP/worker.log" --topic tickets --group g --idle-exit 5 --max-pending 30000 \
    --max-pending-tokens 1048576 --tenant-max-tokens 1048576 --priority-step-ms 10000
wait "$WORKER_PID" || fail "worker exited with $?"
it_check_job prio-low "$NL"
it_check_job prio-high "$NH"
before=$(psql_q "
    SELECT count(*) FROM ticket_results
    WHERE job_id = 'prio-low'
      AND classified_at < (SELECT max(classified_at) FROM ticket_results WHERE job_id = 'prio-high')")
echo "low's rows committed before high's last: $before of $NL"
[ "$before" -lt $((NL / 2)) ] || fail "high's tickets waited behind $before of low's"
echo PASS
