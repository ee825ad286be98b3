-- Judging a window costs the same whatever the history and is set-based over tenants.
--
-- (1) drift_reference holds each tenant and model's trailing reference: the sums of
--     drift_windows with window_start in [ref_end - trailing_span, ref_end), as
--     drift_windows_sum would return them for the window starting at ref_end. Judging the next
--     window moves it forward: it adds the windows of [ref_end, b) and takes away those of
--     [ref_end - span, b - span), a window or two per tenant; a reference more than an hour
--     behind (or none yet) is summed afresh from the roll-ups (drift_windows_sum).
-- (2) A write to drift_windows inside a tenant's reference range (a late or second worker's
--     row) is added to the reference by a statement trigger, so the reference stays the sum.
-- (3) drift_status_refresh judges every tenant's newest window in one statement: the PSI of
--     labels and of confidences over exploded bins grouped by tenant, the formulas of 004's
--     drift_psi / drift_compare (same bins, smoothing and statuses; tests/drift_scores_check.py
--     and test_drift_scale compare them with drift_scores).

CREATE TABLE drift_reference (
    tenant          text COLLATE "C" NOT NULL,
    model           text COLLATE "C" NOT NULL,
    -- the reference of the window starting here: windows in [ref_end - trailing_span, ref_end)
    ref_end         timestamptz NOT NULL,
    -- drift_windows rows summed; 0: no reference (drift_windows_sum's NULLs)
    windows         bigint NOT NULL,
    tickets         bigint NOT NULL,
    label_counts    jsonb NOT NULL,
    -- shape [10], as drift_windows.confidence_hist
    confidence_hist bigint[] NOT NULL,
    PRIMARY KEY (tenant, model)
);

-- Adds what a statement changed in drift_windows inside a reference's range to that reference.
CREATE FUNCTION drift_reference_apply() RETURNS trigger LANGUAGE plpgsql AS $f$
DECLARE
    plus constant text := $$SELECT tenant, model, window_start, 1 AS w, tickets, label_counts,
        confidence_hist::bigint[] AS h FROM new_rows$$;
    minus constant text := $$SELECT tenant, model, window_start, -1 AS w, -tickets AS tickets,
        drift_labels_neg(label_counts) AS label_counts,
        ARRAY(SELECT -c FROM unnest(confidence_hist::bigint[]) WITH ORDINALITY u(c, i) ORDER BY i) AS h
        FROM old_rows$$;
    delta text;
BEGIN
    delta := CASE TG_OP WHEN 'INSERT' THEN plus WHEN 'UPDATE' THEN plus || ' UNION ALL ' || minus
                        ELSE minus END;
    EXECUTE format($$
        WITH d AS (%s),
        s AS (SELECT r.tenant, r.model, sum(d.w)::bigint AS w, sum(d.tickets)::bigint AS n,
                     drift_labels_sum(d.label_counts) AS lc, drift_hist_sum(d.h) AS h
              FROM d JOIN drift_reference r ON r.tenant = d.tenant AND r.model = d.model
                   AND d.window_start >= r.ref_end - (SELECT trailing_span FROM drift_settings())
                   AND d.window_start < r.ref_end
              GROUP BY 1, 2 ORDER BY 1, 2)
        UPDATE drift_reference r SET windows = r.windows + s.w, tickets = r.tickets + s.n,
            label_counts = drift_labels_add(r.label_counts, s.lc),
            confidence_hist = drift_hist_add(r.confidence_hist, s.h)
        FROM s WHERE r.tenant = s.tenant AND r.model = s.model$$, delta);
    RETURN NULL;
END $f$;

CREATE TRIGGER drift_windows_reference_insert AFTER INSERT ON drift_windows
    REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION drift_reference_apply();
CREATE TRIGGER drift_windows_reference_update AFTER UPDATE ON drift_windows
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION drift_reference_apply();
CREATE TRIGGER drift_windows_reference_delete AFTER DELETE ON drift_windows
    REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION drift_reference_apply();

-- Judges the newest window since p_since of every tenant of p_model (over every worker's rows)
-- and stores it in drift_status, moving each tenant's reference to that window; returns the
-- number of tenants judged. The worker calls it after each window it writes; a newer status is
-- never replaced by an older one. Serialised per model (two workers judging at once would move
-- a reference twice). Distributions are handled as rows (tenant, bin, count) summed with
-- built-in aggregates: a jsonb sum per tenant costs a function call per row.
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
    -- 004's drift_props: the union of the label keys; the ten confidence bins always
    bins AS (
        SELECT coalesce(c.t, r.t) AS t, 'label' AS kind, coalesce(c.c, 0)::float8 AS cv,
               coalesce(r.c, 0)::float8 AS rv
        FROM cur_lab c FULL JOIN rlab r ON r.t = c.t AND r.key = c.key
        UNION ALL
        SELECT ref.t, 'confidence', coalesce(c.h[g.i], 0)::float8, coalesce(ref.rh[g.i], 0)::float8
        FROM ref LEFT JOIN cur_hist c ON c.t = ref.t CROSS JOIN generate_series(1, 10) g(i)),
    props AS (
        SELECT t, kind, cv / nullif(sum(cv) OVER w, 0) AS p, rv / nullif(sum(rv) OVER w, 0) AS q,
               count(*) OVER w AS k, sum(cv) OVER w > 0 AND sum(rv) OVER w > 0 AS scored
        FROM bins WINDOW w AS (PARTITION BY t, kind)),
    psi AS (
        SELECT t, sum((y.p - y.q) * ln(y.p / y.q)) FILTER (WHERE kind = 'label') AS label_psi,
                  sum((y.p - y.q) * ln(y.p / y.q)) FILTER (WHERE kind = 'confidence') AS confidence_psi
        FROM (SELECT t, kind, (p + st.eps) / (1 + k * st.eps) AS p, (q + st.eps) / (1 + k * st.eps) AS q
              FROM props WHERE scored) y
        GROUP BY t),
    ref_bins AS (SELECT t, count(*) AS k FROM rlab GROUP BY t),
    judged AS (
        SELECT ref.*, psi.label_psi, psi.confidence_psi,
               CASE WHEN coalesce(ref.rn, 0) = 0 THEN 'no_baseline'
                    WHEN ref.n < st.min_tickets_per_bin * greatest(coalesce(rb.k, 0), 10) THEN 'sparse'
                    WHEN greatest(psi.label_psi, psi.confidence_psi) >= st.psi_drift THEN 'drift'
                    WHEN greatest(psi.label_psi, psi.confidence_psi) >= st.psi_watch THEN 'watch'
                    ELSE 'ok' END AS status
        FROM ref LEFT JOIN psi ON psi.t = ref.t LEFT JOIN ref_bins rb ON rb.t = ref.t)
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
