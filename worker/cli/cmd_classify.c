/* reclass classify: texts on stdin -> one JSON result per input line, in input
 * order.
 *
 * Two threads. The reader reads and tokenizes into a ring of slots (it runs
 * ahead of the encoder, so tokenizing overlaps the forward passes). The main
 * thread moves read slots into the length-sorting accumulator, pops
 * token-budgeted batches, runs the backend, and prints results through the same
 * ring used as a reorder buffer: slot seq % ring holds input seq until it is
 * printed. Memory is bounded by the ring: the reader never gets more than
 * ring_size inputs ahead of the oldest unprinted one, and when that happens the
 * main thread forms the batch around the oldest pending item at once instead of
 * waiting for its deadline. */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/err.h"
#include "common/clock.h"
#include "worker/classify/driver.h"
#include "worker/classify/session.h"
#include "worker/cli/cli.h"
#include "worker/text/input.h"
#include "worker/text/tokenizer.h"

enum { SLOT_FREE = 0, SLOT_READ, SLOT_ERROR, SLOT_DONE };

#define CLS_OUTBUF_BYTES (1 << 20)

typedef struct {
    long seq;
    int state;
    int n, truncated;
    int32_t *ids;  /* (max_len) slice of ring ids */
    float *logits; /* (num_labels) slice of ring logits */
    char err[160]; /* SLOT_ERROR: the input's message for this line */
} cls_slot_t;

typedef struct {
    /* fixed after init */
    worker_input_t *in;
    FILE *f; /* the stream in reads, for ferror */
    const worker_tok_t *tok;
    int max_len;    /* the backend's: longer inputs are truncated */
    int num_labels; /* of the model */
    long ring;
    cls_slot_t *slot;  /* (ring) */
    int32_t *ids_all;  /* (ring, max_len) */
    float *logits_all; /* (ring, num_labels) */

    pthread_mutex_t mu;
    pthread_cond_t cv_main;   /* reader -> main: new slots, EOF */
    pthread_cond_t cv_reader; /* main -> reader: slots printed */
    long read_upto;           /* slots [0, read_upto) are filled (guarded by mu) */
    long printed_upto;        /* slots [0, printed_upto) are free again (guarded by mu) */
    int eof;                  /* reader finished (guarded by mu) */
    int fatal;                /* reader could not go on: fatal_msg (guarded by mu) */
    char fatal_msg[256];
    cls_buf_t line; /* the output line being written (main thread) */
    char *outbuf;   /* (CLS_OUTBUF_BYTES) stdout's buffer: results go out in large writes */
} cls_ctx_t;

static void *reader_main(void *arg) {
    cls_ctx_t *c = arg;
    worker_ids_t ids = {0};
    long seq = 0;
    for (;;) {
        const char *text;
        size_t len;
        common_err_t e;
        char err[160] = ""; /* the line's error result, or the fatal message */
        int rc = worker_input_next(c->in, &text, &len, &e);
        if (rc < 0) common_err_line(&e, err, sizeof err);
        if (rc == 0) break;
        if (rc < 0) {
            /* a bad line gets its own error result; a read error ends the input */
            if (e.code != COMMON_USAGE) {
                pthread_mutex_lock(&c->mu);
                c->fatal = 1;
                snprintf(c->fatal_msg, sizeof c->fatal_msg, "%s", err);
                pthread_mutex_unlock(&c->mu);
                break;
            }
        }
        pthread_mutex_lock(&c->mu);
        while (seq - c->printed_upto >= c->ring)
            pthread_cond_wait(&c->cv_reader, &c->mu);
        pthread_mutex_unlock(&c->mu);
        cls_slot_t *s = &c->slot[seq % c->ring];
        s->seq = seq;
        if (rc < 0) {
            s->state = SLOT_ERROR;
            snprintf(s->err, sizeof s->err, "%s", err);
        } else if (worker_tok_encode(c->tok, text, len, c->max_len, &ids) != 0) {
            s->state = SLOT_ERROR;
            snprintf(s->err, sizeof s->err, "out of memory tokenizing input %ld", seq + 1);
        } else {
            s->state = SLOT_READ;
            s->n = ids.n;
            s->truncated = ids.truncated;
            memcpy(s->ids, ids.v, (size_t)ids.n * sizeof(int32_t));
        }
        seq++;
        pthread_mutex_lock(&c->mu);
        c->read_upto = seq;
        pthread_cond_signal(&c->cv_main);
        pthread_mutex_unlock(&c->mu);
    }
    worker_ids_free(&ids);
    pthread_mutex_lock(&c->mu);
    c->eof = 1;
    pthread_cond_signal(&c->cv_main);
    pthread_mutex_unlock(&c->mu);
    return NULL;
}

