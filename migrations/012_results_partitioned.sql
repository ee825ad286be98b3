-- ticket_results partitioned by time (PostgreSQL declarative partitioning), with a retention.
--
-- A partitioned table's unique keys must contain its partition key, and classified_at changes
-- when a ticket is redelivered. The key is the UTC month of the job's first record
-- (job_month = ticket_results_month(job_info.first_seen), fixed once a job exists): every row
-- of a job lands in one partition, so (job_id, ticket_id, job_month) is as unique as 001's
-- (job_id, ticket_id) and the sink's upsert stays exactly-once.
-- (1) job_month defaults to the month of the writing transaction, which is the job's month
--     when the write creates the job (the owner trigger stamps first_seen = now() in the same
--     transaction). The sink's COPY fast path leaves it to that default; its upsert reads it
--     from job_info. A row whose job_month is not its job's is refused by the owner trigger as
--     a unique_violation (constraint ticket_results_job_month): the fast path then takes the
--     upsert path, as for a redelivery (sink/sink.c); so a job that runs across the end of a
--     month costs a failed COPY on some of its writes after it, nothing else.
-- (2) Monthly partitions ticket_results_YYYYMM and a DEFAULT partition;
--     ticket_results_partitions_maintain() creates the next months and drops whole months past
--     reclass_settings.ticket_results_retention ('forever' by default). The judge
--     (drift_status_refresh, 013) calls it with each window, as it calls drift_partitions_maintain.
-- (3) The upgrade: today's table is renamed, its rows copied (job_month from their job), the
--     counts compared before the old table is dropped; constraints, indexes, triggers and the
--     views over it are recreated on the new table.

CREATE FUNCTION ticket_results_month(ts timestamptz) RETURNS date
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT date_trunc('month', ts AT TIME ZONE 'UTC')::date
$$;

