//! Reading stored rows into the store's types, once for every backend: each backend's
//! schema gives a column the same name and the same kind of value (64-bit integers, text,
//! doubles), so one reader serves SQLite and PostgreSQL alike; and the few queries whose SQL
//! is the same on both.

use std::str::FromStr;

use sqlx::Row;
use vantage_core::Timestamp;
use vantage_core::result::ErrorCode;
use vantage_core::window::WindowRegister;

use crate::chain::Stored;
use crate::{AuditEntry, DailyPoint, EventRow, HistoryPoint, ObjectRow, Result, ResultRow, RevisionRow};

/// The column reads the readers need, over either backend's row type.
pub(crate) trait Fields {
    fn int(&self, column: &str) -> Result<i64>;
    fn opt_int(&self, column: &str) -> Result<Option<i64>>;
    fn text(&self, column: &str) -> Result<String>;
    fn opt_text(&self, column: &str) -> Result<Option<String>>;
    fn real(&self, column: &str) -> Result<f64>;
}

macro_rules! fields {
    ($row:ty) => {
        impl Fields for $row {
            fn int(&self, column: &str) -> Result<i64> {
                Ok(self.try_get(column)?)
            }
            fn opt_int(&self, column: &str) -> Result<Option<i64>> {
                Ok(self.try_get(column)?)
            }
            fn text(&self, column: &str) -> Result<String> {
                Ok(self.try_get(column)?)
            }
            fn opt_text(&self, column: &str) -> Result<Option<String>> {
                Ok(self.try_get(column)?)
            }
            fn real(&self, column: &str) -> Result<f64> {
                Ok(self.try_get(column)?)
            }
        }
    };
}

fields!(sqlx::sqlite::SqliteRow);
fields!(sqlx::postgres::PgRow);

/// Register bits are u64; the databases' integers are i64, so they are stored bit for bit.
pub(crate) fn bits_out(v: u64) -> i64 {
    i64::from_ne_bytes(v.to_ne_bytes())
}

fn bits_in(v: i64) -> u64 {
    u64::from_ne_bytes(v.to_ne_bytes())
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

fn at(r: &impl Fields, column: &str) -> Result<Timestamp> {
    Ok(Timestamp::from_millis(r.int(column)?))
}

pub(crate) fn object(r: &impl Fields) -> Result<ObjectRow> {
    Ok(ObjectRow {
        id: r.int("id")?,
        kind: r.text("kind")?,
        parent: r.opt_int("parent")?,
        name: r.text("name")?,
        body: r.text("body")?,
        created_at: at(r, "created_at")?,
        updated_at: at(r, "updated_at")?,
    })
}

pub(crate) fn audit(r: &impl Fields) -> Result<AuditEntry> {
    Ok(AuditEntry {
        id: r.int("id")?,
        at: at(r, "at")?,
        actor: r.text("actor")?,
        action: r.text("action")?,
        object: r.text("object")?,
        metadata: serde_json::from_str(&r.text("metadata")?)?,
    })
}

/// A latest result, its target key read from the `key` column.
pub(crate) fn latest(r: &impl Fields) -> Result<ResultRow> {
    let register = WindowRegister::from_parts(
        bits_in(r.int("connected")?),
        bits_in(r.int("xmit")?),
        bits_in(r.int("recv")?),
        bits_in(r.int("good")?),
        r.real("avg_rtt")?,
        r.opt_int("filled")?.and_then(|n| u8::try_from(n).ok()),
    );
    Ok(ResultRow {
        prober: r.int("prober")?,
        target: r.text("key")?,
        at: at(r, "at")?,
        sent: count(r.int("sent")?),
        lost: count(r.int("lost")?),
        rtt_us: micros(r.opt_int("rtt_us")?),
        error: error_code(r.opt_text("error")?),
        register,
        hls: r.opt_text("hls")?.map(|h| serde_json::from_str(&h)).transpose()?,
    })
}

pub(crate) fn history_point(r: &impl Fields) -> Result<HistoryPoint> {
    Ok(HistoryPoint {
        at: at(r, "at")?,
        prober: r.int("prober")?,
        sent: count(r.int("sent")?),
        lost: count(r.int("lost")?),
        rtt_us: micros(r.opt_int("rtt_us")?),
        error: error_code(r.opt_text("error")?),
        segment_age_s: r.opt_int("age_ms")?.map(|ms| ms as f64 / 1000.0),
    })
}

pub(crate) fn daily_point(r: &impl Fields) -> Result<DailyPoint> {
    Ok(DailyPoint {
        day: at(r, "day")?,
        prober: r.int("prober")?,
        rounds: count(r.int("rounds")?),
        sent: u64::try_from(r.int("sent")?).unwrap_or(0),
        lost: u64::try_from(r.int("lost")?).unwrap_or(0),
        rtt_avg_us: micros(r.opt_int("rtt_avg_us")?),
        rtt_max_us: micros(r.opt_int("rtt_max_us")?),
    })
}

/// A revision as stored: its records whole, or the difference from the revision before
/// ([`crate::chain`]).
pub(crate) fn revision(r: &impl Fields) -> Result<Stored> {
    let delta = u32::try_from(r.int("delta")?)
        .map_err(|_| crate::Error::Broken("a revision's delta is out of range".into()))?;
    let records = match delta {
        0 => r.text("records")?,
        _ => r.opt_text("difference")?.ok_or_else(|| {
            crate::Error::Broken("a revision stored as a difference has no difference".into())
        })?,
    };
    Ok(Stored {
        row: RevisionRow {
            cluster: r.int("cluster")?,
            number: count(r.int("number")?),
            at: at(r, "at")?,
            reason: r.text("reason")?,
            records: serde_json::from_str(&records)?,
            held: serde_json::from_str(&r.text("held")?)?,
            publish: serde_json::from_str(&r.text("publish")?)?,
        },
        delta,
    })
}

pub(crate) fn event(r: &impl Fields) -> Result<EventRow> {
    Ok(EventRow {
        id: r.int("id")?,
        at: at(r, "at")?,
        kind: r.text("kind")?,
        cluster: r.opt_int("cluster")?,
        node: r.opt_int("node")?,
        summary: r.text("summary")?,
        details: serde_json::from_str(&r.text("details")?)?,
    })
}

/// Whether the database answers (the same query on every backend).
pub(crate) async fn ping<DB: sqlx::Database>(pool: &sqlx::Pool<DB>) -> Result<()>
where
    for<'c> &'c sqlx::Pool<DB>: sqlx::Executor<'c, Database = DB>,
    DB::Arguments: sqlx::IntoArguments<DB>,
{
    sqlx::query::<DB>("SELECT 1").execute(pool).await?;
    Ok(())
}

/// Every configuration object (the same query on every backend).
pub(crate) async fn objects<DB: sqlx::Database>(pool: &sqlx::Pool<DB>) -> Result<Vec<ObjectRow>>
where
    for<'c> &'c sqlx::Pool<DB>: sqlx::Executor<'c, Database = DB>,
    DB::Arguments: sqlx::IntoArguments<DB>,
    DB::Row: Fields,
{
    let rows = sqlx::query::<DB>(
        "SELECT id, kind, parent, name, body, created_at, updated_at FROM objects ORDER BY id",
    )
    .fetch_all(pool)
    .await?;
    all(&rows, object)
}

/// Reads every row with `read`.
pub(crate) fn all<R, T>(rows: &[R], read: impl Fn(&R) -> Result<T>) -> Result<Vec<T>> {
    rows.iter().map(read).collect()
}
