/* worker/classify/result.c: softmax, top-k and the JSON text shared by `reclass run` and
 * `reclass classify`. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "worker/classify/result.h"

static int failures;

#define CHECK(cond, ...)                                                                           \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            printf("FAIL %s:%d: ", __FILE__, __LINE__);                                            \
            printf(__VA_ARGS__);                                                                   \
            printf("\n");                                                                          \
            failures++;                                                                            \
        }                                                                                          \
    } while (0)

static void check_text(const cls_buf_t *b, const char *want, const char *what) {
    CHECK(!b->oom && b->s && strcmp(b->s, want) == 0, "%s: got [%s], want [%s]", what,
          b->s ? b->s : "(null)", want);
}

static void test_softmax(void) {
    /* softmax(1, 2, 3) = 0.0900305732, 0.2447284711, 0.6652409558 */
    const float lg[3] = {1, 2, 3};
    cls_result_t r;
    cls_score(lg, 3, 3, &r);
    CHECK(r.k == 3 && r.label == 2, "k %d label %d", r.k, r.label);
    CHECK(r.top[0] == 2 && r.top[1] == 1 && r.top[2] == 0, "order %d %d %d", r.top[0], r.top[1],
          r.top[2]);
    const double want[3] = {0.6652409558, 0.2447284711, 0.0900305732};
    for (int i = 0; i < 3; i++)
        CHECK(r.p[i] == (float)want[i], "p[%d] %.9g want %.9g", i, r.p[i], (float)want[i]);
    CHECK(r.confidence == r.p[0], "confidence %.9g p[0] %.9g", r.confidence, r.p[0]);
    /* logits far from 0: computed against the max, so nothing overflows */
    const float big[3] = {1000, 999, -1000};
    cls_score(big, 3, 2, &r);
    CHECK(r.k == 2 && r.top[0] == 0 && r.top[1] == 1, "big: order");
    CHECK(r.p[0] == (float)(1 / (1 + exp(-1.0))), "big: p0 %.9g", r.p[0]);
    CHECK(r.p[1] == (float)(exp(-1.0) / (1 + exp(-1.0))), "big: p1 %.9g", r.p[1]);
    /* uniform */
    const float flat[4] = {-3, -3, -3, -3};
    cls_score(flat, 4, 4, &r);
    for (int i = 0; i < 4; i++)
        CHECK(r.top[i] == i && r.p[i] == 0.25f, "flat: top[%d] %d p %.9g", i, r.top[i], r.p[i]);
}

static void test_ties_and_k(void) {
    const float lg[5] = {1, 5, 2, 5, 5};
    cls_result_t r;
    cls_score(lg, 5, 4, &r);
    /* equal logits keep label order: the arg-max is the first of them */
    CHECK(r.label == 1 && r.top[0] == 1 && r.top[1] == 3 && r.top[2] == 4 && r.top[3] == 2,
          "ties: label %d top %d %d %d %d", r.label, r.top[0], r.top[1], r.top[2], r.top[3]);
    CHECK(r.p[0] == r.p[1] && r.p[1] == r.p[2], "ties: equal p");
    /* k larger than the labels: every label once */
    cls_score(lg, 5, 9, &r);
    CHECK(r.k == 5, "k > labels: k %d", r.k);
    int seen = 0;
    for (int i = 0; i < r.k; i++)
        seen |= 1 << r.top[i];
    CHECK(seen == 31, "k > labels: labels %x", seen);
    cls_score(lg, 5, 0, &r);
    CHECK(r.k == 0 && r.label == 1 && r.confidence > 0.3f, "k 0: k %d label %d", r.k, r.label);
    float many[100];
    for (int i = 0; i < 100; i++)
        many[i] = (float)i;
    cls_score(many, 100, 1000, &r);
    CHECK(r.k == CLS_TOP_MAX && r.top[0] == 99 && r.top[63] == 36, "k capped: %d", r.k);
}

/* The order against a sort of every label by (logit descending, id ascending), over rows of
 * many ties and of NaN (which keeps the first label unbeaten in the pass it is met, as the
 * plain selection does). */
static const float *cmp_row;
static int cmp_by_logit(const void *a, const void *b) {
    int x = *(const int *)a, y = *(const int *)b;
    if (cmp_row[x] != cmp_row[y]) return cmp_row[x] > cmp_row[y] ? -1 : 1;
    return x - y;
}

static void test_order_reference(void) {
    float lg[160];
    int idx[160];
    cls_result_t r;
    srand(11);
    for (int it = 0; it < 20000; it++) {
        int L = 1 + rand() % 160, k = rand() % 8;
        for (int j = 0; j < L; j++)
            lg[j] = it % 2 ? (float)(rand() % 6) : (float)rand() / (float)RAND_MAX;
        cls_score(lg, L, k, &r);
        for (int j = 0; j < L; j++)
            idx[j] = j;
        cmp_row = lg;
        qsort(idx, (size_t)L, sizeof(*idx), cmp_by_logit);
        int same = r.k == (k < L ? k : L) && r.label == idx[0];
        for (int i = 0; i < r.k && same; i++)
            same = r.top[i] == idx[i];
        CHECK(same, "row %d (L %d, k %d): top-k not in (logit desc, id asc) order", it, L, k);
        if (!same) break;
    }
    /* NaN: the first label of a pass stays unless a later one is greater than it */
    const float nan_row[4] = {NAN, 3, 1, 2};
    cls_score(nan_row, 4, 2, &r);
    CHECK(r.label == 0 && r.top[0] == 0 && r.top[1] == 1, "NaN: label %d top %d %d", r.label,
          r.top[0], r.top[1]);
}

