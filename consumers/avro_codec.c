/* Ticket codec on avro-c 1.11.
 *
 * Two things avro-c does not do for us, done here:
 *  - avro-c's resolver rejects a reader field that the writer lacks ("TODO: default values"),
 *    so for each writer schema we resolve into a *projection* of the reader schema (the reader
 *    minus the fields the writer lacks) and fill those fields from the reader's defaults;
 *  - avro-c's binary decoder trusts lengths in the input (older releases index a string
 *    buffer with a negative length), so every message is first walked against its writer
 *    schema with bounds checks (consumers/avro_scan.c) and only well-formed bytes reach avro-c. */
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/err.h"
#include "consumers/avro_codec_int.h"
#include "consumers/avro_scan.h"

/* Copies a string field. Identifiers must pass consumers_ticket_check_id; text may hold any
 * bytes (the tokenizer reads invalid UTF-8 as replacement characters). */
static common_status_t take_string(avro_value_t *rec, const char *name, int is_id, char **dst,
                                   size_t *dst_len, common_err_t *e) {
    avro_value_t f;
    const char *s;
    size_t size;
    if (avro_value_get_by_name(rec, name, &f, NULL) || avro_value_get_string(&f, &s, &size) ||
        size == 0)
        return common_err_set(e, COMMON_USAGE, "field %s: missing or not a string", name);
    size_t n = size - 1; /* avro-c counts the terminating NUL */
    if (is_id) {
        common_status_t st = consumers_ticket_check_id(name, s, n, e);
        if (st) return st;
    } else if (n > CONSUMERS_TICKET_MAX_TEXT_BYTES) {
        return common_err_set(e, COMMON_USAGE, "field %s is %zu bytes (limit %d)", name, n,
                              CONSUMERS_TICKET_MAX_TEXT_BYTES);
    }
    *dst = malloc(n + 1);
    if (!*dst) return common_err_set(e, COMMON_FATAL, "out of memory");
    memcpy(*dst, s, n);
    (*dst)[n] = '\0';
    if (dst_len) *dst_len = n;
    return COMMON_OK;
}

static common_status_t take_long(avro_value_t *rec, const char *name, int64_t *out,
                                 common_err_t *e) {
    avro_value_t f;
    int32_t i32;
    if (avro_value_get_by_name(rec, name, &f, NULL))
        return common_err_set(e, COMMON_USAGE, "field %s is missing", name);
    if (avro_value_get_type(&f) == AVRO_INT32 && !avro_value_get_int(&f, &i32)) {
        *out = i32;
        return COMMON_OK;
    }
    if (avro_value_get_type(&f) == AVRO_INT64 && !avro_value_get_long(&f, out)) return COMMON_OK;
    return common_err_set(e, COMMON_USAGE, "field %s is not an integer", name);
}

