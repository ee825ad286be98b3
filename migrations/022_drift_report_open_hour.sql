-- The drift report sees the hour that has not closed yet. Since 020 the worker judges each
-- window into its drift_windows rows and drift_judged takes them once an hour
-- (drift_judged_close), so the report, which read drift_judged and its roll-ups only, missed
-- up to an hour of judgments (and `reclass drift report`'s exit code a drifting tenant of that
-- hour). The readers now add the judged windows at or after the mark 'drift_judged', each
-- window's row judged last (its judgment is of every worker's rows), as drift_judged_close
-- would store them.
--
-- drift_judged_close stored only its caller's model and moved the one mark for every model:
-- another model's windows of the closed hour were never stored. It now stores every model's.

CREATE OR REPLACE FUNCTION drift_judged_close(p_model text, p_before timestamptz) RETURNS integer
LANGUAGE plpgsql AS $f$
DECLARE mark timestamptz; n integer := 0;
BEGIN
    SELECT done_before INTO mark FROM drift_rollup_mark WHERE rollup = 'drift_judged' FOR UPDATE;
    IF p_before <= mark THEN RETURN 0; END IF;
    -- once an hour, as drift_status_refresh did every window: partitions made and dropped
    PERFORM drift_partitions_maintain();
    PERFORM ticket_results_partitions_maintain();
    -- every model's: the mark is one for all (p_model names the caller only)
    SELECT drift_judged_store(array_agg(j)) INTO n
    FROM drift_judged_open(mark, NULL, NULL) j WHERE j.window_start < p_before;
    UPDATE drift_rollup_mark SET done_before = p_before WHERE rollup = 'drift_judged';
    RETURN coalesce(n, 0);
END $f$;

-- The judged windows at or after the mark (and p_since) as drift_judged rows: each window's
-- row judged last. A worker closes the hours before its window's (drift_judged_close in the
-- window's lock statement) before it writes a judged row, so with the mark at -infinity no row
-- is judged yet: nothing is read (a database upgraded to 020 holds months of windows).
CREATE FUNCTION drift_judged_open(p_since timestamptz, p_tenant text, p_model text)
RETURNS SETOF drift_judged LANGUAGE sql STABLE AS $$
    SELECT DISTINCT ON (w.window_start, w.tenant, w.model)
           w.window_start, w.tenant, w.model, w.window_s, w.judged_tickets, w.status,
           drift_rank(w.status), w.label_psi, w.label_js, w.confidence_psi, w.confidence_js,
           w.low_confidence_share, w.low_confidence_change, w.labels_new, w.labels_gone,
           w.reference, w.ref_tickets, w.judged_overflow, w.judged_at
    FROM drift_windows w
    WHERE w.window_start >= greatest(p_since, drift_rollup_done_before('drift_judged'))
      AND drift_rollup_done_before('drift_judged') > '-infinity' AND w.judged_at IS NOT NULL
      AND (p_tenant IS NULL OR w.tenant = p_tenant) AND (p_model IS NULL OR w.model = p_model)
    ORDER BY w.window_start, w.tenant, w.model, w.judged_at DESC
$$;

-- The same rolled up into buckets of p_bucket ('hour' or 'day') as drift_judged_hourly's rows.
CREATE FUNCTION drift_judged_open_buckets(p_bucket text, p_since timestamptz, p_tenant text,
                                          p_model text)
RETURNS SETOF drift_judged_hourly LANGUAGE sql STABLE AS $$
    SELECT j.tenant, j.model, date_trunc(p_bucket, j.window_start, 'UTC'), count(*),
           count(*) FILTER (WHERE j.status = 'drift'), sum(j.tickets)::bigint, max(j.rank),
           max(j.label_psi) FILTER (WHERE j.rank >= 2), max(j.confidence_psi) FILTER (WHERE j.rank >= 2),
           min(j.window_start) FILTER (WHERE j.status = 'drift'),
           (array_agg(j.reference ORDER BY j.window_start DESC))[1], max(j.window_start)
    FROM drift_judged_open(p_since, p_tenant, p_model) j
    GROUP BY j.tenant, j.model, date_trunc(p_bucket, j.window_start, 'UTC')
$$;

-- 017's, with the open hour added; rows of one bucket from both sides are merged (g) before
-- buckets are counted.
CREATE OR REPLACE FUNCTION drift_report_tenants(p_bucket text, p_since timestamptz, p_tenant text DEFAULT NULL,
                                                p_model text DEFAULT NULL)
RETURNS TABLE (tenant text, model text, worst text, buckets bigint, drifting bigint, tickets bigint,
               drift_since timestamptz, max_label_psi double precision,
               max_confidence_psi double precision, reference text)
