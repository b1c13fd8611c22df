//! Starting and stopping the control plane: the data directory, the store, the first admin
//! token, the listeners and the background tasks.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::app::{Actor, App};
use crate::config::ServeConfig;
use crate::metrics::Metrics;
use crate::registry::Config;

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
    admin_token_file: Option<PathBuf>,
    stop: watch::Sender<bool>,
    tasks: Vec<JoinHandle<()>>,
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> StartError + '_ {
    move |source| StartError::Io { path: path.to_owned(), source }
}

/// Writes `text` to `path` readable by the owner only.
fn write_private(path: &Path, text: &str) -> Result<(), StartError> {
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
        let app = Arc::new(App::new(config, store, metrics, settings.clone()));

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
        write_private(
            &dir.join("serve.json"),
            &serde_json::json!({ "api": format!("http://{api_addr}") }).to_string(),
        )?;
        Ok(Server { api_addr, admin_token_file, stop, tasks: vec![api] })
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
    pub async fn shutdown(self) {
        let _ = self.stop.send(true);
        for t in self.tasks {
            let _ = t.await;
        }
    }
}
