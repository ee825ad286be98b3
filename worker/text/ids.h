/* The token ids of one text, as every tokenizer writes them (the BERT WordPiece of
 * worker/text/wordpiece.c and the tokenizer.json pipelines of worker/text/hf/). */
#ifndef RECLASS_WORKER_TEXT_IDS_H
#define RECLASS_WORKER_TEXT_IDS_H

#include <stddef.h>
#include <stdint.h>

/* A growable id vector; reuse it across calls to avoid allocation. */
typedef struct {
    int32_t *v; /* (cap) */
    int n;      /* ids written, [CLS] and [SEP] included */
    int cap;
    int n_full;    /* length before truncation */
    int truncated; /* 1 when n < n_full */
} worker_ids_t;

void worker_ids_free(worker_ids_t *ids);
/* Grows ids->v to hold at least need ids. 0, or -1 when out of memory. */
int worker_ids_reserve(worker_ids_t *ids, size_t need);

#endif
