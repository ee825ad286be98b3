-- A batches row names its worker, the identity its gpu_memory rows carry (hostname:pid), so a
-- batch is tied to its encoder's memory samples and to the job report's line for that
-- encoder: (worker, encoder, device) in both tables. Rows written before this migration leave
-- it NULL. Nullable, with no default: the ALTER changes the catalog only, whatever the
-- table's size.
--
-- One rule for the device in both tables: NULL where the encoder runs on the host (the cpu
-- backend, which has no devices), as 021 has it for batches; 0 is a real CUDA ordinal. 019
-- wrote 0 in gpu_memory for the cpu; those rows are told apart by their backend ('cpu', the
-- one backend without devices) and lose the ordinal they never had. gpu_memory holds a few
-- samples a minute per encoder and is written by INSERT only: the UPDATE's row locks make no
-- writer wait. It goes first so that the ALTER's lock on batches, which every result
-- transaction inserts into, is held only from the ALTER to the commit.
UPDATE gpu_memory SET device = NULL WHERE backend = 'cpu' AND device IS NOT NULL;
ALTER TABLE batches ADD COLUMN worker text;
