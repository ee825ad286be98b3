/* reclass submit's file readers (worker/submit/input.c, count.c) answer the one status enum:
 * COMMON_OK a record, COMMON_DONE the end, COMMON_USAGE a file to fix, with the message
 * submit prints (common_err_t). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "worker/submit/input.h"

static char dir[64]; /* the temporary directory of the files below */
static const char *const names[] = {"a.csv", "b.csv", "c.jsonl", "d.jsonl", "e.jsonl"};

/* A file of text under dir, named name; its path in path (n bytes). */
static void write_file(char *path, size_t n, const char *name, const char *text) {
    if (!dir[0]) {
        snprintf(dir, sizeof(dir), "/tmp/reclass-submit-input-XXXXXX");
        assert_non_null(mkdtemp(dir));
    }
    snprintf(path, n, "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static void test_csv_records_then_done(void **state) {
    (void)state;
    char path[128];
    write_file(path, sizeof(path), "a.csv", "id,text\nx1,hello\nx2,\"a, b\"\n");
    worker_submit_input_t *in;
    common_err_t e;
    assert_int_equal(worker_submit_input_open(path, "text", "id", &in, &e), COMMON_OK);
    worker_submit_rec_t r;
    assert_int_equal(worker_submit_input_next(in, &r, &e), COMMON_OK);
    assert_string_equal(r.id, "x1");
    assert_string_equal(r.text, "hello");
    assert_int_equal(worker_submit_input_next(in, &r, &e), COMMON_OK);
    assert_string_equal(r.text, "a, b");
    assert_int_equal(worker_submit_input_next(in, &r, &e), COMMON_DONE);
    worker_submit_input_free(in);
    worker_submit_count_t c;
    assert_int_equal(worker_submit_input_count(path, "text", "id", &c, &e), COMMON_OK);
    assert_int_equal(c.count, 2);
}

static void test_files_to_fix(void **state) {
    (void)state;
    char path[128];
    worker_submit_input_t *in;
    worker_submit_count_t c;
    common_err_t e;
    write_file(path, sizeof(path), "b.csv", "id,body\n1,hello\n");
    assert_int_equal(worker_submit_input_open(path, "text", NULL, &in, &e), COMMON_USAGE);
    assert_null(in);
    assert_int_equal(e.code, COMMON_USAGE);
    assert_non_null(strstr(e.message, "no column \"text\" in the header (columns: \"id\", "
                                      "\"body\"); pick one with --text-column"));
    write_file(path, sizeof(path), "c.jsonl", "{\"text\": \"a\"}\n[1]\n");
    assert_int_equal(worker_submit_input_count(path, "text", NULL, &c, &e), COMMON_USAGE);
    assert_non_null(strstr(e.message, "line 2 is not a JSON object"));
    write_file(path, sizeof(path), "d.jsonl",
               "{\"id\": \"t\", \"text\": \"a\"}\n"
               "{\"id\": \"t\", \"text\": \"b\"}\n");
    assert_int_equal(worker_submit_input_count(path, "text", NULL, &c, &e), COMMON_USAGE);
    assert_non_null(strstr(e.message, "line 2: ticket id \"t\" appears twice"));
    write_file(path, sizeof(path), "e.jsonl", "{\"text\": \"\"}\n");
    assert_int_equal(worker_submit_input_count(path, "text", NULL, &c, &e), COMMON_USAGE);
    assert_non_null(strstr(e.message, "has no ticket with non-empty text"));
    assert_int_equal(worker_submit_input_open("/nonexistent/x.csv", "text", NULL, &in, &e),
                     COMMON_USAGE);
    assert_non_null(strstr(e.message, "cannot open /nonexistent/x.csv"));
    assert_int_equal(worker_submit_input_open("x.txt", "text", NULL, &in, &e), COMMON_USAGE);
    assert_non_null(strstr(e.message, "must end in .csv or .jsonl"));
}

static int remove_files(void **state) {
    (void)state;
    char path[128];
    for (size_t i = 0; dir[0] && i < sizeof(names) / sizeof(names[0]); i++) {
        snprintf(path, sizeof(path), "%s/%s", dir, names[i]);
        unlink(path);
    }
    if (dir[0]) rmdir(dir);
    return 0;
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_csv_records_then_done),
        cmocka_unit_test(test_files_to_fix),
    };
    return cmocka_run_group_tests(tests, NULL, remove_files);
}
