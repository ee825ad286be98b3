/* Ticket codec: round trips in both framings, schema evolution through avro-c's resolver,
 * validation, and a fuzz pass (100,000 random / truncated / mutated buffers must only ever
 * produce errors, never a crash; run it under valgrind or ASan to see memory errors too). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "common/file.h"
#include "consumers/avro_codec.h"

/* e's one line of text, as a dead letter's reclass.error header carries it */
static const char *line_of(const common_err_t *e) {
    static char line[COMMON_ERR_LINE_MAX];
    return common_err_line(e, line, sizeof(line));
}

#define SCHEMAS   RECLASS_SOURCE_DIR "/consumers/schemas"
#define EVOLUTION RECLASS_FIXTURES "/schemas_evolution"

/* A tiny Avro binary writer, so the tests can craft records the encoder refuses to make. */
typedef struct {
    uint8_t b[4096];
    size_t n;
} wbuf_t;

static void w_byte(wbuf_t *w, uint8_t v) {
    w->b[w->n++] = v;
}
static void w_long(wbuf_t *w, int64_t v) {
    uint64_t z = ((uint64_t)v << 1) ^ (uint64_t)(v >> 63);
    while (z & ~0x7fULL) {
        w_byte(w, (uint8_t)((z & 0x7f) | 0x80));
        z >>= 7;
    }
    w_byte(w, (uint8_t)z);
}
static void w_str(wbuf_t *w, const char *s) {
    size_t n = strlen(s);
    w_long(w, (int64_t)n);
    memcpy(w->b + w->n, s, n);
    w->n += n;
}
static void w_confluent(wbuf_t *w, uint32_t id) {
    w_byte(w, 0);
    for (int i = 3; i >= 0; i--)
        w_byte(w, (uint8_t)(id >> (8 * i)));
}
/* A record in ticket-v2 field order. priority < 0 means null. */
static void w_v2(wbuf_t *w, const char *job, const char *tenant, const char *tid, const char *text,
                 int64_t total, int64_t ts, int priority) {
    w_str(w, job);
    w_str(w, tenant);
    w_str(w, tid);
    w_str(w, text);
    w_long(w, total);
    w_long(w, ts);
    if (priority < 0) {
        w_long(w, 0);
    } else {
        w_long(w, 1);
        w_long(w, priority);
    }
}

static consumers_codec_t *open_codec(const char *dir) {
    consumers_codec_t *c = NULL;
    common_err_t e = {.message = ""};
    int rc = consumers_codec_init(dir, &c, &e);
    if (rc) fprintf(stderr, "codec_init(%s): %s\n", dir, line_of(&e));
    assert_int_equal(rc, 0);
    return c;
}

/* Sets the plain writer schema to file, asserting it is accepted. */
static void plain_schema(consumers_codec_t *c, const char *file) {
    common_err_t e = {.message = ""};
    int rc = consumers_codec_set_plain_schema(c, file, &e);
    if (rc) fprintf(stderr, "plain schema %s: %s\n", file, line_of(&e));
    assert_int_equal(rc, 0);
}

static void check_roundtrip(int confluent, int has_priority) {
    consumers_codec_t *c = open_codec(SCHEMAS);
    if (!confluent) plain_schema(c, SCHEMAS "/ticket-v2.avsc"); /* the one with priority */
    static const char text[] = "My card \"arrived\"\r\nbroken, café ☕ — please help";
    consumers_ticket_t t = {.job_id = "job-7",
                            .tenant = "acme",
                            .ticket_id = "T-0001",
                            .text = (char *)text,
                            .text_len = strlen(text),
                            .job_total = 1532,
                            .enqueued_at_ms = 1764412800123LL,
                            .priority = 5,
                            .has_priority = has_priority};
    void *buf;
    size_t len;
    common_err_t e = {.message = ""};
    assert_int_equal(consumers_codec_encode(c, &t, confluent, &buf, &len, &e), 0);
    const uint8_t *b = buf;
    if (confluent) {
        assert_true(len > 5);
        assert_int_equal(b[0], 0);
        assert_int_equal(b[1] | b[2] | b[3], 0);
        assert_int_equal(b[4], 2); /* ticket-v2 is the current schema */
    } else {
        assert_int_not_equal(b[0], 0);
    }
    consumers_ticket_t d;
    int rc = consumers_codec_decode(c, buf, len, &d, &e);
    if (rc) fprintf(stderr, "decode: %s\n", line_of(&e));
    assert_int_equal(rc, 0);
    assert_string_equal(d.job_id, "job-7");
    assert_string_equal(d.tenant, "acme");
    assert_string_equal(d.ticket_id, "T-0001");
    assert_int_equal(d.text_len, strlen(text));
    assert_memory_equal(d.text, text, d.text_len + 1);
    assert_int_equal(d.job_total, 1532);
    assert_true(d.enqueued_at_ms == 1764412800123LL);
    assert_int_equal(d.has_priority, has_priority);
    if (has_priority) assert_int_equal(d.priority, 5);
    assert_int_equal(d.partition, -1);
    assert_true(d.offset == -1);
    consumers_ticket_free(&d);
    free(buf);
    consumers_codec_free(c);
}

