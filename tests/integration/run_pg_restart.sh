#!/usr/bin/env bash
# (c) PostgreSQL goes away mid-job (crash-stop, 3 s down, started again on the same port): the
# worker pauses consumption, reconnects with backoff, retries the same rows -> no loss, no
# double counting: exactly N rows, the job complete.
#   run_pg_restart.sh RECLASS_BIN
source "$(dirname "$0")/lib.sh" "$1"
N=3000
it_start_pg
it_start_broker tickets
it_make_input "$TMP/in.jsonl" "$N"
it_submit tickets job-c "$TMP/in.jsonl"

it_run_worker "$TMP/w.log" --topic tickets --group g --token-budget 1024 --sink-rows 64 \
    --threads 1 --max-pending 256 --idle-exit 6
it_wait_rows job-c 200 60
bash "$it_root/tests/lib/pg_tmp.sh" stop "$TMP/pg"
down_at=$SECONDS
sleep 3
kill -0 "$WORKER_PID" || fail "worker died while the database was down"
bash "$it_root/tests/lib/pg_tmp.sh" restart "$TMP/pg"
echo "database was down for $((SECONDS - down_at)) s"
rc=0
wait "$WORKER_PID" || rc=$?
[ "$rc" = 0 ] || fail "worker exited with $rc"
grep -q "database unavailable" "$TMP/w.log" || fail "the worker never noticed the outage: nothing tested"
grep -q "database back" "$TMP/w.log" || fail "the worker did not log its recovery"
it_check_job job-c "$N"
echo PASS
