#!/usr/bin/env bash
# The whole job on embedded defaults, on a fresh Debian 12 machine (root or sudo):
# installs missing packages, builds, starts a throwaway PostgreSQL and the built-in dev Kafka
# broker, submits the CLINC150 test set (5,500 texts) as one bulk job, runs the worker until
# the job is complete, prints a summary from PostgreSQL (tickets, top intents, accuracy
# against the gold labels, tickets/s) and stops everything it started.
#   deploy/demo.sh            (env: RECLASS_BUILD_DIR, RECLASS_BACKEND=cpu|cuda, KEEP=1,
#                              RECLASS_DEMO_PREBUILT=1: no installs, no build;
#                              RECLASS_DEMO_INPUT=FILE.jsonl, RECLASS_DEMO_MODEL=DIR: another job;
#                              RECLASS_DEMO_PARTITIONS=N (default 4); RECLASS_DEMO_WORKER_ARGS
#                              (more reclass run flags, e.g. "--kafka fetch.wait.max.ms=10");
#                              the worker also reads its own RECLASS_* settings, e.g.
#                              RECLASS_TOKEN_BUDGET)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${RECLASS_BUILD_DIR:-$root/build}
backend=${RECLASS_BACKEND:-cpu}
say() { printf '\033[1m==> %s\033[0m\n' "$*" >&2; }

prebuilt=${RECLASS_DEMO_PREBUILT:-0} # 1: skip steps 1-2, use $RECLASS_BUILD_DIR/reclass as is
input=${RECLASS_DEMO_INPUT:-}        # a JSONL of {"id", "text"} instead of CLINC150 (no accuracy)
model=${RECLASS_DEMO_MODEL:-$root/deploy/models/clinc150-bert-mini}

# 1. packages (only what is missing; apt-get update once)
if [ "$prebuilt" != 1 ]; then
    say "packages (tests/packages.txt, the demo rows)"
    # shellcheck source=tests/lib/packages.sh
    source "$root/tests/lib/packages.sh"
    pkg_install demo || exit 1
fi

# 2. build (the CUDA backend too when nvcc is there)
if [ "$prebuilt" != 1 ]; then
    say "building in $build (output in $build/build.log)"
    # shellcheck source=tests/lib/build.sh
    source "$root/tests/lib/build.sh"
    reclass_build "$build/build.log" "$root" "$build" -DCMAKE_BUILD_TYPE=Release -- --target reclass \
        || exit 1
fi
reclass=$build/reclass

# 3. throwaway services, stopped on any exit
tmp=$(mktemp -d /tmp/reclass-demo.XXXXXX)
# shellcheck source=tests/lib/services.sh
source "$root/tests/lib/services.sh"
cleanup() {
    local rc=$?
    set +e # a closed stderr (| head) must not cut the clean-up short
    svc_stop "$tmp"
    if [ "$rc" != 0 ]; then
        echo "demo failed; logs:" >&2
        svc_tails "$tmp" 20
    fi
    if [ "${KEEP:-0}" = 1 ]; then echo "kept $tmp" >&2; else rm -rf "$tmp"; fi
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

say "starting PostgreSQL and the dev Kafka broker"
svc_start_pg "$reclass" "$tmp" || { echo "demo: PostgreSQL or the migrations failed" >&2; exit 1; }
db=$SVC_DB
svc_start_broker "$reclass" "$tmp" "${RECLASS_DEMO_PARTITIONS:-4}" tickets ||
    { echo "demo: the dev broker did not start" >&2; exit 1; }
brokers=$SVC_BROKERS

if [ -n "$input" ]; then
    cp "$input" "$tmp/tickets.jsonl"
else
    # 4. the CLINC150 test set as submit input, gold labels (and Hugging Face's predictions) as CSV
    python3 - "$root/tests/fixtures/golden_clinc150_test.jsonl" "$tmp/tickets.jsonl" "$tmp/gold.csv" <<'PY'
import csv, json, sys
src, out, gold = sys.argv[1:4]
with open(src, encoding="utf-8") as f, open(out, "w", encoding="utf-8") as o, \
        open(gold, "w", newline="", encoding="utf-8") as g:
    w = csv.writer(g)
    for i, line in enumerate(l for l in f if l.strip()):
        r = json.loads(line)
        tid = "clinc-%05d" % i
        o.write(json.dumps({"id": tid, "text": r["text"]}) + "\n")
        w.writerow([tid, r["label"], r.get("pred", "")])
PY
    psql "$db" -qX -v ON_ERROR_STOP=1 \
        -c "CREATE TABLE demo_gold (ticket_id text PRIMARY KEY, label text NOT NULL, hf_pred text)" \
        -c "\\copy demo_gold FROM '$tmp/gold.csv' WITH (FORMAT csv)"
fi

job=${input:+$(basename "$input" .jsonl)}
job=${job:-clinc150-test}
say "submitting $(wc -l <"$tmp/tickets.jsonl") tickets as job $job"
"$reclass" submit --brokers "$brokers" --topic tickets --job-id "$job" --tenant demo \
    --no-progress "$tmp/tickets.jsonl" 2>"$tmp/submit.log"

# 5. the worker, until the job is done and nothing is left (then it leaves the group itself)
say "running the worker (backend $backend) until the job completes"
"$reclass" run --brokers "$brokers" --topic tickets --group reclass-demo --db "$db" \
    --model "$model" --backend "$backend" --idle-exit 3 \
    --stats-json "$tmp/stats.json" ${RECLASS_DEMO_WORKER_ARGS:-} >"$tmp/run.out" 2>"$tmp/run.log" &
worker=$!
svc_pids+=("$worker")
wait "$worker"

# 6. the summary, from PostgreSQL
q() { psql "$db" -qtAX -v ON_ERROR_STOP=1 -c "$1"; }
echo
echo "job $job:"
q "SELECT format('  tickets %s of %s, complete: %s', done, total, completed_at IS NOT NULL)
   FROM jobs WHERE job_id = '$job'"
echo "top 10 intents:"
q "SELECT format('  %-24s %5s  (mean confidence %s)', label, tickets, round(mean_confidence::numeric, 3))
   FROM job_label_counts WHERE job_id = '$job' ORDER BY tickets DESC, label LIMIT 10"
if [ -z "$input" ]; then
    q "SELECT format('accuracy against the CLINC150 labels: %s%% (%s of %s)',
              round(100.0 * avg((r.label = g.label)::int), 2), sum((r.label = g.label)::int), count(*))
       FROM ticket_results r JOIN demo_gold g USING (ticket_id) WHERE r.job_id = '$job'"
    q "SELECT format('agreement with the Hugging Face reference predictions: %s%%',
              round(100.0 * avg((r.label = g.hf_pred)::int), 2))
       FROM ticket_results r JOIN demo_gold g USING (ticket_id) WHERE r.job_id = '$job' AND g.hf_pred <> ''"
fi
python3 - "$tmp/stats.json" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
print("throughput: %.0f tickets/s on the %s backend (%d tickets in %.2f s, first record to last"
      " commit); encoder %.2f s, non-encoder share of wall time %.1f%%"
      % (s["tickets_per_s"], s["backend"], s["tickets"], s["seconds"], s["encoder_seconds"],
         100 * s["non_encoder_share"]))
PY
echo
echo "(all services stopped; set KEEP=1 to keep logs in $tmp)"
