#include "worker/submit/input.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "common/err.h"
#include "consumers/csv.h"

struct worker_submit_input {
    FILE *f;
    int jsonl;
    const char *path, *text_key, *id_key;
    consumers_csv_t *csv;
    int text_col, id_col; /* CSV column indexes; id_col -1 = record number */
    long recno;           /* records returned so far */
    char idbuf[32];
    char *line; /* (getline buffer) JSONL only */
    size_t line_cap;
    long lineno;
    json_t *obj;     /* current JSONL object; owns the strings handed out */
    char *text_copy; /* JSONL text, NUL-terminated copy */
};

static int ends_with(const char *s, const char *suffix) {
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && strcmp(s + n - m, suffix) == 0;
}

common_status_t worker_submit_input_open(const char *path, const char *text_key, const char *id_key,
                                         worker_submit_input_t **out, common_err_t *e) {
    *out = NULL;
    int jsonl = ends_with(path, ".jsonl") || ends_with(path, ".ndjson");
    if (!jsonl && !ends_with(path, ".csv"))
        return common_err_set(e, COMMON_USAGE, "%s: the file name must end in .csv or .jsonl",
                              path);
    worker_submit_input_t *in = calloc(1, sizeof(*in));
    if (!in) return common_err_set(e, COMMON_USAGE, "out of memory");
    in->jsonl = jsonl;
    in->path = path;
    in->text_key = text_key;
    in->id_key = id_key;
    in->id_col = -1;
    in->f = fopen(path, "rb");
    if (!in->f) {
        common_err_set(e, COMMON_USAGE, "cannot open %s: %s", path, strerror(errno));
        free(in);
        return COMMON_USAGE;
    }
    *out = in;
    if (jsonl) return COMMON_OK;

    consumers_csv_row_t h;
    common_err_t ce = {.message = ""}; /* the reader's reason, when it gave one */
    if (consumers_csv_init(in->f, &in->csv) || consumers_csv_next(in->csv, &h, &ce) != COMMON_OK) {
        char why[COMMON_ERR_LINE_MAX];
        common_err_set(e, COMMON_USAGE, "%s: no CSV header row%s%s", path,
                       ce.message[0] ? ": " : "", common_err_line(&ce, why, sizeof(why)));
        goto fail;
    }
    in->text_col = consumers_csv_column(&h, text_key);
    if (id_key) in->id_col = consumers_csv_column(&h, id_key);
    const char *missing = in->text_col < 0 ? text_key : (id_key && in->id_col < 0 ? id_key : NULL);
    if (missing) { /* the header's names, as many as the message holds */
        char cols[sizeof(e->message)] = "";
        for (size_t i = 0, o = 0; i < h.n && o < sizeof(cols); i++)
            o +=
                (size_t)snprintf(cols + o, sizeof(cols) - o, "%s \"%s\"", i ? "," : "", h.field[i]);
        common_err_set(e, COMMON_USAGE,
                       "%s: no column \"%s\" in the header (columns:%s); pick one with %s", path,
                       missing, cols, missing == text_key ? "--text-column" : "--id-column");
        goto fail;
    }
    return COMMON_OK;
fail:
    worker_submit_input_free(in);
    *out = NULL;
    return COMMON_USAGE;
}

static common_status_t next_csv(worker_submit_input_t *in, worker_submit_rec_t *rec,
                                common_err_t *e) {
    consumers_csv_row_t row;
    common_err_t ce;
    common_status_t rc = consumers_csv_next(in->csv, &row, &ce);
    if (rc == COMMON_DONE) return COMMON_DONE;
    if (rc) {
        char why[COMMON_ERR_LINE_MAX];
        return common_err_set(e, rc, "%s: %s", in->path, common_err_line(&ce, why, sizeof(why)));
    }
    in->recno++;
    size_t need = (size_t)(in->text_col > in->id_col ? in->text_col : in->id_col) + 1;
    if (row.n < need)
        return common_err_set(e, COMMON_USAGE,
                              "%s: line %ld has %zu fields; the header promised at least %zu",
                              in->path, row.line, row.n, need);
    rec->text = row.field[in->text_col];
    rec->text_len = row.len[in->text_col];
    rec->line = row.line;
    if (in->id_col >= 0) {
        rec->id = row.field[in->id_col];
    } else {
        snprintf(in->idbuf, sizeof(in->idbuf), "%ld", in->recno);
        rec->id = in->idbuf;
    }
    return COMMON_OK;
}

static common_status_t next_jsonl(worker_submit_input_t *in, worker_submit_rec_t *rec,
                                  common_err_t *e) {
    json_decref(in->obj);
    in->obj = NULL;
    free(in->text_copy);
    in->text_copy = NULL;
    ssize_t n;
    for (;;) {
        n = getline(&in->line, &in->line_cap, in->f);
        if (n < 0) return COMMON_DONE;
        in->lineno++;
        size_t k = (size_t)n;
        while (k && (in->line[k - 1] == '\n' || in->line[k - 1] == '\r' || in->line[k - 1] == ' ' ||
                     in->line[k - 1] == '\t'))
            k--;
        if (k == 0) continue; /* blank line */
        json_error_t je;
        in->obj = json_loadb(in->line, k, JSON_ALLOW_NUL, &je);
        if (!json_is_object(in->obj))
            return common_err_set(e, COMMON_USAGE, "%s: line %ld is not a JSON object%s%s",
                                  in->path, in->lineno, in->obj ? "" : ": ",
                                  in->obj ? "" : je.text);
        break;
    }
    in->recno++;
    json_t *t = json_object_get(in->obj, in->text_key);
    if (!json_is_string(t))
        return common_err_set(e, COMMON_USAGE,
                              "%s: line %ld has no string \"%s\" (pick the key with --text-column)",
                              in->path, in->lineno, in->text_key);
    size_t tl = json_string_length(t);
    in->text_copy = malloc(tl + 1);
    if (!in->text_copy) return common_err_set(e, COMMON_USAGE, "out of memory");
    memcpy(in->text_copy, json_string_value(t), tl);
    in->text_copy[tl] = '\0';
    rec->text = in->text_copy;
    rec->text_len = tl;
    rec->line = in->lineno;

    json_t *id = json_object_get(in->obj, in->id_key ? in->id_key : "id");
    if (json_is_string(id)) {
        rec->id = json_string_value(id);
    } else if (json_is_integer(id)) {
        snprintf(in->idbuf, sizeof(in->idbuf), "%lld", (long long)json_integer_value(id));
        rec->id = in->idbuf;
    } else if (in->id_key) {
        return common_err_set(e, COMMON_USAGE, "%s: line %ld has no string or integer \"%s\"",
                              in->path, in->lineno, in->id_key);
    } else {
        snprintf(in->idbuf, sizeof(in->idbuf), "%ld", in->recno);
        rec->id = in->idbuf;
    }
    return COMMON_OK;
}

common_status_t worker_submit_input_next(worker_submit_input_t *in, worker_submit_rec_t *rec,
                                         common_err_t *e) {
    return in->jsonl ? next_jsonl(in, rec, e) : next_csv(in, rec, e);
}

void worker_submit_input_free(worker_submit_input_t *in) {
    if (!in) return;
    consumers_csv_free(in->csv);
    json_decref(in->obj);
    free(in->text_copy);
    free(in->line);
    if (in->f) fclose(in->f);
    free(in);
}