static void test_roundtrip_confluent(void **state) {
    check_roundtrip(1, 1);
    check_roundtrip(1, 0);
}
static void test_roundtrip_plain(void **state) {
    check_roundtrip(0, 1);
    check_roundtrip(0, 0);
}

/* Plain records have one stated writer schema: by default the oldest the reader reads (v1),
 * so that adding a schema never changes how they decode; v1 has no priority to encode. */
static void test_plain_default_oldest(void **state) {
    consumers_codec_t *c = open_codec(SCHEMAS);
    assert_string_equal(consumers_codec_plain_schema(c), "ticket-v1.avsc");
    consumers_ticket_t t = {.job_id = "j",
                            .tenant = "t",
                            .ticket_id = "1",
                            .text = "x",
                            .text_len = 1,
                            .job_total = 1,
                            .enqueued_at_ms = 5};
    void *buf;
    size_t len;
    common_err_t e = {.message = ""};
    assert_int_equal(consumers_codec_encode(c, &t, 0, &buf, &len, &e), 0);
    wbuf_t v1 = {.n = 0}; /* the same record written by hand in v1's layout */
    w_str(&v1, "j");
    w_str(&v1, "t");
    w_str(&v1, "1");
    w_str(&v1, "x");
    w_long(&v1, 1);
    w_long(&v1, 5);
    assert_int_equal(len, v1.n);
    assert_memory_equal(buf, v1.b, len);
    free(buf);
    consumers_ticket_t d;
    assert_int_equal(consumers_codec_decode(c, v1.b, v1.n, &d, &e), 0);
    assert_int_equal(d.has_priority, 0);
    consumers_ticket_free(&d);
    t.has_priority = 1;
    assert_int_equal(consumers_codec_encode(c, &t, 0, &buf, &len, &e), COMMON_USAGE);
    assert_non_null(strstr(line_of(&e), "no priority"));
    /* a file the reader cannot read is refused */
    assert_int_equal(consumers_codec_set_plain_schema(c, SCHEMAS "/missing.avsc", &e),
                     COMMON_USAGE);
    consumers_codec_free(c);
}

/* Plain bytes made by hand (not by our encoder) decode the same: the format is real Avro. */
static void test_handmade_v2(void **state) {
    consumers_codec_t *c = open_codec(SCHEMAS);
    wbuf_t w = {.n = 0};
    w_confluent(&w, 2);
    w_v2(&w, "j", "t", "42", "hello", 3, 5, 9);
    consumers_ticket_t d;
    common_err_t e = {.message = ""};
    assert_int_equal(consumers_codec_decode(c, w.b, w.n, &d, &e), 0);
    assert_string_equal(d.text, "hello");
    assert_true(d.enqueued_at_ms == 5);
    assert_int_equal(d.priority, 9);
    consumers_ticket_free(&d);
    consumers_codec_free(c);
}

/* A record written with ticket-v1 (no priority) reads into the v2 reader: priority null. */
static void test_v1_writer(void **state) {
    consumers_codec_t *c = open_codec(SCHEMAS);
    wbuf_t w = {.n = 0};
    w_confluent(&w, 1);
    w_str(&w, "job-old");
    w_str(&w, "globex");
    w_str(&w, "77");
    w_str(&w, "old ticket");
    w_long(&w, 10);
    w_long(&w, 1600000000000LL);
    consumers_ticket_t d;
    common_err_t e = {.message = ""};
    int rc = consumers_codec_decode(c, w.b, w.n, &d, &e);
    if (rc) fprintf(stderr, "decode: %s\n", line_of(&e));
    assert_int_equal(rc, 0);
    assert_string_equal(d.job_id, "job-old");
    assert_string_equal(d.tenant, "globex");
    assert_string_equal(d.ticket_id, "77");
    assert_string_equal(d.text, "old ticket");
    assert_int_equal(d.job_total, 10);
    assert_true(d.enqueued_at_ms == 1600000000000LL);
    assert_int_equal(d.has_priority, 0);
    consumers_ticket_free(&d);
    /* The same bytes framed as v2 are short of the priority union: an error. */
    w.b[4] = 2;
    assert_int_equal(consumers_codec_decode(c, w.b, w.n, &d, &e), COMMON_USAGE);
    assert_null(d.job_id);
    consumers_codec_free(c);
}

