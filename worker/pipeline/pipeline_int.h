/* Internals shared by the pipeline's threads (the .c files of worker/pipeline/); see
 * worker/pipeline/pipeline.h. */
#ifndef RECLASS_WORKER_PIPELINE_INT_H
#define RECLASS_WORKER_PIPELINE_INT_H

#include <pthread.h>
#include <signal.h>
#include <stdint.h>

#include "common/clock.h"
#include "consumers/avro_codec.h"
#include "consumers/consumer.h"
#include "consumers/dlq.h"
#include "consumers/offsets.h"
#include "consumers/schema_registry.h"
#include "consumers/ticket.h"
#include "gpu/backend.h"
#include "sink/sink.h"
#include "sink/telemetry.h"
#include "worker/pipeline/accum.h"
#include "worker/pipeline/pool.h"
#include "worker/pipeline/fair.h"
#include "worker/classify/session.h"
#include "worker/pipeline/pipeline.h"
#include "worker/observe/drift.h"
#include "worker/observe/drift_judge.h"
#include "worker/observe/metrics.h"
#include "worker/text/tokenizer.h"

/* One ticket on its way through. Created by the poll thread, handed to the accumulator, then
 * owned by the encoder, then by the sink thread, which frees it after its row is committed. */
typedef struct pl_item {
    consumers_ticket_t t; /* strings owned */
    int32_t *ids;         /* (n_ids) token ids, [CLS] ... [SEP] */
    int n_ids;
    int truncated;
    int64_t epoch;      /* the partition's ownership epoch at consumption (consumers/offsets.h) */
    int32_t track;      /* the partition in the offset tracker (consumers/consumer.h: tracks) */
    int lane;           /* its topic's lane, 0 = the most urgent */
    int live;           /* counted in worker_metrics.lane_live until freed */
    int64_t polled_ms;  /* common_now_ms() when the record was polled */
    int64_t arrived_ms; /* ... pushed into the accumulator */
    int64_t queued_ms;  /* ... its batch queued for the sink */
    int label_id;       /* filled by the encoder */
    float confidence;
    char *top_k_json; /* owned */
    /* The record as consumed (key, value; owned), for its dead letter should the database
     * refuse its row. It takes the place of the text, freed once tokenized. */
    void *key, *value;
    size_t key_len, value_len;
    int refused;          /* it ends as a dead letter: on q.failed or q.refused */
    char *dlq_error;      /* owned: why (NULL when out of memory) */
    struct pl_item *next; /* overflow list (poll thread), then the failed or refused list */
} pl_item_t;

/* Results of one encoder batch, queued for the sink thread (which owns it once queued). */
typedef struct pl_out {
    pl_item_t **items; /* (n) */
    int n;
    int urgent; /* of a lane more urgent than the last (worker_fair_urgent_lane) */
    sink_batch_t tel;
    double queued_s; /* common_now_s() when queued for the sink */
    struct pl_out *next;
} pl_out_t;

/* A batch handed back by an encoder whose backend failed, to be run as it is by another
 * encoder (before the accumulator's next batch). Its items array is the failed encoder's
 * (pl_encoder_t.items), which no thread touches again. */
typedef struct pl_retry {
    void **items; /* (n) pl_item_t * */
    int n;
    int urgent;
    struct pl_retry *next;
} pl_retry_t;

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
    pl_out_t *out_head, *out_tail; /* encoder -> sink queue: urgent batches first */
    pl_out_t *out_urgent;          /* the last urgent batch in it; NULL = none */
    long out_items;                /* tickets in that queue */
    long max_out_items;            /* bound before the encoder waits */
    pl_item_t *failed;             /* poll thread -> sink: records that end as dead letters,
                                    * to be counted against their jobs first */
    pl_item_t *refused;            /* sink -> poll thread: tickets recorded as failed (rows the
                                    * database refused, records on failed), to be
                                    * dead-lettered (the dead-letter producer is the poll
                                    * thread's) */
    int draining;                  /* no more pushes: flush the accumulator */
    int enc_done, sink_done;       /* enc_done: every encoder thread has finished */
    pl_retry_t *retry_head, *retry_tail; /* failed encoders' batches, oldest first */
    int enc_running;                     /* encoder threads not yet finished */
    int enc_up;                          /* encoders whose backend has not failed */
    long enc_batches;    /* batches popped by encoders, not yet queued for the sink or handed
                          * back: a draining encoder stays while any is, in case its encoder
                          * fails and hands it back */
    int writers_running; /* sink threads not yet finished */
    int writing;         /* sink threads in a write of results (taken, not yet committed) */
    int sink_down;       /* PostgreSQL unreachable: consumption pauses */
    int fatal;           /* a thread failed: stop without storing anything more */
} pl_queue_t;

