#!/usr/bin/env bash
# CLI tests of `reclass classify` and `reclass bench` on the demo model and CLINC150 fixtures.
#   tests/test_classify.sh RECLASS_BIN
set -uo pipefail
bin=${1:?usage: test_classify.sh RECLASS_BIN}
root=$(cd "$(dirname "$0")/.." && pwd)
model=$root/deploy/models/clinc150-bert-mini
golden=$root/tests/fixtures/golden_clinc150_test.jsonl
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
pass=0
fail=0
ok() { pass=$((pass + 1)); echo "ok - $1"; }
bad() { fail=$((fail + 1)); echo "FAIL - $1"; }
check() { # check NAME CMD...: passes when CMD exits 0
    local name=$1
    shift
    if "$@"; then ok "$name"; else bad "$name"; fi
}

# Fixture slices: 20 texts spread over the file (different intents), plain and JSONL.
python3 - "$golden" "$tmp" <<'EOF'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1], encoding="utf-8")]
pick = rows[::275][:20]
d = sys.argv[2]
with open(d + "/20.txt", "w") as f, open(d + "/20.jsonl", "w") as j, open(d + "/20.pred", "w") as p:
    for r in pick:
        f.write(r["text"] + "\n")
        j.write(json.dumps({"text": r["text"], "id": 1}) + "\n")
        p.write(r["pred"] + "\n")
# 600 texts in golden order, every third one replaced by a long one (42..441 tokens) so that
# batches finish out of input order; golden preds and token counts must still line up
with open(d + "/mix.jsonl", "w") as j, open(d + "/mix.expect", "w") as p:
    for i, r in enumerate(rows[:600]):
        if i % 3 == 2:  # "the" is one wordpiece: k words are k + 2 tokens
            k = 40 + (i * 37) % 400
            j.write(json.dumps({"text": "the " * k}) + "\n")
            p.write(f"tokens {k + 2}\n")
        else:
            j.write(json.dumps({"text": r["text"]}) + "\n")
            p.write(f"label {r['pred']}\n")
with open(d + "/ids.jsonl", "w") as j:
    for r in rows[:60]:
        j.write(json.dumps({"ids": r["ids"]}) + "\n")
with open(d + "/texts.jsonl", "w") as j:
    for r in rows[:60]:
        j.write(json.dumps({"text": r["text"]}) + "\n")
EOF

