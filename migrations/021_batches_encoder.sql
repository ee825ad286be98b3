-- Which encoder ran a batch, and on which device. A worker runs several encoders (`reclass run
-- --encoders N --devices ...`, migration 019), and the batches in flight on one that fails run
-- on the others: each batches row names the encoder that ran it (0 .. N-1 within its worker, as
-- gpu_memory's encoder) and its device (the CUDA ordinal; NULL on the cpu backend, which runs
-- on the host). Rows written before this migration leave both NULL: one encoder, the worker's
-- --device. Nullable, with no default and no check: the upgrade changes the catalog only,
-- whatever the table's size.
ALTER TABLE batches ADD COLUMN encoder smallint, ADD COLUMN device smallint;
