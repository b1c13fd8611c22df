//! Starting and stopping the control plane: the data directory, the store, the first admin
//! token, the listeners and the background tasks.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use axum::extract::ConnectInfo;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use vantage_control::alerts::AlertBook;
use vantage_control::config::{Config, Row};
use vantage_control::observe::Latest;
use vantage_control::target::TargetKey;
use vantage_control::{Start, Timing};

use crate::app::{Actor, App, Parts};
use crate::ca::Ca;
use crate::config::ServeConfig;
use crate::listen::{HttpLimits, ListenerLimits};
use crate::metrics::Metrics;
use crate::support::write_private;

/// Why the server could not start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StartError {
    /// A file or directory of the data directory.
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        /// Cause.
        source: std::io::Error,
    },
    /// The store failed.
    #[error("store: {0}")]
    Store(#[from] vantage_store::Error),
    /// The store's database could not be opened (`database`, or SQLite in the data directory).
    #[error("database ({database}): {source}")]
    OpenStore {
        /// Which database, without a password.
        database: String,
        /// Cause.
        source: vantage_store::Error,
    },
    /// The stored configuration could not be read.
    #[error("stored configuration: {0}")]
    Config(String),
    /// The DNS server could not start.
    #[error("DNS: {0}")]
    Dns(String),
    /// The agent channel's CA could not be loaded or created.
    #[error("agent channel CA: {0}")]
    Ca(#[from] crate::ca::CaError),
    /// The admin API's TLS certificate or key could not be used.
    #[error("api_tls_cert / api_tls_key: {0}")]
    ApiTls(String),
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
    public_addr: Option<SocketAddr>,
    agent_addr: SocketAddr,
    ca_fingerprint: String,
    admin_token_file: Option<PathBuf>,
    /// Stops the listeners (API, agent channel) and the registry watch: everything that feeds
    /// the control core.
    stop: watch::Sender<bool>,
    tasks: Vec<JoinHandle<()>>,
    /// Stops the driver once those have ended, so that what their last requests decided is
    /// still carried out and saved; the saves task ends after the driver.
    stop_driver: watch::Sender<bool>,
    after: Vec<JoinHandle<()>>,
    /// Stops the evaluator lease's task last, once the driver has stored what it was handed:
    /// let go before, the revisions of the driver's last flush would be refused as no longer
    /// this replica's to store.
    stop_lease: watch::Sender<bool>,
    lease: JoinHandle<()>,
    delivery: JoinHandle<()>,
    dns: Option<vantage_dns::DnsServer>,
    dns_addr: SocketAddr,
}

/// Makes `file` readable and writable by its owner only (0600).
fn private_file(file: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(file, std::fs::Permissions::from_mode(0o600))
}

/// Makes `dir` readable by its owner only (0700).
fn private_dir(dir: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> StartError + '_ {
    move |source| StartError::Io { path: path.to_owned(), source }
}

impl Server {
    /// Opens the data directory and the store, creates the first admin token when there is
    /// none, binds the listeners and starts serving.
    pub async fn start(settings: ServeConfig) -> Result<Server, StartError> {
        let dir = settings.data_dir.clone();
        std::fs::create_dir_all(&dir).map_err(io(&dir))?;
        // The data directory holds the database (TSIG secrets, token hashes) and the CA's key:
        // the owner's only, whatever the umask.
        private_dir(&dir).map_err(io(&dir))?;
        let metrics = Arc::new(Metrics::new());
        let observer = metrics.clone();
        let delivery_metrics = metrics.clone();
        let database = settings.store();
        // `Display` of a database shows no password.
        tracing::info!(%database, "opening the store");
        let store = vantage_store::Store::open(&database)
            .await
            .map_err(|source| StartError::OpenStore { database: database.to_string(), source })?
            .with_observer(Arc::new(move |op, d| observer.store_op(op, d)));
        // SQLite gives its WAL and shared-memory files the database file's mode.
        for name in ["vantage.db", "vantage.db-wal", "vantage.db-shm"] {
            let path = dir.join(name);
            if path.exists() {
                private_file(&path).map_err(io(&path))?;
            }
        }
        // Where this replica stands in what the replicas share, read before what it loads.
        let (replica, relay) = crate::replicas::Replica::start(&store).await?.unzip();
        // The mirror registry's files as the replicas' APIs wrote them, before they are read.
        if let Some(r) = &replica {
            crate::replicas::put_files(&dir.join("mirrors"), &r.shared.logged_files().await?);
        }
        let objects = store.objects().await?;
        let config = Config::load(objects.iter().map(|r| Row {
            id: r.id,
            kind: &r.kind,
            name: &r.name,
            body: &r.body,
            created_at: r.created_at,
            updated_at: r.updated_at,
        }))
        .map_err(StartError::Config)?;
        // On a database several servers share, the CA is kept in it (an agent enrolled through
        // one server is known to all); embedded, it stays in the data directory.
        let ca = match store.replication() {
            Some(_) => Ca::shared(&store, &dir.join("ca")).await?,
            None => Ca::load_or_create(&dir.join("ca"))?,
        };
        private_dir(&dir.join("ca")).map_err(io(&dir.join("ca")))?;
        let mirrors_dir = dir.join("mirrors");
        std::fs::create_dir_all(&mirrors_dir).map_err(io(&mirrors_dir))?;
        let mut start = load(&store, config, &settings).await?;
        if replica.is_some() {
            // It decides for the fleet once it holds the evaluator lease.
            start.role = vantage_control::Role::Follower;
        }
        // Every listener's connection caps come out of the open-file limit.
        let limits = ListenerLimits::of(crate::listen::raise_nofile());
        // The agent channel is bound first: start commands name the port it really got.
        let agent_listener = tokio::net::TcpListener::bind(settings.agent_listen)
            .await
            .map_err(|source| StartError::Bind { addr: settings.agent_listen, source })?;
        let agent_addr = agent_listener
            .local_addr()
            .map_err(|source| StartError::Bind { addr: settings.agent_listen, source })?;
        let mut settings = settings;
        settings.agent_listen = agent_addr;
        // The HTTP listeners too, before the core starts: nothing fetched may reach them.
        let listener = tokio::net::TcpListener::bind(settings.api_listen)
            .await
            .map_err(|source| StartError::Bind { addr: settings.api_listen, source })?;
        let api_addr =
            listener.local_addr().map_err(|source| StartError::Bind { addr: settings.api_listen, source })?;
        let public = match settings.public_listen {
            Some(addr) => {
                let bound = crate::public::bind(addr).map_err(|source| StartError::Bind { addr, source })?;
                settings.public_listen = Some(bound.addr);
                Some(bound)
            }
            None => None,
        };
        let own = [Some(agent_addr), Some(api_addr), settings.public_listen].into_iter().flatten().collect();
        start.fetch = settings.fetch_policy(own);
        let relay_to = replica.as_ref().map(|r| (r.shared.clone(), r.origin.clone()));
        let (geo, geo_read) = crate::geo::read(&settings.geo_databases)
            .await
            .map_err(|e| StartError::Config(format!("geo_databases: {e}")))?;
        let (app, decided) =
            App::new(Parts { start, store, metrics, settings: settings.clone(), ca, replica });
        if let Some(e) = &app.view().mirrors.reload_status().error {
            app.metrics().mirror_reload_failed();
            tracing::error!(file = %e.file, field = %e.field, reason = %e.reason, "mirror registry refused at start; serving no mirrors until it is fixed");
        }
        app.set_geo(geo);
        crate::geo::warn_unplaced(&app);
        // DNS answers the stored revisions from its first query.
        crate::publishing::rebuild(app.answers(), app.dns(), &app.view().snapshots, app.geo());

        let mut admin_token_file = None;
        if app.config().admin_tokens.is_empty() {
            let path = dir.join("admin-token");
            let (_, token) = crate::api::create_admin_token(&app, &Actor::system(), "bootstrap", false)
                .await
                .map_err(|e| StartError::Config(e.to_string()))?;
            write_private(&path, &format!("{token}\n")).map_err(io(&path))?;
            tracing::info!(path = %path.display(), "first start: wrote the admin token");
            admin_token_file = Some(path);
        }

        let (stop, stopped) = watch::channel(false);
        let tls = api_tls(&settings, app.ca(), api_addr)?;
        let scheme = if tls.is_some() { "https" } else { "http" };
        let router = crate::api::router(app.clone());
        // A load balancer in front stands for many clients: only the total holds it.
        let gate =
            |l: HttpLimits| vantage_dns::listen::Gate::trusting(l.gate, settings.load_balancers.clone());
        let api_gate = gate(limits.api);
        let router = crate::listen::bounded(router, limits.api.deadline);
        // Doors map visitors to regions by their address.
        let service = move |peer| crate::listen::with_extension(router.clone(), ConnectInfo(peer));
        let api = tokio::spawn(serve_http(service, listener, tls, (limits.api, api_gate), stopped.clone()));
        tracing::info!(addr = %api_addr, "admin API listening");
        let mut tasks = vec![api];
        if let Some(bound) = public {
            let addr = bound.addr;
            let router = crate::listen::bounded(crate::api::public_router(app.clone()), limits.api.deadline);
            let served =
                crate::public::serve(bound, &app, router, limits.api, gate(limits.api), stopped.clone())
                    .map_err(|source| StartError::Bind { addr, source })?;
            tasks.push(served);
            tracing::info!(%addr, "public face listening (/go, /steer, /healthz)");
        }

        let (notices, notice_rx) = tokio::sync::mpsc::unbounded_channel();
        let channel_limits = (limits.channel, gate(limits.channel));
        let channel =
            tokio::spawn(crate::channel::serve(app.clone(), agent_listener, channel_limits, stopped.clone()));
        tracing::info!(addr = %agent_addr, ca_sha256 = %app.ca().fingerprint, "agent channel listening");
        // The writer of the driver's saves ends once the driver has ended (and dropped its
        // end), after writing what the driver handed over last.
        let (saves, writer) = crate::saves::queue();
        let (stop_driver, driver_stopped) = watch::channel(false);
        let driver =
            tokio::spawn(crate::driver::run(app.clone(), decided, notices, saves, driver_stopped.clone()));
        let saves = tokio::spawn(writer.run(app.store().clone()));
        let watcher = tokio::spawn(crate::mirrors::watch(app.clone(), stopped.clone()));
        tasks.push(tokio::spawn(crate::geo::watch(app.clone(), geo_read, stopped.clone())));
        let (stop_lease, lease_stopped) = watch::channel(false);
        let lease = tokio::spawn(crate::replicas::lease(app.clone(), lease_stopped));
        let follow = tokio::spawn(crate::replicas::follow(app.clone(), stopped.clone()));
        let mut after = vec![driver, saves];
        if let (Some((shared, origin)), Some(rx)) = (relay_to, relay) {
            after.push(tokio::spawn(crate::replicas::relay(shared, origin, rx, driver_stopped.clone())));
        }
        let dns_metrics = Arc::new(vantage_dns::DnsMetrics::new());
        app.metrics().register_dns(&dns_metrics);
        tasks.push(tokio::spawn(crate::demand::hand_over(app.clone(), dns_metrics.clone(), stopped.clone())));
        let dns_config = vantage_dns::DnsConfig {
            listen: settings.dns_listen,
            tcp_max_connections: limits.dns_tcp.total,
            tcp_max_per_source: limits.dns_tcp.per_source,
            ..vantage_dns::DnsConfig::default()
        };
        let dns = vantage_dns::DnsServer::start(dns_config, app.answers().clone(), dns_metrics)
            .map_err(|e| StartError::Dns(e.to_string()))?;
        let dns_addr = dns.local_addr();
        tracing::info!(addr = %dns_addr, "DNS listening (UDP and TCP)");
        let sinks_app = app.clone();
        let sinks = Arc::new(move || {
            sinks_app
                .config()
                .webhooks
                .values()
                .map(|w| vantage_control::alerts::Webhook::clone(&w.value))
                .collect()
        });
        let delivery = tokio::spawn(crate::alerts::deliver(
            notice_rx,
            sinks,
            delivery_metrics,
            app.fetch_policy().clone(),
        ));

        let local = |a: SocketAddr| {
            if a.ip().is_unspecified() { SocketAddr::from(([127, 0, 0, 1], a.port())) } else { a }
        };
        let mut info = serde_json::json!({
            "api": format!("{scheme}://{}", local(api_addr)),
            "agent": format!("https://{}", local(agent_addr)),
            "dns": local(dns_addr).to_string(),
            "ca_sha256": app.ca().fingerprint,
        });
        if let Some(public) = settings.public_listen {
            info["public"] = format!("http://{}", local(public)).into();
        }
        tasks.extend([channel, watcher, follow]);
        let serve_json = dir.join("serve.json");
        write_private(&serve_json, &info.to_string()).map_err(io(&serve_json))?;
        Ok(Server {
            api_addr,
            public_addr: settings.public_listen,
            agent_addr,
            ca_fingerprint: app.ca().fingerprint.clone(),
            admin_token_file,
            stop,
            tasks,
            stop_driver,
            after,
            stop_lease,
            lease,
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

    /// Where the public face listens, when it has a listener of its own.
    pub fn public_addr(&self) -> Option<SocketAddr> {
        self.public_addr
    }

    /// The admin token file written at first start, if this start wrote one.
    pub fn admin_token_file(&self) -> Option<&Path> {
        self.admin_token_file.as_deref()
    }

    /// Stops accepting, lets requests in flight finish, then stops the driver and waits for
    /// every task.
    pub async fn shutdown(mut self) {
        let _ = self.stop.send(true);
        for t in self.tasks {
            let _ = t.await;
        }
        let _ = self.stop_driver.send(true);
        for t in self.after {
            let _ = t.await;
        }
        let _ = self.stop_lease.send(true);
        let _ = self.lease.await;
        // Webhook deliveries in flight are abandoned at shutdown.
        self.delivery.abort();
        if let Some(dns) = self.dns.take() {
            // Joining the DNS threads blocks briefly.
            let _ = tokio::task::spawn_blocking(move || dns.shutdown()).await;
        }
    }
}

/// The admin API's TLS, when the settings ask for it: the operator's files, or a certificate
/// from the internal CA.
fn api_tls(
    settings: &ServeConfig,
    ca: &Ca,
    api_addr: SocketAddr,
) -> Result<Option<tokio_rustls::TlsAcceptor>, StartError> {
    let config = match (&settings.api_tls_cert, &settings.api_tls_key, settings.api_tls_internal) {
        (Some(cert), Some(key), false) => crate::ca::api_config_from_files(cert, key),
        (None, None, true) => {
            let mut names = vec!["localhost".to_owned(), "127.0.0.1".to_owned(), "::1".to_owned()];
            names.extend(crate::support::hostname());
            if !api_addr.ip().is_unspecified() && !api_addr.ip().is_loopback() {
                names.push(api_addr.ip().to_string());
            }
            names.retain(|n| !n.is_empty());
            names.dedup();
            ca.api_server_config(names)
        }
        (None, None, false) => return Ok(None),
        _ => {
            return Err(StartError::ApiTls(
                "give api_tls_cert and api_tls_key together, or api_tls_internal, not both".into(),
            ));
        }
    };
    let config = config.map_err(|e| StartError::ApiTls(e.to_string()))?;
    Ok(Some(tokio_rustls::TlsAcceptor::from(config)))
}

/// Serves HTTP on `listener` until `stop` (over TLS when `tls` is given), each connection
/// with the service `service` makes for its peer and within `limits`, then waits for the
/// connections to drain. The admin API and each thread of the public face run this.
pub(crate) async fn serve_http<F, S>(
    service: F,
    listener: tokio::net::TcpListener,
    tls: Option<tokio_rustls::TlsAcceptor>,
    (limits, gate): (HttpLimits, Arc<vantage_dns::listen::Gate>),
    mut stop: watch::Receiver<bool>,
) where
    F: Fn(SocketAddr) -> S,
    S: crate::listen::ConnectionService,
{
    let mut connections = tokio::task::JoinSet::new();
    loop {
        let (tcp, remote, admitted) = tokio::select! {
            a = vantage_dns::listen::accept(&listener, &gate, "api") => a,
            () = crate::support::stopped(&mut stop) => break,
        };
        let activity = vantage_dns::listen::Activity::default();
        let io = crate::listen::Watched::new(tcp, activity.clone());
        let svc = service(remote);
        let (stop, tls) = (stop.clone(), tls.clone());
        connections.spawn(async move {
            let _admitted = admitted;
            match tls {
                None => crate::listen::serve(io, activity, svc, limits, stop).await,
                Some(tls) => {
                    match tokio::time::timeout(crate::listen::HANDSHAKE_TIMEOUT, tls.accept(io)).await {
                        Ok(Ok(stream)) => crate::listen::serve(stream, activity, svc, limits, stop).await,
                        _ => tracing::debug!(%remote, "admin API TLS handshake failed or timed out"),
                    }
                }
            }
        });
        while connections.try_join_next().is_some() {}
    }
    while connections.join_next().await.is_some() {}
}

/// What the control core starts from: the stored results, evaluator states, newest revisions
/// and alert book. A state or book that no longer parses starts over (with a warning) rather
/// than stopping the start: the published records and the fleet's next reports rebuild it.
async fn load(
    store: &vantage_store::Store,
    config: Config,
    settings: &ServeConfig,
) -> Result<Start, StartError> {
    let latest = store
        .latest()
        .await?
        .into_iter()
        .filter_map(|r| {
            let key = r.target.parse::<TargetKey>().ok()?;
            let latest = Latest {
                at: r.at,
                sent: r.sent,
                lost: r.lost,
                rtt_us: r.rtt_us,
                error: r.error,
                register: r.register,
                hls: r.hls.map(Box::new),
                // Not stored: the next HTTPS round brings it back.
                cert_not_after: None,
                // Not stored: the next failing round brings it back.
                failed_at: None,
            };
            Some((r.prober, key, latest))
        })
        .collect();
    let states = crate::saves::saved_states(store.states("cluster:").await?);
    let revisions =
        store.latest_revisions().await?.into_iter().map(crate::replicas::stored_revision).collect();
    // An unreadable directory is a refused reload: the API says why, and the saved states
    // wait for a registry that loads.
    let (mirror_files, mirror_files_skipped) =
        match crate::mirrors::read_dir(settings.data_dir.join("mirrors")).await {
            Ok(files) => (files, Vec::new()),
            Err(skipped) => (Vec::new(), skipped),
        };
    let mirror_states =
        store.states("mirrors").await?.into_iter().find(|(k, _)| k == "mirrors").map(|(_, v)| v);
    let monitor_states =
        store.states("monitors").await?.into_iter().find(|(k, _)| k == "monitors").map(|(_, v)| v);
    let saved = store.states("availability").await?.into_iter().find(|(k, _)| k == "availability");
    let availability = saved.map_or_else(vantage_control::availability::Ledger::default, |(_, json)| {
        let (ledger, skipped) = vantage_control::availability::Ledger::restore(&json);
        for what in skipped {
            tracing::warn!(%what, "saved availability unreadable; left out");
        }
        ledger
    });
    let alerts =
        store.states("alerts").await?.into_iter().find(|(k, _)| k == "alerts").and_then(|(_, json)| {
            serde_json::from_str::<AlertBook>(&json)
                .map_err(|e| tracing::warn!(error = %e, "saved alerts unreadable; starting with none"))
                .ok()
        });
    Ok(Start {
        config,
        policy: vantage_core::address::AddressPolicy { allow_loopback: settings.allow_loopback_addresses },
        timing: Timing {
            evaluation_interval_s: settings.evaluation_interval_s,
            history_retention_days: settings.history_retention_days,
            certificate_warning_days: settings.certificate_warning_days,
        },
        latest,
        states,
        revisions,
        alerts,
        mirror_files,
        mirror_files_skipped,
        mirror_states,
        monitor_states,
        availability,
        last_event: u64::try_from(store.last_event().await?).unwrap_or(0),
        role: vantage_control::Role::Leader,
        // Completed once the listeners are bound (they are never fetched from).
        fetch: settings.fetch_policy(Vec::new()),
    })
}
