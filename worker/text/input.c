#include "worker/text/input.h"

#include <errno.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "common/err.h"

struct worker_input {
    FILE *f; /* borrowed */
    int jsonl;
    long line;      /* lines read so far */
    long text_line; /* line of the last text returned */
    char *buf;      /* (cap) getline's line buffer */
    size_t cap;
    char *text; /* (text_cap) JSONL: the decoded "text" of the current line */
    size_t text_cap;
};

common_status_t worker_input_open(FILE *f, int jsonl, worker_input_t **out, common_err_t *e) {
    *out = NULL;
    worker_input_t *in = calloc(1, sizeof(*in));
    if (!in) return common_err_set(e, COMMON_FATAL, "out of memory");
    in->f = f;
    in->jsonl = jsonl;
    *out = in;
    return COMMON_OK;
}

static int all_space(const char *s, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (s[i] != ' ' && s[i] != '\t' && s[i] != '\r' && s[i] != '\n') return 0;
    return 1;
}

int worker_input_next(worker_input_t *in, const char **text, size_t *len, common_err_t *e) {
    for (;;) {
        errno = 0;
        ssize_t got = getline(&in->buf, &in->cap, in->f);
        if (got < 0) {
            if (ferror(in->f)) {
                common_err_set(e, COMMON_FATAL, "line %ld: read error: %s", in->line + 1,
                               errno ? strerror(errno) : "I/O error");
                return -1;
            }
            return 0;
        }
        in->line++;
        size_t n = (size_t)got;
        if (n > 0 && in->buf[n - 1] == '\n') n--;
        if (n > 0 && in->buf[n - 1] == '\r') n--;
        in->buf[n] = 0;
        if (!in->jsonl) {
            in->text_line = in->line;
            *text = in->buf;
            *len = n;
            return 1;
        }
        if (all_space(in->buf, n)) continue;
        json_error_t jerr;
        /* JSON_ALLOW_NUL: a "\u0000" inside the text is data, not an error. */
        json_t *root = json_loadb(in->buf, n, JSON_ALLOW_NUL | JSON_DECODE_ANY, &jerr);
        if (!root) {
            common_err_set(e, COMMON_USAGE, "line %ld: invalid JSON: %s", in->line, jerr.text);
            return -1;
        }
        json_t *t = json_object_get(root, "text");
        if (!json_is_object(root) || !json_is_string(t)) {
            json_decref(root);
            common_err_set(e, COMMON_USAGE,
                           "line %ld: not a JSON object with a string \"text\" field", in->line);
            return -1;
        }
        size_t tn = json_string_length(t);
        if (tn + 1 > in->text_cap) {
            char *nt = realloc(in->text, tn + 1);
            if (!nt) {
                json_decref(root);
                common_err_set(e, COMMON_FATAL, "line %ld: out of memory", in->line);
                return -1;
            }
            in->text = nt;
            in->text_cap = tn + 1;
        }
        memcpy(in->text, json_string_value(t), tn);
        in->text[tn] = 0;
        json_decref(root);
        in->text_line = in->line;
        *text = in->text;
        *len = tn;
        return 1;
    }
}

long worker_input_line(const worker_input_t *in) {
    return in->text_line;
}

void worker_input_free(worker_input_t *in) {
    if (!in) return;
    free(in->buf);
    free(in->text);
    free(in);
}
