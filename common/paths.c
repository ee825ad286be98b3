#include "common/paths.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int common_is_dir(char *p, size_t plen) {
    struct stat st;
    if (stat(p, &st) != 0 || !S_ISDIR(st.st_mode)) return 0;
    char *real = realpath(p, NULL);
    if (real && strlen(real) < plen) strcpy(p, real);
    free(real);
    return 1;
}

int common_data_dir(const char *tree, const char *name, char *out, size_t outlen) {
    char cand[3][4096];
    int n = 0;
    char exe[2048]; /* the directories tried fit cand even from the longest exe path */
    ssize_t len = readlink("/proc/self/exe", exe, sizeof exe - 1);
    char *slash = len > 0 ? (exe[len] = 0, strrchr(exe, '/')) : NULL;
    if (slash) {
        *slash = 0;
        snprintf(cand[n++], sizeof cand[0], "%s/../%s", exe, tree);
        snprintf(cand[n++], sizeof cand[0], "%s/../share/reclass/%s", exe, name);
    }
    snprintf(cand[n++], sizeof cand[0], "/usr/share/reclass/%s", name);
    for (int i = 0; i < n; i++) {
        snprintf(out, outlen, "%s", cand[i]);
        if (common_is_dir(out, outlen)) return 0;
    }
    size_t at = 0;
    out[0] = 0;
    for (int i = 0; i < n && at < outlen; i++)
        at += (size_t)snprintf(out + at, outlen - at, "%s%s", i ? ", " : "", cand[i]);
    return -1;
}
