-- Drift that stays fast with months of windows and thousands of tenants.
--
-- (1) drift_windows is partitioned by day (window_start), so a query over a time range reads
--     only that range's partitions and retention drops whole days (drift_partitions_maintain below).
-- (2) Hour and day roll-ups (drift_hourly, drift_daily) are kept as windows are written: a
--     statement trigger on drift_windows adds what each INSERT, upsert or DELETE changed. The
--     roll-ups outlive the raw windows' retention.
-- (3) Every sum over a time range (drift_windows_sum: trailing references, pinned baselines)
--     takes whole days from drift_daily, whole hours from drift_hourly and only the ragged
--     edges from drift_windows: at most 6 + 46 + 2 * (3600 / window_s) rows, whatever the
--     history. drift_scores('hour' | 'day') reads drift_hourly. The scores and statuses are
--     those of 004 (same functions, same sums; tests/drift_scores_check.py).
-- (4) drift_status holds each tenant and model's newest judged window; the worker refreshes it
--     after each window it writes (drift_status_refresh) and `reclass jobs`, /metrics and the
--     alert read it by its primary key.
--
-- Hour and day buckets are UTC hours and days (the same as local ones in any whole-hour time
-- zone); the 'hour' and 'day' buckets of drift_scores are whole, the one holding p_since too.
-- ticket_results stays one table: the sink's exactly-once upsert needs the global unique key
-- (job_id, ticket_id), which a time-partitioned table cannot enforce (ARCHITECTURE.md, "Data
-- over time"). It gets the index of "this tenant's results, last 24 h".

-- Settings: retention of raw windows (days). reclass_settings is the one home of such numbers.
CREATE TABLE reclass_settings (
    name  text PRIMARY KEY,
    value text NOT NULL,
    about text NOT NULL
);
INSERT INTO reclass_settings VALUES
    ('drift_windows_retention', '35 days',
     'raw drift_windows partitions (whole UTC days) older than this are dropped by '
     'drift_partitions_maintain(); roll-ups (drift_hourly, drift_daily) and drift_status are kept. '
     'Must cover drift_settings().trailing_span plus a day for window scores against the trailing reference.');

-- ---------------------------------------------------------------------------------------
-- Sums of label count objects and histograms (aggregates: used by roll-ups and range sums).
CREATE FUNCTION drift_labels_add(a jsonb, b jsonb) RETURNS jsonb
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT coalesce(jsonb_object_agg(k, n) FILTER (WHERE n <> 0), '{}'::jsonb) FROM (
        SELECT k, sum(v::bigint) AS n FROM (
            SELECT key AS k, value AS v FROM jsonb_each_text(coalesce(a, '{}'::jsonb))
            UNION ALL SELECT key, value FROM jsonb_each_text(coalesce(b, '{}'::jsonb))) u
        GROUP BY k) g
$$;
CREATE FUNCTION drift_labels_neg(a jsonb) RETURNS jsonb
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT coalesce(jsonb_object_agg(key, -(value::bigint)), '{}'::jsonb) FROM jsonb_each_text(a)
$$;
CREATE FUNCTION drift_hist_add(a bigint[], b bigint[]) RETURNS bigint[]
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT CASE WHEN a IS NULL THEN b WHEN b IS NULL THEN a ELSE
        ARRAY(SELECT x + y FROM unnest(a, b) WITH ORDINALITY AS u(x, y, i) ORDER BY i) END
$$;
CREATE AGGREGATE drift_labels_sum(jsonb) (SFUNC = drift_labels_add, STYPE = jsonb);
CREATE AGGREGATE drift_hist_sum(bigint[]) (SFUNC = drift_hist_add, STYPE = bigint[]);

-- ---------------------------------------------------------------------------------------
-- Roll-ups: one row per (tenant, model, UTC hour | UTC day), summed over windows and workers.
CREATE TABLE drift_hourly (
    tenant          text COLLATE "C" NOT NULL,
    model           text COLLATE "C" NOT NULL,
    bucket_start    timestamptz NOT NULL,
    tickets         bigint NOT NULL,
    label_counts    jsonb NOT NULL,
    confidence_hist bigint[] NOT NULL,
    confidence_sum  double precision NOT NULL,
    truncated       bigint NOT NULL,
    tokens          bigint NOT NULL,
    -- some window of the bucket had tenants folded into '_other' by a worker's cap
    overflow        boolean NOT NULL,
    PRIMARY KEY (tenant, model, bucket_start)
);
CREATE INDEX drift_hourly_time ON drift_hourly (bucket_start);
CREATE TABLE drift_daily (LIKE drift_hourly INCLUDING ALL);

-- Adds what a statement changed in drift_windows (new rows, minus old ones) to both roll-ups, in key order (concurrent
-- writers lock rows in one order).
CREATE FUNCTION drift_rollup_apply() RETURNS trigger LANGUAGE plpgsql AS $f$
DECLARE
    plus constant text := $$SELECT tenant, model, date_trunc('hour', window_start, 'UTC') AS bucket_start,
        tickets, label_counts, confidence_hist::bigint[] AS confidence_hist, confidence_sum,
        truncated::bigint AS truncated, tokens, overflow FROM new_rows$$;
    minus constant text := $$SELECT tenant, model, date_trunc('hour', window_start, 'UTC') AS bucket_start,
        -tickets AS tickets, drift_labels_neg(label_counts) AS label_counts,
        ARRAY(SELECT -c FROM unnest(confidence_hist::bigint[]) WITH ORDINALITY u(c, i) ORDER BY i)
            AS confidence_hist,
        -confidence_sum AS confidence_sum, -truncated::bigint AS truncated, -tokens AS tokens,
        false AS overflow FROM old_rows$$;
    upsert constant text := $$ ON CONFLICT (tenant, model, bucket_start) DO UPDATE SET
        tickets = h.tickets + excluded.tickets,
        label_counts = drift_labels_add(h.label_counts, excluded.label_counts),
        confidence_hist = drift_hist_add(h.confidence_hist, excluded.confidence_hist),
        confidence_sum = h.confidence_sum + excluded.confidence_sum,
        truncated = h.truncated + excluded.truncated, tokens = h.tokens + excluded.tokens,
        overflow = h.overflow OR excluded.overflow RETURNING 1$$;
    delta text;
BEGIN
    delta := CASE TG_OP WHEN 'INSERT' THEN plus WHEN 'UPDATE' THEN plus || ' UNION ALL ' || minus
                        ELSE minus END;
    EXECUTE format($$
        WITH d AS (%s),
        hh AS (INSERT INTO drift_hourly AS h
               SELECT tenant, model, bucket_start, sum(tickets), drift_labels_sum(label_counts),
                      drift_hist_sum(confidence_hist), sum(confidence_sum), sum(truncated),
                      sum(tokens), bool_or(overflow)
               FROM d GROUP BY 1, 2, 3 ORDER BY 1, 2, 3 %s)
        INSERT INTO drift_daily AS h
        SELECT tenant, model, date_trunc('day', bucket_start, 'UTC'), sum(tickets),
               drift_labels_sum(label_counts), drift_hist_sum(confidence_hist), sum(confidence_sum),
               sum(truncated), sum(tokens), bool_or(overflow)
        FROM d GROUP BY 1, 2, 3 ORDER BY 1, 2, 3 %s$$, delta, upsert, upsert);
    RETURN NULL;
END $f$;

-- ---------------------------------------------------------------------------------------
-- drift_windows, partitioned by UTC day. The old table's rows move over through the new
-- table's triggers, which fills the roll-ups.
DROP VIEW drift_by_window;
ALTER TABLE drift_windows RENAME TO drift_windows_008;
ALTER TABLE drift_windows_008 RENAME CONSTRAINT drift_windows_pkey TO drift_windows_008_pkey;
ALTER INDEX drift_windows_tenant RENAME TO drift_windows_008_tenant;

CREATE TABLE drift_windows (
    window_start    timestamptz NOT NULL,
    window_s        integer NOT NULL CHECK (window_s > 0),
    tenant          text COLLATE "C" NOT NULL,
    model           text COLLATE "C" NOT NULL,
    worker          text COLLATE "C" NOT NULL,
    -- the worker folded tenants past its --drift-max-tenants into '_other' in this window: the
    -- '_other' row, and every row of that worker and window (a tenant folded on one worker and
    -- named on another has a partial sum)
    overflow        boolean NOT NULL DEFAULT false,
    tickets         bigint NOT NULL CHECK (tickets >= 0),
    label_counts    jsonb NOT NULL,
    confidence_hist integer[] NOT NULL CHECK (cardinality(confidence_hist) = 10),
    confidence_sum  double precision NOT NULL DEFAULT 0,
    mean_confidence real,
    truncated       integer NOT NULL DEFAULT 0,
    tokens          bigint NOT NULL DEFAULT 0,
    updated_at      timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (window_start, tenant, model, worker)
) PARTITION BY RANGE (window_start);
-- a row outside every daily partition lands here rather than failing the worker's write
CREATE TABLE drift_windows_default PARTITION OF drift_windows DEFAULT;
CREATE INDEX drift_windows_tenant ON drift_windows (tenant, model, window_start);

CREATE TRIGGER drift_windows_rollup_insert AFTER INSERT ON drift_windows
    REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION drift_rollup_apply();
CREATE TRIGGER drift_windows_rollup_update AFTER UPDATE ON drift_windows
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION drift_rollup_apply();
CREATE TRIGGER drift_windows_rollup_delete AFTER DELETE ON drift_windows
    REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION drift_rollup_apply();

-- Daily partitions drift_windows_YYYYMMDD for every UTC day in [from_ts, to_ts). Serialised
-- by an advisory lock (two workers may call it at once).
CREATE FUNCTION drift_partitions_ensure(from_ts timestamptz, to_ts timestamptz) RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE d timestamptz; made integer := 0; name text;
BEGIN
    PERFORM pg_advisory_xact_lock(hashtext('drift_windows partitions'));
    d := date_trunc('day', from_ts, 'UTC');
    WHILE d < to_ts LOOP
        name := 'drift_windows_' || to_char(d AT TIME ZONE 'UTC', 'YYYYMMDD');
        IF to_regclass(name) IS NULL THEN
            EXECUTE format('CREATE TABLE %I PARTITION OF drift_windows FOR VALUES FROM (%L) TO (%L)',
                           name, d, d + interval '1 day');
            made := made + 1;
        END IF;
        d := d + interval '1 day';
    END LOOP;
    RETURN made;
END $$;

-- Keeps partitions a week ahead of p_now and drops the daily ones wholly older than the
-- retention setting; returns the number dropped. Called by drift_status_refresh (each
-- worker, each window: a catalog lookup when there is nothing to do), or by hand / cron.
CREATE FUNCTION drift_partitions_maintain(p_now timestamptz DEFAULT now()) RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE keep interval; cut timestamptz; r record; dropped integer := 0;
BEGIN
    IF to_regclass('drift_windows_' || to_char((p_now + interval '2 days') AT TIME ZONE 'UTC', 'YYYYMMDD')) IS NULL THEN
        PERFORM drift_partitions_ensure(p_now - interval '1 day', p_now + interval '8 days');
    END IF;
    SELECT value::interval INTO keep FROM reclass_settings WHERE name = 'drift_windows_retention';
    cut := date_trunc('day', p_now - keep, 'UTC');
    FOR r IN SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
             WHERE i.inhparent = 'drift_windows'::regclass AND c.relname ~ '^drift_windows_[0-9]{8}$'
               AND to_timestamp(substr(c.relname, 15), 'YYYYMMDD') AT TIME ZONE 'UTC' + interval '1 day'
                   <= cut AT TIME ZONE 'UTC'
    LOOP
        PERFORM pg_advisory_xact_lock(hashtext('drift_windows partitions'));
        EXECUTE format('DROP TABLE IF EXISTS %I', r.relname);
        dropped := dropped + 1;
    END LOOP;
    RETURN dropped;
END $$;

SELECT drift_partitions_ensure(least(coalesce((SELECT min(window_start) FROM drift_windows_008), now()), now()),
                               greatest(coalesce((SELECT max(window_start) FROM drift_windows_008), now()), now())
                               + interval '8 days');
INSERT INTO drift_windows (window_start, window_s, tenant, model, worker, overflow, tickets,
                           label_counts, confidence_hist, confidence_sum, mean_confidence,
                           truncated, tokens, updated_at)
SELECT window_start, window_s, tenant, model, worker, overflow, tickets, label_counts,
       confidence_hist, confidence_sum, mean_confidence, truncated, tokens, updated_at
FROM drift_windows_008;
DROP TABLE drift_windows_008;

CREATE VIEW drift_by_window AS
SELECT window_start, window_s, tenant, model, bool_or(overflow) AS overflow,
       sum(tickets) AS tickets,
       (sum(confidence_sum) / NULLIF(sum(tickets), 0))::real AS mean_confidence,
       sum(truncated) AS truncated, sum(tokens) AS tokens, count(*) AS workers
FROM drift_windows
GROUP BY window_start, window_s, tenant, model;

-- ---------------------------------------------------------------------------------------
-- The first whole UTC hour at or after t.
CREATE FUNCTION drift_hour_ceil(t timestamptz) RETURNS timestamptz
LANGUAGE sql IMMUTABLE AS $$
    SELECT date_trunc('hour', t, 'UTC') + CASE WHEN date_trunc('hour', t, 'UTC') < t
                                               THEN interval '1 hour' ELSE interval '0' END
$$;

-- Range sums from the roll-ups: whole UTC days from drift_daily, whole hours from
-- drift_hourly, the edges from drift_windows. Same result as 004's sum over raw windows.
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
                       date_trunc('day', h1, 'UTC') AS d1 FROM b),
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

