//! A database of one test's own: an SQLite file in a temporary directory, or a PostgreSQL
//! schema made for the test on the server `VANTAGE_TEST_POSTGRES` names (default
//! `postgres://postgres@127.0.0.1:5432/test`) and dropped when the test ends, passed or not,
//! so that tests run in parallel and leave nothing behind. No PostgreSQL is a failure, not a
//! skip: CI starts the server (`.ci/run`).

use std::sync::atomic::{AtomicU32, Ordering};

use sqlx::{Connection, Executor, PgConnection};
use vantage_store::{Database, PostgresUrl, Store};

const DEFAULT_URL: &str = "postgres://postgres@127.0.0.1:5432/test";

/// The test server's URL.
pub(crate) fn server_url() -> String {
    std::env::var("VANTAGE_TEST_POSTGRES").unwrap_or_else(|_| DEFAULT_URL.to_owned())
}

/// A connection to the test server, failing the test with a hint when there is none.
pub(crate) async fn connect(url: &str) -> PgConnection {
    PgConnection::connect(url).await.unwrap_or_else(|e| {
        panic!("PostgreSQL at {url} (VANTAGE_TEST_POSTGRES): {e}; .ci/run starts it with pg_ctlcluster")
    })
}

pub(crate) enum Db {
    Sqlite(tempfile::TempDir),
    Postgres(Schema),
}

impl Db {
    pub(crate) fn sqlite() -> Db {
        Db::Sqlite(tempfile::tempdir().unwrap())
    }

    pub(crate) async fn postgres() -> Db {
        Db::Postgres(Schema::new().await)
    }

    /// What [`Store::open`] takes for this database.
    pub(crate) fn database(&self) -> Database {
        match self {
            Db::Sqlite(dir) => Database::Sqlite(dir.path().join("vantage.db")),
            Db::Postgres(schema) => Database::Postgres(schema.url.parse().unwrap()),
        }
    }

    /// Opens (again) the store on this database.
    pub(crate) async fn open(&self) -> Store {
        Store::open(&self.database()).await.unwrap()
    }
}

/// A schema of one test's own; its URL sets it as the connection's search path.
pub(crate) struct Schema {
    pub(crate) name: String,
    /// The server's URL with the schema as search path.
    pub(crate) url: String,
}

impl Schema {
    async fn new() -> Schema {
        static NEXT: AtomicU32 = AtomicU32::new(0);
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.subsec_nanos())
            .unwrap_or(0);
        let name =
            format!("vantage_test_{}_{}_{nanos}", std::process::id(), NEXT.fetch_add(1, Ordering::Relaxed));
        let server = server_url();
        let mut conn = connect(&server).await;
        conn.execute(sqlx::AssertSqlSafe(format!("CREATE SCHEMA {name}"))).await.unwrap();
        let sep = if server.contains('?') { '&' } else { '?' };
        // Named after the schema too, so that its sessions can be found and ended.
        let url = format!("{server}{sep}options=-c%20search_path%3D{name}&application_name={name}");
        assert!(url.parse::<PostgresUrl>().is_ok(), "{url}");
        Schema { name, url }
    }
}

impl Drop for Schema {
    /// Drops the schema from a thread of its own: a test's runtime may be gone or unwinding.
    /// The test's sessions are ended first: one whose close was still queued in the test's
    /// runtime (blocked here) may hold a lock in a transaction a failed write left open, and
    /// the drop would wait for it forever.
    fn drop(&mut self) {
        let name = self.name.clone();
        let dropped = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
            rt.block_on(async {
                let mut conn = connect(&server_url()).await;
                sqlx::query(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = $1",
                )
                .bind(&name)
                .execute(&mut conn)
                .await
                .unwrap();
                conn.execute(sqlx::AssertSqlSafe(format!("DROP SCHEMA {name} CASCADE"))).await.unwrap();
            });
        })
        .join();
        if dropped.is_err() && !std::thread::panicking() {
            panic!("schema {} was not dropped", self.name);
        }
    }
}
