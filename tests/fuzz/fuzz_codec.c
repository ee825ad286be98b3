/* Fuzz target: a Kafka message value through the ticket decoder (consumers_codec_decode),
 * with the shipped schemas. A decoded ticket must also survive a round trip through the
 * encoder: what the worker accepts, `reclass submit` must be able to write. */
#include <stdint.h>
#include <string.h>

#include "consumers/avro_codec.h"
#include "tests/fuzz/fuzz_util.h"

static consumers_codec_t *codec;

/* Texts around the decoder's 4 MiB limit, too long for the fuzzer to try: whatever the encoder
 * (`reclass submit`) accepts, the decoder (the worker) must accept too, or the ticket would go
 * to the dead-letter topic and its job never complete. */
static void check_long_texts(void) {
    static const size_t sizes[] = {(4u << 20) - 1, 4u << 20, (4u << 20) + 1, 5u << 20};
    for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
        char *text = malloc(sizes[i] + 1);
        FUZZ_CHECK(text != NULL);
        memset(text, 'a', sizes[i]);
        text[sizes[i]] = '\0';
        consumers_ticket_t t = {.job_id = "j",
                                .tenant = "t",
                                .ticket_id = "1",
                                .text = text,
                                .text_len = sizes[i],
                                .job_total = 1};
        void *buf;
        size_t len;
        common_err_t e;
        if (consumers_codec_encode(codec, &t, 1, &buf, &len, &e) == COMMON_OK) {
            consumers_ticket_t u;
            int rc = consumers_codec_decode(codec, buf, len, &u, &e);
            if (rc != 0) fprintf(stderr, "fuzz_codec: %zu-byte text: %s\n", sizes[i], e.message);
            FUZZ_CHECK(rc == 0 && u.text_len == sizes[i]);
            consumers_ticket_free(&u);
            free(buf);
        }
        free(text);
    }
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    common_err_t e;
    const char *dir = getenv("RECLASS_FUZZ_SCHEMAS");
    if (!dir) dir = RECLASS_SOURCE_DIR "/consumers/schemas";
    if (consumers_codec_init(dir, &codec, &e) != COMMON_OK) {
        fprintf(stderr, "fuzz_codec: %s\n", e.message);
        abort();
    }
    check_long_texts();
    return 0;
}

static int same_str(const char *a, const char *b) {
    return (a == NULL) == (b == NULL) && (!a || strcmp(a, b) == 0);
}

static void check_ticket(const consumers_ticket_t *t) {
    FUZZ_CHECK(t->job_id && t->job_id[0] && t->tenant && t->tenant[0]);
    FUZZ_CHECK(t->ticket_id && t->ticket_id[0]);
    FUZZ_CHECK(t->text && t->text[t->text_len] == '\0');
    FUZZ_CHECK(t->job_total >= 1);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (!codec) LLVMFuzzerInitialize(NULL, NULL);
    consumers_ticket_t t;
    common_err_t e = {.message = ""};
    common_status_t st = consumers_codec_decode(codec, data, size, &t, &e);
    if (st != COMMON_OK) {
        /* a refused record is the sender's (its dead letter's reason says why) */
        FUZZ_CHECK(st == COMMON_USAGE && e.code == st && e.message[0] != '\0');
        FUZZ_CHECK(!t.job_id && !t.tenant && !t.ticket_id && !t.text);
        return 0;
    }
    check_ticket(&t);
    for (int confluent = 0; confluent <= 1; confluent++) {
        void *buf;
        size_t len;
        int enc = consumers_codec_encode(codec, &t, confluent, &buf, &len, &e);
        /* plain records are written with the stated plain writer schema (the oldest, by
         * default: no priority), so a ticket with a priority has no plain encoding */
        if (enc != 0 && !confluent && t.has_priority) continue;
        FUZZ_CHECK(enc == 0);
        consumers_ticket_t u;
        int rc = consumers_codec_decode(codec, buf, len, &u, &e);
        if (rc != 0) fprintf(stderr, "fuzz_codec: re-encoded ticket refused: %s\n", e.message);
        FUZZ_CHECK(rc == 0);
        check_ticket(&u);
        FUZZ_CHECK(same_str(t.job_id, u.job_id) && same_str(t.tenant, u.tenant));
        FUZZ_CHECK(same_str(t.ticket_id, u.ticket_id));
        FUZZ_CHECK(t.text_len == u.text_len && memcmp(t.text, u.text, t.text_len) == 0);
        FUZZ_CHECK(t.job_total == u.job_total && t.enqueued_at_ms == u.enqueued_at_ms);
        FUZZ_CHECK(t.has_priority == u.has_priority && t.priority == u.priority);
        consumers_ticket_free(&u);
        free(buf);
    }
    consumers_ticket_free(&t);
    return 0;
}
