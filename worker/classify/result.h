/* Logits -> result, in one precision and one text format for every caller: `reclass run`
 * (ticket_results.confidence real, top_k jsonb) and `reclass classify` (JSON lines).
 *
 * Softmax is computed in double against the row's largest logit; each probability is then
 * kept as a float, the precision PostgreSQL stores it in. Numbers are written with "%.9g" of
 * that float, which reads back as the very same float. */
#ifndef RECLASS_WORKER_CLASSIFY_RESULT_H
#define RECLASS_WORKER_CLASSIFY_RESULT_H

#include <stddef.h>

#define CLS_TOP_MAX 64 /* longest top-k list */

typedef struct {
    int label;        /* the arg-max label id */
    float confidence; /* its probability (== p[0] when k > 0) */
    int k;            /* entries in top: min(top_k, num_labels, CLS_TOP_MAX) */
    int top[CLS_TOP_MAX];
    float p[CLS_TOP_MAX];
} cls_result_t;

/* Scores one row of num_labels logits. top is ordered by logit, highest first; equal logits
 * keep label order (the lower id first), so the arg-max is top[0]. */
void cls_score(const float *logits, int num_labels, int top_k, cls_result_t *r);

/* A growing text buffer; oom is set (and text kept short) when memory runs out. */
typedef struct {
    char *s; /* NUL-terminated when len > 0 */
    size_t len, cap;
    int oom;
} cls_buf_t;

void cls_buf_free(cls_buf_t *b);
void cls_buf_puts(cls_buf_t *b, const char *s);
/* Writes s as a JSON string literal: quotes, '"' and '\\' escaped, control bytes as \u00XX,
 * other bytes (UTF-8) as they are. */
void cls_json_string(cls_buf_t *b, const char *s);
/* A probability or confidence: "%.9g" of the float. */
void cls_json_number(cls_buf_t *b, float x);
/* [{"label": "...", "p": ...}, ...] */
void cls_json_top_k(cls_buf_t *b, const cls_result_t *r, const char *const *labels);
/* One `reclass classify` line, newline included:
 * {"label", "confidence", "top_k": [...], "tokens", "truncated"[, "logits"]}.
 * logits: the row (num_labels), or NULL to leave them out. */
void cls_json_line(cls_buf_t *b, const cls_result_t *r, const char *const *labels, int tokens,
                   int truncated, const float *logits, int num_labels);

#endif