typedef struct {
    cls_settings_t set;
    int jsonl, top_k, logits;
} cls_opts_t;

/* The options, set into o: its own rows, then the shared classification settings. */
#define CLS_N_OWN 5
#define CLS_SET                                                                                    \
    (CLI_SET_BACKEND | CLI_SET_PRECISION | CLI_SET_TOKEN_BUDGET | CLI_SET_THREADS |                \
     CLI_SET_MAX_PENDING | CLI_SET_MAX_PENDING_TOKENS)
#define CLS_N_OPTS (CLS_N_OWN + 6)
static void cls_opts(cls_opts_t *o, cli_opt_t out[CLS_N_OPTS + 1]) {
    const cli_opt_t t[] = {
        worker_cli_opt_model(&o->set.model_dir, 0, 1, NULL),
        {"jsonl", CLI_FLAG, &o->jsonl, 0, 0, NULL, NULL,
         "input lines are JSON objects with a \"text\" field", NULL},
        worker_cli_opt_top_k(&o->top_k, 0, 0, "labels listed in top_k"),
        {"logits", CLI_FLAG, &o->logits, 0, 0, NULL, NULL, "add the raw logits", NULL},
        {"max-wait-ms", CLI_INT, &o->set.max_wait_ms, 0, 3600000, NULL, NULL,
         "longest an input waits for a fuller batch", "20"},
    };
    _Static_assert(sizeof(t) / sizeof(t[0]) == CLS_N_OWN, "CLS_N_OWN");
    memcpy(out, t, sizeof(t));
    int n = CLS_N_OWN + worker_cli_settings_opts(&o->set, CLS_SET, 0, out + CLS_N_OWN);
    out[n] = (cli_opt_t){NULL, CLI_FLAG, NULL, 0, 0, NULL, NULL, NULL, NULL};
}

static void usage(FILE *f) {
    fprintf(f, "usage: reclass classify --model DIR [options] < texts\n\n"
               "Reads texts from stdin (one per line, or JSONL objects with a \"text\" field) and\n"
               "prints one JSON object per input line, in input order:\n"
               "  {\"label\", \"confidence\", \"top_k\": [{\"label\", \"p\"}..], \"tokens\", "
               "\"truncated\"[, \"logits\"]}\n"
               "A line that cannot be read prints {\"error\": \"...\"} and the exit code is 2.\n"
               "Twice --max-pending inputs may be in flight (read, queued, or awaiting in-order\n"
               "output).\n\n"
               "options:\n");
    cls_opts_t o;
    cli_opt_t opts[CLS_N_OPTS + 1];
    cls_opts(&o, opts);
    worker_cli_print_opts(f, opts);
}

static common_status_t parse_opts(int argc, char **argv, cls_opts_t *o) {
    *o = (cls_opts_t){0};
    cli_opt_t opts[CLS_N_OPTS + 1];
    cls_opts(o, opts);
    int first = 0;
    common_status_t rc = worker_cli_parse("classify", argc, argv, opts, usage, &first);
    if (rc) return rc;
    if (first < argc) {
        common_logf(stderr, "unexpected argument '%s' (texts come on stdin)\n", argv[first]);
        return COMMON_USAGE;
    }
    if (!o->set.model_dir) {
        common_logf(stderr, "--model DIR is required (a Hugging Face checkpoint "
                            "directory)\n");
        return COMMON_USAGE;
    }
    return COMMON_OK;
}

/* Prints every finished slot at the front of the ring (in input order) and
 * frees them for the reader. Returns how many printed lines were input errors.
 */
static long print_ready(cls_ctx_t *c, long known, long *next_out, const cls_engine_t *eng,
                        const cls_opts_t *o) {
    long errors = 0, start = *next_out;
    const int L = eng->num_labels;
    while (*next_out < known) {
        cls_slot_t *s = &c->slot[*next_out % c->ring];
        c->line.len = 0;
        if (s->state == SLOT_DONE) {
            cls_result_t r;
            cls_score(s->logits, L, o->top_k, &r);
            cls_json_line(&c->line, &r, cls_engine_labels(eng), s->n, s->truncated,
                          o->logits ? s->logits : NULL, L);
        } else if (s->state == SLOT_ERROR) {
            cls_buf_puts(&c->line, "{\"error\": ");
            cls_json_string(&c->line, s->err);
            cls_buf_puts(&c->line, "}\n");
            common_logf(stderr, "%s\n", s->err);
            errors++;
        } else {
            break;
        }
        if (c->line.oom) {
            common_logf(stderr, "out of memory\n");
            exit(1);
        }
        fwrite(c->line.s, 1, c->line.len, stdout);
        s->state = SLOT_FREE;
        (*next_out)++;
    }
    if (*next_out != start) {
        pthread_mutex_lock(&c->mu);
        c->printed_upto = *next_out;
        pthread_cond_signal(&c->cv_reader);
        pthread_mutex_unlock(&c->mu);
    }
    return errors;
}