-- 004's drift_compare, the same formulas in PL/pgSQL: a SQL function called per row re-plans
-- its body and the bodies of drift_psi / drift_js at every call (about 17 ms a call); a
-- PL/pgSQL body keeps its plans for the session.
CREATE OR REPLACE FUNCTION drift_compare(cur_labels jsonb, cur_hist bigint[], cur_tickets bigint,
                              ref_labels jsonb, ref_hist bigint[], ref_tickets bigint,
                              OUT label_psi double precision, OUT label_js double precision,
                              OUT confidence_psi double precision, OUT confidence_js double precision,
                              OUT low_confidence_share double precision,
                              OUT low_confidence_share_ref double precision,
                              OUT low_confidence_change double precision,
                              OUT labels_new text[], OUT labels_gone text[], OUT status text)
LANGUAGE plpgsql STABLE AS $$
DECLARE s record; ref_bins bigint; ch jsonb; rh jsonb;
BEGIN
    SELECT * INTO s FROM drift_settings();
    ch := drift_hist_jsonb(cur_hist);
    rh := drift_hist_jsonb(ref_hist);
    label_psi := drift_psi(cur_labels, ref_labels);
    label_js := drift_js(cur_labels, ref_labels);
    confidence_psi := drift_psi(ch, rh);
    confidence_js := drift_js(ch, rh);
    -- bins 0-4: confidence < 0.5 (drift_settings().low_confidence)
    low_confidence_share := (SELECT sum(c) FROM unnest(cur_hist[1:5]) c)::float8 / NULLIF(cur_tickets, 0);
    low_confidence_share_ref := (SELECT sum(c) FROM unnest(ref_hist[1:5]) c)::float8 / NULLIF(ref_tickets, 0);
    low_confidence_change := low_confidence_share - low_confidence_share_ref;
    ref_bins := (SELECT count(*) FROM jsonb_object_keys(ref_labels));
    -- appeared: in the window, never in the reference
    labels_new := ARRAY(SELECT k FROM jsonb_object_keys(cur_labels) k
                        WHERE ref_labels IS NOT NULL AND NOT ref_labels ? k ORDER BY k);
    -- vanished: none in the window where the reference expects at least 5
    labels_gone := ARRAY(SELECT e.key FROM jsonb_each_text(ref_labels) e
                         WHERE e.value::float8 / ref_tickets * cur_tickets >= 5
                           AND (cur_labels IS NULL OR NOT cur_labels ? e.key) ORDER BY e.key);
    status := CASE WHEN coalesce(ref_tickets, 0) = 0 THEN 'no_baseline'
                   WHEN cur_tickets < s.min_tickets_per_bin * greatest(ref_bins, 10) THEN 'sparse'
                   WHEN greatest(label_psi, confidence_psi) >= s.psi_drift THEN 'drift'
                   WHEN greatest(label_psi, confidence_psi) >= s.psi_watch THEN 'watch'
                   ELSE 'ok' END;
