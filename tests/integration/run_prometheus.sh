#!/usr/bin/env bash
# A real Prometheus (Debian's package) scrapes a running `reclass run` and loads
# deploy/prometheus/alerts.yml: every rule evaluates without error, and every reclass_* series
# that the alerts and the Grafana dashboard's Prometheus panels name is in its query API, with
# the job's exact ticket count. Exits 77 (skipped) when no prometheus binary is installed.
#   run_prometheus.sh RECLASS_BIN
source "$(dirname "$0")/lib.sh" "$1"
PROM=$(command -v prometheus || true)
[ -n "$PROM" ] || { echo "SKIP: no prometheus binary (apt-get install prometheus)" >&2; exit 77; }
N=500
PORT=$(svc_free_port)
PPORT=$(svc_free_port)
it_start_pg
it_start_broker tickets
it_make_input "$TMP/a.jsonl" $N a
it_submit tickets job-a "$TMP/a.jsonl"
it_run_worker "$TMP/worker.log" --topic tickets --group g --idle-exit 25 \
    --http-port "$PORT" --http-addr 127.0.0.1 --drift-window-s 2 --telemetry-interval-s 1

cp "$it_root/deploy/prometheus/alerts.yml" "$TMP/alerts.yml"
cat >"$TMP/prometheus.yml" <<YML
global:
  scrape_interval: 1s
  evaluation_interval: 1s
rule_files: [alerts.yml]
scrape_configs:
  - job_name: reclass
    static_configs: [{targets: ["127.0.0.1:$PORT"]}]
YML
"$PROM" --config.file="$TMP/prometheus.yml" --storage.tsdb.path="$TMP/tsdb" \
    --web.listen-address="127.0.0.1:$PPORT" >"$TMP/prometheus.log" 2>&1 &
svc_pids+=("$!")
it_wait_rows job-a $N 120

# The series named by the alerts and by the dashboard's Prometheus panels.
names=$( (grep -o 'reclass_[a-z_]*' "$it_root/deploy/prometheus/alerts.yml"
    python3 -c '
import json, re, sys
d = json.load(open(sys.argv[1]))
def walk(x):
    if isinstance(x, dict):
        for k, v in x.items():
            if k == "expr" and isinstance(v, str): print("\n".join(re.findall(r"reclass_[a-z_]+", v)))
            else: walk(v)
    elif isinstance(x, list):
        for v in x: walk(v)
walk(d)' "$it_root/deploy/grafana/dashboards/reclass.json") | sort -u)
echo "series checked: $(echo $names)"
[ "$(echo "$names" | wc -w)" -ge 8 ] || fail "too few series found in alerts and dashboard: $names"

# prom_q QUERY: the query API's result as compact JSON lines "metric-labels value"
prom_q() {
    python3 - "http://127.0.0.1:$PPORT/api/v1/query" "$1" <<'PY'
import json, sys, urllib.parse, urllib.request
u = sys.argv[1] + "?" + urllib.parse.urlencode({"query": sys.argv[2]})
try:
    r = json.load(urllib.request.urlopen(u, timeout=5))
except Exception as e:
    sys.exit(0)
for s in r.get("data", {}).get("result", []):
    print(json.dumps(s["metric"], sort_keys=True), s["value"][1])
PY
}
deadline=$((SECONDS + 60))
while :; do
    missing=()
    for n in $names; do [ -n "$(prom_q "$n")" ] || missing+=("$n"); done
    classified=$(prom_q 'sum(reclass_tickets_classified_total{job="reclass"})' | awk '{print $NF}')
    # up checked here too: on a busy machine the loop can outlast the worker's --idle-exit
    up=$(prom_q 'up{job="reclass"}' | awk '{print $NF}')
    [ ${#missing[@]} = 0 ] && [ "$classified" = "$N" ] && [ "$up" = 1 ] && break
    [ "$SECONDS" -lt "$deadline" ] || fail "not in Prometheus after 60 s: ${missing[*]}; classified=$classified (want $N); up{job=reclass}=$up (want 1); $(tail -n 5 "$TMP/prometheus.log")"
    sleep 1
done
echo "prometheus: every series present, reclass_tickets_classified_total = $classified, up = 1"
prom_q 'reclass_drift_status' | grep -q '"tenant": "acme"' || fail "reclass_drift_status has no acme series"
# Every rule loaded and evaluated without error.
python3 - "http://127.0.0.1:$PPORT/api/v1/rules" <<'PY' || fail "alert rules not healthy"
import json, sys, urllib.request
r = json.load(urllib.request.urlopen(sys.argv[1], timeout=5))
rules = [x for g in r["data"]["groups"] for x in g["rules"]]
bad = [(x["name"], x.get("health"), x.get("lastError")) for x in rules if x.get("health") != "ok"]
print("rules:", len(rules), "unhealthy:", bad)
sys.exit(1 if bad or len(rules) < 7 else 0)
PY
wait "$WORKER_PID" || fail "worker exited with $?"
it_check_job job-a $N
echo "PASS"
