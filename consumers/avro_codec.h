/* Avro encoding of tickets (avro-c). Accepts the Confluent wire format (magic 0 + 4-byte
 * big-endian schema id, mapped to a local schema file) and plain Avro binary (the plain
 * writer schema, consumers_codec_set_plain_schema). Decoding goes through avro-c's resolver, so a
 * record written with an older writer schema still reads into the current reader schema. */
#ifndef RECLASS_CONSUMERS_AVRO_CODEC_H
#define RECLASS_CONSUMERS_AVRO_CODEC_H

#include <stddef.h>
#include <stdint.h>

#include "common/err.h"

#include "consumers/ticket.h"

typedef struct consumers_codec consumers_codec_t; /* not thread-safe: one per thread */

/* schema_dir holds ticket-v<ID>.avsc files; the highest ID is the current (reader) schema.
 * COMMON_OK; COMMON_USAGE with e naming the directory or file that is wrong; COMMON_FATAL,
 * out of memory. */
common_status_t consumers_codec_init(const char *schema_dir, consumers_codec_t **out,
                                     common_err_t *e);
void consumers_codec_free(consumers_codec_t *codec);

/* Decodes and validates one message value. COMMON_OK; COMMON_USAGE with e saying what is
 * wrong with the record, COMMON_FATAL out of memory (either way the caller sends the record
 * to the dead-letter topic, e's common_err_line its reason). out's strings are owned by out. */
common_status_t consumers_codec_decode(consumers_codec_t *codec, const void *buf, size_t len,
                                       consumers_ticket_t *out, common_err_t *e);

/* For a record consumers_codec_decode refused: what it says of itself, as far as it can be
 * read (job_id, then tenant, ticket_id, job_total when in range; the rest zero), so that its
 * dead letter counts against its job. 0 when job_id was read (free out with
 * consumers_ticket_free), -1 when not even that. */
int consumers_codec_identity(consumers_codec_t *codec, const void *buf, size_t len,
                             consumers_ticket_t *out);

/* A Confluent-framed value's schema id: 1 and *id set, or 0 for a plain record. */
int consumers_codec_schema_id(const void *buf, size_t len, int32_t *id);

/* From now on a framed record's schema id is a Schema Registry's: the local files
 * ticket-v<ID>.avsc still give the reader schema (and the writer of plain records) but no
 * longer answer for ids, which come from consumers_codec_add_schema alone. */
void consumers_codec_registry_ids(consumers_codec_t *codec);

/* Framed records are encoded with id (a registry's) instead of the current file's. */
void consumers_codec_set_encode_id(consumers_codec_t *codec, int32_t id);

/* The current (reader) schema as compact JSON text, malloc'd; NULL when out of memory. */
char *consumers_codec_reader_text(const consumers_codec_t *codec);

/* 1 when records of schema id can be decoded (a local file or one added below). */
int consumers_codec_knows(consumers_codec_t *codec, int32_t id);

/* Adds the writer schema of id (JSON text, e.g. from a Schema Registry), resolved into the
 * current reader schema; at most 256 such schemas are kept, the least recently used one
 * making room. A schema that parses but cannot be read into the reader is kept too, so that
 * its records are dead-lettered with the reason. COMMON_OK; COMMON_USAGE with e when the text
 * is no schema; COMMON_FATAL, out of memory. */
common_status_t consumers_codec_add_schema(consumers_codec_t *codec, int32_t id, const char *json,
                                           common_err_t *e);

/* The writer schema of plain (unframed) records, which carry no id: the file at path, which the
 * current schema must be able to read. Set at init to the oldest such local schema, by design:
 * adding a schema never changes how plain records read, and their producers move to a newer
 * one only when told (--plain-schema). COMMON_USAGE with e when path cannot be read into the
 * reader. */
common_status_t consumers_codec_set_plain_schema(consumers_codec_t *codec, const char *path,
                                                 common_err_t *e);

/* The plain writer schema's file name, for messages. */
const char *consumers_codec_plain_schema(const consumers_codec_t *codec);

/* Encodes with the current schema (confluent != 0: prepends magic byte + schema id) or, plain,
 * with the plain writer schema (a ticket with a priority it lacks is refused).
 * *buf is malloc'd, owned by the caller. COMMON_OK; COMMON_USAGE with e when the ticket breaks
 * a rule of its fields; COMMON_FATAL, out of memory or an avro-c failure. */
common_status_t consumers_codec_encode(consumers_codec_t *codec, const consumers_ticket_t *t,
                                       int confluent, void **buf, size_t *len, common_err_t *e);

#endif
