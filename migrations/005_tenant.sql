-- A job belongs to one tenant, and a stored row says only what its columns can mean.
-- (1) Ownership: a job's owner is jobs.tenant, set by the first rows stored for it and never
--     changed (sink/sink.c keeps it once set). Every result row written must name its job's
--     owner: no record of one tenant can add to, overwrite or count towards another tenant's
--     job. The sink dead-letters such records (sink/isolate.c) and `reclass submit --db`
--     refuses the job id up front.
-- (2) done never exceeds total.
-- (3) Each column's range: a record PostgreSQL refuses is dead-lettered alone, the rows
--     around it stored (sink/isolate.c).
-- Existing data is carried over as it is: ownership applies to rows written from now on, and
-- the CHECKs on ticket_results are NOT VALID (new and updated rows are checked; no scan of a
-- large table under its lock); an operator can check the old rows later with
-- ALTER TABLE ticket_results VALIDATE CONSTRAINT <name>.

-- a job stored before this migration without a tenant takes its results' one, when they agree
UPDATE jobs j SET tenant = r.tenant
FROM (SELECT job_id, min(tenant) AS tenant FROM ticket_results GROUP BY job_id
      HAVING count(DISTINCT tenant) = 1 AND count(tenant) = count(*)) r
WHERE j.tenant IS NULL AND j.job_id = r.job_id;

-- a job another tenant's records counted into (total overwritten, done past it) keeps the
-- count of what is stored as its total
UPDATE jobs SET total = done WHERE total > 0 AND done > total;

ALTER TABLE jobs ADD CONSTRAINT jobs_done_within_total
    CHECK (done >= 0 AND (total <= 0 OR done <= total));

-- Ownership, checked once per statement over the rows it wrote (a transition table: a
-- per-row foreign key to jobs (job_id, tenant) cost the sink half again as much server CPU per
-- row, tests/bench/RESULTS-sink.md). A job new to the table is claimed here, in job_id order
-- (concurrent writers lock in one order), by the tenant of its rows; a writer claiming the
-- same job at the same time waits on that insert until the first commits or rolls back, then
-- sees its owner. A job stored before tenants owned jobs (no tenant) is claimed by the sink's
-- jobs update (sink/sink.c keeps an owner once set).
CREATE FUNCTION reclass_results_owner_check() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    bad text;
BEGIN
    INSERT INTO jobs (job_id, tenant, total)
    SELECT DISTINCT ON (job_id) job_id, tenant, 0 FROM new_rows ORDER BY job_id
    ON CONFLICT (job_id) DO NOTHING;
    SELECT n.job_id INTO bad FROM new_rows n JOIN jobs j USING (job_id)
    WHERE j.tenant IS NOT NULL AND n.tenant IS DISTINCT FROM j.tenant LIMIT 1;
    IF bad IS NOT NULL THEN
        RAISE EXCEPTION 'job % belongs to another tenant', bad
            USING ERRCODE = 'integrity_constraint_violation',
                  CONSTRAINT = 'ticket_results_job_owner';
    END IF;
    RETURN NULL;
END $$;

-- a transition table serves one event per trigger: one for the fast path's COPY and the
-- upsert's inserts, one for the upsert's updates
CREATE TRIGGER ticket_results_owner_insert AFTER INSERT ON ticket_results
    REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION reclass_results_owner_check();
CREATE TRIGGER ticket_results_owner_update AFTER UPDATE ON ticket_results
    REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION reclass_results_owner_check();

ALTER TABLE ticket_results
    ADD CONSTRAINT ticket_results_label_id CHECK (label_id >= 0) NOT VALID,
    ADD CONSTRAINT ticket_results_confidence CHECK (confidence >= 0 AND confidence <= 1) NOT VALID,
    ADD CONSTRAINT ticket_results_tokens CHECK (tokens >= 0) NOT VALID,
    ADD CONSTRAINT ticket_results_partition CHECK ("partition" >= 0) NOT VALID,
    ADD CONSTRAINT ticket_results_offset CHECK ("offset" >= 0) NOT VALID;