labels() { python3 -c '
import json, sys
for line in sys.stdin:
    print(json.loads(line)["label"])'; }

# 1. golden labels in input order, plain text and JSONL
"$bin" classify --model "$model" --threads 2 <"$tmp/20.txt" >"$tmp/out.txt" 2>"$tmp/err"
check "classify exits 0" test $? -eq 0
labels <"$tmp/out.txt" >"$tmp/out.labels"
check "classify: 20 golden preds in input order" diff -q "$tmp/out.labels" "$tmp/20.pred"
"$bin" classify --model "$model" --jsonl --threads 2 <"$tmp/20.jsonl" | labels >"$tmp/outj.labels"
check "classify --jsonl: 20 golden preds in input order" diff -q "$tmp/outj.labels" "$tmp/20.pred"

# 2. result shape: confidence is top_k[0].p, tokens as the fixture's ids, --top-k, --logits
"$bin" classify --model "$model" --top-k 5 --logits <"$tmp/20.txt" >"$tmp/k5.jsonl"
check "--top-k 5 gives 5 entries, --logits 151 floats, fields consistent" python3 - "$tmp/k5.jsonl" "$golden" <<'EOF'
import json, math, sys
out = [json.loads(l) for l in open(sys.argv[1])]
rows = [json.loads(l) for l in open(sys.argv[2])][::275][:20]
assert len(out) == 20, len(out)
for o, r in zip(out, rows):
    assert len(o["top_k"]) == 5, o["top_k"]
    assert len(o["logits"]) == 151 and all(isinstance(x, float) for x in o["logits"])
    assert o["top_k"][0]["label"] == o["label"] and o["top_k"][0]["p"] == o["confidence"]
    ps = [e["p"] for e in o["top_k"]]
    assert ps == sorted(ps, reverse=True), ps
    assert o["tokens"] == len(r["ids"]) and o["truncated"] is False
    m = max(o["logits"])
    z = sum(math.exp(x - m) for x in o["logits"])
    assert abs(o["confidence"] - 1 / z) < 1e-4, (o["confidence"], 1 / z)
    if "logits" in r:
        assert max(abs(a - b) for a, b in zip(o["logits"], r["logits"])) < 2e-3
EOF
"$bin" classify --model "$model" <"$tmp/20.txt" | python3 -c '
import json, sys
assert all(len(json.loads(l)["top_k"]) == 3 and "logits" not in json.loads(l) for l in sys.stdin)'
check "default: 3 top_k entries and no logits" test $? -eq 0

# 3. reorder buffer: small budget (many batches), few pending slots (forced early batches)
for args in "--token-budget 512" "--token-budget 512 --max-pending 4" "--max-wait-ms 0"; do
    "$bin" classify --model "$model" --jsonl $args <"$tmp/mix.jsonl" | python3 -c '
import json, sys
for i, line in enumerate(sys.stdin):
    o = json.loads(line)
    print("tokens %d" % o["tokens"] if i % 3 == 2 else "label " + o["label"])' >"$tmp/mix.out"
    check "600 texts, long and short, with $args: results in input order" \
        diff -q "$tmp/mix.out" "$tmp/mix.expect"
done

# 4. truncation at the model's 512 positions is flagged
python3 -c 'print("refund " * 700)' >"$tmp/long.txt"
echo "hello" >>"$tmp/long.txt"
"$bin" classify --model "$model" <"$tmp/long.txt" >"$tmp/long.out"
check "a 700-word text: 512 tokens, truncated; the next one not" python3 -c '
import json, sys
a, b = [json.loads(l) for l in open(sys.argv[1])]
assert a["tokens"] == 512 and a["truncated"] is True, a
assert b["tokens"] == 3 and b["truncated"] is False, b' "$tmp/long.out"

# 5. errors: missing model dir (exit 2, one line), bad options, bad JSONL line
"$bin" classify --model "$tmp/no-such-model" <"$tmp/20.txt" >"$tmp/o" 2>"$tmp/e"
rc=$?
check "missing model dir exits 2" test $rc -eq 2
check "missing model dir: one-line message naming the dir" \
    bash -c '[ $(wc -l <"$1") -eq 1 ] && grep -q no-such-model "$1"' _ "$tmp/e"
"$bin" classify <"$tmp/20.txt" >/dev/null 2>&1
check "no --model exits 2" test $? -eq 2
"$bin" classify --model "$model" --token-budget 100 <"$tmp/20.txt" >/dev/null 2>"$tmp/e"
rc=$?
check "--token-budget below 512 exits 2 with what to fix" \
    bash -c '[ $1 -eq 2 ] && grep -q "at least 512" "$2"' _ $rc "$tmp/e"
"$bin" classify --model "$model" --backend tpu <"$tmp/20.txt" >/dev/null 2>&1
check "unknown backend exits 2" test $? -eq 2
printf '{"text": "what is my balance"}\nnot json\n{"text": "book a flight to paris"}\n' |
    "$bin" classify --model "$model" --jsonl >"$tmp/o" 2>"$tmp/e"
rc=$?
check "a bad JSONL line: error line in place, the others classified, exit 2" python3 -c '
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
assert len(rows) == 3, rows
assert rows[0]["label"] == "balance" and "error" in rows[1] and "line 2" in rows[1]["error"]
assert rows[2]["label"] == "book_flight", rows[2]
assert int(sys.argv[2]) == 2' "$tmp/o" $rc

# 6. streaming: a result comes out when its deadline passes, before stdin closes
start=$(date +%s.%N)
{
    echo "what is my balance"
    sleep 3
} | "$bin" classify --model "$model" --max-wait-ms 50 | {
    read -r first
    echo "$(date +%s.%N) $first" >"$tmp/stream"
}
check "streaming: first result within 2 s while stdin is still open" python3 -c '
import json, sys
t, line = open(sys.argv[1]).read().split(" ", 1)
assert json.loads(line)["label"] == "balance"
assert float(t) - float(sys.argv[2]) < 2.0, float(t) - float(sys.argv[2])' "$tmp/stream" "$start"

# 7. bench: JSON on the last line, from ids, texts, and tickets-mix on a random geometry
bench_json() { # bench_json FILE KEY=VALUE...: last line parses and has the given values
    python3 - "$@" <<'EOF'
import json, sys
last = open(sys.argv[1]).read().strip().splitlines()[-1]
o = json.loads(last)
for k in ("backend", "precision", "model", "tickets", "tokens", "batches", "seconds",
          "tickets_per_s", "tokens_per_s", "gemm_tflops_achieved", "gemm_ceiling_tflops",
          "share_of_ceiling", "peak_device_bytes"):
    assert k in o, k
for kv in sys.argv[2:]:
    k, v = kv.split("=")
    assert str(o[k]) == v, (k, o[k], v)
assert o["seconds"] > 0 and o["tickets_per_s"] > 0 and o["gemm_tflops_achieved"] > 0
EOF
}
"$bin" bench --backend cpu --model "$model" --workload "$tmp/ids.jsonl" --threads 2 \
    --warmup 1 --repeat 2 >"$tmp/b1" 2>"$tmp/e"
check "bench {ids} workload: JSON last line" bench_json "$tmp/b1" tickets=60 backend=cpu \
    gemm_ceiling_tflops=None peak_device_bytes=None precision=fp32
"$bin" bench --backend cpu --model "$model" --workload "$tmp/texts.jsonl" --threads 2 \
    --warmup 0 --repeat 1 --token-budget 1024 >"$tmp/b2" 2>"$tmp/e"
tokens=$(python3 -c 'import json,sys; print(sum(len(json.loads(l)["ids"]) for l in open(sys.argv[1])))' "$tmp/ids.jsonl")
check "bench {text} workload tokenizes like the fixtures" bench_json "$tmp/b2" tickets=60 \
    tokens="$tokens"
"$bin" bench --backend cpu --geometry bert-mini --labels 3 --workload tickets-mix \
    --tickets 300 --threads 2 --warmup 0 --repeat 1 >"$tmp/b3" 2>"$tmp/e"
check "bench tickets-mix on a random geometry" bench_json "$tmp/b3" tickets=300
"$bin" bench --backend cpu --model "$model" --workload "$tmp/none.jsonl" >/dev/null 2>&1
check "bench: missing workload file exits 2" test $? -eq 2
echo '{"ids": [101, 99999999, 102]}' >"$tmp/badids.jsonl"
"$bin" bench --backend cpu --model "$model" --workload "$tmp/badids.jsonl" >/dev/null 2>"$tmp/e"
rc=$?
check "bench: an id outside the vocabulary exits 2 naming the line" \
    bash -c '[ $1 -eq 2 ] && grep -q "line 1" "$2"' _ $rc "$tmp/e"

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