END $$;

-- 004's scores of the buckets starting in [p_since, p_until); the current distributions of
-- 'hour' and 'day' buckets read from drift_hourly. drift_scores is this with no end.
CREATE FUNCTION drift_scores_between(p_bucket text, p_since timestamptz, p_until timestamptz,
                                     p_tenant text DEFAULT NULL, p_model text DEFAULT NULL)
RETURNS TABLE (bucket_start timestamptz, bucket_s integer, tenant text, model text, tickets bigint,
               label_psi double precision, label_js double precision,
               confidence_psi double precision, confidence_js double precision,
               low_confidence_share double precision, low_confidence_share_ref double precision,
               low_confidence_change double precision, labels_new text[], labels_gone text[],
               status text, reference text, ref_tickets bigint)
LANGUAGE plpgsql STABLE AS $$
BEGIN
    IF p_bucket NOT IN ('window', 'hour', 'day') THEN
        RAISE invalid_parameter_value USING MESSAGE = format(
            'drift_scores: bucket %s: use window, hour or day', p_bucket);
    END IF;
    RETURN QUERY
    WITH cur AS (
        SELECT d.window_start AS b, d.window_s AS bs, d.tenant AS t, d.model AS m, sum(d.tickets)::bigint AS n,
               nullif(drift_labels_sum(d.label_counts), '{}'::jsonb) AS lc,
               drift_hist_sum(d.confidence_hist::bigint[]) AS h
        FROM drift_windows d
        WHERE p_bucket = 'window' AND d.window_start >= p_since AND d.window_start < p_until
          AND (p_tenant IS NULL OR d.tenant = p_tenant) AND (p_model IS NULL OR d.model = p_model)
        GROUP BY 1, 2, 3, 4
        UNION ALL
        SELECT d.bucket_start, 3600, d.tenant, d.model, d.tickets, nullif(d.label_counts, '{}'::jsonb),
               d.confidence_hist
        FROM drift_hourly d
        WHERE p_bucket = 'hour' AND d.tickets > 0 AND d.bucket_start >= date_trunc('hour', p_since, 'UTC')
          AND d.bucket_start < p_until
          AND (p_tenant IS NULL OR d.tenant = p_tenant) AND (p_model IS NULL OR d.model = p_model)
        UNION ALL
        SELECT date_trunc('day', d.bucket_start), 86400, d.tenant, d.model, sum(d.tickets)::bigint,
               nullif(drift_labels_sum(d.label_counts), '{}'::jsonb), drift_hist_sum(d.confidence_hist)
        FROM drift_hourly d
        WHERE p_bucket = 'day' AND d.tickets > 0 AND d.bucket_start >= date_trunc('day', p_since)
          AND d.bucket_start < p_until
          AND (p_tenant IS NULL OR d.tenant = p_tenant) AND (p_model IS NULL OR d.model = p_model)
        GROUP BY 1, 2, 3, 4)
    SELECT cur.b, cur.bs, cur.t::text, cur.m::text, cur.n,
           sc.label_psi, sc.label_js, sc.confidence_psi, sc.confidence_js,
           sc.low_confidence_share, sc.low_confidence_share_ref, sc.low_confidence_change,
           sc.labels_new, sc.labels_gone, sc.status,
           CASE WHEN pin.id IS NOT NULL THEN format('baseline %s (%s%s)', pin.id, pin.source,
                                                   coalesce(' ' || pin.source_job, ''))
                WHEN tr.tickets IS NOT NULL THEN format('trailing %s', (SELECT trailing_span FROM drift_settings()))
                ELSE 'none' END,
           coalesce(pin.tickets, tr.tickets)
    FROM cur
    LEFT JOIN LATERAL (SELECT * FROM drift_baselines z WHERE z.tenant = cur.t AND z.model = cur.m
                       ORDER BY z.created_at DESC, z.id DESC LIMIT 1) pin ON true
    LEFT JOIN LATERAL (SELECT * FROM drift_windows_sum(cur.t, cur.m,
                                     cur.b - (SELECT trailing_span FROM drift_settings()), cur.b) s
                       WHERE pin.id IS NULL) tr ON true
    CROSS JOIN LATERAL drift_compare(cur.lc, cur.h, cur.n,
                                     coalesce(pin.label_counts, tr.label_counts),
                                     coalesce(pin.confidence_hist, tr.confidence_hist),
                                     coalesce(pin.tickets, tr.tickets)) sc;
