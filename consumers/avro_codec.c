/* Ticket codec on avro-c 1.11.
 *
 * Two things avro-c does not do for us, done here:
 *  - avro-c's resolver rejects a reader field that the writer lacks ("TODO: default values"),
 *    so for each writer schema we resolve into a *projection* of the reader schema (the reader
 *    minus the fields the writer lacks) and fill those fields from the reader's defaults;
 *  - avro-c's binary decoder trusts lengths in the input (older releases index a string
 *    buffer with a negative length), so every message is first walked against its writer
 *    schema with bounds checks (consumers/avro_scan.c) and only well-formed bytes reach avro-c. */
#include "consumers/avro_codec.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <avro.h>
#include <jansson.h>

#include "common/err.h"
#include "common/file.h"
#include "consumers/avro_scan.h"

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

int consumers_codec_set_plain_schema(consumers_codec_t *c, const char *path, char *err,
                                     size_t errlen) {
    size_t len;
    char *txt = common_file_read(path, CODEC_MAX_SCHEMA, &len, err, errlen);
    if (!txt) return -1;
    codec_schema_t sch = {.id = -1};
    int bad = avro_schema_from_json_length(txt, len, &sch.writer);
    free(txt);
    if (bad)
        return common_errf(-1, err, errlen, "%s: not a valid Avro schema: %s", path,
                           avro_strerror());
    schema_prepare(c, &sch);
    avro_value_iface_t *iface = sch.ready ? avro_generic_class_from_schema(sch.writer) : NULL;
    avro_value_t val;
    if (!sch.ready || !iface || avro_generic_value_new(iface, &val)) {
        if (iface) avro_value_iface_decref(iface);
        int rc = common_errf(-1, err, errlen, "plain writer schema %s: %s", path,
                             sch.ready ? avro_strerror() : sch.bad);
        schema_release(&sch);
        return rc;
    }
    plain_release(c);
    c->plain = sch;
    c->plain_iface = iface;
    c->plain_val = val;
    const char *base = strrchr(path, '/');
    snprintf(c->plain_name, sizeof(c->plain_name), "%s", base ? base + 1 : path);
    return 0;
}

const char *consumers_codec_plain_schema(const consumers_codec_t *c) {
    return c->plain_name;
}

int consumers_codec_init(const char *schema_dir, consumers_codec_t **out, char *err,
                         size_t errlen) {
    *out = NULL;
    DIR *d = opendir(schema_dir);
    if (!d)
        return common_errf(-1, err, errlen, "cannot open schema dir %s: %s", schema_dir,
                           strerror(errno));
    consumers_codec_t *c = calloc(1, sizeof(*c));
    if (c) c->encode_id = -1;
    size_t cap = 0;
    int rc = c ? 0 : common_errf(-1, err, errlen, "out of memory");
    char *reader_txt = NULL;
    struct dirent *e;
    while (rc == 0 && (e = readdir(d))) {
        int32_t id = schema_file_id(e->d_name);
        if (id < 0) continue;
        if (c->n == cap) {
            cap = cap ? 2 * cap : 8;
            codec_schema_t *grown = realloc(c->schemas, cap * sizeof(*grown));
            if (!grown) {
                rc = common_errf(-1, err, errlen, "out of memory");
                break;
            }
            c->schemas = grown;
        }
        char path[4096];
        snprintf(path, sizeof(path), "%s/%s", schema_dir, e->d_name);
        size_t len;
        char *txt = common_file_read(path, CODEC_MAX_SCHEMA, &len, err, errlen);
        codec_schema_t *sch = &c->schemas[c->n];
        memset(sch, 0, sizeof(*sch));
        sch->id = id;
        if (!txt) {
            rc = -1;
        } else if (avro_schema_from_json_length(txt, len, &sch->writer)) {
            rc = common_errf(-1, err, errlen, "%s: not a valid Avro schema: %s", path,
                             avro_strerror());
        } else {
            c->n++;
        }
        free(txt);
    }
    closedir(d);
    if (rc == 0 && c->n == 0)
        rc = common_errf(-1, err, errlen, "no ticket-v<ID>.avsc files in %s", schema_dir);
    if (rc == 0) {
        qsort(c->schemas, c->n, sizeof(*c->schemas), cmp_schema);
        codec_schema_t *cur = &c->schemas[c->n - 1];
        char path[4096];
        size_t len;
        snprintf(path, sizeof(path), "%s/ticket-v%d.avsc", schema_dir, cur->id);
        reader_txt = common_file_read(path, CODEC_MAX_SCHEMA, &len, err, errlen);
        json_error_t je;
        c->reader_json = reader_txt ? json_loadb(reader_txt, len, 0, &je) : NULL;
        c->reader = cur->writer;
        if (!c->reader_json || avro_typeof(c->reader) != AVRO_RECORD)
            rc =
                common_errf(-1, err, errlen, "%s: the current schema must be an Avro record", path);
        /* what decode takes from every record: a reader without one would dead-letter all */
        static const char *const required[] = {"job_id", "tenant",    "ticket_id",
                                               "text",   "job_total", "enqueued_at"};
        for (size_t i = 0; rc == 0 && i < sizeof(required) / sizeof(required[0]); i++)
            if (avro_schema_record_field_get_index(c->reader, required[i]) < 0)
                rc = common_errf(-1, err, errlen,
                                 "%s: the current schema lacks field %s, which every ticket "
                                 "needs (a worker would dead-letter every record)",
                                 path, required[i]);
    }
    if (rc == 0) {
        for (size_t i = 0; i < c->n; i++)
            schema_prepare(c, &c->schemas[i]);
        if (!c->schemas[c->n - 1].ready)
            rc = common_errf(-1, err, errlen, "current schema: %s", c->schemas[c->n - 1].bad);
    }
    for (size_t i = 0; rc == 0 && i < c->n; i++) { /* sorted by id: the first ready one */
        if (!c->schemas[i].ready) continue;
        char path[4096];
        snprintf(path, sizeof(path), "%s/ticket-v%d.avsc", schema_dir, c->schemas[i].id);
        rc = consumers_codec_set_plain_schema(c, path, err, errlen);
        break;
    }
    if (rc == 0) {
        c->enc_iface = avro_generic_class_from_schema(c->reader);
        c->in = avro_reader_memory("", 0);
        if (!c->enc_iface || avro_generic_value_new(c->enc_iface, &c->enc_val) || !c->in) {
            if (c->enc_iface) avro_value_iface_decref(c->enc_iface);
            c->enc_iface = NULL;
            rc = common_errf(-1, err, errlen, "avro: %s", avro_strerror());
        }
    }
    free(reader_txt);
    if (rc != 0) {
        consumers_codec_free(c);
        return -1;
    }
    *out = c;
    return 0;
}