static struct timespec ts_of_ms(int64_t ms) {
    struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};
    return ts;
}

static const int32_t *slot_ids(void *ctx, void *item) {
    return ((cls_slot_t *)item)->ids;
}

/* The driver's done: a batch's logits into its slots, for print_ready. */
static common_status_t slot_done(void *ctx, void *const *items, const int *lens, int n,
                                 const cls_batch_t *b, common_err_t *err) {
    const int L = ((cls_ctx_t *)ctx)->num_labels;
    for (int i = 0; i < n; i++) {
        cls_slot_t *s = items[i];
        memcpy(s->logits, b->logits + (size_t)i * L, (size_t)L * sizeof(float));
        s->state = SLOT_DONE;
    }
    return COMMON_OK;
}

/* The main thread's loop; returns the status to exit with. */
static common_status_t classify_loop(cls_ctx_t *c, cls_engine_t *eng, worker_accum_t *acc,
                                     const cls_opts_t *o) {
    cls_driver_t drv;
    common_err_t err;
    if (cls_driver_init(&drv, eng, slot_ids, slot_done, c, &err)) {
        common_err_print(stderr, &err);
        return err.code;
    }
    long next_push = 0, next_out = 0, known = 0, errors = 0;
    int eof = 0, full = 0, dirty = 0;
    common_status_t rc = COMMON_OK;
    for (;;) {
        /* 1. learn what the reader published; sleep only with nothing to do */
        pthread_mutex_lock(&c->mu);
        for (;;) {
            known = c->read_upto;
            eof = c->eof;
            if (full || eof || known > next_push || known - next_out >= c->ring) break;
            int64_t dl = worker_accum_next_deadline(acc);
            if (dl != INT64_MAX && common_now_ms() >= dl) break;
            if (dirty) { /* results appear before we sleep (interactive use) */
                pthread_mutex_unlock(&c->mu);
                fflush(stdout);
                dirty = 0;
                pthread_mutex_lock(&c->mu);
                continue;
            }
            if (dl == INT64_MAX) {
                pthread_cond_wait(&c->cv_main, &c->mu);
            } else {
                struct timespec ts = ts_of_ms(dl);
                pthread_cond_timedwait(&c->cv_main, &c->mu, &ts);
            }
        }
        pthread_mutex_unlock(&c->mu);

        /* 2. move read slots into the accumulator, in input order, until full */
        int64_t now = common_now_ms();
        full = 0;
        while (next_push < known) {
            cls_slot_t *s = &c->slot[next_push % c->ring];
            if (s->state == SLOT_READ) {
                common_status_t r = worker_accum_push(acc, s, s->n, now);
                if (r == COMMON_RETRY) {
                    full = 1;
                    break;
                }
                if (r != COMMON_OK) { /* cannot happen: 2 <= n <= max_pos */
                    s->state = SLOT_ERROR;
                    snprintf(s->err, sizeof s->err, "input %ld: %d tokens cannot be batched",
                             next_push + 1, s->n);
                }
            }
            next_push++;
        }

        /* 3. form and run batches while any is due */
        int drained = eof && next_push == known;
        for (;;) {
            now = common_now_ms();
            int64_t t = now;
            if (!drained && !worker_accum_ready(acc, now)) {
                /* the reader waits for the oldest unprinted input, which is pending here:
                 * emit it now rather than at its deadline */
                if (known - next_out < c->ring || worker_accum_pending_items(acc) == 0) break;
                int64_t dl = worker_accum_next_deadline(acc);
                t = dl > now ? dl : now;
            }
            int n = cls_driver_step(&drv, acc, t, drained, &err);
            if (n == 0) break;
            if (n < 0) goto fail;
            full = 0;
            errors += print_ready(c, known, &next_out, eng, o);
            dirty = 1;
            if (next_push < known) break; /* room again: push the rest first */
        }
        if (cls_driver_finish(&drv, &err)) goto fail;
        long e = print_ready(c, known, &next_out, eng, o);
        if (e) dirty = 1;
        errors += e;
        if (full) { /* FULL implies ready, so a pop must have happened */
            common_logf(stderr, "internal error: accumulator full but no batch\n");
            rc = COMMON_BUG;
            goto out;
        }
        if (drained && worker_accum_pending_items(acc) == 0 && next_out == known) break;
    }
    pthread_mutex_lock(&c->mu);
    int fatal = c->fatal;
    pthread_mutex_unlock(&c->mu);
    if (fatal) {
        fflush(stdout);
        common_logf(stderr, "reading stdin failed: %s\n", c->fatal_msg);
        rc = COMMON_FATAL;
    } else if (errors) {
        fflush(stdout);
        common_logf(stderr,
                    "%ld input line(s) could not be read (see their "
                    "{\"error\"} lines)\n",
                    errors);
        rc = COMMON_USAGE;
    }
    goto out;
fail : {
    char line[800];
    fflush(stdout);
    common_logf(stderr, "backend %s failed: %s\n", eng->ops->name,
                common_err_line(&err, line, sizeof line));
    rc = err.code;
}
out:
    if (fflush(stdout) != 0 && rc == COMMON_OK) {
        common_logf(stderr, "writing stdout failed\n");
        rc = COMMON_FATAL;
    }
    cls_driver_free(&drv);
    return rc;
}

