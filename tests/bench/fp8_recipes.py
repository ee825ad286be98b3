#!/usr/bin/env python3
"""FP8 (E4M3) scaling recipes against Hugging Face fp32, by simulation: each projection's
input and weight are rounded to E4M3 (round to nearest even, saturated at +-448, as CUDA's
__nv_cvt_float_to_fp8 with __NV_SATFINITE) times their scales, the product and everything
else in fp32. Prints top-1 agreement and max |delta logit| per recipe on CLINC150 test and on
long CFPB complaint narratives (truncated to 512 tokens). The recipe reclass uses is chosen
from this table (gpu_fp8_runs in gpu/model/fp8.c says which and why).

    python3 tests/bench/fp8_recipes.py [--model DIR] [--cfpb N] [--device cpu|cuda] [--data DIR]
        [--recipes 4,10,11]   # numbers in the list of main(); default all

Quantization points, as the CUDA path has them: the inputs of QKV, attention-out, FFN-in and
FFN-out of every layer; the head (pooler, classifier) stays fp32.
"""
import argparse
import csv
import json
import math
import time
from pathlib import Path

import torch
from tokenizers import BertWordPieceTokenizer
from transformers import AutoModelForSequenceClassification

REPO = Path(__file__).resolve().parents[2]
SHARED = REPO.parent / "shared"
E4M3_MAX = 448.0


def e4m3(x):
    return x.clamp(-E4M3_MAX, E4M3_MAX).to(torch.float8_e4m3fn).to(torch.float32)


def quant_weight(w, per_channel):
    if per_channel is None:
        return w
    amax = w.abs().amax(dim=1, keepdim=True) if per_channel else w.abs().amax()
    amax = amax.clamp(min=1e-12)
    return e4m3(w * (E4M3_MAX / amax)) * (amax / E4M3_MAX)


def quant_act(x, mode, static_amax):
    if mode == "token":
        amax = x.abs().amax(dim=-1, keepdim=True).clamp(min=1e-12)
    elif mode == "tensor":
        amax = x.abs().amax().clamp(min=1e-12)
    else:  # static: calibrated per-tensor amax, or bound: from the weights
        amax = torch.tensor(static_amax)
    return e4m3(x * (E4M3_MAX / amax)) * (amax / E4M3_MAX)


POINTS = ("qkv", "ao", "ff1", "ff2")


def linears(layer):
    """(point, [Linear]) of one BertLayer: the Linears that read each quantization point."""
    a = layer.attention
    return [("qkv", [a.self.query, a.self.key, a.self.value]), ("ao", [a.output.dense]),
            ("ff1", [layer.intermediate.dense]), ("ff2", [layer.output.dense])]


class Recipe:
    """act: {point: 'token'|'tensor'|'static'|'bound'|None (16-bit)}, weights per channel or
    tensor, skip: layers left unquantized, only: {point: layers} where a point runs (default
    every layer not skipped). 'bound' (ff2 only): the static power-of-two scale reclass derives
    from the weights (gpu_fp8_act_bound_scale in gpu/model/fp8.c)."""

    def __init__(self, name, act, per_channel=True, skip=(), only=None):
        self.name, self.act, self.per_channel, self.skip = name, act, per_channel, set(skip)
        self.only = {k: set(v) for k, v in (only or {}).items()}


def bound_amax(layer):
    """448 x gpu_fp8_act_bound_scale of FFN-out's input: GELU(LN1(x) W1^T + b1) <= it."""
    ln, ff1 = layer.attention.output.LayerNorm, layer.intermediate.dense
    g, b = ln.weight.double(), ln.bias.double()
    ynorm = g.abs().max().item() * math.sqrt(g.numel()) + b.norm().item()
    z = (ynorm * ff1.weight.double().norm(dim=1) + ff1.bias.double().abs()).max().item()
    _, e = math.frexp(1.25 * max(z, 0.17) / E4M3_MAX)
    return E4M3_MAX * math.ldexp(1.0, e)


def install(model, recipe, calib, orig):
    layers = model.bert.encoder.layer
    for li, layer in enumerate(layers):
        for point, lins in linears(layer):
            mode = None if li in recipe.skip else recipe.act.get(point)
            if point in recipe.only and li not in recipe.only[point]:
                mode = None
            for lin in lins:
                w0, fwd0 = orig[id(lin)]
                if mode is None:
                    lin.weight.data = w0.clone()
                    lin.forward = fwd0
                    continue
                lin.weight.data = quant_weight(w0, recipe.per_channel)
                amax = bound_amax(layer) if mode == "bound" else calib.get((li, point), 1.0)

                def fwd(x, lin=lin, mode=mode, amax=amax):
                    xq = x if mode == "keep" else quant_act(x, mode, amax)
                    return torch.nn.functional.linear(xq, lin.weight, lin.bias)
                lin.forward = fwd


