#include "consumers/kafka_version.h"

#include <stdio.h>

#include <librdkafka/rdkafka.h>

#ifdef RECLASS_RDKAFKA_VENDORED
#define KAFKA_ORIGIN "vendored"
#else
#define KAFKA_ORIGIN "system"
#endif

int consumers_kafka_version_ok(int version, char *err, size_t errlen) {
    if ((unsigned)version >= CONSUMERS_KAFKA_MIN_VERSION) return 0;
    snprintf(err, errlen,
             "librdkafka %d.%d.%d is too old: below 2.2.0 it cannot complete the ApiVersions "
             "handshake with brokers that send tagged fields (current Kafka), so it would never "
             "connect; build reclass with the vendored librdkafka (configure without "
             "-DRECLASS_SYSTEM_RDKAFKA=ON)",
             (version >> 24) & 0xff, (version >> 16) & 0xff, (version >> 8) & 0xff);
    return -1;
}

int consumers_kafka_check_version(char *err, size_t errlen) {
    return consumers_kafka_version_ok(rd_kafka_version(), err, errlen);
}

void consumers_kafka_version_describe(char *buf, size_t len) {
    snprintf(buf, len, "%s (%s)", rd_kafka_version_str(), KAFKA_ORIGIN);
}
