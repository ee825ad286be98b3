/* The BERT basic tokenizer's settings in a checkpoint's tokenizer_config.json, as Hugging
 * Face reads them (worker/text/tokenizer*.c applies them). The model loader (gpu/model/)
 * does not read this file: whoever builds a tokenizer reads it here. */
#ifndef RECLASS_WORKER_TOK_CONFIG_H
#define RECLASS_WORKER_TOK_CONFIG_H

#include <stddef.h>

#include "common/err.h"

typedef struct {
    int lower;         /* do_lower_case; 1 when absent */
    int strip_accents; /* null or absent: as do_lower_case */
    int chinese_chars; /* tokenize_chinese_chars; 1 when absent */
    int vocab_size;    /* config.json's (the caller sets it from the model): a longer vocab.txt is
                        * refused by worker_tok_init; 0 = unchecked */
} worker_tok_config_t;

/* Reads dir/tokenizer_config.json into tok (BERT uncased when the file or a key is absent;
 * vocab_size 0). Invalid JSON or a value of the wrong type is COMMON_USAGE, its message naming
 * the file; no memory COMMON_FATAL. */
common_status_t worker_tok_config_read(const char *dir, worker_tok_config_t *tok, common_err_t *e);

/* The same parser on the file's text (len bytes; name stands for the file in e's message). */
common_status_t worker_tok_config_parse(const char *json, size_t len, const char *name,
                                        worker_tok_config_t *tok, common_err_t *e);

#endif