/* The hand-offs between the pipeline's threads, in a ticket's order, as the exit statistics'
 * queue table names them: the accumulator (poll thread -> encoder), the encoder's batch in
 * flight (popped -> scored and queued), the sink queue (encoder -> writers), a writer's
 * transaction (taken -> committed) and the offset store (committed -> stored, which waits for
 * every earlier offset of the partition). */
typedef enum { PL_Q_ACCUM, PL_Q_ENCODE, PL_Q_OUT, PL_Q_COMMIT, PL_Q_STORE, PL_Q_N } pl_queue_id_t;

/* One hand-off: the batches through it and how long they sat in it (each batch's mean over
 * its tickets for the accumulator), the waits of the side putting in for room (full) and of
 * the side taking out for work (empty), each timed on the one clock. Waits count once a
 * commit follows them (pend_*: not yet), so that the wait for the first record and the idle
 * exit's are not work's. The offset store counts as full each partition a commit could not
 * store for an earlier offset still in flight. */
typedef struct {
    long batches;
    double wait_s;
    long full, empty;
    double full_s, empty_s;
    long pend_full, pend_empty;
    double pend_full_s, pend_empty_s;
} pl_queue_stat_t;

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
    long transactions;             /* of results committed (rows_written / transactions: rows
                                    * per commit) */
    pl_queue_stat_t queue[PL_Q_N]; /* the hand-offs (pl_queue_id_t) */
} pl_stats_t;

#define PL_BURST 256 /* records tracked here before they are decoded together on the pool */

/* One burst of records in arrival order: tracked by the poll thread, decoded, validated and
 * tokenized on the pool (decode.c), then queued and dead-lettered by the poll thread in the
 * same order. While running, the pool's tasks write items and err only. */
typedef struct {
    consumers_record_t **rec; /* (PL_BURST) the records, kept for a dead letter until queued */
    int64_t *epoch;           /* (PL_BURST) the partition's ownership epoch at consumption */
    int32_t *track;           /* (PL_BURST) its track (consumers/consumer.h) */
    int64_t *polled_ms;       /* (PL_BURST) common_now_ms() when it was polled */
    pl_item_t **items;        /* (PL_BURST) decoded; NULL: a dead letter, err[i] says why */
    common_err_t *err;        /* (PL_BURST) its reclass.error header is common_err_line's */
    int n;
    int running; /* on the pool (job) */
    pl_job_t job;
    struct pl *pl; /* the tasks' pipeline */
} pl_burst_t;

/* The poll thread's own: no lock. Exception: pl_store (any thread, q.mu held) calls
 * consumers_consumer_store on consumer, which librdkafka allows from any thread. */
