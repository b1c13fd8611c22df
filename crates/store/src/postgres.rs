//! The PostgreSQL backend: the same tables as SQLite in the connection's current schema, with
//! results written in bulk (by binary COPY: a handful of statements for a whole group commit)
//! and the history partitioned by UTC day, so that the roll-up drops a finished day's partition
//! instead of deleting its rows.

use std::collections::BTreeSet;
use std::sync::Mutex;
use std::time::Duration;

use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use sqlx::{AssertSqlSafe, PgConnection, PgPool};
use vantage_core::Timestamp;
use vantage_core::result::ErrorCode;

use crate::backend::{Backend, Op};
use crate::chain::Stored;
use crate::filters::Order;
use crate::pgcopy::Copy;
use crate::rows::{self, Fields, bits_out};
use crate::{
    AuditEntry, AuditFilter, DailyPoint, Error, EventFilter, EventRow, HistoryPoint, LogAs, NewAudit,
    ObjectRow, Replication, Result, ResultRow, TargetIds, Write, filters, in_transaction,
};

const DAY_MS: i64 = 86_400_000;

/// History rows are clustered in buckets of this many milliseconds (as on SQLite).
const BUCKET_MS: i64 = 600_000;

fn bucket(at: Timestamp) -> i64 {
    at.millis().div_euclid(BUCKET_MS)
}

/// Rows per bulk statement: bounds the size of one statement's arrays (a group commit may
/// carry a million results) while keeping the statements per commit few.
const CHUNK: usize = 50_000;

/// Advisory lock key taken while history partitions are created, so that two writers (two
/// replicas, or two pools of one) creating the same day's partition take turns.
const PARTITION_LOCK: i64 = 0x7661_6e74_6167_6501;

/// What a store has seen of its database and may skip asking again: target ids, and the days
/// whose history partition exists.
#[derive(Debug, Default)]
pub(crate) struct Known {
    targets: TargetIds,
    days: Mutex<BTreeSet<i64>>,
}

impl Known {
    fn missing_days(&self, wanted: &BTreeSet<i64>) -> Vec<i64> {
        match self.days.lock() {
            Ok(days) => wanted.difference(&days).copied().collect(),
            Err(_) => wanted.iter().copied().collect(),
        }
    }

    fn set_days(&self, f: impl FnOnce(&mut BTreeSet<i64>)) {
        if let Ok(mut days) = self.days.lock() {
            f(&mut days);
        }
    }
}

/// A database several replicas may share.
#[derive(Debug)]
pub(crate) struct Postgres {
    pool: PgPool,
    known: Known,
}

impl Postgres {
    /// Connects and runs the migrations.
    pub(crate) async fn open(options: &PgConnectOptions) -> Result<Postgres> {
        Ok(Postgres { pool: open(options).await?, known: Known::default() })
    }
}

impl Backend for Postgres {
    crate::shared::shared_methods!();

    fn commit<'a>(
        &'a self,
        log: Option<LogAs<'a>>,
        writes: &'a [Write],
        audit: &'a [NewAudit],
        now: Timestamp,
    ) -> Op<'a, ()> {
        Box::pin(commit(&self.pool, log, writes, audit, now))
    }

    fn replication(&self) -> Option<Replication> {
        let options = (*self.pool.connect_options()).clone();
        Some(Replication { pool: self.pool.clone(), options, chains: crate::chain::Chains::default() })
    }

    fn write_results<'a>(&'a self, rows: &'a [ResultRow]) -> Op<'a, ()> {
        Box::pin(write_results(&self.pool, &self.known, rows))
    }

    fn roll_up_history(&self, before: Timestamp) -> Op<'_, u64> {
        Box::pin(roll_up_history(&self.pool, &self.known, before))
    }
}

async fn open(options: &PgConnectOptions) -> Result<PgPool> {
    let pool = PgPoolOptions::new()
        .max_connections(8)
        .acquire_timeout(Duration::from_secs(10))
        .connect_with(options.clone())
        .await?;
    sqlx::migrate!("./migrations/postgres").run(&pool).await?;
    Ok(pool)
}

