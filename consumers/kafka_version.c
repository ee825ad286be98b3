#include "consumers/kafka_version.h"

#include <stdio.h>

#include <librdkafka/rdkafka.h>

#include "common/err.h"

#ifdef RECLASS_RDKAFKA_VENDORED
#define KAFKA_ORIGIN "vendored"
#else
#define KAFKA_ORIGIN "system"
#endif

common_status_t consumers_kafka_version_ok(int version, common_err_t *e) {
    if ((unsigned)version >= CONSUMERS_KAFKA_MIN_VERSION) return COMMON_OK;
    common_err_set(e, COMMON_FATAL,
                   "librdkafka %d.%d.%d is too old: below 2.2.0 it cannot complete the "
                   "ApiVersions handshake with brokers that send tagged fields (current Kafka), "
                   "so it would never connect",
                   (version >> 24) & 0xff, (version >> 16) & 0xff, (version >> 8) & 0xff);
    common_err_hint(e, "build reclass with the vendored librdkafka (configure without "
                       "-DRECLASS_SYSTEM_RDKAFKA=ON)");
    return COMMON_FATAL;
}

common_status_t consumers_kafka_check_version(common_err_t *e) {
    return consumers_kafka_version_ok(rd_kafka_version(), e);
}

void consumers_kafka_version_describe(char *buf, size_t len) {
    snprintf(buf, len, "%s (%s)", rd_kafka_version_str(), KAFKA_ORIGIN);
}
