#!/usr/bin/env python3
"""reclass's CPU backend at fp32 and bf16 against PyTorch's bf16 CPU paths (eager, and
torch.compile), on the demo model, interleaved, as a user choosing between them would time
them: reclass as the whole `reclass classify` process (model load, tokenization, batching,
output), the peers as the model's forward alone (tokenized and batched beforehand).

    python3 tests/bench/cpu_bf16_peers.py --reclass build/reclass [--threads N] [--rounds 5]
        [--cfpb CSV] [--engines reclass-fp32,reclass-bf16,torch-bf16,compile-bf16]
        [--model DIR] [--limit N[,M]] [--json-out FILE]

--model times another checkpoint of the same family (e.g. a random BERT-base one from
tests/bench/make_random_checkpoint.py); its labels are not the goldens' model's, so agreement
is reported only for the demo model. Every pass is timed in wall seconds and in CPU seconds
(user + system of the reclass process, or of the PyTorch process around its forwards): on a
machine shared with other work the CPU seconds are the steadier measure, and the ratios are
given in tickets per CPU-second.

Workloads: the 5,500 CLINC150 test queries (tests/fixtures/golden_clinc150_test.jsonl) and the
1,532 long CFPB narratives (tests/fixtures/make_cfpb_golden.py reads them from --cfpb). Each
engine's labels are compared with the Hugging Face fp32 goldens of both sets (agreement).
Peers batch as tests/bench/cpu_peers.py does: length-sorted runs padded to their longest,
n x longest <= --token-budget. After one untimed warm-up of every engine on every workload
(torch.compile compiles there, dynamic shapes; given up after --compile-timeout seconds), each
round times every engine on every workload; medians over the rounds are reported, with
reclass bf16 against torch.compile bf16, PyTorch bf16 eager and reclass fp32. One JSON line per
timed pass and a summary line, also appended to --json-out.
"""
import argparse
import json
import os
import resource
import signal
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(ROOT, "tests", "fixtures"))
from cpu_peers import make_batches  # noqa: E402
from make_cfpb_golden import narratives  # noqa: E402

DEMO_MODEL = os.path.join(ROOT, "deploy/models/clinc150-bert-mini")
MODEL = DEMO_MODEL


def workloads(cfpb):
    fx = os.path.join(ROOT, "tests", "fixtures")
    clinc = [json.loads(l) for l in open(os.path.join(fx, "golden_clinc150_test.jsonl"))]
    gold_c = [json.loads(l)["pred"] for l in open(os.path.join(fx, "golden_cfpb_narratives.jsonl"))]
    return {"clinc150": ([r["text"] for r in clinc], [r["pred"] for r in clinc]),
            "cfpb": (narratives(cfpb), gold_c)}


class Reclass:
    def __init__(self, binary, precision, threads, budget, files):
        self.name = "reclass-" + precision
        self.cmd = [binary, "classify", "--model", MODEL, "--jsonl", "--precision", precision,
                    "--threads", str(threads), "--token-budget", str(budget)]
        self.files, self.kernel = files, ""

    def pass_(self, w):
        with open(self.files[w]) as inp:
            r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
            t0 = time.perf_counter()
            p = subprocess.run(self.cmd, stdin=inp, capture_output=True, text=True)
            s = time.perf_counter() - t0
            r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
        self.cpu = r1.ru_utime + r1.ru_stime - r0.ru_utime - r0.ru_stime
        if p.returncode != 0:
            sys.exit(f"cpu_bf16_peers: {' '.join(self.cmd)} exited {p.returncode}: {p.stderr}")
        self.kernel = " ".join(l for l in p.stderr.splitlines() if "classify: backend" in l)
        return s, [json.loads(l).get("label") for l in p.stdout.splitlines()]


