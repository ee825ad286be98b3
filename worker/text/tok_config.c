/* tokenizer_config.json -> worker_tok_config_t. */
#include "worker/text/tok_config.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/err.h"

static const worker_tok_config_t uncased = {.lower = 1, .strip_accents = 1, .chinese_chars = 1};

/* tokenizer_config.json's object -> tok (already holding the defaults). */
static common_status_t tok_config_from_json(json_t *root, const char *path,
                                            worker_tok_config_t *tok, common_err_t *e) {
    json_t *v = json_object_get(root, "do_lower_case");
    json_t *sa = json_object_get(root, "strip_accents");
    json_t *cjk = json_object_get(root, "tokenize_chinese_chars");
    if (v && !json_is_boolean(v)) {
        return common_err_set(e, COMMON_USAGE, "%s: \"do_lower_case\" must be true or false", path);
    }
    if (sa && !json_is_null(sa) && !json_is_boolean(sa)) {
        return common_err_set(e, COMMON_USAGE, "%s: \"strip_accents\" must be true, false or null",
                              path);
    }
    if (cjk && !json_is_boolean(cjk)) {
        return common_err_set(e, COMMON_USAGE,
                              "%s: \"tokenize_chinese_chars\" must be true or false", path);
    }
    if (v) tok->lower = json_is_true(v);
    tok->strip_accents = sa && !json_is_null(sa) ? json_is_true(sa) : tok->lower;
    if (cjk) tok->chinese_chars = json_is_true(cjk);
    return COMMON_OK;
}

common_status_t worker_tok_config_read(const char *dir, worker_tok_config_t *tok, common_err_t *e) {
    *tok = uncased;
    size_t n = strlen(dir) + sizeof "/tokenizer_config.json";
    char *path = malloc(n);
    if (!path) return common_err_set(e, COMMON_FATAL, "%s: out of memory", dir);
    snprintf(path, n, "%s/tokenizer_config.json", dir);
    common_status_t rc = COMMON_OK;
    if (access(path, F_OK) != 0) goto out; /* BERT uncased is the default */
    json_error_t jerr;
    json_t *root = json_load_file(path, 0, &jerr);
    if (!root) {
        rc = common_err_set(e, COMMON_USAGE, "%s: invalid JSON at line %d: %s", path, jerr.line,
                            jerr.text);
        goto out;
    }
    rc = tok_config_from_json(root, path, tok, e);
    json_decref(root);
out:
    free(path);
    return rc;
}

common_status_t worker_tok_config_parse(const char *json, size_t len, const char *name,
                                        worker_tok_config_t *tok, common_err_t *e) {
    *tok = uncased;
    json_error_t jerr;
    json_t *root = json_loadb(json, len, 0, &jerr);
    if (!root)
        return common_err_set(e, COMMON_USAGE, "%s: invalid JSON at line %d: %s", name, jerr.line,
                              jerr.text);
    common_status_t rc = tok_config_from_json(root, name, tok, e);
    json_decref(root);
    return rc;
}
