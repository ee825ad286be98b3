/* tokenizer.json's normalizer and pre_tokenizer objects -> hf_norm_t / hf_pretok_t lists. A
 * type or an option this code does not implement is an error that names it. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/err.h"
#include "worker/text/hf/hf_load.h"

static int b64_val(int c) {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == '+') return 62;
    if (c == '/') return 63;
    return -1;
}

/* Standard base64 with padding, as the file carries precompiled_charsmap. */
static uint8_t *b64_decode(const char *s, size_t n, size_t *outn) {
    uint8_t *o = malloc(n / 4 * 3 + 3);
    if (!o) return NULL;
    size_t m = 0;
    uint32_t acc = 0;
    int bits = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] == '=') break;
        int v = b64_val((uint8_t)s[i]);
        if (v < 0) {
            free(o);
            return NULL;
        }
        acc = acc << 6 | (uint32_t)v;
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            o[m++] = (uint8_t)(acc >> bits);
        }
    }
    *outn = m;
    return o;
}

int hf_json_flag(json_t *o, const char *key, int dflt) {
    json_t *v = json_object_get(o, key);
    return json_is_boolean(v) ? json_is_true(v) : dflt;
}

char *hf_json_strdup(json_t *v, size_t *n) {
    if (!json_is_string(v)) return NULL;
    size_t len = json_string_length(v);
    char *s = malloc(len + 1);
    if (!s) return NULL;
    memcpy(s, json_string_value(v), len);
    s[len] = 0;
    if (n) *n = len;
    return s;
}

/* Replace's pattern: {"String": s}, or {"Regex": r} of the one shape converters write for
 * SentencePiece models, a character repeated ("x{n,}" or "x+"). */
static int replace_pattern(json_t *pat, hf_norm_t *nm, const char *name, common_err_t *e) {
    json_t *str = json_object_get(pat, "String"), *re = json_object_get(pat, "Regex");
    if (json_is_string(str)) {
        nm->pat = hf_json_strdup(str, &nm->patn);
        return nm->pat ? 0 : (common_err_set(e, COMMON_FATAL, "out of memory"), -1);
    }
    if (json_is_string(re)) {
        const char *r = json_string_value(re);
        size_t rn = json_string_length(re);
        size_t cn = 1;
        if (rn && ((uint8_t)r[0] & 0xC0) == 0xC0)
            while (cn < rn && ((uint8_t)r[cn] & 0xC0) == 0x80)
                cn++;
        int min = 0;
        char tail[16] = {0};
        if (rn > cn && rn - cn < sizeof tail) memcpy(tail, r + cn, rn - cn);
        if (strcmp(tail, "+") == 0)
            min = 1;
        else if (tail[0] == '{' && sscanf(tail, "{%d,}", &min) == 1 && min > 0) {
            char chk[16];
            snprintf(chk, sizeof chk, "{%d,}", min);
            if (strcmp(chk, tail) != 0) min = 0;
        }
        int special = strchr("\\.^$|?*+()[]{}", r[0]) != NULL;
        if (min > 0 && !special) {
            nm->pat = malloc(cn);
            if (!nm->pat) return common_err_set(e, COMMON_FATAL, "out of memory"), -1;
            memcpy(nm->pat, r, cn);
            nm->patn = cn;
            nm->rep_min = min;
            return 0;
        }
        common_err_set(e, COMMON_USAGE,
                       "%s: normalizer Replace with the regex \"%.60s\" is not supported", name, r);
        return -1;
    }
    common_err_set(e, COMMON_USAGE, "%s: normalizer Replace: pattern must be String or Regex",
                   name);
    return -1;
}

static int add_norm(hf_load_t *L, hf_norm_t *nm) {
    hf_norm_t *v = realloc(L->t->norm, sizeof(*v) * (size_t)(L->t->n_norm + 1));
    if (!v) return -1;
    L->t->norm = v;
    v[L->t->n_norm++] = *nm;
    return 0;
}

