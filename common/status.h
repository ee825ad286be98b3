/* The one status every layer returns to its caller and every command returns to main():
 * common_status_exit alone turns it into the process exit code. The values of ok, fatal and
 * usage equal their exit codes, so code that returned 0 / 1 / 2 keeps its meaning. */
#ifndef RECLASS_COMMON_STATUS_H
#define RECLASS_COMMON_STATUS_H

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
    COMMON_OK = 0,      /* done, or go on */
    COMMON_FATAL = 1,   /* a runtime failure: the message says what failed (exit 1) */
    COMMON_USAGE = 2,   /* a bad option or input: the message says what to fix (exit 2) */
    COMMON_FOUND = 3,   /* a check found what it looks for: `drift report` saw drift (exit 3) */
    COMMON_RETRY = 4,   /* transient (broker or database away): retry with backoff (exit 1) */
    COMMON_BUG = 5,     /* a broken invariant, e.g. a batch collected out of turn (exit 1) */
    COMMON_DONE = 6,    /* nothing more to do, e.g. --help was printed (exit 0) */
    COMMON_MISSING = 7, /* the service answered: no such thing (a schema id the registry lacks) */
    COMMON_DATA = 8,    /* the store refused some of the rows: write the others (exit 1) */
} common_status_t;

/* "ok", "usage error", ... for messages and tests. */
const char *common_status_name(common_status_t st);

/* The process exit code of a status: 0 ok or done, 1 a runtime failure (retry and data
 * included: still failing when the command gave up), 2 a usage error, 3 a check found what it
 * looks for (drift). */
int common_status_exit(common_status_t st);

/* Whether asking again later can succeed (a broker or database away). */
int common_status_retriable(common_status_t st);

#ifdef __cplusplus
}
#endif

#endif
