-- The worker judges its windows in C (worker/observe/drift_score.c) instead of calling the SQL
-- judge (drift_status_refresh) after each one; a window costs the database a few set-based
-- statements whatever the history.
--
-- (1) Each tenant's reference lives in its drift_status row: the label counts by label id of
--     the model's label list (ref_counts), the confidence histogram and tickets, summed over
--     the trailing span before the hour (ref_end), or the tenant's pinned baseline; refreshed
--     by drift_reference_refresh at most once an hour per tenant (the worker asks when the
--     stored ref_end is not its window's hour), not per window. The reference of a window is
--     the trailing span before its hour: the SQL judge's ([window_start - span, window_start))
--     for a window starting on the hour.
-- (2) The window's scores go into the window's rows (the judged columns of drift_windows) and
--     into drift_status in the worker's one write statement; drift_judged (and its hour and
--     day roll-ups) takes them once an hour, when a window of a later hour is written
--     (drift_judged_close).
-- (3) Several workers write the same window: each takes the window's advisory lock
--     (drift_window_lock) before reading the other workers' rows of it, so the last one to
--     write reads every earlier writer's committed rows, judges the sum and its status stands
--     (drift_status keeps the newest judgment of a window; drift_judged_close takes the row
--     judged last).
-- (4) The hour roll-up of the windows takes whole hours once an hour, not every window: the mark
--     'drift_hourly' (017's drift_rollup_mark) is the hour before which drift_hourly holds
--     every window; a statement with rows of a later hour adds the hours from the mark to
--     theirs and moves it (drift_hours_close), and the days take whole days from the hours once
--     a day (the mark 'drift_daily' moves at a day's close). Rows before the hour mark (a late
--     worker, an update, a delete) go to their hour at once, as before. The readers of the
--     hours (drift_windows_sum, drift_scores_between) take the windows at or after the mark raw.
-- (5) The reference trigger of 010 (drift_reference, the SQL judge's) returns at once for rows
--     after every stored reference's end (a worker's newest window).

ALTER TABLE drift_windows
    -- the window's judgment over every worker's rows summed, by the worker that wrote this
    -- row (the last writer's is the window's): drift_judged's columns; NULL: not judged
    ADD COLUMN status                text,
    ADD COLUMN label_psi             double precision,
    ADD COLUMN label_js              double precision,
    ADD COLUMN confidence_psi        double precision,
    ADD COLUMN confidence_js         double precision,
    ADD COLUMN low_confidence_share  double precision,
    ADD COLUMN low_confidence_change double precision,
    ADD COLUMN labels_new            text[],
    ADD COLUMN labels_gone           text[],
    ADD COLUMN reference             text,
    ADD COLUMN ref_tickets           bigint,
    -- the tickets and overflow of the sum judged
    ADD COLUMN judged_tickets        bigint,
    ADD COLUMN judged_overflow       boolean,
    ADD COLUMN judged_at             timestamptz;

ALTER TABLE drift_status
    -- the reference of the windows of the hour starting at ref_end (NULL: none stored)
    ADD COLUMN ref_end     timestamptz,
    -- shape [n_labels]: counts by label id (ref_labels' order); NULL with ref_tickets NULL
    ADD COLUMN ref_counts  bigint[],
    ADD COLUMN ref_labels  text[],
    -- shape [10]
    ADD COLUMN ref_hist    bigint[],
    -- NULL: no reference (no_baseline)
    ADD COLUMN ref_tickets bigint,
    ADD COLUMN ref_name    text,
    ADD COLUMN ref_pinned  boolean;

-- drift_hourly holds every window before this hour (009: every window)
INSERT INTO drift_rollup_mark
SELECT 'drift_hourly', coalesce((SELECT max(bucket_start) FROM drift_hourly) + interval '1 hour', '-infinity');
-- drift_judged holds every judged window before this hour
INSERT INTO drift_rollup_mark
SELECT 'drift_judged', coalesce(date_trunc('hour', (SELECT max(window_start) FROM drift_judged), 'UTC')
                                + interval '1 hour', '-infinity');

-- ---------------------------------------------------------------------------------------
-- Serialises the writers of one window of a model (transaction-scoped): taken before the
-- worker reads the other workers' rows of it.
CREATE FUNCTION drift_window_lock(p_model text, p_window timestamptz) RETURNS void
LANGUAGE sql AS $$
    SELECT pg_advisory_xact_lock(hashtext('drift_window:' || p_model), hashtext(p_window::text))
$$;

-- ---------------------------------------------------------------------------------------
-- The references of p_tenants for the windows of the hour p_hour: the newest pinned baseline,
-- else the trailing span before p_hour summed from the roll-ups (whole days before the days'
-- mark, hours around them), label counts by the index of p_labels (labels outside the list
-- are left out). Stored in each tenant's drift_status row (a row made for a tenant without
-- one, its status 'no_baseline' before '-infinity', replaced by the window's status in the
-- same transaction); returns them.
CREATE FUNCTION drift_reference_refresh(p_model text, p_hour timestamptz, p_labels text[], p_tenants text[])
RETURNS TABLE (tenant text, ref_counts bigint[], ref_hist bigint[], ref_tickets bigint, ref_name text,
               ref_pinned boolean)
LANGUAGE plpgsql AS $f$
#variable_conflict use_column
DECLARE
    span constant interval := (SELECT trailing_span FROM drift_settings());
    f timestamptz := p_hour - span;
    -- whole days [d0, d1) from drift_daily, the hours of [f, d0) and [d1, p_hour) from drift_hourly
    d0 timestamptz := date_trunc('day', f + interval '1 day' - interval '1 microsecond', 'UTC');
    d1 timestamptz;
BEGIN
    -- the hours before p_hour are whole: in drift_hourly
    PERFORM drift_hours_close(p_hour);
    d1 := greatest(d0, least(date_trunc('day', p_hour, 'UTC'),
                             date_trunc('day', drift_rollup_done_before('drift_daily'), 'UTC')));
    RETURN QUERY
    WITH t AS (SELECT DISTINCT u.t FROM unnest(p_tenants) u(t)),
    parts AS MATERIALIZED (
        SELECT d.tenant, d.tickets, d.label_counts, d.confidence_hist FROM t JOIN drift_daily d
            ON d.tenant = t.t AND d.model = p_model AND d.bucket_start >= d0 AND d.bucket_start < d1
        UNION ALL
        SELECT h.tenant, h.tickets, h.label_counts, h.confidence_hist FROM t JOIN drift_hourly h
            ON h.tenant = t.t AND h.model = p_model
           AND ((h.bucket_start >= f AND h.bucket_start < d0) OR (h.bucket_start >= d1 AND h.bucket_start < p_hour))),
    tot AS (
        SELECT p.tenant, sum(p.tickets)::bigint AS n,
               ARRAY[sum(p.confidence_hist[1]), sum(p.confidence_hist[2]), sum(p.confidence_hist[3]),
                     sum(p.confidence_hist[4]), sum(p.confidence_hist[5]), sum(p.confidence_hist[6]),
                     sum(p.confidence_hist[7]), sum(p.confidence_hist[8]), sum(p.confidence_hist[9]),
                     sum(p.confidence_hist[10])]::bigint[] AS h
        FROM parts p GROUP BY 1),
    lab AS (
        SELECT p.tenant, e.key, sum(e.value::bigint) AS c FROM parts p, jsonb_each_text(p.label_counts) e
        GROUP BY 1, 2),
    -- the trailing sums' label counts by label index (a hash join, not a scan per tenant)
    arr AS (
        SELECT t.t, array_agg(coalesce(lab.c, 0)::bigint ORDER BY l.i) AS counts
        FROM t CROSS JOIN unnest(p_labels) WITH ORDINALITY l(name, i)
        LEFT JOIN lab ON lab.tenant = t.t AND lab.key = l.name
        WHERE t.t IN (SELECT tot.tenant FROM tot) GROUP BY t.t),
    ref AS (
        SELECT t.t, pin.id AS pin_id,
               CASE WHEN pin.id IS NOT NULL THEN format('baseline %s (%s%s)', pin.id, pin.source,
                                                       coalesce(' ' || pin.source_job, ''))
                    WHEN tot.tenant IS NOT NULL THEN format('trailing %s', span) ELSE 'none' END AS name,
               CASE WHEN pin.id IS NOT NULL THEN pin.tickets ELSE tot.n END AS n,
               CASE WHEN pin.id IS NOT NULL THEN pin.confidence_hist ELSE tot.h END AS h,
               CASE WHEN pin.id IS NOT NULL THEN
                    ARRAY(SELECT coalesce((pin.label_counts ->> l.name)::bigint, 0)
                          FROM unnest(p_labels) WITH ORDINALITY l(name, i) ORDER BY l.i)
                    ELSE arr.counts END AS counts
        FROM t LEFT JOIN tot ON tot.tenant = t.t LEFT JOIN arr ON arr.t = t.t
        LEFT JOIN LATERAL (SELECT * FROM drift_baselines z WHERE z.tenant = t.t AND z.model = p_model
                           ORDER BY z.created_at DESC, z.id DESC LIMIT 1) pin ON true),
    saved AS (
        INSERT INTO drift_status AS s (tenant, model, window_start, window_s, tickets, status, level, overflow,
                                       ref_end, ref_counts, ref_labels, ref_hist, ref_tickets, ref_name, ref_pinned)
        SELECT ref.t, p_model, '-infinity', 1, 0, 'no_baseline', 0, false,
               p_hour, ref.counts, p_labels, ref.h, ref.n, ref.name, ref.pin_id IS NOT NULL
        FROM ref ORDER BY ref.t
        ON CONFLICT (tenant, model) DO UPDATE SET ref_end = excluded.ref_end, ref_counts = excluded.ref_counts,
            ref_labels = excluded.ref_labels, ref_hist = excluded.ref_hist, ref_tickets = excluded.ref_tickets,
            ref_name = excluded.ref_name, ref_pinned = excluded.ref_pinned)
    SELECT ref.t, ref.counts, ref.h, ref.n, ref.name, ref.pin_id IS NOT NULL FROM ref;
END $f$;
ALTER FUNCTION drift_reference_refresh(text, timestamptz, text[], text[]) SET jit = off;

-- A pinned baseline is every window's reference from then on: the stored references of its
-- tenant and model are refreshed at the worker's next window.
CREATE FUNCTION drift_baselines_reference_reset() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE drift_status SET ref_end = NULL WHERE tenant = NEW.tenant AND model = NEW.model;
    RETURN NULL;
END $$;
CREATE TRIGGER drift_baselines_reference_reset AFTER INSERT ON drift_baselines
    FOR EACH ROW EXECUTE FUNCTION drift_baselines_reference_reset();

-- ---------------------------------------------------------------------------------------
-- The judged windows of p_model before p_before and at or after the mark (each window's row
-- judged last: its judgment is of every worker's rows) into drift_judged and its roll-ups
-- (drift_judged_store); the mark moves to p_before. Returns the windows stored. Called by the
-- worker once an hour, when it writes a window of a later hour than the mark.
CREATE FUNCTION drift_judged_close(p_model text, p_before timestamptz) RETURNS integer
LANGUAGE plpgsql AS $f$
DECLARE mark timestamptz; n integer := 0;
BEGIN
    SELECT done_before INTO mark FROM drift_rollup_mark WHERE rollup = 'drift_judged' FOR UPDATE;
    IF p_before <= mark THEN RETURN 0; END IF;
    -- once an hour, as drift_status_refresh did every window: partitions made and dropped
    PERFORM drift_partitions_maintain();
    PERFORM ticket_results_partitions_maintain();
    SELECT drift_judged_store(array_agg(ROW(j.window_start, j.tenant, j.model, j.window_s, j.judged_tickets,
               j.status, drift_rank(j.status), j.label_psi, j.label_js, j.confidence_psi, j.confidence_js,
               j.low_confidence_share, j.low_confidence_change, j.labels_new, j.labels_gone, j.reference,
               j.ref_tickets, j.judged_overflow, j.judged_at)::drift_judged))
    INTO n
    FROM (SELECT DISTINCT ON (w.window_start, w.tenant) w.*
          FROM drift_windows w
          WHERE w.window_start >= mark AND w.window_start < p_before AND w.model = p_model
            AND w.judged_at IS NOT NULL
          ORDER BY w.window_start, w.tenant, w.judged_at DESC) j;
    UPDATE drift_rollup_mark SET done_before = p_before WHERE rollup = 'drift_judged';
    RETURN coalesce(n, 0);
END $f$;
ALTER FUNCTION drift_judged_close(text, timestamptz) SET jit = off;

-- ---------------------------------------------------------------------------------------
-- 017's upsert of summed rows into a roll-up (h): counts add, label counts key by key (a key
-- summing to 0 dropped, as drift_labels_add drops it), histograms bin by bin (shape [10]).
CREATE FUNCTION drift_rollup_upsert() RETURNS text LANGUAGE sql IMMUTABLE AS $f$ SELECT $$
    ON CONFLICT (tenant, model, bucket_start) DO UPDATE SET
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
        overflow = h.overflow OR excluded.overflow$$ $f$;

-- Rows (d: tenant, model, window_start, sg, tickets, label_counts, confidence_hist,
-- confidence_sum, truncated, tokens, overflow) summed into their hours of drift_hourly, and
-- those before $1 into their days of drift_daily: 017's statement.
CREATE FUNCTION drift_rollup_sql(p_rows text) RETURNS text LANGUAGE sql IMMUTABLE AS $f$ SELECT format($$
    WITH d AS MATERIALIZED (%s),
    g AS MATERIALIZED (
        SELECT tenant, model, date_trunc('hour', window_start, 'UTC') AS b, sum(sg * tickets)::bigint AS n,
               ARRAY[sum(sg * confidence_hist[1]), sum(sg * confidence_hist[2]), sum(sg * confidence_hist[3]),
                     sum(sg * confidence_hist[4]), sum(sg * confidence_hist[5]), sum(sg * confidence_hist[6]),
                     sum(sg * confidence_hist[7]), sum(sg * confidence_hist[8]), sum(sg * confidence_hist[9]),
                     sum(sg * confidence_hist[10])]::bigint[] AS ch,
               sum(sg * confidence_sum) AS cs, sum(sg * truncated)::bigint AS tr,
               sum(sg * tokens)::bigint AS tk, bool_or(overflow) AS o
        FROM d GROUP BY 1, 2, 3),
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
    ORDER BY 1, 2, 3 %s$$, p_rows, drift_rollup_upsert(), drift_rollup_upsert()) $f$;

-- The windows before p_before's hour and at or after the hour mark into their hours (and the
-- days before the day mark), the hour mark moved there; then the whole days from the day mark
-- to p_before's day from their hours, the day mark moved there. The hour mark's row is locked
-- to the end of the transaction (the writers of drift_windows take turns past it, as 017's
-- day mark). Returns 1 when hours were closed, else 0.
CREATE FUNCTION drift_hours_close(p_before timestamptz) RETURNS integer LANGUAGE plpgsql AS $f$
DECLARE hm timestamptz; dm timestamptz; n integer := 0; h timestamptz := date_trunc('hour', p_before, 'UTC');
BEGIN
    SELECT done_before INTO hm FROM drift_rollup_mark WHERE rollup = 'drift_hourly' FOR UPDATE;
    SELECT done_before INTO dm FROM drift_rollup_mark WHERE rollup = 'drift_daily' FOR UPDATE;
    IF h > hm THEN
        EXECUTE drift_rollup_sql($$SELECT tenant, model, window_start, 1 AS sg, tickets, label_counts,
                confidence_hist, confidence_sum, truncated, tokens, overflow FROM drift_windows
                WHERE window_start >= $2 AND window_start < $3$$) USING dm, hm, h;
        n := 1;
        UPDATE drift_rollup_mark SET done_before = h WHERE rollup = 'drift_hourly';
    END IF;
    IF date_trunc('day', h, 'UTC') > dm THEN
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
            ORDER BY 1, 2, 3 %s$$, drift_rollup_upsert()) USING dm, date_trunc('day', h, 'UTC');
        UPDATE drift_rollup_mark SET done_before = date_trunc('day', h, 'UTC') WHERE rollup = 'drift_daily';
    END IF;
    RETURN n;
