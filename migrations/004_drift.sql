-- Drift scores: has a tenant's traffic moved away from what the model was validated on, since
-- when, and how badly. Users query this in psql; `reclass drift baseline|report`, `reclass
-- report` and the Grafana dashboard (deploy/grafana/) call the same functions.
--
-- Distributions compared (both as jsonb {bin: count}):
--   label mix             one bin per label seen in the window or the reference
--   confidence histogram  the 10 bins of drift_windows.confidence_hist, all of them
-- Scores, current window p against reference q, both normalised to proportions:
--   PSI = sum_i (p_i - q_i) * ln(p_i / q_i), after additive smoothing of every proportion:
--         x_i' = (x_i + eps) / (1 + K * eps), eps = 1e-4, K = number of bins. An empty bin
--         would make PSI infinite; the smoothing caps one bin's term near |p - q| * ln(|p - q|
--         / 1e-4) and keeps the proportions summing to 1.
--   JS  = Jensen-Shannon divergence, log base 2 (0 = same, 1 = disjoint), on the unsmoothed
--         proportions (it is finite with empty bins); scipy's jensenshannon(p, q, base=2)**2.
-- Status (drift_settings() holds the numbers, one home):
--   drift  when the label PSI or the confidence PSI is >= 0.25
--   watch  when either is >= 0.1
--   ok     otherwise
--   sparse fewer tickets than 10 per label bin of the reference (PSI of a sample of n tickets
--          over K labels reads about (K - 1) / n on pure noise: below 10 per bin that noise
--          alone crosses 0.1); the hour and day roll-ups gather enough
--   no_baseline  no pinned baseline and nothing in the trailing reference
-- Reference: the tenant and model's latest pinned row of drift_baselines; without one, the
-- trailing 7 days of drift_windows before the window (the column reference says which).

