/* Bench workloads (worker/bench/workload.c): the seeded tickets-mix and JSONL loading. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "worker/bench/workload.h"

static int cmp_long(const void *a, const void *b) {
    long x = *(const long *)a, y = *(const long *)b;
    return x < y ? -1 : x > y;
}

static void test_tickets_mix_shape(void **state) {
    worker_workload_t *w;
    common_err_t err;
    assert_int_equal(worker_workload_tickets_mix(20000, 1, 512, 30522, &w, &err), 0);
    assert_int_equal(w->n, 20000);
    assert_false(w->is_text);
    long *lens = malloc(20000 * sizeof(long));
    long longish = 0;
    for (long i = 0; i < w->n; i++) {
        long len = w->off[i + 1] - w->off[i];
        lens[i] = len;
        assert_true(len >= 8 && len <= 512);
        const int32_t *t = w->ids + w->off[i];
        assert_int_equal(t[0], 101);
        assert_int_equal(t[len - 1], 102);
        for (long j = 1; j < len - 1; j++)
            assert_true(t[j] >= 1000 && t[j] < 30000);
        if (len >= 448) longish++;
    }
    qsort(lens, 20000, sizeof(long), cmp_long);
    double frac_long = longish / 20000.0;
    /* 10% uniform 448..512 plus the lognormal's own tail (~0.6% of 90%) */
    print_message("tickets-mix: median %ld, p10 %ld, p90 %ld, >=448: %.3f, tokens %ld\n",
                  lens[10000], lens[2000], lens[18000], frac_long, w->off[w->n]);
    assert_true(frac_long > 0.095 && frac_long < 0.115);
    /* quantile q of the mix is the lognormal's quantile q / 0.9: median 60 e^(0.8 z(0.556)) = 67,
     * p10 60 e^(0.8 z(0.111)) = 22.6 */
    assert_true(lens[10000] >= 64 && lens[10000] <= 70);
    assert_true(lens[2000] >= 20 && lens[2000] <= 25);

    /* same seed, same workload; another seed, another one */
    worker_workload_t *w2, *w3;
    assert_int_equal(worker_workload_tickets_mix(20000, 1, 512, 30522, &w2, &err), 0);
    assert_int_equal(worker_workload_tickets_mix(20000, 2, 512, 30522, &w3, &err), 0);
    assert_int_equal(w2->off[w2->n], w->off[w->n]);
    assert_memory_equal(w2->ids, w->ids, (size_t)w->off[w->n] * sizeof(int32_t));
    assert_true(w3->off[w3->n] != w->off[w->n] ||
                memcmp(w3->ids, w->ids, (size_t)w->off[w->n] * sizeof(int32_t)) != 0);
    worker_workload_free(w);
    worker_workload_free(w2);
    worker_workload_free(w3);
    free(lens);

    /* a model with 128 positions: lengths clipped, [SEP] kept last */
    assert_int_equal(worker_workload_tickets_mix(500, 3, 128, 30522, &w, &err), 0);
    for (long i = 0; i < w->n; i++) {
        long len = w->off[i + 1] - w->off[i];
        assert_true(len <= 128);
        assert_int_equal(w->ids[w->off[i + 1] - 1], 102);
    }
    worker_workload_free(w);
}

static const char *write_tmp(const char *name, const char *body) {
    static char path[256];
    snprintf(path, sizeof path, "/tmp/reclass_test_workload_%d_%s", (int)getpid(), name);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(body, f);
    fclose(f);
    return path;
}

static void test_load_jsonl(void **state) {
    worker_workload_t *w;
    common_err_t err;
    const char *p = write_tmp("ids.jsonl", "{\"ids\": [101, 7, 8, 9, 102]}\n\n"
                                           "{\"ids\": [101, 5, 102], \"extra\": 1}\n");
    assert_int_equal(worker_workload_load(p, 4, 1000, &w, &err), 0);
    assert_int_equal(w->n, 2);
    assert_int_equal(w->truncated, 1);
    /* truncated to 4: the head, then the final id */
    int32_t want[] = {101, 7, 8, 102, 101, 5, 102};
    assert_int_equal(w->off[2], 7);
    assert_memory_equal(w->ids, want, sizeof want);
    worker_workload_free(w);
    unlink(p);

    p = write_tmp("text.jsonl", "{\"text\": \"hello world\"}\n{\"text\": \"\"}\n");
    assert_int_equal(worker_workload_load(p, 512, 1000, &w, &err), 0);
    assert_int_equal(w->n, 2);
    assert_true(w->is_text);
    assert_string_equal(w->text + w->text_off[0], "hello world");
    assert_string_equal(w->text + w->text_off[1], "");
    worker_workload_free(w);
    unlink(p);

    struct {
        const char *body, *needle;
    } bad[] = {
        {"{\"ids\": [101, 102]}\n{\"text\": \"x\"}\n", "line 2: mixes"},
        {"{\"ids\": [101, 5000, 102]}\n", "line 1: \"ids\"[1] is not an integer in 0..999"},
        {"{\"ids\": []}\n", "line 1: \"ids\" is empty"},
        {"{\"ids\": [101, 102]}\nnot json\n", "line 2: not a JSON object"},
        {"\n\n", "holds no tickets"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        p = write_tmp("bad.jsonl", bad[i].body);
        w = (worker_workload_t *)0x1;
        assert_int_equal(worker_workload_load(p, 512, 1000, &w, &err), COMMON_USAGE);
        assert_null(w);
        if (!strstr(err.message, bad[i].needle))
            fail_msg("'%s' lacks '%s'", err.message, bad[i].needle);
        unlink(p);
    }
    assert_int_equal(worker_workload_load("/nonexistent/x.jsonl", 512, 1000, &w, &err), 2);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tickets_mix_shape),
        cmocka_unit_test(test_load_jsonl),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
