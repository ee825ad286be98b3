#!/usr/bin/env bash
# 500 tenants through one worker with the defaults (--drift-max-tenants 4,096): every tenant
# gets its own drift_windows rows (none folded into _other, none flagged overflow), its
# tickets counted exactly, a drift_status row and stored scores; the tenant that drifts,
# named last alphabetically, is exported first by /metrics (reclass_drift_status 3, worst
# first) and fires ReclassTenantDrift when the scraped series go through the alert rules
# (promtool). Not timed; it waits for a minute to start so that the drifter's burst of tickets
# falls in one 60 s window (it takes a few seconds), so a run lasts about two minutes.
#   run_tenants.sh RECLASS_BIN
source "$(dirname "$0")/lib.sh" "$1"
TENANTS=500 PER=6 DRIFTER=zz-last NDRIFT=200
it_start_pg
it_start_broker tickets
# Only the drifting tenant has a baseline (one label of the model), pinned before the worker
# writes. The others send too few tickets to be judged in any window (sparse, level 0); the
# drifter's tickets come in one burst after a minute starts, inside one 60 s window.
model=$(python3 -c 'import os, sys; print(os.path.basename(os.path.normpath(sys.argv[1])))' "$MODEL")
label0=$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1] + "/config.json"))["id2label"]["0"])' "$MODEL")
psql_q "INSERT INTO drift_baselines (tenant, model, label_counts, confidence_hist, tickets, source)
        VALUES ('$DRIFTER', '$model', jsonb_build_object('$label0', 1000), '{0,0,0,0,0,0,0,0,0,1000}', 1000, 'windows')" \
    >/dev/null || fail "baseline"

# tenants acme-000 .. acme-498: PER CLINC150 texts each; the drifter: BANKING77 texts
python3 - "$GOLDEN" "$it_root/tests/fixtures/tokens_banking77.jsonl" "$TMP" "$TENANTS" "$PER" "$DRIFTER" "$NDRIFT" <<'PY' || fail "inputs"
import json, sys
golden, banking, tmp, tenants, per, drifter, ndrift = sys.argv[1:8]
tenants, per, ndrift = int(tenants), int(per), int(ndrift)
clinc = [json.loads(l)["text"] for l in open(golden, encoding="utf-8") if l.strip()]
bank = [json.loads(l)["text"] for l in open(banking, encoding="utf-8") if l.strip()]
with open(tmp + "/jobs.txt", "w") as jobs:
    for k in range(tenants):
        name = drifter if k == tenants - 1 else "acme-%03d" % k
        texts = bank[:ndrift] if name == drifter else [clinc[(k * per + i) % len(clinc)] for i in range(per)]
        with open("%s/%s.jsonl" % (tmp, name), "w", encoding="utf-8") as f:
            for i, t in enumerate(texts):
                f.write(json.dumps({"id": "%s-%04d" % (name, i), "text": t}) + "\n")
        jobs.write(name + "\n")
PY
total=$(( (TENANTS - 1) * PER + NDRIFT ))
export RECLASS BROKERS TMP
submit_all() { # FILE: a job per tenant named in FILE, 4 at a time
    xargs -P 4 -I{} sh -c '"$RECLASS" submit --brokers "$BROKERS" --topic tickets --job-id "job-{}" --tenant "{}" \
        --no-progress "$TMP/{}.jsonl" >>"$TMP/submit.log" 2>&1 || echo "submit {} failed"' <"$1" >"$TMP/submit_failed.txt"
    [ -s "$TMP/submit_failed.txt" ] && fail "$(head -3 "$TMP/submit_failed.txt")"
    return 0
}
wait_rows() { # N: until ticket_results holds N rows
    local deadline=$((SECONDS + 240))
    until [ "$(psql_q "SELECT count(*) FROM ticket_results")" = "$1" ]; do
        kill -0 "$WORKER_PID" 2>/dev/null || fail "worker exited before storing $1 tickets"
        [ "$SECONDS" -lt "$deadline" ] || fail "$(psql_q "SELECT count(*) FROM ticket_results") of $1 tickets stored"
        sleep 1
    done
}
PORT=$(svc_free_port)
scrape() {
    python3 -c 'import sys, urllib.request; sys.stdout.write(urllib.request.urlopen(sys.argv[1], timeout=5).read().decode())' \
        "http://127.0.0.1:$PORT/metrics" 2>/dev/null
}
it_run_worker "$TMP/worker.log" --topic tickets --group g --http-port "$PORT" --http-addr 127.0.0.1 \
    --drift-window-s 60 --telemetry-interval-s 1
