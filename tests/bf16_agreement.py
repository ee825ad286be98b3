#!/usr/bin/env python3
"""`reclass classify --precision P` against the Hugging Face fp32 goldens of the demo model:
the 5,500 CLINC150 test queries (tests/fixtures/golden_clinc150_test.jsonl) and the 1,532
long CFPB narratives (tests/fixtures/golden_cfpb_narratives.jsonl over the shared CFPB
sample). Prints, per set, label agreement and max |delta logit| over the rows that carry
logits, one JSON line each, and exits 1 when agreement is under the gate.

    tests/bf16_agreement.py RECLASS_BIN [--precision bf16] [--threads N] [--sets clinc,cfpb]
        [--cfpb CSV] [--json-out FILE]
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "fixtures"))
from make_cfpb_golden import narratives  # noqa: E402

GATE = {"clinc": 0.997, "cfpb": 0.995}  # the agreement gates for bf16


def run(binary, texts, precision, threads):
    with tempfile.NamedTemporaryFile("w", suffix=".jsonl", delete=False) as f:
        for t in texts:
            f.write(json.dumps({"text": t}) + "\n")
        path = f.name
    try:
        with open(path) as inp:
            p = subprocess.run([binary, "classify", "--model",
                                os.path.join(ROOT, "deploy/models/clinc150-bert-mini"),
                                "--jsonl", "--logits", "--precision", precision, "--threads",
                                str(threads)], stdin=inp, capture_output=True, text=True)
    finally:
        os.unlink(path)
    if p.returncode != 0:
        sys.exit(f"bf16_agreement: reclass classify exited {p.returncode}: {p.stderr.strip()}")
    return [json.loads(l) for l in p.stdout.splitlines()], p.stderr.strip()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("reclass")
    ap.add_argument("--precision", default="bf16")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--sets", default="clinc,cfpb")
    ap.add_argument("--cfpb", default=os.path.join(
        ROOT, "..", "shared", "data", "cfpb_complaints", "complaints_sample.csv"))
    ap.add_argument("--json-out", default="")
    a = ap.parse_args()
    fx = os.path.join(ROOT, "tests", "fixtures")
    failed = 0
    lines = []
    for s in a.sets.split(","):
        if s == "clinc":
            gold = [json.loads(l) for l in open(os.path.join(fx, "golden_clinc150_test.jsonl"))]
            texts = [g["text"] for g in gold]
        else:
            gold = [json.loads(l) for l in open(os.path.join(fx, "golden_cfpb_narratives.jsonl"))]
            texts = narratives(a.cfpb)
        if len(texts) != len(gold):
            sys.exit(f"bf16_agreement: {s}: {len(texts)} texts for {len(gold)} goldens")
        out, err = run(a.reclass, texts, a.precision, a.threads)
        if len(out) != len(gold):
            sys.exit(f"bf16_agreement: {s}: {len(out)} results for {len(gold)} texts")
        agree = sum(o.get("label") == g["pred"] for o, g in zip(out, gold)) / len(gold)
        ntok = sum(o.get("tokens") == len(g["ids"]) if "ids" in g else o.get("tokens") == g["tokens"]
                   for o, g in zip(out, gold))
        maxd, rows = 0.0, 0
        for o, g in zip(out, gold):
            if "logits" in g:
                rows += 1
                maxd = max(maxd, max(abs(x - y) for x, y in zip(o["logits"], g["logits"])))
        ok = agree >= GATE[s] if a.precision == "bf16" else agree >= 0.999
        failed |= not ok
        line = {"set": s, "precision": a.precision, "texts": len(gold), "agreement": round(agree, 6),
                "gate": GATE[s] if a.precision == "bf16" else 0.999, "pass": ok,
                "max_abs_delta_logit": round(maxd, 7), "logit_rows": rows,
                "tokens_match": ntok, "kernel": [l for l in err.splitlines() if "reclass classify: backend" in l]}
        print(f"{'ok' if ok else 'FAIL'} - {s} {a.precision}: agreement with Hugging Face fp32 "
              f"{100 * agree:.3f}% (gate {100 * line['gate']:.1f}%) of {len(gold)}, max |delta "
              f"logit| {maxd:.3g} over {rows} rows, token counts equal {ntok}/{len(gold)}")
        failed |= ntok != len(gold)
        if not line["kernel"]:  # the kernel choice is never silent
            print(f"FAIL - {s}: classify --precision {a.precision} printed no kernel line on "
                  f"stderr: {err!r}")
            failed = 1
        print(json.dumps(line), flush=True)
        lines.append(line)
    if a.json_out:
        with open(a.json_out, "a") as f:
            for l in lines:
                f.write(json.dumps(l) + "\n")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
