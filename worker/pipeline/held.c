/* Writer schemas from a Schema Registry, on the poll thread (each id looked up once; the pool's
 * decoders get what the poll thread's codec got). A record whose schema id the
 * codec does not know is looked up once; while the registry cannot answer (down, slow, 5xx)
 * the record waits here, and every later record waits behind it, so that nothing is
 * dead-lettered for the registry's sake and the partitions' order holds. The poll loop
 * counts waiting records as a full accumulator, which pauses fetching: what waits is only
 * what was fetched before. Lookups are retried with a doubling backoff. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/err.h"
#include "worker/pipeline/pipeline_int.h"

#define HELD_BACKOFF_MIN_S 0.25
#define HELD_BACKOFF_MAX_S 30.0

common_status_t pl_held_open(pl_t *pl, common_err_t *e) {
    const worker_run_cfg_t *cfg = pl->cfg;
    if (!cfg->schema_registry) return COMMON_OK;
    consumers_registry_cfg_t rc = {.url = cfg->schema_registry,
                                   .ca_file = cfg->schema_registry_ca,
                                   .auth_file = cfg->schema_registry_auth};
    common_status_t st = consumers_registry_open(&rc, &pl->poll.registry, e);
    if (st) return st;
    consumers_codec_registry_ids(pl->poll.codec);
    common_logf(stderr, "schema ids from the schema registry %s\n",
                consumers_registry_url(pl->poll.registry));
    return COMMON_OK;
}

void pl_held_free(pl_t *pl) {
    for (int i = 0; i < pl->poll.held_n; i++) /* unstored: redelivered to the next owner */
        consumers_record_free(pl->poll.held[i]);
    free(pl->poll.held);
    pl->poll.held = NULL;
    pl->poll.held_n = pl->poll.held_cap = 0;
    consumers_registry_free(pl->poll.registry);
    pl->poll.registry = NULL;
}

int pl_schema_check(pl_t *pl, const consumers_record_t *m, common_err_t *e) {
    int32_t id;
    size_t len = 0;
    const void *value = consumers_record_value(m, &len);
    if (!pl->poll.registry || !consumers_codec_schema_id(value, len, &id) ||
        consumers_codec_knows(pl->poll.codec, id))
        return PL_SCHEMA_READY;
    char *schema = NULL;
    common_status_t rc = consumers_registry_schema(pl->poll.registry, id, &schema, e);
    if (rc == COMMON_OK) {
        char line[COMMON_ERR_LINE_MAX];
        common_err_t ae;
        pl_decode_settle(pl); /* the pool's decoders take it while none of them runs */
        if (consumers_codec_add_schema(pl->poll.codec, id, schema, &ae))
            common_logf(stderr, "schema id %d from the registry: %s\n", (int)id,
                        common_err_line(&ae, line, sizeof(line)));
        else
            pl_decoders_add_schema(pl, id, schema);
        free(schema);
        return PL_SCHEMA_READY;
    }
    /* MISSING: the codec refuses the id, and the record goes to the dead-letter topic */
    return rc == COMMON_MISSING          ? PL_SCHEMA_READY
           : common_status_retriable(rc) ? PL_SCHEMA_WAIT
                                         : PL_SCHEMA_FATAL;
}

int pl_held_push(pl_t *pl, consumers_record_t *m) {
    pl_poll_t *p = &pl->poll;
    if (p->held_n == p->held_cap) {
        int cap = p->held_cap ? 2 * p->held_cap : 256;
        consumers_record_t **h = realloc(p->held, sizeof(*h) * (size_t)cap);
        if (!h) return -1;
        p->held = h;
        p->held_cap = cap;
    }
    if (p->held_n == 0) {
        p->held_backoff_s = HELD_BACKOFF_MIN_S;
        p->held_retry_s = common_now_s() + p->held_backoff_s;
    }
    p->held[p->held_n++] = m;
    return 0;
}

consumers_record_t *pl_held_next(pl_t *pl, int *fatal, common_err_t *e) {
    pl_poll_t *p = &pl->poll;
    *fatal = 0;
    if (!p->held_n || common_now_s() < p->held_retry_s) return NULL;
    int s = pl_schema_check(pl, p->held[0], e);
    if (s == PL_SCHEMA_WAIT) {
        p->held_backoff_s *= 2;
        if (p->held_backoff_s > HELD_BACKOFF_MAX_S) p->held_backoff_s = HELD_BACKOFF_MAX_S;
        p->held_retry_s = common_now_s() + p->held_backoff_s;
        char line[COMMON_ERR_LINE_MAX];
        common_logf(stderr,
                    "%s; %d record(s) wait for it (nothing is dead-lettered), next try "
                    "in %.1f s\n",
                    common_err_line(e, line, sizeof line), p->held_n, p->held_backoff_s);
        return NULL;
    }
    if (s == PL_SCHEMA_FATAL) {
        *fatal = 1;
        return NULL;
    }
    consumers_record_t *m = p->held[0];
    memmove(p->held, p->held + 1, sizeof(*p->held) * (size_t)(p->held_n - 1));
    if (--p->held_n == 0)
        common_logf(stderr, "the schema registry answers again; held records go on\n");
    p->held_retry_s = 0; /* the next one may need no lookup at all */
    return m;
}

void pl_held_revoke(pl_t *pl, const int32_t *parts, int n) {
    pl_poll_t *p = &pl->poll;
    int k = 0;
    for (int i = 0; i < p->held_n; i++) {
        int revoked = n < 0; /* n < 0: all of them */
        for (int j = 0; j < n; j++)
            revoked |= consumers_consumer_track(p->consumer, p->held[i]) == parts[j]; /* tracks */
        if (revoked)
            consumers_record_free(p->held[i]); /* the next owner reads it again */
        else
            p->held[k++] = p->held[i];
    }
    p->held_n = k;
}
