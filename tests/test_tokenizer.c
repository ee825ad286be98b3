/* The tokenizer against Hugging Face: every fixture text (BANKING77, CLINC150 test) and
 * hand-picked edge cases whose ids were produced by tokenizers 0.23.3
 * (BertWordPieceTokenizer(vocab, lowercase=True), invalid bytes decoded with
 * errors="replace"). Each check runs both the ASCII fast path and the general path. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>
#include <jansson.h>

#include "worker/text/tokenizer.h"

static worker_tok_t *tok;

static int setup(void **state) {
    common_err_t err;
    if (worker_tok_init(RECLASS_DEMO_MODEL "/vocab.txt", NULL, &tok, &err) != 0) {
        common_err_print(stderr, &err);
        return -1;
    }
    return 0;
}

static int teardown(void **state) {
    worker_tok_free(tok);
    return 0;
}

static void print_ids(const char *label, const int32_t *v, int n) {
    fprintf(stderr, "  %s (%d): [", label, n);
    for (int i = 0; i < n; i++)
        fprintf(stderr, i ? ",%d" : "%d", v[i]);
    fprintf(stderr, "]\n");
}

static int ids_equal(const worker_ids_t *got, const int32_t *want, int n) {
    return got->n == n && memcmp(got->v, want, sizeof(int32_t) * n) == 0;
}

/* Runs every row of a fixture through both paths; returns the number of mismatches and
 * shows the first one. */
static int check_fixture(const char *path, int max_len, int *rows_out, long *tokens_out) {
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    char *line = NULL;
    size_t cap = 0;
    int rows = 0, ok = 0, ok_general = 0;
    long tokens = 0;
    worker_ids_t ids = {0}, gen = {0};
    int32_t want[4096];
    while (getline(&line, &cap, f) > 0) {
        json_error_t jerr;
        json_t *row = json_loads(line, 0, &jerr);
        assert_non_null(row);
        json_t *t = json_object_get(row, "text"), *a = json_object_get(row, "ids");
        assert_true(json_is_string(t) && json_is_array(a));
        int n = (int)json_array_size(a);
        assert_true(n <= 4096);
        for (int i = 0; i < n; i++)
            want[i] = (int32_t)json_integer_value(json_array_get(a, i));
        const char *text = json_string_value(t);
        size_t len = json_string_length(t);
        assert_int_equal(worker_tok_encode(tok, text, len, max_len, &ids), 0);
        assert_int_equal(worker_tok_encode_path(tok, text, len, max_len, &gen, 1), 0);
        rows++;
        tokens += ids.n;
        if (ids_equal(&ids, want, n))
            ok++;
        else if (rows - ok == 1) { /* the first mismatch only */
            fprintf(stderr, "MISMATCH %s row %d: %s\n", path, rows, text);
            print_ids("want", want, n);
            print_ids("got ", ids.v, ids.n);
        }
        if (ids_equal(&gen, want, n))
            ok_general++;
        else if (rows - ok_general == 1) {
            fprintf(stderr, "MISMATCH (general path) %s row %d: %s\n", path, rows, text);
            print_ids("want", want, n);
            print_ids("got ", gen.v, gen.n);
        }
        json_decref(row);
    }
    free(line);
    fclose(f);
    worker_ids_free(&ids);
    worker_ids_free(&gen);
    printf("%s: %d/%d match (general path %d/%d)\n", strrchr(path, '/') + 1, ok, rows, ok_general,
           rows);
    *rows_out = rows;
    if (tokens_out) *tokens_out = tokens;
    return (rows - ok) + (rows - ok_general);
}

static void test_banking77_fixture(void **state) {
    int rows;
    long tokens;
    int bad = check_fixture(RECLASS_FIXTURES "/tokens_banking77.jsonl", 0, &rows, &tokens);
    assert_int_equal(rows, 13083);
    assert_int_equal(bad, 0);
}

static void test_clinc150_golden(void **state) {
    int rows;
    int bad = check_fixture(RECLASS_FIXTURES "/golden_clinc150_test.jsonl", 512, &rows, NULL);
    assert_int_equal(rows, 5500);
    assert_int_equal(bad, 0);
}

