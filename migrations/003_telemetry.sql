-- Telemetry of `reclass run`: drift statistics per time window, GPU memory samples.
-- Drift is approximate statistics (a ticket redelivered after a crash is counted again);
-- exact per-ticket results are in ticket_results.

-- One row per (window, tenant, model, worker). A worker upserts and ADDS on conflict, so a
-- restarted pod (same hostname:pid, e.g. pid 1 in a container) adds to its window instead of
-- overwriting it. Tenants beyond a worker's --drift-max-tenants are aggregated in the row
-- tenant = '_other', overflow = true.
CREATE TABLE drift_windows (
    window_start    timestamptz NOT NULL,
    window_s        integer NOT NULL CHECK (window_s > 0),
    tenant          text COLLATE "C" NOT NULL,
    model           text COLLATE "C" NOT NULL,
    worker          text COLLATE "C" NOT NULL,
    overflow        boolean NOT NULL DEFAULT false,
    tickets         bigint NOT NULL CHECK (tickets >= 0),
    -- {"label": count, ...}, labels with a zero count left out
    label_counts    jsonb NOT NULL,
    -- bin i counts confidences in [i/10, (i+1)/10); 1.0 falls in bin 9. Sums to tickets.
    confidence_hist integer[] NOT NULL CHECK (cardinality(confidence_hist) = 10),
    confidence_sum  double precision NOT NULL DEFAULT 0,
    mean_confidence real,
    truncated       integer NOT NULL DEFAULT 0,
    tokens          bigint NOT NULL DEFAULT 0,
    updated_at      timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (window_start, tenant, model, worker)
);

CREATE INDEX drift_windows_tenant ON drift_windows (tenant, window_start);

-- Device memory as the backend reports it: at start, every --telemetry-interval-s, at exit.
-- allocations_after_init must stay 0 (no device allocation after start-up, by construction).
CREATE TABLE gpu_memory (
    at                     timestamptz NOT NULL DEFAULT now(),
    worker                 text NOT NULL,
    backend                text NOT NULL,
    "precision"            text,
    device_total_bytes     bigint,
    device_used_bytes      bigint,
    weights_bytes          bigint,
    arena_bytes            bigint,
    allocations_after_init bigint,
    token_budget           integer
);

CREATE INDEX gpu_memory_at ON gpu_memory (at);

-- Drift summed over workers: one row per (window, tenant, model).
CREATE VIEW drift_by_window AS
SELECT window_start, window_s, tenant, model, bool_or(overflow) AS overflow,
       sum(tickets) AS tickets,
       (sum(confidence_sum) / NULLIF(sum(tickets), 0))::real AS mean_confidence,
       sum(truncated) AS truncated, sum(tokens) AS tokens, count(*) AS workers
FROM drift_windows
GROUP BY window_start, window_s, tenant, model;