/* With a Schema Registry the ids are the registry's: a local file no longer answers for id 1;
 * a schema added at run time (ticket-v1's text under 100002) decodes into the v2 reader; the
 * encoder frames with the registry's id; the cache keeps 256 and drops the least recent. */
static void test_registry_schemas(void **state) {
    consumers_codec_t *c = open_codec(SCHEMAS);
    size_t len;
    common_err_t e;
    char *v1 = common_file_read(SCHEMAS "/ticket-v1.avsc", 1 << 20, &len, &e);
    assert_non_null(v1);
    wbuf_t w = {.n = 0};
    w_confluent(&w, 1);
    w_str(&w, "job-r");
    w_str(&w, "acme");
    w_str(&w, "1");
    w_str(&w, "text");
    w_long(&w, 2);
    w_long(&w, 1600000000000LL);
    consumers_ticket_t d;
    assert_int_equal(consumers_codec_decode(c, w.b, w.n, &d, &e), 0);
    consumers_ticket_free(&d);
    consumers_codec_registry_ids(c);
    assert_int_equal(consumers_codec_knows(c, 1), 0);
    assert_int_equal(consumers_codec_decode(c, w.b, w.n, &d, &e), COMMON_USAGE);
    assert_non_null(
        strstr(line_of(&e), "unknown schema id 1 (the schema registry does not know it)"));
    assert_int_equal(consumers_codec_add_schema(c, 100002, v1, &e), 0);
    w.b[1] = 0, w.b[2] = 0x01, w.b[3] = 0x86, w.b[4] = 0xa2; /* 100002 */
    int32_t id = 0;
    assert_int_equal(consumers_codec_schema_id(w.b, w.n, &id), 1);
    assert_int_equal(id, 100002);
    assert_int_equal(consumers_codec_decode(c, w.b, w.n, &d, &e), 0);
    assert_string_equal(d.job_id, "job-r");
    assert_int_equal(d.has_priority, 0);
    consumers_ticket_free(&d);
    assert_int_equal(consumers_codec_add_schema(c, 7, "{not json", &e), COMMON_USAGE);
    /* fill the cache: 100002 was used last before the others, so it goes first */
    for (int i = 0; i < 256; i++)
        assert_int_equal(consumers_codec_add_schema(c, 200000 + i, v1, &e), 0);
    assert_int_equal(consumers_codec_knows(c, 100002), 0);
    assert_int_equal(consumers_codec_knows(c, 200000), 1);
    assert_int_equal(consumers_codec_knows(c, 200255), 1);
    /* the encoder frames with the registry's id */
    consumers_codec_set_encode_id(c, 100001);
    consumers_ticket_t t = {
        .job_id = "j", .tenant = "t", .ticket_id = "1", .text = "x", .text_len = 1, .job_total = 1};
    void *buf;
    assert_int_equal(consumers_codec_encode(c, &t, 1, &buf, &len, &e), 0);
    assert_int_equal(consumers_codec_schema_id(buf, len, &id), 1);
    assert_int_equal(id, 100001);
    free(buf);
    char *txt = consumers_codec_reader_text(c);
    assert_non_null(strstr(txt, "\"priority\""));
    free(txt);
    free(v1);
    consumers_codec_free(c);
}

/* Reordered fields and a writer-only field resolve; a writer lacking a required field is
 * reported for its own messages without breaking the others. */
