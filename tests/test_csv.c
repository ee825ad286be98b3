/* RFC 4180 CSV reader: tricky cases from memory, and the committed CFPB excerpt (real export,
 * CRLF records with LF newlines inside quoted narratives). Expected numbers were computed with
 * Python's csv module when the excerpt was cut. When the full CFPB sample sits next to the
 * checkout (../shared, as in CI) it is checked too: 6623 rows, 1532 narratives. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "consumers/csv.h"

typedef struct {
    long rows;
    char fields[16][8][64]; /* first rows' fields, for exact checks */
    size_t nf[16];
    long lines[16];
    common_status_t rc;
    common_err_t e;
} parsed_t;

static void parse_mem(const char *text, size_t len, parsed_t *p) {
    memset(p, 0, sizeof(*p));
    FILE *f = fmemopen((void *)text, len, "r");
    assert_non_null(f);
    consumers_csv_t *csv;
    assert_int_equal(consumers_csv_init(f, &csv), 0);
    consumers_csv_row_t row;
    while ((p->rc = consumers_csv_next(csv, &row, &p->e)) == COMMON_OK) {
        if (p->rows < 16) {
            p->nf[p->rows] = row.n;
            p->lines[p->rows] = row.line;
            for (size_t i = 0; i < row.n && i < 8; i++)
                snprintf(p->fields[p->rows][i], 64, "%s", row.field[i]);
        }
        p->rows++;
    }
    consumers_csv_free(csv);
    fclose(f);
}
#define PARSE(lit, p) parse_mem(lit, sizeof(lit) - 1, p)

static void test_basic(void **state) {
    parsed_t p;
    PARSE("a,b,c\r\n1,2,3\r\n", &p);
    assert_int_equal(p.rc, COMMON_DONE);
    assert_int_equal(p.rows, 2);
    assert_int_equal(p.nf[1], 3);
    assert_string_equal(p.fields[1][2], "3");

    /* No final newline, empty fields, trailing comma. */
    PARSE("x,,\n,y", &p);
    assert_int_equal(p.rc, COMMON_DONE);
    assert_int_equal(p.rows, 2);
    assert_int_equal(p.nf[0], 3);
    assert_string_equal(p.fields[0][1], "");
    assert_string_equal(p.fields[0][2], "");
    assert_int_equal(p.nf[1], 2);
    assert_string_equal(p.fields[1][1], "y");
}

static void test_quotes(void **state) {
    parsed_t p;
    PARSE("id,text\r\n1,\"hello, \"\"world\"\"\"\r\n2,\"multi\nline\r\nfield\"\r\n3,\"\"\r\n", &p);
    assert_int_equal(p.rc, COMMON_DONE);
    assert_int_equal(p.rows, 4);
    assert_string_equal(p.fields[1][1], "hello, \"world\"");
    assert_string_equal(p.fields[2][1], "multi\nline\r\nfield");
    assert_string_equal(p.fields[3][1], "");
    assert_int_equal(p.lines[2], 3);
    assert_int_equal(p.lines[3], 6); /* the record before spans lines 3-5 */

    /* A quote inside an unquoted field is text. */
    PARSE("5\" screen,ok\n", &p);
    assert_int_equal(p.rc, COMMON_DONE);
    assert_string_equal(p.fields[0][0], "5\" screen");

    /* Quoted field with only an escaped quote; adjacent quoted fields. */
    PARSE("\"\"\"\",\"a\",\"b\"\n", &p);
    assert_int_equal(p.rc, COMMON_DONE);
    assert_int_equal(p.nf[0], 3);
    assert_string_equal(p.fields[0][0], "\"");
    assert_string_equal(p.fields[0][2], "b");
}

static void test_newlines_bom_blank(void **state) {
    parsed_t p;
    PARSE("\xEF\xBB\xBFtext\r\n\r\nfirst\n\nsecond\rthird\r", &p);
    assert_int_equal(p.rc, COMMON_DONE);
    assert_int_equal(p.rows, 4);
    assert_string_equal(p.fields[0][0], "text"); /* BOM gone */
    assert_string_equal(p.fields[1][0], "first");
    assert_string_equal(p.fields[2][0], "second");
    assert_string_equal(p.fields[3][0], "third");
    assert_int_equal(p.lines[1], 3);
    assert_int_equal(p.lines[2], 5);

    PARSE("", &p);
    assert_int_equal(p.rc, COMMON_DONE);
    assert_int_equal(p.rows, 0);

    /* An embedded NUL is data; len carries it. */
    static const char nul[] = "a\0b,c\n";
    FILE *f = fmemopen((void *)nul, sizeof(nul) - 1, "r");
    consumers_csv_t *csv;
    consumers_csv_row_t row;
    common_err_t e;
    consumers_csv_init(f, &csv);
    assert_int_equal(consumers_csv_next(csv, &row, &e), COMMON_OK);
    assert_int_equal(row.n, 2);
    assert_int_equal(row.len[0], 3);
    assert_memory_equal(row.field[0], "a\0b", 4);
    consumers_csv_free(csv);
    fclose(f);
}

