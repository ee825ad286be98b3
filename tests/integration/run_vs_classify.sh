#!/usr/bin/env bash
# `reclass run` and `reclass classify` score through one engine: on the CLINC150 demo job
# (5,500 texts, demo model, CPU backend) every ticket gets the same label, the same confidence
# as stored (PostgreSQL real = float) and the same top_k (labels and p) from both.
#   run_vs_classify.sh RECLASS_BIN
source "$(dirname "$0")/lib.sh" "$1"
N=5500
it_start_pg
it_start_broker tickets
it_make_input "$TMP/in.jsonl" "$N" c
it_submit tickets job-rc "$TMP/in.jsonl"
it_run_worker "$TMP/worker.log" --topic tickets --group g --idle-exit 5
wait "$WORKER_PID" || fail "worker exited with $?"
it_check_job job-rc "$N"
"$RECLASS" classify --model "$MODEL" --backend cpu --jsonl <"$TMP/in.jsonl" >"$TMP/classify.jsonl" \
    || fail "classify exited with $?"
psql "$DB" -qtAX -v ON_ERROR_STOP=1 -F $'\t' \
    -c "SET extra_float_digits = 3" \
    -c "SELECT ticket_id, label, confidence, top_k::text FROM ticket_results
        WHERE job_id = 'job-rc' ORDER BY ticket_id" >"$TMP/db.tsv" || fail "reading ticket_results"
python3 - "$TMP/in.jsonl" "$TMP/classify.jsonl" "$TMP/db.tsv" <<'PY' || fail "run and classify differ"
import json, struct, sys
f32 = lambda x: struct.unpack("f", struct.pack("f", float(x)))[0]
ids = [json.loads(l)["id"] for l in open(sys.argv[1], encoding="utf-8")]
cls = [json.loads(l) for l in open(sys.argv[2], encoding="utf-8")]
assert len(cls) == len(ids), (len(cls), len(ids))
db = {}
for line in open(sys.argv[3], encoding="utf-8"):
    tid, label, conf, top = line.rstrip("\n").split("\t")
    db[tid] = (label, float(conf), json.loads(top))
assert len(db) == len(ids), (len(db), len(ids))
bad = {"label": 0, "confidence": 0, "top_k": 0}
for tid, c in zip(ids, cls):
    label, conf, top = db[tid]
    ok = {"label": label == c["label"],
          "confidence": f32(conf) == f32(c["confidence"]),
          "top_k": [t["label"] for t in top] == [t["label"] for t in c["top_k"]]
                   and [f32(t["p"]) for t in top] == [f32(t["p"]) for t in c["top_k"]]}
    for k, v in ok.items():
        if not v:
            if bad[k] < 3:
                print("differ in %s: %s db=%r classify=%r" % (k, tid, db[tid], c), file=sys.stderr)
            bad[k] += 1
print("tickets %d: labels differ %d, confidences differ %d, top_k differ %d"
      % (len(ids), bad["label"], bad["confidence"], bad["top_k"]))
sys.exit(1 if any(bad.values()) else 0)
PY
echo PASS