END $$;

CREATE OR REPLACE FUNCTION drift_scores(p_bucket text DEFAULT 'window', p_since timestamptz DEFAULT '-infinity',
                                        p_tenant text DEFAULT NULL, p_model text DEFAULT NULL)
RETURNS TABLE (bucket_start timestamptz, bucket_s integer, tenant text, model text, tickets bigint,
               label_psi double precision, label_js double precision,
               confidence_psi double precision, confidence_js double precision,
               low_confidence_share double precision, low_confidence_share_ref double precision,
               low_confidence_change double precision, labels_new text[], labels_gone text[],
               status text, reference text, ref_tickets bigint)
LANGUAGE sql STABLE AS $$
    SELECT * FROM drift_scores_between(p_bucket, p_since, 'infinity', p_tenant, p_model)
$$;

-- Every window's scores, for psql and dashboards: a filter on tenant, model or bucket_start
-- reaches the index of drift_windows (and prunes partitions), each window scored alone.
DROP VIEW drift_window_scores;
CREATE VIEW drift_window_scores AS
SELECT w.bucket_start, s.bucket_s, w.tenant, w.model, s.tickets, s.label_psi, s.label_js,
       s.confidence_psi, s.confidence_js, s.low_confidence_share, s.low_confidence_share_ref,
       s.low_confidence_change, s.labels_new, s.labels_gone, s.status, s.reference, s.ref_tickets
