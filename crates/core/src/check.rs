//! How a target is probed (§3.1): the method and its Varnish-style attributes, and the
//! listeners of a cluster.

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result, at_most, in_range};

/// One probe method.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum Method {
    /// Open a TCP connection and close it.
    Tcp,
    /// `GET <path>` with `Host: <host>`; good when the status is the expected one.
    Http,
    /// TLS with SNI = host (certificate verified only when the check says `verify`), then as
    /// `http`.
    Https,
    /// An HLS manifest, its newest media segment and that segment's age.
    Hls,
}

impl Method {
    /// The API name.
    pub fn as_str(self) -> &'static str {
        match self {
            Method::Tcp => "tcp",
            Method::Http => "http",
            Method::Https => "https",
            Method::Hls => "hls",
        }
    }
}

impl fmt::Display for Method {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for Method {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        match s {
            "tcp" => Ok(Method::Tcp),
            "http" => Ok(Method::Http),
            "https" => Ok(Method::Https),
            "hls" => Ok(Method::Hls),
            _ => Err(Error::invalid("method", format!("must be tcp, http, https or hls, got {s:?}"))),
        }
    }
}

/// The protocol of a cluster listener.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum Protocol {
    /// Plain HTTP: probed with `http`.
    Http,
    /// HTTP over TLS: probed with `https`.
    Https,
    /// Any TCP service: probed with `tcp`.
    Tcp,
}

impl Protocol {
    /// The probe method for a listener of this protocol.
    pub fn method(self) -> Method {
        match self {
            Protocol::Http => Method::Http,
            Protocol::Https => Method::Https,
            Protocol::Tcp => Method::Tcp,
        }
    }
}

/// A listener of a cluster: what every node serves on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct Listener {
    /// TCP port (1–65535).
    pub port: u16,
    pub protocol: Protocol,
    /// Whether the listener requires a PROXY v1 header first.
    #[serde(default)]
    pub proxy_protocol: bool,
}

/// Default health path of cluster checks.
pub const DEFAULT_PATH: &str = "/.vantage/health";
/// Default `Host` and SNI of cluster checks.
pub const DEFAULT_HOST: &str = "health.vantage.invalid";

/// A validated check. Build with [`Check::parse`] or deserialise (which validates).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(try_from = "CheckInput", into = "CheckInput")]
pub struct Check {
    method: Option<Method>,
    path: String,
    host: String,
    request: Vec<String>,
    expected_response: u16,
    expect_close: bool,
    timeout_ms: u32,
    interval_s: u32,
    window: u8,
    threshold: u8,
    initial: u8,
    max_age_s: Option<u32>,
    block_pattern: Option<String>,
    block_statuses: Vec<u16>,
    verify: bool,
}

/// Block statuses a check may name at most: a block page has a handful of statuses, not a
/// range.
pub const MAX_BLOCK_STATUSES: usize = 16;

/// A check as entered; every attribute is optional (the Varnish probe model).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(utoipa::ToSchema))]
#[serde(default, deny_unknown_fields)]
pub struct CheckInput {
    /// Method; for cluster targets the listener's protocol decides when absent.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub method: Option<Method>,
    /// Path of the request (`url` in Varnish), `/.vantage/health` by default.
    #[serde(skip_serializing_if = "Option::is_none", alias = "url")]
    pub path: Option<String>,
    /// `Host` header and TLS SNI, `health.vantage.invalid` by default.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
    /// Raw request lines, sent as written: each line's bytes followed by CRLF, then the CRLF
    /// that ends the head. A line holds no CR or LF. Must include `Connection: close`.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub request: Vec<String>,
    /// Expected status (200).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub expected_response: Option<u16>,
    /// Whether the peer is expected to close the connection (true).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub expect_close: Option<bool>,
    /// Timeout per attempt, ms (2000 for named checks; cluster targets use the probe settings).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub timeout_ms: Option<u32>,
    /// Seconds between attempts of endpoint checks (5).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub interval_s: Option<u32>,
    /// Attempts considered (8, at most 64).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub window: Option<u8>,
    /// Good attempts within the window needed to be healthy (3).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub threshold: Option<u8>,
    /// Good attempts assumed when a target is first seen (threshold − 1).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub initial: Option<u8>,
    /// `hls`: the newest segment is stale when older than this, s.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_age_s: Option<u32>,
    /// A text whose presence in a response body marks a block page (`blocked-inferred`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub block_pattern: Option<String>,
    /// HTTP statuses that mark a block page (`blocked-inferred`), such as 403 or 451: a mirror
    /// answering one of them is blocked there, whatever its body (none: every status is an
    /// answer; at most 16, each 100–599).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub block_statuses: Vec<u16>,
    /// TLS targets: verify the certificate against the host name and the prober's trusted
    /// roots (false: any certificate is accepted, as health endpoints often have
    /// self-signed ones). A failed verification is a `tls` error.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub verify: Option<bool>,
}

