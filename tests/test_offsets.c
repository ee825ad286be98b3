/* consumers/offsets: the stored offset never passes an uncommitted consumed offset, and it
 * reaches the end once everything is committed, whatever the completion order and however
 * gappy the partition's offsets. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <cmocka.h>

#include "consumers/offsets.h"

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;
static uint64_t rng(void) { /* xorshift64*: reproducible across libcs */
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return rng_state * 2685821657736338717ull;
}

static void shuffle(int *v, int n) {
    for (int i = n - 1; i > 0; i--) {
        int j = (int)(rng() % (uint64_t)(i + 1));
        int t = v[i];
        v[i] = v[j];
        v[j] = t;
    }
}

/* The reference answer: 1 + the last offset of the committed prefix, or -1. */
static int64_t expected_prefix(const int64_t *offs, const int *done, int n) {
    int64_t end = -1;
    for (int i = 0; i < n && done[i]; i++)
        end = offs[i] + 1;
    return end;
}

static void run_random(int n, int gappy, int parts_n) {
    consumers_offsets_t *t;
    assert_int_equal(consumers_offsets_init(&t), 0);
    int64_t *offs = malloc(sizeof(*offs) * (size_t)n * (size_t)parts_n); /* (parts_n, n) */
    int *done = calloc((size_t)n * (size_t)parts_n, sizeof(*done));
    int *order = malloc(sizeof(*order) * (size_t)n * (size_t)parts_n);
    int64_t *epoch = malloc(sizeof(*epoch) * (size_t)parts_n);
    int64_t *last_stored = malloc(sizeof(*last_stored) * (size_t)parts_n);
    for (int p = 0; p < parts_n; p++) {
        epoch[p] = consumers_offsets_assign(t, p);
        assert_true(epoch[p] > 0);
        last_stored[p] = -1;
        int64_t o = (int64_t)(rng() % 1000);
        for (int i = 0; i < n; i++) {
            offs[p * n + i] = o;
            assert_int_equal(consumers_offsets_consumed(t, p, epoch[p], o), 0);
            o += gappy ? 1 + (int64_t)(rng() % 5) : 1; /* compaction leaves holes */
        }
    }
    assert_int_equal(consumers_offsets_pending(t, -1), (long)n * parts_n);
    for (int i = 0; i < n * parts_n; i++)
        order[i] = i;
    shuffle(order, n * parts_n);
    for (int k = 0; k < n * parts_n; k++) {
        int idx = order[k], p = idx / n;
        assert_int_equal(consumers_offsets_committed(t, p, epoch[p], offs[idx]), 1);
        done[idx] = 1;
        /* committing twice is a no-op */
        assert_int_equal(consumers_offsets_committed(t, p, epoch[p], offs[idx]), 0);
        if (rng() % 3 == 0) continue; /* the caller does not store after every commit */
        int64_t s = consumers_offsets_storable(t, p);
        int64_t want = expected_prefix(offs + p * n, done + p * n, n);
        if (s >= 0) {
            assert_int_equal(s, want);
            assert_true(s > last_stored[p]); /* never goes backwards, never repeats */
            /* never past an uncommitted consumed offset */
            for (int i = 0; i < n; i++)
                if (!done[p * n + i]) assert_true(s <= offs[p * n + i]);
            last_stored[p] = s;
        } else {
            assert_int_equal(want, last_stored[p]);
        }
    }
    for (int p = 0; p < parts_n; p++) {
        int64_t s = consumers_offsets_storable(t, p);
        if (s >= 0) last_stored[p] = s;
        assert_int_equal(last_stored[p], offs[p * n + n - 1] + 1); /* reaches the end */
        assert_int_equal(consumers_offsets_pending(t, p), 0);
        assert_int_equal(consumers_offsets_storable(t, p), -1);
    }
    free(offs);
    free(done);
    free(order);
    free(epoch);
    free(last_stored);
    consumers_offsets_free(t);
}

static void test_random_dense(void **state) {
    for (int round = 0; round < 50; round++)
        run_random(1 + (int)(rng() % 300), 0, 1);
}

static void test_random_gappy_multi_partition(void **state) {
    for (int round = 0; round < 30; round++)
        run_random(1 + (int)(rng() % 500), 1, 4);
}

static void test_large_interleaved(void **state) {
    /* consume and commit interleaved, as the pipeline does: the window slides, memory stays
     * bounded by what is in flight */
    consumers_offsets_t *t;
    assert_int_equal(consumers_offsets_init(&t), 0);
    int64_t e = consumers_offsets_assign(t, 0);
    int64_t next_commit = 0, stored = -1;
    for (int64_t o = 0; o < 200000; o++) {
        assert_int_equal(consumers_offsets_consumed(t, 0, e, o * 2), 0);
        if (o >= 100) { /* keep ~100 in flight */
            assert_int_equal(consumers_offsets_committed(t, 0, e, next_commit * 2), 1);
            next_commit++;
            int64_t s = consumers_offsets_storable(t, 0);
            if (s >= 0) stored = s;
            assert_int_equal(stored, (next_commit - 1) * 2 + 1);
        }
    }
    assert_int_equal(consumers_offsets_pending(t, 0), 100);
    consumers_offsets_free(t);
}