LANGUAGE sql STABLE AS $$
    WITH h AS (
        SELECT h.tenant, h.model, h.bucket_start AS b, h.windows, h.drifting, h.tickets, h.rank,
               h.label_psi, h.confidence_psi, h.first_drift, h.reference, h.reference_at
        FROM drift_judged_days(date_trunc('day', p_since, 'UTC'), p_tenant, p_model) h
        WHERE p_bucket = 'day'
        UNION ALL
        -- 'window' buckets only sum: the days' rows as they are, the hours after the mark below
        SELECT h.tenant, h.model, h.bucket_start, h.windows, h.drifting, h.tickets, h.rank,
               h.label_psi, h.confidence_psi, h.first_drift, h.reference, h.reference_at
        FROM drift_judged_daily h
        WHERE p_bucket = 'window' AND h.bucket_start >= drift_day_ceil(drift_hour_ceil(p_since))
          AND (p_tenant IS NULL OR h.tenant = p_tenant) AND (p_model IS NULL OR h.model = p_model)
        UNION ALL
        SELECT h.tenant, h.model, h.bucket_start, h.windows, h.drifting, h.tickets, h.rank,
               h.label_psi, h.confidence_psi, h.first_drift, h.reference, h.reference_at
        FROM drift_judged_hourly h
        WHERE p_bucket IN ('window', 'hour')
          AND h.bucket_start >= CASE p_bucket WHEN 'window' THEN drift_hour_ceil(p_since)
                                              ELSE date_trunc('hour', p_since, 'UTC') END
          AND h.bucket_start < CASE p_bucket WHEN 'window' THEN drift_day_ceil(drift_hour_ceil(p_since))
                                             ELSE 'infinity' END
          AND (p_tenant IS NULL OR h.tenant = p_tenant) AND (p_model IS NULL OR h.model = p_model)
        UNION ALL
        -- the hours after the mark, not in the days yet
        SELECT h.tenant, h.model, h.bucket_start, h.windows, h.drifting, h.tickets, h.rank,
               h.label_psi, h.confidence_psi, h.first_drift, h.reference, h.reference_at
        FROM drift_judged_hourly h
        WHERE p_bucket = 'window'
          AND h.bucket_start >= greatest(drift_day_ceil(drift_hour_ceil(p_since)),
                                         drift_rollup_done_before('drift_judged_daily'))
          AND (p_tenant IS NULL OR h.tenant = p_tenant) AND (p_model IS NULL OR h.model = p_model)
        UNION ALL
        SELECT j.tenant, j.model, j.window_start, 1, (j.status = 'drift')::int, j.tickets, j.rank,
               CASE WHEN j.rank >= 2 THEN j.label_psi END, CASE WHEN j.rank >= 2 THEN j.confidence_psi END,
               CASE WHEN j.status = 'drift' THEN j.window_start END, j.reference, j.window_start
        FROM drift_judged j
        WHERE p_bucket = 'window' AND j.window_start >= p_since AND j.window_start < drift_hour_ceil(p_since)
          AND (p_tenant IS NULL OR j.tenant = p_tenant) AND (p_model IS NULL OR j.model = p_model)
        UNION ALL
        -- the open hour: its windows
        SELECT j.tenant, j.model, j.window_start, 1, (j.status = 'drift')::int, j.tickets, j.rank,
               CASE WHEN j.rank >= 2 THEN j.label_psi END, CASE WHEN j.rank >= 2 THEN j.confidence_psi END,
               CASE WHEN j.status = 'drift' THEN j.window_start END, j.reference, j.window_start
        FROM drift_judged_open(p_since, p_tenant, p_model) j
        WHERE p_bucket = 'window'
        UNION ALL
        -- the open hour: in hour or day buckets
        SELECT o.tenant, o.model, o.bucket_start, o.windows, o.drifting, o.tickets, o.rank,
               o.label_psi, o.confidence_psi, o.first_drift, o.reference, o.reference_at
        FROM drift_judged_open_buckets(CASE p_bucket WHEN 'day' THEN 'day' ELSE 'hour' END,
                                       date_trunc(CASE p_bucket WHEN 'day' THEN 'day' ELSE 'hour' END,
                                                  p_since, 'UTC'), p_tenant, p_model) o
        WHERE p_bucket IN ('hour', 'day')),
    g AS (
        SELECT h.tenant, h.model, h.b, sum(h.windows) AS windows, sum(h.drifting) AS drifting,
               sum(h.tickets) AS tickets, max(h.rank) AS rank, max(h.label_psi) AS label_psi,
               max(h.confidence_psi) AS confidence_psi, min(h.first_drift) AS first_drift,
               (array_agg(h.reference ORDER BY h.reference_at DESC))[1] AS reference,
               max(h.reference_at) AS reference_at
        FROM h GROUP BY h.tenant, h.model, h.b)
    SELECT h.tenant::text, h.model::text, drift_rank_status(max(h.rank)),
           CASE p_bucket WHEN 'window' THEN sum(h.windows)::bigint ELSE count(*) END,
           CASE p_bucket WHEN 'window' THEN sum(h.drifting)::bigint ELSE count(*) FILTER (WHERE h.rank = 4) END,
           sum(h.tickets)::bigint,
           CASE p_bucket WHEN 'window' THEN min(h.first_drift) ELSE min(h.b) FILTER (WHERE h.rank = 4) END,
           max(h.label_psi), max(h.confidence_psi),
           (array_agg(h.reference ORDER BY h.reference_at DESC))[1]
    FROM g h GROUP BY h.tenant, h.model
    ORDER BY max(h.rank) DESC, max(greatest(h.label_psi, h.confidence_psi)) DESC NULLS LAST, h.tenant, h.model
