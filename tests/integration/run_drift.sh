#!/usr/bin/env bash
# Drift on real jobs (dev broker, worker, PostgreSQL, demo model, CPU backend): a reference job
# of CLINC150 texts is pinned as the baseline of three tenants; a bootstrap resample of it must
# read ok, BANKING77 texts (sent to the CLINC150 model) and a label-skewed CLINC150 subset must
# read drift, in drift_scores and in `reclass drift report` (exit 3). Then every panel of the
# Grafana dashboard runs its SQL against this database (tests/grafana_check.py), and `reclass
# report` renders in headless Chromium without console errors (tests/report_check.sh).
#   run_drift.sh RECLASS_BIN [SCREENSHOT.png]
source "$(dirname "$0")/lib.sh" "$1"
SHOT=${2:-}
PY=/usr/bin/python3
it_start_pg
it_start_broker tickets
"$PY" - "$GOLDEN" "$it_root/tests/fixtures/tokens_banking77.jsonl" "$TMP" <<'PY' || fail "inputs"
import json, random, sys
golden, banking, tmp = sys.argv[1:4]
rng = random.Random(15)
clinc = [json.loads(l) for l in open(golden, encoding="utf-8") if l.strip()]
bank = [json.loads(l)["text"] for l in open(banking, encoding="utf-8") if l.strip()]
def write(name, texts):
    with open("%s/%s.jsonl" % (tmp, name), "w", encoding="utf-8") as f:
        for i, t in enumerate(texts):
            f.write(json.dumps({"id": "%s%06d" % (name, i), "text": t}) + "\n")
write("base", [c["text"] for c in clinc])                          # the reference: all 5,500
write("resample", [rng.choice(clinc)["text"] for _ in range(11000)])  # bootstrap resample of it
write("bank", rng.sample(bank, 5500))                               # another domain
intents = sorted({c["label"] for c in clinc})[:20]                  # 20 intents of 151
write("skew", [c["text"] for c in clinc if c["label"] in intents] * 5)
PY
submit() {
    "$RECLASS" submit --brokers "$BROKERS" --topic tickets --job-id "$1" --tenant "$2" \
        --no-progress "$TMP/$1.jsonl" >>"$TMP/submit.log" 2>&1 || fail "submit $1"
}
submit base ref
submit resample acme
submit bank bank
submit skew skew
# hour-long windows: each tenant's job lands in one window (two when it crosses the hour)
it_run_worker "$TMP/worker.log" --topic tickets --group g --idle-exit 5 --drift-window-s 3600 \
    --telemetry-interval-s 1
wait "$WORKER_PID" || fail "worker exited with $?"
it_check_job base 5500
it_check_job resample 11000
it_check_job bank 5500
it_check_job skew 3000
model=$(psql_q "SELECT DISTINCT model FROM ticket_results")
echo "model: $model"

for t in acme bank skew; do
    out=$("$RECLASS" drift baseline --db "$DB" --tenant "$t" --model "$model" --job base) \
        || fail "drift baseline --tenant $t exited $?"
    echo "$out"
done
# the reference tenant's own windows, pinned by time range: it must read ok against itself
out=$("$RECLASS" drift baseline --db "$DB" --tenant ref --model "$model" \
    --from "$(psql_q "SELECT min(window_start) FROM drift_windows")" --to "$(psql_q "SELECT now() + interval '1 day'")") \
    || fail "drift baseline --from/--to exited $?"
echo "$out"

echo "drift_scores per window:"
psql "$DB" -X -P pager=off -c "SELECT bucket_start, tenant, tickets, round(label_psi::numeric, 4) AS label_psi,
    round(label_js::numeric, 4) AS label_js, round(confidence_psi::numeric, 4) AS conf_psi,
    round(confidence_js::numeric, 4) AS conf_js, round(low_confidence_share::numeric, 3) AS low_conf,
    round(low_confidence_change::numeric, 3) AS low_conf_change, cardinality(labels_new) AS new,
    cardinality(labels_gone) AS gone, status, reference
    FROM drift_scores('window') ORDER BY tenant, bucket_start"
# every window with enough tickets to judge reads what its job was built to read
statuses() { psql_q "SELECT string_agg(DISTINCT status, ',') FROM drift_scores('window') WHERE tenant = '$1' AND status <> 'sparse'"; }
[ "$(statuses acme)" = ok ] || fail "the resample reads [$(statuses acme)], want ok"
[ "$(statuses ref)" = ok ] || fail "the reference against itself reads [$(statuses ref)], want ok"
[ "$(statuses bank)" = drift ] || fail "BANKING77 on the CLINC150 model reads [$(statuses bank)], want drift"
[ "$(statuses skew)" = drift ] || fail "the label-skewed subset reads [$(statuses skew)], want drift"
echo "drift_scores per day:"
psql "$DB" -X -P pager=off -c "SELECT bucket_start, tenant, tickets, round(label_psi::numeric, 4) AS label_psi,
    round(confidence_psi::numeric, 4) AS conf_psi, status FROM drift_scores('day') ORDER BY tenant"

set +e
"$RECLASS" drift report --db "$DB" >"$TMP/report.txt" 2>&1; rc=$?
set -e
cat "$TMP/report.txt"
[ "$rc" = 3 ] || fail "drift report exited $rc with tenants in drift, want 3"
grep -q '^bank .* drift ' "$TMP/report.txt" || fail "drift report does not list bank in drift"
"$RECLASS" drift report --db "$DB" --tenant acme --bucket hour || fail "drift report --tenant acme exited $?, want 0"
set +e
"$RECLASS" drift report --db "$DB" --since "last tuesday-ish" 2>"$TMP/err.txt"; rc=$?
"$RECLASS" drift baseline --db "$DB" --tenant x --model "$model" --job nojob 2>>"$TMP/err.txt"; rc2=$?
"$RECLASS" drift baseline --db "$DB" --tenant x --model "$model" 2>>"$TMP/err.txt"; rc3=$?
set -e
cat "$TMP/err.txt"
[ "$rc $rc2 $rc3" = "2 2 2" ] || fail "bad --since / unknown job / no source exit $rc $rc2 $rc3, want 2 2 2"

"$PY" "$it_root/tests/grafana_check.py" --db "$DB" "$it_root/deploy/grafana" || fail "dashboard panels"
bash "$it_root/tests/report_check.sh" "$RECLASS" "$DB" bank "$TMP" "$SHOT" || fail "reclass report"
echo PASS
