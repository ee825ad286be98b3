#!/usr/bin/env bash
# Observability of `reclass run`: /healthz, /readyz and /metrics answer while it works;
# /metrics counts exactly the N tickets; drift_windows sums to N (per tenant, per label, every
# histogram summing to its row's tickets); gpu_memory has its start, interval and exit rows.
#   run_observability.sh RECLASS_BIN
source "$(dirname "$0")/lib.sh" "$1"
NA=600 NB=400
N=$((NA + NB))
it_start_pg
it_start_broker tickets
it_make_input "$TMP/a.jsonl" $NA a
it_make_input "$TMP/b.jsonl" $NB b
it_submit tickets job-a "$TMP/a.jsonl"
"$RECLASS" submit --brokers "$BROKERS" --topic tickets --job-id job-b --tenant globex \
    --no-progress "$TMP/b.jsonl" >>"$TMP/submit.log" 2>&1 || fail "submit job-b"

PORT=$(svc_free_port)
URL=http://127.0.0.1:$PORT
# http_get PATH: prints the status code, then the body
http_get() {
    python3 - "$URL$1" <<'PY'
import sys, urllib.request, urllib.error
try:
    r = urllib.request.urlopen(sys.argv[1], timeout=5)
    print(r.status); print(r.headers.get("Content-Type")); sys.stdout.write(r.read().decode())
except urllib.error.HTTPError as e:
    print(e.code); print(e.headers.get("Content-Type")); sys.stdout.write(e.read().decode())
except Exception as e:
    print(0); print(""); print(e)
PY
}
# wait_status PATH CODE TIMEOUT_S
wait_status() {
    local deadline=$((SECONDS + $3)) got
    while [ "$SECONDS" -lt "$deadline" ]; do
        kill -0 "$WORKER_PID" 2>/dev/null || fail "worker exited before $1 answered $2"
        got=$(http_get "$1")
        got=${got%%$'\n'*}
        [ "$got" = "$2" ] && return 0
        sleep 0.2
    done
    fail "$1 answered $got, want $2 (waited $3 s)"
}
metric() { # metric NAME: its value in the last /metrics scrape ($TMP/metrics.txt)
    awk -v n="$1" '$1 == n { print $2 }' "$TMP/metrics.txt"
}

it_run_worker "$TMP/worker.log" --topic tickets --group g --idle-exit 8 \
    --http-port "$PORT" --http-addr 127.0.0.1 --drift-window-s 2 --telemetry-interval-s 1
wait_status /healthz 200 60
wait_status /readyz 200 60
echo "healthz 200, readyz 200"
# the port is taken: a second worker says so and exits 1 before touching Kafka or PostgreSQL
rc=0
"$RECLASS" run --db postgresql://nobody@127.0.0.1:1/none --model "$MODEL" --http-port "$PORT" \
    --http-addr 127.0.0.1 >/dev/null 2>"$TMP/taken.log" || rc=$?
[ "$rc" = 1 ] && grep -q "cannot serve HTTP on 127.0.0.1:$PORT" "$TMP/taken.log" ||
    fail "port in use: exit $rc, $(cat "$TMP/taken.log")"
nope=$(http_get /nope)
[ "${nope%%$'\n'*}" = 404 ] || fail "unknown path must answer 404"
it_wait_rows job-a $NA 120
it_wait_rows job-b $NB 120
# committed rows are counted right after COMMIT: the counter catches up at once
deadline=$((SECONDS + 20))
while :; do
    http_get /metrics >"$TMP/scrape.txt"
    tail -n +3 "$TMP/scrape.txt" >"$TMP/metrics.txt"
    [ "$(metric reclass_tickets_classified_total)" = "$N" ] && break
    [ "$SECONDS" -lt "$deadline" ] || fail "reclass_tickets_classified_total=$(metric reclass_tickets_classified_total), want $N"
    sleep 0.2
done
[ "$(head -n1 "$TMP/scrape.txt")" = 200 ] || fail "/metrics status"
grep -q 'version=0.0.4' <(sed -n 2p "$TMP/scrape.txt") || fail "/metrics content type: $(sed -n 2p "$TMP/scrape.txt")"
echo "metrics: classified=$(metric reclass_tickets_classified_total) consumed=$(metric reclass_tickets_consumed_total) batches=$(metric reclass_batches_total) commits=$(metric reclass_sink_commits_total)"
[ "$(metric reclass_tickets_consumed_total)" = "$N" ] || fail "consumed_total $(metric reclass_tickets_consumed_total) != $N"
[ "$(metric reclass_tickets_dead_lettered_total)" = 0 ] || fail "dead letters"
[ "$(metric 'reclass_allocations_after_init{encoder="0",device="0"}')" = 0 ] || fail "allocations after init"
[ "$(metric reclass_token_budget)" = 4096 ] || fail "token budget gauge"
[ "$(metric reclass_partitions_assigned)" = 4 ] || fail "partitions_assigned $(metric reclass_partitions_assigned), want 4"
[ "$(metric reclass_sink_connected)" = 1 ] || fail "sink_connected"
python3 - "$TMP/metrics.txt" <<'PY' || fail "/metrics is not valid exposition format"
import re, sys
name_re = r"[a-zA-Z_:][a-zA-Z0-9_:]*"
typed, helped = {}, set()
for line in open(sys.argv[1]):
    line = line.rstrip("\n")
    if line.startswith("# HELP "):
        helped.add(line.split()[2]); continue
    if line.startswith("# TYPE "):
        _, _, n, t = line.split(" ", 3); typed[n] = t; continue
    m = re.fullmatch(r"(%s)(\{.*\})? (\S+)" % name_re, line)
    assert m, line
    n = m.group(1); float(m.group(3))
    base = re.sub(r"_(bucket|sum|count)$", "", n)
    if base != n and typed.get(base) == "histogram":
        n = base  # a histogram's samples carry its name plus _bucket, _sum, _count
    assert n.startswith("reclass_") and n in typed and n in helped, line
    assert typed[n] == "histogram" or (typed[n] == "counter") == n.endswith("_total"), line