def calibrate(model, batches_):
    """Per-tensor amax of each quantization point's input over the calibration batches."""
    amax, hooks = {}, []
    for li, layer in enumerate(model.bert.encoder.layer):
        for point, lins in linears(layer):
            def hook(mod, inp, li=li, point=point):
                v = float(inp[0].abs().max())
                amax[(li, point)] = max(amax.get((li, point), 0.0), v)
            hooks.append(lins[0].register_forward_pre_hook(hook))
    with torch.no_grad():
        for ids, mask in batches_:
            model(input_ids=ids, attention_mask=mask)
    for h in hooks:
        h.remove()
    return amax


def batches(seqs, size, device):
    order = sorted(range(len(seqs)), key=lambda i: len(seqs[i]))
    out = []
    for b in range(0, len(order), size):
        idx = order[b:b + size]
        L = max(len(seqs[i]) for i in idx)
        ids = torch.zeros(len(idx), L, dtype=torch.long)
        mask = torch.zeros(len(idx), L, dtype=torch.long)
        for r, i in enumerate(idx):
            ids[r, :len(seqs[i])] = torch.tensor(seqs[i])
            mask[r, :len(seqs[i])] = 1
        out.append((idx, ids.to(device), mask.to(device)))
    return out


def logits_of(model, bs, n):
    out = [None] * n
    with torch.no_grad():
        for idx, ids, mask in bs:
            lg = model(input_ids=ids, attention_mask=mask).logits.float().cpu()
            for r, i in enumerate(idx):
                out[i] = lg[r]
    return torch.stack(out)


