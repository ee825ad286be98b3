-- A job belongs to one tenant, and a stored row says only what its columns can mean.
-- (1) Ownership: a job's owner is jobs.tenant, set by the write that created the jobs row
--     (sink/sink.c keeps it once set). Every result row must name its job's owner, checked at
--     COMMIT (deferred: the sink stores a write's rows before its jobs rows): no record of one
--     tenant can add to, overwrite or count towards another tenant's job. The sink dead-letters
--     such records (sink/isolate.c) and `reclass submit --db` refuses the job id up front.
-- (2) done never exceeds total.
-- (3) Each column's range: a record PostgreSQL refuses is dead-lettered alone, the rows
--     around it stored (sink/isolate.c).
-- Existing data is carried over as it is: the constraints on ticket_results are NOT VALID
-- (new and updated rows are checked; no scan of a large table under its lock). An operator can
-- check the old rows later with ALTER TABLE ticket_results VALIDATE CONSTRAINT <name>.

-- a job stored before this migration without a tenant takes its results' one, when they agree
UPDATE jobs j SET tenant = r.tenant
FROM (SELECT job_id, min(tenant) AS tenant FROM ticket_results GROUP BY job_id
      HAVING count(DISTINCT tenant) = 1 AND count(tenant) = count(*)) r
WHERE j.tenant IS NULL AND j.job_id = r.job_id;

-- a job another tenant's records counted into (total overwritten, done past it) keeps the
-- count of what is stored as its total
UPDATE jobs SET total = done WHERE total > 0 AND done > total;

ALTER TABLE jobs ADD CONSTRAINT jobs_job_tenant UNIQUE (job_id, tenant);
ALTER TABLE jobs ADD CONSTRAINT jobs_done_within_total
    CHECK (done >= 0 AND (total <= 0 OR done <= total));

-- MATCH FULL: a row without a tenant matches no job (MATCH SIMPLE would let it into any)
ALTER TABLE ticket_results ADD CONSTRAINT ticket_results_job_owner
    FOREIGN KEY (job_id, tenant) REFERENCES jobs (job_id, tenant) MATCH FULL
    DEFERRABLE INITIALLY DEFERRED NOT VALID;

ALTER TABLE ticket_results
    ADD CONSTRAINT ticket_results_label_id CHECK (label_id >= 0) NOT VALID,
    ADD CONSTRAINT ticket_results_confidence CHECK (confidence >= 0 AND confidence <= 1) NOT VALID,
    ADD CONSTRAINT ticket_results_tokens CHECK (tokens >= 0) NOT VALID,
    ADD CONSTRAINT ticket_results_partition CHECK ("partition" >= 0) NOT VALID,
    ADD CONSTRAINT ticket_results_offset CHECK ("offset" >= 0) NOT VALID;