impl TryFrom<CheckInput> for Check {
    type Error = Error;
    fn try_from(i: CheckInput) -> Result<Self> {
        Check::parse(i)
    }
}

impl From<Check> for CheckInput {
    fn from(c: Check) -> Self {
        CheckInput {
            method: c.method,
            path: Some(c.path),
            host: Some(c.host),
            request: c.request,
            expected_response: Some(c.expected_response),
            expect_close: Some(c.expect_close),
            timeout_ms: Some(c.timeout_ms),
            interval_s: Some(c.interval_s),
            window: Some(c.window),
            threshold: Some(c.threshold),
            initial: Some(c.initial),
            max_age_s: c.max_age_s,
            block_pattern: c.block_pattern,
            // Written only when named, as `verify` below is.
            block_statuses: c.block_statuses,
            // Written only when on, so checks that do not use it read the same as before to
            // agents that do not know the attribute (they refuse unknown fields).
            verify: c.verify.then_some(true),
        }
    }
}

impl Default for Check {
    fn default() -> Self {
        // The empty input takes every default, and the defaults are valid.
        Check::parse(CheckInput::default()).unwrap_or_else(|_| unreachable!("defaults are valid"))
    }
}

impl Check {
    /// Validates a check, filling in defaults.
    pub fn parse(i: CheckInput) -> Result<Self> {
        let path = i.path.unwrap_or_else(|| DEFAULT_PATH.to_owned());
        if !path.starts_with('/') || path.chars().any(|c| c.is_whitespace() || c.is_control()) {
            return Err(Error::invalid(
                "path",
                format!("must start with / and contain no spaces, got {path:?}"),
            ));
        }
        let host = i.host.unwrap_or_else(|| DEFAULT_HOST.to_owned());
        if host.is_empty()
            || host.len() > 253
            || host.chars().any(|c| c.is_whitespace() || c.is_control() || c == '/')
        {
            return Err(Error::invalid("host", format!("must be a host name, got {host:?}")));
        }
        check_request(&i.request)?;
        let expected_response = in_range("expected_response", i.expected_response.unwrap_or(200), 100, 599)?;
        let timeout_ms = in_range("timeout_ms", i.timeout_ms.unwrap_or(2000), 100, 60_000)?;
        let interval_s = in_range("interval_s", i.interval_s.unwrap_or(5), 1, 3600)?;
        let window = in_range("window", i.window.unwrap_or(8), 1, 64)?;
        let threshold = in_range("threshold", i.threshold.unwrap_or(3), 1, window)?;
        let initial = in_range("initial", i.initial.unwrap_or(threshold - 1), 0, window)?;
        let max_age_s = i.max_age_s.map(|a| in_range("max_age_s", a, 1, 86_400)).transpose()?;
        if let Some(p) = &i.block_pattern
            && (p.is_empty() || p.len() > 256)
        {
            return Err(Error::invalid("block_pattern", "must be 1 to 256 bytes"));
        }
        at_most("block_statuses", i.block_statuses.len(), MAX_BLOCK_STATUSES)?;
        for (n, s) in i.block_statuses.iter().enumerate() {
            in_range(&format!("block_statuses[{n}]"), *s, 100, 599)?;
        }
        let mut block_statuses = i.block_statuses;
        block_statuses.sort_unstable();
        block_statuses.dedup();
        Ok(Check {
            method: i.method,
            path,
            host,
            request: i.request,
            expected_response,
            expect_close: i.expect_close.unwrap_or(true),
            timeout_ms,
            interval_s,
            window,
            threshold,
            initial,
            max_age_s,
            block_pattern: i.block_pattern,
            block_statuses,
            verify: i.verify.unwrap_or(false),
        })
    }

