/* The codec's schemas (see consumers/avro_codec_int.h): the local ticket-v<ID>.avsc files, the
 * writer of plain records, writer schemas a Schema Registry gives at run time, and the
 * projection of the reader each one resolves into. */
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/err.h"
#include "common/file.h"
#include "consumers/avro_codec_int.h"

/* ---- schema loading ---- */

/* Parses "ticket-v<ID>.avsc"; returns the id or -1. */
static int32_t schema_file_id(const char *name) {
    const char *p = name + strlen("ticket-v");
    if (strncmp(name, "ticket-v", 8) != 0 || *p < '0' || *p > '9') return -1;
    char *end;
    errno = 0;
    long id = strtol(p, &end, 10);
    if (errno || strcmp(end, ".avsc") != 0 || id < 0 || id > INT32_MAX) return -1;
    return (int32_t)id;
}

static int cmp_schema(const void *a, const void *b) {
    const codec_schema_t *x = a, *y = b;
    return (x->id > y->id) - (x->id < y->id);
}

/* Builds the projection of the reader onto sch->writer and the resolver into it. A schema
 * that cannot be read is kept with ready = 0 so its messages get a precise error. */
static void schema_prepare(const consumers_codec_t *c, codec_schema_t *sch) {
    json_t *proj = json_deep_copy(c->reader_json);
    json_t *fields = json_object_get(proj, "fields");
    json_t *kept = json_array();
    size_t i;
    json_t *f;
    int ok = avro_typeof(sch->writer) == AVRO_RECORD;
    if (!ok) snprintf(sch->bad, sizeof(sch->bad), "schema id %d is not a record", sch->id);
    json_array_foreach(fields, i, f) {
        const char *name = json_string_value(json_object_get(f, "name"));
        if (!ok || !name) break;
        if (avro_schema_record_field_get_index(sch->writer, name) >= 0) {
            json_array_append(kept, f);
        } else if (!json_object_get(f, "default")) {
            snprintf(sch->bad, sizeof(sch->bad),
                     "schema id %d lacks field %s, which the current schema requires", sch->id,
                     name);
            ok = 0;
        }
    }
    if (ok && json_array_size(kept) == 0) {
        snprintf(sch->bad, sizeof(sch->bad), "schema id %d shares no field with the current one",
                 sch->id);
        ok = 0;
    }
    if (ok) {
        json_object_set(proj, "fields", kept);
        char *txt = json_dumps(proj, JSON_COMPACT);
        if (!txt || avro_schema_from_json_length(txt, strlen(txt), &sch->proj)) {
            snprintf(sch->bad, sizeof(sch->bad), "schema id %d: %s", sch->id, avro_strerror());
            sch->proj = NULL;
            ok = 0;
        }
        free(txt);
    }
    if (ok) {
        sch->resolver = avro_resolved_writer_new(sch->writer, sch->proj);
        if (!sch->resolver) {
            snprintf(sch->bad, sizeof(sch->bad), "schema id %d does not resolve: %s", sch->id,
                     avro_strerror());
            ok = 0;
        }
    }
    if (ok) {
        sch->proj_iface = avro_generic_class_from_schema(sch->proj);
        ok = sch->proj_iface && !avro_generic_value_new(sch->proj_iface, &sch->proj_val);
        if (ok && avro_resolved_writer_new_value(sch->resolver, &sch->resolved)) {
            avro_value_decref(&sch->proj_val);
            ok = 0;
        }
        if (ok)
            avro_resolved_writer_set_dest(&sch->resolved, &sch->proj_val);
        else
            snprintf(sch->bad, sizeof(sch->bad), "schema id %d: %s", sch->id, avro_strerror());
    }
    sch->ready = ok;
    json_decref(kept);
    json_decref(proj);
}

static void schema_release(codec_schema_t *sch) {
    if (sch->ready) {
        avro_value_decref(&sch->resolved);
        avro_value_decref(&sch->proj_val);
    }
    if (sch->resolver) avro_value_iface_decref(sch->resolver);
    if (sch->proj_iface) avro_value_iface_decref(sch->proj_iface);
    if (sch->proj) avro_schema_decref(sch->proj);
    if (sch->writer) avro_schema_decref(sch->writer);
}

static void plain_release(consumers_codec_t *c) {
    if (c->plain_iface) {
        avro_value_decref(&c->plain_val);
        avro_value_iface_decref(c->plain_iface);
        c->plain_iface = NULL;
    }
    schema_release(&c->plain);
    memset(&c->plain, 0, sizeof(c->plain));
}

