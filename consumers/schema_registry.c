/* Schema Registry client on libcurl (see consumers/schema_registry.h). One easy handle per
 * client keeps the connection (and TLS session) alive between lookups. */
#include "consumers/schema_registry.h"

#include <ctype.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <curl/curl.h>
#include <jansson.h>

#include "common/err.h"
#include "common/file.h"

#define REGISTRY_MAX_BODY (4 * 1024 * 1024) /* a schema answer larger than this is refused */

struct consumers_registry {
    CURL *curl;
    char *url;     /* as given, without a trailing '/' */
    char *shown;   /* url without credentials, for messages */
    char *ca_file; /* NULL: system store */
    char *auth;    /* "user:password" (basic) or NULL */
    char *bearer;  /* token or NULL */
    long timeout_ms;
    struct curl_slist *headers;
};

typedef struct {
    char *p;
    size_t len;
    int too_big;
} body_t;

static size_t on_body(char *data, size_t size, size_t n, void *ctx) {
    body_t *b = ctx;
    size_t add = size * n;
    if (b->len + add > REGISTRY_MAX_BODY) {
        b->too_big = 1;
        return 0;
    }
    char *p = realloc(b->p, b->len + add + 1);
    if (!p) return 0;
    memcpy(p + b->len, data, add);
    b->p = p;
    b->len += add;
    b->p[b->len] = '\0';
    return add;
}

/* "http://user:pw@host/x" -> "http://host/x" */
static char *strip_userinfo(const char *url) {
    const char *s = strstr(url, "://"), *at = s ? strchr(s + 3, '@') : NULL;
    const char *slash = s ? strchr(s + 3, '/') : NULL;
    if (!at || (slash && slash < at)) return strdup(url);
    size_t head = (size_t)(s + 3 - url);
    char *out = malloc(strlen(url) + 1);
    if (!out) return NULL;
    memcpy(out, url, head);
    strcpy(out + head, at + 1);
    return out;
}

static common_status_t read_auth(consumers_registry_t *r, const char *file, common_err_t *e) {
    char *txt = NULL;
    const char *kind = NULL, *val = NULL;
    if (file) {
        size_t len;
        txt = common_file_read(file, 64 * 1024, &len, e);
        if (!txt) return e->code = COMMON_USAGE; /* the user's credentials file */
        while (len && isspace((unsigned char)txt[len - 1]))
            txt[--len] = '\0';
        char *sp = strchr(txt, ' ');
        if (sp) {
            *sp = '\0';
            kind = txt;
            val = sp + 1;
        }
        if (!kind || (strcmp(kind, "basic") && strcmp(kind, "bearer")) || !*val) {
            free(txt);
            return common_err_set(e, COMMON_USAGE,
                                  "%s: expected one line \"basic user:password\" or \"bearer "
                                  "TOKEN\"",
                                  file);
        }
    } else if ((val = getenv("RECLASS_SCHEMA_REGISTRY_USER_INFO")) && *val) {
        kind = "basic";
    } else if ((val = getenv("RECLASS_SCHEMA_REGISTRY_TOKEN")) && *val) {
        kind = "bearer";
    }
    if (kind && !strcmp(kind, "basic")) {
        if (!strchr(val, ':')) {
            free(txt);
            return common_err_set(e, COMMON_USAGE,
                                  "schema registry basic auth: expected user:password");
        }
        r->auth = strdup(val);
    } else if (kind) {
        r->bearer = strdup(val);
    }
    free(txt);
    return COMMON_OK;
}

