/* worker_tok_load_dir: which tokenizer a checkpoint directory carries. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "worker/text/hf/hf.h"
#include "worker/text/tokenizer_int.h"

static char *join(const char *dir, const char *file) {
    size_t n = strlen(dir) + strlen(file) + 2;
    char *p = malloc(n);
    if (p) snprintf(p, n, "%s/%s", dir, file);
    return p;
}

int worker_tok_load_dir(const char *dir, int vocab_size, worker_tok_t **out, char *err,
                        size_t errlen) {
    *out = NULL;
    char *json = join(dir, "tokenizer.json");
    if (!json) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    if (access(json, F_OK) != 0) { /* an old BERT checkpoint: vocab.txt + tokenizer_config.json */
        free(json);
        worker_tok_config_t tc;
        if (worker_tok_config_read(dir, &tc, err, errlen) != 0) return -1;
        tc.vocab_size = vocab_size;
        char *vocab = join(dir, "vocab.txt");
        if (!vocab) {
            snprintf(err, errlen, "out of memory");
            return -1;
        }
        int rc = worker_tok_init(vocab, &tc, out, err, errlen);
        free(vocab);
        return rc;
    }
    hf_tok_t *hf = NULL;
    int rc = hf_tok_load_file(json, &hf, err, errlen);
    if (rc == 0 && vocab_size > 0 && hf->vocab_size > vocab_size) {
        snprintf(err, errlen,
                 "%s has ids up to %d, config.json's vocab_size is %d: the extra ids have no "
                 "embedding; use the tokenizer the checkpoint was trained with",
                 json, hf->vocab_size - 1, vocab_size);
        rc = -1;
    }
    free(json);
    worker_tok_t *t = rc == 0 ? calloc(1, sizeof(*t)) : NULL;
    if (rc == 0 && !t) {
        snprintf(err, errlen, "out of memory");
        rc = -1;
    }
    if (rc != 0) {
        hf_tok_free(hf);
        return -1;
    }
    t->hf = hf;
    *out = t;
    return 0;
}