static void test_errors(void **state) {
    parsed_t p;
    PARSE("a,b\n1,\"never closed\n2,3\n", &p);
    assert_int_equal(p.rc, COMMON_USAGE);
    assert_int_equal(p.rows, 1);
    assert_non_null(strstr(p.e.message, "opened on line 2"));

    PARSE("a,b\n\"x\"y,2\n", &p);
    assert_int_equal(p.rc, COMMON_USAGE);
    assert_non_null(strstr(p.e.message, "line 2"));
    assert_non_null(strstr(p.e.message, "'y'"));

    PARSE("\xEF\xBB", &p);
    assert_int_equal(p.rc, COMMON_USAGE);
}

typedef struct {
    long rows, narratives, narrative_bytes, newlines;
    char last_id[32];
    size_t max_fields, min_fields;
} cfpb_stats_t;

static int read_cfpb(const char *path, cfpb_stats_t *s) {
    memset(s, 0, sizeof(*s));
    s->min_fields = (size_t)-1;
    FILE *f = fopen(path, "rb");
    if (!f) return -1;
    consumers_csv_t *csv;
    consumers_csv_row_t row;
    common_err_t e;
    consumers_csv_init(f, &csv);
    assert_int_equal(consumers_csv_next(csv, &row, &e), COMMON_OK);
    int col = consumers_csv_column(&row, "Consumer complaint narrative");
    int id = consumers_csv_column(&row, "Complaint ID");
    assert_int_equal(col, 5);
    assert_int_equal(id, 17);
    assert_int_equal(consumers_csv_column(&row, "no such column"), -1);
    common_status_t rc;
    while ((rc = consumers_csv_next(csv, &row, &e)) == COMMON_OK) {
        s->rows++;
        if (row.n > s->max_fields) s->max_fields = row.n;
        if (row.n < s->min_fields) s->min_fields = row.n;
        if (row.n < 18) continue;
        if (row.len[col] > 0) s->narratives++;
        s->narrative_bytes += (long)row.len[col];
        for (size_t i = 0; i < row.len[col]; i++)
            s->newlines += row.field[col][i] == '\n';
        snprintf(s->last_id, sizeof(s->last_id), "%s", row.field[id]);
    }
    if (rc != COMMON_DONE) fprintf(stderr, "%s: %s\n", path, e.message);
    assert_int_equal(rc, COMMON_DONE);
    consumers_csv_free(csv);
    fclose(f);
    return 0;
}

static void test_cfpb_excerpt(void **state) {
    cfpb_stats_t s;
    assert_int_equal(read_cfpb(RECLASS_FIXTURES "/cfpb_excerpt.csv", &s), 0);
    assert_int_equal(s.rows, 60);
    assert_int_equal(s.narratives, 30);
    assert_int_equal(s.narrative_bytes, 43153);
    assert_int_equal(s.newlines, 137);
    assert_int_equal(s.min_fields, 18);
    assert_int_equal(s.max_fields, 18);
    assert_string_equal(s.last_id, "3230323");
}

static void test_cfpb_full(void **state) {
    const char *path = RECLASS_SOURCE_DIR "/../shared/data/cfpb_complaints/complaints_sample.csv";
    if (access(path, R_OK) != 0) {
        printf("full CFPB sample not next to this checkout; the excerpt test covers the format\n");
        return;
    }
    cfpb_stats_t s;
    assert_int_equal(read_cfpb(path, &s), 0);
    assert_int_equal(s.rows, 6623);
    assert_int_equal(s.narratives, 1532);
    assert_int_equal(s.narrative_bytes, 1712199);
    assert_int_equal(s.newlines, 3341);
    assert_int_equal(s.min_fields, 18);
    assert_string_equal(s.last_id, "3195040");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_basic),
        cmocka_unit_test(test_quotes),
        cmocka_unit_test(test_newlines_bom_blank),
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_cfpb_excerpt),
        cmocka_unit_test(test_cfpb_full),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
