-- The worker's per-window statements no longer add every window to its day.
--
-- 015 added each statement's rows to their hour and to their day, in drift_hourly and
-- drift_daily (the trigger on drift_windows) and in drift_judged_hourly and drift_judged_daily
-- (drift_judged_store): two upserts per tenant and window where one is needed. The days now
-- take whole hours from the hourly roll-ups, once an hour: drift_rollup_mark holds, for each
-- day roll-up, the hour before which its days hold every hour (done_before). A statement
-- with rows of a later hour adds the hours from the mark to that hour to their days and moves
-- the mark; rows before the mark (a late worker, a delete) still go to their day at once.
-- The readers of the days (drift_windows_sum, the report's days) take the hours at or after
-- the mark from the hourly roll-ups. Same sums (test_drift_scale compares them with raw sums).

CREATE TABLE drift_rollup_mark (
    rollup      text PRIMARY KEY,
    -- the days of rollup hold every hour before this one (and none after)
    done_before timestamptz NOT NULL
);
-- 015 added every hour to its day: the marks start after the newest hour
INSERT INTO drift_rollup_mark
SELECT 'drift_daily', coalesce((SELECT max(bucket_start) FROM drift_hourly) + interval '1 hour', '-infinity')
UNION ALL
SELECT 'drift_judged_daily',
       coalesce((SELECT max(bucket_start) FROM drift_judged_hourly) + interval '1 hour', '-infinity');

-- The mark of a roll-up, for the readers. A function rather than a subquery: the planner
-- evaluates a stable function when it estimates (a subquery's value it cannot see, and costs
-- a range from it as a third of the table: enough to compile a report with JIT).
CREATE FUNCTION drift_rollup_done_before(p_rollup text) RETURNS timestamptz
LANGUAGE sql STABLE AS $$
    SELECT m.done_before FROM drift_rollup_mark m WHERE m.rollup = p_rollup
$$;

-- ---------------------------------------------------------------------------------------
-- 015's roll-up trigger: every row to its hour; to its day only before the mark.
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
    mark timestamptz;
    newest timestamptz;
BEGIN
    -- the hours before the mark are in drift_daily; it cannot move until this statement commits
    -- (concurrent writers take turns here)
    SELECT done_before INTO mark FROM drift_rollup_mark WHERE rollup = 'drift_daily' FOR UPDATE;
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
              FROM g WHERE g.b < $1 GROUP BY 1, 2, 3) g
        LEFT JOIN (SELECT tenant, model, b, jsonb_object_agg(key, c) AS lc
                   FROM (SELECT tenant, model, date_trunc('day', b, 'UTC') AS b, key, sum(c) AS c FROM gl
                         WHERE gl.b < $1 GROUP BY 1, 2, 3, 4) x
                   WHERE c <> 0 GROUP BY 1, 2, 3) l ON l.tenant = g.tenant AND l.model = g.model AND l.b = g.b
        ORDER BY 1, 2, 3 %s$$, delta, upsert, upsert) USING mark;
    -- rows of a later hour than the mark: the hours from the mark to theirs are whole (a
    -- worker writes its windows in order), add them to their days and move the mark
    IF TG_OP <> 'DELETE' THEN
        EXECUTE $$SELECT date_trunc('hour', max(window_start), 'UTC') FROM new_rows$$ INTO newest;
        IF newest > mark THEN
            EXECUTE format($$
                INSERT INTO drift_daily AS h
                SELECT g.tenant, g.model, g.b, g.n, coalesce(l.lc, '{}'::jsonb), g.ch, g.cs, g.tr, g.tk, g.o
                FROM (SELECT tenant, model, date_trunc('day', bucket_start, 'UTC') AS b, sum(tickets)::bigint AS n,
                             ARRAY[sum(confidence_hist[1]), sum(confidence_hist[2]), sum(confidence_hist[3]),
                                   sum(confidence_hist[4]), sum(confidence_hist[5]), sum(confidence_hist[6]),
                                   sum(confidence_hist[7]), sum(confidence_hist[8]), sum(confidence_hist[9]),
                                   sum(confidence_hist[10])]::bigint[] AS ch,
                             sum(confidence_sum) AS cs, sum(truncated)::bigint AS tr, sum(tokens)::bigint AS tk,
                             bool_or(overflow) AS o
                      FROM drift_hourly WHERE bucket_start >= $1 AND bucket_start < $2 GROUP BY 1, 2, 3) g
                LEFT JOIN (SELECT tenant, model, b, jsonb_object_agg(key, c) AS lc
                           FROM (SELECT x.tenant, x.model, date_trunc('day', x.bucket_start, 'UTC') AS b, e.key,
                                        sum(e.value::bigint) AS c
                                 FROM drift_hourly x, jsonb_each_text(x.label_counts) e
                                 WHERE x.bucket_start >= $1 AND x.bucket_start < $2 GROUP BY 1, 2, 3, 4) y
                           WHERE c <> 0 GROUP BY 1, 2, 3) l ON l.tenant = g.tenant AND l.model = g.model AND l.b = g.b
                ORDER BY 1, 2, 3 %s$$, upsert) USING mark, newest;
            UPDATE drift_rollup_mark SET done_before = newest WHERE rollup = 'drift_daily';
        END IF;
    END IF;
    RETURN NULL;
