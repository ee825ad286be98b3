/* The settings of a classification run (`run`, `classify`, `bench`), decided once: what a
 * command was asked for goes in, every "auto" (0 / NULL) comes out filled by the one rule for
 * it (cls_settings_resolve). The per-backend automatic values are the CLS_AUTO_* below; the
 * option rows that set these fields (worker/cli/settings_opts.c) print them in --help. */
#ifndef RECLASS_WORKER_CLASSIFY_SETTINGS_H
#define RECLASS_WORKER_CLASSIFY_SETTINGS_H

#include <stddef.h>
#include <stdint.h>

#include "common/err.h"
#include "gpu/backend.h"

/* Tokens per batch by backend: the CPU gains nothing past a few thousand; the GPU's matrix
 * units want big batches, and 16384 keeps bert-base's weights + arena under 0.4 GiB
 * (tests/bench/RESULTS-gpu.md has the measurements). */
#define CLS_AUTO_TOKEN_BUDGET_CPU  4096
#define CLS_AUTO_TOKEN_BUDGET_CUDA 16384
/* Items waiting for a batch before the producer backs off: a GPU drains a batch in
 * milliseconds, so it may hold many short tickets (a 2048 cap paused consumption so often
 * that a GPU job ran 20x slower; tests/bench/RESULTS-gpu.md). */
#define CLS_AUTO_MAX_PENDING_CPU  2048
#define CLS_AUTO_MAX_PENDING_CUDA 32768
/* Tokens waiting, in token budgets: a few batches to sort by length, and little for a
 * shutdown to finish. */
#define CLS_AUTO_PENDING_BUDGETS 8

/* Stringified for --help texts. */
#define CLS_STR_(x) #x
#define CLS_STR(x)  CLS_STR_(x)

typedef struct {
    const char *model_dir;   /* a Hugging Face checkpoint, or NULL with geometry */
    const char *geometry;    /* random weights of a named geometry (bench), or NULL */
    int labels;              /* classifier labels of a geometry model */
    uint64_t seed;           /* of the random weights */
    const char *backend;     /* "cpu" or "cuda"; NULL = cpu */
    const char *precision;   /* NULL = the backend's default (its first precision) */
    int token_budget;        /* tokens per batch; 0 = CLS_AUTO_TOKEN_BUDGET_<backend>, or
                              * max_len where that is longer */
    int max_len;             /* tokens per text after truncation; 0 = the model's positions */
    int threads;             /* CPU threads (backend; run's pool); 0 = the cores allowed */
    int device;              /* CUDA device ordinal */
    int max_wait_ms;         /* longest an item waits for a fuller batch */
    int max_pending;         /* items waiting for a batch; 0 = CLS_AUTO_MAX_PENDING_<backend> */
    long max_pending_tokens; /* their tokens; 0 = CLS_AUTO_PENDING_BUDGETS token budgets */
} cls_settings_t;

/* Fills every automatic field of s for backend ops and a model of config cfg, and checks
 * that they fit together. COMMON_OK, or COMMON_USAGE with err saying which flag to change. */
common_status_t cls_settings_resolve(cls_settings_t *s, const gpu_backend_ops_t *ops,
                                     const gpu_model_config_t *cfg, common_err_t *err);

/* The backend options of resolved settings. */
gpu_backend_opts_t cls_settings_backend_opts(const cls_settings_t *s);

#endif
