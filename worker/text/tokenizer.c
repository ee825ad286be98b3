/* The tokenizer facade (worker/text/tokenizer.h): a checkpoint's tokenizer is a tokenizer.json
 * pipeline (worker/text/hf/) or BERT WordPiece from vocab.txt (worker/text/wordpiece.c). */
#include "worker/text/tokenizer.h"

#include "worker/text/hf/hf.h"
#include "worker/text/tokenizer_int.h"

int worker_tok_encode_path(const worker_tok_t *tok, const char *text, size_t len, int max_len,
                           worker_ids_t *out, int force_general) {
    if (tok->hf) return hf_tok_encode(tok->hf, text, len, max_len, out);
    return tok_wordpiece_encode(tok, text, len, max_len, out, force_general);
}

int worker_tok_encode(const worker_tok_t *tok, const char *text, size_t len, int max_len,
                      worker_ids_t *out) {
    return worker_tok_encode_path(tok, text, len, max_len, out, 0);
}
