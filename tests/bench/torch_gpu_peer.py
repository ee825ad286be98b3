#!/usr/bin/env python3
"""PyTorch peer of the CUDA encoder: the Hugging Face sequence classifier of the same family
in the same geometry as `reclass bench --geometry` (bert-base: BertForSequenceClassification
12 x 768, 12 heads, 3072; roberta-base: RobertaForSequenceClassification, vocabulary 50265,
514 positions; distilbert-base: DistilBertForSequenceClassification, 6 layers;
modernbert-base: ModernBertForSequenceClassification, 22 layers, GeGLU 1152, 8,192 positions,
global attention every 3rd layer, a 128-token window elsewhere, mean pooling; deberta-v3-base:
DebertaV2ForSequenceClassification, vocabulary 128100, 256 position buckets, c2p + p2c;
140 labels, random init), fp16 weights,
attn_implementation="sdpa" (DeBERTa has only its eager attention), torch.inference_mode, on
the very same tickets (the JSONL that gpu_bench --workload-out writes: {"ids": [...]} lines).
For ModernBERT the variant "unpadded" is HF's flash_attention_2 path; it needs the
flash-attn package. "varlen" and "varlen-compile" need only torch (>= 2.10: its own
torch.nn.attention.varlen.varlen_attn, FlashAttention kernels built into torch, with
window_size): the very same HF modules (embeddings, Wqkv, HF's rotary embedding and
apply_rotary_pos_emb, Wo, MLP, norms, head, classifier) run on the batch packed without
padding (tokens back to back, cu_seqlens, positions from 0 in each sequence, as reclass
packs it), attention through varlen_attn (window (64, 64) on the local layers), mean pooling
per sequence; "varlen-compile" is that function under torch.compile. Before timing, its
logits are checked against the padded sdpa model's on the workload's first 64 tickets: a
variant whose logits differ (max |delta| > 0.05) is skipped, saying so.

Batches: length-sorted (longest first), padded to the batch's longest with an attention
mask, filled while n_seqs * padded_len <= token budget (a padded backend pays for padding).
Variants: eager, and torch.compile (dynamic shapes marked; one untimed pass over every batch
first, so compilation and autotuning stay out of the figure), and torchao-fp8 (torchao's FP8
recipe on the encoder's Linears, then torch.compile; --dtype bf16; needs torchao). Each timed pass copies the ids
to the GPU and the logits back per batch, as reclass does. Prints one JSON line per run,
with the board's joules per timed pass (NVML's energy counter) beside the time.

usage: torch_gpu_peer.py WORKLOAD.jsonl [--budgets 8192,16384,32768] [--repeat 3]
                         [--variants eager,compile,torchao-fp8,unpadded,varlen,varlen-compile]
                         [--dtype fp16|bf16] [--labels 140]
                         [--geometry bert-base|roberta-base|distilbert-base|modernbert-base|
                                     deberta-v3-base] [--device cuda]
"""
import argparse
import json
import statistics
import sys
import time

import torch


# The geometries of gpu/model/model_geometry.c, as Hugging Face configs.
GEOMETRIES = {
    "bert-base": ("BertConfig", dict(vocab_size=30522, hidden_size=768, num_hidden_layers=12,
                                     num_attention_heads=12, intermediate_size=3072,
                                     max_position_embeddings=512)),
    "roberta-base": ("RobertaConfig", dict(vocab_size=50265, hidden_size=768,
                                           num_hidden_layers=12, num_attention_heads=12,
                                           intermediate_size=3072, max_position_embeddings=514,
                                           type_vocab_size=1, pad_token_id=1,
                                           layer_norm_eps=1e-5)),
    "distilbert-base": ("DistilBertConfig", dict(vocab_size=30522, dim=768, n_layers=6,
                                                 n_heads=12, hidden_dim=3072,
                                                 max_position_embeddings=512)),
    "modernbert-base": ("ModernBertConfig", dict(vocab_size=50368, hidden_size=768,
                                                 num_hidden_layers=22, num_attention_heads=12,
                                                 intermediate_size=1152,
                                                 max_position_embeddings=8192,
                                                 global_attn_every_n_layers=3,
                                                 local_attention=128, global_rope_theta=160000.0,
                                                 local_rope_theta=10000.0,
                                                 classifier_pooling="mean")),
    "deberta-v3-base": ("DebertaV2Config", dict(vocab_size=128100, hidden_size=768,
                                                num_hidden_layers=12, num_attention_heads=12,
                                                intermediate_size=3072,
                                                max_position_embeddings=512, type_vocab_size=0,
                                                relative_attention=True, position_buckets=256,
                                                max_relative_positions=-1,
                                                pos_att_type=["p2c", "c2p"], share_att_key=True,
                                                norm_rel_ebd="layer_norm",
                                                position_biased_input=False,
                                                layer_norm_eps=1e-7)),
}


