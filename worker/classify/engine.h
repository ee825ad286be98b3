/* The classification engine: one backend instance with its two in-flight batches. It packs
 * sequences into a padding-free batch (ids, cu_seqlens), submits it, collects its logits and
 * turns them into results (worker/classify/result.h). `reclass run`'s encoder thread,
 * `reclass classify`, `reclass bench` and gpu_bench all drive it; what differs between them
 * (where sequences come from, where results go, what is timed) stays with them. */
#ifndef RECLASS_WORKER_CLASSIFY_ENGINE_H
#define RECLASS_WORKER_CLASSIFY_ENGINE_H

#include <stddef.h>
#include <stdint.h>

#include "common/err.h"
#include "gpu/backend.h" /* and the model header it includes */
#include "worker/classify/result.h"

/* A batch from submit to collect. Valid from collect until the next submit. */
typedef struct {
    int n, n_tokens, longest; /* sequences, real tokens, longest sequence */
    double t_submit;          /* common_now_s() at submit */
    double t_ready;           /* monotonic seconds when its logits were in (collect) */
    /* seconds from the later of its submit and the previous batch's logits to its own
     * logits: batches that overlap on the device are not counted twice */
    double compute_s;
    float *logits; /* (n, num_labels) after collect */
} cls_batch_t;

typedef struct {
    const gpu_model_t *model; /* not owned */
    const gpu_backend_ops_t *ops;
    gpu_backend_t *be;
    int own_be;                                /* cls_engine_close frees be */
    gpu_backend_props_t props;                 /* what the backend runs (its get_props) */
    int max_seqs;                              /* sequences per batch: props.max_seqs */
    int num_labels;                            /* of the model */
    int32_t *ids, *cu;                         /* (token_budget), (max_seqs + 1): packing scratch */
    int packed, packed_tokens, packed_longest; /* what ids/cu hold, -1 = nothing */
    cls_batch_t slot[2];
    int in_flight, head; /* batches submitted and not collected; the oldest's slot */
    double last_ready;   /* when the previous batch's logits were in */
} cls_engine_t;

/* Starts backend `backend` ("cpu", "cuda") on model (which must outlive the engine) with
 * opts (the backend settles what opts leave at 0; e->props says what it settled). Returns
 * COMMON_OK, or the backend's init's status (COMMON_USAGE unknown backend or options it
 * refuses, COMMON_FATAL it did not start), with err set. Worker code opens engines through
 * worker/classify/session.h, which decides the options first. */
common_status_t cls_engine_open(cls_engine_t *e, const gpu_model_t *model, const char *backend,
                                const gpu_backend_opts_t *opts, common_err_t *err);
/* The same on a backend instance made elsewhere; the engine does not free it. */
common_status_t cls_engine_attach(cls_engine_t *e, const gpu_model_t *model,
                                  const gpu_backend_ops_t *ops, gpu_backend_t *be,
                                  common_err_t *err);
/* Collects what is still in flight (results dropped): the backend idles. */
void cls_engine_drain(cls_engine_t *e);
/* cls_engine_drain, then frees the buffers and an owned backend. A zeroed engine (never
 * opened) is left as it is. */
void cls_engine_close(cls_engine_t *e);

/* Packs n sequences (seq[i]: lens[i] ids) and queues them on the backend (at most two
 * batches in flight). submit, pack, submit_packed, collect and forward answer COMMON_OK, or
 * with err set: COMMON_USAGE a batch over capacity or budget, COMMON_BUG a call out of turn
 * (two in flight already, none to collect), COMMON_FATAL the backend failed. */
common_status_t cls_engine_submit(cls_engine_t *e, const int32_t *const *seq, const int *lens,
                                  int n, common_err_t *err);
/* cls_engine_submit in two steps, so a caller can time them apart: pack copies the sequences
 * into the engine's staging (checked against capacity and budget); submit_packed queues what
 * was packed last. */
common_status_t cls_engine_pack(cls_engine_t *e, const int32_t *const *seq, const int *lens, int n,
                                common_err_t *err);
common_status_t cls_engine_submit_packed(cls_engine_t *e, common_err_t *err);
/* Waits for the oldest batch in flight: *out has its logits and times. */
common_status_t cls_engine_collect(cls_engine_t *e, const cls_batch_t **out, common_err_t *err);
/* submit + collect, with nothing in flight. */
common_status_t cls_engine_forward(cls_engine_t *e, const int32_t *const *seq, const int *lens,
                                   int n, const cls_batch_t **out, common_err_t *err);

/* Result of sequence i of a collected batch. */
void cls_engine_score(const cls_engine_t *e, const cls_batch_t *b, int i, int top_k,
                      cls_result_t *r);
/* The model's label names, by id. */
const char *const *cls_engine_labels(const cls_engine_t *e);

#endif