/* ---- decode ---- */

static const codec_schema_t *find_schema(consumers_codec_t *c, int32_t id) {
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
    return find_schema(c, id) != NULL;
}

int consumers_codec_add_schema(consumers_codec_t *c, int32_t id, const char *json, char *err,
                               size_t errlen) {
    if (find_schema(c, id)) return 0;
    if (!c->remote && !(c->remote = calloc(CODEC_MAX_REMOTE, sizeof(*c->remote))))
        return common_errf(-1, err, errlen, "out of memory");
    avro_schema_t w;
    if (avro_schema_from_json_length(json, strlen(json), &w))
        return common_errf(-1, err, errlen, "schema id %d is not a valid Avro schema: %s", (int)id,
                           avro_strerror());
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
    return 0;
}

/* Copies a string field. Identifiers must pass consumers_ticket_check_id; text may hold any
 * bytes (the tokenizer reads invalid UTF-8 as replacement characters). */
static int take_string(avro_value_t *rec, const char *name, int is_id, char **dst, size_t *dst_len,
                       char *err, size_t errlen) {
    avro_value_t f;
    const char *s;
    size_t size;
    if (avro_value_get_by_name(rec, name, &f, NULL) || avro_value_get_string(&f, &s, &size) ||
        size == 0)
        return common_errf(-1, err, errlen, "field %s: missing or not a string", name);
    size_t n = size - 1; /* avro-c counts the terminating NUL */
    if (is_id) {
        if (consumers_ticket_check_id(name, s, n, err, errlen)) return -1;
    } else if (n > CONSUMERS_TICKET_MAX_TEXT_BYTES) {
        return common_errf(-1, err, errlen, "field %s is %zu bytes (limit %d)", name, n,
                           CONSUMERS_TICKET_MAX_TEXT_BYTES);
    }
    *dst = malloc(n + 1);
    if (!*dst) return common_errf(-1, err, errlen, "out of memory");
    memcpy(*dst, s, n);
    (*dst)[n] = '\0';
    if (dst_len) *dst_len = n;
    return 0;
}

