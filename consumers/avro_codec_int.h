/* The codec's state, shared by its two files: avro_schemas.c (loading local schema files,
 * the plain writer schema, schemas from a registry) and avro_codec.c (decode, encode). Not
 * for anyone else: consumers/avro_codec.h is the interface. */
#ifndef RECLASS_CONSUMERS_AVRO_CODEC_INT_H
#define RECLASS_CONSUMERS_AVRO_CODEC_INT_H

#include <stddef.h>
#include <stdint.h>

#include <avro.h>
#include <jansson.h>

#include "consumers/avro_codec.h"

#define CODEC_MAX_SCHEMA (1024 * 1024)

typedef struct {
    int32_t id;
    avro_schema_t writer;
    avro_schema_t proj;             /* reader schema restricted to the writer's fields */
    avro_value_iface_t *proj_iface; /* generic class of proj */
    avro_value_t proj_val;          /* decoded record lands here */
    avro_value_iface_t *resolver;   /* writer -> proj */
    avro_value_t resolved;          /* resolver instance wrapping proj_val */
    int ready;                      /* 0: bad says why this id cannot be read */
    char bad[256];
    uint64_t used; /* remote schemas: the codec's tick of the last use (least recent goes) */
} codec_schema_t;

#define CODEC_MAX_REMOTE 256 /* writer schemas from a registry kept at once */

struct consumers_codec {
    codec_schema_t *schemas; /* sorted by id; the last one is the current (reader) schema */
    size_t n;
    json_t *reader_json;           /* current schema, for field defaults */
    avro_schema_t reader;          /* current schema (borrowed from schemas[n-1].writer) */
    avro_value_iface_t *enc_iface; /* generic class of reader, for encoding */
    avro_value_t enc_val;
    avro_reader_t in;       /* memory reader, re-pointed per message */
    codec_schema_t *remote; /* (CODEC_MAX_REMOTE) writer schemas a registry gave, unsorted */
    size_t n_remote;
    uint64_t tick;
    int registry_ids;  /* 1: a framed record's id is a registry's, never a local file's */
    int64_t encode_id; /* the id framed records are written with; < 0: the current file's */
    /* the one writer schema of plain records (no id to tell): --plain-schema, else the oldest
     * local schema the reader reads, so that a newer schema never changes how they read */
    codec_schema_t plain;
    char plain_name[64];
    avro_value_iface_t *plain_iface; /* generic class of plain.writer, for encoding */
    avro_value_t plain_val;
};

/* The schema of id that a framed record names (local file or registry), or NULL. */
const codec_schema_t *codec_find_schema(consumers_codec_t *c, int32_t id);

#endif