void consumers_codec_free(consumers_codec_t *c) {
    if (!c) return;
    for (size_t i = 0; i < c->n; i++)
        schema_release(&c->schemas[i]);
    free(c->schemas);
    for (size_t i = 0; i < c->n_remote; i++)
        schema_release(&c->remote[i]);
    free(c->remote);
    if (c->enc_iface) {
        avro_value_decref(&c->enc_val);
        avro_value_iface_decref(c->enc_iface);
    }
    if (c->in) avro_reader_free(c->in);
    plain_release(c);
    json_decref(c->reader_json);
    free(c);
}

/* A schema file's text (*len bytes, malloc'd), or NULL with e naming the file. */
static char *schema_file_read(const char *path, size_t *len, common_err_t *e) {
    char *txt = common_file_read(path, CODEC_MAX_SCHEMA, len, e);
    if (!txt) e->code = COMMON_USAGE; /* a schema file is the user's input, whatever failed */
    return txt;
}

common_status_t consumers_codec_set_plain_schema(consumers_codec_t *c, const char *path,
                                                 common_err_t *e) {
    size_t len;
    char *txt = schema_file_read(path, &len, e);
    if (!txt) return COMMON_USAGE;
    codec_schema_t sch = {.id = -1};
    int bad = avro_schema_from_json_length(txt, len, &sch.writer);
    free(txt);
    if (bad)
        return common_err_set(e, COMMON_USAGE, "%s: not a valid Avro schema: %s", path,
                              avro_strerror());
    schema_prepare(c, &sch);
    avro_value_iface_t *iface = sch.ready ? avro_generic_class_from_schema(sch.writer) : NULL;
    avro_value_t val;
    if (!sch.ready || !iface || avro_generic_value_new(iface, &val)) {
        if (iface) avro_value_iface_decref(iface);
        common_status_t st =
            common_err_set(e, sch.ready ? COMMON_FATAL : COMMON_USAGE, "plain writer schema %s: %s",
                           path, sch.ready ? avro_strerror() : sch.bad);
        schema_release(&sch);
        return st;
    }
    plain_release(c);
    c->plain = sch;
    c->plain_iface = iface;
    c->plain_val = val;
    const char *base = strrchr(path, '/');
    snprintf(c->plain_name, sizeof(c->plain_name), "%s", base ? base + 1 : path);
    return COMMON_OK;
}

const char *consumers_codec_plain_schema(const consumers_codec_t *c) {
    return c->plain_name;
}

common_status_t consumers_codec_init(const char *schema_dir, consumers_codec_t **out,
                                     common_err_t *e) {
    *out = NULL;
    DIR *d = opendir(schema_dir);
    if (!d)
        return common_err_set(e, COMMON_USAGE, "cannot open schema dir %s: %s", schema_dir,
                              strerror(errno));
    consumers_codec_t *c = calloc(1, sizeof(*c));
    if (c) c->encode_id = -1;
    size_t cap = 0;
    common_status_t rc = c ? COMMON_OK : common_err_set(e, COMMON_FATAL, "out of memory");
    char *reader_txt = NULL;
    struct dirent *de;
    while (rc == 0 && (de = readdir(d))) {
        int32_t id = schema_file_id(de->d_name);
        if (id < 0) continue;
        if (c->n == cap) {
            cap = cap ? 2 * cap : 8;
            codec_schema_t *grown = realloc(c->schemas, cap * sizeof(*grown));
            if (!grown) {
                rc = common_err_set(e, COMMON_FATAL, "out of memory");
                break;
            }
            c->schemas = grown;
        }
        char path[4096];
        snprintf(path, sizeof(path), "%s/%s", schema_dir, de->d_name);
        size_t len;
        char *txt = schema_file_read(path, &len, e);
        codec_schema_t *sch = &c->schemas[c->n];
        memset(sch, 0, sizeof(*sch));
        sch->id = id;
        if (!txt) {
            rc = COMMON_USAGE;
        } else if (avro_schema_from_json_length(txt, len, &sch->writer)) {
            rc = common_err_set(e, COMMON_USAGE, "%s: not a valid Avro schema: %s", path,
                                avro_strerror());
        } else {
            c->n++;
        }
        free(txt);
    }
    closedir(d);
    if (rc == 0 && c->n == 0)
        rc = common_err_set(e, COMMON_USAGE, "no ticket-v<ID>.avsc files in %s", schema_dir);
    if (rc == 0) {
        qsort(c->schemas, c->n, sizeof(*c->schemas), cmp_schema);
        codec_schema_t *cur = &c->schemas[c->n - 1];
        char path[4096];
        size_t len;
        snprintf(path, sizeof(path), "%s/ticket-v%d.avsc", schema_dir, cur->id);
        reader_txt = schema_file_read(path, &len, e);
        json_error_t je;
        c->reader_json = reader_txt ? json_loadb(reader_txt, len, 0, &je) : NULL;
        c->reader = cur->writer;
        if (!c->reader_json || avro_typeof(c->reader) != AVRO_RECORD)
            rc = common_err_set(e, COMMON_USAGE, "%s: the current schema must be an Avro record",
                                path);
        /* what decode takes from every record: a reader without one would dead-letter all */
        static const char *const required[] = {"job_id", "tenant",    "ticket_id",
                                               "text",   "job_total", "enqueued_at"};
        for (size_t i = 0; rc == 0 && i < sizeof(required) / sizeof(required[0]); i++)
            if (avro_schema_record_field_get_index(c->reader, required[i]) < 0)
                rc = common_err_set(e, COMMON_USAGE,
                                    "%s: the current schema lacks field %s, which every ticket "
                                    "needs (a worker would dead-letter every record)",
                                    path, required[i]);
    }
    if (rc == 0) {
        for (size_t i = 0; i < c->n; i++)
            schema_prepare(c, &c->schemas[i]);
        if (!c->schemas[c->n - 1].ready)
            rc = common_err_set(e, COMMON_USAGE, "current schema: %s", c->schemas[c->n - 1].bad);
    }
    for (size_t i = 0; rc == 0 && i < c->n; i++) { /* sorted by id: the first ready one */
        if (!c->schemas[i].ready) continue;
        char path[4096];
        snprintf(path, sizeof(path), "%s/ticket-v%d.avsc", schema_dir, c->schemas[i].id);
        rc = consumers_codec_set_plain_schema(c, path, e);
        break;
    }
    if (rc == 0) {
        c->enc_iface = avro_generic_class_from_schema(c->reader);
        c->in = avro_reader_memory("", 0);
        if (!c->enc_iface || avro_generic_value_new(c->enc_iface, &c->enc_val) || !c->in) {
            if (c->enc_iface) avro_value_iface_decref(c->enc_iface);
            c->enc_iface = NULL;
            rc = common_err_set(e, COMMON_FATAL, "avro: %s", avro_strerror());
        }
    }
    free(reader_txt);
    if (rc != COMMON_OK) {
        consumers_codec_free(c);
        return rc;
    }
    *out = c;
    return COMMON_OK;
}