typedef struct {
    const char *name;
    const char *text;
    size_t len;
    int32_t ids[160];
    int n;
} tok_case_t;

/* Generated with tokenizers 0.23.3 (see the header comment). */
static const tok_case_t cases[] = {
#include "test_tokenizer_cases.inc"
};

static void check_case(const tok_case_t *c) {
    worker_ids_t ids = {0};
    for (int general = 0; general <= 1; general++) {
        assert_int_equal(worker_tok_encode_path(tok, c->text, c->len, 0, &ids, general), 0);
        if (!ids_equal(&ids, c->ids, c->n)) {
            fprintf(stderr, "case %s (%s path)\n", c->name, general ? "general" : "auto");
            print_ids("want", c->ids, c->n);
            print_ids("got ", ids.v, ids.n);
            fail();
        }
        assert_int_equal(ids.n_full, c->n);
        assert_int_equal(ids.truncated, 0);
    }
    worker_ids_free(&ids);
}

static const tok_case_t *find_case(const char *name) {
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
        if (strcmp(cases[i].name, name) == 0) return &cases[i];
    fail_msg("no case %s", name);
    return NULL;
}

static void test_accents(void **state) {
    check_case(find_case("accents")); /* "Héllo Wörld" -> hello world */
    check_case(find_case("accents2"));
}
static void test_cjk(void **state) {
    check_case(find_case("cjk"));
}
static void test_punctuation(void **state) {
    check_case(find_case("punct"));
}
static void test_long_word_unk(void **state) {
    check_case(find_case("long_word"));       /* 101 chars -> [UNK], 100 -> pieces */
    check_case(find_case("long_word_utf8"));  /* counted after accent stripping */
    check_case(find_case("long_word_2byte")); /* counted in chars, not bytes */
}
static void test_invalid_utf8(void **state) {
    check_case(find_case("invalid_utf8"));
}
static void test_control_chars(void **state) {
    check_case(find_case("control"));
}
static void test_empty(void **state) {
    check_case(find_case("empty"));
    const int32_t want[] = {101, 102};
    worker_ids_t ids = {0};
    assert_int_equal(worker_tok_encode(tok, "", 0, 0, &ids), 0);
    assert_true(ids_equal(&ids, want, 2));
    assert_int_equal(worker_tok_encode(tok, " \t\r\n ", 5, 0, &ids), 0);
    assert_true(ids_equal(&ids, want, 2));
    worker_ids_free(&ids);
}
static void test_other_scripts(void **state) {
    check_case(find_case("korean_emoji")); /* Hangul splits into jamo under NFD */
    check_case(find_case("combining"));    /* canonical ordering before stripping */
}
static void test_special_tokens_in_text(void **state) {
    check_case(find_case("special"));
}
static void test_wordpiece(void **state) {
    check_case(find_case("wordpiece"));
}

/* One tokenizer shared by threads, as the bulk worker does: each thread has its own scratch
 * buffer for the general path, so results never mix. */
static void *thread_main(void *arg) {
    long bad = 0;
    worker_ids_t ids = {0};
    for (int rep = 0; rep < 300; rep++)
        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
            const tok_case_t *c = &cases[(i + (size_t)arg) % (sizeof(cases) / sizeof(cases[0]))];
            if (worker_tok_encode(tok, c->text, c->len, 0, &ids) != 0 ||
                !ids_equal(&ids, c->ids, c->n))
                bad++;
        }
    worker_ids_free(&ids);
    return (void *)bad;
}

static void test_threads(void **state) {
    pthread_t th[4];
    for (long i = 0; i < 4; i++)
        assert_int_equal(pthread_create(&th[i], NULL, thread_main, (void *)i), 0);
    for (int i = 0; i < 4; i++) {
        void *bad;
        pthread_join(th[i], &bad);
        assert_int_equal((long)bad, 0);
    }
}

