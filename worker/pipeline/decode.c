/* The pool's side of a burst (worker/pipeline/pool.h): Avro decode, validation and
 * tokenizing of the records the poll thread tracked, each task on its own slot's decoder and
 * id vector. The tasks write into the burst's items and err only, so the poll thread queues
 * them, and sends the dead letters, in arrival order afterwards (poll.c). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/err.h"
#include "worker/pipeline/pipeline_int.h"

common_status_t pl_decoders_open(pl_t *pl, common_err_t *e) {
    pl_poll_t *pp = &pl->poll;
    int slots = pl_pool_slots(pl->pool);
    pp->decoders = calloc((size_t)slots, sizeof(*pp->decoders));
    pp->tok_scratch = calloc((size_t)slots, sizeof(*pp->tok_scratch));
    if (!pp->decoders || !pp->tok_scratch) goto oom;
    for (int k = 0; k < 2; k++) {
        pl_burst_t *b = &pp->burst[k];
        b->rec = calloc(PL_BURST, sizeof(*b->rec));
        b->epoch = calloc(PL_BURST, sizeof(*b->epoch));
        b->track = calloc(PL_BURST, sizeof(*b->track));
        b->polled_ms = calloc(PL_BURST, sizeof(*b->polled_ms));
        b->items = calloc(PL_BURST, sizeof(*b->items));
        b->err = calloc(PL_BURST, sizeof(*b->err));
        if (!b->rec || !b->epoch || !b->track || !b->polled_ms || !b->items || !b->err) goto oom;
    }
    /* each decoder reads as the poll thread's codec does: the same files, plain writer and
     * ids (the registry's schemas come through pl_decoders_add_schema) */
    for (int i = 0; i < slots; i++) {
        common_status_t st = consumers_codec_init(pl->cfg->schemas, &pp->decoders[i], e);
        if (!st && pl->cfg->plain_schema)
            st = consumers_codec_set_plain_schema(pp->decoders[i], pl->cfg->plain_schema, e);
        if (st) return st;
        if (pp->registry) consumers_codec_registry_ids(pp->decoders[i]);
    }
    return COMMON_OK;
oom:
    return common_err_set(e, COMMON_FATAL, "out of memory");
}

void pl_decoders_free(pl_t *pl) {
    pl_poll_t *pp = &pl->poll;
    for (int k = 0; k < 2; k++) {
        pl_burst_t *b = &pp->burst[k];
        if (b->running) pl_decode_wait(pl, b);
        for (int i = 0; i < b->n; i++) { /* never accepted: unstored, read again by the next */
            if (b->items) pl_item_free(b->items[i]);
            consumers_record_free(b->rec[i]);
        }
        free(b->rec);
        free(b->epoch);
        free(b->track);
        free(b->polled_ms);
        free(b->items);
        free(b->err);
        memset(b, 0, sizeof(*b));
    }
    int slots = pl->pool ? pl_pool_slots(pl->pool) : 0;
    for (int i = 0; i < slots; i++) {
        if (pp->decoders) consumers_codec_free(pp->decoders[i]);
        if (pp->tok_scratch) worker_ids_free(&pp->tok_scratch[i]);
    }
    free(pp->decoders);
    free(pp->tok_scratch);
    pp->decoders = NULL;
    pp->tok_scratch = NULL;
}

void pl_decoders_add_schema(pl_t *pl, int32_t id, const char *schema) {
    pl_poll_t *pp = &pl->poll;
    for (int i = 0; i < pl_pool_slots(pl->pool); i++) {
        common_err_t e;
        char line[COMMON_ERR_LINE_MAX];
        /* the poll thread's codec took this text: only memory can fail here, and then the
         * record is dead-lettered as of an unknown schema, with that reason */
        if (consumers_codec_add_schema(pp->decoders[i], id, schema, &e))
            common_logf(stderr, "schema id %d on decoder %d: %s\n", (int)id, i,
                        common_err_line(&e, line, sizeof(line)));
    }
}

