/* The one whole-file reader: every folder includes common/, which includes none of them. */
#ifndef RECLASS_COMMON_FILE_H
#define RECLASS_COMMON_FILE_H

#include <stddef.h>

#include "common/err.h"

/* Reads the file at path into one NUL-terminated allocation (the caller frees it) and sets
 * *len to its byte count (the terminator not counted). max_bytes > 0 refuses a larger file
 * (the callers cap what they read from outside: a schema, a migration); 0 reads any size.
 * On failure returns NULL with e naming the file and the cause: COMMON_USAGE for a file that
 * cannot be opened or is too large (a path to fix), COMMON_FATAL for a read error or no memory. */
char *common_file_read(const char *path, size_t max_bytes, size_t *len, common_err_t *e);

#endif