END $f$;

-- 009's range sums, whole days only before the mark's day (the hours after it from drift_hourly).
CREATE OR REPLACE FUNCTION drift_windows_sum(p_tenant text, p_model text, from_ts timestamptz, to_ts timestamptz,
                                             OUT label_counts jsonb, OUT confidence_hist bigint[], OUT tickets bigint)
LANGUAGE sql STABLE AS $$
    WITH b AS (SELECT from_ts AS f, to_ts AS t,
                      -- whole days [d0, d1), whole hours [h0, d0) and [d1, h1), raw the rest
                      date_trunc('hour', from_ts, 'UTC') + CASE WHEN date_trunc('hour', from_ts, 'UTC') < from_ts
                                                          THEN interval '1 hour' ELSE interval '0' END AS h0,
                      date_trunc('hour', to_ts, 'UTC') AS h1),
         bd AS (SELECT b.*, date_trunc('day', h0, 'UTC') + CASE WHEN date_trunc('day', h0, 'UTC') < h0
                                                          THEN interval '1 day' ELSE interval '0' END AS d0,
                       -- days wholly before the roll-up mark only (017)
                       least(date_trunc('day', h1, 'UTC'),
                             date_trunc('day', drift_rollup_done_before('drift_daily'), 'UTC')) AS d1 FROM b),
         r AS (SELECT bd.*, d0 < d1 AS has_days, h0 < h1 AS has_hours FROM bd),
         parts AS (
            SELECT d.label_counts AS lc, d.confidence_hist AS h, d.tickets AS n
            FROM r, drift_daily d
            WHERE r.has_days AND d.tenant = p_tenant AND d.model = p_model
              AND d.bucket_start >= r.d0 AND d.bucket_start < r.d1
            UNION ALL
            SELECT d.label_counts, d.confidence_hist, d.tickets
            FROM r, drift_hourly d
            WHERE r.has_hours AND d.tenant = p_tenant AND d.model = p_model
              AND ((r.has_days AND ((d.bucket_start >= r.h0 AND d.bucket_start < r.d0)
                                    OR (d.bucket_start >= r.d1 AND d.bucket_start < r.h1)))
                   OR (NOT r.has_days AND d.bucket_start >= r.h0 AND d.bucket_start < r.h1))
            -- the raw edges [from_ts, h0) and [h1, to_ts) (all of it without whole hours), as
            -- expressions of the parameters: partitions outside them are pruned at start
            UNION ALL
            SELECT w.label_counts, w.confidence_hist::bigint[], w.tickets
            FROM drift_windows w
            WHERE w.tenant = p_tenant AND w.model = p_model AND w.window_start >= from_ts
              AND w.window_start < CASE WHEN drift_hour_ceil(from_ts) < date_trunc('hour', to_ts, 'UTC')
                                        THEN drift_hour_ceil(from_ts) ELSE to_ts END
            UNION ALL
            SELECT w.label_counts, w.confidence_hist::bigint[], w.tickets
            FROM drift_windows w
            WHERE w.tenant = p_tenant AND w.model = p_model
              AND drift_hour_ceil(from_ts) < date_trunc('hour', to_ts, 'UTC')
              AND w.window_start >= date_trunc('hour', to_ts, 'UTC') AND w.window_start < to_ts)
    -- one pass over the parts (as 004 summed windows), not a pairwise merge per part
    SELECT (SELECT jsonb_object_agg(l.key, l.n) FROM
              (SELECT e.key, sum(e.value::bigint) AS n FROM parts, jsonb_each_text(parts.lc) e
               GROUP BY e.key) l WHERE l.n <> 0),
           (SELECT array_agg(x.n ORDER BY x.i) FROM
              (SELECT u.i, sum(u.c)::bigint AS n FROM parts, unnest(parts.h) WITH ORDINALITY u(c, i)
               GROUP BY u.i) x),
           (SELECT sum(parts.n)::bigint FROM parts)
