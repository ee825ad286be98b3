#!/usr/bin/env python3
"""Tokenization speed on one core, reclass against Hugging Face tokenizers, on the same texts.

    tok_speed.py [--build build] [--repeat 5]

Texts: tests/fixtures/tokenizers/golden/texts.jsonl, split in two sets: "tickets" (CLINC150
test, BANKING77 test, 150 CFPB narratives) and "multilingual" (the .po translations and the
edge strings). Tokenizers: the three fixture tokenizer.json files (reclass runs the BERT one
on its vocab.txt WordPiece path, ASCII fast path included: worker_tok_load_dir). Python side:
Tokenizer.from_file(...).encode(text) per text with truncation to 512 (RAYON_NUM_THREADS=1;
one encode() uses one thread). reclass side: build/tests/tok_speed (worker_tok_encode,
max_len 512), pinned to one core with taskset. Both timed by the process's CPU time (steadier
than the wall clock on a shared machine); median of --repeat passes after one warm-up. Prints a
Markdown table.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
TOKS = os.path.join(ROOT, "tests", "fixtures", "tokenizers")
NAMES = ("bert-wordpiece", "roberta-bpe", "xlmr-unigram")
N_TICKETS = 4500 + 1000 + 3080 + 150  # texts.jsonl's order: see make_tokenizers.py


def py_speed(path, texts, repeat):
    from tokenizers import Tokenizer
    tok = Tokenizer.from_file(path)
    tok.enable_truncation(max_length=512)
    times = []
    for r in range(repeat + 1):
        t0 = time.process_time()
        n = 0
        for t in texts:
            n += len(tok.encode(t).ids)
        if r:
            times.append(time.process_time() - t0)
    times.sort()
    return times[len(times) // 2], n


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--repeat", type=int, default=5)
    a = ap.parse_args()
    os.environ["RAYON_NUM_THREADS"] = "1"
    os.environ["TOKENIZERS_PARALLELISM"] = "false"
    with open(os.path.join(TOKS, "golden", "texts.jsonl"), encoding="utf-8") as f:
        lines = [l for l in f if l.strip()]
    sets = {"tickets": lines[:N_TICKETS], "multilingual": lines[N_TICKETS:]}
    tmp = tempfile.mkdtemp()
    try:
        dirs = [os.path.join(TOKS, n) for n in NAMES]
        print("| tokenizer | texts | tokenizers (Python) texts/s | reclass texts/s | ratio |")
        print("| --- | --- | ---: | ---: | ---: |")
        for sname, slines in sets.items():
            p = os.path.join(tmp, f"{sname}.jsonl")
            with open(p, "w", encoding="utf-8") as o:
                o.writelines(slines)
            texts = [json.loads(l) for l in slines]
            out = subprocess.run(["taskset", "-c", "0", os.path.join(a.build, "tests", "tok_speed"),
                                  p, str(a.repeat)] + dirs, check=True, capture_output=True,
                                 text=True).stdout
            ours = [json.loads(l) for l in out.splitlines() if l.strip()]
            for name, d, r in zip(NAMES, dirs, ours):
                py = py_speed(os.path.join(d, "tokenizer.json"), texts, a.repeat)
                py_rate = len(texts) / py[0]
                print(f"| {name} | {sname} ({len(texts)}) | {py_rate:,.0f} | "
                      f"{r['texts_per_s']:,.0f} | {r['texts_per_s'] / py_rate:.1f}x |")
                sys.stdout.flush()
    finally:
        shutil.rmtree(tmp)


if __name__ == "__main__":
    main()
