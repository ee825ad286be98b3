/* Reads texts from a stream for `tokenize` and `classify`: one text per line (plain), or one
 * JSON object per line with a string "text" field (JSONL; other fields are ignored).
 * Lines may be of any length. */
#ifndef RECLASS_WORKER_INPUT_H
#define RECLASS_WORKER_INPUT_H

#include <stddef.h>
#include <stdio.h>

#include "common/err.h"

typedef struct worker_input worker_input_t;

/* Does not take ownership of f: the caller closes it after worker_input_free(). */
common_status_t worker_input_open(FILE *f, int jsonl, worker_input_t **out, common_err_t *e);

/* 1 = a text (NUL-terminated, *len bytes, valid until the next call), 0 = EOF, -1 = error:
 * e's message names the line number and what is wrong
 * (e.g. "line 3: not a JSON object with a string \"text\" field"), COMMON_USAGE for a bad line,
 * COMMON_FATAL for a read error or no memory.
 * Plain mode strips a trailing \n or \r\n; an empty line is an empty text.
 * JSONL mode skips empty (or all-whitespace) lines. */
int worker_input_next(worker_input_t *in, const char **text, size_t *len, common_err_t *e);

/* 1-based line number of the last text returned (0 before the first). */
long worker_input_line(const worker_input_t *in);

void worker_input_free(worker_input_t *in);

#endif
