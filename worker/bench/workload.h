/* Benchmark workloads for `reclass bench`: a JSONL file of pre-tokenized tickets
 * ({"ids": [...]}) or of texts ({"text": "..."}), or the synthetic "tickets-mix". */
#ifndef RECLASS_WORKER_WORKLOAD_H
#define RECLASS_WORKER_WORKLOAD_H

#include <stddef.h>
#include <stdint.h>

#include "common/err.h"
#include "worker/text/tokenizer.h"

typedef struct {
    long n;         /* tickets */
    int is_text;    /* 1: texts, tokenized by worker_workload_tokenize (timed by bench) */
    int32_t *ids;   /* (off[n]) token ids, ticket after ticket; for texts after tokenizing */
    long *off;      /* (n + 1) prefix offsets into ids */
    long ids_cap;   /* capacity of ids */
    char *text;     /* (text_off[n]) texts back to back, each NUL-terminated; NULL for ids */
    long *text_off; /* (n + 1) */
    long truncated; /* tickets cut to max_len */
} worker_workload_t;

/* The synthetic mix: n tickets (20,000 for "tickets-mix"), seeded. With probability 0.9 a
 * length of clip(round(exp(N(ln 60, 0.8))), 8, 512), else uniform in 448..512; lengths above
 * max_len are clipped to it. Ids: 101, uniform in [1000, min(30000, vocab)), ..., 102. */
common_status_t worker_workload_tickets_mix(long n, uint64_t seed, int max_len, int vocab_size,
                                            worker_workload_t **out, common_err_t *e);

/* Loads FILE.jsonl: every line {"ids": [...]} or every line {"text": "..."} (blank lines are
 * skipped). Ids must lie in [0, vocab_size); longer than max_len keeps the first max_len - 1
 * and the last id. Returns COMMON_OK; COMMON_USAGE with e naming the line (bad input);
 * COMMON_FATAL (a read error, no memory). */
common_status_t worker_workload_load(const char *path, int max_len, int vocab_size,
                                     worker_workload_t **out, common_err_t *e);

/* Tokenizes a text workload into ids/off (truncating at max_len). Allocates ids once, on
 * the first call; later calls reuse it. Returns 0 or -1 (out of memory). */
int worker_workload_tokenize(worker_workload_t *w, const worker_tok_t *tok, int max_len,
                             worker_ids_t *scratch);

void worker_workload_free(worker_workload_t *w);

#endif