static void test_evolution(void **state) {
    consumers_codec_t *c = open_codec(EVOLUTION);
    wbuf_t w = {.n = 0};
    w_confluent(&w, 1);
    w_str(&w, "T-9");     /* ticket_id */
    w_str(&w, "email");   /* source: only in the writer */
    w_str(&w, "J");       /* job_id */
    w_str(&w, "txt");     /* text */
    w_str(&w, "tenantX"); /* tenant */
    w_long(&w, 123);      /* enqueued_at */
    w_long(&w, 4);        /* job_total */
    consumers_ticket_t d;
    common_err_t e = {.message = ""};
    int rc = consumers_codec_decode(c, w.b, w.n, &d, &e);
    if (rc) fprintf(stderr, "decode: %s\n", line_of(&e));
    assert_int_equal(rc, 0);
    assert_string_equal(d.ticket_id, "T-9");
    assert_string_equal(d.job_id, "J");
    assert_string_equal(d.tenant, "tenantX");
    assert_string_equal(d.text, "txt");
    assert_int_equal(d.job_total, 4);
    assert_true(d.enqueued_at_ms == 123);
    assert_int_equal(d.has_priority, 0);
    consumers_ticket_free(&d);

    wbuf_t b = {.n = 0};
    w_confluent(&b, 2);
    w_str(&b, "J");
    w_str(&b, "T");
    w_str(&b, "x");
    w_long(&b, 1);
    w_long(&b, 1);
    assert_int_equal(consumers_codec_decode(c, b.b, b.n, &d, &e), COMMON_USAGE);
    assert_non_null(strstr(line_of(&e), "tenant"));

    /* Plain Avro reads with the oldest schema (v1 here, not the current v9) unless told */
    wbuf_t p = {.n = 0};
    w_v2(&p, "J", "T", "1", "x", 1, 0, -1);
    assert_int_equal(consumers_codec_decode(c, p.b, p.n, &d, &e), COMMON_USAGE);
    plain_schema(c, EVOLUTION "/ticket-v9.avsc");
    assert_int_equal(consumers_codec_decode(c, p.b, p.n, &d, &e), 0);
    consumers_ticket_free(&d);
    consumers_codec_free(c);
}

static void expect_error(consumers_codec_t *c, const wbuf_t *w, const char *needle) {
    consumers_ticket_t d;
    common_err_t e = {.message = ""};
    assert_int_equal(consumers_codec_decode(c, w->b, w->n, &d, &e), COMMON_USAGE);
    if (!strstr(line_of(&e), needle))
        fprintf(stderr, "error '%s' lacks '%s'\n", line_of(&e), needle);
    assert_non_null(strstr(line_of(&e), needle));
    assert_null(d.job_id);
    assert_null(d.text);
}

