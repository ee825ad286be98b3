#!/usr/bin/env bash
# Bulk never starves the urgent. One worker reads two lanes, tickets.urgent:0 and tickets:1.
# (a) Tenant A's bulk job is in flight on tickets when tenant B submits an urgent job on
#     tickets.urgent: B's job completes while A's is still running, with a produce-to-commit
#     p99 <= 2 s (migrations/007_latency.sql's job_latency), and both jobs complete exactly.
# (b) Nothing lost, nothing twice across holds and rebalances: a second worker joins while the
#     first streams both lanes, the first is SIGKILLed while B's urgent tickets hold its bulk
#     lane, and the second finishes both jobs exactly.
# The issue's bound, p99 <= 2 s, is for a CPU worker of 4,500 tickets/s with the demo model;
# on a slower (or shared) machine it scales by 4,500 / the measured encoder rate.
#   run_lanes.sh RECLASS_BIN
# LANES_A (default 80000) bulk tickets, LANES_B (1000) urgent ones, submitted once LANES_AFTER
# (default 2000) of A's rows are in (reclass submit first asks the broker for the topic's record
# size limit: on the dev broker that answer times out after 10 s, so B's records arrive about
# 10 s later; A is sized to still be running then on a 4,500 tickets/s worker). Full size:
#   LANES_A=300000 LANES_AFTER=250000 tests/integration/run_lanes.sh build/reclass
# (at about 4-5k tickets/s on the CPU, B then arrives about 60 s into A's job).
source "$(dirname "$0")/lib.sh" "$1"
NA=${LANES_A:-80000}
NB=${LANES_B:-1000}
AFTER=${LANES_AFTER:-2000}
it_start_pg
it_start_broker tickets tickets.urgent
it_make_input "$TMP/a.jsonl" "$NA" a
it_make_input "$TMP/b.jsonl" "$NB" b

submit() { # LANE JOB TENANT FILE (reclass submit --lane: bulk = tickets, urgent = tickets.urgent)
    "$RECLASS" submit --brokers "$BROKERS" --topic tickets --lane "$1" --job-id "$2" \
        --tenant "$3" --no-progress "$4" >>"$TMP/submit.log" 2>&1 || fail "submit $2"
}

# the submit of a 300,000-ticket job takes a while: let the dev broker keep all of it
submit bulk bulk-a tenant-a "$TMP/a.jsonl"
PORT=$(svc_free_port)
it_run_worker "$TMP/worker.log" --topic tickets.urgent:0,tickets:1 --group g --idle-exit 5 \
    --http-port "$PORT" --http-addr 127.0.0.1
it_wait_rows bulk-a "$AFTER" 600
t0=$SECONDS
submit urgent urgent-b tenant-b "$TMP/b.jsonl"
it_wait_rows urgent-b "$NB" 600
# the histogram on /metrics: every urgent ticket observed in lane 0 under its tenant
curl -sf "http://127.0.0.1:$PORT/metrics" >"$TMP/metrics.txt" || fail "no /metrics"
n_hist=$(awk '$1 == "reclass_commit_latency_seconds_count{lane=\"0\",tenant=\"tenant-b\"}" { print $2 }' \
    "$TMP/metrics.txt")
[ "$n_hist" = "$NB" ] || fail "latency histogram of lane 0, tenant-b counts '$n_hist', want $NB"
grep -q '^reclass_commit_latency_seconds_bucket{lane="1",tenant="tenant-a",le="+Inf"}' \
    "$TMP/metrics.txt" || fail "no latency histogram of lane 1, tenant-a"
wait "$WORKER_PID" || fail "worker exited with $?"
it_check_job bulk-a "$NA"
it_check_job urgent-b "$NB"
grep -q "of job urgent-b to tickets.urgent" "$TMP/submit.log" || fail "--lane urgent: not tickets.urgent"
psql_q "SELECT job_id, tickets, p50_s, p99_s, max_s,
               extract(epoch FROM last_enqueued - first_enqueued)::real AS produce_s,
               extract(epoch FROM first_committed - first_enqueued)::real AS first_commit_s,
               extract(epoch FROM last_committed - first_committed)::real AS commit_span_s
        FROM job_latency ORDER BY job_id"
p99=$(psql_q "SELECT p99_s FROM job_latency WHERE job_id = 'urgent-b'")
order=$(psql_q "SELECT (SELECT completed_at FROM jobs WHERE job_id = 'urgent-b') <
                       (SELECT completed_at FROM jobs WHERE job_id = 'bulk-a')")
stats=$(tail -n1 "$TMP/worker.log.out")
bound=$(python3 -c "import json, sys; s = json.loads(sys.argv[1]); r = s['tickets'] / s['encoder_seconds']
print('%.2f %.0f' % (2.0 * max(1.0, 4500.0 / r), r))" "$stats")
echo "urgent job: p99 produce-to-commit ${p99} s (bound ${bound% *} s at ${bound#* } tickets/s" \
    "encoded), submitted $((SECONDS - t0)) s before the end"
[ "$order" = t ] || fail "the urgent job did not complete before the bulk job (if B's records came after A's last commit, raise LANES_A)"
python3 -c "import sys; sys.exit(0 if float('$p99') <= float('${bound% *}') else 1)" ||
    fail "urgent p99 produce-to-commit ${p99} s > ${bound% *} s"
grep -q '"tickets":'"$((NA + NB))"',' "$TMP/worker.log.out" ||
    fail "the worker did not classify every ticket once: $(tail -n1 "$TMP/worker.log.out")"

# (b) both lanes loaded before the worker starts: the bulk lane is held while the urgent job
# runs; a second worker joins meanwhile (its rebalance callbacks must be served between lane
# records), then the first is SIGKILLed while urgent tickets still hold its bulk lane; the
# second finishes both jobs exactly
it_make_input "$TMP/a2.jsonl" 8000 c
it_make_input "$TMP/b2.jsonl" 6000 d
# both at once (each first waits for the broker's record size limit)
submits=()
for job in bulk:bulk-a2:a2:tenant-a urgent:urgent-b2:b2:tenant-b; do
    IFS=: read -r lane id file tenant <<<"$job"
    "$RECLASS" submit --brokers "$BROKERS" --topic tickets --lane "$lane" --job-id "$id" \
        --tenant "$tenant" --no-progress "$TMP/$file.jsonl" >>"$TMP/submit.log" 2>&1 &
    submits+=($!)
done
for p in "${submits[@]}"; do wait "$p" || fail "a submit of phase (b) failed"; done
it_run_worker "$TMP/worker2.log" --topic tickets.urgent:0,tickets:1 --group g
first=$WORKER_PID
it_wait_rows urgent-b2 200 300
# its first assignment may be empty until the first worker hands partitions over (cooperative
# protocol): idle 20 s
it_run_worker "$TMP/worker3.log" --topic tickets.urgent:0,tickets:1 --group g --idle-exit 20
it_wait_rows urgent-b2 1000 300
kill -9 "$first"
wait "$first" 2>/dev/null || true
at_kill=$(it_rows urgent-b2)
echo "killed the first worker with urgent-b2 at $at_kill of 6000 rows, bulk-a2 at $(it_rows bulk-a2)"
[ "$at_kill" -lt 6000 ] || fail "urgent-b2 was done before the kill: nothing was held"
wait "$WORKER_PID" || fail "the second worker exited with $?"
it_check_job bulk-a2 8000
it_check_job urgent-b2 6000
it_check_job bulk-a "$NA"
echo PASS
