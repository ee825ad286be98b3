/* A member of a Kafka consumer group (librdkafka high-level consumer) that reads one topic, or
 * several topics each with a priority (lanes).
 *
 * Offsets: enable.auto.offset.store=false, so nothing is committed until the caller stores an
 * offset (consumers_consumer_store, after the rows are in PostgreSQL); enable.auto.commit=true
 * commits stored offsets in the background, and consumers_consumer_close commits once more.
 *
 * Rebalancing: partition.assignment.strategy=cooperative-sticky (incremental assign/unassign;
 * eager protocols are handled too). The caller's callbacks run on the polling thread inside
 * consumers_consumer_poll: on_assign before the partitions are added (so the caller can set up
 * their state before any of their records arrive), on_revoke before they are removed (so the
 * caller can store what is committed; in-flight work of those partitions is then dropped
 * without storing offsets: the new owner re-reads it and the sink's upsert absorbs the
 * redelivery).
 *
 * Backpressure: pause/resume stop and restart fetching of every assigned partition (also
 * those assigned while paused) while the caller keeps polling, so the member never exceeds
 * max.poll.interval.ms. All calls except consumers_consumer_store come from one thread. */
#ifndef RECLASS_CONSUMERS_CONSUMER_H
#define RECLASS_CONSUMERS_CONSUMER_H

#include <stddef.h>
#include <stdio.h>
#include <stdint.h>

#include "common/err.h"

typedef struct consumers_consumer consumers_consumer_t;

/* One consumed record, owned by the caller from consumers_consumer_poll until
 * consumers_record_free; opaque, so that only consumers/ sees librdkafka. */
typedef struct consumers_record consumers_record_t;

/* The record's value (NULL when it has none) and its length in *len. */
const void *consumers_record_value(const consumers_record_t *r, size_t *len);
/* Its key (NULL when it has none) and the key's length in *len. */
const void *consumers_record_key(const consumers_record_t *r, size_t *len);
int32_t consumers_record_partition(const consumers_record_t *r);
int64_t consumers_record_offset(const consumers_record_t *r);
/* The topic it was read from ("" when unknown); valid while the record is. */
const char *consumers_record_topic(const consumers_record_t *r);
void consumers_record_free(consumers_record_t *r);

/* Lanes. With several topics a partition is named by its track: partition * n_topics + the
 * topic's index in the configuration (one topic: the track is the partition), so the caller's
 * per-partition state (consumers/offsets.h) needs no topic. Each topic's partitions are read
 * from their lane's own queue, and poll returns a record of the most urgent lane that has one
 * (librdkafka's single consumer queue would hand over every prefetched bulk record before an
 * urgent one). */
#define CONSUMERS_MAX_TOPICS 8

/* parts: tracks (see above) */
typedef struct {
    void (*on_assign)(void *ctx, const int32_t *parts, int n);
    /* lost != 0: the partitions were taken away (session timeout), storing is pointless */
    void (*on_revoke)(void *ctx, const int32_t *parts, int n, int lost);
    void *ctx;
} consumers_rebalance_t;

typedef struct {
    const char *brokers;
    const char *topic; /* used when n_topics is 0 */
    /* several topics: names and priorities (lower = more urgent; equal = one lane) */
    const char *const *topics;
    const int *priorities;
    int n_topics; /* 0..CONSUMERS_MAX_TOPICS */
    const char *group;
    int max_poll_interval_ms;    /* 0 = librdkafka's default (300000) */
    int session_timeout_ms;      /* 0 = librdkafka's default */
    int auto_commit_interval_ms; /* 0 = default (5000) */
    /* extra librdkafka properties "key=value" (security.protocol, sasl.*...), NULL-ended */
    const char *const *extra;
    FILE *log; /* rebalances and Kafka errors, a line each (the CLI: stderr); NULL: quiet */
} consumers_consumer_cfg_t;

/* Subscribes; the group is joined during the first polls. COMMON_OK; COMMON_USAGE with e
 * naming the bad property or topic list; COMMON_FATAL, out of memory or a refused
 * subscription. */
common_status_t consumers_consumer_init(const consumers_consumer_cfg_t *cfg,
                                        const consumers_rebalance_t *rb, consumers_consumer_t **out,
                                        common_err_t *e);