common_status_t consumers_registry_open(const consumers_registry_cfg_t *cfg,
                                        consumers_registry_t **out, common_err_t *e) {
    *out = NULL;
    if (!cfg->url || (strncmp(cfg->url, "http://", 7) && strncmp(cfg->url, "https://", 8)))
        return common_err_set(e, COMMON_USAGE,
                              "schema registry URL must start with http:// or https://");
    static int curl_ready;
    if (!curl_ready) { /* once per process, before any thread uses curl */
        if (curl_global_init(CURL_GLOBAL_DEFAULT))
            return common_err_set(e, COMMON_FATAL, "libcurl could not be initialised");
        curl_ready = 1;
    }
    consumers_registry_t *r = calloc(1, sizeof(*r));
    if (!r) return common_err_set(e, COMMON_FATAL, "out of memory");
    r->url = strdup(cfg->url);
    size_t n = r->url ? strlen(r->url) : 0;
    while (n && r->url[n - 1] == '/')
        r->url[--n] = '\0';
    r->shown = r->url ? strip_userinfo(r->url) : NULL;
    r->ca_file = cfg->ca_file ? strdup(cfg->ca_file) : NULL;
    r->timeout_ms = cfg->timeout_ms > 0 ? cfg->timeout_ms : CONSUMERS_REGISTRY_TIMEOUT_MS;
    r->curl = curl_easy_init();
    r->headers = curl_slist_append(NULL, "Accept: application/vnd.schemaregistry.v1+json, "
                                         "application/json");
    r->headers =
        curl_slist_append(r->headers, "Content-Type: application/vnd.schemaregistry.v1+json");
    if (!r->url || !r->shown || !r->curl || !r->headers || (cfg->ca_file && !r->ca_file)) {
        consumers_registry_free(r);
        return common_err_set(e, COMMON_FATAL, "out of memory");
    }
    common_status_t st = read_auth(r, cfg->auth_file, e);
    if (st) {
        consumers_registry_free(r);
        return st;
    }
    *out = r;
    return COMMON_OK;
}

void consumers_registry_free(consumers_registry_t *r) {
    if (!r) return;
    if (r->curl) curl_easy_cleanup(r->curl);
    curl_slist_free_all(r->headers);
    if (r->auth) memset(r->auth, 0, strlen(r->auth));
    if (r->bearer) memset(r->bearer, 0, strlen(r->bearer));
    free(r->auth);
    free(r->bearer);
    free(r->url);
    free(r->shown);
    free(r->ca_file);
    free(r);
}

const char *consumers_registry_url(const consumers_registry_t *r) {
    return r->shown;
}

/* One request; *status the HTTP status (0: no answer). Returns RETRY when no answer came. */
static common_status_t request(consumers_registry_t *r, const char *path, const char *post,
                               long *status, body_t *b, common_err_t *e) {
    char url[2048];
    snprintf(url, sizeof(url), "%s%s", r->url, path);
    CURL *c = r->curl;
    curl_easy_reset(c);
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, r->headers);
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, r->timeout_ms);
    curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, r->timeout_ms);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, b);
    if (r->ca_file) curl_easy_setopt(c, CURLOPT_CAINFO, r->ca_file);
    if (r->auth) {
        curl_easy_setopt(c, CURLOPT_HTTPAUTH, CURLAUTH_BASIC);
        curl_easy_setopt(c, CURLOPT_USERPWD, r->auth);
    } else if (r->bearer) {
        curl_easy_setopt(c, CURLOPT_HTTPAUTH, CURLAUTH_BEARER);
        curl_easy_setopt(c, CURLOPT_XOAUTH2_BEARER, r->bearer);
    }
    if (post) curl_easy_setopt(c, CURLOPT_POSTFIELDS, post);
    CURLcode rc = curl_easy_perform(c);
    *status = 0;
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, status);
    if (rc == CURLE_OK) return COMMON_OK;
    if (b->too_big)
        return common_err_set(e, COMMON_FATAL, "schema registry %s: answer over %d bytes", r->shown,
                              REGISTRY_MAX_BODY);
    int fatal = rc == CURLE_SSL_CACERT_BADFILE || rc == CURLE_PEER_FAILED_VERIFICATION ||
                rc == CURLE_SSL_CERTPROBLEM || rc == CURLE_URL_MALFORMAT ||
                rc == CURLE_UNSUPPORTED_PROTOCOL;
    return common_err_set(e, fatal ? COMMON_FATAL : COMMON_RETRY, "schema registry %s: %s",
                          r->shown, curl_easy_strerror(rc));
}

