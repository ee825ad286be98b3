#!/usr/bin/env bash
# Two encoders in one worker (--encoders 2, the cpu backend): a job is exact; SIGKILL mid-job and
# a restart leave it exact; and every ticket's label and confidence are those one encoder gives
# on the same input (a batch's results do not depend on which encoder ran it). With BACKEND
# cuda, the two encoders share one GPU (--device 0): the job exact after the kill and each
# encoder's arena flat as on the cpu; results are compared, and must agree on the cpu only
# (cuBLASLt may pick another kernel for another batch shape).
#   run_encoders.sh RECLASS_BIN [BACKEND]
source "$(dirname "$0")/lib.sh" "$1"
BACKEND=${2:-cpu}
N=${IT_N:-2000}
[ "$BACKEND" = cuda ] && N=${IT_N:-100000} # a GPU must still be at it when the kill comes
if [ "$BACKEND" = cuda ] && [ ! -e /dev/nvidia0 ]; then
    echo "SKIP: no GPU" >&2
    exit 77
fi
it_start_pg
it_watch_completions
it_start_broker tickets tickets.one
it_make_input "$TMP/in.jsonl" "$N"
it_submit tickets job-two "$TMP/in.jsonl"
small=(--token-budget 1024 --sink-rows 64 --threads 2 --backend "$BACKEND")

it_run_worker "$TMP/w1.log" --topic tickets --group g2 --encoders 2 "${small[@]}"
it_wait_rows job-two 300 60
kill -KILL "$WORKER_PID"
wait "$WORKER_PID" 2>/dev/null && fail "worker survived SIGKILL"
at_kill=$(it_rows job-two)
echo "SIGKILL at $at_kill rows"
[ "$at_kill" -lt "$N" ] || fail "job finished before the kill: nothing tested"
grep -q "2 encoders" "$TMP/w1.log" || fail "the worker did not start two encoders"

it_run_worker "$TMP/w2.log" --topic tickets --group g2 --encoders 2 "${small[@]}" --idle-exit 5
wait "$WORKER_PID" || fail "restarted worker exited with $?"
it_check_job job-two "$N"
python3 - "$TMP/w2.log.out" <<'PY' || fail "exit statistics"
import json, sys
s = json.loads(open(sys.argv[1]).read().splitlines()[-1])
print("restart: %d tickets, encoders %s, up %s" % (s["tickets"], s.get("encoders"), s.get("encoders_up")))
assert s.get("encoders") == 2 and s.get("encoders_up") == 2, s
PY

# a gpu_memory row per encoder, each encoder's arena flat
read -r encs arenas < <(psql_q "SELECT count(DISTINCT encoder), max(c) FROM (SELECT encoder,
    count(DISTINCT arena_bytes) AS c FROM gpu_memory GROUP BY worker, encoder) t" | tr '|' ' ')
echo "gpu_memory: $encs encoders, at most $arenas arena sizes each"
[ "$encs" = 2 ] && [ "$arenas" = 1 ] || fail "gpu_memory: want 2 encoders with one arena size each"
# every batches row is its encoder's as its gpu_memory rows name it (worker, encoder, device),
# the killed worker's too; the device: none on the cpu (the host) in both tables, on cuda 0
want_devs=none
[ "$BACKEND" = cuda ] && want_devs=0
read -r stray devs < <(psql_q "SELECT (SELECT count(*) FROM batches b WHERE NOT EXISTS (SELECT
    FROM gpu_memory g WHERE g.worker = b.worker AND g.encoder = b.encoder
    AND g.device IS NOT DISTINCT FROM b.device)), (SELECT string_agg(DISTINCT
    coalesce(device::text, 'none'), ',') FROM (SELECT device FROM batches
    UNION ALL SELECT device FROM gpu_memory) d)" | tr '|' ' ')
echo "batches rows without their encoder's gpu_memory rows: $stray; devices named: $devs"
[ "$stray" = 0 ] && [ "$devs" = "$want_devs" ] || fail "batches and gpu_memory name encoders differently"

# the same input through one encoder
it_submit tickets.one job-one "$TMP/in.jsonl"
it_run_worker "$TMP/w3.log" --topic tickets.one --group g1 "${small[@]}" --idle-exit 5
wait "$WORKER_PID" || fail "one-encoder worker exited with $?"
it_check_job job-one "$N"
differ=$(psql_q "SELECT count(*) FROM ticket_results a
    FULL JOIN ticket_results b ON b.job_id = 'job-one' AND b.ticket_id = a.ticket_id
    WHERE a.job_id = 'job-two' AND (a.label IS DISTINCT FROM b.label
        OR a.confidence IS DISTINCT FROM b.confidence)")
echo "tickets whose label or confidence differ between 2 encoders and 1: $differ"
[ "$differ" = 0 ] || [ "$BACKEND" != cpu ] || fail "$differ tickets differ between --encoders 2 and --encoders 1"
echo PASS
