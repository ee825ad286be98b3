#!/usr/bin/env bash
# SIGTERM while PostgreSQL is down: the worker says what it waits for and stops within
# --drain-db-wait, exit 1, without storing the offsets of what it could not write; once the
# database is back, the next worker stores every ticket (nothing lost).
#   run_stop_db_down.sh RECLASS_BIN
source "$(dirname "$0")/lib.sh" "$1"
it_start_pg
it_start_broker tickets
it_make_input "$TMP/in1.jsonl" 40 a
it_make_input "$TMP/in2.jsonl" 40 b
it_submit tickets before "$TMP/in1.jsonl"
it_run_worker "$TMP/worker.log" --drain-db-wait 3
it_wait_rows before 40 90
bash "$svc_lib/pg_tmp.sh" stop "$TMP/pg"
it_submit tickets during "$TMP/in2.jsonl"
for _ in $(seq 300); do
    grep -q "database unavailable" "$TMP/worker.log" && break
    sleep 0.1
done
grep -q "database unavailable" "$TMP/worker.log" || fail "the worker never tried the database"
t0=$SECONDS
kill -TERM "$WORKER_PID"
rc=0
wait "$WORKER_PID" || rc=$?
echo "SIGTERM with PostgreSQL down: exit $rc in $((SECONDS - t0)) s: $(grep -m1 'waiting up to' "$TMP/worker.log")"
[ $((SECONDS - t0)) -le 15 ] || fail "the worker took $((SECONDS - t0)) s to stop (--drain-db-wait 3)"
grep -q "waiting up to 3 s (--drain-db-wait) for PostgreSQL" "$TMP/worker.log" ||
    fail "the worker did not say what it waits for"
[ "$rc" = 1 ] || fail "the worker exited $rc with results unwritten, want 1"
bash "$svc_lib/pg_tmp.sh" restart "$TMP/pg" >/dev/null || fail "PostgreSQL restart"
it_run_worker "$TMP/worker2.log" --idle-exit 5
wait "$WORKER_PID" || fail "the second worker exited $?"
it_check_job during 40
echo PASS