$$;

-- 017's, with the open hour added (hour and day buckets merged with the closed part of theirs).
CREATE OR REPLACE FUNCTION drift_report_worst(p_bucket text, p_since timestamptz, p_tenant text DEFAULT NULL,
                                              p_model text DEFAULT NULL, p_limit integer DEFAULT 20)
RETURNS TABLE (bucket_start timestamptz, bucket_s integer, tenant text, model text, status text,
               tickets bigint, label_psi double precision, label_js double precision,
               confidence_psi double precision, confidence_js double precision,
               low_confidence_share double precision, low_confidence_change double precision,
               labels_new integer, labels_gone integer)
LANGUAGE plpgsql STABLE AS $$
BEGIN
    IF p_bucket = 'window' THEN
        RETURN QUERY
        SELECT j.window_start, j.window_s, j.tenant::text, j.model::text, j.status, j.tickets,
               j.label_psi, j.label_js, j.confidence_psi, j.confidence_js, j.low_confidence_share,
               j.low_confidence_change, cardinality(j.labels_new), cardinality(j.labels_gone)
        -- each side's first p_limit (the stored side by its index on this order), then both
        FROM ((SELECT * FROM drift_judged x
               WHERE x.window_start >= p_since AND (p_tenant IS NULL OR x.tenant = p_tenant)
                 AND (p_model IS NULL OR x.model = p_model)
               ORDER BY x.rank DESC, greatest(x.label_psi, x.confidence_psi) DESC NULLS LAST,
                        x.window_start DESC
               LIMIT p_limit)
              UNION ALL
              (SELECT * FROM drift_judged_open(p_since, p_tenant, p_model) o
               ORDER BY o.rank DESC, greatest(o.label_psi, o.confidence_psi) DESC NULLS LAST,
                        o.window_start DESC
               LIMIT p_limit)) j
        ORDER BY j.rank DESC, greatest(j.label_psi, j.confidence_psi) DESC NULLS LAST, j.window_start DESC
        LIMIT p_limit;
    ELSE
        RETURN QUERY
        SELECT h.bucket_start, CASE WHEN p_bucket = 'day' THEN 86400 ELSE 3600 END, h.tenant::text,
               h.model::text, drift_rank_status(max(h.rank)), sum(h.tickets)::bigint, max(h.label_psi),
               NULL::float8, max(h.confidence_psi), NULL::float8, NULL::float8, NULL::float8,
               NULL::integer, NULL::integer
        FROM (SELECT * FROM drift_judged_hourly x
              WHERE p_bucket = 'hour' AND x.bucket_start >= date_trunc('hour', p_since, 'UTC')
              UNION ALL
              SELECT * FROM drift_judged_days(date_trunc('day', p_since, 'UTC'), p_tenant, p_model) x
              WHERE p_bucket = 'day'
              UNION ALL
              SELECT * FROM drift_judged_open_buckets(p_bucket, date_trunc(p_bucket, p_since, 'UTC'),
                                                      p_tenant, p_model)) h
        WHERE (p_tenant IS NULL OR h.tenant = p_tenant) AND (p_model IS NULL OR h.model = p_model)
        GROUP BY h.bucket_start, h.tenant, h.model
        ORDER BY max(h.rank) DESC, greatest(max(h.label_psi), max(h.confidence_psi)) DESC NULLS LAST,
                 h.bucket_start DESC, h.tenant, h.model
        LIMIT p_limit;
    END IF;
END $$;
