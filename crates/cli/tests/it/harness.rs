//! Real processes for end-to-end tests: `vantage serve` on ephemeral ports with a temporary
//! data directory, killed when dropped.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use serde_json::Value;
use tokio::process::{Child, Command};

use crate::netlab::NetLab;

/// A `vantage serve` process.
pub(crate) struct ServerProcess {
    pub(crate) dir: PathBuf,
    pub(crate) url: String,
    pub(crate) token: String,
    child: Child,
    _temp: Option<tempfile::TempDir>,
}

impl ServerProcess {
    /// Starts a server on a fresh temporary data directory.
    pub(crate) async fn start() -> ServerProcess {
        Self::start_fresh(&[], None).await
    }

    /// Starts a server on a fresh temporary data directory that may fetch from loopback
    /// (`--allow-loopback-addresses`): for tests whose monitors or webhooks name 127.0.0.1.
    pub(crate) async fn start_lab() -> ServerProcess {
        Self::start_fresh(&["--allow-loopback-addresses"], None).await
    }

    /// Starts a server on `dir` with extra flags.
    pub(crate) async fn start_in(dir: &Path, extra: &[&str]) -> ServerProcess {
        Self::start_with(dir, extra, None).await
    }

    /// Starts a server on a fresh temporary data directory with at most `nofile` open files
    /// (soft and hard limit, set by `prlimit`, which then runs it in its own process).
    pub(crate) async fn start_with_nofile(nofile: u64) -> ServerProcess {
        Self::start_fresh(&[], Some(nofile)).await
    }

    async fn start_fresh(extra: &[&str], nofile: Option<u64>) -> ServerProcess {
        let temp = tempfile::tempdir().unwrap();
        let mut s = Self::start_with(temp.path(), extra, nofile).await;
        s._temp = Some(temp);
        s
    }

