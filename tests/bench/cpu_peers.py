#!/usr/bin/env python3
"""CPU peers benchmark: reclass vs the engines a user would otherwise pick, on the same
checkpoint, the same texts and the same batching.

  python3 tests/bench/cpu_peers.py --reclass build/reclass [--threads 2] [--repeat 3]

Engines (all CPU, fp32, --threads intra-op threads):
  * PyTorch eager: transformers BertForSequenceClassification, torch.inference_mode.
  * ONNX Runtime: torch.onnx.export (dynamic batch/sequence axes), then
    onnxruntime.transformers.optimizer.optimize_model(model_type='bert'), CPU provider.
  * reclass: `reclass bench --backend cpu --workload texts.jsonl` (a {"text"} workload).

A pass = tokenize all texts + form batches + run every batch; each engine gets one untimed
warm-up pass, then --repeat timed passes, interleaved across engines (rep 1 of each, rep 2 of
each, ...) so that load from other processes hits all of them alike; medians are reported.

Batching is the same policy for all: sort by length (longest first), then cut runs of
similar length within the token budget. The peers pad each batch to its longest sequence
(attention mask), so their batch cost is n * longest; reclass's CPU backend is padding-free,
so its cost is the sum of lengths (what the worker does for each kind of backend).

Reference predictions: where the texts file's lines carry `pred` (the golden label, as
tests/fixtures/golden_clinc150_test.jsonl does), each peer's warm-up pass is compared with them
over the lines that carry one and must agree on >= 99%; without any, the script says that
agreement was not measured ("agreement": null in its JSON line). A peer or reclass that
returns another number of predictions or tickets than there are texts is an error.

Tokenization: peers use the Hugging Face fast tokenizer (Rust; batch encode, which may use
several threads); reclass tokenizes with its own WordPiece on one thread inside each timed
pass. Both include tokenization in tickets/s, and both tokenization times are reported.
"""
import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def load_texts(path):
    """The texts and their reference predictions (the `pred` field; None where a line has none)."""
    texts, preds = [], []
    with open(path, encoding="utf-8") as f:
        for line in f:
            if line.strip():
                o = json.loads(line)
                texts.append(o["text"])
                preds.append(o.get("pred"))
    return texts, preds


def agreement(preds, refs, id2label):
    """(share, compared): the share of texts whose predicted label equals the reference
    prediction, over the texts that carry one, and how many that is; (None, 0) when no text
    carries one (nothing was compared). An engine that returns another number of predictions
    than there are texts, or none for some text, is an error (ValueError)."""
    if len(preds) != len(refs):
        raise ValueError(f"{len(preds)} predictions for {len(refs)} texts")
    missing = [i for i, p in enumerate(preds) if p is None]
    if missing:
        raise ValueError(f"no prediction for {len(missing)} of {len(preds)} texts "
                         f"(first: line {missing[0] + 1})")
    pairs = [(p, r) for p, r in zip(preds, refs) if r is not None]
    if not pairs:
        return None, 0
    return sum(1 for p, r in pairs if id2label[p] == r) / len(pairs), len(pairs)


def make_batches(lens, budget, padded):
    """Length-sorted token-budgeted batches: longest first, runs that fit the budget."""
    order = sorted(range(len(lens)), key=lambda i: -lens[i])
    batches, cur, cur_sum, cur_max = [], [], 0, 0
    for i in order:
        n = lens[i]
        longest = max(cur_max, n)
        cost = (len(cur) + 1) * longest if padded else cur_sum + n
        if cur and cost > budget:
            batches.append(cur)
            cur, cur_sum, longest = [], 0, n
        cur.append(i)
        cur_sum += n
        cur_max = longest
    if cur:
        batches.append(cur)
    return batches


