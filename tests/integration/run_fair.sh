#!/usr/bin/env bash
# Fair shares between tenants on one topic, no lanes: tenant small's job (a tenth of FAIR_A) is
# submitted first, then tenant big's (FAIR_A tickets, default 30000). The worker, started
# after both, reads all of small's records and as many of big's as big's cap allows, so both
# are queued until small's job runs out. In arrival (deadline) order small's would fill every
# batch first; with the deficit round robin small gets its weight's share of the encoded
# tokens (equal weights: 1/2), within 10%. Measured from the rows: tokens committed per tenant
# strictly between small's first and last commits (the edge transactions may hold batches
# formed before big's records were in, or after small's ran out). Both jobs complete exactly.
#   run_fair.sh RECLASS_BIN
source "$(dirname "$0")/lib.sh" "$1"
NA=${FAIR_A:-30000}
NB=$((NA / 10))
it_start_pg
it_start_broker tickets
it_make_input "$TMP/a.jsonl" "$NA" a
it_make_input "$TMP/b.jsonl" "$NB" b
"$RECLASS" submit --brokers "$BROKERS" --topic tickets --job-id fair-small --tenant small \
    --no-progress "$TMP/b.jsonl" >>"$TMP/submit.log" 2>&1 || fail "submit fair-small"
"$RECLASS" submit --brokers "$BROKERS" --topic tickets --job-id fair-big --tenant big \
    --no-progress "$TMP/a.jsonl" >>"$TMP/submit.log" 2>&1 || fail "submit fair-big"
# a window that holds all of small's job (~60k tokens) and a good part of big's: each tenant
# may hold half of it
it_run_worker "$TMP/worker.log" --topic tickets --group g --idle-exit 5 --max-pending 20000 \
    --max-pending-tokens 262144 --tenant-max-tokens 131072
wait "$WORKER_PID" || fail "worker exited with $?"
it_check_job fair-big "$NA"
it_check_job fair-small "$NB"
read -r share tokens < <(psql_q "
    WITH s AS (SELECT min(classified_at) AS t0, max(classified_at) AS t1
               FROM ticket_results WHERE job_id = 'fair-small'),
         b AS (SELECT max(classified_at) AS t1 FROM ticket_results WHERE job_id = 'fair-big')
    SELECT round((sum(tokens) FILTER (WHERE tenant = 'small'))::numeric / sum(tokens), 4),
           sum(tokens)
    FROM ticket_results, s, b
    WHERE classified_at > s.t0 AND classified_at < least(s.t1, b.t1)" | tr '|' ' ')
echo "small's share of the tokens while both were queued: $share of $tokens tokens (weight 1/2)"
[ -n "$share" ] && [ "${tokens:-0}" -gt 20000 ] || fail "the jobs hardly overlapped ($tokens tokens)"
python3 -c "import sys; sys.exit(0 if abs(float('$share') - 0.5) <= 0.05 else 1)" ||
    fail "small's share $share is not within 10% of 0.5"
echo PASS