pub(crate) async fn commit(
    pool: &PgPool,
    log: Option<LogAs<'_>>,
    writes: &[Write],
    audit: &[NewAudit],
    now: Timestamp,
) -> Result<()> {
    in_transaction(pool, async |tx| {
        if let Some(log) = log {
            let files = (!log.files.is_empty()).then(|| serde_json::to_string(log.files)).transpose()?;
            sqlx::query("INSERT INTO changes (seq, at, origin, writes, files) VALUES ($1, $2, $3, $4, $5)")
                .bind(log.seq)
                .bind(now.millis())
                .bind(log.origin)
                .bind(serde_json::to_string(writes)?)
                .bind(files)
                .execute(&mut *tx)
                .await
                .map_err(|e| if crate::replication::is_conflict(&e) { Error::Conflict } else { e.into() })?;
        }
        for w in writes {
            match w {
                Write::Put { id, kind, parent, name, body } => {
                    sqlx::query(
                        "INSERT INTO objects (id, kind, parent, name, body, created_at, updated_at) \
                         VALUES ($1, $2, $3, $4, $5, $6, $6) \
                         ON CONFLICT (id) DO UPDATE SET kind = EXCLUDED.kind, parent = EXCLUDED.parent, \
                             name = EXCLUDED.name, body = EXCLUDED.body, updated_at = EXCLUDED.updated_at",
                    )
                    .bind(id)
                    .bind(kind)
                    .bind(parent)
                    .bind(name)
                    .bind(body)
                    .bind(now.millis())
                    .execute(&mut *tx)
                    .await?;
                }
                Write::Delete { id } => {
                    let done =
                        sqlx::query("DELETE FROM objects WHERE id = $1").bind(id).execute(&mut *tx).await?;
                    if done.rows_affected() == 0 {
                        return Err(Error::NotFound(*id));
                    }
                }
            }
        }
        if !audit.is_empty() {
            let mut actors = Vec::new();
            let mut actions = Vec::new();
            let mut objects = Vec::new();
            let mut metadata = Vec::new();
            for a in audit {
                actors.push(a.actor.as_str());
                actions.push(a.action.as_str());
                objects.push(a.object.as_str());
                metadata.push(serde_json::to_string(&a.metadata)?);
            }
            // WITH ORDINALITY keeps the entries' order in their ids.
            sqlx::query(
                "INSERT INTO audit (at, actor, action, object, metadata) \
                 SELECT $1, actor, action, object, metadata \
                 FROM UNNEST($2::text[], $3::text[], $4::text[], $5::text[]) \
                     WITH ORDINALITY AS a (actor, action, object, metadata, n) ORDER BY n",
            )
            .bind(now.millis())
            .bind(&actors)
            .bind(&actions)
            .bind(&objects)
            .bind(&metadata)
            .execute(&mut *tx)
            .await?;
        }
        Ok(())
    })
    .await
}

/// The start (UTC midnight, ms) of the day holding `at`.
fn day_of(at: i64) -> i64 {
    at.div_euclid(DAY_MS) * DAY_MS
}

/// The name of the history partition of the day starting at `day` (ms): `history_YYYYMMDD`,
/// from the day's RFC 3339 date.
fn partition_name(day: i64) -> String {
    let date: String =
        Timestamp::from_millis(day).to_string().chars().take(10).filter(|c| *c != '-').collect();
    format!("history_{date}")
}