/* priority: from the record, or the reader's default when the writer had no such field. */
static common_status_t take_priority(const consumers_codec_t *c, avro_value_t *rec,
                                     consumers_ticket_t *t, common_err_t *e) {
    avro_value_t f, branch;
    t->has_priority = 0;
    t->priority = 0;
    if (avro_value_get_by_name(rec, "priority", &f, NULL) == 0) {
        if (avro_value_get_type(&f) == AVRO_UNION) {
            if (avro_value_get_current_branch(&f, &branch))
                return common_err_set(e, COMMON_USAGE, "field priority: no branch set");
            f = branch;
        }
        if (avro_value_get_type(&f) == AVRO_NULL) return COMMON_OK;
        if (avro_value_get_type(&f) != AVRO_INT32 || avro_value_get_int(&f, &t->priority))
            return common_err_set(e, COMMON_USAGE, "field priority is not an int");
        t->has_priority = 1;
        return COMMON_OK;
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
    return COMMON_OK;
}

/* The writer schema of the record in p[0, len) (Confluent framing or plain) and where its
 * Avro body starts. */
static const codec_schema_t *codec_frame(consumers_codec_t *c, const uint8_t *p, size_t len,
                                         size_t *off, common_err_t *e) {
    /* A plain record starts with job_id's length; 0 would be an empty job_id, which is
     * invalid anyway, so a leading 0 byte always means the Confluent framing. */
    const codec_schema_t *sch = &c->plain;
    *off = 0;
    if (p[0] == 0) {
        if (len < 5) {
            common_err_set(e, COMMON_USAGE, "Confluent header truncated (%zu bytes)", len);
            return NULL;
        }
        uint32_t id = (uint32_t)p[1] << 24 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 8 | p[4];
        sch = id <= INT32_MAX ? codec_find_schema(c, (int32_t)id) : NULL;
        if (!sch) {
            common_err_set(e, COMMON_USAGE, "unknown schema id %u%s", id,
                           c->registry_ids ? " (the schema registry does not know it)" : "");
            return NULL;
        }
        *off = 5;
    }
    if (!sch->ready) {
        common_err_set(e, COMMON_USAGE, "%s", sch->bad);
        return NULL;
    }
    return sch;
}

int consumers_codec_identity(consumers_codec_t *c, const void *buf, size_t len,
                             consumers_ticket_t *out) {
    const uint8_t *p = buf;
    memset(out, 0, sizeof(*out));
    out->partition = -1;
    out->offset = -1;
    common_err_t e; /* why it was refused: consumers_codec_decode said so already */
    size_t off, pos;
    const codec_schema_t *sch = buf && len ? codec_frame(c, p, len, &off, &e) : NULL;
    if (!sch) return -1;
    pos = off;
    if (consumers_avro_scan(sch->writer, p, len, &pos, &e)) return -1;
    codec_schema_t *m = (codec_schema_t *)sch;
    avro_value_reset(&m->proj_val);
    /* the record alone: trailing bytes are one of the errors this reads through */
    avro_reader_memory_set_source(c->in, (const char *)p + off, (int64_t)(pos - off));
    if (avro_value_read(c->in, &m->resolved)) return -1;
    avro_value_t *rec = &m->proj_val;
    int64_t total = 0;
    if (take_string(rec, "job_id", 1, &out->job_id, NULL, &e) ||
        take_string(rec, "tenant", 1, &out->tenant, NULL, &e) ||
        take_string(rec, "ticket_id", 1, &out->ticket_id, NULL, &e))
        return out->job_id ? 0 : -1;
    if (take_long(rec, "job_total", &total, &e) == COMMON_OK && total >= 1 && total <= INT32_MAX)
        out->job_total = (int32_t)total;
    return 0;
}

common_status_t consumers_codec_decode(consumers_codec_t *c, const void *buf, size_t len,
                                       consumers_ticket_t *out, common_err_t *e) {
    const uint8_t *p = buf;
    memset(out, 0, sizeof(*out));
    out->partition = -1;
    out->offset = -1;
    if (!buf || len == 0) return common_err_set(e, COMMON_USAGE, "empty message");
    size_t off;
    const codec_schema_t *sch = codec_frame(c, p, len, &off, e);
    if (!sch) return COMMON_USAGE;

    size_t pos = off;
    common_status_t st = consumers_avro_scan(sch->writer, p, len, &pos, e);
    if (st) return st;
    if (pos != len)
        return common_err_set(e, COMMON_USAGE, "%zu trailing bytes after the record", len - pos);

    codec_schema_t *m = (codec_schema_t *)sch; /* its value buffers are scratch space */
    avro_value_reset(&m->proj_val);
    avro_reader_memory_set_source(c->in, (const char *)p + off, (int64_t)(len - off));
    if (avro_value_read(c->in, &m->resolved))
        return common_err_set(e, COMMON_USAGE, "avro decode: %s", avro_strerror());

    avro_value_t *rec = &m->proj_val;
    int64_t total = 0;
    if ((st = take_string(rec, "job_id", 1, &out->job_id, NULL, e)) ||
        (st = take_string(rec, "tenant", 1, &out->tenant, NULL, e)) ||
        (st = take_string(rec, "ticket_id", 1, &out->ticket_id, NULL, e)) ||
        (st = take_string(rec, "text", 0, &out->text, &out->text_len, e)) ||
        (st = take_long(rec, "job_total", &total, e)) ||
        (st = take_long(rec, "enqueued_at", &out->enqueued_at_ms, e)) ||
        (st = take_priority(c, rec, out, e)))
        goto bad;
    /* every field against what its column accepts (the text is not stored) */
    if (total < 1 || total > INT32_MAX) {
        st = common_err_set(e, COMMON_USAGE, "job_total is %lld; it must be from 1 to %d",
                            (long long)total, INT32_MAX);
        goto bad;
    }
    if ((st = consumers_ticket_check_enqueued(out->enqueued_at_ms, e))) goto bad;
    out->job_total = (int32_t)total;
    return COMMON_OK;
bad:
    consumers_ticket_free(out);
    out->partition = -1;
    out->offset = -1;
    return st;
}

/* ---- encode ---- */

static int put_string(avro_value_t *rec, const char *name, const char *s, size_t n) {
    avro_value_t f;
    if (avro_value_get_by_name(rec, name, &f, NULL)) return -1;
    /* avro-c wants the size with the terminating NUL; s[n] is that NUL. */
    return avro_value_set_string_len(&f, s, n + 1);
}

common_status_t consumers_codec_encode(consumers_codec_t *c, const consumers_ticket_t *t,
                                       int confluent, void **buf, size_t *len, common_err_t *e) {
    *buf = NULL;
    *len = 0;
    const char *ids[][2] = {
        {"job_id", t->job_id}, {"tenant", t->tenant}, {"ticket_id", t->ticket_id}};
    for (size_t i = 0; i < 3; i++)
        if (consumers_ticket_check_id(ids[i][0], ids[i][1] ? ids[i][1] : "",
                                      ids[i][1] ? strlen(ids[i][1]) : 0, e))
            return COMMON_USAGE;
    if (t->job_total < 1) return common_err_set(e, COMMON_USAGE, "job_total must be >= 1");
    if (consumers_ticket_check_enqueued(t->enqueued_at_ms, e)) return COMMON_USAGE;
    const char *text = t->text ? t->text : "";
    size_t text_len = t->text ? t->text_len : 0;
    if (t->text && text[text_len] != '\0') text_len = strlen(text);
    if (text_len >
        CONSUMERS_TICKET_MAX_TEXT_BYTES) /* the decoder refuses it: say so here, not in the DLQ */
        return common_err_set(e, COMMON_USAGE, "field text is %zu bytes (limit %d)", text_len,
                              CONSUMERS_TICKET_MAX_TEXT_BYTES);

    avro_value_t *rec = confluent ? &c->enc_val : &c->plain_val, f, branch;
    avro_value_reset(rec);
    if (t->has_priority && avro_value_get_by_name(rec, "priority", &f, NULL))
        return common_err_set(e, COMMON_USAGE,
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
    if (rc) return common_err_set(e, COMMON_FATAL, "avro encode: %s", avro_strerror());

    size_t body;
    if (avro_value_sizeof(rec, &body))
        return common_err_set(e, COMMON_FATAL, "avro: %s", avro_strerror());
    size_t hdr = confluent ? 5 : 0;
    uint8_t *b = malloc(hdr + body);
    if (!b) return common_err_set(e, COMMON_FATAL, "out of memory");
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
        return common_err_set(e, COMMON_FATAL, "avro write: %s", avro_strerror());
    }
    avro_writer_free(w);
    *buf = b;
    *len = hdr + body;
    return COMMON_OK;
}
