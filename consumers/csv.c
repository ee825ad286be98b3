#include "consumers/csv.h"

#include <stdlib.h>
#include <string.h>

#define CSV_MAX_RECORD (64u << 20) /* bounds memory when a stray quote swallows the file */

struct consumers_csv {
    FILE *f;
    long line;   /* current physical line, 1-based */
    int started; /* BOM check done */
    char *data;  /* (record bytes + one NUL per field) */
    size_t data_len, data_cap;
    size_t *start; /* (fields) offset of each field in data */
    size_t *len;   /* (fields) */
    char **ptr;    /* (fields) */
    size_t n, cap;
};

int consumers_csv_init(FILE *f, consumers_csv_t **out) {
    *out = calloc(1, sizeof(**out));
    if (!*out) return -1;
    (*out)->f = f;
    (*out)->line = 1;
    return 0;
}

void consumers_csv_free(consumers_csv_t *c) {
    if (!c) return;
    free(c->data);
    free(c->start);
    free(c->len);
    free(c->ptr);
    free(c);
}

static int put(consumers_csv_t *c, char ch) {
    if (c->data_len == c->data_cap) {
        if (c->data_cap >= CSV_MAX_RECORD) return -1;
        size_t cap = c->data_cap ? 2 * c->data_cap : 4096;
        char *d = realloc(c->data, cap);
        if (!d) return -1;
        c->data = d;
        c->data_cap = cap;
    }
    c->data[c->data_len++] = ch;
    return 0;
}

static int field_begin(consumers_csv_t *c) {
    if (c->n == c->cap) {
        size_t cap = c->cap ? 2 * c->cap : 32;
        size_t *s = realloc(c->start, cap * sizeof(*s));
        if (s) c->start = s;
        size_t *l = realloc(c->len, cap * sizeof(*l));
        if (l) c->len = l;
        char **p = realloc(c->ptr, cap * sizeof(*p));
        if (p) c->ptr = p;
        if (!s || !l || !p) return -1;
        c->cap = cap;
    }
    c->start[c->n] = c->data_len;
    return 0;
}

static int field_end(consumers_csv_t *c) {
    c->len[c->n] = c->data_len - c->start[c->n];
    c->n++;
    return put(c, '\0');
}

/* After a CR: swallow the LF of a CRLF pair. */
static void eat_lf(consumers_csv_t *c) {
    int ch = getc(c->f);
    if (ch != '\n' && ch != EOF) ungetc(ch, c->f);
}

enum { AT_START, UNQUOTED, QUOTED, AFTER_QUOTE };

common_status_t consumers_csv_next(consumers_csv_t *c, consumers_csv_row_t *row, common_err_t *e) {
    if (!c->started) {
        c->started = 1;
        int b0 = getc(c->f);
        if (b0 == 0xEF) {
            int b1 = getc(c->f), b2 = getc(c->f);
            if (b1 != 0xBB || b2 != 0xBF)
                return common_err_set(e, COMMON_USAGE, "line 1: bad byte-order mark");
        } else if (b0 != EOF) {
            ungetc(b0, c->f);
        }
    }
    c->n = 0;
    c->data_len = 0;
    int ch;
    /* Blank lines carry no record. */
    for (;;) {
        ch = getc(c->f);
        if (ch == '\n') {
            c->line++;
        } else if (ch == '\r') {
            eat_lf(c);
            c->line++;
        } else {
            break;
        }
    }
    if (ch == EOF) return COMMON_DONE;
    ungetc(ch, c->f);
    long first_line = c->line, quote_line = 0;
    int state = AT_START;
    if (field_begin(c)) goto oom;
    for (;;) {
        ch = getc(c->f);
        switch (state) {
        case AT_START:
        case UNQUOTED:
            if (ch == '"' && state == AT_START) {
                state = QUOTED;
                quote_line = c->line;
                continue;
            }
            if (ch == ',') {
                if (field_end(c) || field_begin(c)) goto oom;
                state = AT_START;
                continue;
            }
            if (ch == '\n' || ch == '\r' || ch == EOF) goto record_end;
            if (put(c, (char)ch)) goto oom;
            state = UNQUOTED;
            continue;
        case QUOTED:
            if (ch == EOF)
                return common_err_set(e, COMMON_USAGE,
                                      "line %ld: quoted field never closed (opened on line %ld)",
                                      c->line, quote_line);
            if (ch == '"') {
                state = AFTER_QUOTE;
                continue;
            }
            if (ch == '\n') c->line++;
            if (ch == '\r') {
                int nx = getc(c->f);
                if (nx != '\n') c->line++; /* a lone CR is a newline of its own */
                if (nx != EOF) ungetc(nx, c->f);
            }
            if (put(c, (char)ch)) goto oom;
            continue;
        case AFTER_QUOTE:
            if (ch == '"') {
                if (put(c, '"')) goto oom;
                state = QUOTED;
                continue;
            }
            if (ch == ',') {
                if (field_end(c) || field_begin(c)) goto oom;
                state = AT_START;
                continue;
            }
            if (ch == '\n' || ch == '\r' || ch == EOF) goto record_end;
            return common_err_set(e, COMMON_USAGE,
                                  "line %ld: unexpected '%c' after a closing quote (quotes "
                                  "inside a quoted field are written \"\")",
                                  c->line, ch >= 32 && ch < 127 ? ch : '?');
        }
    }
record_end:
    if (ch == '\r') eat_lf(c);
    if (ch != EOF) c->line++;
    if (field_end(c)) goto oom;
    for (size_t i = 0; i < c->n; i++)
        c->ptr[i] = c->data + c->start[i];
    row->n = c->n;
    row->field = c->ptr;
    row->len = c->len;
    row->line = first_line;
    return COMMON_OK;
oom:
    return common_err_set(e, COMMON_USAGE,
                          "line %ld: record larger than %u MiB (an unclosed quote?)", first_line,
                          CSV_MAX_RECORD >> 20);
}

int consumers_csv_column(const consumers_csv_row_t *h, const char *name) {
    for (size_t i = 0; i < h->n; i++)
        if (strcmp(h->field[i], name) == 0) return (int)i;
    return -1;
}