static void test_errors(void **state) {
    consumers_codec_t *c = open_codec(SCHEMAS);
    plain_schema(c, SCHEMAS "/ticket-v2.avsc"); /* the plain records below are v2's */
    wbuf_t w = {.n = 0};
    w_confluent(&w, 42);
    w_v2(&w, "j", "t", "1", "x", 1, 0, -1);
    expect_error(c, &w, "unknown schema id 42");

    w.n = 0;
    w_confluent(&w, 2);
    w_v2(&w, "j", "t", "1", "x", 0, 0, -1);
    expect_error(c, &w, "job_total");

    w.n = 0;
    w_confluent(&w, 2);
    w_v2(&w, "j", "", "1", "x", 3, 0, -1);
    expect_error(c, &w, "tenant is empty");

    /* enqueued_at must fit PostgreSQL's timestamptz (9.3e15 ms once crash-looped the worker;
     * INT64_MAX must not wrap to 1969) and not be negative */
    const int64_t bad_enq[] = {-1, INT64_MIN, CONSUMERS_TICKET_MAX_ENQUEUED_MS + 1,
                               9300000000000000LL, INT64_MAX};
    for (size_t i = 0; i < sizeof(bad_enq) / sizeof(bad_enq[0]); i++) {
        w.n = 0;
        w_confluent(&w, 2);
        w_v2(&w, "j", "t", "1", "x", 3, bad_enq[i], -1);
        expect_error(c, &w, "field enqueued_at is");
    }
    w.n = 0;
    w_confluent(&w, 2);
    w_v2(&w, "j", "t", "1", "x", 3, CONSUMERS_TICKET_MAX_ENQUEUED_MS, -1);
    consumers_ticket_t last;
    common_err_t e2;
    assert_int_equal(consumers_codec_decode(c, w.b, w.n, &last, &e2), 0);
    assert_true(last.enqueued_at_ms == CONSUMERS_TICKET_MAX_ENQUEUED_MS);
    consumers_ticket_free(&last);

    w.n = 0;
    w_v2(&w, "j", "t", "", "x", 3, 0, -1);
    expect_error(c, &w, "ticket_id is empty");

    w.n = 0;
    w_confluent(&w, 2);
    w_v2(&w, "j", "t", "1", "x", 3, 0, -1);
    w_byte(&w, 7);
    expect_error(c, &w, "trailing");

    w.n = 0;
    w_confluent(&w, 2);
    w_str(&w, "j");
    w_long(&w, -3); /* negative string length */
    expect_error(c, &w, "length");

    w.n = 0;
    w_confluent(&w, 2);
    w_str(&w, "j");
    w_long(&w, 1LL << 40); /* length far past the buffer */
    expect_error(c, &w, "past the end");

    w.n = 0;
    w_confluent(&w, 2);
    w_v2(&w, "j", "t", "1", "x", 3, 0, 5);
    w.b[w.n - 2] = 4; /* union branch 2 of ["null","int"] */
    expect_error(c, &w, "union");

    w.n = 0;
    w_byte(&w, 0);
    w_byte(&w, 0);
    expect_error(c, &w, "Confluent header truncated");

    consumers_ticket_t d;
    common_err_t e = {.message = ""};
    assert_int_equal(consumers_codec_decode(c, "", 0, &d, &e), COMMON_USAGE);

    char big[300];
    memset(big, 'a', sizeof(big) - 1);
    big[sizeof(big) - 1] = '\0';
    w.n = 0;
    w_v2(&w, big, "t", "1", "x", 3, 0, -1);
    expect_error(c, &w, "limit");

    /* Identifiers are keys in PostgreSQL text columns: anything but strict UTF-8 would stop
     * the whole batch's COPY, so the record must be a dead letter naming the field. */
    static const struct {
        const char *job, *tenant, *tid, *needle;
    } bad_ids[] = {
        /* the whole reclass.error header: message (the bytes); what identifiers must be */
        {"j", "ac\xc3\x28me", "1",
         "field tenant: invalid UTF-8 at byte 2 (0xc3 0x28); identifiers must be UTF-8 text"},
        {"\xff", "t", "1", "job_id: invalid UTF-8 at byte 0"},
        {"j", "t", "x\xed\xa0\x80", "ticket_id: invalid UTF-8 at byte 1"}, /* surrogate */
        {"j", "t", "\xc0\xaf", "ticket_id: invalid UTF-8"},                /* overlong '/' */
        {"j", "t", "\xf4\x90\x80\x80", "ticket_id: invalid UTF-8"},        /* > U+10FFFF */
        {"j", "t\xe2\x82", "1", "tenant: invalid UTF-8"},                  /* cut short */
        {"j", "caf\xc3\xa9", "\xf0\x9f\x8e\xab", NULL},                    /* valid */
    };
    for (size_t i = 0; i < sizeof(bad_ids) / sizeof(bad_ids[0]); i++) {
        w.n = 0;
        w_confluent(&w, 2);
        w_v2(&w, bad_ids[i].job, bad_ids[i].tenant, bad_ids[i].tid, "x", 3, 0, -1);
        if (bad_ids[i].needle) {
            expect_error(c, &w, bad_ids[i].needle);
        } else {
            consumers_ticket_t ok;
            assert_int_equal(consumers_codec_decode(c, w.b, w.n, &ok, &e), 0);
            consumers_ticket_free(&ok);
        }
    }
    /* a NUL inside an identifier (avro strings carry their length) */
    w.n = 0;
    w_confluent(&w, 2);
    w_str(&w, "j");
    w_long(&w, 3);
    memcpy(w.b + w.n, "a\0b", 3);
    w.n += 3;
    w_str(&w, "1");
    w_str(&w, "x");
    w_long(&w, 3);
    w_long(&w, 0);
    w_long(&w, 0);
    expect_error(c, &w, "tenant contains a NUL byte");
    /* the text body may be anything: the tokenizer replaces invalid sequences */
    w.n = 0;
    w_confluent(&w, 2);
    w_v2(&w, "j", "t", "1", "bad \xff\xfe text", 3, 0, -1);
    consumers_ticket_t okt;
    assert_int_equal(consumers_codec_decode(c, w.b, w.n, &okt, &e), 0);
    consumers_ticket_free(&okt);

    consumers_ticket_t bad_utf8 = {
        .job_id = "j", .tenant = "ac\xc3\x28me", .ticket_id = "1", .job_total = 1};
    void *buf0;
    size_t len0;
    assert_int_equal(consumers_codec_encode(c, &bad_utf8, 1, &buf0, &len0, &e), COMMON_USAGE);
    assert_non_null(strstr(line_of(&e), "tenant"));

    consumers_ticket_t bad = {.job_id = "", .tenant = "t", .ticket_id = "1", .job_total = 1};
    void *buf;
    size_t len;
    assert_int_equal(consumers_codec_encode(c, &bad, 1, &buf, &len, &e), COMMON_USAGE);
    consumers_codec_free(c);

    consumers_codec_t *none = NULL;
    assert_int_equal(consumers_codec_init("/nonexistent-dir", &none, &e), COMMON_USAGE);
    assert_null(none);
    assert_int_equal(consumers_codec_init(RECLASS_FIXTURES, &none, &e), COMMON_USAGE);
    assert_non_null(strstr(line_of(&e), "no ticket-v"));
}