class Peer:
    """Tokenize + batch + infer one pass; returns (seconds, tokenize s, CPU s, preds)."""

    def __init__(self, name, tokenizer, budget, run_batch):
        self.name, self.tok, self.budget, self.run_batch = name, tokenizer, budget, run_batch

    def pass_(self, texts):
        import numpy as np

        t0, c0 = time.perf_counter(), time.process_time()
        enc = self.tok(texts, truncation=True, max_length=512, padding=False)
        ids = enc["input_ids"]
        t_tok = time.perf_counter() - t0
        lens = [len(x) for x in ids]
        preds = [None] * len(texts)
        for b in make_batches(lens, self.budget, padded=True):
            longest = lens[b[0]]
            arr = np.zeros((len(b), longest), dtype=np.int64)
            mask = np.zeros((len(b), longest), dtype=np.int64)
            for r, i in enumerate(b):
                arr[r, : lens[i]] = ids[i]
                mask[r, : lens[i]] = 1
            logits = self.run_batch(arr, mask)
            for r, i in enumerate(b):
                preds[i] = int(logits[r].argmax())
        return time.perf_counter() - t0, t_tok, time.process_time() - c0, preds


def torch_peer(model_dir, tokenizer, budget, threads):
    import torch
    from transformers import BertForSequenceClassification

    torch.set_num_threads(threads)
    model = BertForSequenceClassification.from_pretrained(model_dir, dtype=torch.float32)
    model.eval()

    def run(arr, mask):
        with torch.inference_mode():
            out = model(input_ids=torch.from_numpy(arr), attention_mask=torch.from_numpy(mask))
        return out.logits.numpy()

    return Peer("PyTorch eager", tokenizer, budget, run), model


def ort_peer(model_dir, tokenizer, budget, threads, workdir):
    import numpy as np
    import onnxruntime as ort
    import torch
    from onnxruntime.transformers.optimizer import optimize_model
    from transformers import BertForSequenceClassification

    raw = os.path.join(workdir, "model.onnx")
    opt = os.path.join(workdir, "model.opt.onnx")
    # eager attention exports the MatMul/Softmax pattern ORT's BERT fusion recognises
    m = BertForSequenceClassification.from_pretrained(
        model_dir, dtype=torch.float32, attn_implementation="eager"
    )
    m.eval()
    ex_ids = torch.ones((2, 16), dtype=torch.int64)
    ex_mask = torch.ones((2, 16), dtype=torch.int64)
    ex_type = torch.zeros((2, 16), dtype=torch.int64)
    axes = {0: "batch", 1: "seq"}
    with torch.inference_mode():
        torch.onnx.export(
            m,
            (ex_ids, ex_mask, ex_type),
            raw,
            input_names=["input_ids", "attention_mask", "token_type_ids"],
            output_names=["logits"],
            dynamic_axes={"input_ids": axes, "attention_mask": axes, "token_type_ids": axes,
                          "logits": {0: "batch"}},
            opset_version=17,
            dynamo=False,
        )
    om = optimize_model(raw, model_type="bert", num_heads=4, hidden_size=256)
    om.save_model_to_file(opt)
    fused = om.get_fused_operator_statistics()
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    sess = ort.InferenceSession(opt, so, providers=["CPUExecutionProvider"])
    names = {i.name for i in sess.get_inputs()}

    def run(arr, mask):
        feed = {"input_ids": arr, "attention_mask": mask}
        if "token_type_ids" in names:
            feed["token_type_ids"] = np.zeros_like(arr)
        return sess.run(["logits"], feed)[0]

    return Peer("ONNX Runtime", tokenizer, budget, run), fused


def reclass_pass(binary, model_dir, workload, budget, threads):
    cmd = [binary, "bench", "--backend", "cpu", "--model", model_dir, "--workload", workload,
           "--token-budget", str(budget), "--threads", str(threads), "--warmup", "1",
           "--repeat", "1"]
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit(f"cpu_peers: {' '.join(cmd)} failed ({p.returncode}): {p.stderr.strip()}")
    lines = p.stdout.strip().splitlines()
    return json.loads(lines[-1]), lines[:-1], cmd


