/* Sink throughput: writes --rows result rows in transactions of --group rows (plus one
 * batches row per 64 tickets, as the worker would) and prints rows/s, with the server's and
 * the client's CPU time per row (the machine is shared, so wall time alone says little).
 * Without --db it starts a throwaway PostgreSQL with tests/lib/pg_tmp.sh, migrates it, and
 * stops it at the end. --writers N runs N sinks (connections) in parallel on disjoint tickets
 * of the same jobs, as N workers would. --redeliver writes everything twice and times the
 * second pass (every row already stored: the upsert path).
 *   sink_bench [--rows 500000] [--group 5000] [--jobs 20] [--writers 1] [--db URL]
 *              [--redeliver] */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include <libpq-fe.h>

#include "sink/migrate.h"
#include "sink/sink.h"
#include "tests/lib/sink_stats.h"

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

/* utime + stime of a local process in seconds; -1 when /proc cannot tell (remote server). */
static double proc_cpu_s(int pid) {
    char path[64], buf[1024];
    snprintf(path, sizeof path, "/proc/%d/stat", pid);
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    char *p = strrchr(buf, ')'); /* the command name may contain spaces */
    unsigned long ut = 0, st = 0;
    if (!p || sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu", &ut, &st) != 2)
        return -1;
    return (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
}

/* Server CPU of every reclass-sink-bench backend (the sinks' connections). */
static double server_cpu_s(PGconn *side) {
    PGresult *res = PQexec(side, "SELECT pid FROM pg_stat_activity"
                                 " WHERE application_name = 'reclass-sink-bench'");
    double sum = 0;
    for (int i = 0; PQresultStatus(res) == PGRES_TUPLES_OK && i < PQntuples(res); i++) {
        double c = proc_cpu_s(atoi(PQgetvalue(res, i, 0)));
        if (c < 0) {
            sum = -1;
            break;
        }
        sum += c;
    }
    PQclear(res);
    return sum;
}

typedef struct {
    const char *db;
    long first, last; /* tickets [first, last) */
    int group, n_jobs, passes;
    int32_t per_job;
    char (*jobs)[32];
    sink_t *sink;
    long written, inserted;
    double slowest;
    pthread_barrier_t *start;
    int rc;
    common_err_t e;
} writer_t;

static char labels[150][24];
static char topk[150][160];

static void *writer_run(void *p) {
    writer_t *w = p;
    sink_result_t *rows = calloc((size_t)w->group, sizeof(*rows)); // (group)
    char(*tids)[24] = calloc((size_t)w->group, sizeof(*tids));     // (group) ticket ids
    int n_batch_rows = (w->group + 63) / 64;
    sink_batch_t *batches = calloc((size_t)n_batch_rows, sizeof(*batches)); // (n_batch_rows)
    pthread_barrier_wait(w->start);
    if (!rows || !tids || !batches) {
        w->rc = common_err_set(&w->e, COMMON_FATAL, "out of memory");
    }
    for (int pass = 0; pass < w->passes && w->rc == COMMON_OK; pass++) {
        if (pass == 1) pthread_barrier_wait(w->start); /* main thread restarts the clock */
        w->written = w->inserted = 0;
        w->slowest = 0;
        for (long base = w->first; base < w->last && w->rc == COMMON_OK; base += w->group) {
            int n = (int)(w->last - base < w->group ? w->last - base : w->group);
            for (int i = 0; i < n; i++) {
                long k = base + i;
                int l = (int)(k * 7919 % 150);
                snprintf(tids[i], sizeof tids[i], "T-%09ld", k);
                rows[i] = (sink_result_t){.job_id = w->jobs[k % w->n_jobs],
                                          .tenant = "tenant-42",
                                          .ticket_id = tids[i],
                                          .job_total = w->per_job,
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
                                            .arena_bytes = 1 << 24,
                                            .device = -1, /* as a cpu worker's */
                                            .worker = "bench:1"};
            double t0 = now_s();
            w->rc = sink_write(w->sink, rows, n, batches, nb, &w->e);
            double dt = now_s() - t0;
            if (dt > w->slowest) w->slowest = dt;
            w->written += n;
            w->inserted += sink_last_inserted(w->sink);
        }
        if (w->passes == 2 && pass == 0) pthread_barrier_wait(w->start); /* pass 1 done */
    }
    free(rows);
    free(tids);
    free(batches);
    return NULL;
}

int main(int argc, char **argv) {
    long n_rows = 500000;
    int group = 5000, n_jobs = 20, n_writers = 1, redeliver = 0;
    const char *db = NULL;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--rows") == 0 && i + 1 < argc)
            n_rows = atol(argv[++i]);
        else if (strcmp(argv[i], "--group") == 0 && i + 1 < argc)
            group = atoi(argv[++i]);
        else if (strcmp(argv[i], "--jobs") == 0 && i + 1 < argc)
            n_jobs = atoi(argv[++i]);
        else if (strcmp(argv[i], "--writers") == 0 && i + 1 < argc)
            n_writers = atoi(argv[++i]);
        else if (strcmp(argv[i], "--db") == 0 && i + 1 < argc)
            db = argv[++i];
        else if (strcmp(argv[i], "--redeliver") == 0)
            redeliver = 1;
        else {
            fprintf(stderr, "usage: sink_bench [--rows N] [--group N] [--jobs N] [--writers N]"
                            " [--db URL] [--redeliver]\n");
            return 2;
        }
    }
    if (n_rows < 1 || group < 1 || n_jobs < 1 || n_writers < 1 || n_writers > 64) {
        fprintf(stderr, "sink_bench: --rows, --group, --jobs must be positive, --writers 1..64\n");
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
    common_err_t e;
    int applied = 0;
    if (sink_migrate_ex(db, RECLASS_SOURCE_DIR "/migrations", NULL, &applied, &e) != COMMON_OK) {
        fprintf(stderr, "sink_bench: migrate: %s\n", e.message);
        return 1;
    }
    /* the sinks name themselves so their backends can be found for CPU accounting */
    char sink_db[1024];
    snprintf(sink_db, sizeof sink_db, "%s%sapplication_name=reclass-sink-bench", db,
             strstr(db, "://") ? (strchr(db, '?') ? "&" : "?") : " ");
    PGconn *side = PQconnectdb(db);
    if (PQstatus(side) != CONNECTION_OK) {
        fprintf(stderr, "sink_bench: %s", PQerrorMessage(side));
        return 1;
    }
    for (int l = 0; l < 150; l++) {
        snprintf(labels[l], sizeof labels[l], "intent_%03d", l);
        snprintf(topk[l], sizeof topk[l],
                 "[{\"label\":\"intent_%03d\",\"p\":0.91},{\"label\":\"intent_%03d\",\"p\":0.05},"
                 "{\"label\":\"intent_%03d\",\"p\":0.01}]",
                 l, (l + 1) % 150, (l + 2) % 150);
    }
    char(*jobs)[32] = calloc((size_t)n_jobs, sizeof(*jobs)); // (n_jobs) job ids
    writer_t *ws = calloc((size_t)n_writers, sizeof(*ws));   // (n_writers)
    pthread_t *th = calloc((size_t)n_writers, sizeof(*th));  // (n_writers)
    if (!jobs || !ws || !th) return 1;
    for (int j = 0; j < n_jobs; j++)
        snprintf(jobs[j], sizeof jobs[j], "bulk-2026-11-29-%03d", j);
    pthread_barrier_t start;
    pthread_barrier_init(&start, NULL, (unsigned)n_writers + 1);
    long per_writer = (n_rows + n_writers - 1) / n_writers;
    for (int i = 0; i < n_writers; i++) {
        writer_t *w = &ws[i];
        *w = (writer_t){.db = sink_db,
                        .first = i * per_writer,
                        .last = (i + 1) * per_writer < n_rows ? (i + 1) * per_writer : n_rows,
                        .group = group,
                        .n_jobs = n_jobs,
                        .passes = redeliver ? 2 : 1,
                        .per_job = (int32_t)((n_rows + n_jobs - 1) / n_jobs),
                        .jobs = jobs,
                        .start = &start};
        if (sink_init(sink_db, "clinc150-bert-mini", &w->sink, &e) != COMMON_OK) {
            fprintf(stderr, "sink_bench: %s\n", e.message);
            return 1;
        }
        pthread_create(&th[i], NULL, writer_run, w);
    }
    fprintf(stderr, "sink_bench: %ld rows into %s\n", n_rows, db);
    struct rusage ru0, ru1;
    pthread_barrier_wait(&start);
    if (redeliver) pthread_barrier_wait(&start); /* first pass done: time the second */
    if (redeliver) pthread_barrier_wait(&start);
    double t0 = now_s(), srv0 = server_cpu_s(side);
    getrusage(RUSAGE_SELF, &ru0);
    for (int i = 0; i < n_writers; i++)
        pthread_join(th[i], NULL);
    double dt = now_s() - t0, srv = server_cpu_s(side) - srv0;
    getrusage(RUSAGE_SELF, &ru1);
    double cli = (double)(ru1.ru_utime.tv_sec - ru0.ru_utime.tv_sec) +
                 (double)(ru1.ru_utime.tv_usec - ru0.ru_utime.tv_usec) * 1e-6 +
                 (double)(ru1.ru_stime.tv_sec - ru0.ru_stime.tv_sec) +
                 (double)(ru1.ru_stime.tv_usec - ru0.ru_stime.tv_usec) * 1e-6;
    long written = 0, inserted = 0, fallbacks = 0;
    double slowest = 0;
    int rc = 0;
    for (int i = 0; i < n_writers; i++) {
        if (ws[i].rc != COMMON_OK) {
            fprintf(stderr, "sink_bench: writer %d: %s\n", i, ws[i].e.message);
            rc = 1;
        }
        written += ws[i].written;
        inserted += ws[i].inserted;
        fallbacks += sink_fallbacks(ws[i].sink);
        if (ws[i].slowest > slowest) slowest = ws[i].slowest;
        sink_free(ws[i].sink);
    }
    PGresult *res = PQexec(side, "SELECT sum(done), count(*) FILTER (WHERE completed_at IS NOT"
                                 " NULL), (SELECT count(*) FROM ticket_results) FROM jobs");
    printf("sink_bench: %ld rows (%ld new, %ld fallbacks) in %.2f s, groups of %d, %d jobs,"
           " %d writer(s)%s: %.0f rows/s; server CPU %.2f us/row (%.0f rows per server"
           " CPU-second), client CPU %.2f us/row; slowest transaction %.1f ms\n",
           written, inserted, fallbacks, dt, group, n_jobs, n_writers,
           redeliver ? ", second pass (all redeliveries)" : "", (double)written / dt,
           srv >= 0 ? srv * 1e6 / (double)written : -1, srv > 0 ? (double)written / srv : -1,
           cli * 1e6 / (double)written, slowest * 1e3);
    char load[64] = "?";
    FILE *lf = fopen("/proc/loadavg", "r");
    if (lf) {
        if (!fgets(load, sizeof load, lf)) snprintf(load, sizeof load, "?");
        fclose(lf);
        load[strcspn(load, " ")] = 0; /* 1-minute figure */
    }
    printf("sink_bench: machine load average (1 min) at the end: %s on %ld CPUs\n", load,
           sysconf(_SC_NPROCESSORS_ONLN));
    if (PQresultStatus(res) == PGRES_TUPLES_OK)
        printf("sink_bench: check: jobs.done sum %s, %s/%d jobs complete, %s ticket_results rows\n",
               PQgetvalue(res, 0, 0), PQgetvalue(res, 0, 1), n_jobs, PQgetvalue(res, 0, 2));
    PQclear(res);
    PQfinish(side);
    pthread_barrier_destroy(&start);
    free(jobs);
    free(ws);
    free(th);
    return rc;
}