FROM (SELECT DISTINCT window_start AS bucket_start, tenant, model FROM drift_windows) w
CROSS JOIN LATERAL drift_scores_between('window', w.bucket_start, w.bucket_start + interval '1 microsecond',
                                        w.tenant, w.model) s;

-- ---------------------------------------------------------------------------------------
-- Each tenant and model's newest judged window: what `reclass jobs`, reclass_drift_status and
-- the alert read (primary key, or (model, level) for the worst first).
CREATE TABLE drift_status (
    tenant         text COLLATE "C" NOT NULL,
    model          text COLLATE "C" NOT NULL,
    window_start   timestamptz NOT NULL,
    window_s       integer NOT NULL,
    tickets        bigint NOT NULL,
    status         text NOT NULL,
    -- 3 drift, 2 watch, 1 ok, 0 not judged (sparse, no_baseline): reclass_drift_status's value
    level          smallint NOT NULL,
    label_psi      double precision,
    confidence_psi double precision,
    reference      text,
    -- some worker folded tenants into '_other' in that window: the sum may be partial
    overflow       boolean NOT NULL,
    updated_at     timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant, model)
);
CREATE INDEX drift_status_worst ON drift_status (model, level DESC, window_start DESC, tenant);

CREATE FUNCTION drift_level(status text) RETURNS smallint
LANGUAGE sql IMMUTABLE AS $$
    SELECT (CASE status WHEN 'drift' THEN 3 WHEN 'watch' THEN 2 WHEN 'ok' THEN 1 ELSE 0 END)::smallint