END $f$;
ALTER FUNCTION drift_hours_close(timestamptz) SET jit = off;

-- 017's roll-up trigger: the rows before the hour mark to their hours (and days before the
-- day mark); rows at or after it wait for their hour's close, which rows of a later hour make.
CREATE OR REPLACE FUNCTION drift_rollup_apply() RETURNS trigger LANGUAGE plpgsql AS $f$
DECLARE
    plus constant text := $$SELECT tenant, model, window_start, 1 AS sg, tickets, label_counts,
        confidence_hist, confidence_sum, truncated, tokens, overflow FROM new_rows WHERE window_start < $2$$;
    minus constant text := $$SELECT tenant, model, window_start, -1 AS sg, tickets, label_counts,
        confidence_hist, confidence_sum, truncated, tokens, false AS overflow FROM old_rows WHERE window_start < $2$$;
    hm timestamptz;
    dm timestamptz;
    before boolean := true;
    newest timestamptz;
BEGIN
    -- neither mark moves until this statement commits (concurrent writers take turns here)
    SELECT done_before INTO hm FROM drift_rollup_mark WHERE rollup = 'drift_hourly' FOR UPDATE;
    SELECT done_before INTO dm FROM drift_rollup_mark WHERE rollup = 'drift_daily' FOR UPDATE;
    IF TG_OP = 'INSERT' THEN
        SELECT bool_or(n.window_start < hm), max(n.window_start) INTO before, newest FROM new_rows n;
    END IF;
    IF before THEN
        EXECUTE drift_rollup_sql(CASE TG_OP WHEN 'INSERT' THEN plus WHEN 'UPDATE' THEN plus || ' UNION ALL ' || minus
                                            ELSE minus END) USING dm, hm;
    END IF;
    IF TG_OP = 'UPDATE' THEN
        EXECUTE $$SELECT max(window_start) FROM new_rows$$ INTO newest;
    END IF;
    -- rows of a later hour than the mark: the hours from the mark to theirs are whole (a worker
    -- writes its windows in order)
    IF date_trunc('hour', newest, 'UTC') > hm THEN
        PERFORM drift_hours_close(newest);
    END IF;
    RETURN NULL;
