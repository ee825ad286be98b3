-- Scores stored as windows are judged: `reclass drift report` reads them instead of scoring
-- every window of every tenant on each call.
--
-- (1) drift_judged holds every judged window's scores (004's drift_compare columns), written
--     by drift_status_refresh's one statement; partitioned by UTC day like drift_windows and
--     dropped with it (drift_windows_retention).
-- (2) drift_judged_hourly rolls the judged windows up per tenant, model and UTC hour (windows,
--     windows in drift, tickets, worst status, highest PSIs, first drift): the report's
--     per-tenant summary over days reads hours, not windows. It outlives the retention.
--     A window judged again (a late worker's rows) counts once; the worst status and the
--     highest PSIs of an hour keep the worst of every judgment of its windows.
-- (3) Pinning a baseline re-scores the tenant's stored windows against it
--     (drift_judged_rescore), as drift_scores would score them now.
-- Windows stored before this migration keep no scores until judged: the migration stores
-- each tenant's newest judged window (drift_status); drift_scores still scores any window.

-- report order of a status, worst first: 4 drift, 3 watch, 2 ok, 1 sparse, 0 no_baseline
CREATE FUNCTION drift_rank(status text) RETURNS smallint
LANGUAGE sql IMMUTABLE AS $$
    SELECT (CASE status WHEN 'drift' THEN 4 WHEN 'watch' THEN 3 WHEN 'ok' THEN 2
                        WHEN 'sparse' THEN 1 ELSE 0 END)::smallint
$$;
CREATE FUNCTION drift_rank_status(rank smallint) RETURNS text
LANGUAGE sql IMMUTABLE AS $$
    SELECT (ARRAY['no_baseline', 'sparse', 'ok', 'watch', 'drift'])[rank + 1]
$$;

CREATE TABLE drift_judged (
    window_start          timestamptz NOT NULL,
    tenant                text COLLATE "C" NOT NULL,
    model                 text COLLATE "C" NOT NULL,
    window_s              integer NOT NULL,
    tickets               bigint NOT NULL,
    status                text NOT NULL,
    rank                  smallint NOT NULL,
    label_psi             double precision,
    label_js              double precision,
    confidence_psi        double precision,
    confidence_js         double precision,
    low_confidence_share  double precision,
    low_confidence_change double precision,
    labels_new            text[] NOT NULL,
    labels_gone           text[] NOT NULL,
    reference             text NOT NULL,
    ref_tickets           bigint,
    overflow              boolean NOT NULL,
    judged_at             timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (window_start, tenant, model)
) PARTITION BY RANGE (window_start);
CREATE TABLE drift_judged_default PARTITION OF drift_judged DEFAULT;
CREATE INDEX drift_judged_tenant ON drift_judged (tenant, model, window_start);
-- the report's worst windows: the first rows of this order
CREATE INDEX drift_judged_worst ON drift_judged
    (rank DESC, greatest(label_psi, confidence_psi) DESC NULLS LAST, window_start DESC);

CREATE TABLE drift_judged_hourly (
    tenant         text COLLATE "C" NOT NULL,
    model          text COLLATE "C" NOT NULL,
    bucket_start   timestamptz NOT NULL,
    windows        bigint NOT NULL,
    drifting       bigint NOT NULL,
    tickets        bigint NOT NULL,
    rank           smallint NOT NULL,
    -- highest PSIs of the hour's judged (ok, watch, drift) windows
    label_psi      double precision,
    confidence_psi double precision,
    first_drift    timestamptz,
    -- the reference of the hour's newest window
    reference      text NOT NULL,
    reference_at   timestamptz NOT NULL,
    PRIMARY KEY (tenant, model, bucket_start)
);
CREATE INDEX drift_judged_hourly_time ON drift_judged_hourly (bucket_start);

-- Daily partitions <parent>_YYYYMMDD of drift_windows and drift_judged for every UTC day in
-- [from_ts, to_ts).
CREATE OR REPLACE FUNCTION drift_partitions_ensure(from_ts timestamptz, to_ts timestamptz) RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE d timestamptz; made integer := 0; name text; parent text;
BEGIN
    PERFORM pg_advisory_xact_lock(hashtext('drift_windows partitions'));
    FOREACH parent IN ARRAY ARRAY['drift_windows', 'drift_judged'] LOOP
        d := date_trunc('day', from_ts, 'UTC');
        WHILE d < to_ts LOOP
            name := parent || '_' || to_char(d AT TIME ZONE 'UTC', 'YYYYMMDD');
            IF to_regclass(name) IS NULL THEN
                EXECUTE format('CREATE TABLE %I PARTITION OF %I FOR VALUES FROM (%L) TO (%L)',
                               name, parent, d, d + interval '1 day');
                made := made + 1;
            END IF;
            d := d + interval '1 day';
        END LOOP;
    END LOOP;
    RETURN made;
END $$;

-- As 009's, for both partitioned tables: drift_windows_retention applies to both.
CREATE OR REPLACE FUNCTION drift_partitions_maintain(p_now timestamptz DEFAULT now()) RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE keep interval; cut timestamptz; r record; dropped integer := 0;
        ahead constant text := to_char((p_now + interval '2 days') AT TIME ZONE 'UTC', 'YYYYMMDD');
BEGIN
    IF to_regclass('drift_windows_' || ahead) IS NULL OR to_regclass('drift_judged_' || ahead) IS NULL THEN
        PERFORM drift_partitions_ensure(p_now - interval '1 day', p_now + interval '8 days');
    END IF;
    SELECT value::interval INTO keep FROM reclass_settings WHERE name = 'drift_windows_retention';
    cut := date_trunc('day', p_now - keep, 'UTC');
    FOR r IN SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
             WHERE i.inhparent IN ('drift_windows'::regclass, 'drift_judged'::regclass)
               AND c.relname ~ '^drift_(windows|judged)_[0-9]{8}$'
               AND to_timestamp(right(c.relname, 8), 'YYYYMMDD') AT TIME ZONE 'UTC' + interval '1 day'
                   <= cut AT TIME ZONE 'UTC'
    LOOP
        PERFORM pg_advisory_xact_lock(hashtext('drift_windows partitions'));
        EXECUTE format('DROP TABLE IF EXISTS %I', r.relname);
        dropped := dropped + 1;
    END LOOP;
    RETURN dropped;
END $$;
UPDATE reclass_settings SET about = 'raw drift_windows and drift_judged partitions (whole UTC days) '
    'older than this are dropped by drift_partitions_maintain(); roll-ups (drift_hourly, drift_daily, '
    'drift_judged_hourly) and drift_status are kept. Must cover drift_settings().trailing_span plus a '
    'day for window scores against the trailing reference.'
WHERE name = 'drift_windows_retention';
SELECT drift_partitions_ensure(least(coalesce((SELECT min(window_start) FROM drift_windows), now()), now()),
                               greatest(coalesce((SELECT max(window_start) FROM drift_windows), now()), now())
                               + interval '8 days');

-- Rebuilds the hourly roll-up of p_tenant and p_model's judged windows in [from_ts, to_ts)
-- (whole hours) from drift_judged.
CREATE FUNCTION drift_judged_hourly_rebuild(p_tenant text, p_model text, from_ts timestamptz,
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
$$;

-- Stores 004's scores (drift_scores_between('window')) of p_tenant and p_model's stored
-- windows in [from_ts, to_ts) and their hourly roll-ups; returns the windows scored.
CREATE FUNCTION drift_judged_rescore(p_tenant text, p_model text, from_ts timestamptz,
                                     to_ts timestamptz DEFAULT 'infinity') RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE n integer; lo timestamptz;
BEGIN
    -- hours before the oldest stored window keep their roll-up (past the raw retention)
    lo := greatest(from_ts, least(
        (SELECT min(w.window_start) FROM drift_windows w WHERE w.tenant = p_tenant AND w.model = p_model),
        (SELECT min(j.window_start) FROM drift_judged j WHERE j.tenant = p_tenant AND j.model = p_model)));
    IF lo IS NULL THEN
        RETURN 0;
    END IF;
    INSERT INTO drift_judged AS j (window_start, tenant, model, window_s, tickets, status, rank,
        label_psi, label_js, confidence_psi, confidence_js, low_confidence_share,
        low_confidence_change, labels_new, labels_gone, reference, ref_tickets, overflow)
    SELECT s.bucket_start, s.tenant, s.model, s.bucket_s, s.tickets, s.status, drift_rank(s.status),
           s.label_psi, s.label_js, s.confidence_psi, s.confidence_js, s.low_confidence_share,
           s.low_confidence_change, s.labels_new, s.labels_gone, s.reference, s.ref_tickets,
           coalesce((SELECT bool_or(w.overflow) FROM drift_windows w WHERE w.window_start = s.bucket_start
                     AND w.tenant = s.tenant AND w.model = s.model), false)
    FROM drift_scores_between('window', from_ts, to_ts, p_tenant, p_model) s
    ORDER BY 1
    ON CONFLICT (window_start, tenant, model) DO UPDATE SET window_s = excluded.window_s,
        tickets = excluded.tickets, status = excluded.status, rank = excluded.rank,
        label_psi = excluded.label_psi, label_js = excluded.label_js,
        confidence_psi = excluded.confidence_psi, confidence_js = excluded.confidence_js,
        low_confidence_share = excluded.low_confidence_share,
        low_confidence_change = excluded.low_confidence_change, labels_new = excluded.labels_new,
        labels_gone = excluded.labels_gone, reference = excluded.reference,
        ref_tickets = excluded.ref_tickets, overflow = excluded.overflow, judged_at = now();
    GET DIAGNOSTICS n = ROW_COUNT;
    PERFORM drift_judged_hourly_rebuild(p_tenant, p_model, lo, to_ts);
    -- the newest window's status follows the new reference too
    UPDATE drift_status s SET status = j.status, level = drift_level(j.status),
        label_psi = j.label_psi, confidence_psi = j.confidence_psi, reference = j.reference,
        tickets = j.tickets, updated_at = now()
    FROM drift_judged j
    WHERE s.tenant = p_tenant AND s.model = p_model AND j.tenant = s.tenant AND j.model = s.model
      AND j.window_start = s.window_start AND s.window_start >= from_ts AND s.window_start < to_ts;
    RETURN n;
END $$;

-- A pinned baseline changes the scores of every window of its tenant and model: re-score
-- the stored ones (the raw windows within retention).
CREATE FUNCTION drift_baselines_rescore() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM drift_judged_rescore(NEW.tenant, NEW.model, '-infinity');
    RETURN NULL;
END $$;
CREATE TRIGGER drift_baselines_rescore AFTER INSERT ON drift_baselines
    FOR EACH ROW EXECUTE FUNCTION drift_baselines_rescore();

-- ---------------------------------------------------------------------------------------
-- 010's judge, now also storing each judged window's scores (drift_judged, all of 004's
-- drift_compare columns from the same bins) and its hour's roll-up (drift_judged_hourly).
CREATE OR REPLACE FUNCTION drift_status_refresh(p_model text, p_since timestamptz) RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE n integer; st record;
BEGIN
    PERFORM drift_partitions_maintain();
    PERFORM pg_advisory_xact_lock(hashtext('drift_status_refresh'), hashtext(p_model));
    SELECT * INTO st FROM drift_settings();
    WITH newest AS (
        SELECT x.tenant AS t, max(x.window_start) AS b
        FROM drift_windows x WHERE x.model = p_model AND x.window_start >= p_since
        GROUP BY x.tenant),
    -- the newest window's rows (one per worker)
    cw AS MATERIALIZED (
        SELECT w.t, w.b, d.window_s, d.tickets, d.label_counts, d.confidence_hist, d.overflow
        FROM newest w JOIN drift_windows d ON d.tenant = w.t AND d.model = p_model AND d.window_start = w.b
        WHERE d.window_start >= p_since),
    cur AS MATERIALIZED (
        SELECT t, b, min(window_s) AS bs, sum(tickets)::bigint AS n, bool_or(overflow) AS o
        FROM cw GROUP BY t, b),
    -- 009's drift_labels_sum drops labels summing to 0
    cur_lab AS (
        SELECT cw.t, e.key, sum(e.value::bigint) AS c FROM cw, jsonb_each_text(cw.label_counts) e
        GROUP BY 1, 2 HAVING sum(e.value::bigint) <> 0),
    -- histograms summed element by element (shape [10]; unnest and regroup costs 10 rows each)
    cur_hist AS (
        SELECT cw.t, ARRAY[sum(cw.confidence_hist[1]), sum(cw.confidence_hist[2]), sum(cw.confidence_hist[3]), sum(cw.confidence_hist[4]), sum(cw.confidence_hist[5]), sum(cw.confidence_hist[6]), sum(cw.confidence_hist[7]), sum(cw.confidence_hist[8]), sum(cw.confidence_hist[9]), sum(cw.confidence_hist[10])]::bigint[] AS h
        FROM cw GROUP BY 1),
    old AS MATERIALIZED (
        SELECT cur.t, cur.b, r.ref_end, r.windows, r.tickets, r.label_counts, r.confidence_hist,
               CASE WHEN r.ref_end = cur.b THEN 'same'
                    WHEN r.ref_end < cur.b AND cur.b - r.ref_end <= interval '1 hour' THEN 'step'
                    ELSE 'fresh' END AS how
        FROM cur LEFT JOIN drift_reference r ON r.tenant = cur.t AND r.model = p_model),
    -- the reference before this step: the stored one, or summed afresh from the roll-ups
    base AS MATERIALIZED (
        SELECT o.t, o.b, o.how, o.windows, o.tickets, o.label_counts, o.confidence_hist
        FROM old o WHERE o.how <> 'fresh'
        UNION ALL
        SELECT o.t, o.b, o.how,
               (SELECT count(*) FROM drift_windows d WHERE d.tenant = o.t AND d.model = p_model
                AND d.window_start >= o.b - st.trailing_span AND d.window_start < o.b),
               coalesce(f.tickets, 0), coalesce(f.label_counts, '{}'::jsonb),
               coalesce(f.confidence_hist, '{0,0,0,0,0,0,0,0,0,0}'::bigint[])
        FROM old o CROSS JOIN LATERAL drift_windows_sum(o.t, p_model, o.b - st.trailing_span, o.b) f
        WHERE o.how = 'fresh'),
    -- a step adds the windows of [ref_end, b) and takes away those of [ref_end - span, b - span)
    dw AS MATERIALIZED (
        SELECT o.t, 1 AS sg, d.tickets, d.label_counts, d.confidence_hist
        FROM old o JOIN drift_windows d ON d.tenant = o.t AND d.model = p_model
             AND d.window_start >= o.ref_end AND d.window_start < o.b
        WHERE o.how = 'step'
        UNION ALL
        SELECT o.t, -1, d.tickets, d.label_counts, d.confidence_hist
        FROM old o JOIN drift_windows d ON d.tenant = o.t AND d.model = p_model
             AND d.window_start >= o.ref_end - st.trailing_span AND d.window_start < o.b - st.trailing_span
        WHERE o.how = 'step'),
    ref_tot AS MATERIALIZED (
        SELECT base.t, base.b, base.how, base.windows + coalesce(sum(dw.sg), 0) AS windows,
               base.tickets + coalesce(sum(dw.sg * dw.tickets), 0) AS tickets,
               ARRAY[base.confidence_hist[1] + coalesce(sum(dw.sg * dw.confidence_hist[1]), 0), base.confidence_hist[2] + coalesce(sum(dw.sg * dw.confidence_hist[2]), 0), base.confidence_hist[3] + coalesce(sum(dw.sg * dw.confidence_hist[3]), 0), base.confidence_hist[4] + coalesce(sum(dw.sg * dw.confidence_hist[4]), 0), base.confidence_hist[5] + coalesce(sum(dw.sg * dw.confidence_hist[5]), 0), base.confidence_hist[6] + coalesce(sum(dw.sg * dw.confidence_hist[6]), 0), base.confidence_hist[7] + coalesce(sum(dw.sg * dw.confidence_hist[7]), 0), base.confidence_hist[8] + coalesce(sum(dw.sg * dw.confidence_hist[8]), 0), base.confidence_hist[9] + coalesce(sum(dw.sg * dw.confidence_hist[9]), 0), base.confidence_hist[10] + coalesce(sum(dw.sg * dw.confidence_hist[10]), 0)]::bigint[] AS h
        FROM base LEFT JOIN dw ON dw.t = base.t
        GROUP BY base.t, base.b, base.how, base.windows, base.tickets, base.confidence_hist),
    ref_lab AS MATERIALIZED (
        SELECT t, key, sum(c)::bigint AS c FROM (
            SELECT base.t, e.key, e.value::bigint AS c FROM base, jsonb_each_text(base.label_counts) e
            UNION ALL
            SELECT dw.t, e.key, dw.sg * e.value::bigint FROM dw, jsonb_each_text(dw.label_counts) e) x
        GROUP BY 1, 2 HAVING sum(c) <> 0),
    lab_json AS MATERIALIZED (SELECT t, jsonb_object_agg(key, c) AS lc FROM ref_lab GROUP BY t),
    saved AS (
        INSERT INTO drift_reference AS r (tenant, model, ref_end, windows, tickets, label_counts,
                                          confidence_hist)
        SELECT rt.t, p_model, rt.b, rt.windows, rt.tickets, coalesce(l.lc, '{}'::jsonb), rt.h
        FROM ref_tot rt LEFT JOIN lab_json l ON l.t = rt.t
        WHERE rt.how <> 'same'
        ORDER BY rt.t
        ON CONFLICT (tenant, model) DO UPDATE SET ref_end = excluded.ref_end,
            windows = excluded.windows, tickets = excluded.tickets,
            label_counts = excluded.label_counts, confidence_hist = excluded.confidence_hist),
    -- the reference of each window: a pinned baseline, else the trailing sums when any window
    -- is in range (drift_windows_sum's NULLs otherwise)
    ref AS MATERIALIZED (
        SELECT cur.*, pin.id AS pin_id, pin.label_counts AS pin_lc,
               CASE WHEN pin.id IS NOT NULL THEN format('baseline %s (%s%s)', pin.id, pin.source,
                                                       coalesce(' ' || pin.source_job, ''))
                    WHEN rt.windows > 0 THEN format('trailing %s', st.trailing_span)
                    ELSE 'none' END AS reference,
               pin.id IS NULL AND rt.windows > 0 AS trailing,
               CASE WHEN pin.id IS NOT NULL THEN pin.tickets WHEN rt.windows > 0 THEN rt.tickets END AS rn,
               CASE WHEN pin.id IS NOT NULL THEN pin.confidence_hist WHEN rt.windows > 0 THEN rt.h END AS rh
        FROM cur
        LEFT JOIN LATERAL (SELECT * FROM drift_baselines z WHERE z.tenant = cur.t AND z.model = p_model
                           ORDER BY z.created_at DESC, z.id DESC LIMIT 1) pin ON true
        LEFT JOIN ref_tot rt ON rt.t = cur.t),
    -- the reference's labels and confidence bins as rows
    rlab AS (
        SELECT ref.t, e.key, e.value::bigint AS c FROM ref, jsonb_each_text(ref.pin_lc) e
        UNION ALL
        SELECT ref_lab.t, ref_lab.key, ref_lab.c FROM ref JOIN ref_lab ON ref_lab.t = ref.t WHERE ref.trailing),
    -- 004's drift_props: the union of the label keys; the ten confidence bins always. A key
    -- only in the window is new, one only in the reference may be gone.
    bins AS (
        SELECT coalesce(c.t, r.t) AS t, 'label' AS kind, coalesce(c.key, r.key) AS key,
               coalesce(c.c, 0)::float8 AS cv, coalesce(r.c, 0)::float8 AS rv,
               r.key IS NULL AS only_cur, c.key IS NULL AS only_ref
        FROM cur_lab c FULL JOIN rlab r ON r.t = c.t AND r.key = c.key
        UNION ALL
        SELECT ref.t, 'confidence', NULL, coalesce(c.h[g.i], 0)::float8, coalesce(ref.rh[g.i], 0)::float8,
               false, false
        FROM ref LEFT JOIN cur_hist c ON c.t = ref.t CROSS JOIN generate_series(1, 10) g(i)),
    props AS (
        SELECT t, kind, cv / nullif(sum(cv) OVER w, 0) AS p, rv / nullif(sum(rv) OVER w, 0) AS q,
               count(*) OVER w AS k, sum(cv) OVER w > 0 AND sum(rv) OVER w > 0 AS scored
        FROM bins WINDOW w AS (PARTITION BY t, kind)),
    psi AS (
        SELECT t, sum((y.sp - y.sq) * ln(y.sp / y.sq)) FILTER (WHERE kind = 'label') AS label_psi,
                  sum((y.sp - y.sq) * ln(y.sp / y.sq)) FILTER (WHERE kind = 'confidence') AS confidence_psi,
                  sum(y.js) FILTER (WHERE kind = 'label') / ln(2) AS label_js,
                  sum(y.js) FILTER (WHERE kind = 'confidence') / ln(2) AS confidence_js
        FROM (SELECT t, kind, (p + st.eps) / (1 + k * st.eps) AS sp, (q + st.eps) / (1 + k * st.eps) AS sq,
                     CASE WHEN p > 0 THEN 0.5 * p * ln(2 * p / (p + q)) ELSE 0 END
                     + CASE WHEN q > 0 THEN 0.5 * q * ln(2 * q / (p + q)) ELSE 0 END AS js
              FROM props WHERE scored) y
        GROUP BY t),
    ref_bins AS (SELECT t, count(*) AS k FROM rlab GROUP BY t),
    keys AS (
        SELECT b.t, array_agg(b.key ORDER BY b.key) FILTER (WHERE b.only_cur) AS new_keys,
               array_agg(b.key ORDER BY b.key) FILTER (WHERE b.only_ref) AS ref_only,
               array_agg(b.rv ORDER BY b.key) FILTER (WHERE b.only_ref) AS ref_only_n
        FROM bins b WHERE b.kind = 'label' GROUP BY b.t),
    judged AS MATERIALIZED (
        SELECT ref.*, psi.label_psi, psi.confidence_psi, psi.label_js, psi.confidence_js,
               CASE WHEN coalesce(ref.rn, 0) = 0 THEN 'no_baseline'
                    WHEN ref.n < st.min_tickets_per_bin * greatest(coalesce(rb.k, 0), 10) THEN 'sparse'
                    WHEN greatest(psi.label_psi, psi.confidence_psi) >= st.psi_drift THEN 'drift'
                    WHEN greatest(psi.label_psi, psi.confidence_psi) >= st.psi_watch THEN 'watch'
                    ELSE 'ok' END AS status,
               -- bins 0-4: confidence < 0.5 (drift_settings().low_confidence)
               (ch.h[1] + ch.h[2] + ch.h[3] + ch.h[4] + ch.h[5])::float8 / nullif(ref.n, 0) AS low,
               (ref.rh[1] + ref.rh[2] + ref.rh[3] + ref.rh[4] + ref.rh[5])::float8 / nullif(ref.rn, 0) AS low_ref,
               -- appeared: in the window, never in the reference (none without a reference)
               CASE WHEN ref.pin_id IS NOT NULL OR rb.k > 0 THEN coalesce(kz.new_keys, '{}') ELSE '{}' END AS labels_new,
               -- vanished: none in the window where the reference expects at least 5
               ARRAY(SELECT u.key FROM unnest(kz.ref_only, kz.ref_only_n) u(key, c)
                     WHERE u.c / ref.rn * ref.n >= 5 ORDER BY u.key) AS labels_gone
        FROM ref LEFT JOIN psi ON psi.t = ref.t LEFT JOIN ref_bins rb ON rb.t = ref.t
        LEFT JOIN cur_hist ch ON ch.t = ref.t LEFT JOIN keys kz ON kz.t = ref.t),
    -- the window's earlier judgment (a late worker's rows): its hour counts it once
    prev AS MATERIALIZED (
        SELECT j.t, o.status, o.tickets FROM judged j
        JOIN drift_judged o ON o.window_start = j.b AND o.tenant = j.t AND o.model = p_model),
    stored AS (
        INSERT INTO drift_judged AS s (window_start, tenant, model, window_s, tickets, status, rank,
            label_psi, label_js, confidence_psi, confidence_js, low_confidence_share,
            low_confidence_change, labels_new, labels_gone, reference, ref_tickets, overflow)
        SELECT j.b, j.t, p_model, j.bs, j.n, j.status, drift_rank(j.status), j.label_psi, j.label_js,
               j.confidence_psi, j.confidence_js, j.low, j.low - j.low_ref, j.labels_new,
               j.labels_gone, j.reference, j.rn, j.o
        FROM judged j ORDER BY j.b, j.t
        ON CONFLICT (window_start, tenant, model) DO UPDATE SET window_s = excluded.window_s,
            tickets = excluded.tickets, status = excluded.status, rank = excluded.rank,
            label_psi = excluded.label_psi, label_js = excluded.label_js,
            confidence_psi = excluded.confidence_psi, confidence_js = excluded.confidence_js,
            low_confidence_share = excluded.low_confidence_share,
            low_confidence_change = excluded.low_confidence_change, labels_new = excluded.labels_new,
            labels_gone = excluded.labels_gone, reference = excluded.reference,
            ref_tickets = excluded.ref_tickets, overflow = excluded.overflow, judged_at = now()),
    hourly AS (
        INSERT INTO drift_judged_hourly AS h (tenant, model, bucket_start, windows, drifting, tickets,
            rank, label_psi, confidence_psi, first_drift, reference, reference_at)
        SELECT j.t, p_model, date_trunc('hour', j.b, 'UTC'), CASE WHEN p.t IS NULL THEN 1 ELSE 0 END,
               (j.status = 'drift')::int - coalesce((p.status = 'drift')::int, 0), j.n - coalesce(p.tickets, 0),
               drift_rank(j.status),
               CASE WHEN j.status IN ('ok', 'watch', 'drift') THEN j.label_psi END,
               CASE WHEN j.status IN ('ok', 'watch', 'drift') THEN j.confidence_psi END,
               CASE WHEN j.status = 'drift' THEN j.b END, j.reference, j.b
        FROM judged j LEFT JOIN prev p ON p.t = j.t ORDER BY j.t
        ON CONFLICT (tenant, model, bucket_start) DO UPDATE SET windows = h.windows + excluded.windows,
            drifting = h.drifting + excluded.drifting, tickets = h.tickets + excluded.tickets,
            rank = greatest(h.rank, excluded.rank),
            label_psi = greatest(h.label_psi, excluded.label_psi),
            confidence_psi = greatest(h.confidence_psi, excluded.confidence_psi),
            first_drift = least(h.first_drift, excluded.first_drift),
            reference = CASE WHEN excluded.reference_at >= h.reference_at THEN excluded.reference ELSE h.reference END,
            reference_at = greatest(h.reference_at, excluded.reference_at))
    INSERT INTO drift_status AS s (tenant, model, window_start, window_s, tickets, status, level,
                                   label_psi, confidence_psi, reference, overflow)
    SELECT j.t, p_model, j.b, j.bs, j.n, j.status, drift_level(j.status), j.label_psi,
           j.confidence_psi, j.reference, j.o
    FROM judged j ORDER BY j.t
    ON CONFLICT (tenant, model) DO UPDATE SET
        window_start = excluded.window_start, window_s = excluded.window_s,
        tickets = excluded.tickets, status = excluded.status, level = excluded.level,
        label_psi = excluded.label_psi, confidence_psi = excluded.confidence_psi,
        reference = excluded.reference, overflow = excluded.overflow, updated_at = now()
    WHERE excluded.window_start >= s.window_start;
    GET DIAGNOSTICS n = ROW_COUNT;
    RETURN n;
END $$;

-- each tenant's newest judged window, scored as drift_scores scores it
INSERT INTO drift_judged (window_start, tenant, model, window_s, tickets, status, rank, label_psi,
    label_js, confidence_psi, confidence_js, low_confidence_share, low_confidence_change,
    labels_new, labels_gone, reference, ref_tickets, overflow)
SELECT s.window_start, s.tenant, s.model, x.bucket_s, x.tickets, x.status, drift_rank(x.status),
       x.label_psi, x.label_js, x.confidence_psi, x.confidence_js, x.low_confidence_share,
       x.low_confidence_change, x.labels_new, x.labels_gone, x.reference, x.ref_tickets, s.overflow
FROM drift_status s CROSS JOIN LATERAL drift_scores_between('window', s.window_start,
     s.window_start + interval '1 microsecond', s.tenant, s.model) x;
INSERT INTO drift_judged_hourly
SELECT tenant, model, date_trunc('hour', window_start, 'UTC'), 1, (status = 'drift')::int, tickets, rank,
       CASE WHEN rank >= 2 THEN label_psi END, CASE WHEN rank >= 2 THEN confidence_psi END,
       CASE WHEN status = 'drift' THEN window_start END, reference, window_start
FROM drift_judged;

-- ---------------------------------------------------------------------------------------
-- `reclass drift report`, from the stored scores. Buckets: 'window' (each judged window),
-- 'hour' or 'day' (the judged windows of a UTC hour or day: the worst status, the highest
-- PSIs, the tickets summed; the bucket holding p_since whole). drift_scores('hour' | 'day')
-- still scores an hour's or a day's summed distribution.

-- Per tenant and model since p_since: the worst status, buckets, buckets in drift, tickets,
-- the first drifting bucket, the highest PSIs, the newest reference; the worst first.
CREATE FUNCTION drift_report_tenants(p_bucket text, p_since timestamptz, p_tenant text DEFAULT NULL,
                                     p_model text DEFAULT NULL)
RETURNS TABLE (tenant text, model text, worst text, buckets bigint, drifting bigint, tickets bigint,
               drift_since timestamptz, max_label_psi double precision,
               max_confidence_psi double precision, reference text)
LANGUAGE sql STABLE AS $$
    WITH h AS (
        -- whole hours from the roll-up; for windows, those of the hour holding p_since
        -- after p_since from drift_judged
        SELECT h.tenant, h.model, h.bucket_start AS b, h.windows, h.drifting, h.tickets, h.rank,
               h.label_psi, h.confidence_psi, h.first_drift, h.reference, h.reference_at
        FROM drift_judged_hourly h
        WHERE h.bucket_start >= CASE p_bucket WHEN 'window' THEN drift_hour_ceil(p_since)
                                              WHEN 'hour' THEN date_trunc('hour', p_since, 'UTC')
                                              ELSE date_trunc('day', p_since, 'UTC') END
          AND (p_tenant IS NULL OR h.tenant = p_tenant) AND (p_model IS NULL OR h.model = p_model)
        UNION ALL
        SELECT j.tenant, j.model, j.window_start, 1, (j.status = 'drift')::int, j.tickets, j.rank,
               CASE WHEN j.rank >= 2 THEN j.label_psi END, CASE WHEN j.rank >= 2 THEN j.confidence_psi END,
               CASE WHEN j.status = 'drift' THEN j.window_start END, j.reference, j.window_start
        FROM drift_judged j
        WHERE p_bucket = 'window' AND j.window_start >= p_since AND j.window_start < drift_hour_ceil(p_since)
          AND (p_tenant IS NULL OR j.tenant = p_tenant) AND (p_model IS NULL OR j.model = p_model))
    SELECT h.tenant::text, h.model::text, drift_rank_status(max(h.rank)),
           CASE p_bucket WHEN 'window' THEN sum(h.windows)::bigint WHEN 'hour' THEN count(*)
                ELSE count(DISTINCT date_trunc('day', h.b, 'UTC')) END,
           CASE p_bucket WHEN 'window' THEN sum(h.drifting)::bigint
                WHEN 'hour' THEN count(*) FILTER (WHERE h.rank = 4)
                ELSE count(DISTINCT date_trunc('day', h.b, 'UTC')) FILTER (WHERE h.rank = 4) END,
           sum(h.tickets)::bigint,
           CASE p_bucket WHEN 'window' THEN min(h.first_drift)
                WHEN 'hour' THEN min(h.b) FILTER (WHERE h.rank = 4)
                ELSE min(date_trunc('day', h.b, 'UTC')) FILTER (WHERE h.rank = 4) END,
           max(h.label_psi), max(h.confidence_psi),
           (array_agg(h.reference ORDER BY h.reference_at DESC))[1]
    FROM h GROUP BY h.tenant, h.model
    ORDER BY max(h.rank) DESC, max(greatest(h.label_psi, h.confidence_psi)) DESC NULLS LAST, h.tenant, h.model
$$;

-- The worst p_limit buckets since p_since (worst status, then highest PSI, then newest).
-- Hour and day buckets have no JS, low-confidence or label columns (NULL).
CREATE FUNCTION drift_report_worst(p_bucket text, p_since timestamptz, p_tenant text DEFAULT NULL,
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
        SELECT x.b, x.s, x.tenant::text, x.model::text, drift_rank_status(x.rank), x.tickets,
               x.label_psi, NULL::float8, x.confidence_psi, NULL::float8, NULL::float8, NULL::float8,
               NULL::integer, NULL::integer
        FROM (SELECT CASE WHEN p_bucket = 'day' THEN date_trunc('day', h.bucket_start, 'UTC')
                          ELSE h.bucket_start END AS b,
                     CASE WHEN p_bucket = 'day' THEN 86400 ELSE 3600 END AS s, h.tenant, h.model,
                     max(h.rank) AS rank, sum(h.tickets)::bigint AS tickets,
                     max(h.label_psi) AS label_psi, max(h.confidence_psi) AS confidence_psi
              FROM drift_judged_hourly h
              WHERE h.bucket_start >= CASE WHEN p_bucket = 'day' THEN date_trunc('day', p_since, 'UTC')
                                           ELSE date_trunc('hour', p_since, 'UTC') END
                AND (p_tenant IS NULL OR h.tenant = p_tenant) AND (p_model IS NULL OR h.model = p_model)
              GROUP BY 1, 2, 3, 4) x
        ORDER BY x.rank DESC, greatest(x.label_psi, x.confidence_psi) DESC NULLS LAST, x.b DESC
        LIMIT p_limit;
    END IF;
END $$;
