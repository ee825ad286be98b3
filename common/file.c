#include "common/file.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/err.h"

char *common_file_read(const char *path, size_t max_bytes, size_t *len, common_err_t *e) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        common_err_set(e, COMMON_USAGE, "cannot open %s: %s", path, strerror(errno));
        return NULL;
    }
    /* Grow by doubling rather than trust a size from fstat: the path may be a pipe or a file
     * that is still being written. */
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap + 1);
    int too_big = 0;
    while (buf) {
        size_t got = fread(buf + n, 1, cap - n, f);
        n += got;
        if (max_bytes && n > max_bytes) {
            too_big = 1;
            break;
        }
        if (n < cap) break;
        char *grown = realloc(buf, cap * 2 + 1);
        if (!grown) {
            free(buf);
            buf = NULL;
            break;
        }
        buf = grown;
        cap *= 2;
    }
    int rerr = ferror(f);
    fclose(f);
    if (!buf || rerr || too_big) {
        if (too_big)
            common_err_set(e, COMMON_USAGE, "%s: larger than %zu bytes", path, max_bytes);
        else
            common_err_set(e, COMMON_FATAL, "cannot read %s: %s", path,
                           buf ? "I/O error" : "out of memory");
        free(buf);
        return NULL;
    }
    buf[n] = '\0';
    *len = n;
    return buf;
}
