-- reclass schema, version 1: job progress, one row per classified ticket, batch telemetry.
-- Migrations run inside a transaction (reclass migrate): no BEGIN/COMMIT here and nothing
-- that cannot run in a transaction (CREATE INDEX CONCURRENTLY).
-- Identifiers and labels use COLLATE "C": byte order is the right order for ids, btree
-- comparisons skip the locale (a measurable share of insert time, tests/bench/RESULTS-sink.md),
-- and an OS collation update can never corrupt these indexes.

CREATE TABLE jobs (
    job_id       text COLLATE "C" PRIMARY KEY,
    tenant       text,
    total        integer NOT NULL,
    -- distinct tickets stored so far: redeliveries never count twice (see sink/sink.c)
    done         integer NOT NULL DEFAULT 0,
    first_seen   timestamptz NOT NULL DEFAULT now(),
    -- set once, by the write that brings done up to total
    completed_at timestamptz,
    updated_at   timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE ticket_results (
    job_id        text COLLATE "C" NOT NULL,
    ticket_id     text COLLATE "C" NOT NULL,
    tenant        text,
    label         text COLLATE "C" NOT NULL,
    label_id      integer NOT NULL,
    confidence    real NOT NULL,
    top_k         jsonb,
    tokens        integer NOT NULL,
    truncated     boolean NOT NULL DEFAULT false,
    model         text NOT NULL,
    "partition"   integer,
    "offset"      bigint,
    enqueued_at   timestamptz,
    classified_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (job_id, ticket_id)
);

-- "how many tickets of job X got label Y" and "list job X's tickets labelled Y"
CREATE INDEX ticket_results_job_label ON ticket_results (job_id, label);

CREATE TABLE batches (
    id                bigserial PRIMARY KEY,
    at                timestamptz NOT NULL DEFAULT now(),
    tickets           integer NOT NULL CHECK (tickets >= 0),
    real_tokens       bigint NOT NULL CHECK (real_tokens >= 0),
    padded_tokens     bigint NOT NULL CHECK (padded_tokens >= 0),
    wait_ms           real,
    compute_ms        real,
    backend           text NOT NULL,
    device_used_bytes bigint,
    arena_bytes       bigint
);

CREATE INDEX batches_at ON batches (at);
