-- One btree fewer per stored ticket. ticket_results had three indexes: its primary key
-- (job_id, ticket_id, job_month), (job_id, label) for the per-job label queries (the report,
-- the job baseline, job_label_counts) and (tenant, classified_at). The primary key now carries
-- label as a non-key column (INCLUDE): the per-job label queries read it by an index-only scan
-- of the key's job_id prefix, as they read (job_id, label), and the sink's COPY maintains two
-- indexes a row instead of three (about 1/8 of the server's CPU per row, issue 33). The key
-- columns, so its uniqueness and the sink's ON CONFLICT target, are unchanged; only the
-- index's leaf entries grow by the label.
-- The upgrade rebuilds the key's index on every partition (locking the table while it does,
-- as 012's copy did); rows are not touched.

ALTER TABLE ticket_results
    DROP CONSTRAINT ticket_results_pkey,
    ADD CONSTRAINT ticket_results_pkey PRIMARY KEY (job_id, ticket_id, job_month) INCLUDE (label);
DROP INDEX ticket_results_job_label;
