-- One home for storing judged windows (011 wrote the same drift_judged upsert twice: in the
-- judge, drift_status_refresh, and in the re-scoring of a pinned baseline,
-- drift_judged_rescore). drift_judged_store(rows) is the only writer of drift_judged and of
-- drift_judged_hourly's per-window counts; both callers hand it their rows as drift_judged[].
-- The scores, the statuses and the hours are 011's.

-- Stores p_rows (drift_judged rows; judged_at as given) and adds them to their hours. A window
-- stored before (a late worker's rows judged again, or a re-scoring) replaces its row and
-- counts once in its hour: its earlier status and tickets are taken out; the hour's worst
-- status and highest PSIs keep the worst of every judgment (drift_judged_hourly_rebuild
-- recomputes hours from the stored rows). Returns the rows stored.
CREATE FUNCTION drift_judged_store(p_rows drift_judged[]) RETURNS integer
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
    hours AS (
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
            reference_at = greatest(h.reference_at, excluded.reference_at))
    SELECT count(*)::integer FROM r
$$;

-- Stores 004's scores (drift_scores_between('window')) of p_tenant and p_model's stored
-- windows in [from_ts, to_ts) and their hourly roll-ups; returns the windows scored.
CREATE OR REPLACE FUNCTION drift_judged_rescore(p_tenant text, p_model text, from_ts timestamptz,
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
    SELECT drift_judged_store(array_agg(ROW(s.bucket_start, s.tenant, s.model, s.bucket_s, s.tickets,
               s.status, drift_rank(s.status), s.label_psi, s.label_js, s.confidence_psi, s.confidence_js,
               s.low_confidence_share, s.low_confidence_change, s.labels_new, s.labels_gone, s.reference,
               s.ref_tickets, coalesce((SELECT bool_or(w.overflow) FROM drift_windows w
                                        WHERE w.window_start = s.bucket_start AND w.tenant = s.tenant
                                          AND w.model = s.model), false), now())::drift_judged))
    INTO n FROM drift_scores_between('window', from_ts, to_ts, p_tenant, p_model) s;
    -- the store raised each hour's worst to the new scores; the rebuild lowers it where they fell
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

-- 011's judge; its scores stored by drift_judged_store; it keeps the results' partitions
-- (012) as it keeps the drift tables'.
CREATE OR REPLACE FUNCTION drift_status_refresh(p_model text, p_since timestamptz) RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE n integer; st record;
BEGIN
    PERFORM drift_partitions_maintain();
    PERFORM ticket_results_partitions_maintain();
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
    -- the scores and their hour, stored in one place (drift_judged_store)
    stored AS (
        SELECT drift_judged_store(array_agg(ROW(j.b, j.t, p_model, j.bs, j.n, j.status,
                   drift_rank(j.status), j.label_psi, j.label_js, j.confidence_psi, j.confidence_js,
                   j.low, j.low - j.low_ref, j.labels_new, j.labels_gone, j.reference, j.rn, j.o,
                   now())::drift_judged)) AS n
        FROM judged j)
    INSERT INTO drift_status AS s (tenant, model, window_start, window_s, tickets, status, level,
                                   label_psi, confidence_psi, reference, overflow)
    SELECT j.t, p_model, j.b, j.bs, j.n, j.status, drift_level(j.status), j.label_psi,
           j.confidence_psi, j.reference, j.o
    FROM judged j CROSS JOIN stored ORDER BY j.t
    ON CONFLICT (tenant, model) DO UPDATE SET
        window_start = excluded.window_start, window_s = excluded.window_s,
        tickets = excluded.tickets, status = excluded.status, level = excluded.level,
        label_psi = excluded.label_psi, confidence_psi = excluded.confidence_psi,
        reference = excluded.reference, overflow = excluded.overflow, updated_at = now()
    WHERE excluded.window_start >= s.window_start;
    GET DIAGNOSTICS n = ROW_COUNT;
    RETURN n;
END $$;
