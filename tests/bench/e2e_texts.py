#!/usr/bin/env python3
"""Real ticket texts for an end-to-end job: CLINC150 test + BANKING77 (short utterances) and CFPB
complaint narratives (long), shuffled, as the JSONL `reclass submit` reads ({"id", "text"}).

    e2e_texts.py OUT.jsonl [--cfpb complaints.csv] [--repeat N] [--seed 1]

The CFPB file defaults to the repository's excerpt (tests/fixtures/cfpb_excerpt.csv); the
full sample from the shared data set gives ~1,500 narratives. --repeat N submits every text
N times (distinct ids), for a job long enough to time.
"""
import argparse
import csv
import json
import os
import random

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--cfpb", default=os.path.join(ROOT, "tests/fixtures/cfpb_excerpt.csv"))
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    texts = []
    for name in ("golden_clinc150_test.jsonl", "tokens_banking77.jsonl"):
        with open(os.path.join(ROOT, "tests/fixtures", name), encoding="utf-8") as f:
            texts += [json.loads(l)["text"] for l in f if l.strip()]
    csv.field_size_limit(1 << 30)
    with open(a.cfpb, newline="", encoding="utf-8") as f:
        long_texts = [r["Consumer complaint narrative"] for r in csv.DictReader(f)]
    long_texts = [t for t in long_texts if t.strip()]
    texts += long_texts
    rng = random.Random(a.seed)
    items = [t for _ in range(a.repeat) for t in texts]
    rng.shuffle(items)
    with open(a.out, "w", encoding="utf-8") as o:
        for i, t in enumerate(items):
            o.write(json.dumps({"id": "e2e-%07d" % i, "text": t}) + "\n")
    print(f"{len(items)} tickets ({len(long_texts)} long narratives x {a.repeat}) -> {a.out}")


if __name__ == "__main__":
    main()
