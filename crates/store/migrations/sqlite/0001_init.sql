-- Vantage schema, SQLite. Times are milliseconds since the Unix epoch.

-- Configuration objects, one row each; `body` is the validated object as JSON. The control
-- plane loads them whole at start and validates references and names in memory.
CREATE TABLE objects (
    id         INTEGER PRIMARY KEY AUTOINCREMENT,
    kind       TEXT    NOT NULL,
    parent     INTEGER,
    name       TEXT    NOT NULL,
    body       TEXT    NOT NULL,
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL
);
CREATE INDEX objects_by_kind ON objects (kind, parent);

-- Every change: who, what, on which object, when.
CREATE TABLE audit (
    id       INTEGER PRIMARY KEY AUTOINCREMENT,
    at       INTEGER NOT NULL,
    actor    TEXT    NOT NULL,
    action   TEXT    NOT NULL,
    object   TEXT    NOT NULL,
    metadata TEXT    NOT NULL
);
CREATE INDEX audit_by_time ON audit (at);
CREATE INDEX audit_by_action ON audit (action, at);

-- Target keys get small integer ids so history rows stay small.
CREATE TABLE targets (
    id  INTEGER PRIMARY KEY,
    key TEXT NOT NULL UNIQUE
);

-- The latest result per (prober, target), with the target's window register. No index on
-- `at`: every report would update it, and expiry scans the table once a minute instead.
CREATE TABLE latest_results (
    prober    INTEGER NOT NULL,
    target    INTEGER NOT NULL,
    at        INTEGER NOT NULL,
    sent      INTEGER NOT NULL,
    lost      INTEGER NOT NULL,
    rtt_us    INTEGER,
    error     TEXT,
    connected INTEGER NOT NULL,
    xmit      INTEGER NOT NULL,
    recv      INTEGER NOT NULL,
    good      INTEGER NOT NULL,
    avg_rtt   REAL    NOT NULL,
    hls       TEXT,
    PRIMARY KEY (prober, target)
) WITHOUT ROWID;

-- Every result, as a time series indexed by (target, time). Rows are clustered by a
-- 10-minute bucket first, so a batch of reports writes one small region of the tree instead
-- of one page per target across all of history; a query walks the buckets of its range and
-- seeks (bucket, target) in each.
CREATE TABLE history (
    bucket INTEGER NOT NULL,
    target INTEGER NOT NULL,
    at     INTEGER NOT NULL,
    prober INTEGER NOT NULL,
    sent   INTEGER NOT NULL,
    lost   INTEGER NOT NULL,
    rtt_us INTEGER,
    error  TEXT,
    PRIMARY KEY (bucket, target, at, prober)
) WITHOUT ROWID;

-- Daily roll-up of history rows before they are deleted.
CREATE TABLE history_daily (
    target     INTEGER NOT NULL,
    day        INTEGER NOT NULL,
    prober     INTEGER NOT NULL,
    rounds     INTEGER NOT NULL,
    sent       INTEGER NOT NULL,
    lost       INTEGER NOT NULL,
    rtt_avg_us INTEGER,
    rtt_max_us INTEGER,
    PRIMARY KEY (target, day, prober)
) WITHOUT ROWID;

-- Published states of a cluster's DNS records.
CREATE TABLE revisions (
    cluster INTEGER NOT NULL,
    number  INTEGER NOT NULL,
    at      INTEGER NOT NULL,
    reason  TEXT    NOT NULL,
    records TEXT    NOT NULL,
    held    TEXT    NOT NULL,
    publish TEXT    NOT NULL,
    PRIMARY KEY (cluster, number)
) WITHOUT ROWID;

-- Runtime state kept across restarts (evaluator states, heartbeats…): JSON by key.
CREATE TABLE state (
    key        TEXT    PRIMARY KEY,
    value      TEXT    NOT NULL,
    updated_at INTEGER NOT NULL
) WITHOUT ROWID;