class Torch:
    def __init__(self, name, model, id2label, batches):
        self.name, self.model, self.id2label, self.batches = name, model, id2label, batches

    def pass_(self, w):
        import torch

        preds, s, self.cpu = {}, 0.0, 0.0
        with torch.inference_mode():
            for idx, ids, mask in self.batches[w]:
                c0, t0 = time.process_time(), time.perf_counter()
                lg = self.model(input_ids=ids, attention_mask=mask).logits
                s += time.perf_counter() - t0
                self.cpu += time.process_time() - c0
                for i, p in zip(idx, lg.float().argmax(-1).tolist()):
                    preds[i] = self.id2label[p]
        return s, [preds[i] for i in range(len(preds))]


def torch_batches(tok, texts, budget):
    import torch

    ids = tok(texts, truncation=True, max_length=512)["input_ids"]
    lens = [len(x) for x in ids]
    out = []
    for b in make_batches(lens, budget, padded=True):
        n = lens[b[0]]
        x = torch.zeros((len(b), n), dtype=torch.long)
        m = torch.zeros((len(b), n), dtype=torch.long)
        for r, i in enumerate(b):
            x[r, :lens[i]] = torch.tensor(ids[i])
            m[r, :lens[i]] = 1
        out.append((b, x, m))
    return out


