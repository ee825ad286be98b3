#!/usr/bin/env python3
"""FP8 agreement on a BERT-base-geometry CLINC150 classifier (device_run.sh stage fp8).

    fp8_agreement.py train DIR --data DATA   # trains it (GPU, minutes), writes DIR/model,
                                            # DIR/clinc_test.jsonl, DIR/cfpb_long.jsonl and
                                            # DIR/torch_preds.json (HF fp32 / fp16 / bf16 /
                                            # torchao FP8 argmaxes on both sets) and
                                            # DIR/golden_{clinc150_test,cfpb_long}.jsonl
                                            # (ids, HF fp32 logits: fp8_sensitivity's input)
    fp8_agreement.py compare DIR NAME=FILE... # top-1 agreement with HF fp32 of each
                                            # `reclass classify --jsonl` output FILE

DATA holds clinc150/data_full.json and cfpb_complaints/complaints_sample.csv (the shared data
folder; it does not travel to the device by itself). Trained from scratch (no hub): 12 x 768,
12 heads, 3072, GELU, bert-base-uncased WordPiece, CLINC150 train + oos_train, bf16 autocast,
AdamW; saved with fp16 weights, and every reference is computed on those weights upcast. Long
narratives: the CFPB complaints of >= 256 tokens, truncated to 512. Not committed: the model
is re-created in each run.
"""
import argparse
import csv
import json
import sys
import time
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parents[2]
VOCAB = REPO / "deploy" / "models" / "clinc150-bert-mini" / "vocab.txt"


def tokenizer():
    from tokenizers import BertWordPieceTokenizer
    tok = BertWordPieceTokenizer(str(VOCAB), lowercase=True)
    tok.enable_truncation(512)
    return tok


def batches(seqs, size):
    for b in range(0, len(seqs), size):
        chunk = seqs[b:b + size]
        n = max(map(len, chunk))
        x = torch.zeros(len(chunk), n, dtype=torch.long)
        m = torch.zeros(len(chunk), n, dtype=torch.long)
        for r, s in enumerate(chunk):
            x[r, :len(s)] = torch.tensor(s)
            m[r, :len(s)] = 1
        yield b, x.cuda(), m.cuda()


@torch.no_grad()
def preds(model, seqs, size=64, autocast=None):
    out = []
    for _, x, m in batches(seqs, size):
        if autocast:
            with torch.autocast("cuda", dtype=autocast):
                lg = model(input_ids=x, attention_mask=m).logits
        else:
            lg = model(input_ids=x, attention_mask=m).logits
        out += lg.float().argmax(1).tolist()
    return out


@torch.no_grad()
def fp32_logits(model, seqs, size=64):
    out = []
    for _, x, m in batches(seqs, size):
        out += model(input_ids=x, attention_mask=m).logits.float().tolist()
    return out


def write_goldens(out_dir, model, labels, sets):
    """DIR/golden_<set>.jsonl in tests/lib/family_golden.h's form (ids, HF fp32 argmax label,
    logits), so tests/bench/fp8_sensitivity runs the C reference on this classifier."""
    for name, seqs in sets.items():
        with open(out_dir / f"golden_{name}.jsonl", "w") as f:
            for ids, lg in zip(seqs, fp32_logits(model, seqs)):
                pred = labels[max(range(len(lg)), key=lg.__getitem__)]
                f.write(json.dumps({"ids": ids, "pred": pred,
                                    "logits": [round(v, 6) for v in lg]}) + "\n")