    /// The method, when the check names one.
    pub fn method(&self) -> Option<Method> {
        self.method
    }
    /// Request path.
    pub fn path(&self) -> &str {
        &self.path
    }
    /// `Host` header and SNI.
    pub fn host(&self) -> &str {
        &self.host
    }
    /// Raw request lines (empty: a `GET` of the path is built).
    pub fn request(&self) -> &[String] {
        &self.request
    }
    /// Expected status.
    pub fn expected_response(&self) -> u16 {
        self.expected_response
    }
    /// Whether the peer must close the connection.
    pub fn expect_close(&self) -> bool {
        self.expect_close
    }
    /// Timeout per attempt, ms.
    pub fn timeout_ms(&self) -> u32 {
        self.timeout_ms
    }
    /// Seconds between attempts of endpoint checks.
    pub fn interval_s(&self) -> u32 {
        self.interval_s
    }
    /// Window of the register.
    pub fn window(&self) -> u8 {
        self.window
    }
    /// Good attempts needed within the window.
    pub fn threshold(&self) -> u8 {
        self.threshold
    }
    /// Good attempts assumed at first sight.
    pub fn initial(&self) -> u8 {
        self.initial
    }
    /// Maximum segment age for `hls`.
    pub fn max_age_s(&self) -> Option<u32> {
        self.max_age_s
    }
    /// Block-page pattern.
    pub fn block_pattern(&self) -> Option<&str> {
        self.block_pattern.as_deref()
    }
    /// Statuses that mark a block page, in order.
    pub fn block_statuses(&self) -> &[u16] {
        &self.block_statuses
    }
    /// Whether an answer of `status` is a block page by its status alone.
    pub fn is_block_status(&self, status: u16) -> bool {
        self.block_statuses.binary_search(&status).is_ok()
    }
    /// Whether TLS targets verify the certificate.
    pub fn verify(&self) -> bool {
        self.verify
    }

    /// The same check by TCP connect: what a cluster's listeners get while one of its nodes
    /// cannot answer the health endpoint (reference 000's fallback).
    pub fn as_tcp(&self) -> Check {
        Check { method: Some(Method::Tcp), ..self.clone() }
    }

    /// The raw request as the bytes an attempt sends (Varnish's `.request`): every line as the
    /// operator wrote it, each followed by CRLF, then the CRLF that ends the head. `None`
    /// without raw lines.
    pub fn raw_request(&self) -> Option<Vec<u8>> {
        if self.request.is_empty() {
            return None;
        }
        let mut out = Vec::with_capacity(self.request.iter().map(|l| l.len() + 2).sum::<usize>() + 2);
        for line in &self.request {
            out.extend_from_slice(line.as_bytes());
            out.extend_from_slice(b"\r\n");
        }
        out.extend_from_slice(b"\r\n");
        Some(out)
    }

    /// The request of an attempt, parsed: the raw lines when given, else `GET <path>` with `Host`,
    /// `User-Agent` and `Connection: close`.
    pub fn request_spec(&self) -> RequestSpec {
        let Some((first, headers)) = self.request.split_first() else {
            return RequestSpec {
                method: "GET".into(),
                target: self.path.clone(),
                headers: vec![
                    ("Host".into(), self.host.clone()),
                    ("User-Agent".into(), concat!("vantage-probe/", env!("CARGO_PKG_VERSION")).into()),
                    ("Connection".into(), "close".into()),
                ],
            };
        };
        // Validated in `check_request`: three parts, and headers with a colon.
        let mut parts = first.split(' ');
        let method = parts.next().unwrap_or("GET").to_owned();
        let target = parts.next().unwrap_or("/").to_owned();
        let headers = headers
            .iter()
            .filter_map(|l| l.split_once(':'))
            .map(|(k, v)| (k.trim().to_owned(), v.trim().to_owned()))
            .collect();
        RequestSpec { method, target, headers }
    }
}

/// The request an HTTP attempt sends.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestSpec {
    /// Method (`GET`).
    pub method: String,
    /// Request target (`/.vantage/health`).
    pub target: String,
    /// Headers in order.
    pub headers: Vec<(String, String)>,
}

