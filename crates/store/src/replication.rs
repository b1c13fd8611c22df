//! What replicas on one PostgreSQL database share besides the store's tables (SPEC §8): the
//! evaluator lease (an advisory lock on a connection of its own), the log of configuration
//! changes, the inbox of relayed observations, and the notifications that say one of them or
//! a revision was written. SQLite has no replicas, and none of this.

use std::time::Duration;

use serde::{Deserialize, Serialize};
use sqlx::postgres::{PgConnectOptions, PgListener};
use sqlx::{Connection, PgConnection, PgPool, Row};
use vantage_core::Timestamp;

use crate::{Error, Result, Write};

/// The advisory lock whose holder evaluates for the fleet ("vantage" in ASCII, as a number).
const LEASE_KEY: i64 = 0x76_616e_7461_6765;
/// The advisory lock inbox writers take in turn, so inbox ids commit in order.
const INBOX_KEY: i64 = 0x76_616e_7461_6769;
/// The channels every replica listens on (the triggers of `0002_replicas.sql`).
const CHANNELS: [&str; 3] = ["vantage_revisions", "vantage_changes", "vantage_inbox"];

/// What a notification says was written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Written {
    Revisions,
    Changes,
    Inbox,
}
/// At most this many changes or relayed observations are read at once.
const PAGE: i64 = 1_000;

/// A configuration change as logged: its number and its writes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoggedChange {
    /// One after the change before it.
    pub seq: i64,
    /// When it was committed (the objects' `updated_at`).
    pub at: Timestamp,
    /// The replica that committed it.
    pub origin: String,
    pub writes: Vec<Write>,
    /// Files of the mirror registry it wrote (the registry lives in each replica's files).
    pub files: Vec<FileWrite>,
}

/// One file of the mirror registry written (`text`) or removed (`None`) through the API.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileWrite {
    /// The file's name in the registry's directory.
    pub name: String,
    pub text: Option<String>,
}

/// Where a change goes in the log: the number it takes (one after the newest its replica
/// applied), the replica committing it, and the registry files it wrote.
#[derive(Debug, Clone, Copy)]
pub struct LogAs<'a> {
    pub seq: i64,
    pub origin: &'a str,
    pub files: &'a [FileWrite],
}

/// The registry files of a `changes` row.
fn files(r: &sqlx::postgres::PgRow) -> Result<Vec<FileWrite>> {
    let files: Option<String> = r.try_get("files")?;
    Ok(files.map(|f| serde_json::from_str(&f)).transpose()?.unwrap_or_default())
}

/// An observation another replica relayed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RelayedRow {
    /// Increasing in commit order.
    pub id: i64,
    /// The replica that relayed it.
    pub origin: String,
    /// When that replica's core took it (its clock), however long it waited to be relayed.
    pub at: Timestamp,
    /// As the relaying replica encoded it (JSON).
    pub body: String,
}

/// The shared tables of a PostgreSQL store.
#[derive(Debug, Clone)]
pub struct Replication {
    pub(crate) pool: PgPool,
    pub(crate) options: PgConnectOptions,
    /// The store's, so that revisions follow each other as differences whoever stores them.
    pub(crate) chains: crate::chain::Chains,
}

/// The chain of revisions read from the shared database.
impl crate::chain::Earlier for Replication {
    fn earlier(
        &self,
        cluster: i64,
        after: u32,
        upto: u32,
    ) -> crate::backend::Op<'_, Vec<crate::chain::Stored>> {
        Box::pin(crate::postgres::revisions_between(
            &self.pool,
            cluster,
            after,
            upto,
            upto.saturating_sub(after),
        ))
    }
}

impl Replication {
    /// The newest change's number (0 before the first).
    pub async fn changes_head(&self) -> Result<i64> {
        Ok(sqlx::query_scalar("SELECT COALESCE(MAX(seq), 0) FROM changes").fetch_one(&self.pool).await?)
    }

