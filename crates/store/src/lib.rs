//! Vantage's persistence, behind one interface. The control plane talks to [`Store`] only;
//! nothing it sees is specific to a database. Two backends: SQLite (WAL, embedded in the data
//! directory, the default) and PostgreSQL (for several replicas and larger fleets), each a
//! module with its own migrations implementing [`backend::Backend`]; every method behaves the
//! same on both (the store's tests run each case on each).
//!
//! What is stored: configuration objects as validated JSON documents (loaded whole at start),
//! the audit log, the latest result per (prober, target) with its window register, the result
//! history (a time series indexed by target and time, rolled up per day before deletion),
//! revisions, and runtime state that must survive a restart.
//!
//! This crate must not make decisions: it stores what it is given.

mod backend;
mod chain;
mod filters;
mod pgcopy;
mod postgres;
mod replication;
mod rows;
mod shared;
mod sqlite;

use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use backend::Backend;
use serde::{Deserialize, Serialize};
use vantage_core::Timestamp;
use vantage_core::result::{ErrorCode, HlsDetail};
use vantage_core::window::WindowRegister;

pub use replication::{
    FileWrite, Lease, LogAs, LoggedChange, Notifications, RelayedRow, Replication, Written,
};

/// Why a storage operation failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The database refused or failed.
    #[error("database: {0}")]
    Database(#[from] sqlx::Error),
    /// A schema migration failed.
    #[error("migration: {0}")]
    Migrate(#[from] sqlx::migrate::MigrateError),
    /// A stored document is not valid JSON.
    #[error("stored JSON: {0}")]
    Json(#[from] serde_json::Error),
    /// A delete named an object that does not exist.
    #[error("no object with id {0}")]
    NotFound(i64),
    /// A batch written together with others failed (the message of the shared failure).
    #[error("result batch: {0}")]
    Batch(String),
    /// The result writer has stopped.
    #[error("the result writer has stopped")]
    WriterStopped,
    /// A database URL that cannot be used (the reason; never the URL, which may hold a password).
    #[error("{0}")]
    Url(String),
    /// Another replica committed a change under the same number first: catch up, then try
    /// again.
    #[error("another replica changed the configuration at the same time")]
    Conflict,
    /// A revision was not stored: another replica has taken the evaluator lease since this one
    /// took it.
    #[error("another replica holds the evaluator lease")]
    Fenced,
    /// Stored data that cannot be read back as it was written (what is missing).
    #[error("stored data is broken: {0}")]
    Broken(String),
}

/// Result with the store's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// One configuration object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObjectRow {
    /// Server-assigned id (unique across kinds).
    pub id: i64,
    /// Kind (`region`, `cluster`, …).
    pub kind: String,
    /// Parent object (a cluster for its groups), if any.
    pub parent: Option<i64>,
    pub name: String,
    /// The object as JSON.
    pub body: String,
    pub created_at: Timestamp,
    /// Last changed.
    pub updated_at: Timestamp,
}

/// One write of a change.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Write {
    /// Create or replace the object `id` (ids are assigned by the caller, unique across kinds).
    Put {
        id: i64,
        kind: String,
        parent: Option<i64>,
        name: String,
        /// JSON body.
        body: String,
    },
    /// Remove an object.
    Delete { id: i64 },
}

/// An audit entry to write.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NewAudit {
    /// Who (`admin:ops`, `system`, `prober:12`).
    pub actor: String,
    /// What (`node.set_addresses`).
    pub action: String,
    /// On which object (`node:12`).
    pub object: String,
    /// Details.
    pub metadata: serde_json::Value,
}

/// Audit actions renamed since entries were first written, as (current name, former name).
/// Stored entries keep the name they were written with; a filter by either name finds the
/// entries written under both (`filters::audit`).
pub const AUDIT_RENAMES: [(&str, &str); 4] = [
    ("system.probes_update", "settings.probes_update"),
    ("probe.token_create", "prober.token_create"),
    ("probe.enroll", "prober.enroll"),
    ("probe.certificate_renew", "prober.certificate_renew"),
];

/// A stored audit entry.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AuditEntry {
    /// Sequence number.
    pub id: i64,
    /// When.
    pub at: Timestamp,
    /// Who.
    pub actor: String,
    /// What.
    pub action: String,
    /// On which object.
    pub object: String,
    /// Details.
    pub metadata: serde_json::Value,
}