def build(kind, kw, labels, attn):
    """The model with attention attn, or its eager one where the family has no other."""
    import transformers
    from transformers import AutoModelForSequenceClassification
    cfg = getattr(transformers, kind)(num_labels=labels, **kw)
    try:
        return AutoModelForSequenceClassification.from_config(cfg, attn_implementation=attn)
    except (ValueError, ImportError) as e:
        if attn == "flash_attention_2":
            raise
        print(f"{kind}: no {attn} ({str(e).splitlines()[0]}); eager attention", flush=True)
        return AutoModelForSequenceClassification.from_config(cfg, attn_implementation="eager")


def load(path):
    seqs = []
    with open(path) as f:
        for line in f:
            line = line.strip()
            if line:
                seqs.append(json.loads(line)["ids"])
    return seqs


def make_batches(seqs, budget, pad_to=8):
    order = sorted(range(len(seqs)), key=lambda i: (-len(seqs[i]), i))
    batches, cur, cur_max = [], [], 0
    for i in order:
        n = len(seqs[i])
        m = max(cur_max, n)
        m_pad = (m + pad_to - 1) // pad_to * pad_to
        if cur and (len(cur) + 1) * m_pad > budget:
            batches.append(cur)
            cur, cur_max = [], 0
            m = n
        cur.append(i)
        cur_max = max(cur_max, m)
    if cur:
        batches.append(cur)
    out = []
    for b in batches:
        L = max(len(seqs[i]) for i in b)
        L = (L + pad_to - 1) // pad_to * pad_to
        ids = torch.zeros((len(b), L), dtype=torch.int32)
        mask = torch.zeros((len(b), L), dtype=torch.int32)
        for r, i in enumerate(b):
            ids[r, : len(seqs[i])] = torch.tensor(seqs[i], dtype=torch.int32)
            mask[r, : len(seqs[i])] = 1
        pin = torch.cuda.is_available()  # pinned host memory needs a CUDA driver
        out.append((ids.long().pin_memory() if pin else ids.long(),
                    mask.long().pin_memory() if pin else mask.long()))
    return out


class Energy:
    """The board's energy counter through NVML (ctypes; None where there is no driver)."""

    def __init__(self):
        import ctypes
        try:
            self.lib = ctypes.CDLL("libnvidia-ml.so.1")
            self.dev = ctypes.c_void_p()
            if self.lib.nvmlInit_v2() or self.lib.nvmlDeviceGetHandleByIndex_v2(
                    0, ctypes.byref(self.dev)):
                self.lib = None
        except OSError:
            self.lib = None

    def joules(self):
        import ctypes
        mj = ctypes.c_ulonglong()
        if self.lib is None or self.lib.nvmlDeviceGetTotalEnergyConsumption(
                self.dev, ctypes.byref(mj)):
            return None
        return mj.value / 1e3


def make_packed(seqs, budget):
    """reclass's batches: length-sorted, packed without padding while the tokens fit budget;
    each (ids, positions, cu_seqlens int32, longest)."""
    order = sorted(range(len(seqs)), key=lambda i: (-len(seqs[i]), i))
    batches, cur, ntok = [], [], 0
    for i in order:
        if cur and ntok + len(seqs[i]) > budget:
            batches.append(cur)
            cur, ntok = [], 0
        cur.append(i)
        ntok += len(seqs[i])
    if cur:
        batches.append(cur)
    out = []
    pin = torch.cuda.is_available()
    for b in batches:
        ids = torch.tensor([t for i in b for t in seqs[i]], dtype=torch.long)
        pos = torch.tensor([p for i in b for p in range(len(seqs[i]))], dtype=torch.long)
        cu = [0]
        for i in b:
            cu.append(cu[-1] + len(seqs[i]))
        cu = torch.tensor(cu, dtype=torch.int32)
        if pin:
            ids, pos, cu = ids.pin_memory(), pos.pin_memory(), cu.pin_memory()
        out.append((ids, pos, cu, max(len(seqs[i]) for i in b)))
    return out


