-- The worker's per-window statements and `reclass drift report` at 1,000 tenants and 30 days.
--
-- (1) Writing a window: 009's roll-up trigger merged label counts and histograms with SQL
--     functions (drift_labels_add, drift_hist_add) called for every row, four times (the
--     hour's and the day's sums, then each merge into a stored row): thousands of function
--     executions a window. The trigger now sums a statement's rows with built-in aggregates
--     over (tenant, hour, label) rows and merges each stored row inline (a subquery, histograms
--     element by element). Same roll-ups (test_drift_scale compares them with raw sums).
-- (2) drift_judged_daily rolls the judged windows up per UTC day as drift_judged_hourly does
--     per hour, kept by drift_judged_store (the one writer) and drift_judged_hourly_rebuild.
--     The report's tenants over N days read whole days, the hours before the first whole day
--     and the windows before the first whole hour: about N + 24 rows a tenant, not 24 N.

-- ---------------------------------------------------------------------------------------
-- (1) 009's roll-up trigger, same sums. The delta rows carry a sign (sg: 1 added, -1 taken
-- away) that multiplies every summed column and label count.
CREATE OR REPLACE FUNCTION drift_rollup_apply() RETURNS trigger LANGUAGE plpgsql AS $f$
DECLARE
    plus constant text := $$SELECT tenant, model, window_start, 1 AS sg, tickets, label_counts,
        confidence_hist, confidence_sum, truncated, tokens, overflow FROM new_rows$$;
    minus constant text := $$SELECT tenant, model, window_start, -1 AS sg, tickets, label_counts,
        confidence_hist, confidence_sum, truncated, tokens, false AS overflow FROM old_rows$$;
    -- a stored row plus a delta row (excluded): the delta's label counts added key by key to
    -- the stored object (keys summing to 0 dropped, as drift_labels_add drops them; a stored
    -- object holds no 0), histograms bin by bin (shape [10])
    upsert constant text := $$ ON CONFLICT (tenant, model, bucket_start) DO UPDATE SET
        tickets = h.tickets + excluded.tickets,
        label_counts = (SELECT (h.label_counts || coalesce(jsonb_object_agg(k, n) FILTER (WHERE n <> 0), '{}'::jsonb))
                               - coalesce(array_agg(k) FILTER (WHERE n = 0), '{}'::text[])
                        FROM (SELECT e.key AS k, coalesce((h.label_counts ->> e.key)::bigint, 0) + e.value::bigint AS n
                              FROM jsonb_each_text(excluded.label_counts) e) s),
        confidence_hist = ARRAY[h.confidence_hist[1] + excluded.confidence_hist[1], h.confidence_hist[2] + excluded.confidence_hist[2],
                                h.confidence_hist[3] + excluded.confidence_hist[3], h.confidence_hist[4] + excluded.confidence_hist[4],
                                h.confidence_hist[5] + excluded.confidence_hist[5], h.confidence_hist[6] + excluded.confidence_hist[6],
                                h.confidence_hist[7] + excluded.confidence_hist[7], h.confidence_hist[8] + excluded.confidence_hist[8],
                                h.confidence_hist[9] + excluded.confidence_hist[9], h.confidence_hist[10] + excluded.confidence_hist[10]],
        confidence_sum = h.confidence_sum + excluded.confidence_sum,
        truncated = h.truncated + excluded.truncated, tokens = h.tokens + excluded.tokens,
        overflow = h.overflow OR excluded.overflow$$;
    delta text;