/// Creates the history partitions of the days of `rows`, and of the day after each, that are
/// not known to exist. Creating a partition locks the parent table for a moment; making the
/// next day's ahead means the first write after midnight finds its partition there.
async fn ensure_partitions(pool: &PgPool, known: &Known, rows: &[ResultRow]) -> Result<()> {
    let wanted: BTreeSet<i64> =
        rows.iter().map(|r| day_of(r.at.millis())).flat_map(|d| [d, d + DAY_MS]).collect();
    let missing = known.missing_days(&wanted);
    if missing.is_empty() {
        return Ok(());
    }
    in_transaction(pool, async |tx| {
        sqlx::query("SELECT pg_advisory_xact_lock($1)").bind(PARTITION_LOCK).execute(&mut *tx).await?;
        for &day in &missing {
            // The name is made of digits only, and the bounds are integers: nothing to quote.
            sqlx::query(AssertSqlSafe(format!(
                "CREATE TABLE IF NOT EXISTS {} PARTITION OF history FOR VALUES FROM ({day}) TO ({})",
                partition_name(day),
                day + DAY_MS
            )))
            .execute(&mut *tx)
            .await?;
        }
        Ok(())
    })
    .await?;
    known.set_days(|days| days.extend(missing));
    Ok(())
}

/// True when PostgreSQL found no partition for a row (SQLSTATE 23514): another writer's
/// roll-up dropped a day this store still believed existed.
fn no_partition(e: &Error) -> bool {
    matches!(e, Error::Database(sqlx::Error::Database(d))
        if d.code().as_deref() == Some("23514") && d.message().contains("no partition"))
}

/// True for a unique violation (SQLSTATE 23505).
fn stored_before(e: &Error) -> bool {
    matches!(e, Error::Database(sqlx::Error::Database(d)) if d.code().as_deref() == Some("23505"))
}

pub(crate) async fn write_results(pool: &PgPool, known: &Known, rows: &[ResultRow]) -> Result<()> {
    if rows.is_empty() {
        return Ok(());
    }
    ensure_partitions(pool, known, rows).await?;
    let (ids, created) = in_transaction(pool, async |tx| target_ids(tx, &known.targets, rows).await).await?;
    // Only ids that are committed may be remembered: a rolled-back one may be given to another key.
    for (key, id) in created {
        known.targets.put(key, id);
    }
    // The latest rows and the history on two connections at once, one transaction each, so
    // that the database works on both with both cores. The batch is refused if either fails;
    // the other may have committed (the latest rows without their history, say), and writing
    // the batch again changes nothing there: both writes are idempotent.
    let history = async {
        match in_transaction(pool, async |tx| write_history(tx, rows, &ids).await).await {
            Err(e) if no_partition(&e) => {
                known.set_days(BTreeSet::clear);
                ensure_partitions(pool, known, rows).await?;
                in_transaction(pool, async |tx| write_history(tx, rows, &ids).await).await
            }
            other => other,
        }
    };
    let latest = in_transaction(pool, async |tx| write_latest(tx, rows, &ids).await);
    let (latest, history) = tokio::join!(latest, history);
    latest.and(history)
}

/// Ids of `keys`, creating the missing ones inside `tx` in one statement; and the ones not in
/// `cache`, to be remembered once `tx` commits.
async fn target_ids(tx: &mut PgConnection, cache: &TargetIds, rows: &[ResultRow]) -> Result<crate::Resolved> {
    let lookup = cache.lookup(rows.iter().map(|r| r.target.as_str()));
    let mut found = Vec::new();
    if !lookup.unknown.is_empty() {
        // Only keys not stored yet reach the insert: each row that does takes an identity value
        // even when it conflicts, and ids stay below the history's 2^31 however often replicas
        // restart with an empty cache.
        sqlx::query(
            "INSERT INTO targets (key) SELECT k FROM UNNEST($1::text[]) AS u (k) \
             WHERE NOT EXISTS (SELECT 1 FROM targets AS t WHERE t.key = u.k) ON CONFLICT (key) DO NOTHING",
        )
        .bind(&lookup.unknown)
        .execute(&mut *tx)
        .await?;
        found = sqlx::query_as("SELECT id, key FROM targets WHERE key = ANY($1)")
            .bind(&lookup.unknown)
            .fetch_all(&mut *tx)
            .await?;
    }
    lookup.finish(found)
}