END $f$;

-- ---------------------------------------------------------------------------------------
-- 010's reference trigger: inserted rows at or after every stored reference's end are in no
-- reference's range (a worker's newest window): nothing to add.
CREATE OR REPLACE FUNCTION drift_reference_apply() RETURNS trigger LANGUAGE plpgsql AS $f$
DECLARE
    plus constant text := $$SELECT tenant, model, window_start, 1 AS w, tickets, label_counts,
        confidence_hist::bigint[] AS h FROM new_rows$$;
    minus constant text := $$SELECT tenant, model, window_start, -1 AS w, -tickets AS tickets,
        drift_labels_neg(label_counts) AS label_counts,
        ARRAY(SELECT -c FROM unnest(confidence_hist::bigint[]) WITH ORDINALITY u(c, i) ORDER BY i) AS h
        FROM old_rows$$;
    delta text;
BEGIN
    IF TG_OP = 'INSERT' THEN
        IF coalesce((SELECT min(n.window_start) FROM new_rows n) >= (SELECT max(r.ref_end) FROM drift_reference r),
                    true) THEN
            RETURN NULL;
        END IF;
    END IF;
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

-- ---------------------------------------------------------------------------------------
-- 017's range sums: whole hours only before the hour mark (the windows after it raw).
CREATE OR REPLACE FUNCTION drift_windows_sum(p_tenant text, p_model text, from_ts timestamptz, to_ts timestamptz,
                                             OUT label_counts jsonb, OUT confidence_hist bigint[], OUT tickets bigint)