/* Next record, or NULL on timeout. Errors are logged to cfg.log and swallowed, except fatal
 * ones (consumers_consumer_fatal). The caller frees the record with consumers_record_free. */
consumers_record_t *consumers_consumer_poll(consumers_consumer_t *c, int timeout_ms);

/* COMMON_FATAL with e once the client hit a fatal error: stop, do not store; else COMMON_OK. */
common_status_t consumers_consumer_fatal(consumers_consumer_t *c, common_err_t *e);

int consumers_consumer_pause(consumers_consumer_t *c);
int consumers_consumer_resume(consumers_consumer_t *c);
int consumers_consumer_paused(const consumers_consumer_t *c);

/* Priority holds, independent of pause/resume (a partition fetches only when neither stops
 * it): topics whose priority is above `priority` stop fetching (librdkafka pause: fetched,
 * unread records are dropped and fetched again from the position on release; offsets are
 * untouched), the others fetch. INT_MAX releases every topic. A hold stays on partitions
 * assigned while it lasts. Returns the number of topics whose state changed, or -1. */
int consumers_consumer_hold_above(consumers_consumer_t *c, int priority);

/* A record of one lane's queue, without waiting (NULL: none, or a single lane): lets a caller
 * that stopped reading for a less urgent lane's backlog still take urgent records. */
consumers_record_t *consumers_consumer_poll_lane(consumers_consumer_t *c, int lane);

int consumers_consumer_n_topics(const consumers_consumer_t *c);
/* Lanes: the distinct priorities, 0 = the most urgent; a topic's lane; a lane's priority. */
int consumers_consumer_n_lanes(const consumers_consumer_t *c);
int consumers_consumer_topic_lane(const consumers_consumer_t *c, int topic_index);
int consumers_consumer_lane_priority(const consumers_consumer_t *c, int lane);
/* The track of a record returned by poll; its topic's index; a topic's priority. */
int32_t consumers_consumer_track(const consumers_consumer_t *c, const consumers_record_t *r);
int consumers_consumer_track_topic(const consumers_consumer_t *c, int32_t track);
int consumers_consumer_topic_priority(const consumers_consumer_t *c, int topic_index);
const char *consumers_consumer_topic_name(const consumers_consumer_t *c, int topic_index);

/* Stores next_offset (last committed + 1) for a track; thread-safe. Returns 0 or -1. */
int consumers_consumer_store(consumers_consumer_t *c, int32_t track, int64_t next_offset);

/* Synchronously commits the stored offsets. COMMON_OK (nothing stored is not an error);
 * COMMON_RETRY with e when the group refused it for a rebalance (this member's generation is
 * being replaced: the partitions' next owner commits); COMMON_FATAL with e for any other
 * failure. */
common_status_t consumers_consumer_commit(consumers_consumer_t *c, common_err_t *e);

/* Commits stored offsets and leaves the group (its partitions move to other members at
 * once). Idempotent; free still has to be called. A member that never got an assignment is
 * not closed with librdkafka < 2.3 (a bug there aborts the process): it holds nothing. */
void consumers_consumer_close(consumers_consumer_t *c);
void consumers_consumer_free(consumers_consumer_t *c);

/* Rebalance callbacks (assign or revoke) served so far; 0 = still joining the group. */
long consumers_consumer_rebalances(const consumers_consumer_t *c);

const char *consumers_consumer_topic(const consumers_consumer_t *c);

/* Records in the assigned partitions past this member's fetch position, from the high
 * watermarks of the last fetch responses (no broker round trip); -1 when the assignment
 * cannot be read. What the worker has fetched but not yet committed is not in it. */
long consumers_consumer_lag(consumers_consumer_t *c);

/* 1 when every assigned partition has been read to its high watermark (or none is assigned):
 * asked of the brokers, not of the last fetch responses, so a fetch still in flight does not
 * look like an empty partition. 0 when records are left to read; -1 when the brokers did not
 * answer within timeout_ms. Blocks for the round trips: call it when about to stop, not per
 * poll. What was read but not yet committed is the caller's to count. */
int consumers_consumer_caught_up(consumers_consumer_t *c, int timeout_ms);

#endif
