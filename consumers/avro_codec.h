/* Avro encoding of tickets (avro-c). Accepts the Confluent wire format (magic 0 + 4-byte
 * big-endian schema id, mapped to a local schema file) and plain Avro binary (the current
 * schema). Decoding goes through avro-c's resolver, so a record written with an older
 * writer schema still reads into the current reader schema. */
#ifndef RECLASS_CONSUMERS_AVRO_CODEC_H
#define RECLASS_CONSUMERS_AVRO_CODEC_H

#include <stddef.h>

#include "consumers/ticket.h"

typedef struct consumers_codec consumers_codec_t; /* not thread-safe: one per thread */

/* schema_dir holds ticket-v<ID>.avsc files; the highest ID is the current (reader) schema. */
int consumers_codec_init(const char *schema_dir, consumers_codec_t **out, char *err, size_t errlen);
void consumers_codec_free(consumers_codec_t *codec);

/* Decodes and validates one message value. Returns 0, or -1 with err saying what is wrong
 * (the caller sends the record to the dead-letter topic). out's strings are owned by out. */
int consumers_codec_decode(consumers_codec_t *codec, const void *buf, size_t len,
                           consumers_ticket_t *out, char *err, size_t errlen);

/* Encodes with the current schema; confluent != 0 prepends magic byte + schema id.
 * *buf is malloc'd, owned by the caller. */
int consumers_codec_encode(consumers_codec_t *codec, const consumers_ticket_t *t, int confluent,
                           void **buf, size_t *len, char *err, size_t errlen);

#endif