/// The latest table's share of [`write_results`], in its transaction: the rows go by binary
/// COPY into a temporary table, then one statement updates the rows there are (the usual case:
/// every target reported before) and, only when some are missing, a second inserts those. The
/// same upsert from array parameters costs twice as much (unpacking 14 arrays into a
/// tuplestore, then a join against it); an `ON CONFLICT DO UPDATE` of every row more still.
async fn write_latest(tx: &mut PgConnection, rows: &[ResultRow], ids: &[i64]) -> Result<()> {
    // One row per (prober, target): an update may not touch a row twice, and of two results
    // in a batch the later one is kept, as on SQLite. (Two writers share rows only when a
    // prober's reports reach two replicas at once; should they lock them in different orders,
    // PostgreSQL refuses one batch as a deadlock, and it fails as any refused write does.)
    let mut latest: Vec<usize> = (0..rows.len()).collect();
    latest.sort_by_key(|&i| (rows[i].prober, ids[i]));
    let mut kept: Vec<usize> = Vec::with_capacity(latest.len());
    for i in latest {
        match kept.last_mut() {
            Some(last) if (rows[*last].prober, ids[*last]) == (rows[i].prober, ids[i]) => *last = i,
            _ => kept.push(i),
        }
    }
    // The temporary table lives as long as the connection and is emptied at each commit; the
    // notice that it exists already is not worth a round trip to the log. The join's hash
    // table of a large batch fits in `work_mem` this size (the default, 4 MB, spills a batch
    // of 500,000 rows to disk).
    sqlx::raw_sql(
        "SET LOCAL client_min_messages = warning; \
         CREATE TEMP TABLE IF NOT EXISTS latest_input (LIKE latest_results) ON COMMIT DELETE ROWS; \
         SET LOCAL work_mem = '64MB'",
    )
    .execute(&mut *tx)
    .await?;
    copy_latest(tx, rows, ids, &kept).await?;
    // Neither statement is kept prepared: a kept plan would be the one made for the first
    // batch's size (the temporary table has no statistics), and planning costs nothing beside
    // the join.
    let updated = sqlx::query(
        "UPDATE latest_results AS l SET at = i.at, sent = i.sent, lost = i.lost, rtt_us = i.rtt_us, \
             error = i.error, connected = i.connected, xmit = i.xmit, recv = i.recv, good = i.good, \
             avg_rtt = i.avg_rtt, hls = i.hls, filled = i.filled \
         FROM latest_input AS i WHERE l.prober = i.prober AND l.target = i.target",
    )
    .persistent(false)
    .execute(&mut *tx)
    .await?
    .rows_affected();
    if updated < kept.len() as u64 {
        // `ON CONFLICT` also covers a row another writer adds meanwhile.
        sqlx::query(
            "INSERT INTO latest_results (prober, target, at, sent, lost, rtt_us, error, connected, xmit, recv, \
                 good, avg_rtt, hls, filled) \
             SELECT prober, target, at, sent, lost, rtt_us, error, connected, xmit, recv, good, avg_rtt, hls, \
                 filled FROM latest_input AS i \
             WHERE NOT EXISTS (SELECT 1 FROM latest_results AS l WHERE l.prober = i.prober AND l.target = i.target) \
             ON CONFLICT (prober, target) DO UPDATE SET at = EXCLUDED.at, sent = EXCLUDED.sent, \
                 lost = EXCLUDED.lost, rtt_us = EXCLUDED.rtt_us, error = EXCLUDED.error, \
                 connected = EXCLUDED.connected, xmit = EXCLUDED.xmit, recv = EXCLUDED.recv, \
                 good = EXCLUDED.good, avg_rtt = EXCLUDED.avg_rtt, hls = EXCLUDED.hls, filled = EXCLUDED.filled",
        )
        .persistent(false)
        .execute(&mut *tx)
        .await?;
    }
    Ok(())
}

