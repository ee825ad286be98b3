#!/usr/bin/env python3
"""Writes tests/test_tokenizer_options.jsonl: Hugging Face's BERT tokenizer's ids (the Rust
tokenizers library behind BertTokenizerFast: BertNormalizer, BertPreTokenizer, WordPiece) for texts
under the tokenizer_config.json settings other than BERT uncased's (do_lower_case,
strip_accents, tokenize_chinese_chars), one setting per row, cycled. The texts: the first
1,000 of tests/test_tokenizer_fuzz.jsonl (random mixed-script texts with bad bytes) and
crafted ones heavy in accents, CJK, combining marks and U+0130. Run with the tokenizers
package installed:  python3 tests/gen_tokenizer_options.py"""
import itertools
import json
import os
import random

from tokenizers import BertWordPieceTokenizer

here = os.path.dirname(os.path.abspath(__file__))
vocab = os.path.join(here, "..", "deploy", "models", "clinc150-bert-mini", "vocab.txt")
# (lower, strip_accents, tokenize_chinese_chars) other than (True, None, True) and
# (False, None, True), which test_tokenizer_fuzz.jsonl covers.
settings = [(True, False, True), (False, True, True), (True, True, False), (False, False, False),
            (True, False, False), (False, True, False), (True, None, False)]
toks = {s: BertWordPieceTokenizer(vocab, clean_text=True, handle_chinese_chars=s[2],
                                  strip_accents=s[1], lowercase=s[0]) for s in settings}

texts = []
with open(os.path.join(here, "test_tokenizer_fuzz.jsonl"), encoding="utf-8") as f:
    for line in itertools.islice(f, 1000):
        texts.append(bytes.fromhex(json.loads(line)["hex"]))
rng = random.Random(7)
pieces = ["Crème brûlée", "İstanbul", "İİ", "ǅemal", "Ångström", "naïve café", "São Paulo",
          "ΣΑΣ", "ß", "ﬁne", "Ǆ", "e\u0301\u0327", "a\u0315\u0300b", "\u1e0b\u0323", "x\u0488y",
          "我爱北京天安门", "hello世界", "日本語テキスト", "한국어", "Ⅻ", "ＦＵＬＬ", "Ωmega", "ΆΈ",
          "Ünïcödé", "résumé", "İyi Akşamlar", "KÖLN", "[SEP]", "[MASK]", "don't", "—", "¿qué?",
          "\u3000", "\t", "𠀀𠀁", "ﾃﾞｰﾀ", "Ǳ", "ǲ", "Ⓐ", "ﬀ"]
for _ in range(300):
    k = rng.randint(1, 8)
    texts.append(" ".join(rng.choice(pieces) for _ in range(k)).encode("utf-8"))

out = os.path.join(here, "test_tokenizer_options.jsonl")
with open(out, "w", encoding="utf-8") as f:
    for i, b in enumerate(texts):
        s = settings[i % len(settings)]
        ids = toks[s].encode(b.decode("utf-8", errors="replace")).ids
        f.write(json.dumps({"hex": b.hex(), "lower": s[0], "strip": s[1], "cjk": s[2],
                            "ids": ids}) + "\n")
print(f"{out}: {len(texts)} rows")