BEGIN
    delta := CASE TG_OP WHEN 'INSERT' THEN plus WHEN 'UPDATE' THEN plus || ' UNION ALL ' || minus
                        ELSE minus END;
    EXECUTE format($$
        WITH d AS MATERIALIZED (%s),
        -- the statement's sums per tenant, model and hour
        g AS MATERIALIZED (
            SELECT tenant, model, date_trunc('hour', window_start, 'UTC') AS b, sum(sg * tickets)::bigint AS n,
                   ARRAY[sum(sg * confidence_hist[1]), sum(sg * confidence_hist[2]), sum(sg * confidence_hist[3]),
                         sum(sg * confidence_hist[4]), sum(sg * confidence_hist[5]), sum(sg * confidence_hist[6]),
                         sum(sg * confidence_hist[7]), sum(sg * confidence_hist[8]), sum(sg * confidence_hist[9]),
                         sum(sg * confidence_hist[10])]::bigint[] AS ch,
                   sum(sg * confidence_sum) AS cs, sum(sg * truncated)::bigint AS tr,
                   sum(sg * tokens)::bigint AS tk, bool_or(overflow) AS o
            FROM d GROUP BY 1, 2, 3),
        -- and its label counts as (tenant, model, hour, label, count) rows
        gl AS MATERIALIZED (
            SELECT d.tenant, d.model, date_trunc('hour', d.window_start, 'UTC') AS b, e.key,
                   sum(d.sg * e.value::bigint) AS c
            FROM d, jsonb_each_text(d.label_counts) e GROUP BY 1, 2, 3, 4),
        hh AS (
            INSERT INTO drift_hourly AS h
            SELECT g.tenant, g.model, g.b, g.n, coalesce(l.lc, '{}'::jsonb), g.ch, g.cs, g.tr, g.tk, g.o
            FROM g LEFT JOIN (SELECT tenant, model, b, jsonb_object_agg(key, c) AS lc FROM gl WHERE c <> 0
                              GROUP BY 1, 2, 3) l ON l.tenant = g.tenant AND l.model = g.model AND l.b = g.b
            ORDER BY 1, 2, 3 %s
            RETURNING 1)
        INSERT INTO drift_daily AS h
        SELECT g.tenant, g.model, g.b, g.n, coalesce(l.lc, '{}'::jsonb), g.ch, g.cs, g.tr, g.tk, g.o
        FROM (SELECT tenant, model, date_trunc('day', b, 'UTC') AS b, sum(n)::bigint AS n,
                     ARRAY[sum(ch[1]), sum(ch[2]), sum(ch[3]), sum(ch[4]), sum(ch[5]), sum(ch[6]), sum(ch[7]),
                           sum(ch[8]), sum(ch[9]), sum(ch[10])]::bigint[] AS ch,
                     sum(cs) AS cs, sum(tr)::bigint AS tr, sum(tk)::bigint AS tk, bool_or(o) AS o
              FROM g GROUP BY 1, 2, 3) g
        LEFT JOIN (SELECT tenant, model, b, jsonb_object_agg(key, c) AS lc
                   FROM (SELECT tenant, model, date_trunc('day', b, 'UTC') AS b, key, sum(c) AS c FROM gl
                         GROUP BY 1, 2, 3, 4) x
                   WHERE c <> 0 GROUP BY 1, 2, 3) l ON l.tenant = g.tenant AND l.model = g.model AND l.b = g.b
        ORDER BY 1, 2, 3 %s$$, delta, upsert, upsert);
    RETURN NULL;
END $f$;

-- ---------------------------------------------------------------------------------------
-- (2) The judged windows per tenant, model and UTC day: drift_judged_hourly's columns summed
-- (windows, drifting, tickets) or kept at their worst (rank, PSIs, first drift) over the
-- day's hours; the reference of the day's newest window. Outlives the retention as the
-- hours do.
CREATE TABLE drift_judged_daily (LIKE drift_judged_hourly INCLUDING ALL);
INSERT INTO drift_judged_daily
SELECT tenant, model, date_trunc('day', bucket_start, 'UTC'), sum(windows), sum(drifting), sum(tickets),
       max(rank), max(label_psi), max(confidence_psi), min(first_drift),
       (array_agg(reference ORDER BY reference_at DESC))[1], max(reference_at)
FROM drift_judged_hourly GROUP BY 1, 2, 3;

