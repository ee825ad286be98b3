#!/usr/bin/env bash
# Bulk never starves the urgent. One worker reads two lanes, tickets.urgent:0 and tickets:1.
# (a) Tenant A's bulk job is in flight on tickets when tenant B submits an urgent job on
#     tickets.urgent: B's job completes while A's is still running, with a produce-to-commit
#     p99 <= 2 s (migrations/007_latency.sql's job_latency), and both jobs complete exactly.
# (b) Nothing lost, nothing twice across holds: a worker SIGKILLed while B's urgent tickets
#     hold the bulk lane, then a second worker finishes both jobs exactly.
#   run_lanes.sh RECLASS_BIN
# LANES_A (default 30000) bulk tickets, LANES_B (1000) urgent ones, submitted once LANES_AFTER
# (default 3000) of A's rows are in. The issue's full size:
#   LANES_A=300000 LANES_AFTER=250000 tests/integration/run_lanes.sh build/reclass
# (at about 4-5k tickets/s on the CPU, B then arrives about 60 s into A's job).
source "$(dirname "$0")/lib.sh" "$1"
NA=${LANES_A:-30000}
NB=${LANES_B:-1000}
AFTER=${LANES_AFTER:-3000}
it_start_pg
it_start_broker tickets tickets.urgent
it_make_input "$TMP/a.jsonl" "$NA" a
it_make_input "$TMP/b.jsonl" "$NB" b

submit() { # TOPIC JOB TENANT FILE
    "$RECLASS" submit --brokers "$BROKERS" --topic "$1" --job-id "$2" --tenant "$3" \
        --no-progress "$4" >>"$TMP/submit.log" 2>&1 || fail "submit $2"
}

# the submit of a 300,000-ticket job takes a while: let the dev broker keep all of it
submit tickets bulk-a tenant-a "$TMP/a.jsonl"
it_run_worker "$TMP/worker.log" --topic tickets.urgent:0,tickets:1 --group g --idle-exit 5 \
    --http-port 0
it_wait_rows bulk-a "$AFTER" 600
t0=$SECONDS
submit tickets.urgent urgent-b tenant-b "$TMP/b.jsonl"
wait "$WORKER_PID" || fail "worker exited with $?"
it_check_job bulk-a "$NA"
it_check_job urgent-b "$NB"
psql_q "SELECT job_id, tickets, p50_s, p99_s, max_s,
               extract(epoch FROM last_enqueued - first_enqueued)::real AS produce_s,
               extract(epoch FROM first_committed - first_enqueued)::real AS first_commit_s,
               extract(epoch FROM last_committed - first_committed)::real AS commit_span_s
        FROM job_latency ORDER BY job_id"
p99=$(psql_q "SELECT p99_s FROM job_latency WHERE job_id = 'urgent-b'")
order=$(psql_q "SELECT (SELECT completed_at FROM jobs WHERE job_id = 'urgent-b') <
                       (SELECT completed_at FROM jobs WHERE job_id = 'bulk-a')")
echo "urgent job: p99 produce-to-commit ${p99} s, submitted $((SECONDS - t0)) s before the end"
[ "$order" = t ] || fail "the urgent job did not complete before the bulk job"
python3 -c "import sys; sys.exit(0 if float('$p99') <= 2.0 else 1)" ||
    fail "urgent p99 produce-to-commit ${p99} s > 2 s"
grep -q '"tickets":'"$((NA + NB))"',' "$TMP/worker.log.out" ||
    fail "the worker did not classify every ticket once: $(tail -n1 "$TMP/worker.log.out")"

# (b) SIGKILL while the urgent lane holds the bulk one
it_make_input "$TMP/a2.jsonl" 8000 c
it_make_input "$TMP/b2.jsonl" 2000 d
submit tickets bulk-a2 tenant-a "$TMP/a2.jsonl"
it_run_worker "$TMP/worker2.log" --topic tickets.urgent:0,tickets:1 --group g
it_wait_rows bulk-a2 1000 300
submit tickets.urgent urgent-b2 tenant-b "$TMP/b2.jsonl"
it_wait_rows urgent-b2 200 300
kill -9 "$WORKER_PID"
wait "$WORKER_PID" 2>/dev/null || true
echo "killed with bulk-a2 at $(it_rows bulk-a2) rows, urgent-b2 at $(it_rows urgent-b2)"
it_run_worker "$TMP/worker3.log" --topic tickets.urgent:0,tickets:1 --group g --idle-exit 5
wait "$WORKER_PID" || fail "third worker exited with $?"
it_check_job bulk-a2 8000
it_check_job urgent-b2 2000
it_check_job bulk-a "$NA"
echo PASS
