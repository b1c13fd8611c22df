//! The SQLite backend: one database file in WAL mode, `synchronous = FULL` so that an
//! acknowledged write survives a crash. Bulk writes insert thousands of rows per statement,
//! in each table's key order.

use std::path::Path;
use std::time::Duration;

use sqlx::SqlitePool;
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous};
use vantage_core::Timestamp;
use vantage_core::result::ErrorCode;

use crate::backend::{Backend, Op};
use crate::chain::Stored;
use crate::filters::Order;
use crate::rows::{self, Fields, bits_out};
use crate::{
    AuditEntry, AuditFilter, DailyPoint, Error, EventFilter, EventRow, HistoryPoint, LogAs, NewAudit,
    ObjectRow, Replication, Result, ResultRow, TargetIds, Write, filters, in_transaction,
};

const DAY_MS: i64 = 86_400_000;

/// A database file of this server's own.
#[derive(Debug)]
pub(crate) struct Sqlite {
    pool: SqlitePool,
    /// Target ids already looked up.
    targets: TargetIds,
}

impl Sqlite {
    /// Opens (creating when absent) the database at `path` and runs the migrations.
    pub(crate) async fn open(path: &Path) -> Result<Sqlite> {
        Ok(Sqlite { pool: open(path).await?, targets: TargetIds::default() })
    }
}

impl Backend for Sqlite {
    crate::shared::shared_methods!();

    /// No other replica reads this file: there is nothing to log for one.
    fn commit<'a>(
        &'a self,
        _log: Option<LogAs<'a>>,
        writes: &'a [Write],
        audit: &'a [NewAudit],
        now: Timestamp,
    ) -> Op<'a, ()> {
        Box::pin(commit(&self.pool, writes, audit, now))
    }

    fn replication(&self) -> Option<Replication> {
        None
    }

    fn write_results<'a>(&'a self, rows: &'a [ResultRow]) -> Op<'a, ()> {
        Box::pin(write_results(&self.pool, &self.targets, rows))
    }

    fn roll_up_history(&self, before: Timestamp) -> Op<'_, u64> {
        Box::pin(roll_up_history(&self.pool, before))
    }
}

async fn open(path: &Path) -> Result<SqlitePool> {
    let options = SqliteConnectOptions::new()
        .filename(path)
        .create_if_missing(true)
        .journal_mode(SqliteJournalMode::Wal)
        .synchronous(SqliteSynchronous::Full)
        .busy_timeout(Duration::from_secs(10))
        .foreign_keys(true)
        // A report batch touches thousands of pages: keep them in memory (64 MiB per connection).
        .pragma("cache_size", "-65536")
        .pragma("temp_store", "memory");
    let pool = SqlitePoolOptions::new().max_connections(4).connect_with(options).await?;
    sqlx::migrate!("./migrations/sqlite").run(&pool).await?;
    Ok(pool)
}

