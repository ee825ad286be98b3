-- Produce-to-commit latency per job: from a ticket's enqueued_at (set by the producer, e.g.
-- reclass submit, when it sent the record) to its row's classified_at (the time of the
-- transaction that committed it; a redelivered ticket counts its last commit). p50 / p99 /
-- max in seconds over the job's tickets that carry enqueued_at; first / last of both times.
-- A view, so it is always current; filter it by job_id (the primary key's prefix).
CREATE VIEW job_latency AS
SELECT job_id,
       min(tenant) AS tenant,
       count(*) AS tickets,
       min(enqueued_at) AS first_enqueued,
       max(enqueued_at) AS last_enqueued,
       min(classified_at) AS first_committed,
       max(classified_at) AS last_committed,
       percentile_cont(0.5) WITHIN GROUP (ORDER BY extract(epoch FROM classified_at - enqueued_at))
           ::real AS p50_s,
       percentile_cont(0.99) WITHIN GROUP (ORDER BY extract(epoch FROM classified_at - enqueued_at))
           ::real AS p99_s,
       max(extract(epoch FROM classified_at - enqueued_at))::real AS max_s
FROM ticket_results
WHERE enqueued_at IS NOT NULL
GROUP BY job_id;
