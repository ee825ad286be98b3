/* The three models of tokenizers, one pre-tokenized word at a time: WordPiece (greedy
 * longest match first), BPE (merges by rank, leftmost first on ties: word.rs's merge_all),
 * Unigram (Viterbi over the piece scores: model.rs's encode_optimized, unknown characters
 * scored min_score - 10 and fused). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "worker/text/hf/hf.h"

static inline int is_cont(char c) {
    return ((uint8_t)c & 0xC0) == 0x80;
}

int hf_wordpiece_encode(const hf_model_t *m, const char *w, size_t n, worker_ids_t *out) {
    size_t chars = 0;
    for (size_t i = 0; i < n; i++)
        chars += !is_cont(w[i]);
    if (chars > (size_t)m->max_chars) return hf_ids_push(out, m->unk);
    char stack[512];
    size_t need = m->prefixn + n;
    char *key = need <= sizeof stack ? stack : malloc(need);
    if (!key) return -1;
    int mark = out->n, rc = 0;
    size_t start = 0;
    while (start < n) {
        size_t end = n;
        int32_t got = -1;
        while (start < end) {
            size_t kn = 0;
            if (start > 0) {
                memcpy(key, m->prefix, m->prefixn);
                kn = m->prefixn;
            }
            memcpy(key + kn, w + start, end - start);
            kn += end - start;
            got = hf_map_get(&m->vocab, key, kn);
            if (got >= 0) break;
            do
                end--;
            while (end > start && is_cont(w[end]));
        }
        if (got < 0) { /* one unmatched piece makes the whole word unknown */
            out->n = mark;
            rc = hf_ids_push(out, m->unk);
            break;
        }
        if ((rc = hf_ids_push(out, got)) != 0) break;
        start = end;
    }
    if (key != stack) free(key);
    return rc;
}

static inline uint64_t pair_key(int32_t a, int32_t b) {
    return (uint64_t)(uint32_t)a << 32 | (uint32_t)b;
}

static inline uint32_t pair_hash(uint64_t k) {
    k *= 0x9E3779B97F4A7C15ull;
    return (uint32_t)(k >> 32);
}

int hf_bpe_add_merge(hf_model_t *m, int32_t a, int32_t b, int32_t rank, int32_t id) {
    uint64_t k = pair_key(a, b);
    for (uint32_t i = pair_hash(k) & m->mmask;; i = (i + 1) & m->mmask) {
        if (m->mkey[i] == UINT64_MAX || m->mkey[i] == k) {
            if (m->mkey[i] == k) return 0; /* the first (best ranked) duplicate stays */
            m->mkey[i] = k;
            m->mrank[i] = rank;
            m->mnew[i] = id;
            return 0;
        }
    }
}

static inline int32_t merge_rank(const hf_model_t *m, int32_t a, int32_t b, int32_t *id) {
    if (!m->mkey) return -1;
    uint64_t k = pair_key(a, b);
    for (uint32_t i = pair_hash(k) & m->mmask;; i = (i + 1) & m->mmask) {
        if (m->mkey[i] == UINT64_MAX) return -1;
        if (m->mkey[i] == k) {
            *id = m->mnew[i];
            return m->mrank[i];
        }
    }
}

int hf_bpe_encode(const hf_model_t *m, const char *w, size_t n, worker_ids_t *out) {
    if (m->ignore_merges) { /* a word in the vocabulary is its own token */
        int32_t v = hf_map_get(&m->vocab, w, n);
        if (v >= 0) return hf_ids_push(out, v);
    }
    /* Symbols: one per character (its id), unknown ones fused or not, as merge_word. */
    int32_t stack_id[128], stack_next[128], stack_rank[128], stack_new[128];
    int32_t *id = stack_id, *next = stack_next, *rank = stack_rank, *nid = stack_new;
    size_t cap = n + 1;
    if (cap > 128) {
        id = malloc(cap * 4 * sizeof(int32_t));
        if (!id) return -1;
        next = id + cap;
        rank = next + cap;
        nid = rank + cap;
    }
    int ns = 0, unk_open = 0;
    for (size_t i = 0; i < n;) {
        size_t e = i + 1;
        while (e < n && is_cont(w[e]))
            e++;
        int32_t v = hf_map_get(&m->vocab, w + i, e - i);
        if (v >= 0) {
            id[ns++] = v;
            unk_open = 0;
        } else {
            int done = 0;
            if (m->byte_fallback) {
                done = 1;
                for (size_t k = i; k < e; k++)
                    done &= m->byte_id[(uint8_t)w[k]] >= 0;
                if (done)
                    for (size_t k = i; k < e; k++)
                        id[ns++] = m->byte_id[(uint8_t)w[k]];
                if (done) unk_open = 0;
            }
            if (!done && m->unk >= 0) {
                if (!(unk_open && m->fuse_unk)) id[ns++] = m->unk;
                unk_open = 1;
            }
        }
        i = e;
    }
    for (int i = 0; i < ns; i++) {
        next[i] = i + 1 < ns ? i + 1 : -1;
        rank[i] = next[i] >= 0 ? merge_rank(m, id[i], id[next[i]], &nid[i]) : -1;
    }
    for (;;) {
        int best = -1;
        for (int i = 0; i >= 0 && i < ns; i = next[i])
            if (rank[i] >= 0 && (best < 0 || rank[i] < rank[best])) best = i;
        if (best < 0) break;
        int j = next[best];
        id[best] = nid[best];
        next[best] = next[j];
        rank[best] = next[best] >= 0 ? merge_rank(m, id[best], id[next[best]], &nid[best]) : -1;
        for (int i = 0; i >= 0 && i < ns; i = next[i]) /* the pair ending at best */
            if (next[i] == best) {
                rank[i] = merge_rank(m, id[i], id[best], &nid[i]);
                break;
            }
    }
    int rc = 0;
    for (int i = 0; ns > 0 && i >= 0 && rc == 0; i = next[i])
        rc = hf_ids_push(out, id[i]);
    if (id != stack_id) free(id);
    return rc;
}

