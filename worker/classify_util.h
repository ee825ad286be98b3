/* Helpers shared by `reclass classify` and `reclass bench`: the model + backend
 * session (load, backend init, packed batch buffers allocated once), and JSON result lines. */
#ifndef RECLASS_WORKER_CLASSIFY_UTIL_H
#define RECLASS_WORKER_CLASSIFY_UTIL_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "gpu/backend.h"
#include "gpu/model.h"

/* Monotonic milliseconds (the accumulator's clock) and seconds (benchmarks). */
int64_t classify_now_ms(void);
double classify_now_s(void);

/* A loaded model with one backend instance and the buffers of one packed batch. */
typedef struct {
    gpu_model_t *model; /* owned */
    const gpu_backend_ops_t *ops;
    gpu_backend_t *be; /* owned */
    gpu_backend_opts_t opts;
    int max_seqs;  /* sequences per batch the backend holds */
    int32_t *ids;  /* (token_budget) packed ids of the batch being formed */
    int32_t *cu;   /* (max_seqs + 1) prefix offsets */
    float *logits; /* (max_seqs, num_labels) */
} classify_session_t;

/* Opens the backend on a model the session takes ownership of (freed by
 * classify_session_free, also on failure). Returns 0, 1 (runtime failure) or 2 (bad option,
 * e.g. unknown backend or precision), with err set. */
int classify_session_init(classify_session_t *s, gpu_model_t *model, const char *backend,
                          const gpu_backend_opts_t *opts, char *err, size_t errlen);
void classify_session_free(classify_session_t *s);

/* Runs one batch of n sequences (seq[i] has lens[i] ids) and leaves the logits in
 * s->logits. Returns 0, or non-zero with err set. */
int classify_session_forward(classify_session_t *s, const int32_t *const *seq, const int *lens,
                             int n, char *err, size_t errlen);

/* The same in two halves (the backend's submit and collect): submit packs and queues the
 * batch, so the caller can pack the next one while the device works; collect leaves the
 * oldest submitted batch's logits in s->logits. At most two batches in flight. */
int classify_session_submit(classify_session_t *s, const int32_t *const *seq, const int *lens,
                            int n, char *err, size_t errlen);
int classify_session_collect(classify_session_t *s, char *err, size_t errlen);

/* Writes s as a JSON string literal (quotes and escapes). */
void classify_json_string(FILE *f, const char *s);

/* One result line: {"label","confidence","top_k":[...],"tokens","truncated"[,"logits"]}. */
void classify_write_result(FILE *f, const gpu_model_config_t *cfg, const float *logits, int top_k,
                           int with_logits, int tokens, int truncated);

#endif