$$;

-- ---------------------------------------------------------------------------------------
-- 015's store of judged windows: every row to its hour; to its day only before the mark.
CREATE OR REPLACE FUNCTION drift_judged_store(p_rows drift_judged[]) RETURNS integer
LANGUAGE plpgsql AS $f$
DECLARE mark timestamptz; newest timestamptz; n integer;
BEGIN
    -- the hours before the mark are in drift_judged_daily; it cannot move until this commits
    SELECT done_before INTO mark FROM drift_rollup_mark WHERE rollup = 'drift_judged_daily' FOR UPDATE;
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
        FROM hours WHERE bucket_start < mark GROUP BY 1, 2, 3 ORDER BY 1, 2, 3
        ON CONFLICT (tenant, model, bucket_start) DO UPDATE SET windows = h.windows + excluded.windows,
            drifting = h.drifting + excluded.drifting, tickets = h.tickets + excluded.tickets,
            rank = greatest(h.rank, excluded.rank),
            label_psi = greatest(h.label_psi, excluded.label_psi),
            confidence_psi = greatest(h.confidence_psi, excluded.confidence_psi),
            first_drift = least(h.first_drift, excluded.first_drift),
            reference = CASE WHEN excluded.reference_at >= h.reference_at THEN excluded.reference ELSE h.reference END,
            reference_at = greatest(h.reference_at, excluded.reference_at))
    SELECT count(*)::integer INTO n FROM r;
    -- rows of a later hour than the mark: the hours from the mark to theirs are whole, add them
    -- to their days and move the mark
    newest := (SELECT date_trunc('hour', max(u.window_start), 'UTC') FROM unnest(p_rows) u);
    IF newest > mark THEN
        INSERT INTO drift_judged_daily AS h (tenant, model, bucket_start, windows, drifting, tickets,
            rank, label_psi, confidence_psi, first_drift, reference, reference_at)
        SELECT x.tenant, x.model, date_trunc('day', x.bucket_start, 'UTC'), sum(x.windows), sum(x.drifting),
               sum(x.tickets), max(x.rank), max(x.label_psi), max(x.confidence_psi), min(x.first_drift),
               (array_agg(x.reference ORDER BY x.reference_at DESC))[1], max(x.reference_at)
        FROM drift_judged_hourly x WHERE x.bucket_start >= mark AND x.bucket_start < newest
        GROUP BY 1, 2, 3 ORDER BY 1, 2, 3
        ON CONFLICT (tenant, model, bucket_start) DO UPDATE SET windows = h.windows + excluded.windows,
            drifting = h.drifting + excluded.drifting, tickets = h.tickets + excluded.tickets,
            rank = greatest(h.rank, excluded.rank),
            label_psi = greatest(h.label_psi, excluded.label_psi),
            confidence_psi = greatest(h.confidence_psi, excluded.confidence_psi),
            first_drift = least(h.first_drift, excluded.first_drift),
            reference = CASE WHEN excluded.reference_at >= h.reference_at THEN excluded.reference ELSE h.reference END,
            reference_at = greatest(h.reference_at, excluded.reference_at);
        UPDATE drift_rollup_mark SET done_before = newest WHERE rollup = 'drift_judged_daily';
    END IF;
    RETURN n;
