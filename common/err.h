/* How a function leaves its error for the caller: common_err_t, the code (one common_status_t),
 * a one-line message, and optional detail and hint (postgres' ereport fields); retriable follows
 * from the code. Library code fills it and passes it up, the CLI prints it (common_err_print). */
#ifndef RECLASS_COMMON_ERR_H
#define RECLASS_COMMON_ERR_H

#include <stddef.h>
#include <stdio.h>

#include "common/status.h"

#ifdef __cplusplus
extern "C" { /* the CUDA files fill it too */
#endif

typedef struct {
    common_status_t code;
    char message[256]; /* one line, no prefix: the CLI adds "reclass <cmd>: " */
    char detail[256];  /* what was seen (a server's answer), or "" */
    char hint[256];    /* what to do about it, or "" */
} common_err_t;

/* Sets e's code and message (detail and hint cleared) and returns the code, so that a failure
 * reads `return common_err_set(e, COMMON_RETRY, "...", ...)`. e may be NULL. */
common_status_t common_err_set(common_err_t *e, common_status_t code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Sets e's detail or hint (after common_err_set). e may be NULL. */
void common_err_detail(common_err_t *e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void common_err_hint(common_err_t *e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* 1 when asking again later can succeed: the code says so (common_status_retriable). */
int common_err_retriable(const common_err_t *e);

/* A line for the user: a library's progress line (a rebalance, a retried send) goes to the
 * FILE its caller gave (the CLI gives stderr), the CLI's own messages to stderr or stdout;
 * NULL: quiet. Libraries never pick stderr themselves. Each line starts with the prefix
 * common_log_prefix set ("reclass run: "): no caller writes the command's name itself. */
void common_logf(FILE *log, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* The prefix of common_logf's lines, without ": " ("reclass run"), kept (not copied) until the
 * next call; NULL or "": none. The CLI sets it once per command, before any thread starts. */
void common_log_prefix(const char *prefix);

/* Room for e as one line: its three fields and the separators common_err_line puts between. */
#define COMMON_ERR_LINE_MAX (sizeof(common_err_t) + 8)

/* e as one line, "message (detail); hint" with the parts that are set, into buf (len bytes,
 * cut to fit): the text of an error wherever a caller needs text (a log line, a dead letter's
 * reason). Returns buf. */
const char *common_err_line(const common_err_t *e, char *buf, size_t len);

/* Writes common_err_line's line to f as common_logf does (after the command's prefix): how the
 * CLI prints an error. */
void common_err_print(FILE *f, const common_err_t *e);

#ifdef __cplusplus
}
#endif

#endif
