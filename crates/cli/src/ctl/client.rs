//! The admin API over HTTP, answering the API's own types.

use anyhow::{Context, anyhow, bail};
use reqwest::Method;
use serde::de::DeserializeOwned;
use serde_json::Value;
use vantage_server::views::ErrorBody;

use super::args::Args;

/// A connection to one server with one admin token.
#[derive(Debug)]
pub(super) struct Client {
    base: String,
    token: String,
    http: reqwest::Client,
}

impl Client {
    /// The server and token from the flags, else from the local data directory.
    pub(super) fn connect(args: &Args) -> anyhow::Result<Client> {
        let base = match &args.server {
            Some(s) => s.trim_end_matches('/').to_owned(),
            None => {
                #[derive(serde::Deserialize)]
                struct ServeJson {
                    api: String,
                }
                let f = args.data_dir.join("serve.json");
                let text = std::fs::read_to_string(&f).with_context(|| {
                    format!(
                        "no --server given and cannot read {} (is `vantage serve` running here?)",
                        f.display()
                    )
                })?;
                serde_json::from_str::<ServeJson>(&text)
                    .map_err(|e| anyhow!("{} has no api address: {e}", f.display()))?
                    .api
            }
        };
        let token = match &args.token {
            Some(t) => t.clone(),
            None => {
                let f = args.data_dir.join("admin-token");
                std::fs::read_to_string(&f)
                    .with_context(|| format!("no --token given and cannot read {}", f.display()))?
                    .trim()
                    .to_owned()
            }
        };
        Ok(Client { base, token, http: reqwest::Client::new() })
    }

    /// Calls `path`; a refusal comes back as the server's field and reason.
    async fn raw(&self, method: Method, path: &str, body: Option<&Value>) -> anyhow::Result<String> {
        let mut req = self.http.request(method, format!("{}{path}", self.base)).bearer_auth(&self.token);
        if let Some(b) = body {
            req = req.json(b);
        }
        let resp = req.send().await.with_context(|| format!("cannot reach the server at {}", self.base))?;
        let status = resp.status();
        let text = resp.text().await?;
        if status.is_success() {
            return Ok(text);
        }
        match serde_json::from_str::<ErrorBody>(&text) {
            Ok(ErrorBody { error }) => match error.field {
                Some(f) => bail!("{f}: {} ({status})", error.reason),
                None => bail!("{} ({status})", error.reason),
            },
            Err(_) => bail!("{status}: {text}"),
        }
    }

    /// Calls `path` and reads the answer as a `T`.
    pub(super) async fn call<T: DeserializeOwned>(
        &self,
        method: Method,
        path: &str,
        body: Option<&Value>,
    ) -> anyhow::Result<T> {
        let text = self.raw(method.clone(), path, body).await?;
        serde_json::from_str(&text).with_context(|| format!("{method} {path}: unexpected answer"))
    }

    /// `GET path` as a `T`.
    pub(super) async fn get<T: DeserializeOwned>(&self, path: &str) -> anyhow::Result<T> {
        self.call(Method::GET, path, None).await
    }

    /// `DELETE path`.
    pub(super) async fn delete(&self, path: &str) -> anyhow::Result<()> {
        self.raw(Method::DELETE, path, None).await.map(drop)
    }
}