def varlen_forward(model, ids, pos, cu, max_len):
    """ModernBertForSequenceClassification's forward on packed tokens (see the module text):
    HF's own modules, torch's varlen_attn instead of padded attention. Logits (n_seqs, L)."""
    from torch.nn.attention.varlen import varlen_attn
    from transformers.models.modernbert import modeling_modernbert as mm
    m, cfg = model.model, model.config
    heads = cfg.num_attention_heads
    hd = cfg.hidden_size // heads
    h = m.embeddings(input_ids=ids[None])  # (1, T, H)
    # transformers 5: one rotary module, a (cos, sin) per layer type; 4.x: one per layer
    shared = hasattr(m, "rotary_emb")
    pe = {t: m.rotary_emb(h, pos[None], t) for t in set(cfg.layer_types)} if shared else {}
    for i, layer in enumerate(m.layers):
        qkv = layer.attn.Wqkv(layer.attn_norm(h)).view(1, -1, 3, heads, hd)
        q, k, v = qkv.unbind(dim=2)  # (1, T, heads, hd)
        local = i % cfg.global_attn_every_n_layers != 0
        cos, sin = (pe[layer.attention_type] if shared
                    else layer.attn.rotary_emb(h, position_ids=pos[None]))
        q, k = mm.apply_rotary_pos_emb(q, k, cos, sin, unsqueeze_dim=2)
        w = cfg.local_attention // 2 if local else -1  # keys |i - j| <= w, as HF's window
        o = varlen_attn(q[0].contiguous(), k[0].contiguous(), v[0].contiguous(), cu, cu,
                        max_len, max_len, window_size=(w, w))
        h = h + layer.attn.Wo(o.reshape(1, -1, cfg.hidden_size))
        h = h + layer.mlp(layer.mlp_norm(h))
    h = m.final_norm(h)[0]  # (T, H)
    lens = (cu[1:] - cu[:-1]).long()
    if cfg.classifier_pooling == "mean":
        seg = torch.repeat_interleave(torch.arange(len(lens), device=h.device), lens)
        pooled = torch.zeros(len(lens), h.shape[1], device=h.device, dtype=torch.float32)
        pooled = (pooled.index_add_(0, seg, h.float()) / lens[:, None]).to(h.dtype)
    else:
        pooled = h[cu[:-1].long()]
    return model.classifier(model.head(pooled))


def run_packed(fn, batches, dev):
    sync = torch.cuda.synchronize if dev.type == "cuda" else (lambda: None)
    sync()
    t0 = time.perf_counter()
    for ids, pos, cu, longest in batches:
        logits = fn(ids.to(dev, non_blocking=True), pos.to(dev, non_blocking=True),
                    cu.to(dev, non_blocking=True), longest)
        logits.float().cpu()
    sync()
    return time.perf_counter() - t0


def varlen_check(model, fn, seqs):
    """Max |logit delta| of fn (packed) against the padded model on the first 64 tickets."""
    few = seqs[:64]
    dev = model.device
    with torch.inference_mode():
        ids, pos, cu, longest = make_packed(few, 1 << 30)[0]
        got = fn(ids.to(dev), pos.to(dev), cu.to(dev), longest).float()
        order = sorted(range(len(few)), key=lambda i: (-len(few[i]), i))  # make_packed's
        pids, mask = make_batches([few[i] for i in order], 1 << 30)[0]
        want = model(input_ids=pids.to(dev), attention_mask=mask.to(dev)).logits.float()
    return (got - want).abs().max().item()


def run_pass(model, batches):
    dev = model.device
    sync = torch.cuda.synchronize if dev.type == "cuda" else (lambda: None)
    sync()
    t0 = time.perf_counter()
    for ids, mask in batches:
        logits = model(input_ids=ids.to(dev, non_blocking=True),
                       attention_mask=mask.to(dev, non_blocking=True)).logits
        logits.float().cpu()
    sync()
    return time.perf_counter() - t0


