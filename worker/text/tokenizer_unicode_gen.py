#!/usr/bin/env python3
"""Regenerates the exception tables at the top of worker/text/tokenizer_unicode.c.

HF's BERT normalizer and pre-tokenizer take their Unicode properties from Rust std, the
unicode-normalization crate and the older unicode_categories crate; the C tokenizer takes
them from utf8proc. This probes both on every code point and prints, as C, the ranges where
they disagree (flip tables invert utf8proc's answer; hf_lower overrides its lower case).

    pip install tokenizers==0.23.3
    python3 worker/text/tokenizer_unicode_gen.py > /tmp/tables.inc   # paste into the .c file
"""
import ctypes
import ctypes.util

from tokenizers.normalizers import NFD, BertNormalizer, Lowercase
from tokenizers.pre_tokenizers import BertPreTokenizer

u8 = ctypes.CDLL(ctypes.util.find_library("utf8proc") or "libutf8proc.so.2")
u8.utf8proc_category.restype = ctypes.c_int
u8.utf8proc_tolower.restype = ctypes.c_int32
u8.utf8proc_decompose_char.restype = ctypes.c_ssize_t
CAT_MN, CAT_PC, CAT_PO = 6, 12, 18  # utf8proc_category_t: Mn; Pc..Po are 12..18
CAT_OTHER = (26, 27, 28, 29)  # Cc, Cf, Cs, Co
DECOMPOSE = 1 << 4  # UTF8PROC_DECOMPOSE


def u8_decomp(c):
    buf = (ctypes.c_int32 * 8)()
    last = ctypes.c_int(0)
    n = u8.utf8proc_decompose_char(c, buf, 8, DECOMPOSE, ctypes.byref(last))
    return [buf[i] for i in range(n)]


clean = BertNormalizer(clean_text=True, handle_chinese_chars=False, strip_accents=False,
                       lowercase=False)
strip = BertNormalizer(clean_text=False, handle_chinese_chars=False, strip_accents=True,
                       lowercase=False)
nfd, lower, pre = NFD(), Lowercase(), BertPreTokenizer()

drop_flip, mn_flip, punct_flip, nodecomp, lower_diff = [], [], [], [], []
for c in range(0x110000):
    if 0xD800 <= c <= 0xDFFF:
        continue
    s, cat = chr(c), u8.utf8proc_category(c)
    hf_drop = clean.normalize_str(s) == ""
    u8_drop = cat in CAT_OTHER and s not in "\t\n\r"
    if hf_drop != u8_drop and c not in (0, 0xFFFD):
        drop_flip.append(c)
    d = [ord(x) for x in nfd.normalize_str(s)]
    if d != u8_decomp(c):
        assert d == [c], "HF decomposes %x differently" % c
        nodecomp.append(c)
    if d == [c] and c >= 0x300:  # Mn matters only for what NFD leaves
        if (strip.normalize_str(s) == "") != (cat == CAT_MN):
            mn_flip.append(c)
    lo = lower.normalize_str(s)
    if c != 0x130 and lo != chr(u8.utf8proc_tolower(c)):  # 0x130: NFD splits it first
        assert len(lo) == 1, "%x lowers to %r" % (c, lo)
        lower_diff.append((c, ord(lo)))
    if c >= 0x80:
        hf_punct = len(pre.pre_tokenize_str("a" + s + "a")) == 3
        if hf_punct != (CAT_PC <= cat <= CAT_PO):
            punct_flip.append(c)


def emit(name, pairs):
    out, line = ["static const uint32_t %s[][2] = {" % name], "   "
    for a, b in pairs:
        item = " {0x%X, 0x%X}," % (a, b)
        if len(line) + len(item) > 96:
            out.append(line)
            line = "   "
        line += item
    out.append(line)
    out.append("};")
    print("\n".join(out))


def ranges(cps):
    r = []
    for x in cps:
        if r and r[-1][1] == x - 1:
            r[-1][1] = x
        else:
            r.append([x, x])
    return r


emit("hf_drop_flip", ranges(drop_flip))
emit("hf_mn_flip", ranges(mn_flip))
emit("hf_punct_flip", ranges(punct_flip))
emit("hf_lower", lower_diff)
emit("hf_nodecomp", ranges(nodecomp))
