-- A worker runs several encoders (`reclass run --encoders N --devices ...`), each a backend
-- instance with its own weights and arena on one device: gpu_memory gets a row per encoder at
-- each sample, naming the device (the CUDA ordinal; 0 on the cpu backend) and the encoder
-- (0 .. N-1 within its worker). device_total_bytes and device_used_bytes are the device's
-- (every encoder on it reports the same), weights_bytes and arena_bytes the encoder's own.
-- Rows written before this migration leave both NULL: one encoder, the worker's --device.
ALTER TABLE gpu_memory ADD COLUMN device integer, ADD COLUMN encoder integer;
