//! Starting and stopping the control plane: the data directory, the store, the first admin
//! token, the listeners and the background tasks.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use tokio::sync::watch;
use tokio::task::JoinHandle;

use std::time::Duration;

use crate::app::{Actor, App, Parts, now};
use crate::ca::Ca;
use crate::config::ServeConfig;
use crate::metrics::Metrics;
use crate::registry::Config;
use crate::runtime::{Latest, lock};

/// Why the server could not start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StartError {
    /// A file or directory of the data directory.
    #[error("{path}: {source}")]
    Io {
        /// Path.
        path: PathBuf,
        /// Cause.
        source: std::io::Error,
    },
    /// The store could not be opened.
    #[error("store: {0}")]
    Store(#[from] vantage_store::Error),
    /// The stored configuration could not be read.
    #[error("stored configuration: {0}")]
    Config(String),
    /// The DNS server could not start.
    #[error("DNS: {0}")]
    Dns(String),
    /// The agent channel's CA could not be loaded or created.
    #[error("agent channel CA: {0}")]
    Ca(#[from] crate::ca::CaError),
    /// A listener could not be bound.
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        /// Address.
        addr: SocketAddr,
        /// Cause.
        source: std::io::Error,
    },
}

/// A running control plane.
#[derive(Debug)]
pub struct Server {
    api_addr: SocketAddr,
    agent_addr: SocketAddr,
    ca_fingerprint: String,
    admin_token_file: Option<PathBuf>,
    stop: watch::Sender<bool>,
    tasks: Vec<JoinHandle<()>>,
    delivery: JoinHandle<()>,
    dns: Option<vantage_dns::DnsServer>,
    dns_addr: SocketAddr,
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> StartError + '_ {
    move |source| StartError::Io { path: path.to_owned(), source }
}

/// Writes `text` to `path` readable by the owner only.
pub(crate) fn write_private(path: &Path, text: &str) -> Result<(), StartError> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)
        .map_err(io(path))?;
    f.write_all(text.as_bytes()).map_err(io(path))
}

