/* The one redaction of secrets in messages: whatever is echoed to a log or a terminal (an
 * error from libpq or librdkafka that quotes the user's connection string, a --kafka list)
 * goes through it first. */
#ifndef RECLASS_COMMON_REDACT_H
#define RECLASS_COMMON_REDACT_H

#include <stddef.h>

/* Copies text into out (outlen bytes, NUL-terminated, truncated to fit) with every secret
 * replaced by "***": the password of a URL's user info (scheme://user:PASSWORD@host) and the
 * value of any KEY=VALUE or KEY = 'VALUE' whose key ends in "password" or "secret"
 * (conninfo's password=, sasl.password=, ssl.key.password=, ...). Returns out. text and out
 * may be the same buffer. */
char *common_redact(const char *text, char *out, size_t outlen);

#endif
