-- The sink's fast path COPYs into the month's partition of ticket_results, not through the
-- partitioned table. PostgreSQL 15 stores a COPY into a partitioned table that has a statement
-- trigger with a transition table (012's owner check) row by row (copyfrom.c: no
-- multi-insert when the routed table has insert triggers with transition tables): one heap
-- insert and WAL record per row. Into a plain table (a partition named itself) COPY buffers
-- rows and writes them a page at a time (heap_multi_insert), the owner check still seeing
-- every row through its transition table.
-- (1) Statement triggers fire only on the table a statement names (a partition's do not fire
--     for rows routed through ticket_results, so no row is checked twice): every partition
--     gets 012's owner check on INSERT; ticket_results_partitions_ensure() gives it to each
--     new month.
-- (2) ticket_results_copy_target(): the partition a row written now lands in by default
--     (job_month = the month of now()), when it exists and carries the owner check, else NULL
--     (the sink then COPYs through ticket_results, as before). Called inside the write's
--     transaction, so now() is the one the rows' defaults see.

CREATE FUNCTION ticket_results_partition_guard(part regclass) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_trigger
                   WHERE tgrelid = part AND tgname = 'ticket_results_owner_insert') THEN
        EXECUTE format('CREATE TRIGGER ticket_results_owner_insert AFTER INSERT ON %s'
                       ' REFERENCING NEW TABLE AS new_rows'
                       ' FOR EACH STATEMENT EXECUTE FUNCTION reclass_results_owner_check()', part);
    END IF;
END $$;

-- 012's, and (1): each partition made carries the owner check
CREATE OR REPLACE FUNCTION ticket_results_partitions_ensure(from_ts timestamptz, to_ts timestamptz) RETURNS integer
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
            PERFORM ticket_results_partition_guard(to_regclass(name));
            made := made + 1;
        END IF;
        m := (m + interval '1 month')::date;
    END LOOP;
    RETURN made;
END $$;

SELECT ticket_results_partition_guard(i.inhrelid::regclass)
FROM pg_inherits i WHERE i.inhparent = 'ticket_results'::regclass;

CREATE FUNCTION ticket_results_copy_target() RETURNS text
LANGUAGE sql STABLE AS $$
    SELECT c.oid::regclass::text
    FROM pg_class c
    JOIN pg_inherits i ON i.inhrelid = c.oid AND i.inhparent = 'ticket_results'::regclass
    CROSS JOIN ticket_results_month(now()) m
    WHERE c.oid = to_regclass('ticket_results_' || to_char(m, 'YYYYMM'))
      AND pg_get_expr(c.relpartbound, c.oid)
          = format('FOR VALUES FROM (%L) TO (%L)', m, (m + interval '1 month')::date)
      AND EXISTS (SELECT 1 FROM pg_trigger t
                  WHERE t.tgrelid = c.oid AND t.tgname = 'ticket_results_owner_insert'
                    AND t.tgenabled <> 'D')
$$;

-- 012's owner check, reading the statement's rows once: a write holds a few (job, tenant,
-- month) triples, so one hashed pass over the transition table gives them, and the job_info
-- insert and the checks run over those (012 sorted the rows for the one, joined them all for
-- the other). The same answers and errors as 012's.
CREATE OR REPLACE FUNCTION reclass_results_owner_check() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    jobs text[];
    tenants text[];
    months date[];
    bad text;
    moved text;
BEGIN
    SELECT array_agg(job_id), array_agg(tenant), array_agg(job_month)
    INTO jobs, tenants, months
    FROM (SELECT job_id, tenant, job_month FROM new_rows GROUP BY 1, 2, 3) g;
    INSERT INTO job_info (job_id, tenant, total)
    SELECT DISTINCT ON (job_id) job_id, tenant, 0
    FROM unnest(jobs, tenants) AS n(job_id, tenant) ORDER BY job_id
    ON CONFLICT (job_id) DO NOTHING;
    SELECT max(n.job_id) FILTER (WHERE j.tenant IS NOT NULL AND n.tenant IS DISTINCT FROM j.tenant),
           max(n.job_id) FILTER (WHERE n.job_month <> ticket_results_month(j.first_seen))
    INTO bad, moved
    FROM unnest(jobs, tenants, months) AS n(job_id, tenant, job_month) JOIN job_info j USING (job_id);
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