print("exposition ok:", len(typed), "metrics")
PY
wait "$WORKER_PID" || fail "worker exited with $?"
it_check_job job-a $NA
it_check_job job-b $NB

drift=$(psql_q "SELECT COALESCE(sum(tickets), 0) FROM drift_windows")
echo "drift_windows: tickets=$drift rows=$(psql_q "SELECT count(*) FROM drift_windows") windows=$(psql_q "SELECT count(DISTINCT window_start) FROM drift_windows")"
[ "$drift" = "$N" ] || fail "drift_windows tickets sum $drift, want $N"
[ "$(psql_q "SELECT string_agg(tenant || '=' || s, ',' ORDER BY tenant) FROM (SELECT tenant, sum(tickets) s FROM drift_windows GROUP BY tenant) t")" = "acme=$NA,globex=$NB" ] ||
    fail "drift per tenant: $(psql_q "SELECT tenant, sum(tickets) FROM drift_windows GROUP BY tenant")"
bad=$(psql_q "SELECT count(*) FROM drift_windows d WHERE window_s <> 2
    OR extract(epoch FROM window_start)::bigint % 2 <> 0
    OR (SELECT sum(h) FROM unnest(confidence_hist) h) <> tickets
    OR (SELECT sum(value::bigint) FROM jsonb_each_text(label_counts)) <> tickets
    OR abs(mean_confidence - confidence_sum / tickets) > 1e-4 OR overflow")
[ "$bad" = 0 ] || fail "$bad drift_windows rows inconsistent (window, histogram, label counts)"
# no redelivery here, so drift's label counts are exact: they match ticket_results
diff <(psql_q "SELECT key, sum(value::bigint) FROM drift_windows, jsonb_each_text(label_counts) GROUP BY key ORDER BY key") \
     <(psql_q "SELECT label, count(*) FROM ticket_results GROUP BY label ORDER BY label") >/dev/null ||
    fail "drift label counts differ from ticket_results"
gm=$(psql_q "SELECT count(*) FROM gpu_memory")
echo "gpu_memory: rows=$gm $(psql_q "SELECT backend, \"precision\", weights_bytes, arena_bytes, allocations_after_init, token_budget FROM gpu_memory ORDER BY at DESC LIMIT 1")"
[ "$gm" -ge 3 ] || fail "gpu_memory has $gm rows, want start + interval + exit (>= 3)"
[ "$(psql_q "SELECT count(*) FROM gpu_memory WHERE backend = 'cpu' AND \"precision\" = 'fp32' AND weights_bytes > 0 AND arena_bytes > 0 AND allocations_after_init = 0 AND token_budget = 4096 AND worker LIKE '%:%'")" = "$gm" ] ||
    fail "gpu_memory rows incomplete"
[ "$(psql_q "SELECT (SELECT min(at) FROM gpu_memory) < (SELECT min(classified_at) FROM ticket_results)
    AND (SELECT max(at) FROM gpu_memory) > (SELECT max(classified_at) FROM ticket_results)")" = t ] ||
    fail "gpu_memory lacks its start-up row or its exit row"
# flags: documented with their variables; bad values are one-line usage errors (exit 2)
help=$("$RECLASS" run --help)
for v in HTTP_PORT HTTP_ADDR DRIFT_WINDOW_S DRIFT_MAX_TENANTS TELEMETRY_INTERVAL_S; do
    flag=--$(echo "$v" | tr 'A-Z_' 'a-z-')
    grep -q -- "$flag " <<<"$help" && grep -q "\$RECLASS_$v" <<<"$help" || fail "--help lacks $flag"
done
for bad in "--http-addr localhost" "--http-port 70000" "--drift-window-s 0" "--drift-max-tenants 0"; do
    rc=0
    # shellcheck disable=SC2086
    err=$("$RECLASS" run --db x --model "$MODEL" $bad 2>&1 >/dev/null) || rc=$?
    [ "$rc" = 2 ] && [ "$(wc -l <<<"$err")" = 1 ] || fail "'$bad': exit $rc, '$err'"
done
rc=0
err=$(RECLASS_TELEMETRY_INTERVAL_S=abc "$RECLASS" run --db x --model "$MODEL" 2>&1 >/dev/null) || rc=$?
[ "$rc" = 2 ] && grep -q RECLASS_TELEMETRY_INTERVAL_S <<<"$err" || fail "bad variable: exit $rc, '$err'"
echo PASS
