-- The fleet's event stream (address conditions, levels, rules, revisions, alerts, probers,
-- publications): numbered by the control core, kept as long as the result history.
CREATE TABLE events (
    id INTEGER PRIMARY KEY,
    at INTEGER NOT NULL,
    kind TEXT NOT NULL,
    cluster INTEGER,
    node INTEGER,
    summary TEXT NOT NULL,
    details TEXT NOT NULL
);
CREATE INDEX events_by_time ON events (at);
CREATE INDEX events_by_cluster ON events (cluster, id);
CREATE INDEX events_by_node ON events (node, id);
