/* reclass tokenize: texts on stdin -> one JSON array of token ids per line on stdout. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/err.h"
#include "worker/cli/cli.h"
#include "worker/text/input.h"
#include "worker/text/tokenizer.h"

/* The options, set into the caller's variables. */
#define TOKENIZE_OPTS(model, jsonl, max_len)                                                       \
    {                                                                                              \
        worker_cli_opt_model(                                                                      \
            model, 0, 0,                                                                           \
            "model directory with tokenizer.json (Hugging Face tokenizers), or else vocab.txt\n"   \
            "      and optionally tokenizer_config.json (do_lower_case, strip_accents,\n"          \
            "      tokenize_chinese_chars; BERT uncased when absent)"),                            \
            {"jsonl",                                                                              \
             CLI_FLAG,                                                                             \
             jsonl,                                                                                \
             0,                                                                                    \
             0,                                                                                    \
             NULL,                                                                                 \
             NULL,                                                                                 \
             "input is JSON lines with a string \"text\" field (other fields are ignored, empty\n" \
             "      lines skipped); default: one text per line",                                   \
             NULL},                                                                                \
            {"max-len",                                                                            \
             CLI_LONG,                                                                             \
             max_len,                                                                              \
             2,                                                                                    \
             INT_MAX,                                                                              \
             NULL,                                                                                 \
             "N",                                                                                  \
             "truncate to N ids (N >= 2), keeping [CLS] first and [SEP] last; default: no\n"       \
             "      truncation",                                                                   \
             NULL},                                                                                \
        {                                                                                          \
            NULL, CLI_FLAG, NULL, 0, 0, NULL, NULL, NULL, NULL                                     \
        }                                                                                          \
    }

static void tokenize_usage(FILE *f) {
    fprintf(f, "usage: reclass tokenize --model DIR [--jsonl] [--max-len N]\n\n"
               "Reads texts from stdin and writes, for each, one JSON array of token ids\n"
               "([CLS] ... [SEP]) on its own line, exactly as Hugging Face's BertTokenizerFast.\n\n"
               "options:\n");
    const char *model;
    int jsonl;
    long max_len;
    const cli_opt_t opts[] = TOKENIZE_OPTS(&model, &jsonl, &max_len);
    worker_cli_print_opts(f, opts);
    fprintf(f, "  -h, --help\n      this help\n");
}

/* Writes "[a,b,c]\n" into a stdio buffer; snprintf per id would dominate the runtime. */
static void write_ids(FILE *f, const worker_ids_t *ids) {
    char buf[16];
    putc_unlocked('[', f);
    for (int i = 0; i < ids->n; i++) {
        if (i) putc_unlocked(',', f);
        uint32_t v = (uint32_t)ids->v[i];
        int n = 0;
        do {
            buf[n++] = (char)('0' + v % 10);
            v /= 10;
        } while (v);
        while (n)
            putc_unlocked(buf[--n], f);
    }
    putc_unlocked(']', f);
    putc_unlocked('\n', f);
}

common_status_t worker_cmd_tokenize(int argc, char **argv) {
    const char *model = NULL;
    int jsonl = 0;
    long max_len = 0;
    const cli_opt_t opts[] = TOKENIZE_OPTS(&model, &jsonl, &max_len);
    int first = 0, prc = worker_cli_parse("tokenize", argc, argv, opts, tokenize_usage, &first);
    if (prc != COMMON_OK) return prc;
    if (first < argc) {
        common_logf(stderr, "unexpected argument '%s' (texts come on stdin)\n", argv[first]);
        return COMMON_USAGE;
    }
    if (!model) {
        common_logf(stderr, "--model DIR is required (see --help)\n");
        return COMMON_USAGE;
    }

    common_err_t e;
    worker_tok_t *tok = NULL;
    common_status_t st = worker_tok_load_dir(model, 0, &tok, &e);
    if (st != COMMON_OK) {
        common_err_print(stderr, &e);
        return st;
    }
    worker_input_t *in = NULL;
    if ((st = worker_input_open(stdin, jsonl, &in, &e)) != COMMON_OK) {
        common_err_print(stderr, &e);
        worker_tok_free(tok);
        return st;
    }
    static char obuf[1 << 16];
    setvbuf(stdout, obuf, _IOFBF, sizeof(obuf));

    worker_ids_t ids = {0};
    common_status_t rc = COMMON_OK;
    int got;
    const char *text;
    size_t len;
    while ((got = worker_input_next(in, &text, &len, &e)) == 1) {
        if (worker_tok_encode(tok, text, len, (int)max_len, &ids) != 0) {
            common_logf(stderr, "line %ld: out of memory\n", worker_input_line(in));
            rc = COMMON_FATAL;
            break;
        }
        write_ids(stdout, &ids);
    }
    if (got < 0) {
        common_err_print(stderr, &e);
        rc = e.code;
    }
    if (fflush(stdout) != 0 && rc == COMMON_OK) {
        common_logf(stderr, "cannot write output: %s\n", strerror(errno));
        rc = COMMON_FATAL;
    }
    worker_ids_free(&ids);
    worker_input_free(in);
    worker_tok_free(tok);
    return rc;
}
