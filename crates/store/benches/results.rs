//! Writing results the way reports arrive: 50 probers × 10,000 results per round into the
//! latest table and the history, on SQLite and then on PostgreSQL (a schema of its own on the
//! server `VANTAGE_TEST_POSTGRES` names, default `postgres://postgres@127.0.0.1:5432/test`,
//! dropped afterwards). Prints results per second and bytes on disk per million history rows
//! for each. `cargo bench -p vantage-store --bench results`.
// A benchmark stops at its first failure.
#![allow(clippy::expect_used)]

use std::time::Instant;

use sqlx::{Connection, Executor};
use vantage_core::Timestamp;
use vantage_core::result::{Attempt, ErrorCode, Stages};
use vantage_core::window::WindowRegister;
use vantage_store::{Database, ResultRow, ResultWriter, Store};

const PROBERS: i64 = 50;
const TARGETS: u32 = 10_000;
const ROUNDS: u64 = 6;

fn report(prober: i64, round: u64, at: Timestamp) -> Vec<ResultRow> {
    (0..TARGETS)
        .map(|t| {
            let lost = u32::from((t + round as u32 + prober as u32).is_multiple_of(17)) * 3;
            let mut register = WindowRegister::new(0);
            let good = lost == 0;
            register.push(&Attempt {
                stages: if good { Stages::ALL } else { Stages::CONNECTED },
                rtt_us: 800 + t % 400,
                error: (!good).then_some(ErrorCode::Timeout),
            });
            ResultRow {
                prober,
                target: format!("n{}/10.{}.{}.{}:443", t / 2, t >> 16 & 255, t >> 8 & 255, t & 255),
                at,
                sent: 3,
                lost,
                rtt_us: good.then_some(800 + t % 400),
                error: (!good).then_some(ErrorCode::Timeout),
                register,
                hls: None,
            }
        })
        .collect()
}

#[tokio::main]
async fn main() {
    let dir = tempfile::tempdir().expect("temp dir");
    let sqlite = run(&Database::Sqlite(dir.path().join("bench.db"))).await;
    let server = std::env::var("VANTAGE_TEST_POSTGRES")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".to_owned());
    let schema = format!("vantage_bench_{}", std::process::id());
    let mut admin = sqlx::PgConnection::connect(&server).await.expect("PostgreSQL (VANTAGE_TEST_POSTGRES)");
    admin.execute(sqlx::AssertSqlSafe(format!("CREATE SCHEMA {schema}"))).await.expect("create schema");
    let sep = if server.contains('?') { '&' } else { '?' };
    let url = format!("{server}{sep}options=-c%20search_path%3D{schema}").parse().expect("URL");
    let postgres = run(&Database::Postgres(url)).await;
    admin.execute(sqlx::AssertSqlSafe(format!("DROP SCHEMA {schema} CASCADE"))).await.expect("drop schema");
    println!("results/s: SQLite {sqlite:.0}, PostgreSQL {postgres:.0}");
}

/// Writes every round to `database`; prints each round and the totals; returns results/s.
async fn run(database: &Database) -> f64 {
    println!("{database}");
    let t0 = Timestamp::from_secs(1_800_000_000);
    let mut after_first = 0;
    let mut rows_written = 0u64;
    let mut timed = std::time::Duration::ZERO;
    for round in 0..ROUNDS {
        // Reports are prepared before the clock starts: only the store is measured.
        let reports: Vec<Vec<ResultRow>> =
            (0..PROBERS).map(|p| report(p + 1, round, t0.plus_secs(round * 10))).collect();
        let store = Store::open(database).await.expect("open");
        let writer = ResultWriter::spawn(store.clone());
        let started = Instant::now();
        // The 50 probers report at once, as after a round; group commit batches them.
        let tasks: Vec<_> = reports
            .into_iter()
            .map(|r| {
                let w = writer.clone();
                tokio::spawn(async move { w.write(r).await })
            })
            .collect();
        for t in tasks {
            t.await.expect("join").expect("write");
        }
        let took = started.elapsed();
        drop(writer);
        store.checkpoint().await.expect("checkpoint");
        let bytes = store.size_bytes().await.expect("size");
        timed += took;
        rows_written += (PROBERS as u64) * u64::from(TARGETS);
        if round == 0 {
            after_first = bytes;
        }
        println!(
            "round {round}: {} results in {:.2} s = {:.0} results/s; {} MiB on disk",
            PROBERS as u64 * u64::from(TARGETS),
            took.as_secs_f64(),
            (PROBERS as f64 * f64::from(TARGETS)) / took.as_secs_f64(),
            bytes >> 20
        );
    }
    let store = Store::open(database).await.expect("open");
    store.checkpoint().await.expect("checkpoint");
    let total = store.size_bytes().await.expect("size");
    let history_rows = (ROUNDS - 1) * PROBERS as u64 * u64::from(TARGETS);
    println!(
        "overall: {rows_written} results in {:.2} s = {:.0} results/s (latest + history)",
        timed.as_secs_f64(),
        rows_written as f64 / timed.as_secs_f64()
    );
    println!(
        "history: {:.1} MiB per million rows (growth after the first round, whose latest rows and targets are fixed cost)",
        (total - after_first) as f64 / history_rows as f64 * 1e6 / 1_048_576.0
    );
    rows_written as f64 / timed.as_secs_f64()
}
