/* worker/text/input.c: plain lines and JSON lines from a stream. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "worker/text/input.h"

static FILE *mem(const char *s, size_t n) {
    FILE *f = fmemopen((void *)s, n, "r");
    assert_non_null(f);
    return f;
}

static void expect_text(worker_input_t *in, const char *want, size_t wlen, long line) {
    const char *t;
    size_t n;
    common_err_t err;
    assert_int_equal(worker_input_next(in, &t, &n, &err), 1);
    assert_int_equal(n, wlen);
    assert_memory_equal(t, want, wlen);
    assert_int_equal(t[n], 0);
    assert_int_equal(worker_input_line(in), line);
}

static void expect_eof(worker_input_t *in) {
    const char *t;
    size_t n;
    common_err_t err;
    assert_int_equal(worker_input_next(in, &t, &n, &err), 0);
}

static void test_plain(void **state) {
    static const char s[] = "first\r\nsecond\n\n  spaced  \nlast without newline";
    FILE *f = mem(s, sizeof(s) - 1);
    worker_input_t *in;
    common_err_t err;
    assert_int_equal(worker_input_open(f, 0, &in, &err), 0);
    assert_int_equal(worker_input_line(in), 0);
    expect_text(in, "first", 5, 1);
    expect_text(in, "second", 6, 2);
    expect_text(in, "", 0, 3); /* an empty line is an empty text in plain mode */
    expect_text(in, "  spaced  ", 10, 4);
    expect_text(in, "last without newline", 20, 5);
    expect_eof(in);
    expect_eof(in);
    worker_input_free(in);
    fclose(f);
}

static void test_plain_long_line(void **state) {
    size_t big = 3 << 20; /* longer than any fixed buffer would be */
    char *s = malloc(big + 8);
    memset(s, 'x', big);
    memcpy(s + big, "\nab\n", 4);
    FILE *f = mem(s, big + 4);
    worker_input_t *in;
    common_err_t err;
    assert_int_equal(worker_input_open(f, 0, &in, &err), 0);
    const char *t;
    size_t n;
    assert_int_equal(worker_input_next(in, &t, &n, &err), 1);
    assert_int_equal(n, big);
    assert_int_equal(t[big - 1], 'x');
    expect_text(in, "ab", 2, 2);
    expect_eof(in);
    worker_input_free(in);
    fclose(f);
    free(s);
}

static void test_jsonl(void **state) {
    static const char s[] = "{\"text\": \"hello \\\"world\\\"\", \"id\": 7}\n"
                            "\n"
                            "   \r\n"
                            "{\"label\": \"x\", \"text\": \"caf\\u00e9\\n2nd\"}\r\n"
                            "{\"text\": \"nul\\u0000inside\"}";
    FILE *f = mem(s, sizeof(s) - 1);
    worker_input_t *in;
    common_err_t err;
    assert_int_equal(worker_input_open(f, 1, &in, &err), 0);
    expect_text(in, "hello \"world\"", 13, 1);
    expect_text(in, "caf\xc3\xa9\n2nd", 9, 4); /* empty lines skipped, numbering kept */
    expect_text(in, "nul\0inside", 10, 5);
    expect_eof(in);
    worker_input_free(in);
    fclose(f);
}

static void expect_error(const char *s, const char *want_err) {
    FILE *f = mem(s, strlen(s));
    worker_input_t *in;
    common_err_t err;
    const char *t;
    size_t n;
    assert_int_equal(worker_input_open(f, 1, &in, &err), 0);
    int rc;
    while ((rc = worker_input_next(in, &t, &n, &err)) == 1) {
    }
    assert_int_equal(rc, -1);
    if (!strstr(err.message, want_err)) fail_msg("error '%s' lacks '%s'", err.message, want_err);
    worker_input_free(in);
    fclose(f);
}

static void test_jsonl_errors(void **state) {
    expect_error("{\"text\":\"a\"}\n{\"text\":\"b\"}\n{\"txt\":\"c\"}\n",
                 "line 3: not a JSON object with a string \"text\" field");
    expect_error("{\"text\":\"a\"}\n{\"text\": 5}\n", "line 2: not a JSON object");
    expect_error("[\"text\"]\n", "line 1: not a JSON object");
    expect_error("\"just a string\"\n", "line 1: not a JSON object");
    expect_error("\n{\"text\":\"a\"}\n{\"text\": \"unterminated}\n", "line 3: invalid JSON");
    expect_error("{\"text\":\"a\"} trailing\n", "line 1: invalid JSON");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_plain),
        cmocka_unit_test(test_plain_long_line),
        cmocka_unit_test(test_jsonl),
        cmocka_unit_test(test_jsonl_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