LANGUAGE sql STABLE AS $$
    WITH b AS (SELECT from_ts AS f, to_ts AS t,
                      -- whole days [d0, d1), whole hours [h0, d0) and [d1, h1), raw the rest
                      drift_hour_ceil(from_ts) AS h0,
                      least(date_trunc('hour', to_ts, 'UTC'), drift_rollup_done_before('drift_hourly')) AS h1),
         bd AS (SELECT b.*, date_trunc('day', h0, 'UTC') + CASE WHEN date_trunc('day', h0, 'UTC') < h0
                                                          THEN interval '1 day' ELSE interval '0' END AS d0,
                       least(date_trunc('day', h1, 'UTC'),
                             date_trunc('day', drift_rollup_done_before('drift_daily'), 'UTC')) AS d1 FROM b),
         r AS (SELECT bd.*, d0 < d1 AS has_days, h0 < h1 AS has_hours FROM bd),
         parts AS (
            SELECT d.label_counts AS lc, d.confidence_hist AS h, d.tickets AS n
            FROM r, drift_daily d
            WHERE r.has_hours AND r.has_days AND d.tenant = p_tenant AND d.model = p_model
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
              AND w.window_start < CASE WHEN drift_hour_ceil(from_ts)
                                             < least(date_trunc('hour', to_ts, 'UTC'), drift_rollup_done_before('drift_hourly'))
                                        THEN drift_hour_ceil(from_ts) ELSE to_ts END
            UNION ALL
            SELECT w.label_counts, w.confidence_hist::bigint[], w.tickets
            FROM drift_windows w
            WHERE w.tenant = p_tenant AND w.model = p_model
              AND drift_hour_ceil(from_ts) < least(date_trunc('hour', to_ts, 'UTC'), drift_rollup_done_before('drift_hourly'))
              AND w.window_start >= least(date_trunc('hour', to_ts, 'UTC'), drift_rollup_done_before('drift_hourly'))
              AND w.window_start < to_ts)
    SELECT (SELECT jsonb_object_agg(l.key, l.n) FROM
              (SELECT e.key, sum(e.value::bigint) AS n FROM parts, jsonb_each_text(parts.lc) e
               GROUP BY e.key) l WHERE l.n <> 0),
           (SELECT array_agg(x.n ORDER BY x.i) FROM
              (SELECT u.i, sum(u.c)::bigint AS n FROM parts, unnest(parts.h) WITH ORDINALITY u(c, i)
               GROUP BY u.i) x),
           (SELECT sum(parts.n)::bigint FROM parts)
