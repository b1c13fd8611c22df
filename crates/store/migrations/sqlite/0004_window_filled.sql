-- How many slots of a result's window register hold an attempt (0–64), so a strip can show
-- an empty slot apart from a failed attempt. NULL in rows from before: read as full, as they
-- were shown.
ALTER TABLE latest_results ADD COLUMN filled INTEGER;
