#!/usr/bin/env python3
"""PyTorch's own reduced-precision agreement on the fixture goldens: each fixture classifier
(tests/fixtures/models/<name>) run by Hugging Face entirely in fp16 and in bf16 on the same
golden token ids, its argmax against the goldens' fp32 "pred", and the fp32 top-2 margin of
every flipped row (fp32 logits recomputed here, in batches as the goldens were): what
test_gpu_golden's gate (agreement, and flips only on margins below 4x the delta bound) would
say of PyTorch itself. One JSON line per model, set and precision.

    torch_precision_agreement.py [--models DIR] [--only NAME] [--device cpu]
"""
import argparse
import json
import sys
from pathlib import Path

import torch
from transformers import AutoModelForSequenceClassification

REPO = Path(__file__).resolve().parents[2]
SETS = ("clinc150_test", "multilingual")
BOUND = {"fp16": 0.05, "bf16": 0.25}  # test_gpu_golden's max |delta logit| bounds


def batches(ids, pad, size=256):
    for i in range(0, len(ids), size):
        chunk = ids[i:i + size]
        n = max(len(x) for x in chunk)
        x = torch.full((len(chunk), n), pad, dtype=torch.long)
        m = torch.zeros((len(chunk), n), dtype=torch.long)
        for r, seq in enumerate(chunk):
            x[r, :len(seq)] = torch.tensor(seq)
            m[r, :len(seq)] = 1
        yield x, m


@torch.no_grad()
def logits(model, ids, pad, device):
    out = [model(input_ids=x.to(device), attention_mask=m.to(device)).logits.float().cpu()
           for x, m in batches(ids, pad)]
    return torch.cat(out)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--models", type=Path, default=REPO / "tests" / "fixtures" / "models")
    ap.add_argument("--only")
    ap.add_argument("--device", default="cpu")
    a = ap.parse_args()
    torch.set_num_threads(1)
    names = [a.only] if a.only else sorted(p.name for p in a.models.iterdir() if p.is_dir())
    for name in names:
        d = a.models / name
        model = AutoModelForSequenceClassification.from_pretrained(
            d, attn_implementation="eager").float().eval().to(a.device)
        pad = model.config.pad_token_id or 0
        id2label = model.config.id2label
        for s in SETS:
            rows = [json.loads(line) for line in open(d / f"golden_{s}.jsonl", encoding="utf-8")]
            ids = [r["ids"] for r in rows]
            fp32 = logits(model.float(), ids, pad, a.device)
            top2 = fp32.topk(2, dim=1).values
            margin = (top2[:, 0] - top2[:, 1]).tolist()
            for prec, dt in (("fp16", torch.float16), ("bf16", torch.bfloat16)):
                low = logits(model.to(dt), ids, pad, a.device)
                flips = [i for i, r in enumerate(rows) if id2label[int(low[i].argmax())] != r["pred"]]
                widest = max((margin[i] for i in flips), default=0.0)
                print(json.dumps({"model": name, "set": s, "precision": prec, "rows": len(rows),
                                  "agreement": round(1 - len(flips) / len(rows), 6),
                                  "flips": len(flips), "widest_flip_margin": round(widest, 4),
                                  "margin_bound": 4 * BOUND[prec],
                                  "max_abs_delta": round(float((low - fp32).abs().max()), 4)}),
                      flush=True)
            model.float()


if __name__ == "__main__":
    sys.exit(main())
