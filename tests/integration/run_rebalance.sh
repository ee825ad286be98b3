#!/usr/bin/env bash
# (e) Two workers of one group: worker A works alone, worker B joins while records keep coming
# (a cooperative rebalance moves partitions, with work in flight, from A to B), nothing is
# killed and both exit on idle -> every job exactly its rows and complete, both workers
# classified tickets, and A gave partitions up while it was running.
#   run_rebalance.sh RECLASS_BIN
source "$(dirname "$0")/lib.sh" "$1"
N=3000     # job-r, there before the workers start
CHUNK=200  # job-c1, job-c2, ...: one every half second from B's start until 2 s after its join
it_start_pg
it_watch_completions
it_start_broker tickets
it_make_input "$TMP/in.jsonl" "$N"
it_submit tickets job-r "$TMP/in.jsonl"
# one thread and small batches: many batches in flight when partitions move
small=(--topic tickets --group g --token-budget 1024 --sink-rows 64 --threads 1 --max-pending 256
       --idle-exit 6)

it_run_worker "$TMP/a.log" "${small[@]}"
A=$WORKER_PID
it_wait_rows job-r 200 60
# B's idle clock starts at its first assignment, which the cooperative protocol leaves empty
# until A has handed partitions over in a second round: give that round time on a busy machine.
it_run_worker "$TMP/b.log" "${small[@]}" --idle-exit 20
B=$WORKER_PID
# records keep arriving until the rebalance is over, however fast A works
chunks=0 joined=
while [ -z "$joined" ] || [ $((SECONDS - joined)) -lt 2 ]; do
    chunks=$((chunks + 1))
    [ "$chunks" -le 120 ] || fail "worker B got no partitions in 60 s"
    it_make_input "$TMP/c$chunks.jsonl" "$CHUNK" "c$chunks-"
    it_submit tickets "job-c$chunks" "$TMP/c$chunks.jsonl"
    if [ -z "$joined" ] && grep -qs "assigned [1-9][0-9]* partition" "$TMP/b.log"; then
        joined=$SECONDS
        echo "worker B got partitions after $chunks chunk(s), job-r at $(it_rows job-r) rows"
        kill -0 "$A" 2>/dev/null || fail "worker A exited before the rebalance"
        grep -q "revoked [1-9][0-9]* partition" "$TMP/a.log" || fail "worker A gave up no partition to B"
    fi
    kill -0 "$B" 2>/dev/null || fail "worker B exited early"
    sleep 0.5
done

rc=0
wait "$A" || rc=$?
[ "$rc" = 0 ] || fail "worker A exited with $rc"
wait "$B" || rc=$?
[ "$rc" = 0 ] || fail "worker B exited with $rc"
it_check_job job-r "$N"
for i in $(seq "$chunks"); do it_check_job "job-c$i" "$CHUNK" >/dev/null; done
total=$((N + chunks * CHUNK))
echo "$chunks chunk jobs of $CHUNK complete too: $total tickets in all"
tickets() { python3 -c 'import json,sys; print(json.loads(open(sys.argv[1]).read().splitlines()[-1])["tickets"])' "$1"; }
ta=$(tickets "$TMP/a.log.out")
tb=$(tickets "$TMP/b.log.out")
echo "worker A: $ta tickets, worker B: $tb tickets"
[ "$ta" -gt 0 ] || fail "worker A classified no ticket"
[ "$tb" -gt 0 ] || fail "worker B classified no ticket"
# a ticket in flight when its partition moved is classified again by the new owner, but
# stored once
[ $((ta + tb)) -ge "$total" ] || fail "the workers classified $((ta + tb)) tickets, fewer than $total"
echo PASS