$$;

-- Judges the newest window since p_since of every tenant of p_model (over every worker's rows)
-- and stores it in drift_status; returns the number of tenants judged. The worker calls it
-- after each window it writes; a newer status is never replaced by an older one.
CREATE FUNCTION drift_status_refresh(p_model text, p_since timestamptz) RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE n integer;
BEGIN
    PERFORM drift_partitions_maintain();
    -- drift_scores_between('window') of each tenant's newest window, in one statement planned
    -- once (a call per tenant would plan its query per tenant)
    INSERT INTO drift_status AS s (tenant, model, window_start, window_s, tickets, status, level,
                                   label_psi, confidence_psi, reference, overflow)
    SELECT cur.t, p_model, cur.b, cur.bs, cur.n, sc.status, drift_level(sc.status), sc.label_psi,
           sc.confidence_psi,
           CASE WHEN pin.id IS NOT NULL THEN format('baseline %s (%s%s)', pin.id, pin.source,
                                                   coalesce(' ' || pin.source_job, ''))
                WHEN tr.tickets IS NOT NULL THEN format('trailing %s', (SELECT trailing_span FROM drift_settings()))
                ELSE 'none' END,
           cur.o
    FROM (SELECT d.window_start AS b, d.window_s AS bs, d.tenant AS t, sum(d.tickets)::bigint AS n,
                 nullif(drift_labels_sum(d.label_counts), '{}'::jsonb) AS lc,
                 drift_hist_sum(d.confidence_hist::bigint[]) AS h, bool_or(w.overflow) AS o
          FROM (SELECT x.tenant, max(x.window_start) AS newest, bool_or(x.overflow) AS overflow
                FROM drift_windows x WHERE x.model = p_model AND x.window_start >= p_since
                GROUP BY x.tenant) w
          JOIN drift_windows d ON d.tenant = w.tenant AND d.model = p_model AND d.window_start = w.newest
          WHERE d.window_start >= p_since
          GROUP BY 1, 2, 3) cur
    LEFT JOIN LATERAL (SELECT * FROM drift_baselines z WHERE z.tenant = cur.t AND z.model = p_model
                       ORDER BY z.created_at DESC, z.id DESC LIMIT 1) pin ON true
    LEFT JOIN LATERAL (SELECT * FROM drift_windows_sum(cur.t, p_model,
                                     cur.b - (SELECT trailing_span FROM drift_settings()), cur.b) r
                       WHERE pin.id IS NULL) tr ON true
    CROSS JOIN LATERAL drift_compare(cur.lc, cur.h, cur.n,
                                     coalesce(pin.label_counts, tr.label_counts),
                                     coalesce(pin.confidence_hist, tr.confidence_hist),
                                     coalesce(pin.tickets, tr.tickets)) sc
    ORDER BY cur.t
    ON CONFLICT (tenant, model) DO UPDATE SET
        window_start = excluded.window_start, window_s = excluded.window_s,
        tickets = excluded.tickets, status = excluded.status, level = excluded.level,
        label_psi = excluded.label_psi, confidence_psi = excluded.confidence_psi,
        reference = excluded.reference, overflow = excluded.overflow, updated_at = now()
    WHERE excluded.window_start >= s.window_start;
    GET DIAGNOSTICS n = ROW_COUNT;
    RETURN n;
END $$;

-- the newest window of every tenant already stored
SELECT drift_status_refresh(m.model, '-infinity') FROM (SELECT DISTINCT model FROM drift_windows) m;

-- "this tenant's results, last 24 h" (label mix, counts) without reading other tenants' rows
CREATE INDEX ticket_results_tenant_time ON ticket_results (tenant, classified_at) INCLUDE (label, confidence);