-- 013's store, adding each statement's hours to their days as well.
CREATE OR REPLACE FUNCTION drift_judged_store(p_rows drift_judged[]) RETURNS integer
LANGUAGE sql AS $$
    WITH r AS MATERIALIZED (SELECT * FROM unnest(p_rows)),
    -- the earlier judgment of each window, read before this statement writes (one snapshot)
    -- (a lookup by key for each row, in its day's partition: OFFSET 0 keeps the planner, which
    -- cannot see how many rows p_rows holds, from joining every partition by hash)
    prev AS MATERIALIZED (
        SELECT o.window_start, o.tenant, o.model, o.status, o.tickets
        FROM r CROSS JOIN LATERAL (SELECT * FROM drift_judged o WHERE o.window_start = r.window_start
                                   AND o.tenant = r.tenant AND o.model = r.model OFFSET 0) o),
    stored AS (
        INSERT INTO drift_judged AS s
        SELECT * FROM r ORDER BY window_start, tenant, model
        ON CONFLICT (window_start, tenant, model) DO UPDATE SET window_s = excluded.window_s,
            tickets = excluded.tickets, status = excluded.status, rank = excluded.rank,
            label_psi = excluded.label_psi, label_js = excluded.label_js,
            confidence_psi = excluded.confidence_psi, confidence_js = excluded.confidence_js,
            low_confidence_share = excluded.low_confidence_share,
            low_confidence_change = excluded.low_confidence_change, labels_new = excluded.labels_new,
            labels_gone = excluded.labels_gone, reference = excluded.reference,
            ref_tickets = excluded.ref_tickets, overflow = excluded.overflow,
            judged_at = excluded.judged_at),
    -- a statement's rows of one tenant and hour summed first: ON CONFLICT touches a row once
    hours AS MATERIALIZED (
        SELECT r.tenant, r.model, date_trunc('hour', r.window_start, 'UTC') AS bucket_start,
               count(*) FILTER (WHERE p.tenant IS NULL) AS windows,
               sum((r.status = 'drift')::int - coalesce((p.status = 'drift')::int, 0)) AS drifting,
               sum(r.tickets - coalesce(p.tickets, 0)) AS tickets, max(r.rank) AS rank,
               max(r.label_psi) FILTER (WHERE r.rank >= 2) AS label_psi,
               max(r.confidence_psi) FILTER (WHERE r.rank >= 2) AS confidence_psi,
               min(r.window_start) FILTER (WHERE r.status = 'drift') AS first_drift,
               (array_agg(r.reference ORDER BY r.window_start DESC))[1] AS reference,
               max(r.window_start) AS reference_at
        FROM r LEFT JOIN prev p ON p.window_start = r.window_start AND p.tenant = r.tenant
                               AND p.model = r.model
        GROUP BY 1, 2, 3),
    hourly AS (
        INSERT INTO drift_judged_hourly AS h (tenant, model, bucket_start, windows, drifting, tickets,
            rank, label_psi, confidence_psi, first_drift, reference, reference_at)
        SELECT * FROM hours ORDER BY tenant, model, bucket_start
        ON CONFLICT (tenant, model, bucket_start) DO UPDATE SET windows = h.windows + excluded.windows,
            drifting = h.drifting + excluded.drifting, tickets = h.tickets + excluded.tickets,
            rank = greatest(h.rank, excluded.rank),
            label_psi = greatest(h.label_psi, excluded.label_psi),
            confidence_psi = greatest(h.confidence_psi, excluded.confidence_psi),
            first_drift = least(h.first_drift, excluded.first_drift),
            reference = CASE WHEN excluded.reference_at >= h.reference_at THEN excluded.reference ELSE h.reference END,
            reference_at = greatest(h.reference_at, excluded.reference_at)),
    daily AS (
        INSERT INTO drift_judged_daily AS h (tenant, model, bucket_start, windows, drifting, tickets,
            rank, label_psi, confidence_psi, first_drift, reference, reference_at)
        SELECT tenant, model, date_trunc('day', bucket_start, 'UTC'), sum(windows), sum(drifting), sum(tickets),
               max(rank), max(label_psi), max(confidence_psi), min(first_drift),
               (array_agg(reference ORDER BY reference_at DESC))[1], max(reference_at)
        FROM hours GROUP BY 1, 2, 3 ORDER BY 1, 2, 3
        ON CONFLICT (tenant, model, bucket_start) DO UPDATE SET windows = h.windows + excluded.windows,
            drifting = h.drifting + excluded.drifting, tickets = h.tickets + excluded.tickets,
            rank = greatest(h.rank, excluded.rank),
            label_psi = greatest(h.label_psi, excluded.label_psi),
            confidence_psi = greatest(h.confidence_psi, excluded.confidence_psi),
            first_drift = least(h.first_drift, excluded.first_drift),
            reference = CASE WHEN excluded.reference_at >= h.reference_at THEN excluded.reference ELSE h.reference END,
            reference_at = greatest(h.reference_at, excluded.reference_at))
    SELECT count(*)::integer FROM r