pub(crate) async fn commit(
    pool: &SqlitePool,
    writes: &[Write],
    audit: &[NewAudit],
    now: Timestamp,
) -> Result<()> {
    in_transaction(pool, async |tx| {
        for w in writes {
            match w {
                Write::Put { id, kind, parent, name, body } => {
                    sqlx::query(
                        "INSERT INTO objects (id, kind, parent, name, body, created_at, updated_at) \
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?6) \
                     ON CONFLICT (id) DO UPDATE SET kind = excluded.kind, parent = excluded.parent, \
                         name = excluded.name, body = excluded.body, updated_at = excluded.updated_at",
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
                        sqlx::query("DELETE FROM objects WHERE id = ?1").bind(id).execute(&mut *tx).await?;
                    if done.rows_affected() == 0 {
                        return Err(Error::NotFound(*id));
                    }
                }
            }
        }
        for a in audit {
            sqlx::query(
                "INSERT INTO audit (at, actor, action, object, metadata) VALUES (?1, ?2, ?3, ?4, ?5)",
            )
            .bind(now.millis())
            .bind(&a.actor)
            .bind(&a.action)
            .bind(&a.object)
            .bind(serde_json::to_string(&a.metadata)?)
            .execute(&mut *tx)
            .await?;
        }
        Ok(())
    })
    .await
}

/// Bound parameters per statement (SQLite's limit is 32,766).
const MAX_VARIABLES: usize = 32_000;

/// History rows are clustered in buckets of this many milliseconds.
const BUCKET_MS: i64 = 600_000;

/// The id of each key (a target first seen is given one), and the ids this transaction gave.
/// The keys not remembered go to the database once each, all in one statement and one query:
/// a batch of a million results with a cold cache (a start) names each target 50 times, and
/// two round trips to SQLite's thread per result took seconds.
async fn target_ids(
    tx: &mut sqlx::SqliteConnection,
    cache: &TargetIds,
    keys: impl Iterator<Item = &str>,
) -> Result<crate::Resolved> {
    let lookup = cache.lookup(keys);
    let mut found = Vec::new();
    if !lookup.unknown.is_empty() {
        let list = serde_json::to_string(&lookup.unknown)?;
        sqlx::query("INSERT OR IGNORE INTO targets (key) SELECT value FROM json_each(?1)")
            .bind(&list)
            .execute(&mut *tx)
            .await?;
        found = sqlx::query_as("SELECT id, key FROM targets WHERE key IN (SELECT value FROM json_each(?1))")
            .bind(&list)
            .fetch_all(&mut *tx)
            .await?;
    }
    lookup.finish(found)
}

pub(crate) async fn write_results(pool: &SqlitePool, cache: &TargetIds, rows: &[ResultRow]) -> Result<()> {
    if rows.is_empty() {
        return Ok(());
    }
    let created = in_transaction(pool, async |tx| write_results_in(tx, cache, rows).await).await?;
    // Only ids that are committed may be remembered: a rolled-back one may be given to another key.
    for (key, id) in created {
        cache.put(key, id);
    }
    Ok(())
}

/// The statements of [`write_results`], in its transaction; the target ids they created.
async fn write_results_in(
    tx: &mut sqlx::SqliteConnection,
    cache: &TargetIds,
    rows: &[ResultRow],
) -> Result<Vec<(String, i64)>> {
    let (ids, created) = target_ids(tx, cache, rows.iter().map(|r| r.target.as_str())).await?;
    // Each table gets its rows in its key order, so the B-tree is written front to back.
    let mut latest: Vec<usize> = (0..rows.len()).collect();
    // Stable: of two results for one (prober, target) in a batch, the later one is kept.
    latest.sort_by_key(|&i| (rows[i].prober, ids[i]));
    let mut history = latest.clone();
    history.sort_unstable_by_key(|&i| {
        (rows[i].at.millis().div_euclid(BUCKET_MS), ids[i], rows[i].at, rows[i].prober)
    });
    let hls: Vec<Option<String>> = rows
        .iter()
        .map(|r| r.hls.map(|h| serde_json::to_string(&h)).transpose())
        .collect::<Result<_, _>>()?;
    let latest: Vec<&[usize]> = latest.chunks(MAX_VARIABLES / 14).collect();
    let history: Vec<&[usize]> = history.chunks(MAX_VARIABLES / 9).collect();
    let statement = |k: usize| match latest.get(k) {
        Some(chunk) => {
            let mut q = sqlx::QueryBuilder::new(
                "INSERT INTO latest_results (prober, target, at, sent, lost, rtt_us, error, connected, xmit, recv, \
                 good, avg_rtt, hls, filled) ",
            );
            q.push_values(*chunk, |mut b, &i| {
                let r = &rows[i];
                b.push_bind(r.prober)
                    .push_bind(ids[i])
                    .push_bind(r.at.millis())
                    .push_bind(i64::from(r.sent))
                    .push_bind(i64::from(r.lost))
                    .push_bind(r.rtt_us.map(i64::from))
                    .push_bind(r.error.map(ErrorCode::as_str))
                    .push_bind(bits_out(r.register.connected))
                    .push_bind(bits_out(r.register.sent))
                    .push_bind(bits_out(r.register.received))
                    .push_bind(bits_out(r.register.good))
                    .push_bind(f64::from(r.register.avg_rtt_ms))
                    .push_bind(hls[i].clone())
                    .push_bind(i64::from(r.register.filled()));
            });
            q.push(
                " ON CONFLICT (prober, target) DO UPDATE SET at = excluded.at, sent = excluded.sent, \
                 lost = excluded.lost, rtt_us = excluded.rtt_us, error = excluded.error, \
                 connected = excluded.connected, xmit = excluded.xmit, recv = excluded.recv, good = excluded.good, \
                 avg_rtt = excluded.avg_rtt, hls = excluded.hls, filled = excluded.filled",
            );
            q
        }
        None => {
            let mut q = sqlx::QueryBuilder::new(
                "INSERT OR IGNORE INTO history (bucket, target, at, prober, sent, lost, rtt_us, error, age_ms) ",
            );
            q.push_values(history[k - latest.len()], |mut b, &i| {
                let r = &rows[i];
                b.push_bind(r.at.millis().div_euclid(BUCKET_MS))
                    .push_bind(ids[i])
                    .push_bind(r.at.millis())
                    .push_bind(r.prober)
                    .push_bind(i64::from(r.sent))
                    .push_bind(i64::from(r.lost))
                    .push_bind(r.rtt_us.map(i64::from))
                    .push_bind(r.error.map(ErrorCode::as_str))
                    .push_bind(r.hls.and_then(|h| h.segment_age_s).map(|s| (s * 1000.0).round() as i64));
            });
            q
        }
    };
    // SQLite runs each statement on the connection's own thread: the next statement is built
    // (bound) on this one meanwhile, so binding and B-tree work overlap instead of taking turns.
    let count = latest.len() + history.len();
    let mut current = statement(0);
    for k in 1..=count {
        let (done, next) =
            tokio::join!(current.build().execute(&mut *tx), async { (k < count).then(|| statement(k)) });
        done?;
        match next {
            Some(q) => current = q,
            None => break,
        }
    }
    Ok(created)
}

pub(crate) async fn history(
    pool: &SqlitePool,
    target: &str,
    since: Timestamp,
    until: Timestamp,
) -> Result<Vec<HistoryPoint>> {
    let rows = sqlx::query(
        "WITH RECURSIVE b (x) AS (SELECT ?4 UNION ALL SELECT x + 1 FROM b WHERE x < ?5) \
         SELECT h.at, h.prober, h.sent, h.lost, h.rtt_us, h.error, h.age_ms FROM b \
         JOIN history AS h ON h.bucket = b.x AND h.target = (SELECT id FROM targets WHERE key = ?1) \
         WHERE h.at >= ?2 AND h.at < ?3 ORDER BY h.at, h.prober",
    )
    .bind(target)
    .bind(since.millis())
    .bind(until.millis())
    .bind(since.millis().div_euclid(BUCKET_MS))
    .bind((until.millis() - 1).div_euclid(BUCKET_MS))
    .fetch_all(pool)
    .await?;
    rows::all(&rows, rows::history_point)
}

pub(crate) async fn roll_up_history(pool: &SqlitePool, before: Timestamp) -> Result<u64> {
    in_transaction(pool, async |tx| roll_up_in(tx, before).await).await
}

/// The statements of [`roll_up_history`], in its transaction; the history rows deleted.
async fn roll_up_in(tx: &mut sqlx::SqliteConnection, before: Timestamp) -> Result<u64> {
    sqlx::query(
        "INSERT INTO history_daily (target, day, prober, rounds, sent, lost, rtt_avg_us, rtt_max_us) \
         SELECT target, (at / ?2) * ?2 AS d, prober, COUNT(*), SUM(sent), SUM(lost), CAST(AVG(rtt_us) AS INTEGER), \
                MAX(rtt_us) \
         FROM history WHERE at < ?1 GROUP BY target, d, prober \
         ON CONFLICT (target, day, prober) DO UPDATE SET \
             rtt_avg_us = CASE WHEN rtt_avg_us IS NULL THEN excluded.rtt_avg_us \
                               WHEN excluded.rtt_avg_us IS NULL THEN rtt_avg_us \
                               ELSE (rtt_avg_us * rounds + excluded.rtt_avg_us * excluded.rounds) \
                                    / (rounds + excluded.rounds) END, \
             rounds = rounds + excluded.rounds, sent = sent + excluded.sent, lost = lost + excluded.lost, \
             rtt_max_us = MAX(COALESCE(rtt_max_us, 0), COALESCE(excluded.rtt_max_us, 0))",
    )
    .bind(before.millis())
    .bind(DAY_MS)
    .execute(&mut *tx)
    .await?;
    // Whole buckets before the cut-off, then the rows of the cut-off's own bucket.
    let bucket = before.millis().div_euclid(BUCKET_MS);
    let deleted = sqlx::query("DELETE FROM history WHERE bucket < ?1 OR (bucket = ?1 AND at < ?2)")
        .bind(bucket)
        .bind(before.millis())
        .execute(&mut *tx)
        .await?;
    Ok(deleted.rows_affected())
}

pub(crate) async fn delete_daily_before(pool: &SqlitePool, before: Timestamp) -> Result<u64> {
    Ok(sqlx::query("DELETE FROM history_daily WHERE day < ?1")
        .bind(before.millis())
        .execute(pool)
        .await?
        .rows_affected())
}

pub(crate) async fn latest_revisions(pool: &SqlitePool) -> Result<Vec<Stored>> {
    let rows = sqlx::query(
        "SELECT r.cluster, r.number, r.at, r.reason, r.records, r.held, r.publish, r.delta, r.difference FROM revisions AS r \
         JOIN (SELECT cluster, MAX(number) AS n FROM revisions GROUP BY cluster) AS m \
           ON m.cluster = r.cluster AND m.n = r.number ORDER BY r.cluster",
    )
    .fetch_all(pool)
    .await?;
    rows::all(&rows, rows::revision)
}

pub(crate) async fn states(pool: &SqlitePool, prefix: &str) -> Result<Vec<(String, String)>> {
    // Range scan on the primary key: keys in [prefix, prefix + U+10FFFF).
    let rows = sqlx::query("SELECT key, value FROM state WHERE key >= ?1 AND key < ?2 ORDER BY key")
        .bind(prefix)
        .bind(format!("{prefix}\u{10FFFF}"))
        .fetch_all(pool)
        .await?;
    rows::all(&rows, |r| Ok((r.text("key")?, r.text("value")?)))
}

/// Deletes every state whose key starts with `prefix` (the range [`states`] reads).
async fn delete_prefix(tx: &mut sqlx::SqliteConnection, prefix: &str) -> Result<()> {
    sqlx::query("DELETE FROM state WHERE key >= ?1 AND key < ?2")
        .bind(prefix)
        .bind(format!("{prefix}\u{10FFFF}"))
        .execute(tx)
        .await?;
    Ok(())
}

pub(crate) async fn checkpoint(pool: &SqlitePool) -> Result<()> {
    sqlx::query("PRAGMA wal_checkpoint(TRUNCATE)").execute(pool).await?;
    Ok(())
}

pub(crate) async fn size_bytes(pool: &SqlitePool) -> Result<u64> {
    let pages: i64 = sqlx::query_scalar("PRAGMA page_count").fetch_one(pool).await?;
    let size: i64 = sqlx::query_scalar("PRAGMA page_size").fetch_one(pool).await?;
    Ok(u64::try_from(pages.saturating_mul(size)).unwrap_or(0))
}

pub(crate) async fn insert_events(pool: &SqlitePool, events: &[EventRow]) -> Result<()> {
    in_transaction(pool, async |tx| {
        for e in events {
            sqlx::query(
                "INSERT INTO events (id, at, kind, cluster, node, summary, details) \
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7) ON CONFLICT (id) DO NOTHING",
            )
            .bind(e.id)
            .bind(e.at.millis())
            .bind(&e.kind)
            .bind(e.cluster)
            .bind(e.node)
            .bind(&e.summary)
            .bind(serde_json::to_string(&e.details)?)
            .execute(&mut *tx)
            .await?;
        }
        Ok(())
    })
    .await
}

crate::shared::shared_queries!(SqlitePool, sqlx::Sqlite);