def machine():
    cpu = platform.processor() or "unknown CPU"
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return (f"{os.cpu_count()}-core {platform.machine()} machine ({cpu}, "
            f"{platform.system()} {platform.release()})")


def shown(path):
    """A path as the results file shows it: relative inside the repository, else only its
    name (no machine's absolute paths in a committed file)."""
    a = os.path.abspath(path)
    if a == ROOT or a.startswith(ROOT + os.sep):
        return os.path.relpath(a, ROOT)
    return path if not os.path.isabs(path) else ".../" + os.path.basename(path)


def shown_arg(arg):
    key, eq, val = arg.partition("=")
    if eq and key.startswith("--"):
        return key + "=" + shown(val)
    return shown(arg) if os.path.isabs(arg) else arg


def git_head():
    try:
        h = subprocess.run(["git", "-C", ROOT, "describe", "--always", "--dirty"],
                           capture_output=True, text=True).stdout.strip()
        return h or "unknown"
    except OSError:
        return "unknown"


def load_avg():
    try:
        with open("/proc/loadavg") as f:
            return " ".join(f.read().split()[:3])
    except OSError:
        return "?"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--reclass", required=True, help="path of the reclass executable")
    ap.add_argument("--model", default=os.path.join(ROOT, "deploy/models/clinc150-bert-mini"))
    ap.add_argument("--texts", default=os.path.join(ROOT, "tests/fixtures/golden_clinc150_test.jsonl"))
    ap.add_argument("--token-budget", type=int, default=8192)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--peer-budgets", default="1024,2048",
                    help="also time all three at these token budgets (comma list, '' for none)")
    ap.add_argument("--results", default=os.path.join(ROOT, "tests/bench/RESULTS.md"),
                    help="write the results table here ('' to skip)")
    args = ap.parse_args()

    import numpy as np  # noqa: F401  (fail early when the peers are not installed)
    import onnxruntime
    import torch
    import transformers
    from transformers import BertTokenizerFast

    texts, gold = load_texts(args.texts)
    with open(os.path.join(args.model, "config.json")) as f:
        id2label = {int(k): v for k, v in json.load(f)["id2label"].items()}
    work = tempfile.mkdtemp(prefix="reclass-peers-")
    workload = os.path.join(work, "texts.jsonl")
    with open(workload, "w", encoding="utf-8") as f:
        for t in texts:
            f.write(json.dumps({"text": t}) + "\n")
    load_before = load_avg()
    tok = BertTokenizerFast.from_pretrained(args.model)
    tp, _ = torch_peer(args.model, tok, args.token_budget, args.threads)
    op, fused = ort_peer(args.model, tok, args.token_budget, args.threads, work)
    print(f"ORT fused operators: { {k: v for k, v in fused.items() if v} }", flush=True)

    # warm-up passes (untimed) and an accuracy check where the texts carry reference
    # predictions: every engine must agree with them on (nearly) every text, or its speed
    # means nothing
    agree_by, compared = {}, 0
    for p in (tp, op):
        _, _, _, preds = p.pass_(texts)
        try:
            agree, compared = agreement(preds, gold, id2label)
        except ValueError as e:
            sys.exit(f"cpu_peers: {p.name}: {e}")
        agree_by[p.name] = agree
        if agree is None:
            print(f"{p.name}: warm-up done; no reference predictions in {args.texts}: "
                  "agreement not measured", flush=True)
            continue
        print(f"{p.name}: warm-up done, agreement with the reference predictions {agree:.4%} "
              f"({compared} of {len(texts)} texts carry one)", flush=True)
        if agree < 0.99:
            sys.exit(f"cpu_peers: {p.name} disagrees with the reference predictions ({agree:.2%})")
    if compared:
        agreement_md = (", ".join(f"{k} {v:.4%}" for k, v in agree_by.items()) +
                        f" of the {compared} texts that carry a `pred` (gate: >= 99%)")
    else:
        agreement_md = f"not measured (no reference predictions in `{shown(args.texts)}`)"

    res = {tp.name: [], op.name: [], "reclass": []}
    tok_s = {tp.name: [], op.name: [], "reclass": []}
    cpu_s = {tp.name: [], op.name: [], "reclass": []}
    rj = None
    for rep in range(args.repeat):
        for p in (tp, op):
            s, ts, cs, _ = p.pass_(texts)
            res[p.name].append(s)
            tok_s[p.name].append(ts)
            cpu_s[p.name].append(cs)
        rj, human, cmd = reclass_pass(args.reclass, args.model, workload, args.token_budget,
                                      args.threads)
        if rj.get("tickets") != len(texts):
            sys.exit(f"cpu_peers: reclass bench classified {rj.get('tickets')} tickets of "
                     f"{len(texts)} texts")
        res["reclass"].append(rj["seconds"])
        tok_s["reclass"].append(rj.get("tokenize_seconds", float("nan")))
        cpu_s["reclass"].append(rj.get("cpu_seconds", float("nan")))
        print(f"rep {rep + 1}: " + ", ".join(f"{k} {v[-1]:.3f} s" for k, v in res.items()),
              flush=True)
    # sensitivity: each engine may prefer another batch size; time all three at other budgets
    extra = []
    for eb in [int(x) for x in args.peer_budgets.split(",") if x.strip()]:
        row = {tp.name: [], op.name: [], "reclass": []}
        for p in (tp, op):
            p.budget = eb
            p.pass_(texts)  # warm-up at this shape mix
        for _ in range(args.repeat):
            for p in (tp, op):
                row[p.name].append(p.pass_(texts)[0])
            row["reclass"].append(
                reclass_pass(args.reclass, args.model, workload, eb, args.threads)[0]["seconds"])
        for p in (tp, op):
            p.budget = args.token_budget
        row = {k: statistics.median(v) for k, v in row.items()}
        extra.append((eb, row))
        print(f"budget {eb}: " + ", ".join(f"{k} {len(texts) / v:,.0f} tickets/s"
                                           for k, v in row.items()), flush=True)
    load_after = load_avg()

    n = len(texts)
    med = {k: statistics.median(v) for k, v in res.items()}
    tps = {k: n / v for k, v in med.items()}
    tpc = {k: n / statistics.median(v) for k, v in cpu_s.items()}
    rows = []
    for k in ("reclass", tp.name, op.name):
        rows.append(
            f"| {k} | {tps[k]:,.0f} | {med[k]:.3f} | {statistics.median(tok_s[k]):.3f} | "
            f"{tps['reclass'] / tps[k]:.2f}x | {tpc[k]:,.0f} | {tpc['reclass'] / tpc[k]:.2f}x |"
        )
    table = "\n".join(
        ["| engine | tickets/s (median) | seconds/pass | tokenize s | reclass speed-up "
         "| tickets per CPU-second | reclass speed-up (CPU time) |",
         "|---|---:|---:|---:|---:|---:|---:|"] + rows)
    print()
    print(table)
    extra_table = ""
    if extra:
        lines = ["| token budget | reclass tickets/s | PyTorch tickets/s | ORT tickets/s "
                 "| reclass / PyTorch | reclass / ORT |", "|---:|---:|---:|---:|---:|---:|"]
        best = {k: (args.token_budget, tps[k]) for k in tps}
        for eb, row in [(args.token_budget, med)] + extra:
            t = {k: n / v for k, v in row.items()}
            for k in t:
                if t[k] > best[k][1]:
                    best[k] = (eb, t[k])
            lines.append(f"| {eb} | {t['reclass']:,.0f} | {t[tp.name]:,.0f} | {t[op.name]:,.0f} "
                         f"| {t['reclass'] / t[tp.name]:.2f}x | {t['reclass'] / t[op.name]:.2f}x |")
        r = best["reclass"][1]
        lines.append(f"| each at its best ({best['reclass'][0]} / {best[tp.name][0]} / "
                     f"{best[op.name][0]}) | {r:,.0f} | {best[tp.name][1]:,.0f} | "
                     f"{best[op.name][1]:,.0f} | {r / best[tp.name][1]:.2f}x | "
                     f"{r / best[op.name][1]:.2f}x |")
        extra_table = "\n".join(lines)
        print("\n" + extra_table)
    print(f"\nreclass / PyTorch = {tps['reclass'] / tps[tp.name]:.2f}x (goal >= 1.5x), "
          f"reclass / ORT = {tps['reclass'] / tps[op.name]:.2f}x (goal >= 1.0x)")

    summary = {"bench": "cpu_peers", "texts": n, "token_budget": args.token_budget,
               "threads": args.threads, "tickets_per_s": {k: round(v, 1) for k, v in tps.items()},
               "agreement": ({k: round(v, 6) for k, v in agree_by.items()} | {"compared": compared}
                             if compared else None)}
    print(json.dumps(summary))

    if args.results:
        cmdline = "python3 tests/bench/cpu_peers.py " + " ".join(
            shown_arg(a) if a and " " not in a else repr(shown_arg(a)) for a in sys.argv[1:])
        rcmd = [shown(cmd[0])] + ["TEXTS.jsonl" if a == workload else shown_arg(a)
                                  for a in cmd[1:]]
        with open(args.results, "w", encoding="utf-8") as f:
            f.write(f"""# CPU backend: reclass against PyTorch and ONNX Runtime

Measured by `tests/bench/cpu_peers.py` (what it measures and how: README.md here). Every
timed pass includes tokenization (peers: Hugging Face fast tokenizer, batch call; reclass: its
own tokenizer, one thread), sorting and batching, and inference of every batch. The peers pad
each batch to its longest text (attention mask; batch cost n x longest <= budget); reclass's
CPU backend packs sequences without padding (sum of lengths <= budget).

| | |
|---|---|
| command | `{cmdline}` |
| date | {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())} |
| commit | {git_head()} |
| machine | {machine()}; load average (1/5/15 min) before {load_before}, after {load_after} |
| versions | torch {torch.__version__}, transformers {transformers.__version__}, onnxruntime {onnxruntime.__version__}, Python {platform.python_version()} |
| workload | model `{shown(args.model)}`, texts `{shown(args.texts)}` ({n} texts, {rj['tokens']} tokens); {args.threads} threads each; {args.repeat} timed passes each after one warm-up, engines interleaved, median reported |
| reclass command per pass | `{' '.join(rcmd)}` (TEXTS.jsonl: the texts as `{{"text"}}` lines in a temporary directory) |
| agreement with the reference predictions (warm-up pass) | {agreement_md} |
| ONNX Runtime fused operators | {', '.join(f'{k} {v}' for k, v in fused.items() if v)} |

## Token budget {args.token_budget}

{table}

reclass / PyTorch = **{tps['reclass'] / tps[tp.name]:.2f}x** (goal >= 1.5x);
reclass / ONNX Runtime = **{tps['reclass'] / tps[op.name]:.2f}x** (goal >= 1.0x).

tickets/s is by the wall clock (the goal's measure); tickets per CPU-second divides by the
CPU time the engine's process used in the pass (every thread), which other load on a shared
machine moves less.

Per-pass wall seconds: {json.dumps({k: [round(x, 4) for x in v] for k, v in res.items()})}

Per-pass CPU seconds (all threads of the process): {json.dumps({k: [round(x, 4) for x in v] for k, v in cpu_s.items()})}

## Other token budgets

All three engines at other budgets (median of {args.repeat} interleaved passes each, after a
warm-up), in case another batch size suits an engine better; the last row compares each
engine at its own best budget:

{extra_table or "(not measured: --peer-budgets '')"}
""")
        print(f"\nwrote {args.results}")


if __name__ == "__main__":
    main()
