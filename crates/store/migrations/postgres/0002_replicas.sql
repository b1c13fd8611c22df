-- Several replicas on one database (SPEC §8).

-- Revision numbers are gap-free per cluster by constraint: revision n (n > 1) can only be
-- stored after revision n - 1 of its cluster, and (cluster, number) is the primary key. Rows
-- stored before this migration are not checked again.
ALTER TABLE revisions ADD COLUMN previous BIGINT GENERATED ALWAYS AS (NULLIF(number - 1, 0)) STORED;
ALTER TABLE revisions ADD CONSTRAINT revisions_follow_previous
    FOREIGN KEY (cluster, previous) REFERENCES revisions (cluster, number) NOT VALID;

-- The evaluator lease's epoch: each replica that takes the lease makes it one greater, and a
-- revision is stored only under the epoch its replica took (`FOR SHARE` of this row while it
-- is stored): a holder that lost the lease cannot store a revision once the next holder has
-- read the stored ones.
CREATE TABLE lease (
    id    INTEGER PRIMARY KEY CHECK (id = 1),
    epoch BIGINT  NOT NULL
);
INSERT INTO lease (id, epoch) VALUES (1, 0);

-- Configuration changes in the order they were committed, so that every replica applies each
-- one to its control core. A change is numbered one after the newest its replica had applied:
-- a replica that missed one cannot commit (the number is taken) until it has caught up.
CREATE TABLE changes (
    seq    BIGINT PRIMARY KEY,
    at     BIGINT NOT NULL,
    origin TEXT   NOT NULL,
    writes TEXT   NOT NULL
);

-- Observations fed to one replica's control core (reports, heartbeats, work fetched…) that
-- the others' are fed too. Written under one advisory lock, so ids commit in order and a
-- reader that reads past an id never misses a smaller one; kept minutes.
CREATE TABLE inbox (
    id     BIGSERIAL PRIMARY KEY,
    at     BIGINT NOT NULL,
    origin TEXT   NOT NULL,
    body   TEXT   NOT NULL
);

-- Every replica listens: a new revision, change or relayed observation is read at once
-- instead of at the next periodic read.
CREATE FUNCTION vantage_notify() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify(TG_ARGV[0], '');
    RETURN NULL;
END
$$;
CREATE TRIGGER revisions_notify AFTER INSERT ON revisions
    FOR EACH STATEMENT EXECUTE FUNCTION vantage_notify('vantage_revisions');
CREATE TRIGGER changes_notify AFTER INSERT ON changes
    FOR EACH STATEMENT EXECUTE FUNCTION vantage_notify('vantage_changes');
CREATE TRIGGER inbox_notify AFTER INSERT ON inbox
    FOR EACH STATEMENT EXECUTE FUNCTION vantage_notify('vantage_inbox');