static void test_truncation(void **state) {
    const char *t = "I have been waiting over a week for my new card, is it still coming or "
                    "should I cancel it?";
    const int32_t want[] = {101, 1045, 2031, 2042, 3403, 2058, 1037, 102}; /* HF, max 8 */
    worker_ids_t ids = {0};
    for (int general = 0; general <= 1; general++) {
        assert_int_equal(worker_tok_encode_path(tok, t, strlen(t), 8, &ids, general), 0);
        assert_true(ids_equal(&ids, want, 8));
        assert_int_equal(ids.n_full, 24);
        assert_int_equal(ids.truncated, 1);
    }
    /* A limit the text fits in changes nothing. */
    assert_int_equal(worker_tok_encode(tok, t, strlen(t), 24, &ids), 0);
    assert_int_equal(ids.n, 24);
    assert_int_equal(ids.truncated, 0);
    assert_int_equal(ids.v[23], 102);
    /* The smallest limit keeps only the two specials. */
    assert_int_equal(worker_tok_encode(tok, t, strlen(t), 2, &ids), 0);
    assert_int_equal(ids.n, 2);
    assert_int_equal(ids.v[0], 101);
    assert_int_equal(ids.v[1], 102);
    assert_int_equal(ids.n_full, 24);
    worker_ids_free(&ids);
}

/* Random bytes must never crash or read out of bounds (run under ASan to be sure), and both
 * paths must agree on them. */
static void test_random_bytes(void **state) {
    worker_ids_t a = {0}, b = {0};
    uint32_t seed = 12345;
    char buf[512];
    const char alphabet[] = "aZ [SEP]\xc3\xa9\xe4\xb8\x80\xf0\x9f\x98\x80\xcc\x81\x80\xff\x01,";
    for (int iter = 0; iter < 20000; iter++) {
        int len = (int)((seed = seed * 1103515245u + 12345u) >> 16) % (int)sizeof(buf);
        for (int i = 0; i < len; i++) {
            seed = seed * 1103515245u + 12345u;
            buf[i] = (seed >> 24) & 1 ? (char)(seed >> 16)
                                      : alphabet[(seed >> 8) % (sizeof(alphabet) - 1)];
        }
        assert_int_equal(worker_tok_encode_path(tok, buf, (size_t)len, 0, &a, 0), 0);
        assert_int_equal(worker_tok_encode_path(tok, buf, (size_t)len, 0, &b, 1), 0);
        assert_int_equal(a.n, b.n);
        assert_memory_equal(a.v, b.v, sizeof(int32_t) * a.n);
        assert_true(a.n >= 2 && a.v[0] == 101 && a.v[a.n - 1] == 102);
    }
    worker_ids_free(&a);
    worker_ids_free(&b);
}

/* Rows {"hex", "lower", ["strip", "cjk",] "ids"}: a text (hex, it may hold bad bytes) and the
 * ids Hugging Face gave it under those tokenizer_config.json settings (strip_accents absent or
 * null: as lower; tokenize_chinese_chars absent: true). Both paths must match every row. */