int hf_unigram_prepare(hf_model_t *m) {
    /* Every proper prefix (at a character boundary) of a piece gets aux = 1: the lattice
     * extends a match only while the string is still some piece's prefix. */
    size_t n = m->vocab.mask + 1;
    for (size_t i = 0; i < n; i++) {
        const hf_map_slot_t *e = &m->vocab.slot[i];
        if (e->len == UINT32_MAX || e->val < 0) continue;
        uint32_t off = e->off, len = e->len;
        /* the pool may move while slots are added: the key is copied out first */
        char *key = malloc(len ? len : 1);
        if (!key) return -1;
        memcpy(key, m->vocab.pool.p + off, len);
        for (uint32_t k = 1; k < len; k++) {
            if (is_cont(key[k])) continue;
            hf_map_slot_t *p = hf_map_slot(&m->vocab, key, k, 1);
            if (!p) {
                free(key);
                return -1;
            }
            p->aux = 1;
            if (m->vocab.mask + 1 != n) { /* the table grew: start over on the new one */
                free(key);
                return hf_unigram_prepare(m);
            }
        }
        free(key);
    }
    return 0;
}

int hf_unigram_encode(const hf_model_t *m, const char *w, size_t n, worker_ids_t *out) {
    double stack_score[257];
    int32_t stack_from[257], stack_id[257];
    double *best = stack_score;
    int32_t *from = stack_from, *bid = stack_id;
    if (n + 1 > 257) {
        best = malloc((n + 1) * sizeof(double));
        from = malloc((n + 1) * 2 * sizeof(int32_t));
        if (!best || !from) {
            free(best);
            free(from);
            return -1;
        }
        bid = from + n + 1;
    }
    for (size_t i = 0; i <= n; i++)
        best[i] = 0, from[i] = -1, bid[i] = 0;
    for (size_t s = 0; s < n;) {
        size_t mb = 1;
        while (s + mb < n && is_cont(w[s + mb]))
            mb++;
        double here = best[s];
        int single = 0;
        for (size_t e = s + mb; e <= n;) {
            const hf_map_slot_t *k = hf_map_find(&m->vocab, w + s, e - s);
            if (!k) break;
            if (k->val >= 0) {
                double cand = m->score[k->val] + here;
                if (from[e] < 0 || cand > best[e]) {
                    best[e] = cand;
                    from[e] = (int32_t)s;
                    bid[e] = k->val;
                }
                if (e - s == mb) single = 1;
            }
            if (!k->aux) break;
            e++;
            while (e < n && is_cont(w[e]))
                e++;
        }
        if (!single) {
            double cand = m->unk_score + here;
            if (from[s + mb] < 0 || cand > best[s + mb]) {
                best[s + mb] = cand;
                from[s + mb] = (int32_t)s;
                bid[s + mb] = m->unk;
            }
        }
        s += mb;
    }
    /* Back from the end; runs of unknown pieces fuse into one string, looked up again. */
    int mark = out->n, rc = 0;
    size_t e = n;
    while (e > 0 && rc == 0) {
        size_t s = (size_t)from[e];
        int32_t v = bid[e];
        if (v == m->unk) {
            while (s > 0 && bid[s] == m->unk)
                s = (size_t)from[s];
            v = hf_map_get(&m->vocab, w + s, e - s);
            if (v < 0 && m->byte_fallback) {
                int ok = 1;
                for (size_t k = s; k < e; k++)
                    ok &= m->byte_id[(uint8_t)w[k]] >= 0;
                for (size_t k = e; ok && k-- > s && rc == 0;)
                    rc = hf_ids_push(out, m->byte_id[(uint8_t)w[k]]);
                if (ok) {
                    e = s;
                    continue;
                }
            }
            if (v < 0) v = m->unk;
        }
        rc = hf_ids_push(out, v);
        e = s;
    }
    /* Written backwards: reverse. */
    for (int i = mark, j = out->n - 1; i < j; i++, j--) {
        int32_t x = out->v[i];
        out->v[i] = out->v[j];
        out->v[j] = x;
    }
    if (best != stack_score) {
        free(best);
        free(from);
    }
    return rc;
}

void hf_model_free(hf_model_t *m) {
    hf_map_free(&m->vocab);
    free(m->prefix);
    free(m->mkey);
    free(m->mrank);
    free(m->mnew);
    free(m->score);
}
