/* Internals shared by the pipeline's threads (the .c files of worker/pipeline/); see
 * worker/pipeline/pipeline.h. */
#ifndef RECLASS_WORKER_PIPELINE_INT_H
#define RECLASS_WORKER_PIPELINE_INT_H

#include <pthread.h>
#include <signal.h>
#include <stdint.h>

#include "consumers/avro_codec.h"
#include "consumers/consumer.h"
#include "consumers/dlq.h"
#include "consumers/offsets.h"
#include "consumers/ticket.h"
#include "gpu/backend.h"
#include "sink/sink.h"
#include "sink/telemetry.h"
#include "worker/pipeline/accum.h"
#include "worker/pipeline/fair.h"
#include "worker/classify/engine.h"
#include "worker/cli/config.h"
#include "worker/observe/drift.h"
#include "worker/observe/metrics.h"
#include "worker/text/tokenizer.h"

/* One ticket on its way through. Created by the poll thread, handed to the accumulator, then
 * owned by the encoder, then by the sink thread, which frees it after its row is committed. */
typedef struct pl_item {
    consumers_ticket_t t; /* strings owned */
    int32_t *ids;         /* (n_ids) token ids, [CLS] ... [SEP] */
    int n_ids;
    int truncated;
    int64_t epoch; /* the partition's ownership epoch at consumption (consumers/offsets.h) */
    int32_t track; /* the partition in the offset tracker (consumers/consumer.h: tracks) */
    int lane;      /* its topic's lane, 0 = the most urgent */
    int live;      /* counted in worker_metrics.lane_live until freed */
    int64_t arrived_ms;
    int label_id; /* filled by the encoder */
    float confidence;
    char *top_k_json;     /* owned */
    struct pl_item *next; /* overflow list (poll thread only) */
} pl_item_t;

/* Results of one encoder batch, queued for the sink thread (which owns it once queued). */
typedef struct pl_out {
    pl_item_t **items; /* (n) */
    int n;
    sink_batch_t tel;
    struct pl_out *next;
} pl_out_t;

/* The encoder -> sink queue, the accumulator and the flags the threads steer by. Every field
 * (the mutex and condition variables aside) is read and written only with mu held, by any of
 * the poll, encoder and sink threads. */
typedef struct {
    pthread_mutex_t mu;
    pthread_cond_t cv_enc;   /* encoder: items pushed, draining started */
    pthread_cond_t cv_sink;  /* sink: results queued, encoder finished */
    pthread_cond_t cv_room;  /* encoder: the sink queue has room again */
    pthread_cond_t cv_accum; /* consumer: the encoder took a batch (accumulator room) */
    worker_fair_t *acc;      /* poll thread pushes, encoder pops */
    consumers_offsets_t *offsets;
    pl_out_t *out_head, *out_tail; /* encoder -> sink queue */
    long out_items;                /* tickets in that queue */
    long max_out_items;            /* bound before the encoder waits */
    int draining;                  /* no more pushes: flush the accumulator */
    int enc_done, sink_done;
    int sink_down; /* PostgreSQL unreachable: consumption pauses */
    int fatal;     /* a thread failed: stop without storing anything more */
} pl_queue_t;

/* Counters for the exit statistics and progress lines: written by the thread that did the
 * work, read by the poll thread and at exit, always with queue.mu held. */
typedef struct {
    long tickets_done, batches_done, dead_letters, truncated, rows_written;
    long revoked_partitions, dropped_in_flight, stale_skipped;
    int64_t *stored; /* (n_stored) last offset stored per partition, -1 = none */
    int n_stored;
    double encoder_s;
    double first_record_s, last_commit_s; /* monotonic seconds, 0 = not yet */
    double sink_s;
} pl_stats_t;

/* The poll thread's own: no lock. Exception: pl_store (any thread, q.mu held) calls
 * consumers_consumer_store on consumer, which librdkafka allows from any thread. */
typedef struct {
    consumers_consumer_t *consumer;
    consumers_dlq_t *dlq;
    consumers_codec_t *codec;
    pl_item_t *ovf_head, *ovf_tail; /* consumed, waiting for accumulator room */
    long ovf_n;
    long pauses; /* times consumption was paused (backpressure) */
    long holds;  /* backlogs waited out without a pause */
} pl_poll_t;