static uint64_t rng = 0x9e3779b97f4a7c15ULL;
static uint32_t rnd(void) {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (uint32_t)(rng >> 11);
}

/* 100,000 hostile buffers: every prefix of valid messages, byte flips, random bytes with and
 * without a valid header. Each must decode or fail cleanly; a decoded one must validate. */
static void test_fuzz(void **state) {
    consumers_codec_t *c = open_codec(SCHEMAS);
    wbuf_t seeds[3] = {{.n = 0}, {.n = 0}, {.n = 0}};
    w_confluent(&seeds[0], 2);
    w_v2(&seeds[0], "job", "tenant", "id-1", "some text to classify", 9, 1700000000000LL, 3);
    w_confluent(&seeds[1], 1);
    w_str(&seeds[1], "j");
    w_str(&seeds[1], "t");
    w_str(&seeds[1], "i");
    w_str(&seeds[1], "text");
    w_long(&seeds[1], 1);
    w_long(&seeds[1], 2);
    w_v2(&seeds[2], "job", "tenant", "id-1", "plain", 9, 1, -1);

    uint8_t buf[512];
    long ok = 0, failed = 0;
    for (int iter = 0; iter < 100000; iter++) {
        size_t len;
        const wbuf_t *s = &seeds[iter % 3];
        switch (iter % 4) {
        case 0: /* truncation */
            len = rnd() % s->n;
            memcpy(buf, s->b, len);
            break;
        case 1: /* 1-3 byte mutations */
            len = s->n;
            memcpy(buf, s->b, len);
            for (int k = 1 + rnd() % 3; k > 0; k--)
                buf[rnd() % len] = (uint8_t)rnd();
            break;
        case 2: /* random body behind a valid header */
            len = 5 + rnd() % 200;
            for (size_t i = 0; i < len; i++)
                buf[i] = (uint8_t)rnd();
            memcpy(buf, s->b, 5);
            buf[0] = 0;
            buf[4] = 1 + rnd() % 2;
            break;
        default: /* anything */
            len = rnd() % sizeof(buf);
            for (size_t i = 0; i < len; i++)
                buf[i] = (uint8_t)rnd();
        }
        /* Exact-size heap copy so ASan/valgrind catch any read past the end. */
        uint8_t *heap = malloc(len ? len : 1);
        memcpy(heap, buf, len);
        consumers_ticket_t d;
        common_err_t e = {.message = ""};
        if (consumers_codec_decode(c, heap, len, &d, &e) == 0) {
            assert_true(d.job_id[0] && d.tenant[0] && d.ticket_id[0]);
            assert_true(d.job_total >= 1);
            assert_true(d.text[d.text_len] == '\0');
            consumers_ticket_free(&d);
            ok++;
        } else {
            assert_true(e.code == COMMON_USAGE && e.message[0] != '\0');
            assert_null(d.job_id);
            failed++;
        }
        free(heap);
    }
    printf("fuzz: %ld decoded, %ld rejected\n", ok, failed);
    assert_int_equal(ok + failed, 100000);
    assert_true(failed > 50000);
    consumers_codec_free(c);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_roundtrip_confluent),
        cmocka_unit_test(test_roundtrip_plain),
        cmocka_unit_test(test_plain_default_oldest),
        cmocka_unit_test(test_handmade_v2),
        cmocka_unit_test(test_v1_writer),
        cmocka_unit_test(test_evolution),
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_registry_schemas),
        cmocka_unit_test(test_fuzz),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