/* Decodes one record into an item; NULL with e for a dead letter. */
static pl_item_t *make_item(consumers_codec_t *codec, const consumers_record_t *m,
                            common_err_t *e) {
    pl_item_t *it = calloc(1, sizeof(*it));
    if (!it) {
        common_err_set(e, COMMON_FATAL, "out of memory");
        return NULL;
    }
    size_t len;
    const void *value = consumers_record_value(m, &len);
    if (!value || len == 0) {
        common_err_set(e, COMMON_USAGE, "empty record value");
        free(it);
        return NULL;
    }
    if (consumers_codec_decode(codec, value, len, &it->t, e)) {
        free(it);
        return NULL;
    }
    /* the sink keys rows by these: a record without them can never be stored */
    const char *bad = !it->t.job_id || !*it->t.job_id         ? "empty job_id"
                      : !it->t.ticket_id || !*it->t.ticket_id ? "empty ticket_id"
                      : it->t.job_total < 1                   ? "job_total < 1"
                      : !it->t.text                           ? "missing text"
                                                              : NULL;
    if (bad) {
        common_err_set(e, COMMON_USAGE, "invalid ticket: %s", bad);
        pl_item_free(it);
        return NULL;
    }
    it->t.partition = consumers_record_partition(m);
    it->t.offset = consumers_record_offset(m);
    size_t key_len;
    const void *key = consumers_record_key(m, &key_len);
    it->value = malloc(len);
    it->key = key && key_len ? malloc(key_len) : NULL;
    if (!it->value || (key && key_len && !it->key)) {
        common_err_set(e, COMMON_FATAL, "out of memory");
        pl_item_free(it);
        return NULL;
    }
    memcpy(it->value, value, len);
    it->value_len = len;
    if (it->key) memcpy(it->key, key, key_len);
    it->key_len = it->key ? key_len : 0;
    return it;
}

/* Tokenizes an item into its own ids (-1: out of memory); the text goes then: from here on
 * the record itself stands for it. */
static int tokenize_item(pl_t *pl, pl_item_t *it, worker_ids_t *ids) {
    if (worker_tok_encode(pl->ses.tok, it->t.text, it->t.text_len, pl->ses.props.max_len, ids))
        return -1;
    it->ids = malloc(sizeof(*it->ids) * (size_t)ids->n); /* (n_ids) */
    if (!it->ids) return -1;
    memcpy(it->ids, ids->v, sizeof(*it->ids) * (size_t)ids->n);
    it->n_ids = ids->n;
    it->truncated = ids->truncated; /* over-long texts are cut and flagged, never rejected */
    free(it->t.text);
    it->t.text = NULL;
    it->t.text_len = 0;
    return 0;
}

/* Records per task: small enough that every slot gets some of a burst, and a burst's long
 * texts spread (twice as many tasks as slots), large enough to pay for the hand-off. */
#define PL_DECODE_MIN_CHUNK 8

static int chunk_of(const pl_t *pl, int n) {
    int tasks = 2 * pl_pool_slots(pl->pool);
    int chunk = (n + tasks - 1) / tasks;
    return chunk < PL_DECODE_MIN_CHUNK ? PL_DECODE_MIN_CHUNK : chunk;
}

static void decode_task(void *ctx, int task, int slot) {
    pl_burst_t *b = ctx;
    pl_t *pl = b->pl;
    int chunk = chunk_of(pl, b->n);
    int from = task * chunk, end = from + chunk < b->n ? from + chunk : b->n;
    worker_stage_clock_t clk;
    worker_stage_begin(&clk);
    for (int i = from; i < end; i++)
        b->items[i] = make_item(pl->poll.decoders[slot], b->rec[i], &b->err[i]);
    worker_stage_end(&clk, WORKER_STAGE_DECODE);
    for (int i = from; i < end; i++) {
        if (!b->items[i] || !tokenize_item(pl, b->items[i], &pl->poll.tok_scratch[slot])) continue;
        pl_item_free(b->items[i]);
        b->items[i] = NULL;
        common_err_set(&b->err[i], COMMON_FATAL, "out of memory tokenizing");
    }
    worker_stage_end(&clk, WORKER_STAGE_TOKENIZE);
}

void pl_decode_start(pl_t *pl, pl_burst_t *b) {
    b->pl = pl;
    int chunk = chunk_of(pl, b->n);
    pl_pool_start(pl->pool, &b->job, (b->n + chunk - 1) / chunk, decode_task, b);
    b->running = 1;
}

void pl_decode_wait(pl_t *pl, pl_burst_t *b) {
    if (!b->running) return;
    pl_pool_wait(pl->pool, &b->job);
    b->running = 0;
}
