/* Fuzz target: a FILE.jsonl as `reclass submit` reads it (worker_submit_input), with and
 * without an id key; and the same bytes as `reclass tokenize/classify --jsonl` and the plain
 * line mode read them from stdin (worker_input). */
#include <stdint.h>
#include <string.h>

#include "tests/fuzz/fuzz_util.h"
#include "worker/text/input.h"
#include "worker/text/submit_input.h"

static void submit_read_all(const char *path, const char *id_key) {
    worker_submit_input_t *in;
    char err[1024] = "";
    if (worker_submit_input_open(path, "text", id_key, &in, err, sizeof(err)) != 0) {
        FUZZ_CHECK(in == NULL && err[0]);
        return;
    }
    worker_submit_rec_t r;
    int rc;
    long last_line = 0;
    while ((rc = worker_submit_input_next(in, &r, err, sizeof(err))) == 1) {
        FUZZ_CHECK(r.text && r.text[r.text_len] == '\0');
        FUZZ_CHECK(r.id && strlen(r.id) < 1u << 20);
        FUZZ_CHECK(r.line > last_line);
        last_line = r.line;
    }
    FUZZ_CHECK(rc == 0 || (rc == 2 && err[0]));
    worker_submit_input_free(in);
}

static void stdin_read_all(const uint8_t *data, size_t size, int jsonl) {
    FILE *f = fmemopen((void *)data, size, "rb");
    if (!f) return;
    worker_input_t *in;
    char err[512] = "";
    FUZZ_CHECK(worker_input_open(f, jsonl, &in, err, sizeof(err)) == 0);
    const char *text;
    size_t len;
    int rc;
    while ((rc = worker_input_next(in, &text, &len, err, sizeof(err))) == 1) {
        FUZZ_CHECK(text[len] == '\0');
        FUZZ_CHECK(worker_input_line(in) >= 1);
    }
    FUZZ_CHECK(rc == 0 || (rc == -1 && err[0]));
    worker_input_free(in);
    fclose(f);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *path = fuzz_write_tmp("tickets.jsonl", data, size);
    submit_read_all(path, NULL);
    submit_read_all(path, "id");
    if (size > 0) { /* fmemopen refuses an empty buffer */
        stdin_read_all(data, size, 1);
        stdin_read_all(data, size, 0);
    }
    return 0;
}
