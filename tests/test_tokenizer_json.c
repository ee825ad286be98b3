/* tokenizer.json tokenizers against Hugging Face tokenizers 0.23.3: every fixture text
 * (tests/fixtures/tokenizers/golden/texts.jsonl) under the three fixture tokenizers
 * (WordPiece, byte-level BPE, SentencePiece Unigram with its Precompiled charsmap), untruncated
 * and truncated to 16 and 512 with the special tokens kept; 100% exact ids is the bar. Then the
 * loader's refusals, which must name the feature, and the vocab.txt fallback. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>
#include <jansson.h>

#include "worker/text/hf/hf.h"
#include "worker/text/tokenizer.h"
#include "worker/text/tokenizer_int.h"

#define TOKS RECLASS_FIXTURES "/tokenizers"

static int read_ids(json_t *a, int32_t *v, int cap) {
    int n = (int)json_array_size(a);
    for (int i = 0; i < n && i < cap; i++)
        v[i] = (int32_t)json_integer_value(json_array_get(a, i));
    return n;
}

static void show(const char *what, const char *text, const worker_ids_t *got, const int32_t *want,
                 int n) {
    fprintf(stderr, "  mismatch (%s) on %.120s\n   want:", what, text);
    for (int i = 0; i < n && i < 40; i++)
        fprintf(stderr, " %d", want[i]);
    fprintf(stderr, "\n   got: ");
    for (int i = 0; i < got->n && i < 40; i++)
        fprintf(stderr, " %d", got->v[i]);
    fprintf(stderr, "\n");
}

/* sub: the tokenizer's directory under TOKS; texts: the golden texts file under golden/;
 * min_texts: how many at least; trunc: the goldens hold the truncated ids too. */
static void check_golden(const char *sub, const char *name, const char *texts_file, int min_texts,
                         int trunc) {
    char dir[512], gold[512], tpath[512];
    common_err_t err;
    snprintf(dir, sizeof dir, "%s/%s%s", TOKS, sub, name);
    snprintf(gold, sizeof gold, "%s/golden/%s.jsonl", TOKS, name);
    snprintf(tpath, sizeof tpath, "%s/golden/%s", TOKS, texts_file);
    worker_tok_t *tok = NULL;
    if (worker_tok_load_dir(dir, 0, &tok, &err) != COMMON_OK) fail_msg("%s", err.message);
    /* A BERT-shaped file runs on the vocab.txt tokenizer: check the general pipeline too. */
    hf_tok_t *general = NULL;
    char json[600];
    snprintf(json, sizeof json, "%s/tokenizer.json", dir);
    if (!tok->hf && hf_tok_load_file(json, &general, &err) != COMMON_OK)
        fail_msg("%s", err.message);
    int exact_general = 0;
    worker_ids_t gids = {0};
    FILE *ft = fopen(tpath, "r"), *fg = fopen(gold, "r");
    assert_non_null(ft);
    assert_non_null(fg);
    char *lt = NULL, *lg = NULL;
    size_t ct = 0, cg = 0;
    int texts = 0, exact[3] = {0}, shown = 0;
    static const int maxes[3] = {0, 16, 512};
    static const char *keys[3] = {"ids", "ids16", "ids512"};
    worker_ids_t ids = {0};
    int32_t *want = malloc(sizeof(int32_t) * 65536);
    assert_non_null(want);
    while (getline(&lt, &ct, ft) > 0) {
        assert_true(getline(&lg, &cg, fg) > 0);
        json_t *t = json_loads(lt, JSON_DECODE_ANY | JSON_ALLOW_NUL, NULL);
        json_t *g = json_loads(lg, 0, NULL);
        assert_true(json_is_string(t) && json_is_object(g));
        texts++;
        for (int k = 0; k < (trunc ? 3 : 1); k++) {
            json_t *a = json_object_get(g, keys[k]);
            if (!a) a = json_object_get(g, "ids");
            int n = read_ids(a, want, 65536);
            assert_int_equal(
                worker_tok_encode(tok, json_string_value(t), json_string_length(t), maxes[k], &ids),
                0);
            if (ids.n == n && memcmp(ids.v, want, sizeof(int32_t) * (size_t)n) == 0)
                exact[k]++;
            else if (shown++ < 5)
                show(keys[k], json_string_value(t), &ids, want, n);
            if (!general) continue;
            assert_int_equal(hf_tok_encode(general, json_string_value(t), json_string_length(t),
                                           maxes[k], &gids),
                             0);
            if (gids.n == n && memcmp(gids.v, want, sizeof(int32_t) * (size_t)n) == 0)
                exact_general++;
            else if (shown++ < 5)
                show("general pipeline", json_string_value(t), &gids, want, n);
        }
        json_decref(t);
        json_decref(g);
    }
    if (trunc)
        fprintf(stderr, "%s: %d texts, exact ids %d/%d, truncated to 16 %d/%d, to 512 %d/%d\n",
                name, texts, exact[0], texts, exact[1], texts, exact[2], texts);
    else
        fprintf(stderr, "%s: %d texts, exact ids %d/%d\n", name, texts, exact[0], texts);
    if (general) {
        fprintf(stderr, "%s: vocab.txt fast path; general pipeline exact %d/%d\n", name,
                exact_general, texts * (trunc ? 3 : 1));
        assert_int_equal(exact_general, texts * (trunc ? 3 : 1));
    }
    hf_tok_free(general);
    worker_ids_free(&gids);
    free(want);
    free(lt);
    free(lg);
    fclose(ft);
    fclose(fg);
    worker_ids_free(&ids);
    worker_tok_free(tok);
    assert_true(texts >= min_texts);
    for (int k = 0; k < (trunc ? 3 : 1); k++)
        assert_int_equal(exact[k], texts);
}