/* Maps an answer that is not 200 to a result. */
static common_status_t http_fail(consumers_registry_t *r, long status, const body_t *b,
                                 const char *what, common_err_t *e) {
    json_t *j = b->p ? json_loads(b->p, 0, NULL) : NULL;
    long code = j ? (long)json_integer_value(json_object_get(j, "error_code")) : 0;
    const char *msg = j ? json_string_value(json_object_get(j, "message")) : NULL;
    common_status_t rc = status == 404                                     ? COMMON_MISSING
                         : status == 401 || status == 403                  ? COMMON_FATAL
                         : status >= 500 || status == 429 || status == 408 ? COMMON_RETRY
                                                                           : COMMON_FATAL;
    if (code)
        common_err_set(e, rc, "schema registry %s: %s: HTTP %ld, error %ld: %s", r->shown, what,
                       status, code, msg ? msg : "");
    else
        common_err_set(e, rc, "schema registry %s: %s: HTTP %ld", r->shown, what, status);
    json_decref(j);
    return rc;
}

common_status_t consumers_registry_schema(consumers_registry_t *r, int32_t id, char **schema,
                                          common_err_t *e) {
    *schema = NULL;
    char path[64], what[64];
    snprintf(path, sizeof(path), "/schemas/ids/%d", (int)id);
    snprintf(what, sizeof(what), "schema id %d", (int)id);
    body_t b = {0};
    long status;
    common_status_t rc = request(r, path, NULL, &status, &b, e);
    if (rc == COMMON_OK && status != 200) rc = http_fail(r, status, &b, what, e);
    json_t *j = rc == COMMON_OK ? json_loads(b.p ? b.p : "", 0, NULL) : NULL;
    free(b.p);
    if (rc != COMMON_OK) return rc;
    const char *type = json_string_value(json_object_get(j, "schemaType"));
    const char *s = json_string_value(json_object_get(j, "schema"));
    if (type && strcmp(type, "AVRO")) {
        rc = common_err_set(e, COMMON_MISSING, "schema registry %s: %s is a %s schema, not Avro",
                            r->shown, what, type);
    } else if (!s) {
        rc = common_err_set(e, COMMON_RETRY, "schema registry %s: %s: the answer has no \"schema\"",
                            r->shown, what);
    } else if (!(*schema = strdup(s))) {
        rc = common_err_set(e, COMMON_RETRY, "out of memory");
    }
    json_decref(j);
    return rc;
}

common_status_t consumers_registry_register(consumers_registry_t *r, const char *subject,
                                            const char *schema, int32_t *id, common_err_t *e) {
    *id = -1;
    char *esc = curl_easy_escape(r->curl, subject, 0);
    json_t *req = json_pack("{s:s}", "schema", schema);
    char *post = req ? json_dumps(req, JSON_COMPACT) : NULL;
    json_decref(req);
    if (!esc || !post) {
        curl_free(esc);
        free(post);
        return common_err_set(e, COMMON_RETRY, "out of memory");
    }
    char path[1024], what[600];
    snprintf(path, sizeof(path), "/subjects/%s/versions", esc);
    snprintf(what, sizeof(what), "registering under subject %s", subject);
    curl_free(esc);
    body_t b = {0};
    long status;
    common_status_t rc = request(r, path, post, &status, &b, e);
    free(post);
    if (rc == COMMON_OK && status != 200) rc = http_fail(r, status, &b, what, e);
    if (rc == COMMON_OK) {
        json_t *j = json_loads(b.p ? b.p : "", 0, NULL);
        json_t *v = json_object_get(j, "id");
        if (json_is_integer(v) && json_integer_value(v) >= 0 && json_integer_value(v) <= INT32_MAX)
            *id = (int32_t)json_integer_value(v);
        else
            rc = common_err_set(e, COMMON_RETRY, "schema registry %s: %s: the answer has no id",
                                r->shown, what);
        json_decref(j);
    }
    free(b.p);
    return rc;
}