INSERT INTO reclass_settings VALUES
    ('ticket_results_retention', 'forever',
     'ticket_results partitions (whole UTC months of the jobs'' first records) older than this '
     'interval (e.g. ''13 months'') are dropped by ticket_results_partitions_maintain(); '
     '''forever'' keeps every month. job_info, job_progress and job_failures are kept.');

ALTER TABLE ticket_results RENAME TO ticket_results_before_012;
ALTER TABLE ticket_results_before_012 RENAME CONSTRAINT ticket_results_pkey TO ticket_results_before_012_pkey;
ALTER INDEX ticket_results_job_label RENAME TO ticket_results_before_012_job_label;
ALTER INDEX ticket_results_tenant_time RENAME TO ticket_results_before_012_tenant_time;
DROP TRIGGER ticket_results_owner_insert ON ticket_results_before_012;
DROP TRIGGER ticket_results_owner_update ON ticket_results_before_012;

CREATE TABLE ticket_results (
    job_id        text COLLATE "C" NOT NULL,
    ticket_id     text COLLATE "C" NOT NULL,
    tenant        text,
    label         text COLLATE "C" NOT NULL,
    label_id      integer NOT NULL,
    confidence    real NOT NULL,
    top_k         jsonb,
    tokens        integer NOT NULL,
    truncated     boolean NOT NULL DEFAULT false,
    model         text NOT NULL,
    "partition"   integer,
    "offset"      bigint,
    enqueued_at   timestamptz,
    classified_at timestamptz NOT NULL DEFAULT now(),
    job_month     date NOT NULL DEFAULT ticket_results_month(now()),
    -- times the row was written: 1 when inserted, an upsert of a redelivery adds one (the
    -- sink counts inserted rows by it: a partitioned table returns no xmax)
    writes        integer NOT NULL DEFAULT 1,
    PRIMARY KEY (job_id, ticket_id, job_month)
) PARTITION BY RANGE (job_month);
CREATE TABLE ticket_results_default PARTITION OF ticket_results DEFAULT;
CREATE INDEX ticket_results_job_label ON ticket_results (job_id, label);
CREATE INDEX ticket_results_tenant_time ON ticket_results (tenant, classified_at) INCLUDE (label, confidence);

-- Monthly partitions ticket_results_YYYYMM for every UTC month in [from_ts, to_ts).
CREATE FUNCTION ticket_results_partitions_ensure(from_ts timestamptz, to_ts timestamptz) RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE m date; made integer := 0; name text;
BEGIN
    PERFORM pg_advisory_xact_lock(hashtext('ticket_results partitions'));
    m := ticket_results_month(from_ts);
    WHILE m < to_ts LOOP
        name := 'ticket_results_' || to_char(m, 'YYYYMM');
        IF to_regclass(name) IS NULL THEN
            EXECUTE format('CREATE TABLE %I PARTITION OF ticket_results FOR VALUES FROM (%L) TO (%L)',
                           name, m, (m + interval '1 month')::date);
            made := made + 1;
        END IF;
        m := (m + interval '1 month')::date;
    END LOOP;
    RETURN made;
END $$;

-- The next two months' partitions (when missing) and the retention; returns the months dropped.
CREATE FUNCTION ticket_results_partitions_maintain(p_now timestamptz DEFAULT now()) RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE keep text; r record; dropped integer := 0;
BEGIN
    IF to_regclass('ticket_results_' || to_char(p_now + interval '1 month', 'YYYYMM')) IS NULL THEN
        PERFORM ticket_results_partitions_ensure(p_now, p_now + interval '2 months');
    END IF;
    SELECT value INTO keep FROM reclass_settings WHERE name = 'ticket_results_retention';
    IF keep IS NULL OR keep = 'forever' THEN
        RETURN 0;
    END IF;
    FOR r IN SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
             WHERE i.inhparent = 'ticket_results'::regclass AND c.relname ~ '^ticket_results_[0-9]{6}$'
               AND (to_date(right(c.relname, 6), 'YYYYMM') + interval '1 month')
                   <= ticket_results_month(p_now - keep::interval)
    LOOP
        PERFORM pg_advisory_xact_lock(hashtext('ticket_results partitions'));
        EXECUTE format('DROP TABLE IF EXISTS %I', r.relname);
        dropped := dropped + 1;
    END LOOP;
    RETURN dropped;
END $$;

-- the months of today's rows (by their jobs), and the next two
SELECT ticket_results_partitions_ensure(least(coalesce(min(j.first_seen), now()), now()), now() + interval '2 months')
FROM ticket_results_before_012 r LEFT JOIN job_info j ON j.job_id = r.job_id;
INSERT INTO ticket_results (job_id, ticket_id, tenant, label, label_id, confidence, top_k, tokens,
                            truncated, model, "partition", "offset", enqueued_at, classified_at, job_month)
SELECT r.job_id, r.ticket_id, r.tenant, r.label, r.label_id, r.confidence, r.top_k, r.tokens,
       r.truncated, r.model, r."partition", r."offset", r.enqueued_at, r.classified_at,
       ticket_results_month(coalesce(j.first_seen, r.classified_at))
FROM ticket_results_before_012 r LEFT JOIN job_info j ON j.job_id = r.job_id;
DO $$
BEGIN
    IF (SELECT count(*) FROM ticket_results) <> (SELECT count(*) FROM ticket_results_before_012) THEN
        RAISE EXCEPTION '012: ticket_results rows lost in the copy';
    END IF;
END $$;

-- 005's checks, NOT VALID as there: rows older than them are carried as they are
ALTER TABLE ticket_results
    ADD CONSTRAINT ticket_results_label_id CHECK (label_id >= 0) NOT VALID,
    ADD CONSTRAINT ticket_results_confidence CHECK (confidence >= 0 AND confidence <= 1) NOT VALID,
    ADD CONSTRAINT ticket_results_tokens CHECK (tokens >= 0) NOT VALID,
    ADD CONSTRAINT ticket_results_partition CHECK ("partition" >= 0) NOT VALID,
    ADD CONSTRAINT ticket_results_offset CHECK ("offset" >= 0) NOT VALID;

-- the views over the table, unchanged (002, 007)
CREATE OR REPLACE VIEW job_label_counts AS
SELECT job_id, label, count(*) AS tickets, avg(confidence)::real AS mean_confidence
FROM ticket_results
GROUP BY job_id, label;
CREATE OR REPLACE VIEW job_latency AS
SELECT job_id,
       min(tenant) AS tenant,
       count(*) AS tickets,
       min(enqueued_at) AS first_enqueued,
       max(enqueued_at) AS last_enqueued,
       min(classified_at) AS first_committed,
       max(classified_at) AS last_committed,
       percentile_cont(0.5) WITHIN GROUP (ORDER BY extract(epoch FROM classified_at - enqueued_at))
           ::real AS p50_s,
       percentile_cont(0.99) WITHIN GROUP (ORDER BY extract(epoch FROM classified_at - enqueued_at))
           ::real AS p99_s,
       max(extract(epoch FROM classified_at - enqueued_at))::real AS max_s
FROM ticket_results
WHERE enqueued_at IS NOT NULL
GROUP BY job_id;
DROP TABLE ticket_results_before_012;

-- 006's owner check, and (1): a row's job_month is its job's
CREATE OR REPLACE FUNCTION reclass_results_owner_check() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    bad text;
    moved text;
BEGIN
    INSERT INTO job_info (job_id, tenant, total)
    SELECT DISTINCT ON (job_id) job_id, tenant, 0 FROM new_rows ORDER BY job_id
    ON CONFLICT (job_id) DO NOTHING;
    SELECT max(n.job_id) FILTER (WHERE j.tenant IS NOT NULL AND n.tenant IS DISTINCT FROM j.tenant),
           max(n.job_id) FILTER (WHERE n.job_month <> ticket_results_month(j.first_seen))
    INTO bad, moved
    FROM new_rows n JOIN job_info j USING (job_id);
    IF bad IS NOT NULL THEN
        RAISE EXCEPTION 'job % belongs to another tenant', bad
            USING ERRCODE = 'integrity_constraint_violation',
                  CONSTRAINT = 'ticket_results_job_owner';
    END IF;
    IF moved IS NOT NULL THEN
        RAISE EXCEPTION 'job %: a row''s job_month is not the month of the job''s first record', moved
            USING ERRCODE = 'unique_violation', CONSTRAINT = 'ticket_results_job_month';
    END IF;
    RETURN NULL;
END $$;
CREATE TRIGGER ticket_results_owner_insert AFTER INSERT ON ticket_results
    REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION reclass_results_owner_check();
CREATE TRIGGER ticket_results_owner_update AFTER UPDATE ON ticket_results
    REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION reclass_results_owner_check();