static void test_bert_wordpiece(void **state) {
    (void)state;
    check_golden("", "bert-wordpiece", "texts.jsonl", 11000, 1);
}

static void test_roberta_bpe(void **state) {
    (void)state;
    check_golden("", "roberta-bpe", "texts.jsonl", 11000, 1);
}

static void test_xlmr_unigram(void **state) {
    (void)state;
    check_golden("", "xlmr-unigram", "texts.jsonl", 11000, 1);
}

/* DeBERTa-v3's pipeline: Strip + Precompiled + Replace(" {2,}"), Metaspace in a Sequence,
 * Unigram with [UNK] at 3, [CLS] $A [SEP]. */
static void test_deberta_unigram(void **state) {
    (void)state;
    check_golden("", "deberta-unigram", "texts.jsonl", 11000, 1);
}

/* The same vocabularies under the other pipeline pieces (tests/fixtures/tokenizers/README.md):
 * NFC/NFKC/NFKD, Lowercase, StripAccents, Strip, Prepend, Replace; WhitespaceSplit, Whitespace,
 * Split, Punctuation, Digits, Metaspace "first", ByteLevel with a prefix space; BertProcessing;
 * added tokens normalized, single_word, lstrip, rstrip. */
static void test_variants(void **state) {
    (void)state;
    check_golden("variants/", "bert-variant", "variant-texts.jsonl", 3900, 0);
    check_golden("variants/", "roberta-variant", "variant-texts.jsonl", 3900, 0);
    check_golden("variants/", "xlmr-variant", "variant-texts.jsonl", 3900, 0);
    check_golden("variants/", "xlmr-first", "variant-texts.jsonl", 3900, 0);
}

/* Writes json as tokenizer.json in a fresh directory (sub: a directory made inside it, or
 * NULL) and loads it with config.json's vocab_size (0: unchecked); the file's path into path. */
static common_status_t load_text(const char *json, const char *sub, int vocab_size, char *path,
                                 size_t pathlen, common_err_t *err) {
    char top[] = "/tmp/reclass_tokjson_XXXXXX", dir[512];
    assert_non_null(mkdtemp(top));
    snprintf(dir, sizeof dir, "%s%s%s", top, sub ? "/" : "", sub ? sub : "");
    if (sub) assert_int_equal(mkdir(dir, 0700), 0);
    snprintf(path, pathlen, "%s/tokenizer.json", dir);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(json, f);
    fclose(f);
    worker_tok_t *tok = NULL;
    common_status_t rc = worker_tok_load_dir(dir, vocab_size, &tok, err);
    worker_tok_free(tok);
    unlink(path);
    if (sub) rmdir(dir);
    rmdir(top);
    return rc;
}

#define WP_MODEL                                                                                   \
    "\"model\":{\"type\":\"WordPiece\",\"unk_token\":\"[UNK]\",\"vocab\":{\"[UNK]\":0,\"a\":1}}"

/* Refused as a usage error whose printed line (common_err_print's) names the file and needle. */
static void expect_refused(const char *json, const char *needle) {
    common_err_t err;
    char path[600], line[COMMON_ERR_LINE_MAX];
    assert_int_equal(load_text(json, NULL, 0, path, sizeof path, &err), COMMON_USAGE);
    common_err_line(&err, line, sizeof line);
    if (!strstr(line, needle)) fail_msg("error \"%s\" does not name \"%s\"", line, needle);
    if (!strstr(line, path)) fail_msg("error \"%s\" does not name \"%s\"", line, path);
}

