-- Revisions stored as differences (issue 32): 0, the records are whole; else they are the
-- difference from the revision before, and the whole one is this many revisions back.
ALTER TABLE revisions ADD COLUMN delta INTEGER NOT NULL DEFAULT 0;