    async fn start_with(dir: &Path, extra: &[&str], nofile: Option<u64>) -> ServerProcess {
        let _ = std::fs::remove_file(dir.join("serve.json"));
        let log = std::fs::File::create(dir.with_extension("log")).unwrap();
        let mut command = match nofile {
            Some(n) => {
                let mut c = Command::new("prlimit");
                c.arg(format!("--nofile={n}:{n}")).arg("--").arg(env!("CARGO_BIN_EXE_vantage"));
                c
            }
            None => Command::new(env!("CARGO_BIN_EXE_vantage")),
        };
        command.args(["serve", "--data-dir"]).arg(dir);
        // Loopback ports for the listeners `extra` does not place: any for the API and the
        // channel; for DNS one `dig` is never given as its own source port (see `free_port`).
        for flag in ["--api-listen", "--agent-listen", "--dns-listen"] {
            if !extra.contains(&flag) {
                let port = if flag == "--dns-listen" { vantage_testkit::free_port().unwrap() } else { 0 };
                command.args([flag, &format!("127.0.0.1:{port}")]);
            }
        }
        let child = command
            .args(extra)
            .env_remove("VANTAGE_CONFIG")
            .stdout(Stdio::null())
            .stderr(log)
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        let started = Instant::now();
        let url = loop {
            if let Ok(text) = std::fs::read_to_string(dir.join("serve.json"))
                && let Ok(v) = serde_json::from_str::<Value>(&text)
            {
                break v["api"].as_str().unwrap().to_owned();
            }
            assert!(
                started.elapsed() < Duration::from_secs(20),
                "vantage serve did not start: {:?}",
                std::fs::read_to_string(dir.with_extension("log"))
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        };
        let token = std::fs::read_to_string(dir.join("admin-token")).unwrap().trim().to_owned();
        ServerProcess { dir: dir.to_owned(), url, token, child, _temp: None }
    }

    /// A request with the admin token.
    pub(crate) fn req(&self, method: reqwest::Method, path: &str) -> reqwest::RequestBuilder {
        reqwest::Client::new().request(method, format!("{}{path}", self.url)).bearer_auth(&self.token)
    }

    /// Posts the UI's login form with the admin token through `client` (which follows no
    /// redirect, to read the session cookie off the answer).
    /// `/metrics` as Prometheus reads it, with the admin token.
    pub(crate) async fn metrics(&self) -> String {
        self.req(reqwest::Method::GET, "/metrics").send().await.unwrap().text().await.unwrap()
    }

    pub(crate) async fn ui_login(&self, client: &reqwest::Client) -> reqwest::Response {
        client
            .post(format!("{}/ui/login", self.url))
            .header("origin", &self.url)
            .header("content-type", "application/x-www-form-urlencoded")
            .body(format!("token={}&next=%2Fui", self.token))
            .send()
            .await
            .unwrap()
    }

    /// Calls the API and returns (status, JSON body).
    pub(crate) async fn call(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<Value>,
    ) -> (u16, Value) {
        let mut r = self.req(method, path);
        if let Some(b) = body {
            r = r.json(&b);
        }
        let resp = r.send().await.unwrap();
        let status = resp.status().as_u16();
        let text = resp.text().await.unwrap();
        (
            status,
            if text.is_empty() {
                Value::Null
            } else {
                serde_json::from_str(&text).unwrap_or(Value::String(text))
            },
        )
    }

    /// POST that must succeed; returns the created object.
    pub(crate) async fn create(&self, path: &str, body: Value) -> Value {
        let (status, v) = self.call(reqwest::Method::POST, path, Some(body)).await;
        assert_eq!(status, 201, "{path}: {v}");
        v
    }

    /// The stored revisions of `cluster`, once they hold the one DNS serves: DNS takes a
    /// revision before the driver stores it, so the list trails what DNS answers a moment.
    pub(crate) async fn stored_revisions(&self, cluster: i64) -> Value {
        let (_, served) = self.call(reqwest::Method::GET, &format!("/v1/clusters/{cluster}/dns"), None).await;
        let n = served["revision"].as_i64();
        let path = format!("/v1/clusters/{cluster}/revisions");
        self.wait_for(&path, Duration::from_secs(5), |v| v["items"][0]["number"].as_i64() == n).await;
        self.call(reqwest::Method::GET, &path, None).await.1
    }

    /// `vantage ctl` against this server.
    pub(crate) async fn ctl(&self, args: &[&str]) -> std::process::Output {
        Command::new(env!("CARGO_BIN_EXE_vantage"))
            .arg("ctl")
            .args(args)
            .env("VANTAGE_DATA_DIR", &self.dir)
            .env_remove("VANTAGE_URL")
            .env_remove("VANTAGE_ADMIN_TOKEN")
            .kill_on_drop(true)
            .output()
            .await
            .unwrap()
    }

    /// `vantage ctl ARGS` left running (`events --follow`): what it prints so far is in the
    /// returned [`Printed`]; the process ends when that is dropped.
    pub(crate) fn ctl_running(&self, args: &[&str]) -> Printed {
        let mut child = Command::new(env!("CARGO_BIN_EXE_vantage"))
            .arg("ctl")
            .args(args)
            .env("VANTAGE_DATA_DIR", &self.dir)
            .env_remove("VANTAGE_URL")
            .env_remove("VANTAGE_ADMIN_TOKEN")
            .stdout(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        let mut stdout = child.stdout.take().unwrap();
        let text = std::sync::Arc::new(std::sync::Mutex::new(String::new()));
        let into = text.clone();
        tokio::spawn(async move {
            use tokio::io::AsyncReadExt;
            let mut buf = [0u8; 4096];
            while let Ok(n @ 1..) = stdout.read(&mut buf).await {
                into.lock().unwrap().push_str(&String::from_utf8_lossy(&buf[..n]));
            }
        });
        Printed { _child: child, text }
    }

    /// Stops the process with SIGTERM and waits.
    pub(crate) async fn stop(mut self) -> Option<tempfile::TempDir> {
        if let Some(pid) = self.child.id() {
            let _ = Command::new("kill").arg("-TERM").arg(pid.to_string()).status().await;
        }
        let _ = tokio::time::timeout(Duration::from_secs(10), self.child.wait()).await;
        self._temp.take()
    }

    /// Kills the process with SIGKILL (no chance to clean up).
    pub(crate) async fn kill9(mut self) -> Option<tempfile::TempDir> {
        let _ = self.child.start_kill();
        let _ = self.child.wait().await;
        self._temp.take()
    }
}

/// How an agent process is started beyond its arguments: through a wrapper command (`ip netns
/// exec NS`, to run it in a network namespace) and with extra environment variables.
#[derive(Debug, Clone, Default)]
pub(crate) struct Launch {
    pub(crate) wrapper: Vec<String>,
    pub(crate) env: Vec<(String, String)>,
}

/// A `vantage probe` (or `vantage agent`) process, killed when dropped.
pub(crate) struct AgentProcess {
    child: Child,
}

impl AgentProcess {
    /// Starts `vantage COMMAND --server SERVER --token TOKEN --ca-sha256 CA --state-dir STATE
    /// EXTRA…` (`probe` or `agent`) with its log in `log`.
    pub(crate) fn start(
        command: &str,
        server: &str,
        token: &str,
        ca: &str,
        state: &Path,
        extra: &[&str],
        log: &Path,
    ) -> AgentProcess {
        Self::start_in(&Launch::default(), command, server, token, ca, state, extra, log)
    }

    /// [`AgentProcess::start`] run through `launch`.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn start_in(
        launch: &Launch,
        command: &str,
        server: &str,
        token: &str,
        ca: &str,
        state: &Path,
        extra: &[&str],
        log: &Path,
    ) -> AgentProcess {
        let log = std::fs::File::create(log).unwrap();
        let mut cmd = match launch.wrapper.split_first() {
            Some((program, args)) => {
                let mut c = Command::new(program);
                c.args(args).arg(env!("CARGO_BIN_EXE_vantage"));
                c
            }
            None => Command::new(env!("CARGO_BIN_EXE_vantage")),
        };
        let child = cmd
            .envs(launch.env.iter().map(|(k, v)| (k, v)))
            .args([command, "--server", server, "--token", token, "--ca-sha256", ca, "--state-dir"])
            .arg(state)
            .args(extra)
            .env_remove("VANTAGE_CONFIG")
            .env("RUST_LOG", "info")
            .stdout(Stdio::null())
            .stderr(log)
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        AgentProcess { child }
    }

    /// Kills it and waits.
    pub(crate) async fn kill(mut self) {
        let _ = self.child.start_kill();
        let _ = self.child.wait().await;
    }

    /// Waits for it to exit, at most `limit`; the exit code.
    pub(crate) async fn wait(mut self, limit: Duration) -> Option<i32> {
        tokio::time::timeout(limit, self.child.wait()).await.ok()?.ok()?.code()
    }
}

impl ServerProcess {
    /// The agent channel URL and the CA fingerprint from `serve.json`.
    pub(crate) fn channel(&self) -> (String, String) {
        let v: Value =
            serde_json::from_str(&std::fs::read_to_string(self.dir.join("serve.json")).unwrap()).unwrap();
        (v["agent"].as_str().unwrap().to_owned(), v["ca_sha256"].as_str().unwrap().to_owned())
    }

