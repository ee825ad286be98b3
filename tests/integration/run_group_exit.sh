#!/usr/bin/env bash
# Several workers of one group on one job, all ending on --idle-exit, with the client's default
# session and heartbeat timings, as tests/bench/job_bench.sh runs them: whatever the group is
# doing when each leaves (the others leaving rebalance it, so a last commit may be refused),
# every worker exits 0 once its rows are stored, and the job is exact.
#   run_group_exit.sh RECLASS_BIN [WORKERS]
source "$(dirname "$0")/lib.sh" "$1"
W=${2:-4}
N=${IT_N:-2000}
it_start_pg
it_watch_completions
svc_start_broker "$RECLASS" "$TMP" $((W * 4)) tickets || fail "the dev broker did not start"
BROKERS=$SVC_BROKERS
it_make_input "$TMP/in.jsonl" "$N"
it_submit tickets job-g "$TMP/in.jsonl"
pids=()
for w in $(seq "$W"); do
    "$RECLASS" run --brokers "$BROKERS" --db "$DB" --model "$MODEL" --backend cpu --threads 1 \
        --topic tickets --group g --idle-exit 3 >"$TMP/w$w.log.out" 2>"$TMP/w$w.log" &
    pids+=($!)
    svc_pids+=($!)
done
bad=0
for w in $(seq "$W"); do
    rc=0
    wait "${pids[$((w - 1))]}" || rc=$?
    echo "worker $w exited $rc"
    if [ "$rc" != 0 ]; then
        bad=1
        tail -n 5 "$TMP/w$w.log" >&2
    fi
done
[ -n "${IT_KEEP_LOGS:-}" ] && cp "$TMP"/w*.log "$IT_KEEP_LOGS"/
[ "$bad" = 0 ] || fail "a worker of the group exited non-zero at its idle end"
it_check_job job-g "$N"
echo PASS