impl Server {
    /// Opens the data directory and the store, creates the first admin token when there is
    /// none, binds the listeners and starts serving.
    pub async fn start(settings: ServeConfig) -> Result<Server, StartError> {
        let dir = settings.data_dir.clone();
        std::fs::create_dir_all(&dir).map_err(io(&dir))?;
        let metrics = Arc::new(Metrics::new());
        let observer = metrics.clone();
        let store = vantage_store::Store::open_sqlite(&dir.join("vantage.db"))
            .await?
            .with_observer(Arc::new(move |op, d| observer.store_op(op, d)));
        let config = Config::load(&store.objects().await?).map_err(StartError::Config)?;
        let ca = Ca::load_or_create(&dir.join("ca"))?;
        let (triggers, trigger_rx) = tokio::sync::mpsc::unbounded_channel();
        let (notices, notice_rx) = tokio::sync::mpsc::unbounded_channel();
        let latest = store.latest().await?;
        let saved_alerts = store.states("alerts").await?;
        // The agent channel is bound first: start commands name the port it really got.
        let agent_listener = tokio::net::TcpListener::bind(settings.agent_listen)
            .await
            .map_err(|source| StartError::Bind { addr: settings.agent_listen, source })?;
        let agent_addr = agent_listener
            .local_addr()
            .map_err(|source| StartError::Bind { addr: settings.agent_listen, source })?;
        let mut settings = settings;
        settings.agent_listen = agent_addr;
        let app = Arc::new(App::new(Parts {
            config,
            store,
            metrics,
            settings: settings.clone(),
            ca,
            triggers,
            notices,
        }));
        if let Some((_, json)) = saved_alerts.first() {
            app.alerts.restore(json);
        }
        {
            let mut results = lock(&app.runtime.results);
            for r in &latest {
                results.entry(r.target.clone()).or_default().insert(r.prober, Latest::from(r));
            }
        }

        let mut admin_token_file = None;
        if app.config().admin_tokens.is_empty() {
            let path = dir.join("admin-token");
            let (_, token) = crate::api::create_admin_token(&app, &Actor::system(), "bootstrap")
                .await
                .map_err(|e| StartError::Config(e.to_string()))?;
            write_private(&path, &format!("{token}\n"))?;
            tracing::info!(path = %path.display(), "first start: wrote the admin token");
            admin_token_file = Some(path);
        }

        let (stop, stopped) = watch::channel(false);
        let listener = tokio::net::TcpListener::bind(settings.api_listen)
            .await
            .map_err(|source| StartError::Bind { addr: settings.api_listen, source })?;
        let api_addr =
            listener.local_addr().map_err(|source| StartError::Bind { addr: settings.api_listen, source })?;
        let router = crate::api::router(app.clone());
        let mut api_stopped = stopped.clone();
        let api = tokio::spawn(async move {
            let serve = axum::serve(listener, router).with_graceful_shutdown(async move {
                let _ = api_stopped.wait_for(|s| *s).await;
            });
            if let Err(e) = serve.await {
                tracing::error!(error = %e, "admin API stopped");
            }
        });
        tracing::info!(addr = %api_addr, "admin API listening");

        let channel = tokio::spawn(crate::channel::serve(app.clone(), agent_listener, stopped.clone()));
        tracing::info!(addr = %agent_addr, ca_sha256 = %app.ca.fingerprint, "agent channel listening");
        // The evaluator loads the published records first, so DNS answers from its first query.
        let (loaded_tx, loaded_rx) = tokio::sync::oneshot::channel();
        let evaluator =
            tokio::spawn(crate::evaluator::run(app.clone(), trigger_rx, stopped.clone(), loaded_tx));
        let _ = loaded_rx.await;
        let dns_metrics = Arc::new(vantage_dns::DnsMetrics::new());
        app.metrics.register_dns(&dns_metrics);
        let dns_config =
            vantage_dns::DnsConfig { listen: settings.dns_listen, ..vantage_dns::DnsConfig::default() };
        let dns = vantage_dns::DnsServer::start(dns_config, app.answers.clone(), dns_metrics)
            .map_err(|e| StartError::Dns(e.to_string()))?;
        let dns_addr = dns.local_addr();
        tracing::info!(addr = %dns_addr, "DNS listening (UDP and TCP)");
        let upkeep = tokio::spawn(maintenance(app.clone(), stopped.clone()));
        let sinks_app = app.clone();
        let sinks = Arc::new(move || sinks_app.config().webhooks.values().map(|w| w.value.clone()).collect());
        let delivery = tokio::spawn(crate::alerts::deliver(notice_rx, sinks));
        let saver = tokio::spawn(save_alerts(app.clone(), stopped.clone()));

        let local = |a: SocketAddr| {
            if a.ip().is_unspecified() { SocketAddr::from(([127, 0, 0, 1], a.port())) } else { a }
        };
        let info = serde_json::json!({
            "api": format!("http://{}", local(api_addr)),
            "agent": format!("https://{}", local(agent_addr)),
            "dns": local(dns_addr).to_string(),
            "ca_sha256": app.ca.fingerprint,
        });
        write_private(&dir.join("serve.json"), &info.to_string())?;
        Ok(Server {
            api_addr,
            agent_addr,
            ca_fingerprint: app.ca.fingerprint.clone(),
            admin_token_file,
            stop,
            tasks: vec![api, channel, evaluator, upkeep, saver],
            delivery,
            dns: Some(dns),
            dns_addr,
        })
    }

    /// Where the DNS server listens.
    pub fn dns_addr(&self) -> SocketAddr {
        self.dns_addr
    }

    /// Where the agent channel listens.
    pub fn agent_addr(&self) -> SocketAddr {
        self.agent_addr
    }

    /// SHA-256 of the agent channel's CA certificate.
    pub fn ca_fingerprint(&self) -> &str {
        &self.ca_fingerprint
    }

    /// Where the admin API listens.
    pub fn api_addr(&self) -> SocketAddr {
        self.api_addr
    }

    /// The admin token file written at first start, if this start wrote one.
    pub fn admin_token_file(&self) -> Option<&Path> {
        self.admin_token_file.as_deref()
    }

