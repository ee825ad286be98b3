#include "consumers/avro_scan.h"

#include <stdio.h>

#include "common/err.h"

#define SCAN_MAX_DEPTH 32

static int scan_varint(const uint8_t *p, size_t len, size_t *pos, int64_t *out) {
    uint64_t v = 0;
    for (int i = 0; i < 10; i++) {
        if (*pos >= len) return -1;
        uint8_t b = p[(*pos)++];
        v |= (uint64_t)(b & 0x7f) << (7 * i);
        if (!(b & 0x80)) {
            *out = (int64_t)((v >> 1) ^ (~(v & 1) + 1));
            return 0;
        }
    }
    return -1;
}

static common_status_t scan_value(avro_schema_t s, const uint8_t *p, size_t len, size_t *pos,
                                  int depth, common_err_t *e) {
    int64_t v;
    if (depth > SCAN_MAX_DEPTH) return common_err_set(e, COMMON_USAGE, "schema nests too deep");
    switch (avro_typeof(s)) {
    case AVRO_NULL:
        return COMMON_OK;
    case AVRO_BOOLEAN:
        if (len - *pos < 1)
            return common_err_set(e, COMMON_USAGE, "truncated boolean at byte %zu", *pos);
        *pos += 1;
        return COMMON_OK;
    case AVRO_INT32:
    case AVRO_INT64:
        if (scan_varint(p, len, pos, &v))
            return common_err_set(e, COMMON_USAGE, "bad or truncated varint at byte %zu", *pos);
        if (avro_typeof(s) == AVRO_INT32 && (v < INT32_MIN || v > INT32_MAX))
            return common_err_set(e, COMMON_USAGE, "int out of range at byte %zu", *pos);
        return COMMON_OK;
    case AVRO_FLOAT:
    case AVRO_DOUBLE: {
        size_t w = avro_typeof(s) == AVRO_FLOAT ? 4 : 8;
        if (len - *pos < w)
            return common_err_set(e, COMMON_USAGE, "truncated number at byte %zu", *pos);
        *pos += w;
        return COMMON_OK;
    }
    case AVRO_STRING:
    case AVRO_BYTES:
        if (scan_varint(p, len, pos, &v))
            return common_err_set(e, COMMON_USAGE, "bad or truncated length at byte %zu", *pos);
        if (v < 0)
            return common_err_set(e, COMMON_USAGE, "negative string length %lld", (long long)v);
        if ((uint64_t)v > len - *pos)
            return common_err_set(e, COMMON_USAGE,
                                  "string length %lld runs past the end (%zu bytes left)",
                                  (long long)v, len - *pos);
        *pos += (size_t)v;
        return COMMON_OK;
    case AVRO_FIXED: {
        int64_t w = avro_schema_fixed_size(s);
        if (w < 0 || (uint64_t)w > len - *pos)
            return common_err_set(e, COMMON_USAGE, "truncated fixed at byte %zu", *pos);
        *pos += (size_t)w;
        return COMMON_OK;
    }
    case AVRO_ENUM:
        if (scan_varint(p, len, pos, &v) || v < 0 || v >= avro_schema_enum_number_of_symbols(s))
            return common_err_set(e, COMMON_USAGE, "bad enum index at byte %zu", *pos);
        return COMMON_OK;
    case AVRO_UNION:
        if (scan_varint(p, len, pos, &v) || v < 0 || (uint64_t)v >= avro_schema_union_size(s))
            return common_err_set(e, COMMON_USAGE, "bad union branch at byte %zu", *pos);
        return scan_value(avro_schema_union_branch(s, (int)v), p, len, pos, depth + 1, e);
    case AVRO_RECORD: {
        size_t nf = avro_schema_record_size(s);
        for (size_t i = 0; i < nf; i++)
            if (scan_value(avro_schema_record_field_get_by_index(s, (int)i), p, len, pos, depth + 1,
                           e))
                return COMMON_USAGE;
        return COMMON_OK;
    }
    case AVRO_ARRAY:
    case AVRO_MAP: {
        int is_map = avro_typeof(s) == AVRO_MAP;
        avro_schema_t item = is_map ? avro_schema_map_values(s) : avro_schema_array_items(s);
        for (;;) {
            int64_t count, bytes;
            if (scan_varint(p, len, pos, &count))
                return common_err_set(e, COMMON_USAGE, "bad block count at byte %zu", *pos);
            if (count == 0) return COMMON_OK;
            if (count < 0) {
                if (count == INT64_MIN || scan_varint(p, len, pos, &bytes))
                    return common_err_set(e, COMMON_USAGE, "bad block at byte %zu", *pos);
                count = -count;
            }
            /* Every item costs at least one byte except null ones, which never occur in a
             * ticket; this bound keeps garbage counts from looping for ages. */
            if ((uint64_t)count > len - *pos + 1)
                return common_err_set(e, COMMON_USAGE, "block count %lld too large",
                                      (long long)count);
            for (int64_t i = 0; i < count; i++) {
                if (is_map) {
                    if (scan_varint(p, len, pos, &v) || v < 0 || (uint64_t)v > len - *pos)
                        return common_err_set(e, COMMON_USAGE, "bad map key at byte %zu", *pos);
                    *pos += (size_t)v;
                }
                if (scan_value(item, p, len, pos, depth + 1, e)) return COMMON_USAGE;
            }
        }
    }
    case AVRO_LINK:
        return scan_value(avro_schema_link_target(s), p, len, pos, depth + 1, e);
    default:
        return common_err_set(e, COMMON_USAGE, "unsupported schema type %s",
                              avro_schema_type_name(s));
    }
}

common_status_t consumers_avro_scan(avro_schema_t s, const uint8_t *p, size_t len, size_t *pos,
                                    common_err_t *e) {
    return scan_value(s, p, len, pos, 0, e);
}
