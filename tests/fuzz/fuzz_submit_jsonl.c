/* Fuzz target: a FILE.jsonl as `reclass submit` reads it (worker_submit_input), with and
 * without an id key; and the same bytes as `reclass tokenize/classify --jsonl` and the plain
 * line mode read them from stdin (worker_input). */
#include <stdint.h>
#include <string.h>

#include "tests/fuzz/fuzz_submit.h"
#include "tests/fuzz/fuzz_util.h"
#include "worker/text/input.h"

static void stdin_read_all(const uint8_t *data, size_t size, int jsonl) {
    FILE *f = fmemopen((void *)data, size, "rb");
    if (!f) return;
    worker_input_t *in;
    common_err_t err = {0};
    FUZZ_CHECK(worker_input_open(f, jsonl, &in, &err) == 0);
    const char *text;
    size_t len;
    int rc;
    while ((rc = worker_input_next(in, &text, &len, &err)) == 1) {
        FUZZ_CHECK(text[len] == '\0');
        FUZZ_CHECK(worker_input_line(in) >= 1);
    }
    FUZZ_CHECK(rc == 0 || (rc == -1 && err.message[0]));
    worker_input_free(in);
    fclose(f);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *path = fuzz_write_tmp("tickets.jsonl", data, size);
    fuzz_submit_read_all(path, "text", NULL);
    fuzz_submit_read_all(path, "text", "id");
    if (size > 0) { /* fmemopen refuses an empty buffer */
        stdin_read_all(data, size, 1);
        stdin_read_all(data, size, 0);
    }
    return 0;
}
