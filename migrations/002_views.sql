-- Read-side views for dashboards and the README's example queries.

CREATE VIEW job_label_counts AS
SELECT job_id, label, count(*) AS tickets, avg(confidence)::real AS mean_confidence
FROM ticket_results
GROUP BY job_id, label;

-- padding_waste: share of encoder work a padded (unsorted) batcher would have spent on padding
CREATE VIEW batch_stats_hourly AS
SELECT date_trunc('hour', at) AS hour,
       backend,
       count(*) AS batches,
       sum(tickets) AS tickets,
       sum(real_tokens) AS real_tokens,
       sum(padded_tokens) AS padded_tokens,
       CASE WHEN sum(padded_tokens) > 0
            THEN 1 - sum(real_tokens)::double precision / sum(padded_tokens) END AS padding_waste,
       avg(wait_ms)::real AS mean_wait_ms,
       avg(compute_ms)::real AS mean_compute_ms
FROM batches
GROUP BY 1, 2;
