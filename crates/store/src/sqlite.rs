//! The SQLite backend: one database file in WAL mode, `synchronous = FULL` so that an
//! acknowledged write survives a crash. Bulk writes insert thousands of rows per statement,
//! in each table's key order.

use std::path::Path;
use std::str::FromStr;
use std::time::Duration;

use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous};
use sqlx::{Row, SqlitePool};
use vantage_core::Timestamp;
use vantage_core::result::ErrorCode;
use vantage_core::window::WindowRegister;

use crate::{
    AuditEntry, AuditFilter, DailyPoint, Error, EventFilter, EventRow, HistoryPoint, NewAudit, ObjectRow,
    Result, ResultRow, RevisionRow, Write,
};

const DAY_MS: i64 = 86_400_000;

pub(crate) async fn open(path: &Path) -> Result<SqlitePool> {
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

/// Runs `f` in one transaction and commits it. When any step fails, the connection is closed
/// instead of going back to the pool: after some errors (a full disk) SQLite has rolled the
/// transaction back by itself, or keeps it open after a failed `COMMIT`, and sqlx's count of
/// open transactions no longer matches. The next transaction on that connection would then
/// nest inside a stale one as a savepoint, be acknowledged, and never reach the file.
async fn in_transaction<T>(
    pool: &SqlitePool,
    f: impl AsyncFnOnce(&mut sqlx::SqliteConnection) -> Result<T>,
) -> Result<T> {
    let mut conn = pool.acquire().await?;
    let out = async {
        let mut tx = sqlx::Connection::begin(&mut *conn).await?;
        let v = f(&mut tx).await?;
        tx.commit().await?;
        Ok(v)
    }
    .await;
    if out.is_err() {
        conn.close_on_drop();
    }
    out
}

pub(crate) async fn ping(pool: &SqlitePool) -> Result<()> {
    sqlx::query("SELECT 1").execute(pool).await?;
    Ok(())
}

pub(crate) async fn objects(pool: &SqlitePool) -> Result<Vec<ObjectRow>> {
    let rows =
        sqlx::query("SELECT id, kind, parent, name, body, created_at, updated_at FROM objects ORDER BY id")
            .fetch_all(pool)
            .await?;
    rows.iter()
        .map(|r| {
            Ok(ObjectRow {
                id: r.try_get("id")?,
                kind: r.try_get("kind")?,
                parent: r.try_get("parent")?,
                name: r.try_get("name")?,
                body: r.try_get("body")?,
                created_at: Timestamp::from_millis(r.try_get("created_at")?),
                updated_at: Timestamp::from_millis(r.try_get("updated_at")?),
            })
        })
        .collect()
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

pub(crate) async fn audit(pool: &SqlitePool, f: &AuditFilter) -> Result<Vec<AuditEntry>> {
    let mut q =
        sqlx::QueryBuilder::new("SELECT id, at, actor, action, object, metadata FROM audit WHERE 1 = 1");
    if let Some(a) = &f.action {
        if let Some(prefix) = a.strip_suffix('.') {
            q.push(" AND (action = ").push_bind(prefix.to_owned()).push(" OR action LIKE ");
            q.push_bind(format!("{}.%", prefix.replace('%', "\\%").replace('_', "\\_")))
                .push(" ESCAPE '\\')");
        } else {
            q.push(" AND action = ").push_bind(a.clone());
        }
    }
    if let Some(a) = &f.actor {
        q.push(" AND actor = ").push_bind(a.clone());
    }
    if let Some(o) = &f.object {
        q.push(" AND object = ").push_bind(o.clone());
    }
    if let Some(t) = f.since {
        q.push(" AND at >= ").push_bind(t.millis());
    }
    if let Some(t) = f.until {
        q.push(" AND at < ").push_bind(t.millis());
    }
    q.push(" ORDER BY id DESC LIMIT ").push_bind(i64::from(f.limit.unwrap_or(100).min(10_000)));
    let rows = q.build().fetch_all(pool).await?;
    rows.iter()
        .map(|r| {
            let metadata: String = r.try_get("metadata")?;
            Ok(AuditEntry {
                id: r.try_get("id")?,
                at: Timestamp::from_millis(r.try_get("at")?),
                actor: r.try_get("actor")?,
                action: r.try_get("action")?,
                object: r.try_get("object")?,
                metadata: serde_json::from_str(&metadata)?,
            })
        })
        .collect()
}

/// Register bits are u64; SQLite integers are i64, so they are stored bit for bit.
fn bits_out(v: u64) -> i64 {
    i64::from_ne_bytes(v.to_ne_bytes())
}

fn bits_in(v: i64) -> u64 {
    u64::from_ne_bytes(v.to_ne_bytes())
}

/// Bound parameters per statement (SQLite's limit is 32,766).
const MAX_VARIABLES: usize = 32_000;

/// History rows are clustered in buckets of this many milliseconds.
const BUCKET_MS: i64 = 600_000;

/// Target ids by key, so bulk writes carry integers instead of joining on text.
#[derive(Debug, Default)]
pub(crate) struct TargetIds(std::sync::Mutex<std::collections::HashMap<String, i64>>);

impl TargetIds {
    fn get(&self, key: &str) -> Option<i64> {
        self.0.lock().ok()?.get(key).copied()
    }

    fn put(&self, key: String, id: i64) {
        if let Ok(mut m) = self.0.lock() {
            m.insert(key, id);
        }
    }
}

/// Ids of `keys`, creating the missing ones inside `tx`; and the ones not in `cache`, to be
/// remembered once `tx` commits.
async fn target_ids(
    tx: &mut sqlx::SqliteConnection,
    cache: &TargetIds,
    keys: impl Iterator<Item = &str>,
) -> Result<(Vec<i64>, Vec<(String, i64)>)> {
    let (mut out, mut created) = (Vec::new(), Vec::new());
    for key in keys {
        let id = match cache.get(key) {
            Some(id) => id,
            None => {
                sqlx::query("INSERT OR IGNORE INTO targets (key) VALUES (?1)")
                    .bind(key)
                    .execute(&mut *tx)
                    .await?;
                let id: i64 = sqlx::query_scalar("SELECT id FROM targets WHERE key = ?1")
                    .bind(key)
                    .fetch_one(&mut *tx)
                    .await?;
                created.push((key.to_owned(), id));
                id
            }
        };
        out.push(id);
    }
    Ok((out, created))
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
    latest.sort_unstable_by_key(|&i| (rows[i].prober, ids[i]));
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
                    .push_bind(r.register.avg_rtt_ms)
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

fn error_code(text: Option<String>) -> Option<ErrorCode> {
    text.and_then(|t| ErrorCode::from_str(&t).ok())
}

fn micros(v: Option<i64>) -> Option<u32> {
    v.and_then(|v| u32::try_from(v).ok())
}

fn count(v: i64) -> u32 {
    u32::try_from(v).unwrap_or(0)
}

pub(crate) async fn latest(pool: &SqlitePool) -> Result<Vec<ResultRow>> {
    let rows = sqlx::query(
        "SELECT l.prober, t.key, l.at, l.sent, l.lost, l.rtt_us, l.error, l.connected, l.xmit, l.recv, l.good, \
                l.avg_rtt, l.hls, l.filled \
         FROM latest_results AS l JOIN targets AS t ON t.id = l.target",
    )
    .fetch_all(pool)
    .await?;
    rows.iter()
        .map(|r| {
            let hls: Option<String> = r.try_get("hls")?;
            let register = WindowRegister::from_parts(
                bits_in(r.try_get("connected")?),
                bits_in(r.try_get("xmit")?),
                bits_in(r.try_get("recv")?),
                bits_in(r.try_get("good")?),
                r.try_get("avg_rtt")?,
                r.try_get::<Option<i64>, _>("filled")?.and_then(|n| u8::try_from(n).ok()),
            );
            Ok(ResultRow {
                prober: r.try_get("prober")?,
                target: r.try_get("key")?,
                at: Timestamp::from_millis(r.try_get("at")?),
                sent: count(r.try_get("sent")?),
                lost: count(r.try_get("lost")?),
                rtt_us: micros(r.try_get("rtt_us")?),
                error: error_code(r.try_get("error")?),
                register,
                hls: hls.map(|h| serde_json::from_str(&h)).transpose()?,
            })
        })
        .collect()
}

pub(crate) async fn delete_latest_of(pool: &SqlitePool, prober: i64) -> Result<u64> {
    Ok(sqlx::query("DELETE FROM latest_results WHERE prober = ?1")
        .bind(prober)
        .execute(pool)
        .await?
        .rows_affected())
}

pub(crate) async fn delete_latest_before(pool: &SqlitePool, before: Timestamp) -> Result<u64> {
    Ok(sqlx::query("DELETE FROM latest_results WHERE at < ?1")
        .bind(before.millis())
        .execute(pool)
        .await?
        .rows_affected())
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
    rows.iter()
        .map(|r| {
            Ok(HistoryPoint {
                at: Timestamp::from_millis(r.try_get("at")?),
                prober: r.try_get("prober")?,
                sent: count(r.try_get("sent")?),
                lost: count(r.try_get("lost")?),
                rtt_us: micros(r.try_get("rtt_us")?),
                error: error_code(r.try_get("error")?),
                segment_age_s: r.try_get::<Option<i64>, _>("age_ms")?.map(|ms| ms as f64 / 1000.0),
            })
        })
        .collect()
}

pub(crate) async fn history_daily(
    pool: &SqlitePool,
    target: &str,
    since: Timestamp,
    until: Timestamp,
) -> Result<Vec<DailyPoint>> {
    let rows = sqlx::query(
        "SELECT d.day, d.prober, d.rounds, d.sent, d.lost, d.rtt_avg_us, d.rtt_max_us FROM history_daily AS d \
         WHERE d.target = (SELECT id FROM targets WHERE key = ?1) AND d.day >= ?2 AND d.day < ?3 ORDER BY d.day",
    )
    .bind(target)
    .bind(since.millis())
    .bind(until.millis())
    .fetch_all(pool)
    .await?;
    rows.iter()
        .map(|r| {
            Ok(DailyPoint {
                day: Timestamp::from_millis(r.try_get("day")?),
                prober: r.try_get("prober")?,
                rounds: count(r.try_get("rounds")?),
                sent: u64::try_from(r.try_get::<i64, _>("sent")?).unwrap_or(0),
                lost: u64::try_from(r.try_get::<i64, _>("lost")?).unwrap_or(0),
                rtt_avg_us: micros(r.try_get("rtt_avg_us")?),
                rtt_max_us: micros(r.try_get("rtt_max_us")?),
            })
        })
        .collect()
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

pub(crate) async fn insert_revision(pool: &SqlitePool, r: &RevisionRow) -> Result<()> {
    sqlx::query(
        "INSERT INTO revisions (cluster, number, at, reason, records, held, publish) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7) \
         ON CONFLICT (cluster, number) DO NOTHING",
    )
    .bind(r.cluster)
    .bind(i64::from(r.number))
    .bind(r.at.millis())
    .bind(&r.reason)
    .bind(serde_json::to_string(&r.records)?)
    .bind(serde_json::to_string(&r.held)?)
    .bind(serde_json::to_string(&r.publish)?)
    .execute(pool)
    .await?;
    Ok(())
}

pub(crate) async fn set_revision_publish(
    pool: &SqlitePool,
    cluster: i64,
    number: u32,
    publish: &serde_json::Value,
) -> Result<()> {
    sqlx::query("UPDATE revisions SET publish = ?3 WHERE cluster = ?1 AND number = ?2")
        .bind(cluster)
        .bind(i64::from(number))
        .bind(serde_json::to_string(publish)?)
        .execute(pool)
        .await?;
    Ok(())
}

fn revision_of(r: &sqlx::sqlite::SqliteRow) -> Result<RevisionRow> {
    let records: String = r.try_get("records")?;
    let held: String = r.try_get("held")?;
    let publish: String = r.try_get("publish")?;
    Ok(RevisionRow {
        cluster: r.try_get("cluster")?,
        number: count(r.try_get("number")?),
        at: Timestamp::from_millis(r.try_get("at")?),
        reason: r.try_get("reason")?,
        records: serde_json::from_str(&records)?,
        held: serde_json::from_str(&held)?,
        publish: serde_json::from_str(&publish)?,
    })
}

pub(crate) async fn revisions(pool: &SqlitePool, cluster: i64, limit: u32) -> Result<Vec<RevisionRow>> {
    let rows = sqlx::query(
        "SELECT cluster, number, at, reason, records, held, publish FROM revisions WHERE cluster = ?1 \
         ORDER BY number DESC LIMIT ?2",
    )
    .bind(cluster)
    .bind(i64::from(limit))
    .fetch_all(pool)
    .await?;
    rows.iter().map(revision_of).collect()
}

pub(crate) async fn latest_revisions(pool: &SqlitePool) -> Result<Vec<RevisionRow>> {
    let rows = sqlx::query(
        "SELECT r.cluster, r.number, r.at, r.reason, r.records, r.held, r.publish FROM revisions AS r \
         JOIN (SELECT cluster, MAX(number) AS n FROM revisions GROUP BY cluster) AS m \
           ON m.cluster = r.cluster AND m.n = r.number",
    )
    .fetch_all(pool)
    .await?;
    rows.iter().map(revision_of).collect()
}

pub(crate) async fn put_state(pool: &SqlitePool, key: &str, value: &str, now: Timestamp) -> Result<()> {
    sqlx::query(
        "INSERT INTO state (key, value, updated_at) VALUES (?1, ?2, ?3) \
         ON CONFLICT (key) DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at",
    )
    .bind(key)
    .bind(value)
    .bind(now.millis())
    .execute(pool)
    .await?;
    Ok(())
}

pub(crate) async fn states(pool: &SqlitePool, prefix: &str) -> Result<Vec<(String, String)>> {
    // Range scan on the primary key: keys in [prefix, prefix + U+10FFFF).
    let rows = sqlx::query("SELECT key, value FROM state WHERE key >= ?1 AND key < ?2 ORDER BY key")
        .bind(prefix)
        .bind(format!("{prefix}\u{10FFFF}"))
        .fetch_all(pool)
        .await?;
    rows.iter().map(|r| Ok((r.try_get("key")?, r.try_get("value")?))).collect()
}

pub(crate) async fn delete_state(pool: &SqlitePool, key: &str) -> Result<()> {
    sqlx::query("DELETE FROM state WHERE key = ?1").bind(key).execute(pool).await?;
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

pub(crate) async fn events(pool: &SqlitePool, f: &EventFilter) -> Result<Vec<EventRow>> {
    let mut out = select_events(pool, f, "DESC").await?;
    // The newest `limit`, returned oldest first (a timeline reads forward).
    out.reverse();
    Ok(out)
}

pub(crate) async fn events_after(pool: &SqlitePool, f: &EventFilter) -> Result<Vec<EventRow>> {
    select_events(pool, f, "ASC").await
}

/// The events of `f`, at most its `limit`, in the order of their ids (`ASC` or `DESC`).
async fn select_events(pool: &SqlitePool, f: &EventFilter, order: &'static str) -> Result<Vec<EventRow>> {
    let mut q = sqlx::QueryBuilder::new(
        "SELECT id, at, kind, cluster, node, summary, details FROM events WHERE 1 = 1",
    );
    if let Some(c) = f.cluster {
        q.push(" AND cluster = ").push_bind(c);
    }
    if let Some(n) = f.node {
        q.push(" AND node = ").push_bind(n);
    }
    if let Some(t) = f.since {
        q.push(" AND at >= ").push_bind(t.millis());
    }
    if let Some(id) = f.after {
        q.push(" AND id > ").push_bind(id);
    }
    if !f.kinds.is_empty() {
        q.push(" AND kind IN (");
        let mut list = q.separated(", ");
        for k in &f.kinds {
            list.push_bind(k.clone());
        }
        q.push(")");
    }
    q.push(" ORDER BY id ").push(order).push(" LIMIT ").push_bind(i64::from(f.limit.min(10_000)));
    let rows = q.build().fetch_all(pool).await?;
    rows.iter()
        .map(|r| {
            let details: String = r.try_get("details")?;
            Ok(EventRow {
                id: r.try_get("id")?,
                at: Timestamp::from_millis(r.try_get("at")?),
                kind: r.try_get("kind")?,
                cluster: r.try_get("cluster")?,
                node: r.try_get("node")?,
                summary: r.try_get("summary")?,
                details: serde_json::from_str(&details)?,
            })
        })
        .collect::<Result<Vec<_>>>()
}

pub(crate) async fn last_event(pool: &SqlitePool) -> Result<i64> {
    Ok(sqlx::query_scalar::<_, Option<i64>>("SELECT MAX(id) FROM events").fetch_one(pool).await?.unwrap_or(0))
}

pub(crate) async fn delete_events_before(pool: &SqlitePool, before: Timestamp) -> Result<u64> {
    let done = sqlx::query("DELETE FROM events WHERE at < ?1").bind(before.millis()).execute(pool).await?;
    Ok(done.rows_affected())
}

pub(crate) async fn revision(pool: &SqlitePool, cluster: i64, number: u32) -> Result<Option<RevisionRow>> {
    let row = sqlx::query(
        "SELECT cluster, number, at, reason, records, held, publish FROM revisions \
         WHERE cluster = ?1 AND number = ?2",
    )
    .bind(cluster)
    .bind(i64::from(number))
    .fetch_optional(pool)
    .await?;
    row.as_ref().map(revision_of).transpose()
}

pub(crate) async fn revisions_between(
    pool: &SqlitePool,
    cluster: i64,
    after: u32,
    upto: u32,
    limit: u32,
) -> Result<Vec<RevisionRow>> {
    let rows = sqlx::query(
        "SELECT cluster, number, at, reason, records, held, publish FROM revisions \
         WHERE cluster = ?1 AND number > ?2 AND number <= ?3 ORDER BY number DESC LIMIT ?4",
    )
    .bind(cluster)
    .bind(i64::from(after))
    .bind(i64::from(upto))
    .bind(i64::from(limit))
    .fetch_all(pool)
    .await?;
    let mut out = rows.iter().map(revision_of).collect::<Result<Vec<_>>>()?;
    out.reverse();
    Ok(out)
}
