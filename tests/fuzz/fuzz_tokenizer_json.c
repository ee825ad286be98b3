/* Fuzz target: tokenizer.json loading and encoding (worker_tok_load_dir, worker_tok_encode).
 * Input: byte 0 picks the mode. Below 0xC0: byte 0 % 3 picks a fixture tokenizer
 * (tests/fixtures/tokenizers: WordPiece, byte-level BPE, Unigram with Precompiled), byte 1 the
 * maximum length (0 = none), the rest is the text. From 0xC0: the rest is a tokenizer.json,
 * which must load or be refused with a message, and a loaded one must encode a few texts. */
#include <stdint.h>
#include <string.h>

#include "tests/fuzz/fuzz_util.h"
#include "worker/text/tokenizer.h"

static worker_tok_t *toks[3];
static int32_t first_id[3], last_id[3];

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc;
    (void)argv;
    static const char *names[3] = {"bert-wordpiece", "roberta-bpe", "xlmr-unigram"};
    common_err_t err;
    char dir[1024];
    for (int i = 0; i < 3; i++) {
        snprintf(dir, sizeof dir, "%s/tests/fixtures/tokenizers/%s", RECLASS_SOURCE_DIR, names[i]);
        if (worker_tok_load_dir(dir, 0, &toks[i], &err) != 0) {
            fprintf(stderr, "fuzz_tokenizer_json: %s\n", err.message);
            abort();
        }
        worker_ids_t ids = {0};
        FUZZ_CHECK(worker_tok_encode(toks[i], "", 0, 0, &ids) == 0 && ids.n == 2);
        first_id[i] = ids.v[0];
        last_id[i] = ids.v[1];
        worker_ids_free(&ids);
    }
    return 0;
}

static void check_ids(const worker_tok_t *tok, const worker_ids_t *ids, int max_len) {
    int vocab = worker_tok_vocab_size(tok);
    FUZZ_CHECK(ids->n <= ids->cap && ids->n <= ids->n_full);
    FUZZ_CHECK(ids->truncated == (ids->n < ids->n_full));
    if (max_len >= 2) FUZZ_CHECK(ids->n <= max_len);
    for (int i = 0; i < ids->n; i++)
        FUZZ_CHECK(ids->v[i] >= 0 && ids->v[i] < vocab);
}

static void encode_file(const uint8_t *data, size_t size) {
    const char *path = fuzz_write_tmp("tokenizer.json", data, size);
    char dir[4096];
    common_err_t err = {0};
    snprintf(dir, sizeof dir, "%s", path);
    *strrchr(dir, '/') = 0;
    worker_tok_t *tok = NULL;
    if (worker_tok_load_dir(dir, 0, &tok, &err) != 0) {
        FUZZ_CHECK(err.message[0] != 0 && tok == NULL);
        return;
    }
    static const char *texts[] = {"", "Hello world!", "  caf\xc3\xa9  \xe4\xbd\xa0\xe5\xa5\xbd ",
                                  "[CLS] <s> <mask> x\xff", "a\tb\nc 123 'll"};
    worker_ids_t ids = {0};
    for (size_t i = 0; i < sizeof texts / sizeof texts[0]; i++) {
        FUZZ_CHECK(worker_tok_encode(tok, texts[i], strlen(texts[i]), 8, &ids) == 0);
        check_ids(tok, &ids, 8);
    }
    worker_ids_free(&ids);
    worker_tok_free(tok);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (!toks[0]) LLVMFuzzerInitialize(NULL, NULL);
    if (size < 1) return 0;
    if (data[0] >= 0xC0) {
        encode_file(data + 1, size - 1);
        return 0;
    }
    if (size < 2) return 0;
    int k = data[0] % 3, max_len = data[1];
    worker_ids_t ids = {0};
    FUZZ_CHECK(worker_tok_encode(toks[k], (const char *)data + 2, size - 2, max_len, &ids) == 0);
    check_ids(toks[k], &ids, max_len);
    FUZZ_CHECK(ids.n >= 2 && ids.v[0] == first_id[k] && ids.v[ids.n - 1] == last_id[k]);
    worker_ids_free(&ids);
    return 0;
}
