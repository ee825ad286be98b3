/* Sink throughput: writes --rows result rows in transactions of --group rows (plus one
 * batches row per 64 tickets, as the worker would) and prints rows/s. Without --db it starts
 * a throwaway PostgreSQL with tests/lib/pg_tmp.sh, migrates it, and stops it at the end.
 *   sink_bench [--rows 500000] [--group 5000] [--jobs 20] [--db URL] [--redeliver] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sink/sink.h"
#include "sink/sink_stats.h"

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static char pgdir[256];

static void pg_stop(void) {
    if (!pgdir[0]) return;
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "bash '%s/tests/lib/pg_tmp.sh' stop '%s/pg'; rm -rf '%s'",
             RECLASS_SOURCE_DIR, pgdir, pgdir);
    if (system(cmd) != 0) fprintf(stderr, "sink_bench: stopping %s failed\n", pgdir);
    pgdir[0] = 0;
}

static int pg_start(char *url, size_t urllen) {
    snprintf(pgdir, sizeof pgdir, "/tmp/reclass-sink-bench.XXXXXX");
    if (!mkdtemp(pgdir)) {
        pgdir[0] = 0;
        return -1;
    }
    atexit(pg_stop);
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "bash '%s/tests/lib/pg_tmp.sh' start '%s/pg'", RECLASS_SOURCE_DIR,
             pgdir);
    FILE *p = popen(cmd, "r");
    if (!p) return -1;
    int ok = fgets(url, (int)urllen, p) != NULL;
    if (pclose(p) != 0 || !ok) return -1;
    url[strcspn(url, "\n")] = 0;
    return 0;
}

int main(int argc, char **argv) {
    long n_rows = 500000;
    int group = 5000, n_jobs = 20, redeliver = 0;
    const char *db = NULL;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--rows") == 0 && i + 1 < argc)
            n_rows = atol(argv[++i]);
        else if (strcmp(argv[i], "--group") == 0 && i + 1 < argc)
            group = atoi(argv[++i]);
        else if (strcmp(argv[i], "--jobs") == 0 && i + 1 < argc)
            n_jobs = atoi(argv[++i]);
        else if (strcmp(argv[i], "--db") == 0 && i + 1 < argc)
            db = argv[++i];
        else if (strcmp(argv[i], "--redeliver") == 0)
            redeliver = 1;
        else {
            fprintf(stderr, "usage: sink_bench [--rows N] [--group N] [--jobs N] [--db URL]"
                            " [--redeliver]\n");
            return 2;
        }
    }
    if (n_rows < 1 || group < 1 || n_jobs < 1) {
        fprintf(stderr, "sink_bench: --rows, --group and --jobs must be positive\n");
        return 2;
    }
    char url[512];
    if (!db) {
        if (pg_start(url, sizeof url) != 0) {
            fprintf(stderr, "sink_bench: could not start a throwaway PostgreSQL\n");
            return 1;
        }
        db = url;
    }
    char err[1024];
    int applied = 0;
    if (sink_migrate(db, RECLASS_SOURCE_DIR "/migrations", &applied, err, sizeof err) != SINK_OK) {
        fprintf(stderr, "sink_bench: migrate: %s\n", err);
        return 1;
    }
    sink_t *s = NULL;
    if (sink_init(db, "clinc150-bert-mini", &s, err, sizeof err) != SINK_OK) {
        fprintf(stderr, "sink_bench: %s\n", err);
        return 1;
    }
    sink_result_t *rows = calloc((size_t)group, sizeof(*rows)); // (group)
    char(*tids)[24] = calloc((size_t)group, sizeof(*tids));     // (group) ticket ids
    char(*jobs)[32] = calloc((size_t)n_jobs, sizeof(*jobs));    // (n_jobs) job ids
    char labels[150][24];
    char topk[150][160];
    int n_batch_rows = (group + 63) / 64;
    sink_batch_t *batches = calloc((size_t)n_batch_rows, sizeof(*batches)); // (n_batch_rows)
    if (!rows || !tids || !jobs || !batches) {
        fprintf(stderr, "sink_bench: out of memory\n");
        return 1;
    }
    for (int j = 0; j < n_jobs; j++)
        snprintf(jobs[j], sizeof jobs[j], "bulk-2026-11-29-%03d", j);
    for (int l = 0; l < 150; l++) {
        snprintf(labels[l], sizeof labels[l], "intent_%03d", l);
        snprintf(topk[l], sizeof topk[l],
                 "[{\"label\":\"intent_%03d\",\"p\":0.91},{\"label\":\"intent_%03d\",\"p\":0.05},"
                 "{\"label\":\"intent_%03d\",\"p\":0.01}]",
                 l, (l + 1) % 150, (l + 2) % 150);
    }
    int32_t per_job = (int32_t)((n_rows + n_jobs - 1) / n_jobs);
    double t0 = now_s(), slowest = 0;
    long written = 0, inserted = 0;
    int passes = redeliver ? 2 : 1;
    for (int pass = 0; pass < passes; pass++) {
        if (pass == 1) { /* second pass: every row is a redelivery (update path) */
            t0 = now_s();
            written = inserted = 0;
        }
        for (long base = 0; base < n_rows; base += group) {
            int n = (int)(n_rows - base < group ? n_rows - base : group);
            for (int i = 0; i < n; i++) {
                long k = base + i;
                int l = (int)(k * 7919 % 150);
                snprintf(tids[i], sizeof tids[i], "T-%09ld", k);
                rows[i] = (sink_result_t){.job_id = jobs[k % n_jobs],
                                          .tenant = "tenant-42",
                                          .ticket_id = tids[i],
                                          .job_total = per_job,
                                          .label = labels[l],
                                          .label_id = l,
                                          .confidence = 0.91f,
                                          .top_k_json = topk[l],
                                          .tokens = 16 + (int)(k % 100),
                                          .truncated = 0,
                                          .partition = (int32_t)(k % 12),
                                          .offset = k / 12,
                                          .enqueued_at_ms = 1795000000000LL + k};
            }
            int nb = (n + 63) / 64;
            for (int b = 0; b < nb; b++)
                batches[b] = (sink_batch_t){.tickets = 64,
                                            .real_tokens = 64 * 60,
                                            .padded_tokens = 64 * 66,
                                            .wait_ms = 12.5,
                                            .compute_ms = 8.25,
                                            .backend = "cpu",
                                            .arena_bytes = 1 << 24};
            double w0 = now_s();
            int rc = sink_write(s, rows, n, batches, nb, err, sizeof err);
            double w = now_s() - w0;
            if (rc != SINK_OK) {
                fprintf(stderr, "sink_bench: write at row %ld: %s\n", base, err);
                return 1;
            }
            if (w > slowest) slowest = w;
            written += n;
            inserted += sink_last_inserted(s);
        }
    }
    double dt = now_s() - t0;
    printf("sink_bench: %ld rows (%ld new) in %.2f s, groups of %d, %d jobs%s: %.0f rows/s,"
           " slowest transaction %.1f ms\n",
           written, inserted, dt, group, n_jobs, redeliver ? ", all redeliveries" : "",
           (double)written / dt, slowest * 1e3);
    sink_free(s);
    free(rows);
    free(tids);
    free(jobs);
    free(batches);
    return 0;
}