CREATE TABLE drift_baselines (
    id              bigserial PRIMARY KEY,
    tenant          text COLLATE "C" NOT NULL,
    model           text COLLATE "C" NOT NULL,
    -- {"label": count}, labels with a zero count left out
    label_counts    jsonb NOT NULL,
    -- bin i counts confidences in [i/10, (i+1)/10); 1.0 falls in bin 9 (as drift_windows)
    confidence_hist bigint[] NOT NULL CHECK (cardinality(confidence_hist) = 10),
    tickets         bigint NOT NULL CHECK (tickets > 0),
    -- 'job' (that job's tickets in ticket_results) or 'windows' (drift_windows in a range)
    source          text NOT NULL CHECK (source IN ('job', 'windows')),
    source_job      text COLLATE "C",
    from_ts         timestamptz,
    to_ts           timestamptz,
    created_at      timestamptz NOT NULL DEFAULT now()
);

CREATE INDEX drift_baselines_tenant_model ON drift_baselines (tenant, model, created_at);

CREATE FUNCTION drift_settings(OUT psi_watch double precision, OUT psi_drift double precision,
                               OUT eps double precision, OUT min_tickets_per_bin integer,
                               OUT trailing_span interval, OUT low_confidence real)
LANGUAGE sql IMMUTABLE AS $$ SELECT 0.1::float8, 0.25::float8, 1e-4::float8, 10, interval '7 days', 0.5::real $$;

-- A confidence histogram as the jsonb the score functions take: {"0": c0, ..., "9": c9}.
CREATE FUNCTION drift_hist_jsonb(h bigint[]) RETURNS jsonb
LANGUAGE sql IMMUTABLE AS $$
    SELECT jsonb_object_agg((i - 1)::text, coalesce(h[i], 0)) FROM generate_series(1, 10) AS i
$$;

-- Proportions of cur and ref over the union of their bins: (bin, p, q). Empty when either
-- distribution holds nothing.
CREATE FUNCTION drift_props(cur jsonb, ref jsonb)
RETURNS TABLE (bin text, p double precision, q double precision)
LANGUAGE sql IMMUTABLE AS $$
    WITH k AS (SELECT jsonb_object_keys(cur) AS bin UNION SELECT jsonb_object_keys(ref)),
         t AS (SELECT (SELECT sum(value::float8) FROM jsonb_each_text(cur)) AS nc,
                      (SELECT sum(value::float8) FROM jsonb_each_text(ref)) AS nr)
    SELECT k.bin, coalesce((cur ->> k.bin)::float8, 0) / t.nc, coalesce((ref ->> k.bin)::float8, 0) / t.nr
    FROM k, t WHERE t.nc > 0 AND t.nr > 0
$$;

-- Population stability index of cur against ref, smoothed as above; NULL when either is empty.
CREATE FUNCTION drift_psi(cur jsonb, ref jsonb) RETURNS double precision
LANGUAGE sql IMMUTABLE AS $$
    WITH s AS (SELECT eps FROM drift_settings()),
         x AS (SELECT d.p, d.q, count(*) OVER () AS k FROM drift_props(cur, ref) d),
         y AS (SELECT (x.p + s.eps) / (1 + x.k * s.eps) AS p, (x.q + s.eps) / (1 + x.k * s.eps) AS q
               FROM x, s)
    SELECT sum((y.p - y.q) * ln(y.p / y.q)) FROM y
$$;

-- Jensen-Shannon divergence (base 2) of cur and ref, unsmoothed; NULL when either is empty.
CREATE FUNCTION drift_js(cur jsonb, ref jsonb) RETURNS double precision
LANGUAGE sql IMMUTABLE AS $$
    SELECT sum(CASE WHEN p > 0 THEN 0.5 * p * ln(2 * p / (p + q)) ELSE 0 END
             + CASE WHEN q > 0 THEN 0.5 * q * ln(2 * q / (p + q)) ELSE 0 END) / ln(2)
    FROM drift_props(cur, ref)
$$;

-- drift_windows of one tenant and model with window_start in [from_ts, to_ts), summed over
-- windows and workers. tickets is NULL when there are none.
CREATE FUNCTION drift_windows_sum(p_tenant text, p_model text, from_ts timestamptz, to_ts timestamptz,
                                  OUT label_counts jsonb, OUT confidence_hist bigint[], OUT tickets bigint)
LANGUAGE sql STABLE AS $$
    WITH w AS (SELECT * FROM drift_windows d
               WHERE d.tenant = p_tenant AND d.model = p_model
                 AND d.window_start >= from_ts AND d.window_start < to_ts)
    SELECT (SELECT jsonb_object_agg(key, n) FROM
              (SELECT e.key, sum(e.value::bigint) AS n FROM w, jsonb_each_text(w.label_counts) e
               GROUP BY e.key) l),
           (SELECT array_agg(n ORDER BY i) FROM
              (SELECT u.i, sum(u.c)::bigint AS n FROM w, unnest(w.confidence_hist) WITH ORDINALITY u(c, i)
               GROUP BY u.i) h),
           (SELECT sum(w.tickets)::bigint FROM w)
$$;

-- Pins a baseline from stored windows; returns the new row. Raises no_data_found when the range
-- holds no ticket of that tenant and model.
CREATE FUNCTION drift_baseline_pin_windows(p_tenant text, p_model text, from_ts timestamptz,
                                           to_ts timestamptz) RETURNS drift_baselines
LANGUAGE plpgsql AS $$
DECLARE s record; rec drift_baselines;
BEGIN
    SELECT * INTO s FROM drift_windows_sum(p_tenant, p_model, from_ts, to_ts);
    IF coalesce(s.tickets, 0) = 0 THEN
        RAISE no_data_found USING MESSAGE = format(
            'no drift windows of tenant %s and model %s between %s and %s', p_tenant, p_model, from_ts, to_ts);
    END IF;
    INSERT INTO drift_baselines (tenant, model, label_counts, confidence_hist, tickets, source, from_ts, to_ts)
    VALUES (p_tenant, p_model, s.label_counts, s.confidence_hist, s.tickets, 'windows', from_ts, to_ts)
    RETURNING * INTO rec;
    RETURN rec;
END $$;

-- Pins a baseline from a job's own tickets (ticket_results, exact) classified by p_model;
-- returns the new row. Raises no_data_found when the job has none.
CREATE FUNCTION drift_baseline_pin_job(p_tenant text, p_model text, p_job text) RETURNS drift_baselines
LANGUAGE plpgsql AS $$
DECLARE lc jsonb; h bigint[]; n bigint; t0 timestamptz; t1 timestamptz; rec drift_baselines;
BEGIN
    SELECT count(*), min(classified_at), max(classified_at) INTO n, t0, t1
    FROM ticket_results WHERE job_id = p_job AND model = p_model;
    IF n = 0 THEN
        RAISE no_data_found USING MESSAGE = format(
            'job %s has no tickets classified by model %s', p_job, p_model);
    END IF;
    SELECT jsonb_object_agg(label, c) INTO lc FROM
        (SELECT label, count(*) AS c FROM ticket_results WHERE job_id = p_job AND model = p_model
         GROUP BY label) l;
    SELECT array_agg(coalesce(c, 0) ORDER BY b) INTO h FROM generate_series(0, 9) AS b
        LEFT JOIN (SELECT least(floor(confidence * 10)::int, 9) AS bin, count(*) AS c
                   FROM ticket_results WHERE job_id = p_job AND model = p_model GROUP BY 1) x
        ON x.bin = b;
    INSERT INTO drift_baselines (tenant, model, label_counts, confidence_hist, tickets, source,
                                 source_job, from_ts, to_ts)
    VALUES (p_tenant, p_model, lc, h, n, 'job', p_job, t0, t1) RETURNING * INTO rec;
    RETURN rec;
END $$;

-- Scores of current distributions against a reference: the one formula every caller uses.
CREATE FUNCTION drift_compare(cur_labels jsonb, cur_hist bigint[], cur_tickets bigint,
                              ref_labels jsonb, ref_hist bigint[], ref_tickets bigint,
                              OUT label_psi double precision, OUT label_js double precision,
                              OUT confidence_psi double precision, OUT confidence_js double precision,
                              OUT low_confidence_share double precision,
                              OUT low_confidence_share_ref double precision,
                              OUT low_confidence_change double precision,
                              OUT labels_new text[], OUT labels_gone text[], OUT status text)
LANGUAGE sql STABLE AS $$
    WITH s AS (SELECT * FROM drift_settings()),
         sc AS (SELECT drift_psi(cur_labels, ref_labels) AS lp, drift_js(cur_labels, ref_labels) AS lj,
                       drift_psi(drift_hist_jsonb(cur_hist), drift_hist_jsonb(ref_hist)) AS cp,
                       drift_js(drift_hist_jsonb(cur_hist), drift_hist_jsonb(ref_hist)) AS cj,
                       -- bins 0-4: confidence < 0.5 (drift_settings().low_confidence)
                       (SELECT sum(c) FROM unnest(cur_hist[1:5]) c)::float8 / NULLIF(cur_tickets, 0) AS lo,
                       (SELECT sum(c) FROM unnest(ref_hist[1:5]) c)::float8 / NULLIF(ref_tickets, 0) AS lo_ref,
                       (SELECT count(*) FROM jsonb_object_keys(ref_labels)) AS ref_bins)
    SELECT sc.lp, sc.lj, sc.cp, sc.cj, sc.lo, sc.lo_ref, sc.lo - sc.lo_ref,
           -- appeared: in the window, never in the reference
           ARRAY(SELECT k FROM jsonb_object_keys(cur_labels) k
                 WHERE ref_labels IS NOT NULL AND NOT ref_labels ? k ORDER BY k),
           -- vanished: none in the window where the reference expects at least 5
           ARRAY(SELECT e.key FROM jsonb_each_text(ref_labels) e
                 WHERE e.value::float8 / ref_tickets * cur_tickets >= 5
                   AND (cur_labels IS NULL OR NOT cur_labels ? e.key) ORDER BY e.key),
           CASE WHEN coalesce(ref_tickets, 0) = 0 THEN 'no_baseline'
                WHEN cur_tickets < s.min_tickets_per_bin * greatest(sc.ref_bins, 10) THEN 'sparse'
                WHEN greatest(sc.lp, sc.cp) >= s.psi_drift THEN 'drift'
                WHEN greatest(sc.lp, sc.cp) >= s.psi_watch THEN 'watch'
                ELSE 'ok' END
    FROM sc, s
$$;

-- Scores per tenant, model and bucket: p_bucket 'window' (each drift window), 'hour' or
-- 'day' (windows rolled up by window_start), since p_since, optionally one tenant / model.
CREATE FUNCTION drift_scores(p_bucket text DEFAULT 'window', p_since timestamptz DEFAULT '-infinity',
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
    WITH w AS (
        SELECT CASE WHEN p_bucket = 'window' THEN d.window_start ELSE date_trunc(p_bucket, d.window_start) END AS b,
               CASE p_bucket WHEN 'window' THEN d.window_s WHEN 'hour' THEN 3600 ELSE 86400 END AS bs,
               d.tenant AS t, d.model AS m, d.tickets AS n, d.label_counts AS lc, d.confidence_hist AS h
        FROM drift_windows d
        WHERE d.window_start >= p_since AND (p_tenant IS NULL OR d.tenant = p_tenant)
          AND (p_model IS NULL OR d.model = p_model)),
    lab AS (SELECT l.b, l.bs, l.t, l.m, jsonb_object_agg(l.key, l.c) AS lc
            FROM (SELECT w.b, w.bs, w.t, w.m, e.key, sum(e.value::bigint) AS c
                  FROM w, jsonb_each_text(w.lc) e GROUP BY 1, 2, 3, 4, 5) l
            GROUP BY 1, 2, 3, 4),
    hst AS (SELECT x.b, x.bs, x.t, x.m, array_agg(x.c ORDER BY x.i) AS h
            FROM (SELECT w.b, w.bs, w.t, w.m, u.i, sum(u.c)::bigint AS c
                  FROM w, unnest(w.h) WITH ORDINALITY u(c, i) GROUP BY 1, 2, 3, 4, 5) x
            GROUP BY 1, 2, 3, 4),
    cur AS (SELECT n.b, n.bs, n.t, n.m, n.n, lab.lc, hst.h
            FROM (SELECT w.b, w.bs, w.t, w.m, sum(w.n)::bigint AS n FROM w GROUP BY 1, 2, 3, 4) n
            LEFT JOIN lab USING (b, bs, t, m) LEFT JOIN hst USING (b, bs, t, m))
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

-- "since" as users write it: an interval back from now ('24 hours', '7 days') or a timestamp.
CREATE FUNCTION drift_since(s text) RETURNS timestamptz
LANGUAGE plpgsql STABLE AS $$
BEGIN
    RETURN now() - s::interval;
EXCEPTION WHEN invalid_datetime_format OR datetime_field_overflow OR syntax_error THEN
    BEGIN
        RETURN s::timestamptz;
    EXCEPTION WHEN invalid_datetime_format OR datetime_field_overflow OR syntax_error THEN
        RAISE invalid_parameter_value USING MESSAGE = format(
            'since %L is neither an interval (''24 hours'') nor a timestamp (''2026-01-02 10:00Z'')', s);
    END;
END $$;

-- Every window's scores (drift_scores('window')), for psql and dashboards.
CREATE VIEW drift_window_scores AS SELECT * FROM drift_scores('window');
