/* A bounds-checked walk of Avro binary against a writer schema. avro-c's binary decoder
 * trusts lengths in the input (older releases index a string buffer with a negative length),
 * so every message is walked here first and only well-formed bytes reach avro-c. */
#ifndef RECLASS_CONSUMERS_AVRO_SCAN_H
#define RECLASS_CONSUMERS_AVRO_SCAN_H

#include <stddef.h>
#include <stdint.h>

#include <avro.h>

#include "common/err.h"

/* Walks one value of schema s in p[*pos, len), advancing *pos past it. COMMON_OK, or
 * COMMON_USAGE with e saying what is malformed and at which byte (schemas nested over 32 deep
 * are refused). */
common_status_t consumers_avro_scan(avro_schema_t s, const uint8_t *p, size_t len, size_t *pos,
                                    common_err_t *e);

#endif
