//! The admin API over HTTP, answering the API's own types.

use std::fmt;

use anyhow::{Context, anyhow, bail};
use reqwest::header::{CONTENT_TYPE, RETRY_AFTER};
use reqwest::{Method, RequestBuilder, StatusCode};
use serde::de::DeserializeOwned;
use serde_json::Value;
use vantage_server::views::{ErrorBody, ErrorDetail};

use super::args::Args;

/// A connection to one server with one admin token.
#[derive(Debug)]
pub(super) struct Client {
    base: String,
    token: String,
    http: reqwest::Client,
}

/// An HTTP client that also trusts the server's internal CA when the data directory holds it
/// (an admin API served with `api_tls_internal`).
fn http_client(data_dir: &std::path::Path) -> anyhow::Result<reqwest::Client> {
    let mut builder = reqwest::Client::builder();
    if let Ok(pem) = std::fs::read(data_dir.join("ca").join("ca.pem")) {
        let ca = reqwest::Certificate::from_pem(&pem).map_err(|e| anyhow!("the internal CA: {e}"))?;
        builder = builder.add_root_certificate(ca);
    }
    builder.build().map_err(|e| anyhow!("HTTP client: {e}"))
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
        Ok(Client { base, token, http: http_client(&args.data_dir)? })
    }

    /// The event stream of this server, with filters (`cluster=3`).
    pub(super) fn source(&self, query: String) -> crate::follow::Source {
        crate::follow::Source {
            http: self.http.clone(),
            base: self.base.clone(),
            token: self.token.clone(),
            query,
        }
    }

    fn request(&self, method: Method, path: &str) -> RequestBuilder {
        self.http.request(method, format!("{}{path}", self.base)).bearer_auth(&self.token)
    }

    /// Sends `req`; a refusal in the API's error body comes back as a [`Refusal`].
    async fn send(&self, req: RequestBuilder) -> anyhow::Result<String> {
        let resp = req.send().await.with_context(|| format!("cannot reach the server at {}", self.base))?;
        let status = resp.status();
        let retry_after_s =
            resp.headers().get(RETRY_AFTER).and_then(|v| v.to_str().ok()).and_then(|v| v.parse().ok());
        let text = resp.text().await?;
        if status.is_success() {
            return Ok(text);
        }
        match serde_json::from_str::<ErrorBody>(&text) {
            Ok(ErrorBody { error }) => Err(Refusal { status, error, retry_after_s }.into()),
            Err(_) => bail!("{status}: {text}"),
        }
    }

    /// Calls `path` with a JSON body.
    async fn raw(&self, method: Method, path: &str, body: Option<&Value>) -> anyhow::Result<String> {
        let mut req = self.request(method, path);
        if let Some(b) = body {
            req = req.json(b);
        }
        self.send(req).await
    }

    /// `PUT path` with a YAML (or JSON) document as it is, for the server to read and judge.
    pub(super) async fn put_document<T: DeserializeOwned>(
        &self,
        path: &str,
        text: String,
    ) -> anyhow::Result<T> {
        let req = self.request(Method::PUT, path).header(CONTENT_TYPE, "application/yaml").body(text);
        let answer = self.send(req).await?;
        serde_json::from_str(&answer).with_context(|| format!("PUT {path}: unexpected answer"))
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

    /// What `/readyz` says when the server is not ready (its store is away), `None` when it is.
    pub(super) async fn unready(&self) -> anyhow::Result<Option<String>> {
        let resp = self.request(Method::GET, "/readyz").send().await;
        let resp = resp.with_context(|| format!("cannot reach the server at {}", self.base))?;
        let ready = resp.status().is_success();
        let text = resp.text().await?;
        Ok((!ready).then(|| text.trim().to_owned()))
    }

    /// `DELETE path`.
    pub(super) async fn delete(&self, path: &str) -> anyhow::Result<()> {
        self.raw(Method::DELETE, path, None).await.map(drop)
    }
}

/// The server refused a request: its status and error body, and when a 429 may be retried.
#[derive(Debug)]
pub(super) struct Refusal {
    pub(super) status: StatusCode,
    error: ErrorDetail,
    /// The `Retry-After` header, in seconds.
    pub(super) retry_after_s: Option<u64>,
}

impl Refusal {
    /// The field the server names, if any.
    pub(super) fn field(&self) -> Option<&str> {
        self.error.field.as_deref()
    }

    /// Why, in the server's words.
    pub(super) fn reason(&self) -> &str {
        &self.error.reason
    }
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.error.field {
            Some(field) => write!(f, "{field}: {} ({})", self.error.reason, self.status),
            None => write!(f, "{} ({})", self.error.reason, self.status),
        }
    }
}

impl std::error::Error for Refusal {}