def load_cfpb(tok, n, min_tokens, data):
    csv.field_size_limit(1 << 30)
    rows = csv.DictReader(open(Path(data) / "cfpb_complaints/complaints_sample.csv"))
    texts = [r["Consumer complaint narrative"] for r in rows]
    texts = [t for t in texts if t.strip()]
    enc = tok.encode_batch(texts)
    seqs = [e.ids for e in enc if len(e.ids) >= min_tokens]
    return seqs[:n]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default=str(REPO / "deploy/models/clinc150-bert-mini"))
    ap.add_argument("--cfpb", type=int, default=100000, help="most long narratives to use")
    ap.add_argument("--min-tokens", type=int, default=256, help="a long narrative's tokens")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--recipes", default="", help="comma list of recipe numbers (default all)")
    ap.add_argument("--data", default=str(SHARED / "data"),
                    help="folder holding clinc150/ and cfpb_complaints/")
    a = ap.parse_args()
    torch.set_grad_enabled(False)
    model = AutoModelForSequenceClassification.from_pretrained(a.model).float().to(a.device)
    model.eval()
    tok = BertWordPieceTokenizer(str(Path(a.model) / "vocab.txt"), lowercase=True)
    tok.enable_truncation(512)
    golden = [json.loads(x) for x in open(REPO / "tests/fixtures/golden_clinc150_test.jsonl")]
    clinc = [g["ids"] for g in golden]
    cfpb = load_cfpb(tok, a.cfpb, a.min_tokens, a.data)
    data = json.load(open(Path(a.data) / "clinc150/data_full.json"))
    calib_texts = [t for t, _ in data["train"][::15]] + [t for t, _ in data["oos_train"]]
    calib_seqs = [e.ids for e in tok.encode_batch(calib_texts)]
    sets = {"clinc150": batches(clinc, a.batch, a.device), "cfpb": batches(cfpb, a.batch // 4 or 1,
                                                                        a.device)}
    n = {"clinc150": len(clinc), "cfpb": len(cfpb)}
    print(f"clinc150 {n['clinc150']} rows, cfpb {n['cfpb']} narratives >= {a.min_tokens} tokens "
          f"(mean {sum(map(len, cfpb)) / max(1, len(cfpb)):.0f} after truncation at 512), "
          f"calibration {len(calib_seqs)} CLINC150 train queries")
    ref = {k: logits_of(model, v, n[k]) for k, v in sets.items()}
    orig = {}
    for layer in model.bert.encoder.layer:
        for _, lins in linears(layer):
            for lin in lins:
                orig[id(lin)] = (lin.weight.data.clone(), lin.forward)
    calib = calibrate(model, [(i, m) for _, i, m in batches(calib_seqs, a.batch, a.device)])
    every = dict.fromkeys(POINTS, "token")
    L = len(model.bert.encoder.layer)
    recipes = [
        Recipe("per-tensor dynamic act, per-tensor w (torchao tensorwise)",
               dict.fromkeys(POINTS, "tensor"), per_channel=False),
        Recipe("per-tensor dynamic act, per-channel w", dict.fromkeys(POINTS, "tensor")),
        Recipe("per-tensor static act (CLINC150 calib), per-channel w",
               dict.fromkeys(POINTS, "static")),
        Recipe("per-token act, per-tensor w", every, per_channel=False),
        Recipe("per-token act, per-channel w", every),
        Recipe("per-token act, per-channel w, ff2 16-bit", dict(every, ff2=None)),
        Recipe("per-token act, per-channel w, ao+ff2 16-bit", dict(every, ao=None, ff2=None)),
        Recipe("per-token qkv/ff1, static ao/ff2", dict(every, ao="static", ff2="static")),
        Recipe("per-token act, per-channel w, last layer 16-bit", every, skip=(L - 1,)),
        Recipe("per-token act, per-channel w, first layer 16-bit", every, skip=(0,)),
        # 10: gpu_fp8_runs' plan from GPU_FP8_DEEP layers on; 11-13: its neighbours
        Recipe("plan: qkv + ff1 per-token, first + last layer 16-bit",
               dict(every, ao=None, ff2=None), skip=(0, L - 1)),
        Recipe("every point per-token, first + last layer 16-bit", every, skip=(0, L - 1)),
        Recipe("qkv + ff1 per-token, first layer 16-bit", dict(every, ao=None, ff2=None),
               skip=(0,)),
        Recipe("ff1 only per-token, first + last layer 16-bit",
               dict(every, qkv=None, ao=None, ff2=None), skip=(0, L - 1)),
        # 14: the LayerNorm-fed points of every layer
        Recipe("qkv + ff1 per-token, every layer", dict(every, ao=None, ff2=None)),
        # 15-20: the plan with FFN-out too (its input under the weights' static bound scale,
        # which the FFN-in GEMM writes as E4M3 itself on CUDA), per layer range
        Recipe("plan + ff2 per-token, layers 1-10", dict(every, ao=None), skip=(0, L - 1)),
        Recipe("plan + ff2 bound, layers 1-10", dict(every, ao=None, ff2="bound"),
               skip=(0, L - 1)),
        Recipe("plan + ff2 bound, layers 3-8", dict(every, ao=None, ff2="bound"),
               skip=(0, L - 1), only={"ff2": range(3, 9)}),
        Recipe("plan + ff2 bound, layers 6-10", dict(every, ao=None, ff2="bound"),
               skip=(0, L - 1), only={"ff2": range(6, L - 1)}),
        Recipe("plan + ff2 bound, layers 1-5", dict(every, ao=None, ff2="bound"),
               skip=(0, L - 1), only={"ff2": range(1, 6)}),
        Recipe("plan + ff2 bound, layers 2-9", dict(every, ao=None, ff2="bound"),
               skip=(0, L - 1), only={"ff2": range(2, L - 2)}),
        Recipe("qkv + ff1 + ff2 bound, layers 2-10", dict(every, ao=None, ff2="bound"),
               skip=(0, 1, L - 1)),
    ]
    if a.recipes:
        keep = set(a.recipes.split(","))
        recipes = [r for i, r in enumerate(recipes) if str(i) in keep]
    print(f"{'recipe':58s} {'clinc150 top-1':>15s} {'max|d|':>7s} {'cfpb top-1':>12s} {'max|d|':>7s}")
    for r in recipes:
        t = time.time()
        install(model, r, calib, orig)
        row = f"{r.name:58s}"
        for k in sets:
            lg = logits_of(model, sets[k], n[k])
            agree = (lg.argmax(1) == ref[k].argmax(1)).float().mean().item() * 100
            row += f" {agree:14.2f}% {(lg - ref[k]).abs().max().item():7.3f}"
        print(row + f"  ({time.time() - t:.0f} s)", flush=True)


if __name__ == "__main__":
    main()