grep -vx "$DRIFTER" "$TMP/jobs.txt" >"$TMP/acme.txt"
submit_all "$TMP/acme.txt"
wait_rows $(( (TENANTS - 1) * PER ))
echo "$((TENANTS - 1)) tenants' jobs stored"
sleep $(( 61 - $(date +%s) % 60 ))
echo "$DRIFTER" >"$TMP/drifter.txt"
submit_all "$TMP/drifter.txt"
wait_rows "$total"
echo "all $TENANTS tenants' $total tickets stored"
# the drifter's window closes at the next minute, then it is judged and exported
deadline=$((SECONDS + 120))
while :; do
    scrape >"$TMP/metrics.txt" || true
    grep -q "^reclass_drift_status{tenant=\"$DRIFTER\",model=\"$model\"} 3$" "$TMP/metrics.txt" && break
    kill -0 "$WORKER_PID" 2>/dev/null || fail "worker exited before /metrics showed $DRIFTER in drift"
    [ "$SECONDS" -lt "$deadline" ] || fail "/metrics: no reclass_drift_status 3 for $DRIFTER: $(grep '^reclass_drift' "$TMP/metrics.txt" | head -5)"
    sleep 0.5
done
first=$(grep -m1 '^reclass_drift_status{' "$TMP/metrics.txt")
[ "$first" = "reclass_drift_status{tenant=\"$DRIFTER\",model=\"$model\"} 3" ] || fail "worst first: the first series is $first"
drifting=$(awk -v m="reclass_drift_tenants{model=\"$model\",status=\"drift\"}" '$1 == m { print $2 }' "$TMP/metrics.txt")
[ "$drifting" = 1 ] || fail "reclass_drift_tenants drift = [$drifting], want 1"
echo "/metrics: $first first of $(grep -c '^reclass_drift_status{' "$TMP/metrics.txt") exported; drift tenants $drifting"

# the alert, fed the scraped series: fires for the drifter, for no one else
python3 - "$TMP/metrics.txt" "$it_root/deploy/prometheus/alerts.yml" "$TMP/alert_test.yml" "$DRIFTER" "$model" <<'PY' || fail "alert test file"
import re, sys
metrics, rules, out, drifter, model = sys.argv[1:6]
series = [l.split()[0:2] for l in open(metrics) if l.startswith("reclass_drift_status{")]
with open(out, "w") as f:
    f.write("rule_files:\n  - %s\nevaluation_interval: 1m\ntests:\n  - interval: 1m\n    input_series:\n" % rules)
    for name, value in series:
        f.write("      - series: '%s'\n        values: '%sx10'\n" % (name, value))
    f.write("    alert_rule_test:\n      - eval_time: 6m\n        alertname: ReclassTenantDrift\n        exp_alerts:\n")
    f.write("          - exp_labels: {severity: warning, tenant: %s, model: %s}\n" % (drifter, model))
    f.write("            exp_annotations:\n")
    f.write("              summary: \"tenant %s drifts on %s\"\n" % (drifter, model))
    f.write("              description: \"The label or confidence distribution moved past drift_settings()'s threshold. "
            "`reclass drift report --tenant %s` shows since when and which labels.\"\n" % drifter)
PY
promtool test rules "$TMP/alert_test.yml" >"$TMP/promtool.log" 2>&1 || fail "ReclassTenantDrift on the scraped series: $(cat "$TMP/promtool.log")"
echo "ReclassTenantDrift fires for $DRIFTER on the scraped series"

kill -TERM "$WORKER_PID"
wait "$WORKER_PID" || fail "worker exited with $? on SIGTERM"
WORKER_PID=
check() { # NAME EXPECTED SQL
    local got
    got=$(psql_q "$3")
    [ "$got" = "$2" ] || fail "$1: got [$got], want [$2]"
    echo "ok   $1"
}
check "every tenant has its own drift rows" "$TENANTS" "SELECT count(DISTINCT tenant) FROM drift_windows"
check "nothing folded into _other or flagged overflow" "0" \
    "SELECT count(*) FROM drift_windows WHERE tenant = '_other' OR overflow"
check "each tenant's drift tickets equal its results" "0" \
    "SELECT count(*) FROM (SELECT tenant, count(*) n FROM ticket_results GROUP BY tenant) r
     FULL JOIN (SELECT tenant, sum(tickets) n FROM drift_windows GROUP BY tenant) d USING (tenant)
     WHERE r.n IS DISTINCT FROM d.n"
check "a drift_status row per tenant" "$TENANTS" "SELECT count(*) FROM drift_status WHERE model = '$model'"
check "stored scores for every tenant" "$TENANTS" "SELECT count(DISTINCT tenant) FROM drift_judged"
check "only the drifter drifts" "$DRIFTER" "SELECT string_agg(DISTINCT tenant, ',') FROM drift_judged WHERE status = 'drift'"
grep -q "folded into _other" "$TMP/worker.log" && fail "the worker folded tenants: $(grep -m1 'folded' "$TMP/worker.log")"
echo "run_tenants: ok"
