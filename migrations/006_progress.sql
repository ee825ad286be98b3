-- Job progress without a hot row. Each result write used to add its new tickets to its job's
-- one row in jobs, so every worker on a job queued behind that row's lock at every commit.
-- Now each writer (one sink connection of one worker, sink/sink.c) adds to its own counter
-- in job_progress, which no other writer touches; job_info keeps what is said once about a
-- job (tenant, total, first seen, completed); the jobs view sums the counters, so readers
-- see the columns jobs always had.
--
-- completed_at is set by a statement each writer runs after its COMMIT (UPDATE ... WHERE
-- completed_at IS NULL AND the sum reached total): the writer that commits last sees every
-- count, the row lock and the re-checked condition let only one stamp it, and a writer killed
-- between its COMMIT and that statement has not stored its offsets yet, so whoever re-reads
-- those records runs the check again.
ALTER TABLE jobs RENAME TO job_info;

-- 005's owner check claims new jobs by inserting their row: into the table, now job_info (a
-- trigger function names its tables by name, at each call)
CREATE OR REPLACE FUNCTION reclass_results_owner_check() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    bad text;
BEGIN
    INSERT INTO job_info (job_id, tenant, total)
    SELECT DISTINCT ON (job_id) job_id, tenant, 0 FROM new_rows ORDER BY job_id
    ON CONFLICT (job_id) DO NOTHING;
    SELECT n.job_id INTO bad FROM new_rows n JOIN job_info j USING (job_id)
    WHERE j.tenant IS NOT NULL AND n.tenant IS DISTINCT FROM j.tenant LIMIT 1;
    IF bad IS NOT NULL THEN
        RAISE EXCEPTION 'job % belongs to another tenant', bad
            USING ERRCODE = 'integrity_constraint_violation',
                  CONSTRAINT = 'ticket_results_job_owner';
    END IF;
    RETURN NULL;
END $$;

CREATE TABLE job_progress (
    job_id     text COLLATE "C" NOT NULL,
    writer     text NOT NULL, -- host:pid:n of the sink connection that counts here
    done       bigint NOT NULL DEFAULT 0,
    updated_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (job_id, writer)
);

-- what was counted before this migration stays counted
INSERT INTO job_progress (job_id, writer, done, updated_at)
SELECT job_id, 'before 006_progress', done, updated_at FROM job_info WHERE done > 0;

-- (drops 005's jobs_done_within_total with the column: job_progress_guard keeps its promise)
ALTER TABLE job_info DROP COLUMN done;

-- done never exceeds total: the sink calls this with a job's count as it would be after its
-- write (the others' committed counts + its own) and the records' total; past the total it
-- fails as 005's constraint did, so the sink dead-letters the rows that do not fit
-- (sink/isolate.c). Writers committing at the same moment see each other's counts only once
-- committed, so two of them may pass it together by the few rows they hold each.
CREATE FUNCTION job_progress_guard(job text, done bigint, total integer) RETURNS boolean
LANGUAGE plpgsql AS $$
BEGIN
    IF total > 0 AND done > total THEN
        RAISE EXCEPTION 'job %: % distinct tickets would exceed its total %', job, done, total
            USING ERRCODE = 'check_violation', CONSTRAINT = 'jobs_done_within_total';
    END IF;
    RETURN true;
END $$;

CREATE VIEW jobs AS
SELECT j.job_id, j.tenant, j.total, coalesce(p.done, 0)::integer AS done, j.first_seen,
       j.completed_at, greatest(j.updated_at, p.updated_at) AS updated_at
FROM job_info j
LEFT JOIN (SELECT job_id, sum(done) AS done, max(updated_at) AS updated_at
           FROM job_progress GROUP BY job_id) p USING (job_id);
