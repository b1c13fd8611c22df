//! Take-over of the evaluator lease measured: two `vantage serve` replicas on a PostgreSQL
//! database made for the run (and dropped after it); the lease holder is killed with SIGKILL,
//! and the clock runs until the other replica's `/metrics` says it holds the lease. The
//! killed one is started again (it comes back as a follower) and the next repetition kills
//! the new holder.
//!
//! ```text
//! cargo build --release -p vantage && cargo run --release -p vantage --example takeover -- [--reps 5]
//! ```
//!
//! It runs the `vantage` binary beside the example's own directory (`target/release/vantage`),
//! against `VANTAGE_TEST_POSTGRES` (default `postgres://postgres@127.0.0.1:5432/test`), on
//! 127.0.0.1 with ephemeral ports. Each replica's `/metrics` is read every 10 ms.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use sqlx::{Connection, Executor, PgConnection};
use tokio::process::{Child, Command};

/// Longest wait for one step before the run is declared broken.
const LIMIT: Duration = Duration::from_secs(60);

struct Replica {
    dir: PathBuf,
    child: Child,
    url: String,
}

impl Replica {
    async fn start(vantage: &Path, dir: &Path, database: &str) -> anyhow::Result<Replica> {
        let _ = std::fs::remove_file(dir.join("serve.json"));
        let log = std::fs::File::create(dir.with_extension("log"))?;
        let child = Command::new(vantage)
            .args(["serve", "--data-dir"])
            .arg(dir)
            .args(["--database", database])
            .args([
                "--api-listen",
                "127.0.0.1:0",
                "--agent-listen",
                "127.0.0.1:0",
                "--dns-listen",
                "127.0.0.1:0",
            ])
            .env_remove("VANTAGE_CONFIG")
            .stdout(Stdio::null())
            .stderr(log)
            .kill_on_drop(true)
            .spawn()
            .with_context(|| format!("running {}", vantage.display()))?;
        let started = Instant::now();
        let url = loop {
            if let Ok(text) = std::fs::read_to_string(dir.join("serve.json"))
                && let Ok(v) = serde_json::from_str::<serde_json::Value>(&text)
            {
                break v["api"].as_str().context("serve.json names the API")?.to_owned();
            }
            if started.elapsed() > LIMIT {
                bail!("vantage serve did not start; see {}", dir.with_extension("log").display());
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        };
        Ok(Replica { dir: dir.to_owned(), child, url })
    }

    async fn holds_lease(&self, client: &reqwest::Client) -> bool {
        let Ok(r) = client.get(format!("{}/metrics", self.url)).send().await else { return false };
        r.text().await.unwrap_or_default().lines().any(|l| l == "vantage_evaluator_lease 1")
    }
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let reps: usize = match args.iter().position(|a| a == "--reps") {
        Some(i) => args.get(i + 1).context("--reps N")?.parse()?,
        None => 5,
    };
    let vantage = std::env::current_exe()?
        .parent()
        .and_then(Path::parent)
        .map(|d| d.join("vantage"))
        .filter(|p| p.exists())
        .context("no vantage binary beside the examples: run `cargo build --release -p vantage` first")?;
    let server = std::env::var("VANTAGE_TEST_POSTGRES")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".to_owned());
    let name = format!("vantage_takeover_{}", std::process::id());
    let mut admin = PgConnection::connect(&server).await.context("PostgreSQL (VANTAGE_TEST_POSTGRES)")?;
    admin.execute(sqlx::AssertSqlSafe(format!("CREATE DATABASE {name}"))).await?;
    let host = server.split_once('?').map_or(server.as_str(), |(b, _)| b);
    let database = format!("{}/{name}", host.rsplit_once('/').map_or(host, |(h, _)| h));
    let result = run(&vantage, &database, reps).await;
    admin.execute(sqlx::AssertSqlSafe(format!("DROP DATABASE {name} WITH (FORCE)"))).await?;
    result
}

async fn run(vantage: &Path, database: &str, reps: usize) -> anyhow::Result<()> {
    let temp = tempfile::tempdir()?;
    let client = reqwest::Client::builder().timeout(Duration::from_secs(2)).build()?;
    let (a, b) = (temp.path().join("a"), temp.path().join("b"));
    let mut replicas = vec![Replica::start(vantage, &a, database).await?];
    std::fs::create_dir_all(&b)?;
    std::fs::copy(a.join("admin-token"), b.join("admin-token"))?;
    replicas.push(Replica::start(vantage, &b, database).await?);
    let mut times = Vec::with_capacity(reps);
    for rep in 0..reps {
        let started = Instant::now();
        let holder = loop {
            let mut held = Vec::new();
            for (i, r) in replicas.iter().enumerate() {
                if r.holds_lease(&client).await {
                    held.push(i);
                }
            }
            match held[..] {
                [i] => break i,
                [_, _] => bail!("two replicas hold the lease"),
                _ if started.elapsed() > LIMIT => bail!("no replica holds the lease"),
                _ => tokio::time::sleep(Duration::from_millis(50)).await,
            }
        };
        let other = 1 - holder;
        replicas[holder].child.start_kill()?;
        let killed = Instant::now();
        replicas[holder].child.wait().await?;
        while !replicas[other].holds_lease(&client).await {
            if killed.elapsed() > LIMIT {
                bail!("the other replica did not take the lease");
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let took = killed.elapsed();
        println!("rep {}: lease taken {:.3} s after kill -9", rep + 1, took.as_secs_f64());
        times.push(took);
        let dir = replicas[holder].dir.clone();
        replicas[holder] = Replica::start(vantage, &dir, database).await?;
    }
    times.sort();
    let s = |d: Duration| format!("{:.3}", d.as_secs_f64());
    println!(
        "take-over after kill -9 ({} reps): min {} s, median {} s, max {} s",
        times.len(),
        s(times[0]),
        s(times[times.len() / 2]),
        s(times[times.len() - 1])
    );
    Ok(())
}