/// Which audit entries to list. `None` fields do not filter.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AuditFilter {
    /// Action, or an action prefix ending in `.` (`scheduling.`); a renamed action's current
    /// and former names find each other's entries (`AUDIT_RENAMES`).
    pub action: Option<String>,
    pub actor: Option<String>,
    pub object: Option<String>,
    /// At or after.
    pub since: Option<Timestamp>,
    /// Before.
    pub until: Option<Timestamp>,
    /// At most this many, newest first (default 100, at most 10,000).
    pub limit: Option<u32>,
}

/// One event of the fleet's stream, as stored (the control core numbers them).
#[derive(Debug, Clone, PartialEq)]
pub struct EventRow {
    pub id: i64,
    pub at: Timestamp,
    /// Kind (`address_failing`).
    pub kind: String,
    pub cluster: Option<i64>,
    pub node: Option<i64>,
    /// One sentence for people.
    pub summary: String,
    pub details: serde_json::Value,
}

/// Which events to list. `None` and empty fields do not filter.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EventFilter {
    pub cluster: Option<i64>,
    pub node: Option<i64>,
    /// At or after.
    pub since: Option<Timestamp>,
    /// With a greater id (a stream resuming after its last event).
    pub after: Option<i64>,
    /// Any of these kinds.
    pub kinds: Vec<String>,
    /// At most this many (10,000): the newest ([`Store::events`]) or the oldest
    /// ([`Store::events_after`]), oldest first either way.
    pub limit: u32,
}

/// One result as stored: the latest row of a (prober, target) and one history row.
#[derive(Debug, Clone, PartialEq)]
pub struct ResultRow {
    /// Prober (or node that probes) id.
    pub prober: i64,
    /// Target key.
    pub target: String,
    /// When it was reported.
    pub at: Timestamp,
    /// Attempts sent.
    pub sent: u32,
    /// Attempts lost.
    pub lost: u32,
    /// Median RTT of good attempts, µs.
    pub rtt_us: Option<u32>,
    /// Last error code.
    pub error: Option<ErrorCode>,
    /// The window register after this result.
    pub register: WindowRegister,
    /// HLS tuple.
    pub hls: Option<HlsDetail>,
}

/// One point of a target's history.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct HistoryPoint {
    /// When.
    pub at: Timestamp,
    /// Which prober.
    pub prober: i64,
    /// Attempts sent.
    pub sent: u32,
    /// Attempts lost.
    pub lost: u32,
    /// Median RTT of good attempts, µs.
    pub rtt_us: Option<u32>,
    /// Last error.
    pub error: Option<ErrorCode>,
    /// HLS checks: the newest segment's age, s, when known.
    pub segment_age_s: Option<f64>,
}

/// One day of a target's history from one prober, rolled up.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct DailyPoint {
    /// Start of the day (UTC).
    pub day: Timestamp,
    /// Which prober.
    pub prober: i64,
    pub rounds: u32,
    /// Attempts sent.
    pub sent: u64,
    /// Attempts lost.
    pub lost: u64,
    /// Mean of the median RTTs, µs.
    pub rtt_avg_us: Option<u32>,
    /// Largest median RTT, µs.
    pub rtt_max_us: Option<u32>,
}

/// A revision as stored.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RevisionRow {
    /// Cluster id.
    pub cluster: i64,
    /// Number within the cluster, from 1.
    pub number: u32,
    /// When.
    pub at: Timestamp,
    /// Why.
    pub reason: String,
    /// The records (JSON).
    pub records: serde_json::Value,
    /// Held lines and why (JSON).
    pub held: serde_json::Value,
    /// Publishing outcomes (JSON).
    pub publish: serde_json::Value,
}

/// Called with each operation's name and duration (for a latency histogram).
pub type Observer = Arc<dyn Fn(&'static str, Duration) + Send + Sync>;

/// Which database a [`Store`] opens.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Database {
    /// An SQLite file, created when absent.
    Sqlite(PathBuf),
    /// A PostgreSQL database.
    Postgres(PostgresUrl),
}

impl std::fmt::Display for Database {
    /// Where the data is, fit for a log line: a PostgreSQL URL without user and password.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Database::Sqlite(path) => write!(f, "SQLite at {}", path.display()),
            Database::Postgres(url) => write!(f, "PostgreSQL at {url}"),
        }
    }
}

/// A PostgreSQL connection URL (`postgres://user:password@host:port/database?…`), parsed when
/// it is read so that a bad one is refused before anything starts. It shows (`Display`,
/// `Debug`) as host, port and database only: URLs may carry a password, and these values end up
/// in logs and error messages.
#[derive(Clone)]
pub struct PostgresUrl {
    url: String,
    /// Boxed: the options are large, and a [`Database`] is mostly a path.
    options: Box<sqlx::postgres::PgConnectOptions>,
}