/// Writes the latest rows `order` of `rows` into the temporary `latest_input`.
async fn copy_latest(tx: &mut PgConnection, rows: &[ResultRow], ids: &[i64], order: &[usize]) -> Result<()> {
    let mut copy = Copy::start(
        tx,
        "COPY latest_input (prober, target, at, sent, lost, rtt_us, error, connected, xmit, recv, good, \
             avg_rtt, hls, filled) FROM STDIN (FORMAT binary)",
    )
    .await?;
    for &i in order {
        let r = &rows[i];
        copy.row(14);
        copy.int(Some(r.prober));
        copy.int(Some(ids[i]));
        copy.int(Some(r.at.millis()));
        copy.int(Some(i64::from(r.sent)));
        copy.int(Some(i64::from(r.lost)));
        copy.int(r.rtt_us.map(i64::from));
        copy.text(r.error.map(ErrorCode::as_str));
        copy.int(Some(bits_out(r.register.connected)));
        copy.int(Some(bits_out(r.register.sent)));
        copy.int(Some(bits_out(r.register.received)));
        copy.int(Some(bits_out(r.register.good)));
        copy.float(f64::from(r.register.avg_rtt_ms));
        copy.text(r.hls.map(|h| serde_json::to_string(&h)).transpose()?.as_deref());
        copy.int(Some(i64::from(r.register.filled())));
        copy.flush_full().await?;
    }
    copy.finish().await?;
    Ok(())
}

/// The history's share of [`write_results`], in its transaction: in its index's order, so the
/// index is written front to back; by COPY, in a savepoint: a result stored before (a retried
/// write) fails it, and then the rows go again by an insert that keeps what was stored, as
/// SQLite does. `ON CONFLICT` on every write would cost more than the copy itself (each row
/// checked against the index before and after its insert).
async fn write_history(tx: &mut PgConnection, rows: &[ResultRow], ids: &[i64]) -> Result<()> {
    let mut history =
        rows.iter().zip(ids).map(|(r, &id)| HistoryRow::of(r, id)).collect::<Result<Vec<_>>>()?;
    history.sort_unstable_by_key(|h| (h.bucket, h.target, h.at, h.prober));
    let mut copy = sqlx::Connection::begin(&mut *tx).await?;
    match copy_history(&mut copy, &history).await {
        Ok(()) => copy.commit().await?,
        Err(e) if stored_before(&e) => {
            copy.rollback().await?;
            for chunk in history.chunks(CHUNK) {
                insert_history(tx, chunk).await?;
            }
        }
        Err(e) => return Err(e),
    }
    Ok(())
}

/// A result as a history row, in the table's column types (migration 0003): 4-byte ids, bucket
/// and round trip, 2-byte counts. Counts and round trips beyond their type saturate (no probe
/// makes 32,767 attempts a round or waits 35 minutes); an id beyond 2^31 is an error naming it.
#[derive(Debug, PartialEq)]
struct HistoryRow {
    bucket: i32,
    target: i32,
    at: i64,
    prober: i32,
    sent: i16,
    lost: i16,
    rtt_us: Option<i32>,
    error: Option<&'static str>,
    age_ms: Option<i64>,
}

impl HistoryRow {
    fn of(r: &ResultRow, target: i64) -> Result<HistoryRow> {
        fn narrow(v: i64, what: &str) -> Result<i32> {
            i32::try_from(v).map_err(|_| {
                Error::Database(sqlx::Error::Protocol(format!("{what} {v} is beyond the history's 2^31")))
            })
        }
        Ok(HistoryRow {
            bucket: narrow(bucket(r.at), "time bucket")?,
            target: narrow(target, "target id")?,
            at: r.at.millis(),
            prober: narrow(r.prober, "prober id")?,
            sent: i16::try_from(r.sent).unwrap_or(i16::MAX),
            lost: i16::try_from(r.lost).unwrap_or(i16::MAX),
            rtt_us: r.rtt_us.map(|v| i32::try_from(v).unwrap_or(i32::MAX)),
            error: r.error.map(ErrorCode::as_str),
            age_ms: r.hls.and_then(|h| h.segment_age_s).map(|s| (s * 1000.0).round() as i64),
        })
    }
}