common_status_t worker_cmd_classify(int argc, char **argv) {
    cls_opts_t o;
    common_status_t rc = parse_opts(argc, argv, &o);
    if (rc) return rc;

    common_err_t e;
    cls_session_t ses;
    if ((rc = cls_session_open(&ses, &o.set, 1, &e))) {
        common_err_print(stderr, &e);
        return rc;
    }
    /* asked for a precision: say which kernels run it (bf16 by the CPU's features) */
    char kern[256];
    if (o.set.precision && *cls_session_kernels(&ses, kern, sizeof kern))
        common_logf(stderr, "backend %s, precision %s: %s\n", ses.eng.ops->name,
                    ses.props.precision, kern);
    worker_accum_t *acc = NULL;
    worker_input_t *in = NULL;
    cls_ctx_t c;
    memset(&c, 0, sizeof c);
    if ((rc = worker_accum_init(&ses.acc, &acc, &e)) != COMMON_OK ||
        (rc = worker_input_open(stdin, o.jsonl, &in, &e)) != COMMON_OK) {
        common_err_print(stderr, &e);
        goto done;
    }
    rc = COMMON_FATAL;
    const int max_len = ses.props.max_len, L = ses.eng.num_labels;
    c.in = in;
    c.f = stdin;
    c.tok = ses.tok;
    c.max_len = max_len;
    c.num_labels = L;
    c.ring = 2L * ses.acc.max_pending_items;
    c.slot = calloc((size_t)c.ring, sizeof(cls_slot_t));
    c.ids_all = malloc((size_t)c.ring * (size_t)max_len * sizeof(int32_t));
    c.logits_all = malloc((size_t)c.ring * (size_t)L * sizeof(float));
    c.outbuf = malloc(CLS_OUTBUF_BYTES);
    if (!c.slot || !c.ids_all || !c.logits_all || !c.outbuf) {
        common_logf(stderr, "out of memory for %ld input slots\n", c.ring);
        goto done;
    }
    for (long i = 0; i < c.ring; i++) {
        c.slot[i].ids = c.ids_all + (size_t)i * max_len;
        c.slot[i].logits = c.logits_all + (size_t)i * L;
    }
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_mutex_init(&c.mu, NULL);
    pthread_cond_init(&c.cv_main, &ca);
    pthread_cond_init(&c.cv_reader, NULL);
    pthread_condattr_destroy(&ca);
    setvbuf(stdout, c.outbuf, _IOFBF, CLS_OUTBUF_BYTES);

    pthread_t th;
    if (pthread_create(&th, NULL, reader_main, &c) != 0) {
        common_logf(stderr, "cannot start the reader thread\n");
        goto done_sync;
    }
    rc = classify_loop(&c, &ses.eng, acc, &o);
    if (rc != COMMON_OK && rc != COMMON_USAGE && !c.eof) {
        /* a runtime failure while the reader may still block on stdin: the process
         * exits now, so the ring it writes into (and stdout's buffer) are left to the OS
         * rather than freed under it */
        fflush(stdout);
        return rc;
    }
    pthread_join(th, NULL);
done_sync:
    pthread_cond_destroy(&c.cv_main);
    pthread_cond_destroy(&c.cv_reader);
    pthread_mutex_destroy(&c.mu);
done:
    fflush(stdout);
    setvbuf(stdout, NULL, _IOLBF, 0); /* before outbuf goes */
    free(c.outbuf);
    free(c.slot);
    free(c.ids_all);
    free(c.logits_all);
    worker_input_free(in);
    cls_buf_free(&c.line);
    worker_accum_free(acc);
    cls_session_close(&ses);
    return rc;
}