impl FromStr for PostgresUrl {
    type Err = Error;

    fn from_str(url: &str) -> Result<Self> {
        if !(url.starts_with("postgres://") || url.starts_with("postgresql://")) {
            return Err(Error::Url("expected a postgres:// URL".into()));
        }
        let options = sqlx::postgres::PgConnectOptions::from_str(url)
            .map_err(|e| Error::Url(format!("not a PostgreSQL URL: {}", without(&e.to_string(), url))))?;
        Ok(PostgresUrl { url: url.to_owned(), options: Box::new(options) })
    }
}

/// `message` with every occurrence of `url` cut out, in case a parser quoted its input.
fn without(message: &str, url: &str) -> String {
    message.replace(url, "<url>")
}

impl PostgresUrl {
    /// The URL as given, password included (for configuration files only, never for logs).
    pub fn as_str(&self) -> &str {
        &self.url
    }
}

impl PartialEq for PostgresUrl {
    fn eq(&self, other: &Self) -> bool {
        self.url == other.url
    }
}

impl Eq for PostgresUrl {}

impl std::fmt::Display for PostgresUrl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let o = &self.options;
        write!(
            f,
            "postgres://{}:{}/{}",
            o.get_host(),
            o.get_port(),
            o.get_database().unwrap_or(o.get_username())
        )
    }
}

impl std::fmt::Debug for PostgresUrl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "PostgresUrl({self})")
    }
}

/// Target ids by key, so bulk writes carry integers instead of joining on text.
#[derive(Debug, Default)]
pub(crate) struct TargetIds(std::sync::Mutex<std::collections::HashMap<String, i64>>);

impl TargetIds {
    pub(crate) fn get(&self, key: &str) -> Option<i64> {
        self.0.lock().ok()?.get(key).copied()
    }

    pub(crate) fn put(&self, key: String, id: i64) {
        if let Ok(mut m) = self.0.lock() {
            m.insert(key, id);
        }
    }

    /// Each of `keys` with its id when remembered; the others, each once, go to the database
    /// together ([`Lookup::finish`]).
    pub(crate) fn lookup<'a>(&self, keys: impl Iterator<Item = &'a str>) -> Lookup<'a> {
        let keys: Vec<(&str, Option<i64>)> = keys.map(|k| (k, self.get(k))).collect();
        let mut unknown: Vec<&str> = keys.iter().filter(|(_, id)| id.is_none()).map(|(k, _)| *k).collect();
        unknown.sort_unstable();
        unknown.dedup();
        Lookup { keys, unknown }
    }
}

/// Each key's id in order, and the `(key, id)`s a transaction gave (remembered once it commits).
pub(crate) type Resolved = (Vec<i64>, Vec<(String, i64)>);

/// Target keys being given their ids: those remembered, and the unknown ones the database is
/// asked for (in one statement and one query, not two round trips per result).
pub(crate) struct Lookup<'a> {
    keys: Vec<(&'a str, Option<i64>)>,
    /// The keys not remembered, sorted, each once.
    pub(crate) unknown: Vec<&'a str>,
}

impl Lookup<'_> {
    /// The id of each key, in order, with `found` (the database's `(id, key)` of the unknown
    /// ones); and those, to be remembered once their transaction commits.
    pub(crate) fn finish(self, found: Vec<(i64, String)>) -> Result<Resolved> {
        let fresh: std::collections::HashMap<String, i64> =
            found.into_iter().map(|(id, key)| (key, id)).collect();
        let ids = self
            .keys
            .iter()
            .map(|(k, id)| {
                id.or_else(|| fresh.get(*k).copied())
                    .ok_or_else(|| Error::Database(sqlx::Error::Protocol(format!("no id for target {k}"))))
            })
            .collect::<Result<Vec<_>>>()?;
        Ok((ids, fresh.into_iter().collect()))
    }
}

/// The store. Cheap to clone.
#[derive(Clone)]
pub struct Store {
    backend: Arc<dyn Backend>,
    observer: Option<Observer>,
    /// The newest revision stored per cluster, for the next one's difference.
    chains: chain::Chains,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store").field("backend", &self.backend).finish_non_exhaustive()
    }
}