    /// The changes after `seq`, oldest first (a page at most).
    pub async fn changes_after(&self, seq: i64) -> Result<Vec<LoggedChange>> {
        let rows = sqlx::query(
            "SELECT seq, at, origin, writes, files FROM changes WHERE seq > $1 ORDER BY seq LIMIT $2",
        )
        .bind(seq)
        .bind(PAGE)
        .fetch_all(&self.pool)
        .await?;
        rows.iter()
            .map(|r| {
                let writes: String = r.try_get("writes")?;
                Ok(LoggedChange {
                    seq: r.try_get("seq")?,
                    at: Timestamp::from_millis(r.try_get("at")?),
                    origin: r.try_get("origin")?,
                    writes: serde_json::from_str(&writes)?,
                    files: files(r)?,
                })
            })
            .collect()
    }

    /// Every registry file write the log holds, oldest first: what a replica starting (or
    /// back after the log moved past it) writes to its own directory to hold the same files.
    pub async fn logged_files(&self) -> Result<Vec<FileWrite>> {
        let rows = sqlx::query("SELECT files FROM changes WHERE files IS NOT NULL ORDER BY seq")
            .fetch_all(&self.pool)
            .await?;
        Ok(rows.iter().map(files).collect::<Result<Vec<_>>>()?.into_iter().flatten().collect())
    }

    /// The newest relayed observation's id (0 before the first).
    pub async fn inbox_head(&self) -> Result<i64> {
        Ok(sqlx::query_scalar("SELECT COALESCE(MAX(id), 0) FROM inbox").fetch_one(&self.pool).await?)
    }

    /// Relays `rows` from `origin`, in order: each body with when its replica's core took it.
    pub async fn relay(&self, origin: &str, rows: &[(Timestamp, String)]) -> Result<()> {
        let ats: Vec<i64> = rows.iter().map(|(at, _)| at.millis()).collect();
        let bodies: Vec<&str> = rows.iter().map(|(_, body)| body.as_str()).collect();
        crate::in_transaction(&self.pool, async |tx| {
            sqlx::query("SELECT pg_advisory_xact_lock($1)").bind(INBOX_KEY).execute(&mut *tx).await?;
            sqlx::query(
                "INSERT INTO inbox (at, origin, body) SELECT at, $1, body \
                 FROM UNNEST($2::bigint[], $3::text[]) WITH ORDINALITY AS b (at, body, n) ORDER BY n",
            )
            .bind(origin)
            .bind(&ats)
            .bind(&bodies)
            .execute(&mut *tx)
            .await?;
            Ok(())
        })
        .await
    }

    /// The observations relayed after `id`, oldest first (a page at most).
    pub async fn relayed_after(&self, id: i64) -> Result<Vec<RelayedRow>> {
        let rows = sqlx::query("SELECT id, at, origin, body FROM inbox WHERE id > $1 ORDER BY id LIMIT $2")
            .bind(id)
            .bind(PAGE)
            .fetch_all(&self.pool)
            .await?;
        rows.iter()
            .map(|r| {
                Ok(RelayedRow {
                    id: r.try_get("id")?,
                    origin: r.try_get("origin")?,
                    at: Timestamp::from_millis(r.try_get("at")?),
                    body: r.try_get("body")?,
                })
            })
            .collect()
    }

