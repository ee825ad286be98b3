/* Fuzz target: worker_tok_encode on arbitrary bytes with the demo model's vocabulary.
 * Input: byte 0 picks the tokenizer_config.json options (bit 0 do_lower_case, bit 1
 * strip_accents, bit 2 tokenize_chinese_chars), byte 1 the maximum length (0 = none), the
 * rest is the text. The ASCII fast path and the general path must agree on every text. */
#include <stdint.h>
#include <string.h>

#include "tests/fuzz/fuzz_util.h"
#include "worker/text/tokenizer.h"

static worker_tok_t *toks[8];
static int32_t sp_cls, sp_sep;

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    const char *vocab = getenv("RECLASS_FUZZ_VOCAB");
    if (!vocab) vocab = RECLASS_SOURCE_DIR "/deploy/models/clinc150-bert-mini/vocab.txt";
    common_err_t err;
    for (int o = 0; o < 8; o++) {
        worker_tok_config_t opts = {
            .lower = o & 1, .strip_accents = (o >> 1) & 1, .chinese_chars = (o >> 2) & 1};
        if (worker_tok_init(vocab, &opts, &toks[o], &err) != 0) {
            fprintf(stderr, "fuzz_tokenizer: %s\n", err.message);
            abort();
        }
    }
    /* [CLS] and [SEP] ids, read back from an encoding of nothing. */
    worker_ids_t ids = {0};
    FUZZ_CHECK(worker_tok_encode(toks[0], "", 0, 0, &ids) == 0 && ids.n == 2);
    sp_cls = ids.v[0];
    sp_sep = ids.v[1];
    worker_ids_free(&ids);
    return 0;
}

static void check_ids(const worker_tok_t *tok, const worker_ids_t *ids, int max_len) {
    int vocab = worker_tok_vocab_size(tok);
    FUZZ_CHECK(ids->n >= 2 && ids->n <= ids->cap && ids->n <= ids->n_full);
    FUZZ_CHECK(ids->v[0] == sp_cls && ids->v[ids->n - 1] == sp_sep);
    FUZZ_CHECK(ids->truncated == (ids->n < ids->n_full));
    if (max_len >= 2) FUZZ_CHECK(ids->n <= max_len);
    for (int i = 0; i < ids->n; i++)
        FUZZ_CHECK(ids->v[i] >= 0 && ids->v[i] < vocab);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (!toks[0]) LLVMFuzzerInitialize(NULL, NULL);
    if (size < 2) return 0;
    const worker_tok_t *tok = toks[data[0] & 7];
    int max_len = data[1];
    const char *text = (const char *)data + 2;
    size_t len = size - 2;

    worker_ids_t fast = {0}, general = {0};
    FUZZ_CHECK(worker_tok_encode_path(tok, text, len, max_len, &fast, 0) == 0);
    FUZZ_CHECK(worker_tok_encode_path(tok, text, len, max_len, &general, 1) == 0);
    check_ids(tok, &fast, max_len);
    check_ids(tok, &general, max_len);
    FUZZ_CHECK(fast.n == general.n && fast.n_full == general.n_full);
    FUZZ_CHECK(memcmp(fast.v, general.v, (size_t)fast.n * sizeof(int32_t)) == 0);
    worker_ids_free(&fast);
    worker_ids_free(&general);
    return 0;
}
