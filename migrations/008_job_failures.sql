-- Every ticket of a job ends in one of two ways: a result row (ticket_results) or a dead
-- letter counted against its job (job_failures). A job is complete once done + failed reach
-- its total, and its total is said once.
--
-- Skew is ruled out by three rules rather than case by case:
-- (1) identity: a ticket is (job_id, ticket_id) and counts once, whatever happens to it. A
--     result is keyed by it (a redelivery updates its row, 001); a failure is keyed by its
--     record (topic, partition, offset: a record re-read after a crash or a rebalance is the
--     same failure) and counted by ticket, and a ticket that has a result row does not count
--     as failed however many dead letters it had (job_failed below).
-- (2) the total is fixed by the job's first stored ticket (result or failure): a ticket whose
--     job_total differs is refused (job_total_check; the sink dead-letters it, sink/isolate.c)
--     and changes nothing.
-- (3) done + failed never exceed the total: a result past it is refused (job_progress_guard,
--     now counting failures), a failure past it is recorded but not counted. A late ticket
--     after completion is either one of the job's tickets again (rule 1: no change) or one
--     too many (rule 3: dead-lettered, not counted).
-- A failure counts against a job only when its tenant owns the job (005): one tenant's
-- records never move another tenant's counts.
-- Applies to a database holding earlier rows as they are: there are no failures yet, and
-- a job whose total was rewritten by the largest one seen (the old rule) keeps it.

CREATE TABLE job_failures (
    topic       text NOT NULL,
    "partition" integer NOT NULL,
    "offset"    bigint NOT NULL,
    job_id      text COLLATE "C",   -- NULL: the record said no job we could read
    tenant      text,
    ticket_id   text COLLATE "C",
    job_total   integer,            -- as the record said it, when it could be read
    reason      text NOT NULL,      -- the dead letter's reclass.error
    counted     boolean NOT NULL,   -- counts against job_id (its owner's, within the total)
    failed_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (topic, "partition", "offset")
);

CREATE INDEX job_failures_job ON job_failures (job_id, failed_at);

-- Failed tickets of a job: counted failures whose ticket has no result row, one per ticket
-- (a failure that names no ticket is one by itself).
CREATE FUNCTION job_failed(job text) RETURNS bigint LANGUAGE sql STABLE AS $$
    SELECT count(DISTINCT coalesce(f.ticket_id,
                                   f.topic || '/' || f."partition" || '/' || f."offset"))
    FROM job_failures f
    WHERE f.job_id = job AND f.counted
      AND NOT EXISTS (SELECT 1 FROM ticket_results r
                      WHERE r.job_id = f.job_id AND r.ticket_id = f.ticket_id)
$$;

-- Tickets stored for a job, summed over its writers' counters (006).
CREATE FUNCTION job_done(job text) RETURNS bigint LANGUAGE sql STABLE AS $$
    SELECT coalesce(sum(done), 0)::bigint FROM job_progress WHERE job_id = job
$$;

-- (3) for results: the sink calls it with the job's stored count after its write; failures
-- take their share of the total.
CREATE OR REPLACE FUNCTION job_progress_guard(job text, done bigint, total integer) RETURNS boolean
LANGUAGE plpgsql AS $$
BEGIN
    IF total > 0 AND done + job_failed(job) > total THEN
        RAISE EXCEPTION 'job %: % distinct tickets would exceed its total %', job,
            done + job_failed(job), total
            USING ERRCODE = 'check_violation', CONSTRAINT = 'jobs_done_within_total';
    END IF;
    RETURN true;
END $$;

-- (2): total is what the write's tickets of the job say (-1: they disagree among themselves).
-- A job stored without a total (0: claimed by 005's owner trigger in this very write, or an
-- old row) takes the first one given.
CREATE FUNCTION job_total_check(job text, total integer) RETURNS boolean
LANGUAGE plpgsql STABLE AS $$
DECLARE
    fixed integer;
BEGIN
    SELECT j.total INTO fixed FROM job_info j WHERE j.job_id = job;
    IF total < 0 OR (fixed > 0 AND fixed <> total) THEN
        RAISE EXCEPTION 'job %: its total is %, a ticket says %', job, fixed, total
            USING ERRCODE = 'check_violation', CONSTRAINT = 'job_total_fixed';
    END IF;
    RETURN true;
END $$;

-- One dead letter, recorded before it is sent (the sink, then the poll thread's producer):
-- idempotent on its record. A job first seen here is claimed by its tenant with the record's
-- total, as a result would claim it.
CREATE FUNCTION job_failure_record(topic text, part integer, off bigint, job text, tenant text,
                                   ticket text, total integer, reason text) RETURNS boolean
LANGUAGE plpgsql AS $$
DECLARE
    owner text;
    fixed integer;
    counts boolean := false;
BEGIN
    IF job IS NOT NULL AND tenant IS NOT NULL THEN
        INSERT INTO job_info AS j (job_id, tenant, total)
        VALUES (job, tenant, CASE WHEN total > 0 THEN total ELSE 0 END)
        ON CONFLICT (job_id) DO NOTHING;
        SELECT j.tenant, j.total INTO owner, fixed FROM job_info j WHERE j.job_id = job FOR UPDATE;
        IF fixed <= 0 AND total > 0 THEN
            UPDATE job_info j SET total = job_failure_record.total, updated_at = now()
            WHERE j.job_id = job;
            fixed := total;
        END IF;
        counts := owner IS NOT DISTINCT FROM tenant
              AND (fixed <= 0 OR job_done(job) + job_failed(job) < fixed
                   OR EXISTS (SELECT 1 FROM job_failures f WHERE f.job_id = job
                              AND f.ticket_id = ticket AND f.counted));
    END IF;
    INSERT INTO job_failures (topic, "partition", "offset", job_id, tenant, ticket_id, job_total,
                              reason, counted)
    VALUES (topic, part, off, job, tenant, ticket, total, reason, counts)
    ON CONFLICT DO NOTHING;
    IF FOUND AND job IS NOT NULL THEN
        UPDATE job_info j SET updated_at = now() WHERE j.job_id = job;
    END IF;
    RETURN counts;
END $$;

-- Completion, once: after a writer's COMMIT (006), for the jobs it wrote; done + failed.
CREATE FUNCTION job_complete(jobs text[]) RETURNS void LANGUAGE sql AS $$
    UPDATE job_info j SET completed_at = now(), updated_at = now()
    WHERE j.job_id = ANY(jobs) AND j.completed_at IS NULL AND j.total > 0
      AND job_done(j.job_id) + job_failed(j.job_id) >= j.total
$$;

-- the columns jobs had, then failed and state
CREATE OR REPLACE VIEW jobs AS
SELECT j.job_id, j.tenant, j.total, coalesce(p.done, 0)::integer AS done, j.first_seen,
       j.completed_at, greatest(j.updated_at, p.updated_at) AS updated_at,
       f.failed::integer AS failed,
       CASE WHEN j.completed_at IS NULL
                 AND (j.total <= 0 OR coalesce(p.done, 0) + f.failed < j.total) THEN 'running'
            WHEN f.failed > 0 THEN 'complete with failures'
            ELSE 'complete' END AS state
FROM job_info j
LEFT JOIN (SELECT job_id, sum(done) AS done, max(updated_at) AS updated_at
           FROM job_progress GROUP BY job_id) p USING (job_id)
CROSS JOIN LATERAL (SELECT job_failed(j.job_id) AS failed) f;