    /// The process id (of `vantage serve` itself: `prlimit` runs it in its own process).
    pub(crate) fn pid(&self) -> u32 {
        self.child.id().unwrap()
    }

    /// The built-in DNS server's address from `serve.json`.
    pub(crate) fn dns(&self) -> std::net::SocketAddr {
        let v: Value =
            serde_json::from_str(&std::fs::read_to_string(self.dir.join("serve.json")).unwrap()).unwrap();
        v["dns"].as_str().unwrap().parse().unwrap()
    }

    /// Creates a prober token and starts `vantage probe` with a state directory under `dir`.
    pub(crate) async fn start_prober(&self, name: &str, region: i64, dir: &Path) -> AgentProcess {
        self.start_prober_via(&Launch::default(), name, region, dir, None).await
    }

    /// [`ServerProcess::start_prober`] run through `launch`, and pointed at `channel` (a load
    /// balancer in front of several servers) instead of this server's agent channel if given.
    pub(crate) async fn start_prober_via(
        &self,
        launch: &Launch,
        name: &str,
        region: i64,
        dir: &Path,
        channel: Option<&str>,
    ) -> AgentProcess {
        let (own, ca) = self.channel();
        let agent = channel.unwrap_or(&own);
        let t = self.create("/v1/probers/tokens", serde_json::json!({"name": name, "region": region})).await;
        let state = dir.join(name);
        AgentProcess::start_in(
            launch,
            "probe",
            agent,
            t["token"].as_str().unwrap(),
            &ca,
            &state,
            &["--hostname", name],
            &dir.join(format!("{name}.log")),
        )
    }

