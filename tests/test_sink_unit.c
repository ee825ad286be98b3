/* Sink pieces that need no server: the binary COPY / array encoder and the per-write job
 * tally (order, totals, tenants). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "sink/copybin.h"
#include "sink/copybuf.h"
#include "sink/tally.h"

static void expect_bytes(const sink_copybuf_t *b, const void *want, size_t n) {
    assert_int_equal(b->len, n);
    assert_memory_equal(b->data, want, n);
}

static void test_copybin_fields(void **state) {
    sink_copybuf_t b;
    sink_copybuf_init(&b);
    sink_copybin_header(&b);
    expect_bytes(&b, "PGCOPY\n\377\r\n\0\0\0\0\0\0\0\0\0", 19);
    sink_copybuf_reset(&b);
    sink_copybin_row(&b, 13);
    sink_copybin_int4(&b, -2);
    sink_copybin_int8(&b, 0x0102030405060708LL);
    sink_copybin_bool(&b, 7);
    sink_copybin_null(&b);
    sink_copybin_text(&b, "a\tb");
    sink_copybin_text(&b, NULL);
    sink_copybin_jsonb(&b, "[]");
    sink_copybin_float4(&b, 1.0f);
    static const unsigned char want[] = {
        0,    13,                                                   /* field count */
        0,    0,    0,    4,    0xff, 0xff, 0xff, 0xfe,             /* int4 -2 */
        0,    0,    0,    8,    1,    2,    3,    4,    5, 6, 7, 8, /* int8 */
        0,    0,    0,    1,    1,                                  /* bool true */
        0xff, 0xff, 0xff, 0xff,                                     /* NULL */
        0,    0,    0,    3,    'a',  '\t', 'b',                    /* text, unescaped */
        0xff, 0xff, 0xff, 0xff,                                     /* NULL text */
        0,    0,    0,    3,    1,    '[',  ']',                    /* jsonb: version 1 + text */
        0,    0,    0,    4,    0x3f, 0x80, 0,    0};               /* float4 1.0 */
    expect_bytes(&b, want, sizeof want);
    sink_copybuf_reset(&b);
    sink_copybin_trailer(&b);
    expect_bytes(&b, "\xff\xff", 2);
    sink_copybuf_free(&b);
}

static void test_copybin_time_and_arrays(void **state) {
    sink_copybuf_t b;
    sink_copybuf_init(&b);
    /* 2000-01-01T00:00:01.5Z: 1.5 s after the PostgreSQL epoch, in microseconds */
    sink_copybin_timestamptz_ms(&b, 946684801500LL);
    static const unsigned char ts[] = {0, 0, 0, 8, 0, 0, 0, 0, 0, 0x16, 0xe3, 0x60};
    expect_bytes(&b, ts, sizeof ts);
    /* Past PostgreSQL's range, overflowing or not: the first value outside it (the server
     * refuses it with 22008), never a wrapped-around date (INT64_MAX once became 1969) and
     * never +-infinity. Checked arithmetic: UBSan (tests/sanitize.sh) sees no overflow. */
    static const struct {
        int64_t ms, us;
    } out[] = {
        {INT64_MAX, 9223371331200000000LL},          /* END_TIMESTAMP */
        {9300000000000000LL, 9223371331200000000LL}, /* overflows the multiplication */
        {9224318016000000LL, 9223371331200000000LL}, /* the first millisecond past the end */
        {INT64_MIN, -211813488000000001LL},          /* MIN_TIMESTAMP - 1 */
        {-300000000000000LL, -211813488000000001LL}, /* before 4714 BC */
    };
    for (size_t i = 0; i < sizeof(out) / sizeof(out[0]); i++) {
        sink_copybuf_reset(&b);
        sink_copybin_timestamptz_ms(&b, out[i].ms);
        assert_int_equal(b.len, 12);
        int64_t got = 0;
        for (int k = 4; k < 12; k++)
            got = (int64_t)((uint64_t)got << 8 | (unsigned char)b.data[k]);
        assert_true(got == out[i].us);
    }
    /* the last millisecond PostgreSQL holds goes through as itself */
    sink_copybuf_reset(&b);
    sink_copybin_timestamptz_ms(&b, 9224318015999999LL);
    int64_t last = 0;
    for (int k = 4; k < 12; k++)
        last = (int64_t)((uint64_t)last << 8 | (unsigned char)b.data[k]);
    assert_true(last == (9224318015999999LL - 946684800000LL) * 1000);
    sink_copybuf_reset(&b);
    sink_copybin_array(&b, SINK_OID_INT4, 2, 0);
    sink_copybin_int4(&b, 1);
    sink_copybin_int4(&b, 2);
    static const unsigned char arr[] = {0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 23, 0, 0, 0, 2, 0, 0,
                                        0, 1, 0, 0, 0, 4, 0, 0, 0, 1, 0, 0,  0, 4, 0, 0, 0, 2};
    expect_bytes(&b, arr, sizeof arr);
    /* a second array, of int2 with a NULL, after it: both as binary parameters */
    size_t off[3] = {0, b.len, 0};
    sink_copybin_array(&b, SINK_OID_INT2, 2, 1);
    sink_copybin_int2(&b, -2);
    sink_copybin_null(&b);
    off[2] = b.len;
    static const unsigned char arr2[] = {0, 0,  0, 1, 0,    0,    0,    1,    0,    0,
                                         0, 21, 0, 0, 0,    2,    0,    0,    0,    1,
                                         0, 0,  0, 2, 0xff, 0xfe, 0xff, 0xff, 0xff, 0xff};
    assert_int_equal(b.len, sizeof arr + sizeof arr2);
    assert_memory_equal(b.data + sizeof arr, arr2, sizeof arr2);
    const char *vals[2];
    int lens[2], fmts[2];
    sink_copybin_params(&b, off, 2, vals, lens, fmts);
    assert_ptr_equal(vals[0], b.data);
    assert_ptr_equal(vals[1], b.data + sizeof arr);
    assert_int_equal(lens[0], sizeof arr);
    assert_int_equal(lens[1], sizeof arr2);
    assert_int_equal(fmts[0], 1);
    assert_int_equal(fmts[1], 1);
    sink_copybuf_free(&b);
}

