//! `vantage serve --database postgres://…` on a database made for the test (and dropped after
//! it) on the server `VANTAGE_TEST_POSTGRES` names (default
//! `postgres://postgres@127.0.0.1:5432/test`; CI starts it, and without it the test fails).

use std::sync::atomic::{AtomicU32, Ordering};

use reqwest::Method;
use serde_json::json;
use sqlx::{Connection, Executor, PgConnection};

use crate::harness::ServerProcess;

/// A database of the test's own, dropped (with its connections) when the test ends.
struct FreshDatabase {
    server: String,
    name: String,
    url: String,
}

impl FreshDatabase {
    async fn new() -> FreshDatabase {
        static NEXT: AtomicU32 = AtomicU32::new(0);
        let server = std::env::var("VANTAGE_TEST_POSTGRES")
            .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".to_owned());
        let name = format!("vantage_e2e_{}_{}", std::process::id(), NEXT.fetch_add(1, Ordering::Relaxed));
        let mut admin = PgConnection::connect(&server)
            .await
            .unwrap_or_else(|e| panic!("PostgreSQL at {server} (VANTAGE_TEST_POSTGRES): {e}"));
        admin.execute(sqlx::AssertSqlSafe(format!("CREATE DATABASE {name}"))).await.unwrap();
        // The same server, user and parameters; the new database.
        let (base, query) = server.split_once('?').map_or((server.as_str(), None), |(b, q)| (b, Some(q)));
        let host = base.rsplit_once('/').map_or(base, |(h, _)| h);
        let url = match query {
            Some(q) => format!("{host}/{name}?{q}"),
            None => format!("{host}/{name}"),
        };
        FreshDatabase { server, name, url }
    }
}

impl Drop for FreshDatabase {
    fn drop(&mut self) {
        let (server, name) = (self.server.clone(), self.name.clone());
        // A thread of its own: the test's runtime may be unwinding.
        let _ = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
            rt.block_on(async {
                let mut admin = PgConnection::connect(&server).await.unwrap();
                admin
                    .execute(sqlx::AssertSqlSafe(format!("DROP DATABASE {name} WITH (FORCE)")))
                    .await
                    .unwrap();
            });
        })
        .join();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn objects_created_on_postgres_are_there_after_a_restart() {
    let db = FreshDatabase::new().await;
    let temp = tempfile::tempdir().unwrap();
    let s = ServerProcess::start_in(temp.path(), &["--database", &db.url]).await;
    let region = s.create("/v1/regions", json!({"code": "ap-sg", "name": "Singapore"})).await;
    s.stop().await;
    assert!(!temp.path().join("vantage.db").exists(), "no SQLite file beside PostgreSQL");
    let log = std::fs::read_to_string(temp.path().with_extension("log")).unwrap();
    assert!(log.contains("PostgreSQL at postgres://127.0.0.1:5432/vantage_e2e_"), "{log}");

    let s = ServerProcess::start_in(temp.path(), &["--database", &db.url]).await;
    let (status, regions) = s.call(Method::GET, "/v1/regions", None).await;
    assert_eq!(status, 200);
    assert_eq!(regions["items"], json!([region]), "{regions}");
    s.stop().await;
}