class Timeout(Exception):
    pass


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--reclass", required=True)
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--token-budget", type=int, default=8192)
    ap.add_argument("--cfpb", default=os.path.join(
        ROOT, "..", "shared", "data", "cfpb_complaints", "complaints_sample.csv"))
    ap.add_argument("--engines", default="reclass-fp32,reclass-bf16,torch-bf16,compile-bf16")
    ap.add_argument("--compile-timeout", type=int, default=240)
    ap.add_argument("--limit", default="0",
                    help="only the first N texts of each workload, or N,M: N of CLINC150 and M "
                         "of CFPB (0 = all)")
    ap.add_argument("--model", default=DEMO_MODEL)
    ap.add_argument("--json-out", default="")
    a = ap.parse_args()
    global MODEL
    MODEL = os.path.abspath(a.model)
    demo = MODEL == os.path.abspath(DEMO_MODEL)
    jout = open(a.json_out, "a") if a.json_out else None

    def emit(o):
        print(json.dumps(o), flush=True)
        if jout:
            jout.write(json.dumps(o) + "\n")
            jout.flush()

    wl = workloads(a.cfpb)
    lim = [int(v) for v in a.limit.split(",")]
    lim = dict(zip(wl, lim if len(lim) == len(wl) else lim * len(wl)))
    wl = {w: (t[:lim[w]], g[:lim[w]]) if lim[w] > 0 else (t, g) for w, (t, g) in wl.items()}
    tmp = tempfile.mkdtemp(prefix="reclass-bf16-peers-")
    files = {}
    for w, (texts, _) in wl.items():
        files[w] = os.path.join(tmp, w + ".jsonl")
        with open(files[w], "w") as f:
            for t in texts:
                f.write(json.dumps({"text": t}) + "\n")
    names = a.engines.split(",")
    engines = [Reclass(a.reclass, n.split("-")[1], a.threads, a.token_budget, files)
               for n in names if n.startswith("reclass-")]
    if any(not n.startswith("reclass-") for n in names):
        import torch
        from transformers import BertForSequenceClassification, BertTokenizerFast

        torch.set_num_threads(a.threads)
        tok = BertTokenizerFast.from_pretrained(MODEL)
        batches = {w: torch_batches(tok, texts, a.token_budget) for w, (texts, _) in wl.items()}
        model = BertForSequenceClassification.from_pretrained(MODEL, dtype=torch.bfloat16).eval()
        id2label = model.config.id2label
        if "torch-bf16" in names:
            engines.append(Torch("torch-bf16", model, id2label, batches))
        if "compile-bf16" in names:
            engines.append(Torch("compile-bf16", torch.compile(model, dynamic=True), id2label,
                                 batches))
        print(f"torch {torch.__version__}, {a.threads} threads, oneDNN bf16 "
              f"{torch.backends.mkldnn.is_available()}", flush=True)
    agree = {}
    for e in list(engines):
        for w, (texts, gold) in wl.items():
            t0 = time.perf_counter()
            signal.signal(signal.SIGALRM, lambda *_: (_ for _ in ()).throw(Timeout()))
            signal.alarm(a.compile_timeout if e.name.startswith("compile") else 0)
            try:
                _, preds = e.pass_(w)
            except Timeout:
                emit({"bench": "cpu_bf16_peers", "engine": e.name, "workload": w,
                      "error": f"warm-up over {a.compile_timeout} s: left out"})
                engines.remove(e)
                break
            finally:
                signal.alarm(0)
            if len(preds) != len(gold):
                sys.exit(f"cpu_bf16_peers: {e.name} gave {len(preds)} labels for {len(gold)}")
            if demo:
                agree[(e.name, w)] = sum(p == g for p, g in zip(preds, gold)) / len(gold)
            emit({"bench": "cpu_bf16_peers", "warmup": True, "engine": e.name, "workload": w,
                  "seconds": round(time.perf_counter() - t0, 3),
                  "agreement_hf_fp32": round(agree[(e.name, w)], 6) if demo else None,
                  "kernel": getattr(e, "kernel", "")})
    secs, cpus = {}, {}
    for r in range(a.rounds):
        for w, (texts, _) in wl.items():
            for e in engines:
                s, _ = e.pass_(w)
                secs.setdefault((e.name, w), []).append(s)
                cpus.setdefault((e.name, w), []).append(e.cpu)
                emit({"bench": "cpu_bf16_peers", "round": r + 1, "engine": e.name, "workload": w,
                      "seconds": round(s, 4), "cpu_seconds": round(e.cpu, 4),
                      "tickets_per_s": round(len(texts) / s, 1),
                      "tickets_per_cpu_s": round(len(texts) / e.cpu, 1)})
    tps = {k: len(wl[k[1]][0]) / statistics.median(v) for k, v in secs.items()}
    tpc = {k: len(wl[k[1]][0]) / statistics.median(v) for k, v in cpus.items()}
    summary = {"bench": "cpu_bf16_peers", "summary": True, "threads": a.threads,
               "rounds": a.rounds, "token_budget": a.token_budget, "model": MODEL,
               "tickets_per_s": {f"{e}/{w}": round(v, 1) for (e, w), v in tps.items()},
               "tickets_per_cpu_s": {f"{e}/{w}": round(v, 1) for (e, w), v in tpc.items()},
               "agreement_hf_fp32": {f"{e}/{w}": round(v, 6) for (e, w), v in agree.items()}}
    ratios = {}
    for w in wl:
        base = tpc.get(("reclass-bf16", w))
        for other in ("compile-bf16", "torch-bf16", "reclass-fp32"):
            if base and tpc.get((other, w)):
                ratios[f"reclass-bf16 / {other} / {w}"] = round(base / tpc[(other, w)], 3)
    summary["ratios_per_cpu_s"] = ratios
    emit(summary)
    print("\n| engine | " + " | ".join(f"{w} tickets/CPU-s (tickets/s)" for w in wl) + " | " +
          " | ".join(f"{w} agreement" for w in wl) + " |")
    print("|---|" + "---:|" * (2 * len(wl)))
    for e in engines:
        print(f"| {e.name} | " + " | ".join(
            f"{tpc.get((e.name, w), 0):,.1f} ({tps.get((e.name, w), 0):,.1f})" for w in wl) +
            " | " + " | ".join(f"{100 * agree[(e.name, w)]:.2f}%" if (e.name, w) in agree
                               else "n/a" for w in wl) + " |")
    for k, v in ratios.items():
        print(f"{k}: {v:.2f}x")


if __name__ == "__main__":
    main()