/// Writes `history` by binary COPY.
async fn copy_history(tx: &mut PgConnection, history: &[HistoryRow]) -> Result<()> {
    let mut copy = Copy::start(
        tx,
        "COPY history (bucket, target, at, prober, sent, lost, rtt_us, error, age_ms) FROM STDIN (FORMAT binary)",
    )
    .await?;
    for h in history {
        copy.row(9);
        copy.int4(Some(h.bucket));
        copy.int4(Some(h.target));
        copy.int(Some(h.at));
        copy.int4(Some(h.prober));
        copy.int2(h.sent);
        copy.int2(h.lost);
        copy.int4(h.rtt_us);
        copy.text(h.error);
        copy.int(h.age_ms);
        copy.flush_full().await?;
    }
    copy.finish().await?;
    Ok(())
}

/// [`copy_history`] for a batch some of whose rows may be stored already: those are kept.
async fn insert_history(tx: &mut PgConnection, chunk: &[HistoryRow]) -> Result<()> {
    fn column<'h, T>(chunk: &'h [HistoryRow], f: impl Fn(&'h HistoryRow) -> T) -> Vec<T> {
        chunk.iter().map(f).collect()
    }
    sqlx::query(
        "INSERT INTO history (bucket, target, at, prober, sent, lost, rtt_us, error, age_ms) \
         SELECT * FROM UNNEST($1::int4[], $2::int4[], $3::int8[], $4::int4[], $5::int2[], $6::int2[], \
             $7::int4[], $8::text[], $9::int8[]) \
         ON CONFLICT DO NOTHING",
    )
    .bind(column(chunk, |h| h.bucket))
    .bind(column(chunk, |h| h.target))
    .bind(column(chunk, |h| h.at))
    .bind(column(chunk, |h| h.prober))
    .bind(column(chunk, |h| h.sent))
    .bind(column(chunk, |h| h.lost))
    .bind(column(chunk, |h| h.rtt_us))
    .bind(column(chunk, |h| h.error))
    .bind(column(chunk, |h| h.age_ms))
    .execute(&mut *tx)
    .await?;
    Ok(())
}

pub(crate) async fn history(
    pool: &PgPool,
    target: &str,
    since: Timestamp,
    until: Timestamp,
) -> Result<Vec<HistoryPoint>> {
    let rows = sqlx::query(
        "SELECT h.at, h.prober::bigint, h.sent::bigint, h.lost::bigint, h.rtt_us::bigint, h.error, h.age_ms \
         FROM generate_series($4, $5) AS b \
         JOIN history AS h ON h.bucket = b AND h.target = (SELECT id FROM targets WHERE key = $1) \
         WHERE h.at >= $2 AND h.at < $3 ORDER BY h.at, h.prober",
    )
    .bind(target)
    .bind(since.millis())
    .bind(until.millis())
    .bind(bucket(since))
    .bind(bucket(until.plus_millis(-1)))
    .fetch_all(pool)
    .await?;
    rows::all(&rows, rows::history_point)
}

pub(crate) async fn roll_up_history(pool: &PgPool, known: &Known, before: Timestamp) -> Result<u64> {
    let (deleted, dropped) = in_transaction(pool, async |tx| roll_up_in(tx, before).await).await?;
    known.set_days(|days| {
        for d in dropped {
            days.remove(&d);
        }
    });
    Ok(deleted)
}

