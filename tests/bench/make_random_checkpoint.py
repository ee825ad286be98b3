#!/usr/bin/env python3
"""A randomly initialised ...ForSequenceClassification checkpoint in a named geometry, saved
as Hugging Face does (config.json, fp16 model.safetensors) with the demo model's vocab.txt and
tokenizer_config.json, for timing the whole worker on a production-sized encoder.
modernbert-base and deberta-v3-base take those geometries' shapes (answerdotai/ModernBERT-base,
microsoft/deberta-v3-base) with the demo model's WordPiece vocabulary: the ids it gives are
in range of either model's embedding table, which is all a timing needs.

    make_random_checkpoint.py OUT_DIR [--geometry bert-base] [--labels 140] [--seed 1]

The tiny geometries (one layer, hidden 32 or 64) leave the encoder nearly free, so a job on
them times the host pipeline; distilbert-base is a DistilBertForSequenceClassification.

Needs torch and transformers (the GPU machine has them); --slice-demo needs neither: the demo
model's own weights cut to a BERT geometry no wider than it (bert-mini, tiny-h32, tiny-h64; its
labels), for timing the pipeline on a machine without torch.
"""
import argparse
import os
import shutil

GEOMETRIES = {
    "bert-base": dict(hidden_size=768, num_hidden_layers=12, num_attention_heads=12,
                      intermediate_size=3072),
    "bert-mini": dict(hidden_size=256, num_hidden_layers=4, num_attention_heads=4,
                      intermediate_size=1024),
    "tiny-h32": dict(hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                     intermediate_size=128),
    # one head of 64: the CUDA kernels take head_dim 64 only
    "tiny-h64": dict(hidden_size=64, num_hidden_layers=1, num_attention_heads=1,
                     intermediate_size=256),
    "distilbert-base": dict(dim=768, n_layers=6, n_heads=12, hidden_dim=3072),
    "modernbert-base": dict(hidden_size=768, num_hidden_layers=22, num_attention_heads=12,
                            intermediate_size=1152),
    "deberta-v3-base": dict(hidden_size=768, num_hidden_layers=12, num_attention_heads=12,
                            intermediate_size=3072),
}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--geometry", default="bert-base", choices=sorted(GEOMETRIES))
    ap.add_argument("--labels", type=int, default=140)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--slice-demo", action="store_true")
    a = ap.parse_args()
    if a.slice_demo:
        slice_demo(a.out, a.geometry)
        return
    import torch
    from transformers import (BertConfig, BertForSequenceClassification, DistilBertConfig,
                              DistilBertForSequenceClassification)

    demo = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "deploy",
                        "models", "clinc150-bert-mini")
    with open(os.path.join(demo, "vocab.txt"), encoding="utf-8") as f:
        vocab_size = sum(1 for _ in f)
    torch.manual_seed(a.seed)
    if a.geometry == "modernbert-base":
        from transformers import ModernBertConfig, ModernBertForSequenceClassification
        cfg = ModernBertConfig(vocab_size=50368, max_position_embeddings=8192,
                               global_attn_every_n_layers=3, local_attention=128,
                               global_rope_theta=160000.0, local_rope_theta=10000.0,
                               pad_token_id=0, bos_token_id=101, eos_token_id=102,
                               cls_token_id=101, sep_token_id=102, classifier_pooling="mean",
                               hidden_activation="gelu", num_labels=a.labels,
                               **GEOMETRIES[a.geometry])
        model = ModernBertForSequenceClassification(cfg).half().eval()
    elif a.geometry == "deberta-v3-base":
        from transformers import DebertaV2Config, DebertaV2ForSequenceClassification
        cfg = DebertaV2Config(vocab_size=128100, max_position_embeddings=512, type_vocab_size=0,
                              relative_attention=True, position_buckets=256,
                              max_relative_positions=-1, pos_att_type=["p2c", "c2p"],
                              share_att_key=True, norm_rel_ebd="layer_norm",
                              position_biased_input=False, hidden_act="gelu",
                              pooler_hidden_act="gelu", pooler_hidden_size=768,
                              layer_norm_eps=1e-7, pad_token_id=0, num_labels=a.labels,
                              **GEOMETRIES[a.geometry])
        model = DebertaV2ForSequenceClassification(cfg).half().eval()
    elif a.geometry.startswith("distilbert"):
        cfg = DistilBertConfig(vocab_size=vocab_size, max_position_embeddings=512,
                               num_labels=a.labels, activation="gelu", **GEOMETRIES[a.geometry])
        model = DistilBertForSequenceClassification(cfg).half().eval()
    else:
        cfg = BertConfig(vocab_size=vocab_size, max_position_embeddings=512, num_labels=a.labels,
                         hidden_act="gelu", **GEOMETRIES[a.geometry])
        model = BertForSequenceClassification(cfg).half().eval()
    model.save_pretrained(a.out, safe_serialization=True)
    for name in ("vocab.txt", "tokenizer_config.json"):
        shutil.copy(os.path.join(demo, name), os.path.join(a.out, name))
    print(f"{a.geometry}, {a.labels} labels, random (seed {a.seed}) -> {a.out}")


