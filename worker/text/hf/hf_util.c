/* Byte strings, piece lists and the string table the tokenizer.json code shares. */
#include <stdlib.h>
#include <string.h>

#include "worker/text/hf/hf.h"

int hf_buf_reserve(hf_buf_t *b, size_t need) {
    if (b->cap >= need) return 0;
    size_t cap = b->cap ? b->cap : 256;
    while (cap < need)
        cap *= 2;
    char *p = realloc(b->p, cap);
    if (!p) return -1;
    b->p = p;
    b->cap = cap;
    return 0;
}

int hf_buf_put(hf_buf_t *b, const void *s, size_t n) {
    if (hf_buf_reserve(b, b->n + n) != 0) return -1;
    if (n) memcpy(b->p + b->n, s, n);
    b->n += n;
    return 0;
}

void hf_buf_free(hf_buf_t *b) {
    free(b->p);
    *b = (hf_buf_t){0};
}

int hf_pieces_add(hf_pieces_t *p, uint32_t off, uint32_t len, int first) {
    if (len == 0) return 0; /* tokenizers drops empty splits */
    if (p->n == p->cap) {
        size_t cap = p->cap ? p->cap * 2 : 64;
        hf_span_t *s = realloc(p->s, cap * sizeof(*s));
        if (!s) return -1;
        p->s = s;
        p->cap = cap;
    }
    p->s[p->n++] = (hf_span_t){off, len, (uint8_t)first};
    return 0;
}

void hf_pieces_free(hf_pieces_t *p) {
    hf_buf_free(&p->b);
    free(p->s);
    *p = (hf_pieces_t){0};
}

static uint32_t map_hash(const char *k, size_t n) {
    uint32_t h = 2166136261u; /* FNV-1a */
    for (size_t i = 0; i < n; i++)
        h = (h ^ (uint8_t)k[i]) * 16777619u;
    return h ^ (h >> 15);
}

static int map_grow(hf_map_t *m) {
    uint32_t size = m->slot ? (m->mask + 1) * 2 : 1024;
    hf_map_slot_t *s = malloc(sizeof(*s) * size);
    if (!s) return -1;
    for (uint32_t i = 0; i < size; i++)
        s[i].val = -1, s[i].aux = 0, s[i].len = UINT32_MAX;
    if (m->slot)
        for (uint32_t i = 0; i <= m->mask; i++) {
            if (m->slot[i].len == UINT32_MAX) continue;
            uint32_t j = m->slot[i].hash & (size - 1);
            while (s[j].len != UINT32_MAX)
                j = (j + 1) & (size - 1);
            s[j] = m->slot[i];
        }
    free(m->slot);
    m->slot = s;
    m->mask = size - 1;
    return 0;
}

/* Slots in use have len != UINT32_MAX; val -1 marks a key that only exists as a prefix. */
hf_map_slot_t *hf_map_slot(hf_map_t *m, const char *k, size_t n, int create) {
    if (n >= UINT32_MAX) return NULL;
    if (create && (!m->slot || (m->used + 1) * 2 > m->mask + 1) && map_grow(m) != 0) return NULL;
    if (!m->slot) return NULL;
    uint32_t h = map_hash(k, n);
    for (uint32_t i = h & m->mask;; i = (i + 1) & m->mask) {
        hf_map_slot_t *e = &m->slot[i];
        if (e->len == UINT32_MAX) {
            if (!create) return NULL;
            uint32_t off = (uint32_t)m->pool.n;
            if (hf_buf_put(&m->pool, k, n) != 0) return NULL;
            *e = (hf_map_slot_t){h, off, (uint32_t)n, -1, 0};
            m->used++;
            return e;
        }
        if (e->hash == h && e->len == n && memcmp(m->pool.p + e->off, k, n) == 0) return e;
    }
}

int hf_map_put(hf_map_t *m, const char *k, size_t n, int32_t val) {
    hf_map_slot_t *e = hf_map_slot(m, k, n, 1);
    if (!e) return -1;
    e->val = val;
    return 0;
}

const hf_map_slot_t *hf_map_find(const hf_map_t *m, const char *k, size_t n) {
    return hf_map_slot((hf_map_t *)m, k, n, 0);
}

int32_t hf_map_get(const hf_map_t *m, const char *k, size_t n) {
    const hf_map_slot_t *e = hf_map_find(m, k, n);
    return e ? e->val : -1;
}

void hf_map_free(hf_map_t *m) {
    free(m->slot);
    hf_buf_free(&m->pool);
    *m = (hf_map_t){0};
}
