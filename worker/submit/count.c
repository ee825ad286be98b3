/* The first of `reclass submit`'s two passes: counts the job (every message carries
 * job_total) and refuses, before anything is sent, what a worker would dead-letter or what
 * would make the job ambiguous (a bad or repeated ticket id, a text over the cap). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/err.h"
#include "consumers/ticket.h"
#include "worker/submit/input.h"

typedef struct {
    char **slot; /* open addressing, NULL = empty */
    size_t cap, n;
} idset_t;

static uint64_t idset_hash(const char *s) {
    uint64_t h = 1469598103934665603ULL; /* FNV-1a */
    while (*s)
        h = (h ^ (unsigned char)*s++) * 1099511628211ULL;
    return h;
}

/* 1 = added, 0 = already there, -1 = out of memory. */
static int idset_add(idset_t *s, const char *id) {
    if (2 * (s->n + 1) > s->cap) {
        size_t cap = s->cap ? 2 * s->cap : 1024;
        char **slot = calloc(cap, sizeof(*slot));
        if (!slot) return -1;
        for (size_t i = 0; i < s->cap; i++) {
            if (!s->slot[i]) continue;
            size_t j = idset_hash(s->slot[i]) & (cap - 1);
            while (slot[j])
                j = (j + 1) & (cap - 1);
            slot[j] = s->slot[i];
        }
        free(s->slot);
        s->slot = slot;
        s->cap = cap;
    }
    size_t j = idset_hash(id) & (s->cap - 1);
    for (; s->slot[j]; j = (j + 1) & (s->cap - 1))
        if (strcmp(s->slot[j], id) == 0) return 0;
    if (!(s->slot[j] = strdup(id))) return -1;
    s->n++;
    return 1;
}

static void idset_free(idset_t *s) {
    for (size_t i = 0; i < s->cap; i++)
        free(s->slot[i]);
    free(s->slot);
}

common_status_t worker_submit_input_count(const char *path, const char *text_key,
                                          const char *id_key, worker_submit_count_t *out,
                                          common_err_t *e) {
    worker_submit_input_t *in;
    *out = (worker_submit_count_t){0};
    long *count = &out->count, *empty = &out->empty;
    common_status_t rc = worker_submit_input_open(path, text_key, id_key, &in, e);
    if (rc) return rc;
    idset_t ids = {0};
    worker_submit_rec_t r;
    while ((rc = worker_submit_input_next(in, &r, e)) == COMMON_OK) {
        if (r.text_len == 0) {
            ++*empty;
            continue;
        }
        common_err_t ie;
        if ((rc = consumers_ticket_check_id("ticket_id", r.id, strlen(r.id), &ie))) {
            char why[COMMON_ERR_LINE_MAX];
            rc = common_err_set(e, rc, "%s: line %ld: %s", path, r.line,
                                common_err_line(&ie, why, sizeof(why)));
            break;
        }
        if (r.text_len > CONSUMERS_TICKET_MAX_TEXT_BYTES) { /* the worker would dead-letter it */
            rc = common_err_set(e, COMMON_USAGE, "%s: line %ld: field text is %zu bytes (limit %d)",
                                path, r.line, r.text_len, CONSUMERS_TICKET_MAX_TEXT_BYTES);
            break;
        }
        int added = idset_add(&ids, r.id);
        if (added <= 0) {
            rc = added ? common_err_set(e, COMMON_USAGE, "out of memory")
                       : common_err_set(e, COMMON_USAGE,
                                        "%s: line %ld: ticket id \"%s\" appears twice; ids must "
                                        "be unique within a job",
                                        path, r.line, r.id);
            break;
        }
        size_t id_len = strlen(r.id);
        if (r.text_len + 2 * id_len > out->largest_text + 2 * out->largest_id) {
            out->largest_text = r.text_len;
            out->largest_id = id_len;
            out->largest_line = r.line;
        }
        ++*count;
    }
    idset_free(&ids);
    worker_submit_input_free(in);
    if (rc != COMMON_DONE) return rc;
    if (*count == 0)
        return common_err_set(e, COMMON_USAGE, "%s has no ticket with non-empty text", path);
    if (*count > 2147483647L)
        return common_err_set(e, COMMON_USAGE, "%ld tickets; one job holds at most 2^31-1", *count);
    return COMMON_OK;
}