/// Runs `f` in one transaction and commits it. When any step fails, the connection is closed
/// instead of going back to the pool: after some errors (a full disk) SQLite has rolled the
/// transaction back by itself, or keeps it open after a failed `COMMIT`, and sqlx's count of
/// open transactions no longer matches. The next transaction on that connection would then
/// nest inside a stale one as a savepoint, be acknowledged, and never reach the file. A
/// PostgreSQL connection loses nothing but its prepared statements by it.
async fn in_transaction<DB: sqlx::Database, T>(
    pool: &sqlx::Pool<DB>,
    f: impl AsyncFnOnce(&mut DB::Connection) -> Result<T>,
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

impl Store {
    /// Opens (creating when absent) the SQLite database at `path` in WAL mode and runs the
    /// migrations.
    pub async fn open_sqlite(path: &Path) -> Result<Store> {
        Ok(Store::over(Arc::new(sqlite::Sqlite::open(path).await?)))
    }

    /// Connects to the PostgreSQL database at `url` and runs the migrations (several replicas
    /// starting at once take turns: sqlx holds an advisory lock while it migrates).
    pub async fn open_postgres(url: &PostgresUrl) -> Result<Store> {
        Ok(Store::over(Arc::new(postgres::Postgres::open(&url.options).await?)))
    }

    fn over(backend: Arc<dyn Backend>) -> Store {
        Store { backend, observer: None, chains: chain::Chains::default() }
    }

    /// Opens `database`.
    pub async fn open(database: &Database) -> Result<Store> {
        match database {
            Database::Sqlite(path) => Store::open_sqlite(path).await,
            Database::Postgres(url) => Store::open_postgres(url).await,
        }
    }

    /// Runs `op` and reports its duration to the observer.
    async fn timed<T>(&self, name: &'static str, op: impl Future<Output = T>) -> T {
        let started = Instant::now();
        let out = op.await;
        if let Some(o) = &self.observer {
            o(name, started.elapsed());
        }
        out
    }

    /// Reports every operation's duration to `observer`.
    pub fn with_observer(mut self, observer: Observer) -> Self {
        self.observer = Some(observer);
        self
    }

    /// True when the database answers.
    pub async fn ping(&self) -> Result<()> {
        self.timed("ping", self.backend.ping()).await
    }

    /// Every configuration object.
    pub async fn objects(&self) -> Result<Vec<ObjectRow>> {
        self.timed("objects", self.backend.objects()).await
    }

    /// Applies `writes` and appends `audit` in one transaction, at `now`.
    pub async fn commit(&self, writes: &[Write], audit: &[NewAudit], now: Timestamp) -> Result<()> {
        self.commit_logged(None, writes, audit, now).await
    }

    /// [`commit`](Self::commit), and on PostgreSQL logs the writes (and the registry files of
    /// `log`) as change `log.seq` for the other replicas ([`Replication::changes_after`]);
    /// fails with [`Error::Conflict`] when that number is taken.
    pub async fn commit_logged(
        &self,
        log: Option<LogAs<'_>>,
        writes: &[Write],
        audit: &[NewAudit],
        now: Timestamp,
    ) -> Result<()> {
        self.timed("commit", self.backend.commit(log, writes, audit, now)).await
    }

    /// What replicas share, on PostgreSQL.
    pub fn replication(&self) -> Option<Replication> {
        self.backend.replication().map(|r| Replication { chains: self.chains.clone(), ..r })
    }

    /// Audit entries matching `filter`, newest first.
    pub async fn audit(&self, filter: &AuditFilter) -> Result<Vec<AuditEntry>> {
        self.timed("audit", self.backend.audit(filter)).await
    }

    /// Writes a report's results: the latest row of each (prober, target) and a history row
    /// each, in one transaction.
    pub async fn write_results(&self, rows: &[ResultRow]) -> Result<()> {
        self.timed("write_results", self.backend.write_results(rows)).await
    }

    /// Every latest result.
    pub async fn latest(&self) -> Result<Vec<ResultRow>> {
        self.timed("latest", self.backend.latest()).await
    }

    /// Deletes a prober's latest results (disabled or deleted prober).
    pub async fn delete_latest_of(&self, prober: i64) -> Result<u64> {
        self.timed("delete_latest_of", self.backend.delete_latest_of(prober)).await
    }

    /// Deletes latest results not updated since `before`.
    pub async fn delete_latest_before(&self, before: Timestamp) -> Result<u64> {
        self.timed("delete_latest_before", self.backend.delete_latest_before(before)).await
    }

    /// A target's history in `[since, until)`, oldest first.
    pub async fn history(
        &self,
        target: &str,
        since: Timestamp,
        until: Timestamp,
    ) -> Result<Vec<HistoryPoint>> {
        self.timed("history", self.backend.history(target, since, until)).await
    }

    /// A target's daily roll-ups in `[since, until)`, oldest first.
    pub async fn history_daily(
        &self,
        target: &str,
        since: Timestamp,
        until: Timestamp,
    ) -> Result<Vec<DailyPoint>> {
        self.timed("history_daily", self.backend.history_daily(target, since, until)).await
    }

    /// Rolls up every history row older than `before` into daily rows, then deletes those
    /// rows. Returns the number of rows deleted. On PostgreSQL the days wholly before `before`
    /// go by dropping their partitions; only a day that `before` cuts is deleted row by row.
    pub async fn roll_up_history(&self, before: Timestamp) -> Result<u64> {
        self.timed("roll_up_history", self.backend.roll_up_history(before)).await
    }

    /// Deletes daily roll-ups older than `before`.
    pub async fn delete_daily_before(&self, before: Timestamp) -> Result<u64> {
        self.timed("delete_daily_before", self.backend.delete_daily_before(before)).await
    }

    /// Stores events (an id already stored is kept as it was).
    pub async fn insert_events(&self, events: &[EventRow]) -> Result<()> {
        self.timed("insert_events", self.backend.insert_events(events)).await
    }

    /// Events, oldest first.
    pub async fn events(&self, filter: &EventFilter) -> Result<Vec<EventRow>> {
        self.timed("events", self.backend.events(filter)).await
    }

    /// The oldest `filter.limit` events after `filter.after` (from the first without it),
    /// oldest first: a reader pages forward with it and skips none, however many there are.
    pub async fn events_after(&self, filter: &EventFilter) -> Result<Vec<EventRow>> {
        self.timed("events_after", self.backend.events_after(filter)).await
    }

    /// The newest event's id (0: none).
    pub async fn last_event(&self) -> Result<i64> {
        self.timed("last_event", self.backend.last_event()).await
    }

    /// Deletes events older than `before`; returns how many.
    pub async fn delete_events_before(&self, before: Timestamp) -> Result<u64> {
        self.timed("delete_events_before", self.backend.delete_events_before(before)).await
    }

    /// One revision of a cluster.
    pub async fn revision(&self, cluster: i64, number: u32) -> Result<Option<RevisionRow>> {
        self.timed("revision", async {
            let stored = self.backend.revision(cluster, number).await?;
            Ok(self.decode(stored.into_iter().collect()).await?.pop())
        })
        .await
    }

    /// Stored revisions with their full records.
    async fn decode(&self, rows: Vec<chain::Stored>) -> Result<Vec<RevisionRow>> {
        self.chains.decode(rows, &*self.backend).await
    }

    /// The revisions of a cluster after `after` up to `upto`, oldest first (the newest
    /// `limit` of them).
    pub async fn revisions_between(
        &self,
        cluster: i64,
        after: u32,
        upto: u32,
        limit: u32,
    ) -> Result<Vec<RevisionRow>> {
        self.timed("revisions_between", async {
            self.decode(self.backend.revisions_between(cluster, after, upto, limit).await?).await
        })
        .await
    }

    /// Appends a revision; storing the same (cluster, number) again changes nothing, so a write
    /// whose outcome was unknown can be retried.
    pub async fn insert_revision(&self, row: &RevisionRow) -> Result<()> {
        let backend = &*self.backend;
        self.timed(
            "insert_revision",
            self.chains.store(row, backend, async |s| backend.insert_revision(s).await),
        )
        .await
    }

    /// Records the publishing outcomes of a revision.
    pub async fn set_revision_publish(
        &self,
        cluster: i64,
        number: u32,
        publish: &serde_json::Value,
    ) -> Result<()> {
        self.timed("set_revision_publish", self.backend.set_revision_publish(cluster, number, publish)).await
    }

    /// A cluster's revisions, newest first, at most `limit`.
    pub async fn revisions(&self, cluster: i64, limit: u32) -> Result<Vec<RevisionRow>> {
        self.timed("revisions", async { self.decode(self.backend.revisions(cluster, limit).await?).await })
            .await
    }

    /// The newest revision of every cluster.
    pub async fn latest_revisions(&self) -> Result<Vec<RevisionRow>> {
        self.timed("latest_revisions", async { self.decode(self.backend.latest_revisions().await?).await })
            .await
    }

    /// Saves runtime state under `key`.
    pub async fn put_state(&self, key: &str, value: &str, now: Timestamp) -> Result<()> {
        self.timed("put_state", self.backend.put_state(key, value, now)).await
    }

    /// Saves `value` under `key` unless a value is there already, and answers the value stored:
    /// of several processes claiming the same key at once, every one gets the same winner.
    pub async fn claim_state(&self, key: &str, value: &str, now: Timestamp) -> Result<String> {
        self.timed("claim_state", self.backend.claim_state(key, value, now)).await
    }

    /// Runtime state whose key starts with `prefix`: (key, value).
    pub async fn states(&self, prefix: &str) -> Result<Vec<(String, String)>> {
        self.timed("states", self.backend.states(prefix)).await
    }

    /// Saves many runtime states at once, in one transaction: every state whose key starts
    /// with `clear` (when given) goes, then `puts` are saved and `deletes` deleted. A state
    /// saved by difference writes what changed, and a whole one replaces its rows.
    pub async fn put_states(
        &self,
        clear: Option<&str>,
        puts: &[(String, String)],
        deletes: &[String],
        now: Timestamp,
    ) -> Result<()> {
        self.timed("put_states", self.backend.put_states(clear, puts, deletes, now)).await
    }

    /// Deletes runtime state under `key`.
    pub async fn delete_state(&self, key: &str) -> Result<()> {
        self.timed("delete_state", self.backend.delete_state(key)).await
    }

    /// Moves the write-ahead log into the database file and truncates it (SQLite; PostgreSQL
    /// checkpoints by itself, and asking it to needs a privilege the store should not hold).
    pub async fn checkpoint(&self) -> Result<()> {
        self.timed("checkpoint", self.backend.checkpoint()).await
    }

    /// Bytes used by the database file, without the write-ahead log (PostgreSQL: by the tables
    /// and indexes of the store's schema).
    pub async fn size_bytes(&self) -> Result<u64> {
        self.timed("size_bytes", self.backend.size_bytes()).await
    }
}

/// Most rows one group commit takes; more wait for the next one.
const GROUP_ROWS: usize = 1_000_000;

type Pending = (Vec<ResultRow>, tokio::sync::oneshot::Sender<Result<()>>);

/// Group commit for results: reports that arrive while a transaction is being written are
/// written together in the next one, and each caller is answered once its rows are durable.
/// Under load (50 probers reporting at once) one transaction carries many reports.
#[derive(Debug, Clone)]
pub struct ResultWriter {
    queue: tokio::sync::mpsc::Sender<Pending>,
}

impl ResultWriter {
    /// Starts the writer task on the current runtime.
    pub fn spawn(store: Store) -> Self {
        let (queue, mut rx) = tokio::sync::mpsc::channel::<Pending>(1024);
        tokio::spawn(async move {
            while let Some(first) = rx.recv().await {
                let mut batch = vec![first];
                let mut rows = batch[0].0.len();
                while rows < GROUP_ROWS {
                    match rx.try_recv() {
                        Ok(p) => {
                            rows += p.0.len();
                            batch.push(p);
                        }
                        Err(_) => break,
                    }
                }
                let outcome = if batch.len() == 1 {
                    store.write_results(&batch[0].0).await
                } else {
                    let all: Vec<ResultRow> = batch.iter_mut().flat_map(|(r, _)| std::mem::take(r)).collect();
                    store.write_results(&all).await
                };
                let shared = outcome.as_ref().err().map(ToString::to_string);
                for (_, reply) in batch {
                    // A caller that went away no longer needs its answer.
                    let _ = reply.send(match &shared {
                        None => Ok(()),
                        Some(e) => Err(Error::Batch(e.clone())),
                    });
                }
            }
        });
        ResultWriter { queue }
    }

    /// Writes `rows` (latest + history); returns once they are committed.
    pub async fn write(&self, rows: Vec<ResultRow>) -> Result<()> {
        self.submit(rows).await?.await
    }

    /// Queues `rows` behind every row queued before (a later result of a prober and target is
    /// the latest kept); the future returned ends once they are committed.
    pub async fn submit(&self, rows: Vec<ResultRow>) -> Result<impl Future<Output = Result<()>> + use<>> {
        let (tx, rx) = tokio::sync::oneshot::channel();
        self.queue.send((rows, tx)).await.map_err(|_| Error::WriterStopped)?;
        Ok(async move { rx.await.map_err(|_| Error::WriterStopped)? })
    }
}