typedef struct {
    consumers_consumer_t *consumer;
    consumers_dlq_t *dlq;
    consumers_codec_t *codec;
    consumers_registry_t *registry; /* NULL: framed ids name local schema files */
    /* records whose writer schema the registry could not give yet, in arrival order; while
     * any wait, every later record waits behind them (held.c) */
    consumers_record_t **held; /* (held_cap) */
    int held_n, held_cap;
    double held_retry_s, held_backoff_s;
    pl_item_t *ovf_head, *ovf_tail; /* consumed, waiting for accumulator room */
    long ovf_n;
    long pauses; /* times consumption was paused (backpressure) */
    long holds;  /* backlogs waited out without a pause */
    int bp_hold; /* a backlog holds the lanes less urgent than the first (lanes.c) */
    /* Two bursts (decode.c): burst[fill] is filled here while burst[!fill], when running, is
     * decoded on the pool */
    pl_burst_t burst[2];
    int fill;
    consumers_codec_t **decoders; /* (pl_pool_slots) the pool's Avro decoders, one per slot
                                   * (a codec is one thread's); codec above is the poll
                                   * thread's, for schema ids and the registry */
    worker_ids_t *tok_scratch;    /* (pl_pool_slots) one id vector per decoding thread */
} pl_poll_t;

/* One result writer: a sink thread and its connection. */
typedef struct {
    struct pl *pl;
    sink_t *sink;
    pthread_t th;
    int started;
} pl_sink_writer_t;

/* The sink threads' own (set up and torn down while no sink thread runs): the writers; the
 * first writer's thread alone writes telemetry, on its connection, except the drift counts
 * every writer adds under drift_mu. */
typedef struct {
    sink_t *sink;              /* the first writer's connection: results and telemetry */
    pl_sink_writer_t *writers; /* (n_writers) */
    int n_writers;
    pthread_mutex_t drift_mu;     /* drift, between the writers */
    worker_drift_t *drift;        /* drift windows (worker/pipeline/telemetry.c) */
    sink_drift_row_t *drift_rows; /* (drift_max_tenants + 1) rows of a flush */
    worker_drift_judge_t *judge;  /* its judge and buffers (worker/observe/drift_judge.c) */
    int64_t drift_last_end_s;     /* the end of the last window written (unix s), 0 none */
    double next_gpu_row_s;        /* monotonic time of the next gpu_memory row */
    double next_reconnect_s;      /* telemetry's next reconnect attempt */
    int telemetry_off;            /* tables missing, stop trying */
} pl_sink_own_t;

/* One encoder: a thread that drives one engine (a backend instance, its arena, two batches
 * in flight) on one device. Set up before the threads start; its thread alone uses it then. */
typedef struct pl_encoder {
    struct pl *pl;
    int id;            /* 0 .. n_enc - 1, as log lines and /metrics name it */
    int device;        /* the device its engine is opened on (--devices); its rows name
                        * pl_encoder_device's */
    cls_engine_t *eng; /* encoder 0: &pl->ses.eng; the others: &own */
    cls_engine_t own;
    void **items[2];      /* (max_seqs) each: the items of its two batches in flight */
    int *lens;            /* (max_seqs) packing scratch */
    const int32_t **seqp; /* (max_seqs) */
    pl_retry_t retry[2];  /* its batches in flight, should its backend fail */
    pthread_t th;
    int started;
} pl_encoder_t;

typedef struct pl {
    /* Set up before the threads start and read-only while they run: no lock. */
    const worker_run_cfg_t *cfg;
    /* model, tokenizer, the first encoder's backend (ses.eng), what every encoder's runs
     * (ses.props) and the accumulator's config (ses.acc) */
    cls_session_t ses;
    pl_encoder_t *enc; /* (n_enc) --encoders on each of --devices */
    int n_enc;
    worker_http_t *http;                    /* /healthz /readyz /metrics; NULL when --http-port 0 */
    char worker_id[320];                    /* hostname:pid */
    pl_pool_t *pool;                        /* tokenizing and scoring threads (--threads) */
    long long stage_ns0[WORKER_STAGE_N][2]; /* worker_metrics' stage times at start */

    pl_queue_t q;     /* under q.mu */
    pl_stats_t st;    /* under q.mu */
    pl_poll_t poll;   /* poll thread */
    pl_sink_own_t sk; /* sink thread */
} pl_t;

/* How long the threads wait, in milliseconds: short enough that a flag (stop, fatal, drain)
 * is seen within one, long enough that an idle worker does not spin. */