    /// Polls `GET path` until `f` accepts the body; returns the time it took.
    pub(crate) async fn wait_for(&self, path: &str, limit: Duration, f: impl Fn(&Value) -> bool) -> Duration {
        let started = Instant::now();
        loop {
            let (_, v) = self.call(reqwest::Method::GET, path, None).await;
            if f(&v) {
                return started.elapsed();
            }
            assert!(
                started.elapsed() < limit,
                "{path} did not reach the expected state within {limit:?}: {v}"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

/// `dig +short NAME A` against `server`: the answers, sorted.
pub(crate) async fn dig(server: std::net::SocketAddr, name: &str) -> Vec<String> {
    let out = Command::new("dig")
        .args([
            format!("@{}", server.ip()),
            "-p".into(),
            server.port().to_string(),
            name.into(),
            "A".into(),
            "+short".into(),
        ])
        .args(["+time=2", "+tries=1"])
        .output()
        .await
        .expect("dig (bind9-dnsutils) is installed");
    let mut v: Vec<String> = String::from_utf8_lossy(&out.stdout).lines().map(str::to_owned).collect();
    v.sort();
    v
}

/// The answers of every line in a `GET /v1/clusters/{id}/dns` body.
pub(crate) fn all_answers(v: &Value) -> Vec<String> {
    v["all"]
        .as_array()
        .map(|a| a.iter().map(|x| x.as_str().unwrap_or_default().to_owned()).collect())
        .unwrap_or_default()
}

/// The fleet of the end-to-end failover scenarios, set up through the admin API as an operator
/// would: `vantage serve` in lab mode with the fastest probe settings §3.3 allows; regions
/// ap-sg, eu-de, us-va; four edge HTTP servers on 127.0.0.N…N+3 sharing one port; cluster
/// `video` with that HTTP listener, group pop-1 (in ap-sg) and its default line; nodes edge-0
/// (primary .N, backup1 .N+1), edge-1 (.N+2) and edge-2 (.N+3); and three `vantage probe`
/// processes, one per region — returned once all three are online with a round done and the
/// DNS answers the three primaries.
pub(crate) struct LabFleet {
    pub(crate) s: ServerProcess,
    pub(crate) edges: Vec<vantage_testkit::EdgeServer>,
    /// The edges' port.
    pub(crate) port: u16,
    pub(crate) cluster: i64,
    pub(crate) nodes: Vec<i64>,
    pub(crate) probers: Vec<AgentProcess>,
    /// `/v1/clusters/{cluster}/dns`.
    pub(crate) dns_path: String,
    pub(crate) temp: tempfile::TempDir,
}

/// Where a [`LabFleet`] runs, beyond its domain.
#[derive(Default)]
pub(crate) struct LabSpec<'a> {
    /// The edges on 127.0.0.N…N+3 (`Loopback(N)`), or on the addresses of a [`NetLab`] whose
    /// namespace `i` runs prober `i` and whose address interface holds the agent channel.
    pub(crate) net: Place<'a>,
    /// The server's data directory (a mounted file system, say); by default one under the
    /// fleet's temporary directory.
    pub(crate) server_dir: Option<PathBuf>,
    /// Extra environment of each prober, by index.
    pub(crate) prober_env: [Vec<(String, String)>; 3],
    /// The server's `--database` (SQLite in its data directory when `None`).
    pub(crate) database: Option<String>,
    /// Where the server's agent channel listens (an ephemeral port when `None`).
    pub(crate) agent_listen: Option<std::net::SocketAddr>,
    /// The agent channel the probers are pointed at (a load balancer's) instead of the server's.
    pub(crate) channel: Option<String>,
}

/// Where a lab fleet's edges and probers are.
pub(crate) enum Place<'a> {
    Loopback(u8),
    Lab(&'a NetLab),
}

impl Default for Place<'_> {
    fn default() -> Self {
        Place::Loopback(10)
    }
}

impl LabFleet {
    pub(crate) async fn start(domain: &str, n: u8) -> LabFleet {
        Self::start_with(domain, LabSpec { net: Place::Loopback(n), ..LabSpec::default() }).await
    }

    pub(crate) async fn start_with(domain: &str, spec: LabSpec<'_>) -> LabFleet {
        use serde_json::json;
        let temp = tempfile::tempdir().unwrap();
        let server_dir = spec.server_dir.clone().unwrap_or_else(|| temp.path().join("server"));
        let agent_listen = match (spec.agent_listen, &spec.net) {
            (Some(a), _) => a.to_string(),
            (None, Place::Loopback(_)) => "127.0.0.1:0".to_owned(),
            (None, Place::Lab(lab)) => std::net::SocketAddr::new(lab.server_ip(), 0).to_string(),
        };
        let mut args = vec!["--allow-loopback-addresses", "--agent-listen", &agent_listen];
        if let Some(url) = &spec.database {
            args.extend(["--database", url]);
        }
        let s = ServerProcess::start_in(&server_dir, &args).await;
        let fastest = json!({"interval_s": 5, "timeout_ms": 1000, "attempts": 3,
                             "failing_before_unreachable_s": 5, "answering_before_reachable_s": 5});
        let (st, v) = s.call(reqwest::Method::PUT, "/v1/settings/probes", Some(fastest)).await;
        assert_eq!(st, 200, "{v}");
        let mut regions = Vec::new();
        for (code, name) in [("ap-sg", "Singapore"), ("eu-de", "Frankfurt"), ("us-va", "Virginia")] {
            let r = s.create("/v1/regions", json!({"code": code, "name": name})).await;
            regions.push(r["id"].as_i64().unwrap());
        }
        let port = vantage_testkit::free_port().unwrap();
        let ip = |i: u8| match spec.net {
            Place::Loopback(n) => std::net::IpAddr::from([127, 0, 0, n + i]),
            Place::Lab(lab) => lab.edge_ip(i),
        };
        let mut edges = Vec::new();
        for i in 0..4 {
            edges.push(vantage_testkit::EdgeServer::start((ip(i), port).into()).await.unwrap());
        }
        let listeners = json!([{"port": port, "protocol": "http"}]);
        let cluster = s
            .create("/v1/clusters", json!({"name": "video", "domain": domain, "listeners": listeners}))
            .await["id"]
            .as_i64()
            .unwrap();
        let groups = format!("/v1/clusters/{cluster}/groups");
        let group =
            s.create(&groups, json!({"name": "pop-1", "region": regions[0]})).await["id"].as_i64().unwrap();
        s.create(&format!("/v1/clusters/{cluster}/lines"), json!({"name": "default", "group": group})).await;
        let addresses = [
            json!([{"ip": ip(0), "level": "primary"}, {"ip": ip(1), "level": "backup1"}]),
            json!([{"ip": ip(2)}]),
            json!([{"ip": ip(3)}]),
        ];
        let mut nodes = Vec::new();
        for (i, a) in addresses.into_iter().enumerate() {
            let node = json!({"cluster": cluster, "group": group, "name": format!("edge-{i}")});
            let id = s.create("/v1/nodes", node).await["id"].as_i64().unwrap();
            let (st, v) = s.call(reqwest::Method::PUT, &format!("/v1/nodes/{id}/addresses"), Some(a)).await;
            assert_eq!(st, 200, "{v}");
            nodes.push(id);
        }
        let mut probers = Vec::new();
        for (i, (r, env)) in regions.iter().zip(spec.prober_env).enumerate() {
            let wrapper = match spec.net {
                Place::Loopback(_) => Vec::new(),
                Place::Lab(lab) => lab.wrapper(u8::try_from(i).unwrap()),
            };
            let launch = Launch { wrapper, env };
            let name = format!("prober-{i}");
            probers.push(s.start_prober_via(&launch, &name, *r, temp.path(), spec.channel.as_deref()).await);
        }
        s.wait_for("/v1/probers", Duration::from_secs(30), |v| {
            v["items"].as_array().is_some_and(|p| {
                p.len() == 3 && p.iter().all(|x| x["status"] == "online" && !x["last_round"].is_null())
            })
        })
        .await;
        let dns_path = format!("/v1/clusters/{cluster}/dns");
        let primaries: Vec<String> = [0, 2, 3].iter().map(|&i| ip(i).to_string()).collect();
        s.wait_for(&dns_path, Duration::from_secs(30), |v| all_answers(v) == primaries).await;
        LabFleet { s, edges, port, cluster, nodes, probers, dns_path, temp }
    }
}

/// Takes the write lock of the server's database from another connection, as another process
/// would, and keeps it until the returned connection is dropped or rolls back: the server's
/// writes wait out their busy timeout (10 s) and then fail.
pub(crate) async fn lock_storage(dir: &Path) -> sqlx::SqliteConnection {
    use sqlx::Connection;
    let url = format!("sqlite://{}", dir.join("vantage.db").display());
    let mut lock = sqlx::SqliteConnection::connect(&url).await.unwrap();
    sqlx::query("BEGIN EXCLUSIVE").execute(&mut lock).await.unwrap();
    lock
}

/// What a running `vantage ctl` printed so far.
pub(crate) struct Printed {
    _child: Child,
    text: std::sync::Arc<std::sync::Mutex<String>>,
}

impl Printed {
    pub(crate) fn text(&self) -> String {
        self.text.lock().unwrap().clone()
    }

    /// Waits until a printed line satisfies `f` and returns it; fails after `limit`.
    pub(crate) async fn line(&self, limit: Duration, f: impl Fn(&str) -> bool) -> String {
        let started = Instant::now();
        loop {
            if let Some(l) = self.text().lines().find(|l| f(l)) {
                return l.to_owned();
            }
            assert!(started.elapsed() < limit, "no such line within {limit:?}:\n{}", self.text());
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}