static void test_load_errors(void **state) {
    (void)state;
    expect_refused("{\"normalizer\":{\"type\":\"Frobnicate\"}," WP_MODEL "}",
                   "normalizer \"Frobnicate\" is not supported");
    expect_refused(
        "{\"normalizer\":{\"type\":\"Sequence\",\"normalizers\":[{\"type\":\"NFC\"},"
        "{\"type\":\"Replace\",\"pattern\":{\"Regex\":\"[a-z]+\"},\"content\":\"\"}]}," WP_MODEL
        "}",
        "Replace with the regex \"[a-z]+\" is not supported");
    expect_refused("{\"pre_tokenizer\":{\"type\":\"UnicodeScripts\"}," WP_MODEL "}",
                   "pre_tokenizer \"UnicodeScripts\" is not supported");
    expect_refused("{\"pre_tokenizer\":{\"type\":\"Split\",\"pattern\":{\"Regex\":\"\\\\d\"},"
                   "\"behavior\":\"Isolated\",\"invert\":false}," WP_MODEL "}",
                   "Split with a Regex pattern is not supported");
    expect_refused("{\"model\":{\"type\":\"WordLevel\",\"vocab\":{}}}",
                   "model \"WordLevel\" is not supported");
    expect_refused("{\"model\":{\"type\":\"BPE\",\"continuing_subword_prefix\":\"##\",\"vocab\":{},"
                   "\"merges\":[]}}",
                   "BPE with continuing_subword_prefix is not supported");
    expect_refused("{\"model\":{\"type\":\"BPE\",\"dropout\":0.1,\"vocab\":{},\"merges\":[]}}",
                   "BPE with dropout is not supported");
    expect_refused("{\"post_processor\":{\"type\":\"TemplateProcessing\",\"single\":[{\"Sequence\":"
                   "{\"id\":\"B\"}}],\"special_tokens\":{}}," WP_MODEL "}",
                   "single template must hold $A");
    expect_refused("{\"post_processor\":{\"type\":\"Frob\"}," WP_MODEL "}",
                   "post_processor \"Frob\" is not supported");
    expect_refused(
        "{\"truncation\":{\"direction\":\"Left\",\"max_length\":8,\"stride\":0}," WP_MODEL "}",
        "truncation to the left is not supported");
    expect_refused("{\"model\":{\"type\":\"Unigram\",\"unk_id\":null,\"vocab\":[[\"a\",-1.0]]}}",
                   "Unigram without unk_id is not supported");
    expect_refused(
        "{\"normalizer\":{\"type\":\"Precompiled\",\"precompiled_charsmap\":\"AAAA\"}," WP_MODEL
        "}",
        "not a SentencePiece charsmap");
    expect_refused("{\"pre_tokenizer\":{\"type\":\"Sequence\",\"pretokenizers\":[{\"type\":"
                   "\"WhitespaceSplit\"},{\"type\":\"Metaspace\",\"replacement\":\"_\",\"prepend_"
                   "scheme\":\"first\"}]}," WP_MODEL "}",
                   "prepend_scheme \"first\" after another pre-tokenizer is not supported");
    expect_refused("{" WP_MODEL ",", "invalid JSON");
}

/* A directory without tokenizer.json loads vocab.txt as before; vocab_size is still checked. */
static void test_fallback_and_vocab_size(void **state) {
    (void)state;
    common_err_t err;
    worker_tok_t *a = NULL, *b = NULL;
    assert_int_equal(worker_tok_load_dir(RECLASS_DEMO_MODEL, 0, &a, &err), 0);
    assert_int_equal(worker_tok_init(RECLASS_DEMO_MODEL "/vocab.txt", NULL, &b, &err), 0);
    worker_ids_t x = {0}, y = {0};
    const char *text = "Can I change my PIN at an ATM? caf\xc3\xa9 [MASK]";
    assert_int_equal(worker_tok_encode(a, text, strlen(text), 0, &x), 0);
    assert_int_equal(worker_tok_encode(b, text, strlen(text), 0, &y), 0);
    assert_int_equal(x.n, y.n);
    assert_memory_equal(x.v, y.v, sizeof(int32_t) * (size_t)x.n);
    worker_ids_free(&x);
    worker_ids_free(&y);
    worker_tok_free(a);
    worker_tok_free(b);
    worker_tok_t *t = NULL;
    assert_int_equal(worker_tok_load_dir(TOKS "/roberta-bpe", 100, &t, &err), COMMON_USAGE);
    assert_non_null(strstr(err.message, "vocab_size is 100"));
    assert_int_equal(worker_tok_load_dir(TOKS "/roberta-bpe", 8000, &t, &err), 0);
    assert_int_equal(worker_tok_vocab_size(t), 8000);
    worker_tok_free(t);
}

/* A tokenizer.json under a long directory with more ids than config.json's vocab_size: the
 * printed line holds the whole path, the reason and what to do (one 256-byte text cut it). */
static void test_long_path_whole(void **state) {
    (void)state;
    char sub[151], path[600], line[COMMON_ERR_LINE_MAX];
    memset(sub, 'd', sizeof sub - 1);
    sub[sizeof sub - 1] = '\0';
    common_err_t err;
    assert_int_equal(load_text("{" WP_MODEL "}", sub, 1, path, sizeof path, &err), COMMON_USAGE);
    common_err_line(&err, line, sizeof line);
    printf("  %s\n", line);
    char want[800];
    snprintf(want, sizeof want,
             "%s has ids up to 1, config.json's vocab_size is 1 (the extra ids have no embedding); "
             "use the tokenizer the checkpoint was trained with",
             path);
    assert_string_equal(line, want);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bert_wordpiece),
        cmocka_unit_test(test_roberta_bpe),
        cmocka_unit_test(test_xlmr_unigram),
        cmocka_unit_test(test_deberta_unigram),
        cmocka_unit_test(test_variants),
        cmocka_unit_test(test_load_errors),
        cmocka_unit_test(test_fallback_and_vocab_size),
        cmocka_unit_test(test_long_path_whole),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
