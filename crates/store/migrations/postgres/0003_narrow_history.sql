-- History rows in the narrowest integer types that hold their values: a third fewer bytes per
-- row in the table, its index and the WAL (the history is most of the database). Target and
-- prober ids stay below 2^31 (one per target key and per node), a 10-minute bucket number
-- until the year 42,000, attempts per round and lost ones are counts of a few, a round trip
-- in microseconds is at most a probe's timeout. The time stays in milliseconds as 8 bytes.
-- Every partition is rewritten once, with its index.
ALTER TABLE history
    ALTER COLUMN bucket TYPE INTEGER,
    ALTER COLUMN target TYPE INTEGER,
    ALTER COLUMN prober TYPE INTEGER,
    ALTER COLUMN sent   TYPE SMALLINT,
    ALTER COLUMN lost   TYPE SMALLINT,
    ALTER COLUMN rtt_us TYPE INTEGER;