END $f$;

-- The planner cannot see p_rows' size in a PL/pgSQL statement and costs the store's lookups
-- high enough to compile it (JIT): over a second of CPU for a thousand rows.
ALTER FUNCTION drift_judged_store(drift_judged[]) SET jit = off;

-- 015's rebuild, the days from their hours before the mark only.
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
      AND bucket_start < drift_rollup_done_before('drift_judged_daily')
    GROUP BY 1, 2, 3;
$$;

-- The judged days from p_from on (of one tenant and model, or all): drift_judged_daily's rows
-- with the hours at or after the mark added (drift_judged_daily's columns; one row a day).
CREATE FUNCTION drift_judged_days(p_from timestamptz, p_tenant text DEFAULT NULL, p_model text DEFAULT NULL)
RETURNS SETOF drift_judged_daily
-- PL/pgSQL: planned only when called ('day' buckets), not with every report that names it
LANGUAGE plpgsql STABLE AS $f$
BEGIN
    RETURN QUERY
    WITH x AS (
        SELECT d.* FROM drift_judged_daily d
        WHERE d.bucket_start >= date_trunc('day', p_from, 'UTC')
          AND (p_tenant IS NULL OR d.tenant = p_tenant) AND (p_model IS NULL OR d.model = p_model)
        UNION ALL
        SELECT h.tenant, h.model, date_trunc('day', h.bucket_start, 'UTC'), h.windows, h.drifting, h.tickets,
               h.rank, h.label_psi, h.confidence_psi, h.first_drift, h.reference, h.reference_at
        FROM drift_judged_hourly h
        WHERE h.bucket_start >= greatest(date_trunc('day', p_from, 'UTC'),
                                         drift_rollup_done_before('drift_judged_daily'))
          AND (p_tenant IS NULL OR h.tenant = p_tenant) AND (p_model IS NULL OR h.model = p_model))
    SELECT x.tenant, x.model, x.bucket_start, sum(x.windows)::bigint, sum(x.drifting)::bigint,
           sum(x.tickets)::bigint, max(x.rank), max(x.label_psi), max(x.confidence_psi), min(x.first_drift),
           (array_agg(x.reference ORDER BY x.reference_at DESC))[1], max(x.reference_at)
    FROM x GROUP BY x.tenant, x.model, x.bucket_start;
END $f$;

-- 015's report of tenants and of the worst buckets: 'day' buckets from drift_judged_days;
-- the tenants' 'window' buckets from the days and the hours before the first whole day and
-- after the mark.
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
              SELECT * FROM drift_judged_days(date_trunc('day', p_since, 'UTC'), p_tenant, p_model) x
              WHERE p_bucket = 'day') h
        WHERE (p_tenant IS NULL OR h.tenant = p_tenant) AND (p_model IS NULL OR h.model = p_model)
        ORDER BY h.rank DESC, greatest(h.label_psi, h.confidence_psi) DESC NULLS LAST, h.bucket_start DESC, h.tenant, h.model
        LIMIT p_limit;
    END IF;
END $$;