static void check_hex_fixture(const char *path, int want_rows) {
    worker_tok_t *toks[8] = {NULL}; /* by setting: lower | strip << 1 | cjk << 2 */
    common_err_t err;
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    char *line = NULL, *bytes = NULL;
    size_t cap = 0;
    int rows = 0, ok = 0;
    int32_t want[1024];
    worker_ids_t ids = {0};
    while (getline(&line, &cap, f) > 0) {
        json_t *row = json_loads(line, 0, NULL);
        assert_non_null(row);
        const char *hex = json_string_value(json_object_get(row, "hex"));
        json_t *a = json_object_get(row, "ids");
        assert_true(hex && json_is_array(a) && json_array_size(a) <= 1024);
        size_t len = strlen(hex) / 2;
        bytes = realloc(bytes, len + 1);
        for (size_t i = 0; i < len; i++) {
            unsigned v;
            sscanf(hex + 2 * i, "%2x", &v);
            bytes[i] = (char)v;
        }
        int n = (int)json_array_size(a);
        for (int i = 0; i < n; i++)
            want[i] = (int32_t)json_integer_value(json_array_get(a, i));
        json_t *js = json_object_get(row, "strip"), *jc = json_object_get(row, "cjk");
        worker_tok_config_t o = {.lower = json_is_true(json_object_get(row, "lower")),
                                 .chinese_chars = 1};
        o.strip_accents = js && !json_is_null(js) ? json_is_true(js) : o.lower;
        if (jc) o.chinese_chars = json_is_true(jc);
        int k = o.lower | o.strip_accents << 1 | o.chinese_chars << 2;
        if (!toks[k])
            assert_int_equal(worker_tok_init(RECLASS_DEMO_MODEL "/vocab.txt", &o, &toks[k], &err),
                             0);
        rows++;
        int row_ok = 1;
        for (int general = 0; general <= 1; general++) {
            assert_int_equal(worker_tok_encode_path(toks[k], bytes, len, 0, &ids, general), 0);
            if (!ids_equal(&ids, want, n)) {
                if (row_ok && rows - ok == 1) {
                    fprintf(stderr, "MISMATCH row %d (%s path, lower %d strip %d cjk %d): hex %s\n",
                            rows, general ? "general" : "auto", o.lower, o.strip_accents,
                            o.chinese_chars, hex);
                    print_ids("want", want, n);
                    print_ids("got ", ids.v, ids.n);
                }
                row_ok = 0;
            }
        }
        ok += row_ok;
        json_decref(row);
    }
    printf("%s: %d/%d match\n", path, ok, rows);
    free(line);
    free(bytes);
    fclose(f);
    worker_ids_free(&ids);
    for (int k = 0; k < 8; k++)
        worker_tok_free(toks[k]);
    assert_int_equal(rows, want_rows);
    assert_int_equal(ok, rows);
}

/* 3,200 random texts (mixed scripts, combining marks, controls, special tokens, invalid
 * UTF-8 bytes; a fifth with do_lower_case false) with the ids HF gave them; written by a
 * throwaway fuzzer that matched 50,000 such texts. */
static void test_fuzz_fixture(void **state) {
    check_hex_fixture(RECLASS_SOURCE_DIR "/tests/test_tokenizer_fuzz.jsonl", 3200);
}

/* The other tokenizer_config.json settings (strip_accents differing from do_lower_case,
 * tokenize_chinese_chars false), 1,300 texts: tests/gen_tokenizer_options.py. */
static void test_options_fixture(void **state) {
    check_hex_fixture(RECLASS_SOURCE_DIR "/tests/test_tokenizer_options.jsonl", 1300);
}

static void test_custom_vocab(void **state) {
    common_err_t err;
    worker_tok_t *t = (worker_tok_t *)1;
    assert_int_equal(worker_tok_init("/nonexistent/vocab.txt", NULL, &t, &err), COMMON_USAGE);
    assert_null(t);
    assert_non_null(strstr(err.message, "/nonexistent/vocab.txt"));

    char path[] = "/tmp/reclass_vocab_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    FILE *f = fdopen(fd, "w");
    fputs("[PAD]\n[UNK]\n[CLS]\nhello\n", f); /* no [SEP] */
    fclose(f);
    assert_int_equal(worker_tok_init(path, NULL, &t, &err), COMMON_USAGE);
    assert_non_null(strstr(err.message, "[SEP]"));

    /* CRLF lines, ids = line numbers, a later duplicate wins (as HF's loader). */
    f = fopen(path, "w");
    fputs("[PAD]\r\n[UNK]\r\n[CLS]\r\n[SEP]\r\nhello\r\n##s\r\nhello\r\n", f);
    fclose(f);
    assert_int_equal(worker_tok_init(path, NULL, &t, &err), 0);
    assert_int_equal(worker_tok_vocab_size(t), 7);
    worker_ids_t ids = {0};
    assert_int_equal(worker_tok_encode(t, "Hellos HELLO x", 14, 0, &ids), 0);
    const int32_t want[] = {2, 6, 5, 6, 1, 3};
    assert_true(ids_equal(&ids, want, 6));
    worker_tok_free(t);

    /* Canonical ordering: U+1D16D (ccc 226) before U+1D165 (ccc 216) is reordered by NFD,
     * so HF matches the two-mark piece (id 7), not 6 then 5. */
    f = fopen(path, "w");
    fputs("[PAD]\n[UNK]\n[CLS]\n[SEP]\nx\n##\xf0\x9d\x85\xa5\n##\xf0\x9d\x85\xad\n"
          "##\xf0\x9d\x85\xa5\xf0\x9d\x85\xad\n",
          f);
    fclose(f);
    assert_int_equal(worker_tok_init(path, NULL, &t, &err), 0);
    const char *marks[] = {"x\xf0\x9d\x85\xad\xf0\x9d\x85\xa5",
                           "x\xf0\x9d\x85\xad\xcc\x81\xf0\x9d\x85\xa5",
                           "X\xf0\x9d\x85\xa5\xf0\x9d\x85\xad"};
    const int32_t want_marks[] = {2, 4, 7, 3}; /* HF, all three */
    for (int i = 0; i < 3; i++) {
        assert_int_equal(worker_tok_encode(t, marks[i], strlen(marks[i]), 0, &ids), 0);
        if (!ids_equal(&ids, want_marks, 4)) {
            print_ids("got", ids.v, ids.n);
            fail_msg("canonical ordering, text %d", i);
        }
    }
    worker_ids_free(&ids);
    worker_tok_free(t);
    unlink(path);
}