int hf_load_normalizer(hf_load_t *L, json_t *o) {
    if (json_is_null(o) || !o) return 0;
    const char *ty = json_string_value(json_object_get(o, "type"));
    if (!ty) {
        common_err_set(L->e, COMMON_USAGE, "%s: a normalizer without \"type\"", L->name);
        return -1;
    }
    if (strcmp(ty, "Sequence") == 0) {
        json_t *list = json_object_get(o, "normalizers");
        size_t i;
        json_t *x;
        json_array_foreach(list, i, x) if (hf_load_normalizer(L, x) != 0) return -1;
        return 0;
    }
    hf_norm_t nm = {0};
    if (strcmp(ty, "BertNormalizer") == 0) {
        nm.kind = HN_BERT;
        nm.clean = hf_json_flag(o, "clean_text", 1);
        nm.cjk = hf_json_flag(o, "handle_chinese_chars", 1);
        nm.lower = hf_json_flag(o, "lowercase", 1);
        nm.strip = hf_json_flag(o, "strip_accents", nm.lower);
    } else if (strcmp(ty, "Lowercase") == 0) {
        nm.kind = HN_LOWER;
    } else if (strcmp(ty, "NFC") == 0) {
        nm.kind = HN_NFC;
    } else if (strcmp(ty, "NFD") == 0) {
        nm.kind = HN_NFD;
    } else if (strcmp(ty, "NFKC") == 0) {
        nm.kind = HN_NFKC;
    } else if (strcmp(ty, "NFKD") == 0) {
        nm.kind = HN_NFKD;
    } else if (strcmp(ty, "StripAccents") == 0) {
        nm.kind = HN_STRIP_ACCENTS;
    } else if (strcmp(ty, "Strip") == 0) {
        nm.kind = HN_STRIP;
        nm.left = hf_json_flag(o, "strip_left", 0);
        nm.right = hf_json_flag(o, "strip_right", 0);
    } else if (strcmp(ty, "Replace") == 0) {
        nm.kind = HN_REPLACE;
        if (replace_pattern(json_object_get(o, "pattern"), &nm, L->name, L->e) != 0) goto fail;
        nm.content = hf_json_strdup(json_object_get(o, "content"), &nm.contentn);
        if (!nm.content) goto bad;
    } else if (strcmp(ty, "Prepend") == 0) {
        nm.kind = HN_PREPEND;
        nm.content = hf_json_strdup(json_object_get(o, "prepend"), &nm.contentn);
        if (!nm.content) goto bad;
    } else if (strcmp(ty, "Precompiled") == 0) {
        nm.kind = HN_PRECOMPILED;
        json_t *m = json_object_get(o, "precompiled_charsmap");
        size_t bn = 0;
        uint8_t *blob =
            json_is_string(m) ? b64_decode(json_string_value(m), json_string_length(m), &bn) : NULL;
        if (!blob) goto bad;
        nm.pc = hf_precompiled_new(blob, bn, L->name, L->e);
        free(blob);
        if (!nm.pc) goto fail;
    } else {
        common_err_set(L->e, COMMON_USAGE, "%s: normalizer \"%s\" is not supported", L->name, ty);
        return -1;
    }
    if (add_norm(L, &nm) != 0) {
        hf_norm_free(&nm);
        common_err_set(L->e, COMMON_FATAL, "out of memory");
        return -1;
    }
    return 0;
bad:
    common_err_set(L->e, COMMON_USAGE, "%s: normalizer %s: missing or invalid settings", L->name,
                   ty);
fail:
    hf_norm_free(&nm);
    return -1;
}

static int behavior(json_t *o, int dflt, int *out) {
    json_t *v = json_object_get(o, "behavior");
    if (!v) {
        *out = dflt;
        return 0;
    }
    static const char *names[] = {"Removed", "Isolated", "MergedWithPrevious", "MergedWithNext",
                                  "Contiguous"};
    for (int i = 0; i < 5; i++)
        if (json_is_string(v) && strcmp(json_string_value(v), names[i]) == 0) {
            *out = i;
            return 0;
        }
    return -1;
}