/* ---- decode ---- */

const codec_schema_t *codec_find_schema(consumers_codec_t *c, int32_t id) {
    for (size_t i = 0; !c->registry_ids && i < c->n; i++)
        if (c->schemas[i].id == id) return &c->schemas[i];
    for (size_t i = 0; i < c->n_remote; i++)
        if (c->remote[i].id == id) {
            c->remote[i].used = ++c->tick;
            return &c->remote[i];
        }
    return NULL;
}

int consumers_codec_schema_id(const void *buf, size_t len, int32_t *id) {
    const uint8_t *p = buf;
    if (!buf || len < 5 || p[0] != 0) return 0;
    uint32_t v = (uint32_t)p[1] << 24 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 8 | p[4];
    if (v > INT32_MAX) return 0;
    *id = (int32_t)v;
    return 1;
}

void consumers_codec_set_encode_id(consumers_codec_t *c, int32_t id) {
    c->encode_id = id;
}

char *consumers_codec_reader_text(const consumers_codec_t *c) {
    return json_dumps(c->reader_json, JSON_COMPACT);
}

void consumers_codec_registry_ids(consumers_codec_t *c) {
    c->registry_ids = 1;
}

int consumers_codec_knows(consumers_codec_t *c, int32_t id) {
    return codec_find_schema(c, id) != NULL;
}

common_status_t consumers_codec_add_schema(consumers_codec_t *c, int32_t id, const char *json,
                                           common_err_t *e) {
    if (codec_find_schema(c, id)) return COMMON_OK;
    if (!c->remote && !(c->remote = calloc(CODEC_MAX_REMOTE, sizeof(*c->remote))))
        return common_err_set(e, COMMON_FATAL, "out of memory");
    avro_schema_t w;
    if (avro_schema_from_json_length(json, strlen(json), &w))
        return common_err_set(e, COMMON_USAGE, "schema id %d is not a valid Avro schema: %s",
                              (int)id, avro_strerror());
    size_t slot = c->n_remote;
    if (slot == CODEC_MAX_REMOTE) { /* full: the least recently used one goes */
        slot = 0;
        for (size_t i = 1; i < c->n_remote; i++)
            if (c->remote[i].used < c->remote[slot].used) slot = i;
        schema_release(&c->remote[slot]);
    } else {
        c->n_remote++;
    }
    codec_schema_t *sch = &c->remote[slot];
    memset(sch, 0, sizeof(*sch));
    sch->id = id;
    sch->writer = w;
    sch->used = ++c->tick;
    schema_prepare(c, sch); /* one that cannot be read stays, so its records say why */
    return COMMON_OK;
}
