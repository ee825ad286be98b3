-- ticket_results keeps two indexes: its primary key (job_id, ticket_id, job_month) and
-- ticket_results_tenant_time (a tenant's recent results, README). 001's (job_id, label) goes:
-- every per-job query (README's, `reclass report`, `reclass jobs show`, the job_label_counts
-- and job_latency views, drift baselines) names the job, which the primary key's first column
-- finds; a label within a job is then a filter over the job's rows, which its month's
-- partition holds side by side. Each stored result no longer pays a third btree insert
-- (about a sixth of a result's WAL: tests/bench/RESULTS-job.md, "PostgreSQL's cost per result
-- row").
DROP INDEX IF EXISTS ticket_results_job_label;
