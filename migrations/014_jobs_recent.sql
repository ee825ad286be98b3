-- `reclass jobs` without reading every job: the newest jobs by activity through indexes.
--
-- The jobs view (008) orders by greatest(job_info.updated_at, the job's newest job_progress
-- row), which aggregates every job's job_progress rows and calls job_failed() for every job
-- before its LIMIT: the listing grew with the number of jobs. jobs_recent finds the same rows
-- from two index scans:
--   (1) the first p_limit jobs passing the filters by job_info.updated_at (its own index);
--   (2) every job with a job_progress row at least as new as the p_limit-th key of (1): any
--       job of the true first p_limit that is not in (1) owes its key to such a row.
-- Only when (1) holds p_limit jobs is (2) needed (fewer means (1) holds every job passing the
-- filters). The progress sums, failures and state are computed for the p_limit rows kept.

CREATE INDEX job_info_updated ON job_info (updated_at);
CREATE INDEX job_info_tenant_updated ON job_info (tenant, updated_at);
CREATE INDEX job_progress_updated ON job_progress (updated_at);

-- The rows of the jobs view that `reclass jobs` lists: p_tenant's (all when NULL), p_job's
-- alone when given, completed more than a day ago only with p_all; newest activity first.
CREATE FUNCTION jobs_recent(p_tenant text, p_limit integer, p_all boolean, p_job text DEFAULT NULL)
RETURNS SETOF jobs LANGUAGE sql STABLE AS $$
    WITH f AS MATERIALIZED (
        SELECT j.job_id, j.updated_at FROM job_info j
        WHERE (p_tenant IS NULL OR j.tenant = p_tenant) AND (p_job IS NULL OR j.job_id = p_job)
          AND (p_all OR j.completed_at IS NULL OR j.completed_at > now() - interval '1 day')
        ORDER BY j.updated_at DESC LIMIT p_limit),
    k AS MATERIALIZED (
        SELECT f.job_id, greatest(f.updated_at, p.m) AS k
        FROM f LEFT JOIN LATERAL (SELECT max(z.updated_at) AS m FROM job_progress z
                                  WHERE z.job_id = f.job_id) p ON true),
    -- the p_limit-th key of (1), or none when (1) holds every job passing the filters
    x AS (SELECT min(k) AS k FROM k HAVING count(*) >= p_limit),
    -- (the planner cannot know how few rows x.k leaves: OFFSET 0 keeps each job a lookup by
    -- key rather than a hash join over all of job_info)
    more AS (
        SELECT z.job_id FROM (SELECT DISTINCT z.job_id FROM x, job_progress z WHERE z.updated_at >= x.k) z
        CROSS JOIN LATERAL (SELECT * FROM job_info j WHERE j.job_id = z.job_id OFFSET 0) j
        WHERE (p_tenant IS NULL OR j.tenant = p_tenant) AND (p_job IS NULL OR j.job_id = p_job)
          AND (p_all OR j.completed_at IS NULL OR j.completed_at > now() - interval '1 day')),
    top AS (
        SELECT c.job_id, greatest(j.updated_at, p.m) AS k, p.done, p.m
        FROM (SELECT job_id FROM f UNION SELECT job_id FROM more) c
        CROSS JOIN LATERAL (SELECT * FROM job_info j WHERE j.job_id = c.job_id OFFSET 0) j
        LEFT JOIN LATERAL (SELECT sum(z.done) AS done, max(z.updated_at) AS m FROM job_progress z
                           WHERE z.job_id = c.job_id) p ON true
        ORDER BY 2 DESC, 1 LIMIT p_limit)
    SELECT j.job_id, j.tenant, j.total, coalesce(t.done, 0)::integer, j.first_seen, j.completed_at,
           t.k, fl.failed::integer,
           CASE WHEN j.completed_at IS NULL
                     AND (j.total <= 0 OR coalesce(t.done, 0) + fl.failed < j.total) THEN 'running'
                WHEN fl.failed > 0 THEN 'complete with failures'
                ELSE 'complete' END
    FROM top t CROSS JOIN LATERAL (SELECT * FROM job_info j WHERE j.job_id = t.job_id OFFSET 0) j
    CROSS JOIN LATERAL (SELECT job_failed(j.job_id) AS failed) fl
    ORDER BY t.k DESC, t.job_id
$$;