static void bench(void **state) {
    /* tokens/s over all BANKING77 texts, loaded once; a few passes for a stable figure. */
    FILE *f = fopen(RECLASS_FIXTURES "/tokens_banking77.jsonl", "r");
    assert_non_null(f);
    char *line = NULL, **texts = NULL;
    size_t cap = 0, *lens = NULL;
    int n = 0;
    while (getline(&line, &cap, f) > 0) {
        json_t *row = json_loads(line, 0, NULL);
        texts = realloc(texts, sizeof(char *) * (n + 1));
        lens = realloc(lens, sizeof(size_t) * (n + 1));
        lens[n] = json_string_length(json_object_get(row, "text"));
        texts[n] = malloc(lens[n] + 1);
        memcpy(texts[n], json_string_value(json_object_get(row, "text")), lens[n] + 1);
        n++;
        json_decref(row);
    }
    free(line);
    fclose(f);
    worker_ids_t ids = {0};
    for (int general = 0; general <= 1; general++) {
        long tokens = 0;
        struct timespec t0, t1;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        const int passes = 5;
        for (int p = 0; p < passes; p++)
            for (int i = 0; i < n; i++) {
                worker_tok_encode_path(tok, texts[i], lens[i], 0, &ids, general);
                tokens += ids.n;
            }
        clock_gettime(CLOCK_MONOTONIC, &t1);
        double s = (t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) * 1e-9;
        printf("bench (%s path): %d texts x %d passes, %ld tokens in %.3f s = %.2f M tokens/s, "
               "%.0f texts/s\n",
               general ? "general" : "default", n, passes, tokens, s, tokens / s / 1e6,
               n * passes / s);
    }
    worker_ids_free(&ids);
    for (int i = 0; i < n; i++)
        free(texts[i]);
    free(texts);
    free(lens);
}

int main(int argc, char **argv) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_accents),
        cmocka_unit_test(test_cjk),
        cmocka_unit_test(test_punctuation),
        cmocka_unit_test(test_long_word_unk),
        cmocka_unit_test(test_invalid_utf8),
        cmocka_unit_test(test_control_chars),
        cmocka_unit_test(test_empty),
        cmocka_unit_test(test_other_scripts),
        cmocka_unit_test(test_special_tokens_in_text),
        cmocka_unit_test(test_wordpiece),
        cmocka_unit_test(test_truncation),
        cmocka_unit_test(test_threads),
        cmocka_unit_test(test_random_bytes),
        cmocka_unit_test(test_fuzz_fixture),
        cmocka_unit_test(test_options_fixture),
        cmocka_unit_test(test_custom_vocab),
        cmocka_unit_test(test_banking77_fixture),
        cmocka_unit_test(test_clinc150_golden),
    };
    if (argc > 1 && strcmp(argv[1], "--bench") == 0) {
        const struct CMUnitTest b[] = {cmocka_unit_test(bench)};
        return cmocka_run_group_tests(b, setup, teardown);
    }
    return cmocka_run_group_tests(tests, setup, teardown);
}
