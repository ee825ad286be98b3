/* A classification session: what `run`, `classify` and `bench` all start from. It takes the
 * settings (worker/classify/settings.h), loads the model and its tokenizer, resolves every
 * automatic setting for the backend, opens the backend and reads back what it actually runs
 * (gpu_backend_props_t): batches, the accumulator's bounds and telemetry come from that. */
#ifndef RECLASS_WORKER_CLASSIFY_SESSION_H
#define RECLASS_WORKER_CLASSIFY_SESSION_H

#include <stddef.h>

#include "common/err.h"
#include "worker/classify/engine.h"
#include "worker/classify/settings.h"
#include "worker/pipeline/accum.h"
#include "worker/text/tokenizer.h"

typedef struct {
    cls_settings_t set;        /* as resolved: no automatic field left */
    gpu_model_t *model;        /* owned */
    worker_tok_t *tok;         /* owned; NULL until loaded (cls_session_load_tokenizer) */
    cls_engine_t eng;          /* the backend instance and its two batches in flight */
    gpu_backend_props_t props; /* what the backend runs */
    worker_accum_cfg_t acc;    /* the accumulator's config, from props and set */
} cls_session_t;

/* Opens a session on set (model_dir or geometry). tokenizer: also load the checkpoint's
 * tokenizer. COMMON_OK; COMMON_USAGE for what the user can fix (a bad option, a model or
 * tokenizer that does not load); COMMON_FATAL for a runtime failure (the backend failed to
 * start). err says what; s is left closed on failure. */
common_status_t cls_session_open(cls_session_t *s, const cls_settings_t *set, int tokenizer,
                                 common_err_t *err);
/* Opens eng as one more engine like s->eng (the session's model, settings and backend) on
 * device `device`, for a worker that runs several encoders: callers size batches from
 * s->props, so an engine that settles other bounds (token budget, sequences, length,
 * precision) is refused. COMMON_OK, or the backend's status with err (COMMON_FATAL for bounds
 * unlike s->props'); eng is left closed on failure. */
common_status_t cls_session_engine_open(const cls_session_t *s, int device, cls_engine_t *eng,
                                        common_err_t *err);
/* Loads the checkpoint's tokenizer into s->tok when it is not yet there. COMMON_OK, or
 * COMMON_USAGE (no checkpoint directory, or its tokenizer does not load). */
common_status_t cls_session_load_tokenizer(cls_session_t *s, common_err_t *err);
/* Which kernels the backend runs at the session's precision, in words for start-up lines
 * (the cpu backend's choice by CPU features, never silent); "" where it has nothing to add. */
const char *cls_session_kernels(const cls_session_t *s, char *buf, size_t n);
/* Frees what the session holds; a zeroed session is left as it is. */
void cls_session_close(cls_session_t *s);

#endif
