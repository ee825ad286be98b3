#!/usr/bin/env bash
# Every model family end to end on the CPU, tokenizer included: for each fixture checkpoint in
# tests/fixtures/models/ (DistilBERT and ELECTRA on WordPiece, RoBERTa and ModernBERT on
# byte-level BPE, XLM-R and DeBERTa-v3 on SentencePiece Unigram, each from its
# tokenizer.json), 400 CLINC150 test texts and
# 400 multilingual lines go through
#  - `reclass classify`: the label of every text is Hugging Face's (the goldens' "pred", made
#    by `tokenizers` + `transformers` in fp32) and its token count the goldens' ids;
#  - `reclass run`: a job through Kafka into PostgreSQL, complete, with the same label,
#    confidence and top_k per ticket as classify gave.
#   run_families.sh RECLASS_BIN
source "$(dirname "$0")/lib.sh" "$1"
FIX=$it_root/tests/fixtures/models
it_start_pg
it_start_broker tickets
n_total=0
families="distilbert roberta xlmr electra modernbert deberta"
for fam in $families; do
    dir=$FIX/$fam-clinc150
    in=$TMP/$fam.jsonl
    python3 - "$dir" "$in" "$fam" <<'PY' || fail "$fam: input"
import json, sys
d, dst, fam = sys.argv[1:]
rows = []
for name, n in (("golden_clinc150_test.jsonl", 400), ("golden_multilingual.jsonl", 400)):
    with open("%s/%s" % (d, name), encoding="utf-8") as f:
        rows += [json.loads(l) for l in f if l.strip()][:n]
with open(dst, "w", encoding="utf-8") as f:
    for i, r in enumerate(rows):
        f.write(json.dumps({"id": "%s%04d" % (fam, i), "text": r["text"], "pred": r["pred"],
                            "ntok": len(r["ids"])}, ensure_ascii=False) + "\n")
PY
    n=$(wc -l <"$in")
    n_total=$((n_total + n))
    "$RECLASS" classify --model "$dir" --backend cpu --jsonl <"$in" >"$TMP/$fam.classify" \
        2>"$TMP/$fam.classify.err" || fail "$fam: classify exited with $? ($(tail -1 "$TMP/$fam.classify.err"))"
    "$RECLASS" submit --brokers "$BROKERS" --topic "t-$fam" --job-id "job-$fam" --tenant "$fam" \
        --no-progress "$in" >>"$TMP/submit.log" 2>&1 || fail "$fam: submit"
    # A topic per family (the dev broker creates it on first use): each worker reads its own.
    MODEL=$dir it_run_worker "$TMP/$fam.worker.log" --topic "t-$fam" --group "g-$fam" --idle-exit 5
    wait "$WORKER_PID" || fail "$fam: worker exited with $?"
    it_check_job "job-$fam" "$n"
    psql "$DB" -qtAX -v ON_ERROR_STOP=1 -F $'\t' -c "SET extra_float_digits = 3" \
        -c "SELECT ticket_id, label, confidence, top_k::text FROM ticket_results
            WHERE job_id = 'job-$fam' ORDER BY ticket_id" >"$TMP/$fam.db" || fail "$fam: rows"
    python3 - "$fam" "$in" "$TMP/$fam.classify" "$TMP/$fam.db" <<'PY' || fail "$fam: differs"
import json, struct, sys
fam = sys.argv[1]
f32 = lambda x: struct.unpack("f", struct.pack("f", float(x)))[0]
inp = [json.loads(l) for l in open(sys.argv[2], encoding="utf-8")]
cls = [json.loads(l) for l in open(sys.argv[3], encoding="utf-8")]
db = {}
for line in open(sys.argv[4], encoding="utf-8"):
    tid, label, conf, top = line.rstrip("\n").split("\t")
    db[tid] = (label, float(conf), json.loads(top))
assert len(cls) == len(inp) == len(db), (len(cls), len(inp), len(db))
bad = {"hf label": 0, "tokens": 0, "run label": 0, "run confidence": 0, "run top_k": 0}
for r, c in zip(inp, cls):
    label, conf, top = db[r["id"]]
    for k, ok in (("hf label", c["label"] == r["pred"]), ("tokens", c["tokens"] == r["ntok"]),
                  ("run label", label == c["label"]),
                  ("run confidence", f32(conf) == f32(c["confidence"])),
                  ("run top_k", [(t["label"], f32(t["p"])) for t in top]
                   == [(t["label"], f32(t["p"])) for t in c["top_k"]])):
        if not ok:
            if bad[k] < 3:
                print("%s: %s differs on %s: %r / %r" % (fam, k, r["id"], r, c), file=sys.stderr)
            bad[k] += 1
print("%s: %d texts; differ from Hugging Face: labels %d, token counts %d; run vs classify: "
      "labels %d, confidences %d, top_k %d" % (fam, len(inp), bad["hf label"], bad["tokens"],
      bad["run label"], bad["run confidence"], bad["run top_k"]))
sys.exit(1 if any(bad.values()) else 0)
PY
done
echo "PASS: $n_total texts over $(wc -w <<<"$families") families"