/// The statements of [`roll_up_history`], in its transaction: the history rows rolled up, and
/// the days whose partitions were dropped.
async fn roll_up_in(tx: &mut PgConnection, before: Timestamp) -> Result<(u64, Vec<i64>)> {
    // One aggregate over every partition before the cut-off (the planner skips the others);
    // the rows it read are the rows about to go. The merge with an earlier roll-up of the same
    // day is SQLite's, integer division included.
    let rolled: i64 = sqlx::query_scalar(
        "WITH day AS ( \
             SELECT target, (at / $2) * $2 AS day, prober, COUNT(*) AS rounds, SUM(sent) AS sent, \
                    SUM(lost) AS lost, TRUNC(AVG(rtt_us))::bigint AS rtt_avg_us, MAX(rtt_us) AS rtt_max_us \
             FROM history WHERE at < $1 GROUP BY target, (at / $2) * $2, prober), \
         up AS ( \
             INSERT INTO history_daily AS d (target, day, prober, rounds, sent, lost, rtt_avg_us, rtt_max_us) \
             SELECT target, day, prober, rounds, sent, lost, rtt_avg_us, rtt_max_us FROM day \
             ON CONFLICT (target, day, prober) DO UPDATE SET \
                 rtt_avg_us = CASE WHEN d.rtt_avg_us IS NULL THEN EXCLUDED.rtt_avg_us \
                                   WHEN EXCLUDED.rtt_avg_us IS NULL THEN d.rtt_avg_us \
                                   ELSE (d.rtt_avg_us * d.rounds + EXCLUDED.rtt_avg_us * EXCLUDED.rounds) \
                                        / (d.rounds + EXCLUDED.rounds) END, \
                 rounds = d.rounds + EXCLUDED.rounds, sent = d.sent + EXCLUDED.sent, \
                 lost = d.lost + EXCLUDED.lost, \
                 rtt_max_us = GREATEST(COALESCE(d.rtt_max_us, 0), COALESCE(EXCLUDED.rtt_max_us, 0))) \
         SELECT COALESCE(SUM(rounds), 0)::bigint FROM day",
    )
    .bind(before.millis())
    .bind(DAY_MS)
    .fetch_one(&mut *tx)
    .await?;
    // Each partition with its bounds, `FOR VALUES FROM ('a') TO ('b')`: the numbers in quotes.
    let parts: Vec<(String, String)> = sqlx::query_as(
        "SELECT c.relname::text, pg_get_expr(c.relpartbound, c.oid) FROM pg_inherits AS i \
         JOIN pg_class AS c ON c.oid = i.inhrelid WHERE i.inhparent = 'history'::regclass",
    )
    .fetch_all(&mut *tx)
    .await?;
    let mut dropped = Vec::new();
    for (name, bound) in parts {
        let ends: Vec<i64> = bound.split('\'').filter_map(|s| s.parse().ok()).collect();
        if let [from, to] = ends[..]
            && to <= before.millis()
        {
            // A name from the catalog, quoted as an identifier.
            let drop = format!("DROP TABLE \"{}\"", name.replace('"', "\"\""));
            sqlx::query(AssertSqlSafe(drop)).execute(&mut *tx).await?;
            dropped.push(from);
        }
    }
    // What is left before the cut-off lies in the one partition the cut-off falls inside.
    sqlx::query("DELETE FROM history WHERE at < $1").bind(before.millis()).execute(&mut *tx).await?;
    Ok((u64::try_from(rolled).unwrap_or(0), dropped))
}

pub(crate) async fn delete_daily_before(pool: &PgPool, before: Timestamp) -> Result<u64> {
    let done =
        sqlx::query("DELETE FROM history_daily WHERE day < $1").bind(before.millis()).execute(pool).await?;
    Ok(done.rows_affected())
}

pub(crate) async fn latest_revisions(pool: &PgPool) -> Result<Vec<Stored>> {
    let rows = sqlx::query(
        "SELECT cluster, number, at, reason, records, held, publish, delta, difference FROM revisions AS r \
         WHERE number = (SELECT MAX(number) FROM revisions AS m WHERE m.cluster = r.cluster) ORDER BY cluster",
    )
    .fetch_all(pool)
    .await?;
    rows::all(&rows, rows::revision)
}