/// Raw request lines: a request line first, no CR or LF inside a line, and a
/// `Connection: close` header, which the Varnish model requires.
fn check_request(lines: &[String]) -> Result<()> {
    let Some(first) = lines.first() else {
        return Ok(());
    };
    if let Some(i) = lines.iter().position(|l| l.contains(['\r', '\n'])) {
        return Err(Error::invalid(format!("request[{i}]"), "must not contain CR or LF (CRLF is added)"));
    }
    let parts: Vec<&str> = first.split(' ').collect();
    if parts.len() != 3 || !parts[2].starts_with("HTTP/1.") || parts[0].is_empty() {
        return Err(Error::invalid(
            "request[0]",
            format!("must be a request line like \"GET / HTTP/1.1\", got {first:?}"),
        ));
    }
    let close = lines[1..].iter().any(|l| {
        l.split_once(':').is_some_and(|(k, v)| {
            k.trim().eq_ignore_ascii_case("connection") && v.trim().eq_ignore_ascii_case("close")
        })
    });
    if !close {
        return Err(Error::invalid("request", "must include a \"Connection: close\" header"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn check_attribute_defaults_follow_varnish() {
        let c = Check::default();
        assert_eq!(c.path(), "/.vantage/health");
        assert_eq!(c.host(), "health.vantage.invalid");
        assert_eq!(
            (c.expected_response(), c.expect_close(), c.timeout_ms(), c.interval_s()),
            (200, true, 2000, 5)
        );
        assert_eq!((c.window(), c.threshold(), c.initial()), (8, 3, 2));
        let custom = Check::parse(CheckInput { threshold: Some(5), ..Default::default() }).unwrap();
        assert_eq!(custom.initial(), 4, "initial defaults to threshold - 1");
    }

    #[test]
    fn check_request_requires_connection_close() {
        let mk = |lines: &[&str]| {
            Check::parse(CheckInput {
                request: lines.iter().map(|s| (*s).to_owned()).collect(),
                ..Default::default()
            })
        };
        let e = mk(&["GET / HTTP/1.1", "Host: example.com"]).unwrap_err();
        assert_eq!(e.to_string(), "request: must include a \"Connection: close\" header");
        let ok = mk(&[
            "GET / HTTP/1.1",
            "Host: example.com",
            "X-Magic: We're fine with this.",
            "connection: Close",
        ])
        .unwrap();
        let spec = ok.request_spec();
        assert_eq!((spec.method.as_str(), spec.target.as_str()), ("GET", "/"));
        assert_eq!(spec.headers[1], ("X-Magic".to_owned(), "We're fine with this.".to_owned()));
        assert_eq!(spec.headers.len(), 3);
        assert_eq!(mk(&["hello", "Connection: close"]).unwrap_err().field(), "request[0]");
        assert_eq!(mk(&["GET / HTTP/1.1", "Connection: close\r\nX: y"]).unwrap_err().field(), "request[1]");
    }

    #[test]
    fn check_ranges() {
        let e = Check::parse(CheckInput { window: Some(65), ..Default::default() }).unwrap_err();
        assert_eq!(e.to_string(), "window: must be between 1 and 64, got 65");
        let e = Check::parse(CheckInput { window: Some(5), threshold: Some(6), ..Default::default() })
            .unwrap_err();
        assert_eq!(e.to_string(), "threshold: must be between 1 and 5, got 6");
        let e = Check::parse(CheckInput { expected_response: Some(42), ..Default::default() }).unwrap_err();
        assert_eq!(e.field(), "expected_response");
        let e = Check::parse(CheckInput { path: Some("health".into()), ..Default::default() }).unwrap_err();
        assert_eq!(e.field(), "path");
    }

    #[test]
    fn check_round_trips_through_json() {
        let c = Check::parse(CheckInput {
            method: Some(Method::Hls),
            max_age_s: Some(30),
            path: Some("/live.m3u8".into()),
            ..Default::default()
        })
        .unwrap();
        let back: Check = serde_json::from_str(&serde_json::to_string(&c).unwrap()).unwrap();
        assert_eq!(back, c);
        let e = serde_json::from_str::<Check>(r#"{"windw": 3}"#).unwrap_err();
        assert!(e.to_string().contains("windw"));
        assert!(!serde_json::to_string(&c).unwrap().contains("verify"), "absent unless on");
        let v = Check::parse(CheckInput { verify: Some(true), ..Default::default() }).unwrap();
        let json = serde_json::to_string(&v).unwrap();
        assert!(json.contains(r#""verify":true"#), "{json}");
        assert!(serde_json::from_str::<Check>(&json).unwrap().verify());
        assert!(!Check::default().verify(), "off by default");
    }

    #[test]
    fn block_statuses_are_checked_by_name_and_absent_unless_named() {
        let mk =
            |statuses: Vec<u16>| Check::parse(CheckInput { block_statuses: statuses, ..Default::default() });
        let c = mk(vec![451, 403, 451]).unwrap();
        assert_eq!(c.block_statuses(), [403, 451]);
        assert!(c.is_block_status(451) && c.is_block_status(403) && !c.is_block_status(404));
        let e = mk(vec![403, 99]).unwrap_err();
        assert_eq!(e.to_string(), "block_statuses[1]: must be between 100 and 599, got 99");
        assert_eq!(mk((200..217).collect()).unwrap_err().field(), "block_statuses");
        let json = serde_json::to_string(&c).unwrap();
        assert!(json.contains(r#""block_statuses":[403,451]"#), "{json}");
        assert_eq!(serde_json::from_str::<Check>(&json).unwrap(), c);
        let plain = serde_json::to_string(&Check::default()).unwrap();
        assert!(!plain.contains("block_statuses"), "agents that predate it read the rest: {plain}");
    }

    #[test]
    fn default_request_is_a_get_of_the_path() {
        let c = Check::default();
        let spec = c.request_spec();
        assert_eq!((spec.method.as_str(), spec.target.as_str()), ("GET", "/.vantage/health"));
        assert_eq!(spec.headers[0], ("Host".to_owned(), "health.vantage.invalid".to_owned()));
        assert_eq!(spec.headers[2], ("Connection".to_owned(), "close".to_owned()));
    }
}
