/* What worker/text/hf/hf_load*.c share while reading one tokenizer.json. */
#ifndef RECLASS_WORKER_TEXT_HF_LOAD_H
#define RECLASS_WORKER_TEXT_HF_LOAD_H

#include <jansson.h>

#include "common/err.h"

#include "worker/text/hf/hf.h"

typedef struct {
    hf_tok_t *t;
    const char *name; /* the file, for messages */
    common_err_t *e;
} hf_load_t;

int hf_json_flag(json_t *o, const char *key, int dflt);
char *hf_json_strdup(json_t *v, size_t *n);
/* 0, or -1 with L->e set: a setting reclass lacks or a bad one COMMON_USAGE, no memory
 * COMMON_FATAL. */
int hf_load_normalizer(hf_load_t *L, json_t *o);
int hf_load_pretokenizer(hf_load_t *L, json_t *o);

#endif
