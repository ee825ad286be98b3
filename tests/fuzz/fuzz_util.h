/* Helpers shared by the fuzz targets (tests/fuzz/fuzz_*.c). */
#ifndef RECLASS_TESTS_FUZZ_UTIL_H
#define RECLASS_TESTS_FUZZ_UTIL_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* A broken promise of the code under test: abort, so that libFuzzer keeps the input and the
 * replay test fails. Not assert(): it must hold in every build type. */
#define FUZZ_CHECK(cond)                                                                           \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "%s:%d: fuzz check failed: %s\n", __FILE__, __LINE__, #cond);          \
            abort();                                                                               \
        }                                                                                          \
    } while (0)

/* The input as a file named name in a private temporary directory (made once per process,
 * removed at exit), for parsers that open a path. Returns the path, or NULL. */
static char fuzz_tmp_dir[4096];
static char fuzz_tmp_path[4096];

static void fuzz_tmp_cleanup(void) {
    if (fuzz_tmp_path[0]) unlink(fuzz_tmp_path);
    if (fuzz_tmp_dir[0]) rmdir(fuzz_tmp_dir);
}

static inline const char *fuzz_write_tmp(const char *name, const void *data, size_t size) {
    if (!fuzz_tmp_dir[0]) {
        const char *base = getenv("TMPDIR");
        snprintf(fuzz_tmp_dir, sizeof(fuzz_tmp_dir), "%s/reclass-fuzz-XXXXXX",
                 base && *base ? base : "/tmp");
        if (!mkdtemp(fuzz_tmp_dir)) {
            perror("mkdtemp");
            abort();
        }
        atexit(fuzz_tmp_cleanup);
    }
    if (fuzz_tmp_path[0]) unlink(fuzz_tmp_path);
    if (snprintf(fuzz_tmp_path, sizeof(fuzz_tmp_path), "%s/%s", fuzz_tmp_dir, name) >=
        (int)sizeof(fuzz_tmp_path)) {
        fprintf(stderr, "fuzz: temporary path too long\n");
        abort();
    }
    FILE *f = fopen(fuzz_tmp_path, "wb");
    if (!f || (size && fwrite(data, 1, size, f) != size) || fclose(f) != 0) {
        perror(fuzz_tmp_path);
        abort();
    }
    return fuzz_tmp_path;
}

#endif