$$;

-- 009's scores of windows, hours and days: the hours and days from drift_hourly before the
-- hour mark, from the windows after it.
CREATE OR REPLACE FUNCTION drift_scores_between(p_bucket text, p_since timestamptz, p_until timestamptz,
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
        -- (020) hours before the hour mark from drift_hourly, the windows after it summed raw
        SELECT d.bucket_start, 3600, d.tenant, d.model, d.tickets, nullif(d.label_counts, '{}'::jsonb),
               d.confidence_hist
        FROM drift_hourly d
        WHERE p_bucket = 'hour' AND d.tickets > 0 AND d.bucket_start >= date_trunc('hour', p_since, 'UTC')
          AND d.bucket_start < p_until AND d.bucket_start < drift_rollup_done_before('drift_hourly')
          AND (p_tenant IS NULL OR d.tenant = p_tenant) AND (p_model IS NULL OR d.model = p_model)
        UNION ALL
        SELECT date_trunc('hour', w.window_start, 'UTC'), 3600, w.tenant, w.model, sum(w.tickets)::bigint,
               nullif(drift_labels_sum(w.label_counts), '{}'::jsonb), drift_hist_sum(w.confidence_hist::bigint[])
        FROM drift_windows w
        WHERE p_bucket = 'hour'
          AND w.window_start >= greatest(date_trunc('hour', p_since, 'UTC'), drift_rollup_done_before('drift_hourly'))
          AND w.window_start < p_until
          AND (p_tenant IS NULL OR w.tenant = p_tenant) AND (p_model IS NULL OR w.model = p_model)
        GROUP BY 1, 2, 3, 4 HAVING sum(w.tickets) > 0
        UNION ALL
        SELECT date_trunc('day', x.b), 86400, x.t, x.m, sum(x.n)::bigint,
               nullif(drift_labels_sum(x.lc), '{}'::jsonb), drift_hist_sum(x.h)
        FROM (SELECT d.bucket_start AS b, d.tenant AS t, d.model AS m, d.tickets AS n, d.label_counts AS lc,
                     d.confidence_hist AS h
              FROM drift_hourly d
              WHERE p_bucket = 'day' AND d.tickets > 0 AND d.bucket_start >= date_trunc('day', p_since)
                AND d.bucket_start < p_until AND d.bucket_start < drift_rollup_done_before('drift_hourly')
                AND (p_tenant IS NULL OR d.tenant = p_tenant) AND (p_model IS NULL OR d.model = p_model)
              UNION ALL
              SELECT w.window_start, w.tenant, w.model, w.tickets, w.label_counts, w.confidence_hist::bigint[]
              FROM drift_windows w
              WHERE p_bucket = 'day'
                AND w.window_start >= greatest(date_trunc('day', p_since), drift_rollup_done_before('drift_hourly'))
                AND w.window_start < p_until
                AND (p_tenant IS NULL OR w.tenant = p_tenant) AND (p_model IS NULL OR w.model = p_model)) x
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

