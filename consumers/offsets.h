/* Per-partition tracker of consumed vs committed (to PostgreSQL) Kafka offsets. The offset a
 * worker may store is the end of the contiguous committed prefix: an offset is storable only
 * when it and every earlier offset *consumed* from that partition are committed. Offsets are
 * tracked as consumed, never by arithmetic, because a partition's offsets can have gaps
 * (compaction, transaction markers).
 *
 * Each partition has an epoch that changes whenever its ownership changes (assign/revoke).
 * Work started under an old epoch can be marked done, but it is ignored: after a revocation
 * the new owner re-reads those records, and the sink's upsert makes the redelivery harmless.
 *
 * Not thread-safe: the caller holds its own lock. */
#ifndef RECLASS_CONSUMERS_OFFSETS_H
#define RECLASS_CONSUMERS_OFFSETS_H

#include <stddef.h>
#include <stdint.h>

typedef struct consumers_offsets consumers_offsets_t;

int consumers_offsets_init(consumers_offsets_t **out);
void consumers_offsets_free(consumers_offsets_t *t);

/* Starts (or restarts) tracking a partition: forgets what was tracked under the previous
 * epoch and returns the new epoch (> 0), or -1 when out of memory. */
int64_t consumers_offsets_assign(consumers_offsets_t *t, int32_t partition);

/* Stops tracking a partition (revoked or lost): its in-flight offsets are dropped without ever
 * becoming storable. Returns how many consumed offsets were still uncommitted. */
int consumers_offsets_revoke(consumers_offsets_t *t, int32_t partition);

/* Current epoch of a partition, 0 when not assigned. */
int64_t consumers_offsets_epoch(const consumers_offsets_t *t, int32_t partition);

/* Records that offset was consumed (handed to the pipeline). Offsets of one partition must
 * arrive in increasing order. Returns 0; -1 when out of memory, the partition is not
 * assigned under that epoch, or offset is not above the last one tracked. */
int consumers_offsets_consumed(consumers_offsets_t *t, int32_t partition, int64_t epoch,
                               int64_t offset);

/* Marks a consumed offset committed (its row is in PostgreSQL, or its dead letter was
 * delivered). Returns 1 when marked, 0 when ignored (stale epoch, unknown or already
 * committed offset). */
int consumers_offsets_committed(consumers_offsets_t *t, int32_t partition, int64_t epoch,
                                int64_t offset);

/* The offset to store for a partition (last offset of the committed prefix + 1, Kafka's "next
 * to read"), or -1 when the prefix has not advanced since the last call that returned it.
 * Calling it releases the prefix's memory. */
int64_t consumers_offsets_storable(consumers_offsets_t *t, int32_t partition);

/* The partition whose current epoch is epoch (epochs are unique), or -1 when none is: a
 * late answer for work of a revoked partition. */
int32_t consumers_offsets_partition_of_epoch(const consumers_offsets_t *t, int64_t epoch);

/* Consumed but not yet committed offsets: of one partition, or of all when partition < 0. */
long consumers_offsets_pending(const consumers_offsets_t *t, int32_t partition);

/* Writes up to cap assigned partition ids; returns how many are assigned. */
int consumers_offsets_partitions(const consumers_offsets_t *t, int32_t *parts, int cap);

#endif
