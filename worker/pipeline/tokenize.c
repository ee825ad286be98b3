/* Tokenizing the poll thread's decoded records on the pool (worker/pipeline/pool.h): the
 * tasks write into the items only, so the poll thread queues them in order afterwards. */
#include <stdlib.h>
#include <string.h>

#include "worker/pipeline/pipeline_int.h"

/* Tokenizes an item into its own ids (-1: out of memory, ids stays NULL); the text goes then:
 * from here on the record itself stands for it. */
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

#define PL_TOK_CHUNK 32 /* items per tokenizing task */

static void tok_task(void *ctx, int task, int slot) {
    pl_t *pl = ctx;
    pl_poll_t *pp = &pl->poll;
    int end = (task + 1) * PL_TOK_CHUNK < pp->tok_n ? (task + 1) * PL_TOK_CHUNK : pp->tok_n;
    worker_stage_clock_t clk;
    worker_stage_begin(&clk);
    for (int i = task * PL_TOK_CHUNK; i < end; i++)
        tokenize_item(pl, pp->tok_items[i], &pp->tok_scratch[slot]); /* ids NULL: failed */
    worker_stage_end(&clk, WORKER_STAGE_TOKENIZE);
}

void pl_tokenize_decoded(pl_t *pl) {
    int n = pl->poll.tok_n;
    pl_pool_run(pl->pool, (n + PL_TOK_CHUNK - 1) / PL_TOK_CHUNK, tok_task, pl);
}