static int take_long(avro_value_t *rec, const char *name, int64_t *out, char *err, size_t errlen) {
    avro_value_t f;
    int32_t i32;
    if (avro_value_get_by_name(rec, name, &f, NULL))
        return common_errf(-1, err, errlen, "field %s is missing", name);
    if (avro_value_get_type(&f) == AVRO_INT32 && !avro_value_get_int(&f, &i32)) {
        *out = i32;
        return 0;
    }
    if (avro_value_get_type(&f) == AVRO_INT64 && !avro_value_get_long(&f, out)) return 0;
    return common_errf(-1, err, errlen, "field %s is not an integer", name);
}

/* priority: from the record, or the reader's default when the writer had no such field. */
static int take_priority(const consumers_codec_t *c, avro_value_t *rec, consumers_ticket_t *t,
                         char *err, size_t errlen) {
    avro_value_t f, branch;
    t->has_priority = 0;
    t->priority = 0;
    if (avro_value_get_by_name(rec, "priority", &f, NULL) == 0) {
        if (avro_value_get_type(&f) == AVRO_UNION) {
            if (avro_value_get_current_branch(&f, &branch))
                return common_errf(-1, err, errlen, "field priority: no branch set");
            f = branch;
        }
        if (avro_value_get_type(&f) == AVRO_NULL) return 0;
        if (avro_value_get_type(&f) != AVRO_INT32 || avro_value_get_int(&f, &t->priority))
            return common_errf(-1, err, errlen, "field priority is not an int");
        t->has_priority = 1;
        return 0;
    }
    size_t i;
    json_t *fd;
    json_array_foreach(json_object_get(c->reader_json, "fields"), i, fd) {
        if (strcmp(json_string_value(json_object_get(fd, "name")) ?: "", "priority") != 0) continue;
        json_t *def = json_object_get(fd, "default");
        if (json_is_integer(def) && json_integer_value(def) >= INT32_MIN &&
            json_integer_value(def) <= INT32_MAX) {
            t->priority = (int32_t)json_integer_value(def);
            t->has_priority = 1;
        }
    }
    return 0;
}

int consumers_codec_decode(consumers_codec_t *c, const void *buf, size_t len,
                           consumers_ticket_t *out, char *err, size_t errlen) {
    const uint8_t *p = buf;
    memset(out, 0, sizeof(*out));
    out->partition = -1;
    out->offset = -1;
    if (!buf || len == 0) return common_errf(-1, err, errlen, "empty message");

    /* A plain record starts with job_id's length; 0 would be an empty job_id, which is
     * invalid anyway, so a leading 0 byte always means the Confluent framing. */
    const codec_schema_t *sch = &c->plain;
    size_t off = 0;
    if (p[0] == 0) {
        if (len < 5)
            return common_errf(-1, err, errlen, "Confluent header truncated (%zu bytes)", len);
        uint32_t id = (uint32_t)p[1] << 24 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 8 | p[4];
        sch = id <= INT32_MAX ? find_schema(c, (int32_t)id) : NULL;
        if (!sch)
            return common_errf(-1, err, errlen, "unknown schema id %u%s", id,
                               c->registry_ids ? " (the schema registry does not know it)" : "");
        off = 5;
    }
    if (!sch->ready) return common_errf(-1, err, errlen, "%s", sch->bad);

    size_t pos = off;
    if (consumers_avro_scan(sch->writer, p, len, &pos, err, errlen)) return -1;
    if (pos != len)
        return common_errf(-1, err, errlen, "%zu trailing bytes after the record", len - pos);

    codec_schema_t *m = (codec_schema_t *)sch; /* its value buffers are scratch space */
    avro_value_reset(&m->proj_val);
    avro_reader_memory_set_source(c->in, (const char *)p + off, (int64_t)(len - off));
    if (avro_value_read(c->in, &m->resolved))
        return common_errf(-1, err, errlen, "avro decode: %s", avro_strerror());

    avro_value_t *rec = &m->proj_val;
    int64_t total = 0;
    if (take_string(rec, "job_id", 1, &out->job_id, NULL, err, errlen) ||
        take_string(rec, "tenant", 1, &out->tenant, NULL, err, errlen) ||
        take_string(rec, "ticket_id", 1, &out->ticket_id, NULL, err, errlen) ||
        take_string(rec, "text", 0, &out->text, &out->text_len, err, errlen) ||
        take_long(rec, "job_total", &total, err, errlen) ||
        take_long(rec, "enqueued_at", &out->enqueued_at_ms, err, errlen) ||
        take_priority(c, rec, out, err, errlen))
        goto bad;
    /* every field against what its column accepts (the text is not stored) */
    if (total < 1 || total > INT32_MAX) {
        common_errf(-1, err, errlen, "job_total is %lld; it must be from 1 to %d", (long long)total,
                    INT32_MAX);
        goto bad;
    }
    if (consumers_ticket_check_enqueued(out->enqueued_at_ms, err, errlen)) goto bad;
    out->job_total = (int32_t)total;
    return 0;
bad:
    consumers_ticket_free(out);
    out->partition = -1;
    out->offset = -1;
    return -1;
}