/* The sink thread's own: no lock (set up and torn down while no sink thread runs). */
typedef struct {
    sink_t *sink;
    worker_drift_t *drift;        /* drift windows (worker/pipeline/telemetry.c) */
    sink_drift_row_t *drift_rows; /* (drift_max_tenants + 1) rows of a flush */
    double next_gpu_row_s;        /* monotonic time of the next gpu_memory row */
    double next_reconnect_s;      /* telemetry's next reconnect attempt */
    int telemetry_off;            /* tables missing, stop trying */
} pl_sink_own_t;

typedef struct {
    /* Set up before the threads start and read-only while they run: no lock. */
    const worker_run_cfg_t *cfg;
    gpu_model_t *model;
    worker_tok_t *tok;
    cls_engine_t eng; /* the backend instance: the encoder thread's while it runs */
    worker_accum_cfg_t acc_cfg;
    int max_seqs;          /* sequences per batch the backend holds */
    int token_budget;      /* tokens per batch: the flag's, or the backend's default */
    int max_len;           /* tokens per text after truncation */
    worker_http_t *http;   /* /healthz /readyz /metrics; NULL when --http-port 0 */
    char worker_id[320];   /* hostname:pid */
    const char *precision; /* what the backend runs */

    pl_queue_t q;     /* under q.mu */
    pl_stats_t st;    /* under q.mu */
    pl_poll_t poll;   /* poll thread */
    pl_sink_own_t sk; /* sink thread */
} pl_t;

/* worker/pipeline/clock.c: the clock, the timed waits and the item destructor every
 * pipeline thread uses. */
double pl_now_s(void); /* monotonic seconds */
int64_t pl_now_ms(void);
/* pthread_cond_timedwait on cv (mu held) until wake_ms (pl_now_ms clock), at most 100 ms. */
void pl_wait_until_ms(pthread_cond_t *cv, pthread_mutex_t *mu, int64_t wake_ms);
/* pthread_cond_timedwait on cv (mu held) for ms milliseconds. */
void pl_timedwait_ms(pthread_cond_t *cv, pthread_mutex_t *mu, int ms);
void pl_item_free(pl_item_t *it);

/* Stores next_offset for partition with Kafka and remembers it (caller holds q.mu). */
void pl_store(pl_t *pl, int32_t partition, int64_t next_offset);

/* Telemetry set-up (worker id, drift buffers, HTTP endpoints) after the backend is up, and its
 * teardown. 0, or an exit code with err. */
int pl_telemetry_init(pl_t *pl, char *err, size_t errlen);
void pl_telemetry_free(pl_t *pl);

/* Sink thread, between writes (mu not held): closes and flushes drift windows that ended,
 * writes a gpu_memory row when one is due. final: flush everything, write the exit row. */
void pl_telemetry_tick(pl_t *pl, int final);

/* Counts committed items into the open drift window (sink thread, mu not held). */
void pl_telemetry_drift_add(pl_t *pl, pl_item_t *const *its, int n);

/* Publishes the backend's memory statistics to worker_metrics. */
void pl_telemetry_mem(pl_t *pl);
/* Publishes a backend's mem_stats on /metrics (the encoder and telemetry ticks both call it). */
void pl_metrics_store_mem(const gpu_mem_stats_t *ms);

/* worker/pipeline/poll.c: the poll thread's loop (returns on a stop signal, idle exit or a
 * fatal error), the drain that finishes the work in flight, and the callbacks it registers
 * with the consumer (rebalances) and the dead-letter producer (deliveries). */
void pl_poll_loop(pl_t *pl);
void pl_drain(pl_t *pl);
void pl_on_assign(void *ctx, const int32_t *parts, int n);
void pl_on_revoke(void *ctx, const int32_t *parts, int n, int lost);
void pl_dlq_done(void *ctx, int32_t partition, int64_t offset, int64_t epoch);

void *pl_encoder_main(void *arg);
void *pl_sink_main(void *arg);

/* Set by the signal handler; read by the poll loop. */
extern volatile sig_atomic_t pl_stop_signal;

#endif