    /// Stops accepting, lets requests in flight finish, and waits for every task.
    pub async fn shutdown(mut self) {
        let _ = self.stop.send(true);
        for t in self.tasks {
            let _ = t.await;
        }
        // Webhook deliveries in flight are abandoned at shutdown.
        self.delivery.abort();
        if let Some(dns) = self.dns.take() {
            // Joining the DNS threads blocks briefly.
            let _ = tokio::task::spawn_blocking(move || dns.shutdown()).await;
        }
    }
}

/// Saves the alert book when it changes (at most once a second).
async fn save_alerts(app: Arc<App>, mut stop: watch::Receiver<bool>) {
    loop {
        tokio::select! {
            _ = app.alerts.changed() => {}
            _ = crate::app::stopped(&mut stop) => return,
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
        if let Err(e) = app.store.put_state("alerts", &app.alerts.snapshot(), now()).await {
            tracing::warn!(error = %e, "cannot save alerts");
        }
    }
}

/// Alerts about silence: an enabled prober that has not asked or reported within its online
/// window, an enrolled node agent without a heartbeat within 3 × 15 s. Nothing fires during
/// the first window after a start, when no one has had a chance to call yet.
fn silence(app: &App) {
    let c = app.config();
    let at = now();
    let window = c.settings.prober_online_s();
    if !at.at_least_secs_after(app.started, window) {
        return;
    }
    let probers = lock(&app.runtime.probers);
    for (id, p) in &c.probers {
        let key = format!("prober_offline/prober:{id}");
        let seen = probers.get(id).and_then(|r| r.last_seen);
        if p.value.enabled && !seen.is_some_and(|t| t.within_secs_of(at, window)) {
            let summary = format!("prober {} is offline", p.value.name);
            app.alerts.fire(
                key,
                "prober_offline",
                summary,
                serde_json::json!({"prober": p.value.name, "last_seen": seen}),
            );
        } else {
            app.alerts.resolve(&key);
        }
    }
    drop(probers);
    let nodes = lock(&app.runtime.nodes);
    for (id, n) in &c.nodes {
        let key = format!("node_offline/node:{id}");
        let seen = nodes.get(id).and_then(|r| r.last_heartbeat);
        let online = seen.is_some_and(|t| t.within_secs_of(at, vantage_core::evaluate::AGENT_ONLINE_S));
        if n.value.cert_sha256.is_some() && n.value.node.enabled && !online {
            let summary = format!("node {} is offline (no heartbeat)", n.value.node.name);
            app.alerts.fire(
                key,
                "node_offline",
                summary,
                serde_json::json!({"node": n.value.node.name, "last_heartbeat": seen}),
            );
        } else {
            app.alerts.resolve(&key);
        }
    }
}

/// Housekeeping: silence alerts (every 10 s); latest results not updated for an hour are
/// deleted (every minute); history older than the retention is rolled up per day and deleted
/// (every hour).
async fn maintenance(app: Arc<App>, mut stop: watch::Receiver<bool>) {
    let mut tick = tokio::time::interval(Duration::from_secs(10));
    let mut ticks = 0u64;
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            _ = crate::app::stopped(&mut stop) => return,
        }
        silence(&app);
        ticks += 1;
        if ticks % 6 != 1 {
            continue;
        }
        let at = now();
        let hour_ago = at.plus_millis(-3_600_000);
        let dropped = app.runtime.expire(hour_ago);
        if let Err(e) = app.store.delete_latest_before(hour_ago).await {
            tracing::warn!(error = %e, "cannot expire latest results");
        } else if dropped > 0 {
            tracing::info!(dropped, "expired latest results not updated for an hour");
        }
        if ticks % 360 == 1 {
            let cutoff = at
                .plus_millis(-i64::try_from(app.settings.history_retention_days).unwrap_or(14) * 86_400_000);
            match app.store.roll_up_history(cutoff).await {
                Ok(n) if n > 0 => tracing::info!(rows = n, "rolled up history"),
                Ok(_) => {}
                Err(e) => tracing::warn!(error = %e, "cannot roll up history"),
            }
            if let Err(e) = app.store.delete_daily_before(cutoff.plus_millis(-366 * 86_400_000)).await {
                tracing::warn!(error = %e, "cannot delete old daily roll-ups");
            }
        }
    }
}