$$;

-- 011's rebuild of the hours in [from_ts, to_ts), then of the days holding them (from the
-- hours: a day's hours outside the range are kept as they are).
CREATE OR REPLACE FUNCTION drift_judged_hourly_rebuild(p_tenant text, p_model text, from_ts timestamptz,
                                                       to_ts timestamptz) RETURNS void
LANGUAGE sql AS $$
    DELETE FROM drift_judged_hourly WHERE tenant = p_tenant AND model = p_model
        AND bucket_start >= date_trunc('hour', from_ts, 'UTC') AND bucket_start < to_ts;
    INSERT INTO drift_judged_hourly
    SELECT tenant, model, date_trunc('hour', window_start, 'UTC'), count(*),
           count(*) FILTER (WHERE status = 'drift'), sum(tickets), max(rank),
           max(label_psi) FILTER (WHERE rank >= 2), max(confidence_psi) FILTER (WHERE rank >= 2),
           min(window_start) FILTER (WHERE status = 'drift'),
           (array_agg(reference ORDER BY window_start DESC))[1], max(window_start)
    FROM drift_judged
    WHERE tenant = p_tenant AND model = p_model
      AND window_start >= date_trunc('hour', from_ts, 'UTC') AND window_start < to_ts
    GROUP BY 1, 2, 3;
    DELETE FROM drift_judged_daily WHERE tenant = p_tenant AND model = p_model
        AND bucket_start >= date_trunc('day', from_ts, 'UTC') AND bucket_start < to_ts;
    INSERT INTO drift_judged_daily
    SELECT tenant, model, date_trunc('day', bucket_start, 'UTC'), sum(windows), sum(drifting), sum(tickets),
           max(rank), max(label_psi), max(confidence_psi), min(first_drift),
           (array_agg(reference ORDER BY reference_at DESC))[1], max(reference_at)
    FROM drift_judged_hourly
    WHERE tenant = p_tenant AND model = p_model AND bucket_start >= date_trunc('day', from_ts, 'UTC')
      AND date_trunc('day', bucket_start, 'UTC') < to_ts
    GROUP BY 1, 2, 3;
$$;

-- The first whole UTC day at or after t.
CREATE FUNCTION drift_day_ceil(t timestamptz) RETURNS timestamptz
LANGUAGE sql IMMUTABLE AS $$
    SELECT date_trunc('day', t, 'UTC') + CASE WHEN date_trunc('day', t, 'UTC') < t
                                              THEN interval '1 day' ELSE interval '0' END
$$;

-- 011's report of tenants, the same rows: 'window' buckets from the windows before the first
-- whole hour after p_since (drift_judged), the hours before the first whole day
-- (drift_judged_hourly), the days from then on (drift_judged_daily); 'day' buckets from the
-- days; 'hour' buckets from the hours (as 011: counting hours needs them).
CREATE OR REPLACE FUNCTION drift_report_tenants(p_bucket text, p_since timestamptz, p_tenant text DEFAULT NULL,
                                                p_model text DEFAULT NULL)
