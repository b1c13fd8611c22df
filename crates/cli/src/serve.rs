//! `vantage serve`: settings from a TOML file, `VANTAGE_*` variables and flags (in rising
//! precedence), structured logs, and a graceful stop on SIGINT or SIGTERM.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use vantage_server::{LogFormat, ServeConfig, Server};

/// Flags of `vantage serve`; each overrides the file and the environment.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// TOML settings file.
    #[arg(long, env = "VANTAGE_CONFIG")]
    config: Option<PathBuf>,
    /// Data directory (database, CA, admin token) [default: ./vantage-data].
    #[arg(long)]
    data_dir: Option<String>,
    /// PostgreSQL database URL (postgres://user:password@host:port/name) instead of SQLite in
    /// the data directory.
    #[arg(long, value_name = "URL")]
    database: Option<String>,
    /// Admin API and UI address [default: 127.0.0.1:8080].
    #[arg(long)]
    api_listen: Option<String>,
    /// The public face's own address: `/go`, `/steer` and `/healthz` only (unset: the admin
    /// address serves them too).
    #[arg(long)]
    public_listen: Option<String>,
    /// Origins whose players may read /steer from a page (CORS), comma-separated [default: *].
    #[arg(long, value_name = "ORIGIN,…")]
    steering_origins: Option<String>,
    /// Serve /metrics without an admin token.
    #[arg(long)]
    metrics_public: bool,
    /// Agent channel address [default: 0.0.0.0:8443].
    #[arg(long)]
    agent_listen: Option<String>,
    /// DNS address, UDP and TCP [default: 0.0.0.0:8053].
    #[arg(long)]
    dns_listen: Option<String>,
    /// The agent channel URL probers and agents use [default: https://<host>:<agent port>].
    #[arg(long)]
    agent_url: Option<String>,
    /// Log format: text or json.
    #[arg(long)]
    log_format: Option<String>,
    /// Log filter, like `info` or `vantage_server=debug,info`.
    #[arg(long)]
    log_level: Option<String>,
    /// Accept loopback scheduling addresses, and let probers fetch from loopback (labs and
    /// demos on one machine).
    #[arg(long)]
    allow_loopback_addresses: bool,
    /// Networks probers and the server may fetch from although the fetch policy refuses
    /// their class (link-local, multicast…), comma-separated.
    #[arg(long, value_name = "CIDR,…")]
    allow_networks: Option<String>,
    /// Serve the admin API and UI over TLS with this certificate chain (PEM) …
    #[arg(long, value_name = "FILE", requires = "api_tls_key")]
    api_tls_cert: Option<String>,
    /// … and this private key (PEM).
    #[arg(long, value_name = "FILE", requires = "api_tls_cert")]
    api_tls_key: Option<String>,
    /// Serve the admin API and UI over TLS with a certificate from the internal CA
    /// (clients trust <data_dir>/ca/ca.pem).
    #[arg(long, conflicts_with = "api_tls_cert")]
    api_tls_internal: bool,
    /// Networks of TCP load balancers in front of the API and the agent channel, comma-separated
    /// (their connections are not held to the per-source limit).
    #[arg(long, value_name = "CIDR,…")]
    load_balancers: Option<String>,
    /// MaxMind DB files placing clients by country, continent and AS, comma-separated (read
    /// again when they change).
    #[arg(long, value_name = "FILE,…")]
    geo_databases: Option<String>,
}

impl Args {
    fn flags(&self) -> BTreeMap<&'static str, String> {
        let mut f = BTreeMap::new();
        let pairs = [
            ("data_dir", &self.data_dir),
            ("database", &self.database),
            ("api_listen", &self.api_listen),
            ("public_listen", &self.public_listen),
            ("allow_networks", &self.allow_networks),
            ("steering_origins", &self.steering_origins),
            ("agent_listen", &self.agent_listen),
            ("dns_listen", &self.dns_listen),
            ("agent_url", &self.agent_url),
            ("log_format", &self.log_format),
            ("log_level", &self.log_level),
            ("api_tls_cert", &self.api_tls_cert),
            ("api_tls_key", &self.api_tls_key),
            ("load_balancers", &self.load_balancers),
            ("geo_databases", &self.geo_databases),
        ];
        for (k, v) in pairs {
            if let Some(v) = v {
                f.insert(k, v.clone());
            }
        }
        if self.allow_loopback_addresses {
            f.insert("allow_loopback_addresses", "true".into());
        }
        if self.api_tls_internal {
            f.insert("api_tls_internal", "true".into());
        }
        if self.metrics_public {
            f.insert("metrics_public", "true".into());
        }
        f
    }
}

/// Reads the settings the way `serve` does (also used by `demo`).
pub(crate) fn settings(args: &Args) -> anyhow::Result<ServeConfig> {
    let file = match &args.config {
        Some(p) => Some((
            p.display().to_string(),
            std::fs::read_to_string(p).with_context(|| format!("cannot read {}", p.display()))?,
        )),
        None => None,
    };
    let env: BTreeMap<String, String> = std::env::vars().filter(|(k, _)| k.starts_with("VANTAGE_")).collect();
    Ok(ServeConfig::load(file.as_ref().map(|(n, t)| (n.as_str(), t.as_str())), &env, &args.flags())?)
}

/// Sets up logging for a long-running process: colours only on a terminal (a file, a pipe or
/// journald gets plain text).
pub(crate) fn init_logs(format: LogFormat, level: &str) {
    use std::io::IsTerminal;
    let filter = tracing_subscriber::EnvFilter::try_new(level)
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal());
    match format {
        LogFormat::Text => builder.init(),
        LogFormat::Json => builder.json().init(),
    }
}

/// Resolves when SIGINT or SIGTERM arrives.
pub(crate) async fn stop_signal() {
    let mut term = match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
        Ok(s) => s,
        Err(e) => {
            tracing::warn!(error = %e, "cannot watch SIGTERM; stopping on Ctrl-C only");
            let _ = tokio::signal::ctrl_c().await;
            return;
        }
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term.recv() => {}
    }
}

pub(crate) fn run(args: Args) -> anyhow::Result<ExitCode> {
    let settings = settings(&args)?;
    init_logs(settings.log_format, &settings.log_level);
    let rt = tokio::runtime::Runtime::new()?;
    rt.block_on(async {
        let server = Server::start(settings).await?;
        stop_signal().await;
        tracing::info!("stopping");
        server.shutdown().await;
        Ok(ExitCode::SUCCESS)
    })
}
