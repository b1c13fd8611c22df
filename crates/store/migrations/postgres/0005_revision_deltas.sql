-- Revisions stored as differences (issue 32). `delta`: 0, the row's `records` are whole;
-- else the whole revision is this many revisions back, `records` is empty (a server of an
-- older version fails to read it rather than take it for a revision without records) and
-- `difference` holds what changed from the revision before.
ALTER TABLE revisions ADD COLUMN delta BIGINT NOT NULL DEFAULT 0;
ALTER TABLE revisions ADD COLUMN difference TEXT;