static void test_json(void) {
    cls_buf_t b = {0};
    cls_json_string(&b, "a \"quoted\" \\ back\\slash");
    check_text(&b, "\"a \\\"quoted\\\" \\\\ back\\\\slash\"", "quotes");
    b.len = 0;
    cls_json_string(&b, "line\nfeed\ttab\x01\x1f end");
    check_text(&b, "\"line\\u000afeed\\u0009tab\\u0001\\u001f end\"", "control bytes");
    b.len = 0;
    cls_json_string(&b, "caf\xc3\xa9 \xe2\x98\x95 \xf0\x9f\x98\x80");
    check_text(&b, "\"caf\xc3\xa9 \xe2\x98\x95 \xf0\x9f\x98\x80\"", "UTF-8 kept");
    b.len = 0;
    cls_json_string(&b, "");
    check_text(&b, "\"\"", "empty");

    /* one number format: %.9g of the float, which reads back as the same float */
    b.len = 0;
    cls_json_number(&b, 0.75f);
    check_text(&b, "0.75", "0.75");
    b.len = 0;
    cls_json_number(&b, 1.0f / 3.0f);
    check_text(&b, "0.333333343", "1/3");
    unsigned s = 12345;
    for (int i = 0; i < 100000; i++) {
        s = s * 1103515245u + 12345u;
        float x = (float)(s >> 8) / (float)(1u << 24) / (float)(1 + (i % 1000));
        b.len = 0;
        cls_json_number(&b, x);
        CHECK(strtof(b.s, NULL) == x, "round trip %.9g -> %s", x, b.s);
        if (failures > 10) break;
    }
    /* halfway between two 9-digit values: to the even one, as printf rounds */
    b.len = 0;
    cls_json_number(&b, ldexpf(513, -9)); /* 1.001953125 */
    check_text(&b, "1.00195312", "tie, even below");
    b.len = 0;
    cls_json_number(&b, ldexpf(1539, -9)); /* 3.005859375 */
    check_text(&b, "3.00585938", "tie, even above");
    b.len = 0;
    cls_json_number(&b, 2.5e-5f);
    check_text(&b, "2.49999994e-05", "exponent form");
    /* the same text as printf's "%.9g": every float, sampled, both signs (its own digits for
     * [1e-10, 1e9), printf's for the rest), and every float near each power of ten */
    char want[64];
    for (uint64_t u = 0; u <= 0x7f800001u; u += 8191) {
        for (uint32_t sign = 0; sign <= 1; sign++) {
            uint32_t w = (uint32_t)u | sign << 31;
            float x;
            memcpy(&x, &w, sizeof x);
            b.len = 0;
            cls_json_number(&b, x);
            snprintf(want, sizeof want, "%.9g", (double)x);
            CHECK(strcmp(b.s, want) == 0, "%a: %s, printf %s", (double)x, b.s, want);
        }
        if (failures > 10) break;
    }
    for (int e10 = -11; e10 <= 10; e10++) {
        float c = (float)pow(10, e10);
        uint32_t w0;
        memcpy(&w0, &c, sizeof w0);
        for (uint32_t w = w0 - 3000; w <= w0 + 3000 && failures <= 10; w++) {
            float x;
            memcpy(&x, &w, sizeof x);
            b.len = 0;
            cls_json_number(&b, x);
            snprintf(want, sizeof want, "%.9g", (double)x);
            CHECK(strcmp(b.s, want) == 0, "%a: %s, printf %s", (double)x, b.s, want);
        }
    }

    const char *labels[3] = {"plain", "say \"hi\"\n", "caf\xc3\xa9"};
    const float lg[3] = {0, 0, 0};
    cls_result_t r;
    cls_score(lg, 3, 5, &r);
    b.len = 0;
    cls_json_top_k(&b, &r, labels);
    check_text(
        &b,
        "[{\"label\": \"plain\", \"p\": 0.333333343}, {\"label\": \"say \\\"hi\\\"\\u000a\", "
        "\"p\": 0.333333343}, {\"label\": \"caf\xc3\xa9\", \"p\": 0.333333343}]",
        "top_k");
    cls_score(lg, 3, 1, &r);
    b.len = 0;
    cls_json_line(&b, &r, labels, 7, 1, lg, 3);
    check_text(&b,
               "{\"label\": \"plain\", \"confidence\": 0.333333343, \"top_k\": [{\"label\": "
               "\"plain\", \"p\": 0.333333343}], \"tokens\": 7, \"truncated\": true, \"logits\": "
               "[0, 0, 0]}\n",
               "line");
    b.len = 0;
    cls_json_line(&b, &r, labels, 2, 0, NULL, 3);
    check_text(&b,
               "{\"label\": \"plain\", \"confidence\": 0.333333343, \"top_k\": [{\"label\": "
               "\"plain\", \"p\": 0.333333343}], \"tokens\": 2, \"truncated\": false}\n",
               "line without logits");
    cls_buf_free(&b);
}

int main(void) {
    test_softmax();
    test_ties_and_k();
    test_order_reference();
    test_json();
    if (failures) {
        printf("%d failure(s)\n", failures);
        return 1;
    }
    printf("PASS\n");
    return 0;
}