    /// Deletes relayed observations older than `inbox_before` and logged changes older than
    /// `changes_before`; the newest change stays, as the number the next one follows.
    pub async fn prune(&self, inbox_before: Timestamp, changes_before: Timestamp) -> Result<()> {
        sqlx::query("DELETE FROM inbox WHERE at < $1")
            .bind(inbox_before.millis())
            .execute(&self.pool)
            .await?;
        sqlx::query("DELETE FROM changes WHERE at < $1 AND seq < (SELECT MAX(seq) FROM changes)")
            .bind(changes_before.millis())
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    /// Starts listening for new revisions, changes and relayed observations.
    pub async fn listen(&self) -> Result<Notifications> {
        let mut listener = PgListener::connect_with(&self.pool).await?;
        listener.listen_all(CHANNELS).await?;
        Ok(Notifications(listener))
    }

    /// The evaluator lease, not yet taken.
    pub fn lease(&self) -> Lease {
        Lease { options: self.options.clone(), conn: None, held: false, epoch: None }
    }

    /// Stores `row` if `epoch` is still the lease's ([`Lease::epoch`]), else fails with
    /// [`Error::Fenced`]: another replica has taken the lease since.
    pub async fn insert_revision(&self, row: &crate::RevisionRow, epoch: i64) -> Result<()> {
        self.chains
            .store(row, self, async |stored| {
                crate::in_transaction(&self.pool, async |tx| {
                    let current: i64 = sqlx::query_scalar("SELECT epoch FROM lease WHERE id = 1 FOR SHARE")
                        .fetch_one(&mut *tx)
                        .await?;
                    if current != epoch {
                        return Err(Error::Fenced);
                    }
                    crate::postgres::insert_revision(&mut *tx, stored).await
                })
                .await
            })
            .await
    }
}

/// Notifications of new revisions, changes or relayed observations.
#[derive(Debug)]
pub struct Notifications(PgListener);

impl Notifications {
    /// Waits for the next notification. While the connection is down it is made again (what
    /// was written meanwhile is found by the periodic reads).
    pub async fn recv(&mut self) -> Result<Written> {
        let n = self.0.recv().await?;
        Ok(match n.channel() {
            "vantage_revisions" => Written::Revisions,
            "vantage_changes" => Written::Changes,
            _ => Written::Inbox,
        })
    }
}

/// The evaluator lease: a session advisory lock on a connection of its own, held as long as
/// that connection lives. The database ends the session of a replica that died or was cut
/// off (the connection asks for TCP keepalives every second), which frees the lock.
#[derive(Debug)]
pub struct Lease {
    options: PgConnectOptions,
    conn: Option<PgConnection>,
    held: bool,
    epoch: Option<i64>,
}

impl Lease {
    /// Takes the lease when it is free, or checks that it is still held, within `timeout`.
    /// Returns whether this replica holds it; on any failure it does not, and the connection
    /// is dropped (with the lock, if the database still had it).
    pub async fn hold(&mut self, timeout: Duration) -> bool {
        match tokio::time::timeout(timeout, self.try_hold()).await {
            Ok(Ok(held)) => held,
            Ok(Err(e)) => {
                tracing::warn!(error = %e, "evaluator lease: database connection failed");
                self.release();
                false
            }
            Err(_) => {
                tracing::warn!(?timeout, "evaluator lease: the database did not answer in time");
                self.release();
                false
            }
        }
    }

    async fn try_hold(&mut self) -> Result<bool> {
        let conn = match &mut self.conn {
            Some(c) => c,
            None => {
                let mut c = PgConnection::connect_with(&self.options).await?;
                // A holder cut off from the database loses its session (and the lock) within
                // seconds instead of the kernel's two hours.
                // And within 3 s when what it sends goes unacknowledged (keepalives wait for that).
                sqlx::raw_sql(
                    "SET tcp_keepalives_idle = 1; SET tcp_keepalives_interval = 1; SET tcp_keepalives_count = 3; \
                     SET tcp_user_timeout = 3000",
                )
                .execute(&mut c)
                .await?;
                self.conn.insert(c)
            }
        };
        if self.held {
            sqlx::query("SELECT 1").execute(&mut *conn).await?;
        } else if sqlx::query_scalar("SELECT pg_try_advisory_lock($1)")
            .bind(LEASE_KEY)
            .fetch_one(&mut *conn)
            .await?
        {
            // Waits for a revision the previous holder is storing, and fences off any later one.
            let epoch = sqlx::query_scalar("UPDATE lease SET epoch = epoch + 1 WHERE id = 1 RETURNING epoch")
                .fetch_one(&mut *conn)
                .await?;
            self.epoch = Some(epoch);
            self.held = true;
        }
        Ok(self.held)
    }

    /// The epoch this holder took, while it holds the lease: its revisions are stored under it
    /// ([`Replication::insert_revision`]).
    pub fn epoch(&self) -> Option<i64> {
        self.epoch.filter(|_| self.held)
    }

    /// Lets the lease go (the connection is closed).
    pub fn release(&mut self) {
        self.conn = None;
        self.held = false;
        self.epoch = None;
    }
}

/// Whether `e` is the conflict of two replicas numbering a change alike.
pub(crate) fn is_conflict(e: &sqlx::Error) -> bool {
    e.as_database_error().and_then(|d| d.constraint()) == Some("changes_pkey")
}