static int add_pre(hf_load_t *L, hf_pretok_t *p) {
    hf_pretok_t *v = realloc(L->t->pre, sizeof(*v) * (size_t)(L->t->n_pre + 1));
    if (!v) return -1;
    L->t->pre = v;
    v[L->t->n_pre++] = *p;
    return 0;
}

int hf_load_pretokenizer(hf_load_t *L, json_t *o) {
    if (json_is_null(o) || !o) return 0;
    const char *ty = json_string_value(json_object_get(o, "type"));
    if (!ty) {
        common_err_set(L->e, COMMON_USAGE, "%s: a pre_tokenizer without \"type\"", L->name);
        return -1;
    }
    if (strcmp(ty, "Sequence") == 0) {
        json_t *list = json_object_get(o, "pretokenizers");
        size_t i;
        json_t *x;
        json_array_foreach(list, i, x) if (hf_load_pretokenizer(L, x) != 0) return -1;
        return 0;
    }
    hf_pretok_t p = {0};
    if (strcmp(ty, "BertPreTokenizer") == 0) {
        p.kind = HP_BERT;
    } else if (strcmp(ty, "ByteLevel") == 0) {
        p.kind = HP_BYTELEVEL;
        p.prefix_space = hf_json_flag(o, "add_prefix_space", 1);
        p.use_regex = hf_json_flag(o, "use_regex", 1);
    } else if (strcmp(ty, "Metaspace") == 0) {
        p.kind = HP_METASPACE;
        json_t *r = json_object_get(o, "replacement");
        const char *rs = json_string_value(r);
        if (!rs || json_string_length(r) == 0 || json_string_length(r) > 4) goto bad;
        p.repl_n = (int)json_string_length(r);
        memcpy(p.repl, rs, (size_t)p.repl_n);
        const char *ps = json_string_value(json_object_get(o, "prepend_scheme"));
        if (!ps) /* files before prepend_scheme: add_prefix_space */
            p.prepend = hf_json_flag(o, "add_prefix_space", 1) ? HM_ALWAYS : HM_NEVER;
        else if (strcmp(ps, "always") == 0)
            p.prepend = HM_ALWAYS;
        else if (strcmp(ps, "first") == 0)
            p.prepend = HM_FIRST;
        else if (strcmp(ps, "never") == 0)
            p.prepend = HM_NEVER;
        else
            goto bad;
        p.split = hf_json_flag(o, "split", 1);
    } else if (strcmp(ty, "Whitespace") == 0) {
        p.kind = HP_WHITESPACE;
    } else if (strcmp(ty, "WhitespaceSplit") == 0) {
        p.kind = HP_WSSPLIT;
    } else if (strcmp(ty, "Punctuation") == 0) {
        p.kind = HP_PUNCT;
        if (behavior(o, HB_ISOLATED, &p.behavior) != 0) goto bad;
    } else if (strcmp(ty, "Digits") == 0) {
        p.kind = HP_DIGITS;
        p.individual = hf_json_flag(o, "individual_digits", 0);
    } else if (strcmp(ty, "Split") == 0) {
        p.kind = HP_SPLIT;
        json_t *pat = json_object_get(o, "pattern");
        if (json_object_get(pat, "Regex")) {
            common_err_set(L->e, COMMON_USAGE,
                           "%s: pre_tokenizer Split with a Regex pattern is not supported",
                           L->name);
            return -1;
        }
        p.pat = hf_json_strdup(json_object_get(pat, "String"), &p.patn);
        if (!p.pat || p.patn == 0 || behavior(o, HB_REMOVED, &p.behavior) != 0) goto bad;
        p.invert = hf_json_flag(o, "invert", 0);
    } else {
        common_err_set(L->e, COMMON_USAGE, "%s: pre_tokenizer \"%s\" is not supported", L->name,
                       ty);
        return -1;
    }
    if (add_pre(L, &p) != 0) {
        hf_pretok_free(&p);
        common_err_set(L->e, COMMON_FATAL, "out of memory");
        return -1;
    }
    return 0;
bad:
    hf_pretok_free(&p);
    common_err_set(L->e, COMMON_USAGE, "%s: pre_tokenizer %s: missing or invalid settings", L->name,
                   ty);
    return -1;
}
