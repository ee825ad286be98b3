/* An urgent lane's way past a bulk backlog through the whole pipeline, in-process against the
 * embedded Kafka and a throwaway PostgreSQL (tests/lib/pipe_mock.h), ordered, not timed.
 *
 * The result writer is stalled (the test holds a lock on its table batches) while a bulk backlog
 * fills the sink queue and the encoder waits for room; then an urgent job arrives. Its batch is
 * queued for the sink at once, ahead of every bulk batch queued (encode.c: an urgent batch is
 * published as soon as it has run, not kept in flight behind the next one, and goes first in
 * the queue), so once the lock goes, the urgent rows are the next transaction after the one
 * that was stalled: no other bulk transaction commits before them. Transactions are told apart
 * by the rows' xmin (one writer: its transactions' ids rise in the order they wrote). The
 * CPU backend runs a batch inside its submit, so the bulk batches hold half of the budget (an
 * urgent record waits for half a batch at most); only urgent batches are larger. The
 * second test does the same with the accumulator and the tenant's cap filled by the bulk
 * backlog too (the urgent records must still get in). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <libpq-fe.h>
#include <pthread.h>
#include <stdatomic.h>

#include "tests/lib/pipe_mock.h"
#include "worker/observe/metrics.h"
#include "worker/pipeline/pipeline.h"

#define BULK      1500 /* within the accumulator's bounds set below: all read at once */
#define URGENT    50
#define SINK_ROWS 150 /* a transaction; the queue holds two (one writer) */

/* Tickets of a lane queued for the sink so far (reclass_ticket_wait_seconds, stage encode). */
static long queued_of_lane(int lane) {
    worker_metrics_info_t info = {"", "", "", ""};
    char *text = worker_metrics_render(&worker_metrics, &info, 0);
    assert_non_null(text);
    char key[96];
    snprintf(key, sizeof(key), "reclass_ticket_wait_seconds_count{lane=\"%d\",stage=\"encode\"} ",
             lane);
    const char *at = strstr(text, key);
    long n = at ? atol(at + strlen(key)) : 0;
    free(text);
    return n;
}

/* Waits until lane has at least n tickets queued for the sink; 0, or -1 after limit_s. The
 * limit only ends a wait that would never end (the test then fails on the order below). */
static int wait_queued(int lane, long n, int limit_s) {
    for (int i = 0; i < limit_s * 10; i++) {
        if (queued_of_lane(lane) >= n) return 0;
        usleep(100000);
    }
    return -1;
}

typedef struct {
    worker_run_cfg_t cfg;
    common_err_t e;
    int rc;
} worker_t;

static void *run_thread(void *arg) {
    worker_t *w = arg;
    w->rc = worker_pipeline_run(&w->cfg, &w->e);
    return NULL;
}

static void exec_ok(PGconn *c, const char *sql) {
    PGresult *r = PQexec(c, sql);
    assert_int_equal(PQresultStatus(r), PGRES_COMMAND_OK);
    PQclear(r);
}

/* A worker of group on two lanes (--topic urgent:0,bulk:1) writing through one connection in
 * transactions of SINK_ROWS rows, so that a stalled writer holds everything behind it. */
static void two_lane_worker(worker_t *w, const char *urgent, const char *bulk, const char *group) {
    cfg_for(&w->cfg, urgent, group, 4);
    w->cfg.topics[0] = urgent;
    w->cfg.topic_prio[0] = 0;
    w->cfg.topics[1] = bulk;
    w->cfg.topic_prio[1] = 1;
    w->cfg.n_topics = 2;
    w->cfg.sink_rows = SINK_ROWS;
    w->cfg.sink_connections = 1;
}