pub(crate) async fn states(pool: &PgPool, prefix: &str) -> Result<Vec<(String, String)>> {
    let rows = sqlx::query("SELECT key, value FROM state WHERE starts_with(key, $1) ORDER BY key")
        .bind(prefix)
        .fetch_all(pool)
        .await?;
    rows::all(&rows, |r| Ok((r.text("key")?, r.text("value")?)))
}

/// Deletes every state whose key starts with `prefix`.
async fn delete_prefix(tx: &mut PgConnection, prefix: &str) -> Result<()> {
    sqlx::query("DELETE FROM state WHERE starts_with(key, $1)").bind(prefix).execute(tx).await?;
    Ok(())
}

pub(crate) async fn checkpoint(_pool: &PgPool) -> Result<()> {
    Ok(())
}

pub(crate) async fn size_bytes(pool: &PgPool) -> Result<u64> {
    let bytes: i64 = sqlx::query_scalar(
        "SELECT COALESCE(SUM(pg_total_relation_size(c.oid)), 0)::bigint FROM pg_class AS c \
         JOIN pg_namespace AS n ON n.oid = c.relnamespace \
         WHERE n.nspname = current_schema() AND c.relkind = 'r'",
    )
    .fetch_one(pool)
    .await?;
    Ok(u64::try_from(bytes).unwrap_or(0))
}

pub(crate) async fn insert_events(pool: &PgPool, events: &[EventRow]) -> Result<()> {
    if events.is_empty() {
        return Ok(());
    }
    let details = events.iter().map(|e| serde_json::to_string(&e.details)).collect::<Result<Vec<_>, _>>()?;
    sqlx::query(
        "INSERT INTO events (id, at, kind, cluster, node, summary, details) \
         SELECT * FROM UNNEST($1::bigint[], $2::bigint[], $3::text[], $4::bigint[], $5::bigint[], $6::text[], \
             $7::text[]) \
         ON CONFLICT (id) DO NOTHING",
    )
    .bind(events.iter().map(|e| e.id).collect::<Vec<_>>())
    .bind(events.iter().map(|e| e.at.millis()).collect::<Vec<_>>())
    .bind(events.iter().map(|e| e.kind.as_str()).collect::<Vec<_>>())
    .bind(events.iter().map(|e| e.cluster).collect::<Vec<_>>())
    .bind(events.iter().map(|e| e.node).collect::<Vec<_>>())
    .bind(events.iter().map(|e| e.summary.as_str()).collect::<Vec<_>>())
    .bind(&details)
    .execute(pool)
    .await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn partitions_are_named_by_their_utc_day() {
        assert_eq!(partition_name(0), "history_19700101");
        // 2027-01-15T08:00:00Z.
        assert_eq!(partition_name(day_of(1_800_000_000_000)), "history_20270115");
        assert_eq!(partition_name(day_of(951_782_400_000)), "history_20000229");
    }

    #[test]
    fn a_history_row_saturates_counts_and_round_trips_and_refuses_a_wide_id_by_name() {
        let r = ResultRow {
            prober: 7,
            target: "t".into(),
            at: Timestamp::from_millis(1_800_000_000_000),
            sent: 40_000,
            lost: 40_000,
            rtt_us: Some(u32::MAX),
            error: Some(ErrorCode::Timeout),
            register: vantage_core::window::WindowRegister::new(0),
            hls: None,
        };
        let h = HistoryRow::of(&r, 5).unwrap();
        assert_eq!(
            (h.bucket, h.target, h.prober, h.sent, h.lost, h.rtt_us),
            (3_000_000, 5, 7, i16::MAX, i16::MAX, Some(i32::MAX))
        );
        let e = HistoryRow::of(&r, 1 << 31).unwrap_err().to_string();
        assert!(e.contains("target id 2147483648"), "{e}");
        let e = HistoryRow::of(&ResultRow { prober: -(1 << 40), ..r }, 5).unwrap_err().to_string();
        assert!(e.contains("prober id -1099511627776"), "{e}");
    }
}

crate::shared::shared_queries!(PgPool, sqlx::Postgres);
