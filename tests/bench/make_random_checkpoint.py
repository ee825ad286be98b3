#!/usr/bin/env python3
"""A randomly initialised BertForSequenceClassification checkpoint in a named geometry, saved
as Hugging Face does (config.json, fp16 model.safetensors) with the demo model's vocab.txt and
tokenizer_config.json, for timing the whole worker on a production-sized encoder.

    make_random_checkpoint.py OUT_DIR [--geometry bert-base] [--labels 140] [--seed 1]

The tiny geometries (one layer, hidden 32 or 64) leave the encoder nearly free, so a job on
them times the host pipeline; distilbert-base is a DistilBertForSequenceClassification.

Needs torch and transformers (the GPU machine has them).
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
}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--geometry", default="bert-base", choices=sorted(GEOMETRIES))
    ap.add_argument("--labels", type=int, default=140)
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    import torch
    from transformers import (BertConfig, BertForSequenceClassification, DistilBertConfig,
                              DistilBertForSequenceClassification)

    demo = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "deploy",
                        "models", "clinc150-bert-mini")
    with open(os.path.join(demo, "vocab.txt"), encoding="utf-8") as f:
        vocab_size = sum(1 for _ in f)
    torch.manual_seed(a.seed)
    if a.geometry.startswith("distilbert"):
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


if __name__ == "__main__":
    main()
