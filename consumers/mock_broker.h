/* An embedded Kafka for development and tests: librdkafka's mock cluster (in-memory, one
 * broker on 127.0.0.1) started and stopped from C. `reclass dev-broker`, the integration
 * tests and the demo use it; nothing in production does.
 *
 * Limits that come from librdkafka's mock cluster (not from this wrapper):
 *  - data lives in memory only, so it is for tests and demos, not for real jobs;
 *  - each partition keeps a bounded log and deletes its oldest record batches beyond it (as a
 *    real broker's retention would: the low watermark moves up). The vendored librdkafka is
 *    patched so the bound can be set (consumers_mock_set_log_limits); the wrapper starts
 *    with CONSUMERS_MOCK_LOG_BYTES / CONSUMERS_MOCK_LOG_BATCHES. A system librdkafka keeps
 *    its fixed 5 MiB / 100000 batches;
 *  - topics auto-created by a client's metadata/produce request get the mock's default of
 *    4 partitions; create a topic first with consumers_mock_topic_create() to get another
 *    count;
 *  - the mock broker listens on a kernel-chosen loopback port. When a fixed port is asked
 *    for, a small TCP relay listens there and forwards to the broker; clients bootstrap
 *    through it and then connect to the address the broker advertises (also loopback). */
#ifndef RECLASS_CONSUMERS_MOCK_BROKER_H
#define RECLASS_CONSUMERS_MOCK_BROKER_H

#include <stddef.h>

#include "common/err.h"

typedef struct consumers_mock consumers_mock_t;

/* Per-partition log bound the wrapper sets at start (when the library lets it). Plain numbers:
 * `reclass dev-broker`'s option rows print them as their defaults (CLS_STR). */
#define CONSUMERS_MOCK_LOG_MB      256
#define CONSUMERS_MOCK_LOG_BYTES   ((long)CONSUMERS_MOCK_LOG_MB << 20)
#define CONSUMERS_MOCK_LOG_BATCHES 1000000

/* Starts the mock cluster. partitions (>= 1) is the count consumers_mock_topic_create() uses
 * when asked for 0; port 0 = any free port. *bootstrap ("127.0.0.1:PORT") is owned by the
 * mock and valid until consumers_mock_stop(). COMMON_OK; COMMON_USAGE with e for a bad count or
 * port (or one that is taken); COMMON_FATAL, the mock could not start. */
common_status_t consumers_mock_start(int partitions, int port /*0=any*/, consumers_mock_t **out,
                                     const char **bootstrap, common_err_t *e);

/* Creates topic with partitions partitions (0 = the count given to start). Creating a topic
 * that exists already is an error (COMMON_USAGE), as on a real broker. */
common_status_t consumers_mock_topic_create(consumers_mock_t *mock, const char *topic,
                                            int partitions, common_err_t *e);

/* Sets how much each partition keeps (existing and new ones): at most max_bytes of record
 * batches and max_batches batches; beyond either the oldest batches are deleted. COMMON_OK,
 * or COMMON_USAGE with e (both must be >= 1; a system librdkafka cannot change them). */
common_status_t consumers_mock_set_log_limits(consumers_mock_t *mock, long max_bytes,
                                              long max_batches, common_err_t *e);

/* 1 when consumers_mock_set_log_limits can work in this build, else 0. */
int consumers_mock_log_limits_settable(void);

/* Stops the relay and destroys the cluster (all its data); NULL is a no-op. */
void consumers_mock_stop(consumers_mock_t *mock);

#endif