static void test_urgent_passes_the_sink_queue(void **state) {
    (void)state;
    topic_create("t4");
    topic_create("t4u");
    produce_tenant("t4", "job-bulk", "bulk", 0, BULK, BULK);
    worker_metrics_wait_reset();
    char first_batch[32]; /* the batches telemetry rows of this test follow it */
    snprintf(first_batch, sizeof(first_batch), "%ld",
             db_long("SELECT coalesce(max(id), 0) FROM batches", NULL));
    PGconn *lock = PQconnectdb(db_url);
    assert_int_equal(PQstatus(lock), CONNECTION_OK);
    exec_ok(lock, "BEGIN");
    /* a write stores its rows, then its batches' telemetry (sink/sink.c): it waits there with
     * its rows stored, uncommitted; the sink's set-up (statements prepared on ticket_results)
     * goes through */
    exec_ok(lock, "LOCK TABLE batches IN SHARE MODE");

    static worker_t w;
    two_lane_worker(&w, "t4u", "t4", "g4");
    /* urgent batches of a few dozen tickets; the CPU backend runs a batch inside its submit, so
     * with an urgent lane a bulk batch holds half of the budget (worker/pipeline/fair.c:
     * plain_budget_of), no less than the longest ticket (CLINC150's fit in 128 tokens) */
    w.cfg.cls.token_budget = 512;
    w.cfg.cls.max_len = 128;
    /* room for the whole backlog: the urgent tickets are pushed beside it, not after it */
    w.cfg.cls.max_pending = 4096;
    w.cfg.cls.max_pending_tokens = 1 << 20;
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, run_thread, &w), 0);

    /* the first transaction waits for the lock; the queue behind it fills (two transactions'
     * worth) and the encoder waits for room: from here at least one whole bulk transaction
     * is queued behind the stalled one */
    assert_int_equal(wait_queued(1, 2 * SINK_ROWS, 120), 0);
    produce_tenant("t4u", "job-urgent", "urgent", 0, URGENT, URGENT);
    int published = wait_queued(0, URGENT, 60);
    fprintf(stderr, "urgent tickets queued for the sink while it was stalled: %ld of %d\n",
            queued_of_lane(0), URGENT);
    exec_ok(lock, "COMMIT");
    PQfinish(lock);
    pthread_join(th, NULL);
    assert_int_equal(w.rc, 0);

    assert_int_equal(db_long("SELECT count(*) FROM ticket_results WHERE job_id=$1", "job-bulk"),
                     BULK);
    assert_int_equal(db_long("SELECT count(*) FROM ticket_results WHERE job_id=$1", "job-urgent"),
                     URGENT);
    assert_int_equal(group_lag("t4", "g4"), 0);
    assert_int_equal(group_lag("t4u", "g4"), 0);
    /* the urgent rows in one transaction of their own, and before it only the one that was
     * stalled */
    assert_int_equal(db_long("SELECT count(DISTINCT xmin::text) FROM ticket_results WHERE "
                             "job_id=$1",
                             "job-urgent"),
                     1);
    assert_int_equal(db_long("SELECT count(*) FROM ticket_results WHERE job_id = 'job-bulk' AND "
                             "xmin::text IN (SELECT xmin::text FROM ticket_results WHERE job_id = "
                             "$1)",
                             "job-urgent"),
                     0);
    long before = db_long("SELECT count(DISTINCT xmin::text) FROM ticket_results WHERE job_id = "
                          "'job-bulk' AND xmin::text::bigint < (SELECT min(xmin::text::bigint) "
                          "FROM ticket_results WHERE job_id = $1)",
                          "job-urgent");
    fprintf(stderr, "bulk transactions committed before the urgent one: %ld\n", before);
    assert_int_equal(published, 0);
    assert_int_equal(before, 1);
    /* every batch over half of the budget was an urgent one */
    assert_int_equal(
        db_long("SELECT coalesce(sum(tickets), 0) FROM batches WHERE id > $1::bigint", first_batch),
        BULK + URGENT);
    long over = db_long("SELECT coalesce(sum(tickets), 0) FROM batches WHERE id > $1::bigint AND "
                        "real_tokens > 512 / 2",
                        first_batch);
    fprintf(stderr, "tickets in batches over half of the budget: %ld\n", over);
    assert_true(over <= URGENT);
}

