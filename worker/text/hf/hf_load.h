/* What worker/text/hf/hf_load*.c share while reading one tokenizer.json. */
#ifndef RECLASS_WORKER_TEXT_HF_LOAD_H
#define RECLASS_WORKER_TEXT_HF_LOAD_H

#include <jansson.h>

#include "worker/text/hf/hf.h"

typedef struct {
    hf_tok_t *t;
    const char *name; /* the file, for messages */
    char *err;
    size_t errlen;
} hf_load_t;

int hf_json_flag(json_t *o, const char *key, int dflt);
char *hf_json_strdup(json_t *v, size_t *n);
int hf_load_normalizer(hf_load_t *L, json_t *o);
int hf_load_pretokenizer(hf_load_t *L, json_t *o);

#endif
