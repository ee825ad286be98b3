/* Runs a fuzz target's LLVMFuzzerTestOneInput on every file of the directories (or files)
 * named on the command line, so that the seed corpus and the crashers kept as regressions
 * run as ordinary tests in any build, with or without clang and libFuzzer. A crash or an
 * assertion aborts the process with the file's name already printed. */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/file.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv) __attribute__((weak));

static int replay_file(const char *path) {
    common_err_t err;
    size_t n;
    char *buf = common_file_read(path, 0, &n, &err);
    if (!buf) {
        fprintf(stderr, "replay: %s\n", err.message);
        return -1;
    }
    /* An exact-size copy, so that ASan sees a read past the input's end as libFuzzer would. */
    uint8_t *exact = malloc(n ? n : 1);
    if (!exact) {
        free(buf);
        return -1;
    }
    memcpy(exact, buf, n);
    free(buf);
    fprintf(stderr, "replay: %s (%zu bytes)\n", path, n);
    LLVMFuzzerTestOneInput(exact, n);
    free(exact);
    return 0;
}

static int cmp_name(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Files of dir in name order (stable output); a missing directory counts as empty, since
 * a target may have no regressions yet. */
static int replay_dir(const char *dir, int *count) {
    DIR *d = opendir(dir);
    if (!d) return 0;
    char **names = NULL;
    size_t n = 0, cap = 0;
    int rc = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.') continue; /* ., .., and .gitkeep-style placeholders */
        if (n == cap) {
            cap = cap ? 2 * cap : 64;
            char **grown = realloc(names, cap * sizeof(*names));
            if (!grown) {
                rc = -1;
                break;
            }
            names = grown;
        }
        if (!(names[n] = strdup(e->d_name))) {
            rc = -1;
            break;
        }
        n++;
    }
    closedir(d);
    if (names) qsort(names, n, sizeof(*names), cmp_name);
    for (size_t i = 0; i < n; i++) {
        char path[4096];
        snprintf(path, sizeof(path), "%s/%s", dir, names[i]);
        struct stat st;
        if (rc == 0 && stat(path, &st) == 0 && S_ISREG(st.st_mode)) {
            if (replay_file(path) != 0) rc = -1;
            ++*count;
        }
        free(names[i]);
    }
    free(names);
    return rc;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s DIR|FILE...\n", argv[0]);
        return 2;
    }
    if (LLVMFuzzerInitialize) LLVMFuzzerInitialize(&argc, &argv);
    int count = 0, rc = 0;
    for (int i = 1; i < argc; i++) {
        struct stat st;
        if (stat(argv[i], &st) == 0 && S_ISREG(st.st_mode)) {
            if (replay_file(argv[i]) != 0) rc = 1;
            count++;
        } else if (replay_dir(argv[i], &count) != 0) {
            rc = 1;
        }
    }
    printf("replayed %d inputs\n", count);
    if (count == 0) {
        fprintf(stderr, "replay: no inputs found\n");
        return 1;
    }
    return rc;
}