static void test_gap_blocks_until_committed(void **state) {
    consumers_offsets_t *t;
    assert_int_equal(consumers_offsets_init(&t), 0);
    int64_t e = consumers_offsets_assign(t, 3);
    int64_t offs[] = {10, 11, 15, 20};
    for (int i = 0; i < 4; i++)
        assert_int_equal(consumers_offsets_consumed(t, 3, e, offs[i]), 0);
    assert_int_equal(consumers_offsets_storable(t, 3), -1);
    assert_int_equal(consumers_offsets_committed(t, 3, e, 15), 1);
    assert_int_equal(consumers_offsets_committed(t, 3, e, 20), 1);
    assert_int_equal(consumers_offsets_storable(t, 3), -1);        /* 10 and 11 still pending */
    assert_int_equal(consumers_offsets_committed(t, 3, e, 12), 0); /* never consumed */
    assert_int_equal(consumers_offsets_committed(t, 3, e, 10), 1);
    assert_int_equal(consumers_offsets_storable(t, 3), 11);
    assert_int_equal(consumers_offsets_committed(t, 3, e, 11), 1);
    assert_int_equal(consumers_offsets_storable(t, 3), 21); /* jumps the compaction hole */
    assert_int_equal(consumers_offsets_storable(t, 3), -1);
    consumers_offsets_free(t);
}

static void test_revoke_drops_in_flight(void **state) {
    consumers_offsets_t *t;
    assert_int_equal(consumers_offsets_init(&t), 0);
    int64_t e1 = consumers_offsets_assign(t, 0);
    int64_t e_other = consumers_offsets_assign(t, 1);
    for (int64_t o = 0; o < 10; o++)
        assert_int_equal(consumers_offsets_consumed(t, 0, e1, o), 0);
    assert_int_equal(consumers_offsets_committed(t, 0, e1, 0), 1);
    assert_int_equal(consumers_offsets_revoke(t, 0), 9);
    assert_int_equal(consumers_offsets_epoch(t, 0), 0);
    /* results of the revoked epoch arriving late are ignored and never stored */
    for (int64_t o = 1; o < 10; o++)
        assert_int_equal(consumers_offsets_committed(t, 0, e1, o), 0);
    assert_int_equal(consumers_offsets_storable(t, 0), -1);
    assert_int_equal(consumers_offsets_consumed(t, 0, e1, 11), -1);
    /* reassigned: a fresh epoch starting wherever Kafka resumes */
    int64_t e2 = consumers_offsets_assign(t, 0);
    assert_true(e2 != e1 && e2 != e_other && e2 > 0);
    assert_int_equal(consumers_offsets_consumed(t, 0, e2, 1), 0);
    assert_int_equal(consumers_offsets_committed(t, 0, e1, 1), 0); /* old epoch still ignored */
    assert_int_equal(consumers_offsets_storable(t, 0), -1);
    assert_int_equal(consumers_offsets_committed(t, 0, e2, 1), 1);
    assert_int_equal(consumers_offsets_storable(t, 0), 2);
    int32_t parts[4];
    assert_int_equal(consumers_offsets_partitions(t, parts, 4), 2);
    assert_int_equal(consumers_offsets_revoke(t, 1), 0);
    assert_int_equal(consumers_offsets_partitions(t, parts, 4), 1);
    assert_int_equal(parts[0], 0);
    consumers_offsets_free(t);
}

static void test_rejects_misuse(void **state) {
    consumers_offsets_t *t;
    assert_int_equal(consumers_offsets_init(&t), 0);
    assert_int_equal(consumers_offsets_consumed(t, 0, 1, 5), -1); /* not assigned */
    int64_t e = consumers_offsets_assign(t, 0);
    assert_int_equal(consumers_offsets_consumed(t, 0, e, 5), 0);
    assert_int_equal(consumers_offsets_consumed(t, 0, e, 5), -1); /* not increasing */
    assert_int_equal(consumers_offsets_consumed(t, 0, e, 4), -1);
    assert_int_equal(consumers_offsets_consumed(t, 0, e + 1, 6), -1); /* wrong epoch */
    assert_int_equal(consumers_offsets_storable(t, 7), -1);           /* unknown partition */
    assert_int_equal(consumers_offsets_committed(t, 7, e, 5), 0);
    assert_int_equal(consumers_offsets_assign(t, -1), -1);
    consumers_offsets_free(t);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_random_dense),
        cmocka_unit_test(test_random_gappy_multi_partition),
        cmocka_unit_test(test_large_interleaved),
        cmocka_unit_test(test_gap_blocks_until_committed),
        cmocka_unit_test(test_revoke_drops_in_flight),
        cmocka_unit_test(test_rejects_misuse),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
