#include "common/err.h"

#include <stdarg.h>
#include <stdio.h>

common_status_t common_err_set(common_err_t *e, common_status_t code, const char *fmt, ...) {
    if (e) {
        e->code = code;
        e->detail[0] = e->hint[0] = '\0';
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(e->message, sizeof(e->message), fmt, ap);
        va_end(ap);
    }
    return code;
}

void common_err_detail(common_err_t *e, const char *fmt, ...) {
    if (!e) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->detail, sizeof(e->detail), fmt, ap);
    va_end(ap);
}

void common_err_hint(common_err_t *e, const char *fmt, ...) {
    if (!e) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->hint, sizeof(e->hint), fmt, ap);
    va_end(ap);
}

int common_err_retriable(const common_err_t *e) {
    return e && common_status_retriable(e->code);
}

const char *common_err_line(const common_err_t *e, char *buf, size_t len) {
    if (!buf || len == 0) return buf;
    snprintf(buf, len, "%s%s%s%s%s%s", e->message, e->detail[0] ? " (" : "", e->detail,
             e->detail[0] ? ")" : "", e->hint[0] ? "; " : "", e->hint);
    return buf;
}

void common_err_print(FILE *f, const common_err_t *e) {
    char line[COMMON_ERR_LINE_MAX];
    common_logf(f, "%s\n", common_err_line(e, line, sizeof line));
}

/* set before any thread starts and only read after: no lock */
static const char *log_prefix;

void common_log_prefix(const char *prefix) {
    log_prefix = prefix;
}

void common_logf(FILE *log, const char *fmt, ...) {
    if (!log) return;
    if (log_prefix && *log_prefix) fprintf(log, "%s: ", log_prefix);
    va_list ap;
    va_start(ap, fmt);
    vfprintf(log, fmt, ap);
    va_end(ap);
}
