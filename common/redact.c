#include "common/redact.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static int secret_key_ends_at(const char *text, const char *end) {
    static const char *const suffixes[] = {"password", "secret"};
    for (size_t i = 0; i < sizeof(suffixes) / sizeof(suffixes[0]); i++) {
        size_t n = strlen(suffixes[i]);
        if ((size_t)(end - text) >= n && !strncasecmp(end - n, suffixes[i], n)) return 1;
    }
    return 0;
}

/* Where the secret starting at s ends: a URL password at the user info's '@' (NULL when s is
 * not in one), a KEY=VALUE value at its closing quote or the first space. */
static const char *url_password_end(const char *s) {
    for (const char *p = s; *p && !strchr("/?#\"' \t\r\n", *p); p++)
        if (*p == '@') {
            const char *last = p; /* the user info ends at the authority's last '@' */
            for (const char *q = p + 1; *q && !strchr("/?#\"' \t\r\n", *q); q++)
                if (*q == '@') last = q;
            return last;
        }
    return NULL;
}

char *common_redact(const char *text, char *out, size_t outlen) {
    if (!outlen) return out;
    char *copy = strdup(text ? text : "");
    if (!copy) {
        snprintf(out, outlen, "(message withheld: out of memory)");
        return out;
    }
    size_t o = 0;
    const char *p = copy;
#define PUT(ch)                                                                                    \
    do {                                                                                           \
        char ch_ = (ch); /* evaluated even when out is full: the caller's p++ must happen */       \
        if (o + 1 < outlen) out[o++] = ch_;                                                        \
    } while (0)
    const char *auth = NULL; /* inside a URL's authority: just after "://" */
    while (*p) {
        if (!strncmp(p, "://", 3)) {
            for (int i = 0; i < 3; i++)
                PUT(*p++);
            auth = p;
            continue;
        }
        if (auth && *p == ':') { /* user:password@ */
            const char *at = url_password_end(p + 1);
            if (at) {
                PUT(':');
                for (const char *m = "***"; *m; m++)
                    PUT(*m);
                p = at;
                auth = NULL;
                continue;
            }
        }
        if (auth && strchr("/?#@ \t\r\n", *p)) auth = NULL;
        if (*p == '=' && p > copy) {
            const char *k = p;
            while (k > copy && k[-1] == ' ')
                k--;
            if (secret_key_ends_at(copy, k)) {
                PUT('=');
                p++;
                while (*p == ' ')
                    PUT(*p++);
                char quote = (*p == '\'' || *p == '"') ? *p : 0;
                if (quote) PUT(*p++);
                while (*p && (quote ? *p != quote : !isspace((unsigned char)*p) && *p != '"'))
                    p++;
                for (const char *m = "***"; *m; m++)
                    PUT(*m);
                continue;
            }
        }
        PUT(*p++);
    }
#undef PUT
    out[o] = '\0';
    free(copy);
    return out;
}
