#include "consumers/ticket.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void consumers_ticket_free(consumers_ticket_t *t) {
    if (!t) return;
    free(t->job_id);
    free(t->tenant);
    free(t->ticket_id);
    free(t->text);
    t->job_id = t->tenant = t->ticket_id = t->text = NULL;
    t->text_len = 0;
}

/* Unicode 15, table 3-7 (well-formed UTF-8 byte sequences). */
size_t consumers_utf8_valid_prefix(const char *str, size_t n) {
    const unsigned char *s = (const unsigned char *)str;
    size_t i = 0;
    while (i < n) {
        unsigned char c = s[i];
        if (c < 0x80) {
            i++;
            continue;
        }
        size_t len;
        unsigned char lo = 0x80, hi = 0xbf; /* range of the second byte */
        if (c >= 0xc2 && c <= 0xdf) {
            len = 2;
        } else if (c >= 0xe0 && c <= 0xef) {
            len = 3;
            if (c == 0xe0) lo = 0xa0; /* overlong */
            if (c == 0xed) hi = 0x9f; /* surrogates U+D800..DFFF */
        } else if (c >= 0xf0 && c <= 0xf4) {
            len = 4;
            if (c == 0xf0) lo = 0x90; /* overlong */
            if (c == 0xf4) hi = 0x8f; /* above U+10FFFF */
        } else {
            return i;
        }
        if (n - i < len || s[i + 1] < lo || s[i + 1] > hi) return i;
        for (size_t k = 2; k < len; k++)
            if (s[i + k] < 0x80 || s[i + k] > 0xbf) return i;
        i += len;
    }
    return n;
}

common_status_t consumers_ticket_check_id(const char *field, const char *s, size_t n,
                                          common_err_t *e) {
    if (n == 0) return common_err_set(e, COMMON_USAGE, "field %s is empty", field);
    if (n > CONSUMERS_TICKET_MAX_ID_BYTES)
        return common_err_set(e, COMMON_USAGE, "field %s is %zu bytes (limit %d)", field, n,
                              CONSUMERS_TICKET_MAX_ID_BYTES);
    if (memchr(s, '\0', n))
        return common_err_set(e, COMMON_USAGE, "field %s contains a NUL byte", field);
    size_t ok = consumers_utf8_valid_prefix(s, n);
    if (ok < n) {
        /* the bytes the lead byte claims as its sequence: what the user has to look for */
        unsigned char c = (unsigned char)s[ok];
        size_t len = c >= 0xf0 ? 4 : c >= 0xe0 ? 3 : c >= 0xc0 ? 2 : 1;
        char bytes[24] = "";
        for (size_t k = 0; k < len && ok + k < n; k++)
            snprintf(bytes + strlen(bytes), sizeof(bytes) - strlen(bytes), "%s0x%02x", k ? " " : "",
                     (unsigned char)s[ok + k]);
        common_err_set(e, COMMON_USAGE, "field %s: invalid UTF-8 at byte %zu", field, ok);
        common_err_detail(e, "%s", bytes);
        common_err_hint(e, "identifiers must be UTF-8 text");
        return COMMON_USAGE;
    }
    return COMMON_OK;
}

common_status_t consumers_ticket_check_enqueued(int64_t ms, common_err_t *e) {
    if (ms >= 0 && ms <= CONSUMERS_TICKET_MAX_ENQUEUED_MS) return COMMON_OK;
    return common_err_set(e, COMMON_USAGE,
                          "field enqueued_at is %lld: it must be Unix milliseconds from 0 "
                          "(1970-01-01, or 0 for unknown) to %lld (294276-12-31, the end of "
                          "PostgreSQL's timestamptz range)",
                          (long long)ms, (long long)CONSUMERS_TICKET_MAX_ENQUEUED_MS);
}
