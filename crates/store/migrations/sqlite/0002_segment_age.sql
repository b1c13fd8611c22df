-- The age of the newest media segment an HLS check found (ms), so monitor charts show how
-- stale each region's video was over time. Absent for other checks and unknown ages.
ALTER TABLE history ADD COLUMN age_ms INTEGER;
