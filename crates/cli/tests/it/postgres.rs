//! `vantage serve --database postgres://…` on a database made for the test (and dropped after
//! it) on the server `VANTAGE_TEST_POSTGRES` names (default
//! `postgres://postgres@127.0.0.1:5432/test`; CI starts it, and without it the test fails).

use std::sync::atomic::{AtomicU32, Ordering};

use reqwest::Method;
use serde_json::json;
use sqlx::{Connection, Executor, PgConnection};

use crate::harness::ServerProcess;

/// A database of the test's own, dropped (with its connections) when the test ends.
pub(crate) struct FreshDatabase {
    server: String,
    pub(crate) name: String,
    pub(crate) url: String,
}

impl FreshDatabase {
    pub(crate) async fn new() -> FreshDatabase {
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

impl FreshDatabase {
    pub(crate) async fn admin(&self) -> PgConnection {
        PgConnection::connect(&self.server).await.unwrap()
    }

    /// Cuts every connection to the database and refuses new ones, as a database host that
    /// went away would.
    pub(crate) async fn cut(&self) {
        let mut admin = self.admin().await;
        let name = &self.name;
        admin
            .execute(sqlx::AssertSqlSafe(format!("ALTER DATABASE {name} ALLOW_CONNECTIONS false")))
            .await
            .unwrap();
        admin
            .execute(sqlx::AssertSqlSafe(format!(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '{name}'"
            )))
            .await
            .unwrap();
    }

    /// Lets connections in again.
    pub(crate) async fn restore(&self) {
        let name = &self.name;
        let mut admin = self.admin().await;
        admin
            .execute(sqlx::AssertSqlSafe(format!("ALTER DATABASE {name} ALLOW_CONNECTIONS true")))
            .await
            .unwrap();
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

/// The agent channel's CA is the database's: a prober enrolled through one server works with
/// another that starts on the same database from an empty data directory (a replacement host,
/// or a second replica), and no CA key is written to that directory.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_prober_enrolled_through_one_server_is_known_to_another_on_the_same_database() {
    let db = FreshDatabase::new().await;
    let (first_dir, second_dir, probers) =
        (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    // Online: it enrolled (or was known) and asked for work. On failure, what the prober
    // and the server said.
    async fn online(s: &ServerProcess, prober_log: &std::path::Path) {
        let started = std::time::Instant::now();
        loop {
            let (_, v) = s.call(Method::GET, "/v1/probers", None).await;
            if v["items"].as_array().is_some_and(|p| p.len() == 1 && p[0]["status"] == "online") {
                return;
            }
            if started.elapsed() > std::time::Duration::from_secs(60) {
                let log = |p: &std::path::Path| std::fs::read_to_string(p).unwrap_or_default();
                panic!(
                    "the prober is not online after 60 s: {v}\nprober:\n{}\nserver:\n{}",
                    log(prober_log),
                    log(&s.dir.with_extension("log"))
                );
            }
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        }
    }
    let first = ServerProcess::start_in(first_dir.path(), &["--database", &db.url]).await;
    let region = first.create("/v1/regions", json!({"code": "ap-sg", "name": "Singapore"})).await;
    let prober = first.start_prober("sg-1", region["id"].as_i64().unwrap(), probers.path()).await;
    online(&first, &probers.path().join("sg-1.log")).await;
    // The server counts a prober online once it has enrolled it, which may be before the
    // prober has saved what enrollment gave it: it is killed only once its certificate is on
    // disk, as a process stopped later would leave it.
    let cert = probers.path().join("sg-1").join("cert.pem");
    let started = std::time::Instant::now();
    while !cert.exists() {
        assert!(started.elapsed() < std::time::Duration::from_secs(10), "the prober saved no certificate");
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    let (_, ca) = first.channel();
    prober.kill().await;
    first.stop().await;

    // The admin token is the database's too: the new host's operator brings it along.
    std::fs::copy(first_dir.path().join("admin-token"), second_dir.path().join("admin-token")).unwrap();
    let second = ServerProcess::start_in(second_dir.path(), &["--database", &db.url]).await;
    let (agent, second_ca) = second.channel();
    assert_eq!(second_ca, ca, "one CA for every server on the database");
    assert!(!second_dir.path().join("ca/ca.key").exists(), "the CA's key stays in the database");
    assert!(second_dir.path().join("ca/ca.pem").exists(), "its certificate is there for API clients");
    // The same prober, its state directory as enrollment left it, now pointed at the second
    // server: its certificate is accepted and it reports.
    let prober = crate::harness::AgentProcess::start(
        "probe",
        &agent,
        "vtp_used",
        &ca,
        &probers.path().join("sg-1"),
        &["--hostname", "sg-1"],
        &probers.path().join("sg-1-again.log"),
    );
    online(&second, &probers.path().join("sg-1-again.log")).await;
    prober.kill().await;
    second.stop().await;
}

/// The database goes away under a running fleet: the server can no longer tell whether another
/// replica holds the evaluator lease, so it lets it go and DNS keeps answering its last
/// revision from memory (a stopped primary stays in it); `/readyz` says not ready, changes are
/// refused with 503 in the error shape. When the database is back the server is ready again,
/// takes the lease, publishes the failover, and changes go through.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn with_the_database_gone_dns_keeps_its_last_revision_and_changes_wait_for_it() {
    use crate::harness::{LabFleet, LabSpec, Place, dig};
    use std::time::{Duration, Instant};
    let db = FreshDatabase::new().await;
    let spec = LabSpec { net: Place::Loopback(140), database: Some(db.url.clone()), ..LabSpec::default() };
    let LabFleet { s, edges, cluster, probers: _probers, temp: _temp, .. } =
        LabFleet::start_with("cdn.pg.example", spec).await;
    let ready = || async { reqwest::get(format!("{}/readyz", s.url)).await.unwrap().status().as_u16() };
    assert_eq!(ready().await, 200);
    let browser = reqwest::Client::builder().redirect(reqwest::redirect::Policy::none()).build().unwrap();
    let login = s.ui_login(&browser).await;
    let cookie = login.headers()["set-cookie"].to_str().unwrap().split(';').next().unwrap().to_owned();

    let monitor = s
        .create(
            "/v1/monitors",
            json!({"name": "live", "regions": [{"region": "eu-de", "weight": 1, "endpoints": ["http://127.0.0.1:9/live.m3u8"]}]}),
        )
        .await["id"]
        .as_i64()
        .unwrap();

    db.cut().await;
    let cut = Instant::now();
    while ready().await != 503 {
        assert!(cut.elapsed() < Duration::from_secs(30), "still ready without its database");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    println!("postgres: cut → /readyz 503 after {:.1} s", cut.elapsed().as_secs_f64());
    // The operator still sees the fleet, from memory, and is told changes wait.
    let out = s.ctl(&["status"]).await;
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}{}", String::from_utf8_lossy(&out.stderr));
    assert!(text.starts_with("store     store unavailable"), "{text}");
    assert!(text.contains("changes wait for it"), "{text}");
    let cluster_line =
        text.lines().find(|l| l.starts_with("cluster   video (cdn.pg.example)")).unwrap_or_default();
    let revision =
        cluster_line.split_once("  revision ").and_then(|(_, r)| r.split_once(',')).map(|(n, _)| n);
    let revision = revision.unwrap_or_else(|| panic!("the revision DNS answers: {text}"));
    assert!(!cluster_line.ends_with(": -"), "and why it was cut: {text}");
    let (_, nodes) = s.call(Method::GET, "/v1/nodes", None).await;
    let node = nodes["items"][0]["id"].as_i64().unwrap();
    let mut pages = Vec::new();
    let paths = [
        "/ui".to_owned(),
        format!("/ui/clusters/{cluster}"),
        format!("/ui/nodes/{node}"),
        format!("/ui/monitors/{monitor}"),
    ];
    for path in paths {
        let page = browser.get(format!("{}{path}", s.url)).header("cookie", &cookie).send().await.unwrap();
        assert_eq!(page.status(), 200, "{path}");
        let page = page.text().await.unwrap();
        assert!(page.contains(r#"id="store-away""#) && page.contains("Changes are paused"), "{path}: {page}");
        pages.push(page);
    }
    assert!(
        pages[0].contains(&format!("#{revision} ")),
        "the revision DNS answers, from memory: {}",
        pages[0]
    );
    let scrape = s.req(Method::GET, "/metrics").send().await.unwrap();
    assert_eq!(scrape.status(), 200, "metrics are read from memory");
    let scrape = scrape.text().await.unwrap();
    assert!(scrape.contains("vantage_http_requests_total{"), "{scrape}");
    let (status, body) =
        s.call(Method::POST, "/v1/regions", Some(json!({"code": "sa-br", "name": "São Paulo"}))).await;
    assert_eq!((status, body["error"]["status"].as_u64()), (503, Some(503)), "{body}");

    edges[0].stop().await;
    // Longer than the failover takes with the database there (5 s of failing, a round of 5 s).
    let last = ["127.0.0.140", "127.0.0.142", "127.0.0.143"];
    for _ in 0..15 {
        assert_eq!(dig(s.dns(), "cdn.pg.example").await, last, "DNS answers the last revision");
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    let want = ["127.0.0.141", "127.0.0.142", "127.0.0.143"];

    db.restore().await;
    let back = Instant::now();
    while ready().await != 200 {
        assert!(back.elapsed() < Duration::from_secs(30), "not ready again with the database back");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    println!("postgres: back → /readyz 200 after {:.1} s", back.elapsed().as_secs_f64());
    while dig(s.dns(), "cdn.pg.example").await != want {
        assert!(back.elapsed() < Duration::from_secs(60), "no failover with the database back");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    s.wait_for(&format!("/v1/clusters/{cluster}/revisions"), Duration::from_secs(60), |v| {
        v["items"][0]["records"]["all"] == json!(want)
    })
    .await;
    s.create("/v1/regions", json!({"code": "sa-br", "name": "São Paulo"})).await;
    let page = browser.get(format!("{}/ui", s.url)).header("cookie", &cookie).send().await.unwrap();
    let page = page.text().await.unwrap();
    assert!(page.contains("Overview") && !page.contains("store-away"), "{page}");
}

/// A TCP relay in front of PostgreSQL that can go silent: once frozen, it passes no more
/// bytes either way and holds every connection open, as a database host that vanished from
/// the network (no reset, no answer) looks to its clients.
struct SilentRelay {
    addr: std::net::SocketAddr,
    frozen: std::sync::Arc<std::sync::atomic::AtomicBool>,
}

impl SilentRelay {
    async fn new(upstream: &str) -> SilentRelay {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let frozen = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let upstream = upstream.to_owned();
        let flag = frozen.clone();
        tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let Ok(server) = tokio::net::TcpStream::connect(&upstream).await else { continue };
                let ((client_read, client_write), (server_read, server_write)) =
                    (client.into_split(), server.into_split());
                for (mut from, mut to) in [(client_read, server_write), (server_read, client_write)] {
                    let flag = flag.clone();
                    tokio::spawn(async move {
                        let mut buf = vec![0u8; 16 * 1024];
                        while let Ok(n @ 1..) = from.read(&mut buf).await {
                            if flag.load(Ordering::Relaxed) {
                                // Frozen: hold the connection, silent, until the test ends.
                                std::future::pending::<()>().await;
                            }
                            if to.write_all(&buf[..n]).await.is_err() {
                                break;
                            }
                        }
                    });
                }
            }
        });
        SilentRelay { addr, frozen }
    }
}

/// A database host gone silent (its connections neither answer nor fail) makes `/readyz`
/// answer 503 within its bound, and `ctl status` says so promptly, instead of both waiting on
/// the pool.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_silent_database_makes_readyz_answer_within_its_bound() {
    use std::time::{Duration, Instant};
    let db = FreshDatabase::new().await;
    let upstream = db.server.split('@').nth(1).and_then(|h| h.split('/').next()).unwrap_or("127.0.0.1:5432");
    let relay = SilentRelay::new(upstream).await;
    let url = db.url.replacen(upstream, &relay.addr.to_string(), 1);
    let temp = tempfile::tempdir().unwrap();
    let s = ServerProcess::start_in(temp.path(), &["--database", &url]).await;
    let ready = || async {
        let started = Instant::now();
        let r = reqwest::get(format!("{}/readyz", s.url)).await.unwrap();
        (r.status().as_u16(), r.text().await.unwrap(), started.elapsed())
    };
    assert_eq!(ready().await.0, 200);
    relay.frozen.store(true, Ordering::Relaxed);
    let (status, text, took) = ready().await;
    assert_eq!((status, text.as_str()), (503, "store unavailable: no answer within 1 s\n"));
    assert!(took < Duration::from_millis(1_800), "{took:?}");
    let started = Instant::now();
    let out = s.ctl(&["status"]).await;
    let printed = String::from_utf8_lossy(&out.stdout);
    assert!(printed.starts_with("store     store unavailable: no answer within 1 s"), "{printed}");
    assert!(started.elapsed() < Duration::from_secs(5), "ctl status took {:?}", started.elapsed());
    s.kill9().await;
}
