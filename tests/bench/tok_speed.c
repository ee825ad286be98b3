/* Tokenization speed on one core: worker_tok_encode over every text of a file of JSON strings
 * (one a line), for each tokenizer directory given (worker_tok_load_dir), truncating at 512.
 * One untimed pass, then REPEAT timed passes by CPU time; prints the median as one JSON line
 * per directory. tests/bench/tok_speed.py runs it beside Hugging Face tokenizers.
 *
 *     tok_speed TEXTS.jsonl REPEAT DIR... */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "worker/text/tokenizer.h"

/* CPU time of this (single-threaded) process: on a shared machine it moves less with other
 * load than the wall clock does. */
static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv) {
    if (argc < 4) {
        fprintf(stderr, "usage: tok_speed TEXTS.jsonl REPEAT DIR...\n");
        return 2;
    }
    FILE *f = fopen(argv[1], "r");
    if (!f) {
        perror(argv[1]);
        return 2;
    }
    size_t n = 0, cap = 1024;
    char **text = malloc(cap * sizeof(char *));
    size_t *len = malloc(cap * sizeof(size_t));
    char *line = NULL;
    size_t lcap = 0;
    while (text && len && getline(&line, &lcap, f) > 0) {
        json_t *s = json_loads(line, JSON_DECODE_ANY | JSON_ALLOW_NUL, NULL);
        if (!json_is_string(s)) {
            fprintf(stderr, "%s: line %zu is not a JSON string\n", argv[1], n + 1);
            return 2;
        }
        if (n == cap) {
            cap *= 2;
            text = realloc(text, cap * sizeof(char *));
            len = realloc(len, cap * sizeof(size_t));
            if (!text || !len) return 2;
        }
        len[n] = json_string_length(s);
        text[n] = malloc(len[n] + 1);
        memcpy(text[n], json_string_value(s), len[n] + 1);
        n++;
        json_decref(s);
    }
    free(line);
    fclose(f);
    int repeat = atoi(argv[2]);
    if (repeat < 1) repeat = 1;
    double *t = malloc(sizeof(double) * (size_t)repeat);
    for (int d = 3; d < argc; d++) {
        common_err_t err;
        worker_tok_t *tok = NULL;
        if (worker_tok_load_dir(argv[d], 0, &tok, &err) != 0) {
            fprintf(stderr, "tok_speed: %s\n", err.message);
            return 2;
        }
        worker_ids_t ids = {0};
        long tokens = 0;
        for (int r = -1; r < repeat; r++) {
            double t0 = now();
            long k = 0;
            for (size_t i = 0; i < n; i++) {
                if (worker_tok_encode(tok, text[i], len[i], 512, &ids) != 0) return 1;
                k += ids.n;
            }
            if (r >= 0) t[r] = now() - t0;
            tokens = k;
        }
        qsort(t, (size_t)repeat, sizeof(double), cmp_double);
        double med = t[repeat / 2];
        printf("{\"dir\": \"%s\", \"texts\": %zu, \"tokens\": %ld, \"seconds\": %.4f, "
               "\"texts_per_s\": %.0f, \"tokens_per_s\": %.0f}\n",
               argv[d], n, tokens, med, (double)n / med, (double)tokens / med);
        worker_ids_free(&ids);
        worker_tok_free(tok);
    }
    for (size_t i = 0; i < n; i++)
        free(text[i]);
    free(text);
    free(len);
    free(t);
    return 0;
}
