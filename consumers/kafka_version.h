/* Which librdkafka the process runs with, and whether the Kafka commands may use it.
 *
 * librdkafka below 2.2.0 cannot complete the ApiVersions handshake with brokers whose
 * responses carry tagged fields (current Kafka versions; fixed upstream in 2.2.0, PR #4278):
 * the client never gets past connecting. The build links the vendored librdkafka
 * (third_party/librdkafka); only -DRECLASS_SYSTEM_RDKAFKA=ON can bring an older one, and
 * that is caught here before any connection is tried. */
#ifndef RECLASS_CONSUMERS_KAFKA_VERSION_H
#define RECLASS_CONSUMERS_KAFKA_VERSION_H

#include <stddef.h>

#include "common/err.h"

/* rd_kafka_version() of librdkafka 2.2.0 (release builds end in 0xff). */
#define CONSUMERS_KAFKA_MIN_VERSION 0x020200ff

/* COMMON_OK when version (an rd_kafka_version() value) is at least 2.2.0, else COMMON_FATAL
 * with e saying why that is too old (hint: how to build with a newer one). */
common_status_t consumers_kafka_version_ok(int version, common_err_t *e);

/* consumers_kafka_version_ok() for the librdkafka loaded in this process. */
common_status_t consumers_kafka_check_version(common_err_t *e);

/* Writes "2.15.0 (vendored)" or "2.0.2 (system)": the runtime version and where it came
 * from. */
void consumers_kafka_version_describe(char *buf, size_t len);

#endif