RETURNS TABLE (tenant text, model text, worst text, buckets bigint, drifting bigint, tickets bigint,
               drift_since timestamptz, max_label_psi double precision,
               max_confidence_psi double precision, reference text)
LANGUAGE sql STABLE AS $$
    WITH h AS (
        SELECT h.tenant, h.model, h.bucket_start AS b, h.windows, h.drifting, h.tickets, h.rank,
               h.label_psi, h.confidence_psi, h.first_drift, h.reference, h.reference_at
        FROM drift_judged_daily h
        WHERE p_bucket IN ('window', 'day')
          AND h.bucket_start >= CASE p_bucket WHEN 'window' THEN drift_day_ceil(drift_hour_ceil(p_since))
                                              ELSE date_trunc('day', p_since, 'UTC') END
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
        SELECT j.tenant, j.model, j.window_start, 1, (j.status = 'drift')::int, j.tickets, j.rank,
               CASE WHEN j.rank >= 2 THEN j.label_psi END, CASE WHEN j.rank >= 2 THEN j.confidence_psi END,
               CASE WHEN j.status = 'drift' THEN j.window_start END, j.reference, j.window_start
        FROM drift_judged j
        WHERE p_bucket = 'window' AND j.window_start >= p_since AND j.window_start < drift_hour_ceil(p_since)
          AND (p_tenant IS NULL OR j.tenant = p_tenant) AND (p_model IS NULL OR j.model = p_model))
    SELECT h.tenant::text, h.model::text, drift_rank_status(max(h.rank)),
           CASE p_bucket WHEN 'window' THEN sum(h.windows)::bigint ELSE count(*) END,
           CASE p_bucket WHEN 'window' THEN sum(h.drifting)::bigint ELSE count(*) FILTER (WHERE h.rank = 4) END,
           sum(h.tickets)::bigint,
           CASE p_bucket WHEN 'window' THEN min(h.first_drift) ELSE min(h.b) FILTER (WHERE h.rank = 4) END,
           max(h.label_psi), max(h.confidence_psi),
           (array_agg(h.reference ORDER BY h.reference_at DESC))[1]
    FROM h GROUP BY h.tenant, h.model
    ORDER BY max(h.rank) DESC, max(greatest(h.label_psi, h.confidence_psi)) DESC NULLS LAST, h.tenant, h.model
$$;

-- 011's worst buckets, the 'day' buckets from the days (ties by tenant and model).
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
        FROM drift_judged j
        WHERE j.window_start >= p_since AND (p_tenant IS NULL OR j.tenant = p_tenant)
          AND (p_model IS NULL OR j.model = p_model)
        ORDER BY j.rank DESC, greatest(j.label_psi, j.confidence_psi) DESC NULLS LAST, j.window_start DESC
        LIMIT p_limit;
    ELSE
        RETURN QUERY
        SELECT h.bucket_start, CASE WHEN p_bucket = 'day' THEN 86400 ELSE 3600 END, h.tenant::text,
               h.model::text, drift_rank_status(h.rank), h.tickets, h.label_psi, NULL::float8,
               h.confidence_psi, NULL::float8, NULL::float8, NULL::float8, NULL::integer, NULL::integer
        FROM (SELECT * FROM drift_judged_hourly x
              WHERE p_bucket = 'hour' AND x.bucket_start >= date_trunc('hour', p_since, 'UTC')
              UNION ALL
              SELECT * FROM drift_judged_daily x
              WHERE p_bucket = 'day' AND x.bucket_start >= date_trunc('day', p_since, 'UTC')) h
        WHERE (p_tenant IS NULL OR h.tenant = p_tenant) AND (p_model IS NULL OR h.model = p_model)
        ORDER BY h.rank DESC, greatest(h.label_psi, h.confidence_psi) DESC NULLS LAST, h.bucket_start DESC, h.tenant, h.model
        LIMIT p_limit;
    END IF;
END $$;