/* The accumulator's pending tickets once they stop changing (the poll thread publishes them
 * every turn): with the writer stalled nothing leaves it, so this is the backlog's fill. The
 * limit only ends a wait that would never end. */
static long settled_pending(int limit_s) {
    long last = -1;
    for (int same = 0, i = 0; same < 10 && i < limit_s * 10; i++) {
        long now = atomic_load(&worker_metrics.pending_items);
        same = now == last ? same + 1 : 0;
        last = now;
        usleep(100000);
    }
    return last;
}

/* The same stall, and behind it a bulk backlog that fills what it may of the accumulator and its
 * tenant's cap (the cap set to the whole bound: the one tenant reaches both at once); then an
 * urgent job of the same tenant arrives. It must enter the accumulator, be batched and queued
 * for the writer while the writer is still stalled, and commit in the next transaction: the
 * bulk lane leaves room to the more urgent ones (worker/pipeline/fair.h: Admission). Without
 * that room the urgent records wait for a bulk batch to leave the accumulator, which waits for
 * the writer: not before the bulk backlog ahead of them is written. */
static void test_urgent_enters_a_full_accumulator(void **state) {
    (void)state;
    topic_create("t5");
    topic_create("t5u");
    produce_tenant("t5", "job-bulk5", "acme", 0, BULK, BULK);
    worker_metrics_wait_reset();
    PGconn *lock = PQconnectdb(db_url);
    assert_int_equal(PQstatus(lock), CONNECTION_OK);
    exec_ok(lock, "BEGIN");
    exec_ok(lock, "LOCK TABLE batches IN SHARE MODE");

    static worker_t w;
    two_lane_worker(&w, "t5u", "t5", "g5");
    w.cfg.cls.token_budget = 512;
    /* far below the backlog: it fills the accumulator and the tenant's cap */
    w.cfg.cls.max_pending = 256;
    w.cfg.cls.max_pending_tokens = 8 * 512;
    w.cfg.tenant_max_tokens = 8 * 512;
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, run_thread, &w), 0);

    assert_int_equal(wait_queued(1, 2 * SINK_ROWS, 120), 0);
    long pending = settled_pending(60);
    fprintf(stderr, "bulk tickets held in the accumulator behind the stalled writer: %ld\n",
            pending);
    assert_true(pending > 0);
    assert_true(queued_of_lane(1) < BULK - pending); /* more bulk waits to be read */
    produce_tenant("t5u", "job-urgent5", "acme", 0, URGENT, URGENT);
    int published = wait_queued(0, URGENT, 60);
    fprintf(stderr, "urgent tickets queued for the sink while it was stalled: %ld of %d\n",
            queued_of_lane(0), URGENT);
    exec_ok(lock, "COMMIT");
    PQfinish(lock);
    pthread_join(th, NULL);
    assert_int_equal(w.rc, 0);

    assert_int_equal(db_long("SELECT count(*) FROM ticket_results WHERE job_id=$1", "job-bulk5"),
                     BULK);
    assert_int_equal(db_long("SELECT count(*) FROM ticket_results WHERE job_id=$1", "job-urgent5"),
                     URGENT);
    assert_int_equal(group_lag("t5", "g5"), 0);
    assert_int_equal(group_lag("t5u", "g5"), 0);
    long before = db_long("SELECT count(DISTINCT xmin::text) FROM ticket_results WHERE job_id = "
                          "'job-bulk5' AND xmin::text::bigint < (SELECT min(xmin::text::bigint) "
                          "FROM ticket_results WHERE job_id = $1)",
                          "job-urgent5");
    fprintf(stderr, "bulk transactions committed before the urgent one: %ld\n", before);
    assert_int_equal(published, 0);
    assert_int_equal(before, 1);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_urgent_passes_the_sink_queue),
        cmocka_unit_test(test_urgent_enters_a_full_accumulator),
    };
    return cmocka_run_group_tests(tests, pipe_setup, pipe_teardown);
}