static void test_copybuf_grows_and_reuses(void **state) {
    sink_copybuf_t b;
    sink_copybuf_init(&b);
    char big[1000];
    memset(big, 'x', sizeof big - 1);
    big[sizeof big - 1] = 0;
    for (int i = 0; i < 1000; i++)
        sink_copybin_text(&b, big);
    assert_int_equal(b.len, 1000 * (4 + 999));
    assert_int_equal(b.oom, 0);
    size_t cap = b.cap;
    sink_copybuf_reset(&b);
    sink_copybin_text(&b, big);
    assert_int_equal(b.cap, cap); /* reset keeps the memory */
    assert_memory_equal(b.data + 4, big, 999);
    sink_copybuf_free(&b);
}

static void test_tally(void **state) {
    sink_result_t rows[] = {
        {.job_id = "b", .ticket_id = "2", .tenant = NULL, .job_total = 5},
        {.job_id = "a", .ticket_id = "9", .tenant = "acme", .job_total = 3},
        {.job_id = "b", .ticket_id = "1", .tenant = "zeta", .job_total = 7},
        {.job_id = "a", .ticket_id = "10", .tenant = "other", .job_total = 2},
        {.job_id = "c", .ticket_id = "1", .tenant = NULL, .job_total = 0},
    };
    sink_tally_t t = {0};
    assert_int_equal(sink_tally_build(&t, rows, 5), 0);
    assert_int_equal(t.n_jobs, 3);
    assert_string_equal(t.jobs[0].job_id, "a");
    assert_int_equal(t.jobs[0].rows, 2);
    assert_int_equal(t.jobs[0].total, -1); /* its rows disagree: job_total_check refuses */
    assert_string_equal(t.jobs[1].job_id, "b");
    assert_int_equal(t.jobs[1].total, -1);
    assert_int_equal(t.jobs[2].total, 0);          /* one row: what it says */
    assert_string_equal(t.jobs[1].tenant, "zeta"); /* first non-NULL */
    assert_null(t.jobs[2].tenant);
    assert_int_equal(t.jobs[2].fresh, 0);
    /* rows ordered by (job_id, ticket_id), byte order */
    const char *want[][2] = {{"a", "10"}, {"a", "9"}, {"b", "1"}, {"b", "2"}, {"c", "1"}};
    for (int i = 0; i < 5; i++) {
        assert_string_equal(t.order[i]->job_id, want[i][0]);
        assert_string_equal(t.order[i]->ticket_id, want[i][1]);
    }
    assert_ptr_equal(sink_tally_find(&t, "b"), &t.jobs[1]);
    assert_null(sink_tally_find(&t, "bb"));
    assert_null(sink_tally_find(&t, ""));
    /* rebuilt for the next write, memory reused */
    assert_int_equal(sink_tally_build(&t, rows + 4, 1), 0);
    assert_int_equal(t.n_jobs, 1);
    assert_int_equal(sink_tally_build(&t, rows, 0), 0);
    assert_int_equal(t.n_jobs, 0);
    assert_null(sink_tally_find(&t, "a"));
    sink_tally_free(&t);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_copybin_fields),
        cmocka_unit_test(test_copybin_time_and_arrays),
        cmocka_unit_test(test_copybuf_grows_and_reuses),
        cmocka_unit_test(test_tally),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
