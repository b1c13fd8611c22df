//! What a database does for the store: one implementation per backend (`sqlite`, `postgres`),
//! each in its own module with its own migrations, as hickory's stores are. [`Store`](crate::Store)
//! holds one behind this trait and adds what every backend shares (timing each operation);
//! nothing outside this crate knows which one it talks to. The queries whose SQL is the same on
//! both are written once ([`shared_queries!`](crate::shared::shared_queries)).

use std::future::Future;
use std::pin::Pin;

use vantage_core::Timestamp;

use crate::chain::Stored;
use crate::{
    AuditEntry, AuditFilter, DailyPoint, EventFilter, EventRow, HistoryPoint, LogAs, NewAudit, ObjectRow,
    Replication, Result, ResultRow, Write,
};

/// Reads for the revision chain are the backend's own ranges of stored rows.
impl crate::chain::Earlier for dyn Backend {
    fn earlier(&self, cluster: i64, after: u32, upto: u32) -> Op<'_, Vec<Stored>> {
        self.revisions_between(cluster, after, upto, upto.saturating_sub(after))
    }
}

/// A backend's operation in progress (boxed: the store holds its backend as a trait object).
pub(crate) type Op<'a, T> = Pin<Box<dyn Future<Output = Result<T>> + Send + 'a>>;

/// One database's operations; [`Store`](crate::Store)'s methods of the same names say what
/// each does, which every backend does the same way (the store's tests run each case on each).
pub(crate) trait Backend: Send + Sync + std::fmt::Debug {
    fn ping(&self) -> Op<'_, ()>;
    fn objects(&self) -> Op<'_, Vec<ObjectRow>>;
    /// `log` is for the other replicas, which only a shared database has.
    fn commit<'a>(
        &'a self,
        log: Option<LogAs<'a>>,
        writes: &'a [Write],
        audit: &'a [NewAudit],
        now: Timestamp,
    ) -> Op<'a, ()>;
    /// What replicas share (`None`: a database of one server's own).
    fn replication(&self) -> Option<Replication>;
    fn audit<'a>(&'a self, filter: &'a AuditFilter) -> Op<'a, Vec<AuditEntry>>;
    fn write_results<'a>(&'a self, rows: &'a [ResultRow]) -> Op<'a, ()>;
    fn latest(&self) -> Op<'_, Vec<ResultRow>>;
    fn delete_latest_of(&self, prober: i64) -> Op<'_, u64>;
    fn delete_latest_before(&self, before: Timestamp) -> Op<'_, u64>;
    fn history<'a>(
        &'a self,
        target: &'a str,
        since: Timestamp,
        until: Timestamp,
    ) -> Op<'a, Vec<HistoryPoint>>;
    fn history_daily<'a>(
        &'a self,
        target: &'a str,
        since: Timestamp,
        until: Timestamp,
    ) -> Op<'a, Vec<DailyPoint>>;
    fn roll_up_history(&self, before: Timestamp) -> Op<'_, u64>;
    fn delete_daily_before(&self, before: Timestamp) -> Op<'_, u64>;
    fn insert_events<'a>(&'a self, events: &'a [EventRow]) -> Op<'a, ()>;
    fn events<'a>(&'a self, filter: &'a EventFilter) -> Op<'a, Vec<EventRow>>;
    fn events_after<'a>(&'a self, filter: &'a EventFilter) -> Op<'a, Vec<EventRow>>;
    fn last_event(&self) -> Op<'_, i64>;
    fn delete_events_before(&self, before: Timestamp) -> Op<'_, u64>;
    fn revision(&self, cluster: i64, number: u32) -> Op<'_, Option<Stored>>;
    fn revisions_between(&self, cluster: i64, after: u32, upto: u32, limit: u32) -> Op<'_, Vec<Stored>>;
    /// True when a row was written (false: that number was stored already).
    fn insert_revision<'a>(&'a self, row: &'a Stored) -> Op<'a, bool>;
    fn set_revision_publish<'a>(
        &'a self,
        cluster: i64,
        number: u32,
        publish: &'a serde_json::Value,
    ) -> Op<'a, ()>;
    fn revisions(&self, cluster: i64, limit: u32) -> Op<'_, Vec<Stored>>;
    fn latest_revisions(&self) -> Op<'_, Vec<Stored>>;
    fn put_state<'a>(&'a self, key: &'a str, value: &'a str, now: Timestamp) -> Op<'a, ()>;
    fn claim_state<'a>(&'a self, key: &'a str, value: &'a str, now: Timestamp) -> Op<'a, String>;
    fn states<'a>(&'a self, prefix: &'a str) -> Op<'a, Vec<(String, String)>>;
    fn put_states<'a>(
        &'a self,
        clear: Option<&'a str>,
        puts: &'a [(String, String)],
        deletes: &'a [String],
        now: Timestamp,
    ) -> Op<'a, ()>;
    fn delete_state<'a>(&'a self, key: &'a str) -> Op<'a, ()>;
    fn checkpoint(&self) -> Op<'_, ()>;
    fn size_bytes(&self) -> Op<'_, u64>;
}
