/* The encoder fixtures of every model family (tests/fixtures/models/<name>/, made by
 * tests/fixtures/make_models.py) and their Hugging Face goldens, for the CPU and GPU golden
 * tests: read a golden file, run its token ids through a backend in packed batches, compare. */
#ifndef RECLASS_TESTS_FAMILY_GOLDEN_H
#define RECLASS_TESTS_FAMILY_GOLDEN_H

#include <stddef.h>
#include <stdint.h>

#include "gpu/backend.h"
#include "gpu/model/model.h"

/* The fixture models, one per family other than BERT (whose demo checkpoint has its own
 * tests), and the golden sets each has. */
#define FG_N_MODELS 4
extern const char *const fg_models[FG_N_MODELS]; /* "distilbert-clinc150", ... */
#define FG_N_SETS 2
extern const char *const fg_sets[FG_N_SETS]; /* "clinc150_test", "multilingual" */

typedef struct {
    int32_t *ids; /* (len) with the special tokens, as HF's tokenizer gave them */
    int len;
    char *pred;    /* HF's argmax label */
    float *logits; /* (L) HF's fp32 logits, or NULL on rows that store none */
} fg_row_t;

typedef struct {
    fg_row_t *rows;
    int n;
} fg_set_t;

/* Reads dir/golden_<set>.jsonl. 0 or -1 (err says why). */
int fg_load(const char *dir, const char *set, fg_set_t *out, common_err_t *err);
void fg_free(fg_set_t *s);

/* Runs every row through ops (opts as given; token_budget bounds a batch) in file order,
 * submit/collect with two batches in flight; logits (n, L). 0 or -1 (err). */
int fg_run(const gpu_backend_ops_t *ops, const gpu_model_t *m, const gpu_backend_opts_t *opts,
           const fg_set_t *s, float *logits, common_err_t *err);
/* As fg_run on an instance already made (ops->init or init_graph; batches of at most budget
 * tokens), which it frees. */
int fg_run_be(const gpu_backend_ops_t *ops, gpu_backend_t *be, const gpu_model_t *m, int budget,
              const fg_set_t *s, float *logits, common_err_t *err);

typedef struct {
    int rows, agree;  /* argmax agreement with HF over every row */
    int logit_rows;   /* rows with stored logits */
    double max_delta; /* max |logit - HF's| over them */
} fg_score_t;

fg_score_t fg_compare(const gpu_model_t *m, const fg_set_t *s, const float *logits);

/* The agreement gate of a reduced precision against fp32. A fixed percentage alone fails on a
 * few flips whatever their cause, and passes many that are real errors; so beside it every
 * flip (a row whose argmax is not HF's) must sit on a thin fp32 margin: top-1 minus top-2
 * below FG_MARGIN_FACTOR x the precision's max |delta logit| bound. A flip needs the errors
 * of two logits to close the margin, so with every |delta| <= d no margin above 2d can flip;
 * 4d leaves room for the rows whose logits the goldens do not store. */
#define FG_MARGIN_FACTOR 4.0

typedef struct {
    int flips;       /* rows whose argmax is not HF's */
    int thick;       /* of them, those whose fp32 margin is at or above the bound */
    double widest;   /* the widest fp32 margin among the flips (0 without flips) */
    double bound;    /* FG_MARGIN_FACTOR x delta_max */
    int first_thick; /* the first thick flip's row, or -1 */
    int at_risk;     /* rows whose fp32 margin is below 2 x delta_max: the rows that errors
                      * within the delta bound on two logits can flip, flipped or not */
} fg_flips_t;

/* Flips of logits (n, L) against HF's argmax, each with its fp32 margin from fp32 (n, L): the
 * CPU backend's logits, equal to HF's within 2.1e-5 (test_cpu_families, test_cpu_modern). */
fg_flips_t fg_flips(const gpu_model_t *m, const fg_set_t *s, const float *logits, const float *fp32,
                    double delta_max);

/* 1 when sc and fl pass: max |delta| <= delta_max, no thick flip, and agreement >= agree_min
 * unless rounding explains the shortfall: every flip thin and no more flips than half the
 * rows at risk (a set of many low-confidence rows, as the multilingual goldens are, can lose
 * a few rows to rounding past a floor that a set its size allows only 2 of; many more flips
 * than that are a systematic error even on thin margins). why (a line) says what failed, or
 * "" on a pass. */
int fg_gate(const fg_score_t *sc, const fg_flips_t *fl, double agree_min, double delta_max,
            char *why, size_t whylen);

#endif