#define PL_RECHECK_MS          100  /* longest timed wait: flags are re-checked this often */
#define PL_READY_POLL_MS       5    /* encoder: the accumulator is ready but formed no batch yet */
#define PL_HOLD_POLL_MS        10   /* poll thread: waiting out a short backlog */
#define PL_POLL_FULL_MS        20   /* poll thread: consumer poll while the accumulator is full */
#define PL_POLL_MS             100  /* poll thread: consumer poll otherwise */
#define PL_DRAIN_POLL_MS       50   /* consumer polls while draining and at the final commit */
#define PL_SINK_IDLE_MS        250  /* sink: wake-ups of an idle sink (drift windows still close) */
#define PL_RETRY_FIRST_MS      100  /* sink: first reconnection delay, doubling */
#define PL_RETRY_MAX_MS        5000 /* sink: longest reconnection delay */
#define PL_FINAL_COMMIT_S      20.0 /* the last commit's retries during a rebalance */
#define PL_OVERFLOW_URGENT_MAX 4096 /* urgent records read while a less urgent lane holds back */
/* A result writer starts a transaction beside another writer's only once this share of
 * --sink-rows waits (1/PL_SINK_GROUP_DIV): a commit costs PostgreSQL a fixed part (statements,
 * the WAL flush) that one batch's rows do not amortize, and what waits meanwhile goes into
 * the next transaction of the writer that finishes first, one commit later at most. */
#define PL_SINK_GROUP_DIV 8

/* worker/pipeline/clock.c: the timed waits and the item destructor every pipeline thread
 * uses (the clock is common/clock.h). */
/* pthread_cond_timedwait on cv (mu held) until wake_ms (common_now_ms clock), at most 100 ms. */
void pl_wait_until_ms(pthread_cond_t *cv, pthread_mutex_t *mu, int64_t wake_ms);
/* pthread_cond_timedwait on cv (mu held) for ms milliseconds. */
void pl_timedwait_ms(pthread_cond_t *cv, pthread_mutex_t *mu, int ms);
void pl_item_free(pl_item_t *it);
/* Counts one wait of hand-off q's producer (full) or consumer (empty) that began at since_s
 * (common_now_s; clipped to the first record, none before it) into st, pending until the
 * next commit of results (pl_queue_commit) makes it count; q.mu held. pl_queue_wait is
 * pl_wait_until_ms counted so. */
void pl_queue_count(pl_stats_t *st, int q, int full, double since_s);
void pl_queue_wait(pl_stats_t *st, int q, int full, pthread_cond_t *cv, pthread_mutex_t *mu,
                   int64_t wake_ms);
void pl_queue_commit(pl_stats_t *st);

/* Stores next_offset for partition with Kafka and remembers it (caller holds q.mu). */
void pl_store(pl_t *pl, int32_t partition, int64_t next_offset);

/* Telemetry set-up (worker id, drift buffers, HTTP endpoints) after the backend is up, and its
 * teardown. COMMON_OK, or the status with e (a bad --http-addr COMMON_USAGE). */
common_status_t pl_telemetry_init(pl_t *pl, common_err_t *e);
void pl_telemetry_free(pl_t *pl);

/* Sink thread, between writes (mu not held): closes and flushes drift windows that ended,
 * writes a gpu_memory row when one is due. final: flush everything, write the exit row. */
void pl_telemetry_tick(pl_t *pl, int final);

/* Counts committed items into the open drift window (sink thread, mu not held). */
void pl_telemetry_drift_add(pl_t *pl, pl_item_t *const *its, int n);

/* Publishes every encoder's backend memory statistics to worker_metrics. */
void pl_telemetry_mem(pl_t *pl);
/* Publishes encoder en's backend mem_stats on /metrics (the encoder and telemetry both call it). */
void pl_metrics_store_mem(const pl_encoder_t *en, const gpu_mem_stats_t *ms);

/* worker/pipeline/poll.c: the poll thread's loop (returns on a stop signal, idle exit or a
 * fatal error), the drain that finishes the work in flight, and the callbacks it registers
 * with the consumer (rebalances). */
/* worker/pipeline/held.c: writer schemas from a Schema Registry, and the records waiting for
 * one while the registry cannot answer. */
