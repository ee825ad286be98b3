/* A checkpoint's tokenizer, as Hugging Face runs it: its tokenizer.json pipeline
 * (worker/text/hf/), or BERT WordPiece from vocab.txt (worker/text/wordpiece.c, identical to
 * BertTokenizerFast: clean text, CJK spacing, NFD accent stripping, lower-casing as
 * tokenizer_config.json sets them, punctuation split, greedy longest-match-first WordPiece
 * with "##", [UNK] for words over 100 chars). */
#ifndef RECLASS_WORKER_TOKENIZER_H
#define RECLASS_WORKER_TOKENIZER_H

#include <stddef.h>
#include <stdint.h>

#include "worker/text/ids.h"
#include "worker/text/tok_config.h"

typedef struct worker_tok worker_tok_t; /* immutable after init: share it across threads */

/* The tokenizer of a checkpoint directory: dir/tokenizer.json when it exists (the Hugging Face
 * tokenizers format: worker/text/hf/), else dir/vocab.txt with dir/tokenizer_config.json's
 * settings (BERT WordPiece). vocab_size: config.json's; a tokenizer with ids at or past it is
 * refused (0 = unchecked). A feature the file asks for that reclass lacks, or a bad file, is a
 * COMMON_USAGE error naming it; a read error or no memory COMMON_FATAL. */
common_status_t worker_tok_load_dir(const char *dir, int vocab_size, worker_tok_t **out,
                                    common_err_t *e);

/* opts: the checkpoint's settings (worker_tok_config_read, vocab_size set from the model's
 * config.json); NULL: BERT uncased (lower-case, strip accents, space CJK). */
common_status_t worker_tok_init(const char *vocab_path, const worker_tok_config_t *opts,
                                worker_tok_t **out, common_err_t *e);
void worker_tok_free(worker_tok_t *tok);
int worker_tok_vocab_size(const worker_tok_t *tok);

/* Encodes len bytes of text (any bytes: invalid UTF-8 becomes U+FFFD) as
 * [CLS] wordpieces [SEP]. max_len 0 keeps everything; otherwise at most max_len ids with
 * [CLS] first and [SEP] last. Returns 0, or -1 when out of memory. */
int worker_tok_encode(const worker_tok_t *tok, const char *text, size_t len, int max_len,
                      worker_ids_t *out);

/* worker_tok_encode with a switch for tests: force_general 1 skips the printable-ASCII fast
 * path so that the general (Unicode) path can be checked on the same texts. */
int worker_tok_encode_path(const worker_tok_t *tok, const char *text, size_t len, int max_len,
                           worker_ids_t *out, int force_general);

#endif
