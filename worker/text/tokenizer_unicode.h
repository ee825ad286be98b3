/* Per-code-point Unicode properties as Hugging Face's BERT normalizer and pre-tokenizer see
 * them (tokenizers 0.23). utf8proc supplies the tables; where HF's own (older or different)
 * tables disagree, tokenizer_unicode.c carries the exceptions. Internal to the tokenizer. */
#ifndef RECLASS_WORKER_TOKENIZER_UNICODE_H
#define RECLASS_WORKER_TOKENIZER_UNICODE_H

#include <stdint.h>

/* Longest canonical (NFD) decomposition of one code point, with headroom. */
#define TOK_UC_MAX_DECOMP 8

/* What the "clean text" and CJK steps do with a code point. */
enum { TOK_CP_KEEP = 0, TOK_CP_DROP = 1, TOK_CP_SPACE = 2, TOK_CP_CJK = 3 };

int tok_uc_clean_class(uint32_t cp);
/* Writes the full canonical decomposition of cp (cp itself when it has none); returns the
 * count. The caller applies canonical ordering across code points. */
int tok_uc_decompose(uint32_t cp, uint32_t out[TOK_UC_MAX_DECOMP]);
int tok_uc_ccc(uint32_t cp);
/* Nonspacing mark (Mn): dropped when stripping accents. */
int tok_uc_is_mn(uint32_t cp);
uint32_t tok_uc_lower(uint32_t cp);
/* Splitting classes of the pre-tokenizer. */
int tok_uc_is_ws(uint32_t cp);
int tok_uc_is_punct(uint32_t cp);

#endif
