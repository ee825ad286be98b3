/* common/status.h and common/err.h: every status's exit code (the one mapping main() uses),
 * which ones are retriable, how an error object is filled and printed, and how the one file
 * reader fills it. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "common/err.h"
#include "common/file.h"
#include "common/status.h"

static void test_exit_of_every_status(void **state) {
    (void)state;
    static const struct {
        common_status_t st;
        int exit, retriable;
    } want[] = {
        {COMMON_OK, 0, 0},    {COMMON_FATAL, 1, 0},   {COMMON_USAGE, 2, 0},
        {COMMON_FOUND, 3, 0}, {COMMON_RETRY, 1, 1},   {COMMON_BUG, 1, 0},
        {COMMON_DONE, 0, 0},  {COMMON_MISSING, 1, 0}, {COMMON_DATA, 1, 0},
    };
    for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
        assert_int_equal(common_status_exit(want[i].st), want[i].exit);
        assert_int_equal(common_status_retriable(want[i].st), want[i].retriable);
        assert_string_not_equal(common_status_name(want[i].st), "unknown status");
    }
    /* the enum's last value: a code added later must be added to the table above */
    assert_int_equal((int)COMMON_DATA, (int)(sizeof(want) / sizeof(want[0])) - 1);
    assert_int_equal(common_status_exit((common_status_t)99), 1);
}

static void test_err_set_and_print(void **state) {
    (void)state;
    common_err_t e;
    memset(&e, 'x', sizeof(e));
    assert_int_equal(common_err_set(&e, COMMON_RETRY, "schema registry %s: HTTP %d", "h", 503),
                     COMMON_RETRY);
    assert_string_equal(e.message, "schema registry h: HTTP 503");
    assert_string_equal(e.detail, "");
    assert_string_equal(e.hint, "");
    assert_true(common_err_retriable(&e));
    assert_int_equal(common_err_set(NULL, COMMON_FATAL, "ignored"), COMMON_FATAL);

    char buf[512] = "";
    FILE *f = fmemopen(buf, sizeof(buf), "w");
    assert_non_null(f);
    common_log_prefix("reclass submit"); /* the CLI's, set once per command */
    common_err_print(f, &e);
    common_err_detail(&e, "40403");
    common_err_hint(&e, "nothing was sent");
    common_err_print(f, &e);
    common_log_prefix(NULL);
    common_err_print(f, &e);
    fclose(f);
    assert_string_equal(buf, "reclass submit: schema registry h: HTTP 503\n"
                             "reclass submit: schema registry h: HTTP 503 (40403); nothing was "
                             "sent\n"
                             "schema registry h: HTTP 503 (40403); nothing was sent\n");
    assert_false(common_err_retriable(NULL));
}

/* The one text of an error object: the parts that are set, in print's order; cut to fit. */
static void test_err_line(void **state) {
    (void)state;
    common_err_t e;
    char line[COMMON_ERR_LINE_MAX];
    common_err_set(&e, COMMON_FATAL, "copy results: boom (SQLSTATE 22P02)");
    assert_string_equal(common_err_line(&e, line, sizeof line),
                        "copy results: boom (SQLSTATE 22P02)");
    common_err_hint(&e, "run 'reclass migrate'");
    assert_string_equal(common_err_line(&e, line, sizeof line),
                        "copy results: boom (SQLSTATE 22P02); run 'reclass migrate'");
    common_err_detail(&e, "row 7");
    assert_ptr_equal(common_err_line(&e, line, sizeof line), line);
    assert_string_equal(line, "copy results: boom (SQLSTATE 22P02) (row 7); run 'reclass migrate'");
    e.hint[0] = '\0';
    assert_string_equal(common_err_line(&e, line, sizeof line),
                        "copy results: boom (SQLSTATE 22P02) (row 7)");
    char small[8];
    assert_string_equal(common_err_line(&e, small, sizeof small), "copy re");
    /* every field full: the whole line fits */
    memset(e.message, 'm', sizeof e.message - 1), e.message[sizeof e.message - 1] = '\0';
    memset(e.detail, 'd', sizeof e.detail - 1), e.detail[sizeof e.detail - 1] = '\0';
    memset(e.hint, 'h', sizeof e.hint - 1), e.hint[sizeof e.hint - 1] = '\0';
    common_err_line(&e, line, sizeof line);
    assert_int_equal(strlen(line), 3 * (sizeof e.message - 1) + 5);
    assert_string_equal(line + strlen(line) - 3, "hhh");
    /* print writes the same line */
    char buf[COMMON_ERR_LINE_MAX + 1] = "";
    FILE *f = fmemopen(buf, sizeof(buf), "w");
    assert_non_null(f);
    common_err_print(f, &e);
    fclose(f);
    assert_int_equal(strncmp(buf, line, strlen(line)), 0);
    assert_string_equal(buf + strlen(line), "\n");
}

/* The one file reader fills the error object: a path to fix is COMMON_USAGE, named. */
static void test_file_read_errors(void **state) {
    (void)state;
    common_err_t e;
    size_t len = 0;
    assert_null(common_file_read("/nonexistent/reclass.txt", 0, &len, &e));
    assert_int_equal(e.code, COMMON_USAGE);
    assert_non_null(strstr(e.message, "cannot open /nonexistent/reclass.txt"));
    char path[] = "/tmp/reclass-file-XXXXXX";
    const int fd = mkstemp(path);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, "0123456789", 10), 10);
    close(fd);
    assert_null(common_file_read(path, 4, &len, &e));
    assert_int_equal(e.code, COMMON_USAGE);
    assert_non_null(strstr(e.message, "larger than 4 bytes"));
    char *txt = common_file_read(path, 10, &len, &e);
    assert_non_null(txt);
    assert_int_equal(len, 10);
    assert_string_equal(txt, "0123456789");
    free(txt);
    unlink(path);
}

static void test_logf_quiet_without_file(void **state) {
    (void)state;
    common_logf(NULL, "never %s\n", "printed"); /* no FILE: nothing, no crash */
    char buf[64] = "";
    FILE *f = fmemopen(buf, sizeof(buf), "w");
    assert_non_null(f);
    common_logf(f, "%d\n", 7);
    common_log_prefix("reclass run"); /* the CLI's: each line starts with it */
    common_logf(f, "%d\n", 8);
    common_log_prefix(NULL);
    common_logf(f, "%d\n", 9);
    fclose(f);
    assert_string_equal(buf, "7\nreclass run: 8\n9\n");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_exit_of_every_status),
        cmocka_unit_test(test_err_set_and_print),
        cmocka_unit_test(test_err_line),
        cmocka_unit_test(test_file_read_errors),
        cmocka_unit_test(test_logf_quiet_without_file),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