def slice_demo(out, geometry):
    """The demo checkpoint's first layers, first hidden and intermediate units: the geometry's
    shapes with trained (not random) values, written as safetensors without torch."""
    import json
    import struct
    demo = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "deploy",
                        "models", "clinc150-bert-mini")
    g = GEOMETRIES[geometry]
    with open(os.path.join(demo, "config.json"), encoding="utf-8") as f:
        cfg = json.load(f)
    if "hidden_size" not in g or g["hidden_size"] > cfg["hidden_size"] or \
            g["num_hidden_layers"] > cfg["num_hidden_layers"]:
        raise SystemExit(f"--slice-demo: {geometry} is not a BERT geometry within the demo model")
    with open(os.path.join(demo, "model.safetensors"), "rb") as f:
        data = f.read()
    n = struct.unpack("<Q", data[:8])[0]
    header = json.loads(data[8:8 + n])
    cut = {cfg["hidden_size"]: g["hidden_size"], cfg["intermediate_size"]: g["intermediate_size"]}
    tensors = {}
    for name, t in header.items():
        if name == "__metadata__":
            continue
        if ".layer." in name and int(name.split(".layer.")[1].split(".")[0]) >= g["num_hidden_layers"]:
            continue
        if t["dtype"] != "F16":
            raise SystemExit(f"--slice-demo: {name} is {t['dtype']}, not F16")
        raw = data[8 + n + t["data_offsets"][0]:8 + n + t["data_offsets"][1]]
        shape = [cut.get(d, d) for d in t["shape"]]
        if len(shape) == 1:
            raw = raw[:2 * shape[0]]
        else:  # row-major: the first rows, each cut to its first columns
            cols = t["shape"][1]
            raw = b"".join(raw[2 * cols * r:2 * cols * r + 2 * shape[1]] for r in range(shape[0]))
        tensors[name] = (shape, raw)
    meta, off = {}, 0
    for name in sorted(tensors):
        shape, raw = tensors[name]
        meta[name] = {"dtype": "F16", "shape": shape, "data_offsets": [off, off + len(raw)]}
        off += len(raw)
    head = json.dumps(meta).encode()
    head += b" " * (-len(head) % 8)
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "model.safetensors"), "wb") as f:
        f.write(struct.pack("<Q", len(head)) + head)
        for name in sorted(tensors):
            f.write(tensors[name][1])
    cfg.update(g)
    with open(os.path.join(out, "config.json"), "w", encoding="utf-8") as f:
        json.dump(cfg, f, indent=2)
    for name in ("vocab.txt", "tokenizer_config.json"):
        shutil.copy(os.path.join(demo, name), os.path.join(out, name))
    print(f"{geometry}, the demo model's weights cut to it -> {out}")


if __name__ == "__main__":
    main()