def torchao_fp8(model):
    """A copy of model with torchao's FP8 recipe on the encoder's Linears (dynamic per-row
    activation and per-channel weight scales, E4M3); the head stays as it is, as in reclass.
    Needs the torchao wheel (carried, see the device README) and a bf16 model."""
    import copy
    from torchao.quantization import Float8DynamicActivationFloat8WeightConfig, PerRow, quantize_
    m = copy.deepcopy(model)
    quantize_(m, Float8DynamicActivationFloat8WeightConfig(granularity=PerRow()),
              filter_fn=lambda mod, fqn: isinstance(mod, torch.nn.Linear) and "encoder" in fqn
              or isinstance(mod, torch.nn.Linear) and "transformer" in fqn)
    return m


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("workload")
    ap.add_argument("--budgets", default="8192,16384,32768")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--variants", default="eager,compile")
    ap.add_argument("--dtype", default="fp16")
    ap.add_argument("--labels", type=int, default=140)
    ap.add_argument("--geometry", default="bert-base", choices=sorted(GEOMETRIES))
    ap.add_argument("--device", default="cuda", help="cuda, or cpu to check the script here")
    ap.add_argument("--compile-budget-s", type=float, default=240.0,
                    help="skip further compiled budgets once compiling took this long")
    a = ap.parse_args()
    torch.manual_seed(1)
    dtype = torch.float16 if a.dtype == "fp16" else torch.bfloat16
    kind, kw = GEOMETRIES[a.geometry]
    model = build(kind, kw, a.labels, "sdpa").to(dtype).to(a.device).eval()
    where = torch.cuda.get_device_name() if a.device == "cuda" else a.device
    print(f"torch {torch.__version__}, {a.geometry} ({type(model).__name__}), "
          f"attn {model.config._attn_implementation}, {where}", flush=True)
    seqs = load(a.workload)
    ntok = sum(len(s) for s in seqs)
    print(f"workload: {len(seqs)} tickets, {ntok} tokens", flush=True)
    compile_spent = 0.0
    energy = Energy()
    for variant in a.variants.split(","):
        m = model
        if variant == "compile":
            m = torch.compile(model, dynamic=True)
        if variant == "torchao-fp8":  # torchao's FP8 inference recipe, then torch.compile
            m = torch.compile(torchao_fp8(model), dynamic=True)
        if variant in ("varlen", "varlen-compile"):
            if a.geometry != "modernbert-base":
                print(f"skip {variant}: written for modernbert-base", flush=True)
                continue
            fn = lambda i, p, c, n: varlen_forward(model, i, p, c, n)  # noqa: E731
            if variant == "varlen-compile":
                fn = torch.compile(fn, dynamic=True)
            try:
                delta = varlen_check(model, fn, seqs)
            except Exception as e:  # an older torch or transformers: say which, go on
                print(f"skip {variant}: {type(e).__name__}: {str(e).splitlines()[0]}", flush=True)
                continue
            print(f"{variant}: max |logit delta| against the padded sdpa model {delta:.4f}",
                  flush=True)
            if not delta <= 0.05:
                print(f"skip {variant}: its logits differ from HF's padded ones", flush=True)
                continue
            for budget in [int(x) for x in a.budgets.split(",")]:
                batches = make_packed(seqs, budget)
                with torch.inference_mode():
                    t0 = time.perf_counter()
                    warm = run_packed(fn, batches, model.device)
                    if variant == "varlen-compile":
                        compile_spent += time.perf_counter() - t0
                    j0 = energy.joules()
                    secs = [run_packed(fn, batches, model.device) for _ in range(a.repeat)]
                    j1 = energy.joules()
                report(a, variant, budget, seqs, ntok, ntok, len(batches), secs, warm, j0, j1)
            continue
        if variant == "unpadded":
            try:
                torch.manual_seed(1)
                m = build(kind, kw, a.labels, "flash_attention_2").to(dtype).to(a.device).eval()
            except (ValueError, ImportError) as e:
                print(f"skip unpadded: {str(e).splitlines()[0]}", flush=True)
                continue
        for budget in [int(x) for x in a.budgets.split(",")]:
            if variant in ("compile", "torchao-fp8") and compile_spent > a.compile_budget_s:
                print(f"skip compile budget {budget}: compiling already took "
                      f"{compile_spent:.0f} s", flush=True)
                continue
            batches = make_batches(seqs, budget)
            padded = sum(ids.numel() for ids, _ in batches)
            with torch.inference_mode():
                t0 = time.perf_counter()
                warm = run_pass(m, batches)  # untimed: every batch shape once
                if variant in ("compile", "torchao-fp8"):
                    compile_spent += time.perf_counter() - t0
                j0 = energy.joules()
                secs = [run_pass(m, batches) for _ in range(a.repeat)]
                j1 = energy.joules()
            report(a, variant, budget, seqs, ntok, padded, len(batches), secs, warm, j0, j1)


def report(a, variant, budget, seqs, ntok, padded, n_batches, secs, warm, j0, j1):
    """One run's JSON line."""
    med = statistics.median(secs)
    j_pass = None if j0 is None or j1 is None else round((j1 - j0) / a.repeat, 1)
    rec = {"bench": "torch_gpu_peer", "geometry": a.geometry, "variant": variant,
           "dtype": a.dtype,
           "budget": budget, "tickets": len(seqs), "tokens": ntok,
           "padded_tokens": padded, "batches": n_batches, "seconds": round(med, 5),
           "best": round(min(secs), 5), "warmup_seconds": round(warm, 2),
           "tickets_per_s": round(len(seqs) / med, 1), "joules_per_pass": j_pass,
           "watts": None if j_pass is None else round(j_pass * a.repeat / sum(secs), 1)}
    print(json.dumps(rec), flush=True)


if __name__ == "__main__":
    sys.exit(main())
