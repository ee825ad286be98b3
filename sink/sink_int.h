/* Internal to sink/: the sink's state, shared by sink/sink.c (one write = one transaction) and
 * sink/isolate.c (the rows PostgreSQL refuses for their data, found by splitting a write). */
#ifndef RECLASS_SINK_INT_H
#define RECLASS_SINK_INT_H

#include <libpq-fe.h>

#include "sink/copybuf.h"
#include "sink/sink.h"
#include "sink/tally.h"

/* COMMON_DATA is sink_write_once's answer when the rows (not the connection, not the server)
 * were refused: SQLSTATE class 22 (data exception), 23 (integrity constraint violation) or 54
 * (program limit exceeded), in the rows, jobs or COMMIT step. Never returned by the public
 * functions. */

struct sink {
    PGconn *conn;
    char *conninfo;              /* owned copy: reconnect after a failed PQreset starts from it */
    char *model;                 /* owned; recorded in every result row */
    sink_copybuf_t copy;         /* one chunk of binary COPY data; reused across writes */
    sink_copybuf_t params;       /* the jobs statement's array parameters; reused */
    size_t params_ids_len;       /* bytes of its first array (job ids) at its start */
    sink_tally_t tally;          /* the write's jobs */
    const sink_result_t *rows;   /* the write in progress (the caller's) */
    const sink_batch_t *batches; /* idem */
    char copy_sql[512];          /* the fast path's COPY, naming its target */
    long last_inserted;
    long last_rows;
    char writer[320]; /* host:pid:n, this sink's key in job_progress */
    int upsert_mode;  /* 1 after a redelivery: skip the fast path (see the top comment) */
    long fallbacks;   /* writes whose fast path met an already-stored ticket */
    /* the failed statement of the last write_once: its SQLSTATE and constraint ("" if none) */
    char fail_state[6];
    char fail_constraint[64];
    sink_reject_t *rejects; /* (n_rejects) rows of the last sink_write left out; cap grows */
    int n_rejects, rejects_cap;
    sink_result_t *work; /* (work_cap) sink/isolate.c: the rows still to be tried */
    int *work_row;       /* (work_cap) each one's index in the caller's rows */
    int work_cap;
};

/* Notes a failed statement's SQLSTATE and constraint in s (fail_state, fail_constraint), then
 * answers as sink_pg_fail does. */
common_status_t sink_fail(sink_t *s, PGresult *res, const char *step, common_err_t *e);

/* sink/progress.c, sink/commit.c: the statements, prepared per session by sink.c under these
 * names */
#define SINK_STMT_JOBS     "reclass_jobs"
#define SINK_STMT_COMPLETE "reclass_complete"
#define SINK_STMT_FAILURE  "reclass_failure"
extern const char sink_sql_jobs[], sink_sql_complete[];
extern const char sink_sql_failure[]; /* sink/failures.c */
/* Queue on the connection's pipeline (results read by sink/commit.c): the tally's new tickets
 * per job added to this writer's progress (the job ids stay in s->params for the next call),
 * and after COMMIT the completed_at stamp of the write's jobs whose summed progress reached
 * total. */
common_status_t sink_progress_send(sink_t *s, common_err_t *e);
common_status_t sink_progress_complete_send(sink_t *s, common_err_t *e);
/* The end of a write whose rows are stored in the open transaction: progress (n_rows > 0),
 * batches [0, n_batches) from s->batches, COMMIT and completion in one round trip (s->copy is
 * reused). COMMON_OK once committed and stamped; else as sink_write_once, the transaction left
 * open or rolled back for the caller's ROLLBACK. */
common_status_t sink_commit_pipelined(sink_t *s, int n_rows, int n_batches, common_err_t *e);

/* One transaction: rows [0, n_rows) and the batches. COMMON_OK once committed, COMMON_DATA when
 * the rows were refused (fail_state says why, e says it in words; nothing is stored), else
 * COMMON_RETRY / COMMON_FATAL. The transaction is rolled back on any failure. */
common_status_t sink_write_once(sink_t *s, const sink_result_t *rows, int n_rows,
                                const sink_batch_t *batches, int n_batches, common_err_t *e);

/* After sink_write_once answered COMMON_DATA for rows [0, n): stores every row PostgreSQL takes
 * (in transactions of their own) and lists the others in s->rejects. COMMON_OK, or the first
 * COMMON_RETRY / COMMON_FATAL (the caller retries the whole write: stored rows are upserted
 * again, never counted twice). */
common_status_t sink_isolate(sink_t *s, const sink_result_t *rows, int n, common_err_t *e);

#endif
