/* The one way a function leaves its one-line message for the caller: err (errlen bytes,
 * may be NULL) gets the formatted text, and the caller returns the code it is given. */
#ifndef RECLASS_COMMON_ERR_H
#define RECLASS_COMMON_ERR_H

#include <stddef.h>

/* Formats into err and returns rc, so that a failure reads `return common_errf(2, ...)`. */
int common_errf(int rc, char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

#endif
