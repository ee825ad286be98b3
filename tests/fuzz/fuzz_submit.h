/* What `reclass submit` does with a file's records, Kafka aside, shared by the CSV and JSONL
 * targets: the checks of its counting pass, then the encoder, then the worker's decoder. A
 * ticket that submit sends but the worker refuses would go to the dead-letter topic, and its
 * job would never complete; so it must decode, with the same id and text. */
#ifndef RECLASS_TESTS_FUZZ_SUBMIT_H
#define RECLASS_TESTS_FUZZ_SUBMIT_H

#include <string.h>

#include "consumers/avro_codec.h"
#include "consumers/ticket.h"
#include "tests/fuzz/fuzz_util.h"
#include "worker/submit/input.h"

static consumers_codec_t *fuzz_submit_codec;

static void fuzz_submit_send(const worker_submit_rec_t *r) {
    if (!fuzz_submit_codec) {
        common_err_t e;
        if (consumers_codec_init(RECLASS_SOURCE_DIR "/consumers/schemas", &fuzz_submit_codec, &e) !=
            COMMON_OK) {
            fprintf(stderr, "fuzz: %s\n", e.message);
            abort();
        }
    }
    consumers_ticket_t t = {.job_id = "job-1",
                            .tenant = "tenant-1",
                            .ticket_id = (char *)r->id,
                            .text = (char *)r->text,
                            .text_len = r->text_len,
                            .job_total = 1};
    void *buf;
    size_t len;
    common_err_t e;
    int rc = consumers_codec_encode(fuzz_submit_codec, &t, 1, &buf, &len, &e);
    if (rc != 0) fprintf(stderr, "fuzz: submit cannot encode line %ld: %s\n", r->line, e.message);
    FUZZ_CHECK(rc == 0);
    consumers_ticket_t u;
    rc = consumers_codec_decode(fuzz_submit_codec, buf, len, &u, &e);
    if (rc != 0) fprintf(stderr, "fuzz: the worker refuses line %ld: %s\n", r->line, e.message);
    FUZZ_CHECK(rc == 0);
    FUZZ_CHECK(strcmp(u.ticket_id, r->id) == 0);
    FUZZ_CHECK(u.text_len == r->text_len && memcmp(u.text, r->text, r->text_len) == 0);
    consumers_ticket_free(&u);
    free(buf);
}

/* Reads the whole file as submit's counting pass does: empty texts skipped, a bad id or a
 * malformed record ends it. */
static void fuzz_submit_read_all(const char *path, const char *text_key, const char *id_key) {
    worker_submit_input_t *in;
    common_err_t e = {.message = ""};
    if (worker_submit_input_open(path, text_key, id_key, &in, &e) != COMMON_OK) {
        FUZZ_CHECK(in == NULL && e.code == COMMON_USAGE && e.message[0]);
        return;
    }
    worker_submit_rec_t r;
    common_status_t rc;
    long last_line = 0;
    while ((rc = worker_submit_input_next(in, &r, &e)) == COMMON_OK) {
        FUZZ_CHECK(r.text && r.text[r.text_len] == '\0' && r.id);
        FUZZ_CHECK(r.line > last_line);
        last_line = r.line;
        if (r.text_len == 0) continue;
        if ((rc = consumers_ticket_check_id("ticket_id", r.id, strlen(r.id), &e)) != COMMON_OK)
            break;
        fuzz_submit_send(&r);
    }
    FUZZ_CHECK(rc == COMMON_DONE || (rc == COMMON_USAGE && e.message[0]));
    worker_submit_input_free(in);
}

#endif
