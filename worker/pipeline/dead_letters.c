/* Records that end as dead letters (see worker/pipeline/pipeline_int.h): queued for the sink,
 * which counts each against its job first (q.failed), then sent by the poll thread, which owns
 * the dead-letter producer (q.refused); a record's offset counts as committed once Kafka has
 * its letter. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/err.h"
#include "worker/pipeline/pipeline_int.h"

/* A dead letter is in Kafka: its source record counts as committed (tag = the epoch of the
 * partition's assignment it was read in). */
void pl_dlq_done(void *ctx, int32_t partition, int64_t offset, int64_t epoch) {
    pl_t *pl = ctx;
    (void)partition; /* the topic's: the epoch names the track */
    pthread_mutex_lock(&pl->q.mu);
    int32_t track = consumers_offsets_partition_of_epoch(pl->q.offsets, epoch);
    if (track >= 0 && consumers_offsets_committed(pl->q.offsets, track, epoch, offset)) {
        int64_t s = consumers_offsets_storable(pl->q.offsets, track);
        if (s >= 0) pl_store(pl, track, s);
    }
    pl->st.dead_letters++;
    pthread_mutex_unlock(&pl->q.mu);
    worker_metrics_add(&worker_metrics.dead_lettered, 1);
}

void pl_send_refused(pl_t *pl) {
    pthread_mutex_lock(&pl->q.mu);
    pl_item_t *it = pl->q.refused;
    pl->q.refused = NULL;
    pthread_mutex_unlock(&pl->q.mu);
    while (it) {
        pl_item_t *next = it->next;
        const char *topic = consumers_consumer_topic_name(
            pl->poll.consumer, consumers_consumer_track_topic(pl->poll.consumer, it->track));
        if (consumers_dlq_send_copy(pl->poll.dlq, topic, it->t.partition, it->t.offset, it->key,
                                    it->key_len, it->value, it->value_len,
                                    it->dlq_error ? it->dlq_error : "the database refused the row",
                                    it->t.job_id, it->t.tenant, it->epoch)) {
            common_logf(stderr,
                        "out of memory keeping the dead letter of partition %" PRId32
                        " offset %" PRId64 "; stopping (its offset stays unstored)\n",
                        it->t.partition, it->t.offset);
            pthread_mutex_lock(&pl->q.mu);
            pl->q.fatal = 1;
            pthread_mutex_unlock(&pl->q.mu);
        }
        pl_item_free(it);
        it = next;
    }
}

/* A record that ends as a dead letter: counted against its job in PostgreSQL first (the sink
 * takes q.failed), then sent, from q.refused, by pl_send_refused; its offset is committed once
 * Kafka has the letter. it: the record's item when it was decoded (taken over), else NULL: what
 * the record says of itself is read as far as it can be. */
void pl_dead_letter(pl_t *pl, consumers_record_t *m, pl_item_t *it, const char *err, int64_t epoch,
                    int32_t track) {
    if (!it && (it = calloc(1, sizeof(*it))) != NULL) {
        size_t len = 0, key_len = 0;
        const void *value = consumers_record_value(m, &len);
        const void *key = consumers_record_key(m, &key_len);
        consumers_codec_identity(pl->poll.codec, value, len, &it->t);
        it->value = malloc(len ? len : 1);
        it->key = key && key_len ? malloc(key_len) : NULL;
        if (it->value && len) memcpy(it->value, value, len);
        if (it->key) memcpy(it->key, key, key_len);
        it->value_len = len;
        it->key_len = it->key ? key_len : 0;
        if (!it->value || (key && key_len && !it->key)) {
            pl_item_free(it);
            it = NULL;
        }
    }
    if (it) {
        free(it->ids);
        it->ids = NULL;
        it->t.partition = consumers_record_partition(m);
        it->t.offset = consumers_record_offset(m);
        it->epoch = epoch;
        it->track = track;
        it->refused = 1;
        free(it->dlq_error);
        it->dlq_error = strdup(err);
    }
    if (!it || !it->dlq_error) {
        common_logf(stderr,
                    "out of memory keeping the dead letter of partition %" PRId32 " offset %" PRId64
                    "; stopping (its offset stays unstored)\n",
                    consumers_record_partition(m), consumers_record_offset(m));
        pl_item_free(it);
        pthread_mutex_lock(&pl->q.mu);
        pl->q.fatal = 1;
        pthread_mutex_unlock(&pl->q.mu);
        return;
    }
    pthread_mutex_lock(&pl->q.mu);
    it->next = pl->q.failed;
    pl->q.failed = it;
    pthread_cond_signal(&pl->q.cv_sink);
    pthread_mutex_unlock(&pl->q.mu);
}