enum { PL_SCHEMA_READY, PL_SCHEMA_WAIT, PL_SCHEMA_FATAL };
/* no-op without --schema-registry; else consumers_registry_open's status and e */
common_status_t pl_held_open(pl_t *pl, common_err_t *e);
void pl_held_free(pl_t *pl);
/* Whether m can be decoded now (READY: its schema is known, or the registry said it does
 * not exist and the codec will dead-letter it), must WAIT, or the registry refuses us
 * (FATAL, e says why; WAIT, e says what failed). Looks the id up in the registry on first sight. */
int pl_schema_check(pl_t *pl, const consumers_record_t *m, common_err_t *e);
int pl_held_push(pl_t *pl, consumers_record_t *m); /* 0, or -1 out of memory */
/* The first held record once its schema is known (popped), or NULL: nothing held, not yet
 * time to ask again, still waiting, or *fatal set with e. */
consumers_record_t *pl_held_next(pl_t *pl, int *fatal, common_err_t *e);
void pl_held_revoke(pl_t *pl, const int32_t *parts, int n); /* n < 0: every partition */

void pl_poll_loop(pl_t *pl);
/* worker/pipeline/lanes.c: while tickets of a lane wait or are in flight, or while a backlog
 * lasts (poll.bp_hold), the less urgent lanes' topics are held; released once it has none
 * (poll thread, each turn). */
void pl_hold_lanes(pl_t *pl);
/* Pushes the overflow into the accumulator, the most urgent lanes first; 1 while some remain. */
int pl_drain_overflow(pl_t *pl);
/* Pauses or resumes consumption for a full accumulator (full: the overflow remains) or a
 * database that is down; pending: the accumulator's items. */
void pl_backpressure(pl_t *pl, int full, int sink_down, int pending);
void pl_drain(pl_t *pl);
void pl_on_assign(void *ctx, const int32_t *parts, int n);
void pl_on_revoke(void *ctx, const int32_t *parts, int n, int lost);
/* worker/pipeline/dead_letters.c: records that end as dead letters. pl_dead_letter queues one
 * for the sink to count against its job (it: the record's item when it was decoded, taken
 * over, else NULL: what the record says of itself is read as far as it can be); the sink hands
 * it back on q.refused, and pl_send_refused (poll thread) sends those; pl_dlq_done, the
 * dead-letter producer's delivery callback, counts the source record as committed. */
void pl_dead_letter(pl_t *pl, consumers_record_t *m, pl_item_t *it, const char *err, int64_t epoch,
                    int32_t track);
void pl_send_refused(pl_t *pl);
void pl_dlq_done(void *ctx, int32_t partition, int64_t offset, int64_t epoch);
/* worker/pipeline/decode.c: the pool's side of a burst. Start decodes, validates and
 * tokenizes b's records on the pool without waiting; wait returns once it is done (the caller
 * helps). Adds a Schema Registry's writer schema to the pool's decoders (none may be running). */
common_status_t pl_decoders_open(pl_t *pl, common_err_t *e); /* or the codec's status, e */
void pl_decoders_free(pl_t *pl);
void pl_decode_start(pl_t *pl, pl_burst_t *b);
void pl_decode_wait(pl_t *pl, pl_burst_t *b);
void pl_decoders_add_schema(pl_t *pl, int32_t id, const char *schema);
/* poll.c: finishes the burst on the pool, if any, and queues it (before a schema is added) */
void pl_decode_settle(pl_t *pl);

void *pl_encoder_main(void *arg); /* arg: its pl_encoder_t */
/* worker/pipeline/encode.c: the device en's batches and gpu_memory rows name (the sink stores
 * < 0 as NULL): its CUDA ordinal, or -1 on a backend without devices (the cpu: the host). */
int pl_encoder_device(const pl_encoder_t *en);
void *pl_sink_main(void *arg);

/* Set by the signal handler; read by the poll loop. */
extern volatile sig_atomic_t pl_stop_signal;

#endif