/* ---- encode ---- */

static int put_string(avro_value_t *rec, const char *name, const char *s, size_t n) {
    avro_value_t f;
    if (avro_value_get_by_name(rec, name, &f, NULL)) return -1;
    /* avro-c wants the size with the terminating NUL; s[n] is that NUL. */
    return avro_value_set_string_len(&f, s, n + 1);
}

int consumers_codec_encode(consumers_codec_t *c, const consumers_ticket_t *t, int confluent,
                           void **buf, size_t *len, char *err, size_t errlen) {
    *buf = NULL;
    *len = 0;
    const char *ids[][2] = {
        {"job_id", t->job_id}, {"tenant", t->tenant}, {"ticket_id", t->ticket_id}};
    for (size_t i = 0; i < 3; i++)
        if (consumers_ticket_check_id(ids[i][0], ids[i][1] ? ids[i][1] : "",
                                      ids[i][1] ? strlen(ids[i][1]) : 0, err, errlen))
            return -1;
    if (t->job_total < 1) return common_errf(-1, err, errlen, "job_total must be >= 1");
    if (consumers_ticket_check_enqueued(t->enqueued_at_ms, err, errlen)) return -1;
    const char *text = t->text ? t->text : "";
    size_t text_len = t->text ? t->text_len : 0;
    if (t->text && text[text_len] != '\0') text_len = strlen(text);
    if (text_len >
        CONSUMERS_TICKET_MAX_TEXT_BYTES) /* the decoder refuses it: say so here, not in the DLQ */
        return common_errf(-1, err, errlen, "field text is %zu bytes (limit %d)", text_len,
                           CONSUMERS_TICKET_MAX_TEXT_BYTES);

    avro_value_t *rec = confluent ? &c->enc_val : &c->plain_val, f, branch;
    avro_value_reset(rec);
    if (t->has_priority && avro_value_get_by_name(rec, "priority", &f, NULL))
        return common_errf(-1, err, errlen,
                           "the plain writer schema %s has no priority: use the Confluent "
                           "framing, or --plain-schema with a schema that has one",
                           c->plain_name);
    int rc = put_string(rec, "job_id", t->job_id, strlen(t->job_id)) ||
             put_string(rec, "tenant", t->tenant, strlen(t->tenant)) ||
             put_string(rec, "ticket_id", t->ticket_id, strlen(t->ticket_id)) ||
             put_string(rec, "text", text, text_len);
    rc = rc || avro_value_get_by_name(rec, "job_total", &f, NULL) ||
         avro_value_set_int(&f, t->job_total);
    rc = rc || avro_value_get_by_name(rec, "enqueued_at", &f, NULL) ||
         avro_value_set_long(&f, t->enqueued_at_ms);
    if (!rc && avro_value_get_by_name(rec, "priority", &f, NULL) == 0) {
        rc = avro_value_set_branch(&f, t->has_priority ? 1 : 0, &branch);
        if (!rc && t->has_priority) rc = avro_value_set_int(&branch, t->priority);
        if (!rc && !t->has_priority) rc = avro_value_set_null(&branch);
    }
    if (rc) return common_errf(-1, err, errlen, "avro encode: %s", avro_strerror());

    size_t body;
    if (avro_value_sizeof(rec, &body))
        return common_errf(-1, err, errlen, "avro: %s", avro_strerror());
    size_t hdr = confluent ? 5 : 0;
    uint8_t *b = malloc(hdr + body);
    if (!b) return common_errf(-1, err, errlen, "out of memory");
    if (confluent) {
        uint32_t id = (uint32_t)(c->encode_id >= 0 ? c->encode_id : c->schemas[c->n - 1].id);
        b[0] = 0;
        b[1] = (uint8_t)(id >> 24);
        b[2] = (uint8_t)(id >> 16);
        b[3] = (uint8_t)(id >> 8);
        b[4] = (uint8_t)id;
    }
    avro_writer_t w = avro_writer_memory((const char *)b + hdr, (int64_t)body);
    if (!w || avro_value_write(w, rec)) {
        if (w) avro_writer_free(w);
        free(b);
        return common_errf(-1, err, errlen, "avro write: %s", avro_strerror());
    }
    avro_writer_free(w);
    *buf = b;
    *len = hdr + body;
    return 0;
}