def train(a):
    from transformers import BertConfig, BertForSequenceClassification
    data = json.load(open(Path(a.data) / "clinc150" / "data_full.json"))
    tr = data["train"] + data["oos_train"]
    te = data["test"] + data["oos_test"]
    labels = sorted({lab for _, lab in tr})
    lid = {lab: i for i, lab in enumerate(labels)}
    tok = tokenizer()
    tr_ids = [e.ids for e in tok.encode_batch([t for t, _ in tr])]
    te_ids = [e.ids for e in tok.encode_batch([t for t, _ in te])]
    y = torch.tensor([lid[lab] for _, lab in tr])
    csv.field_size_limit(1 << 30)
    rows = csv.DictReader(open(Path(a.data) / "cfpb_complaints" / "complaints_sample.csv"))
    narr = [r["Consumer complaint narrative"] for r in rows]
    narr = [t for t in narr if t.strip()]
    enc = tok.encode_batch(narr)
    tok.no_truncation()
    full = [len(e.ids) for e in tok.encode_batch(narr)]
    cf = [(t, e.ids) for t, e, n in zip(narr, enc, full) if n >= 256]
    cfg = BertConfig(vocab_size=30522, hidden_size=768, num_hidden_layers=12,
                     num_attention_heads=12, intermediate_size=3072, max_position_embeddings=512,
                     num_labels=len(labels), id2label=dict(enumerate(labels)),
                     label2id=lid)
    torch.manual_seed(0)
    model = BertForSequenceClassification(cfg).cuda()
    opt = torch.optim.AdamW(model.parameters(), lr=a.lr, weight_decay=0.01, fused=True)
    steps = a.epochs * ((len(tr_ids) + a.batch - 1) // a.batch)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=a.lr, total_steps=steps,
                                                pct_start=0.1)
    t0 = time.time()
    for ep in range(a.epochs):
        model.train()
        perm = torch.randperm(len(tr_ids)).tolist()
        seqs = [tr_ids[i] for i in perm]
        yy = y[perm].cuda()
        for b, x, m in batches(seqs, a.batch):
            with torch.autocast("cuda", dtype=torch.bfloat16):
                out = model(input_ids=x, attention_mask=m, labels=yy[b:b + x.shape[0]])
            opt.zero_grad(set_to_none=True)
            out.loss.backward()
            opt.step()
            sched.step()
        model.eval()
        acc = sum(p == lid[lab] for p, (_, lab) in zip(preds(model, te_ids), te)) / len(te)
        print(f"epoch {ep + 1}/{a.epochs}: loss {out.loss.item():.3f}, CLINC150 test accuracy "
              f"{100 * acc:.2f}% ({time.time() - t0:.0f} s)", flush=True)
    out_dir = Path(a.dir)
    mdir = out_dir / "model"
    model.half().save_pretrained(mdir)
    (mdir / "vocab.txt").write_bytes(VOCAB.read_bytes())
    (mdir / "tokenizer_config.json").write_bytes((VOCAB.parent / "tokenizer_config.json").read_bytes())
    with open(out_dir / "clinc_test.jsonl", "w") as f:
        for t, lab in te:
            f.write(json.dumps({"text": t, "label": lab}) + "\n")
    with open(out_dir / "cfpb_long.jsonl", "w") as f:
        for t, _ in cf:
            f.write(json.dumps({"text": t}) + "\n")
    # References on the saved fp16 weights: fp32 math, then torch's 16-bit and torchao FP8.
    model = model.float().eval()
    sets = {"clinc150": te_ids, "cfpb_long": [ids for _, ids in cf]}
    write_goldens(out_dir, model, labels, {"clinc150_test": te_ids, "cfpb_long": sets["cfpb_long"]})
    res = {"labels": labels, "gold": [lid[lab] for _, lab in te]}
    for name, seqs in sets.items():
        res[name] = {"fp32": preds(model, seqs), "torch fp16 (autocast)":
                     preds(model, seqs, autocast=torch.float16),
                     "torch bf16 (autocast)": preds(model, seqs, autocast=torch.bfloat16)}
    try:
        sys.path.insert(0, str(Path(__file__).parent))
        from torch_gpu_peer import torchao_fp8
        q = torchao_fp8(model.to(torch.bfloat16))
        for name, seqs in sets.items():
            res[name]["torchao fp8 (per-row)"] = preds(q, seqs)
    except Exception as e:  # the wheel may not have travelled
        print(f"torchao fp8: skipped ({type(e).__name__}: {e})", flush=True)
    json.dump(res, open(out_dir / "torch_preds.json", "w"))
    print(f"saved {mdir}; {len(te)} CLINC150 test, {len(cf)} long narratives", flush=True)


def compare(a):
    d = Path(a.dir)
    res = json.load(open(d / "torch_preds.json"))
    labels = res["labels"]
    gold = res["gold"]
    rows = {}
    for name in ("clinc150", "cfpb_long"):
        for k, v in res[name].items():
            rows.setdefault(k, {})[name] = v
    for spec in a.outputs:
        name, path = spec.split("=", 1)
        setname = "cfpb_long" if "cfpb" in path else "clinc150"
        lab = [json.loads(line).get("label") for line in open(path)]
        rows.setdefault(name, {})[setname] = [labels.index(x) if x in labels else -1 for x in lab]
    print(f"{'system':34s} {'CLINC150 top-1':>15s} {'acc':>7s} {'long CFPB top-1':>16s}")
    for k, v in rows.items():
        line = f"{k:34s}"
        for setname in ("clinc150", "cfpb_long"):
            ref, got = res[setname]["fp32"], v.get(setname)
            if got is None or len(got) != len(ref):
                line += f" {'-':>15s}" + (f" {'-':>7s}" if setname == "clinc150" else "")
                continue
            agree = 100 * sum(x == y for x, y in zip(got, ref)) / len(ref)
            line += f" {agree:14.2f}%"
            if setname == "clinc150":
                line += f" {100 * sum(x == y for x, y in zip(got, gold)) / len(gold):6.2f}%"
        print(line, flush=True)


def main():
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="cmd", required=True)
    t = sub.add_parser("train")
    t.add_argument("dir")
    t.add_argument("--data", required=True)
    t.add_argument("--epochs", type=int, default=8)
    t.add_argument("--batch", type=int, default=64)
    t.add_argument("--lr", type=float, default=1e-4)
    c = sub.add_parser("compare")
    c.add_argument("dir")
    c.add_argument("outputs", nargs="*")
    a = ap.parse_args()
    return train(a) if a.cmd == "train" else compare(a)


if __name__ == "__main__":
    sys.exit(main())
