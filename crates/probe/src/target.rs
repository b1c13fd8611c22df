//! [`ProbeTarget`]: one thing a prober checks — a cluster node's address × listener port, or
//! an endpoint URL — with the check that says how.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use url::{Host, Url};
use vantage_core::check::{Check, Listener, Method, Protocol, RequestSpec};
use vantage_core::fetch::FetchPolicy;

use crate::error::{Error, Result};

/// One target of a round.
///
/// Cluster targets come from [`ProbeTarget::listener`]: the address is a scheduling address
/// and the listener's port, the method follows the listener's protocol, and path and host are
/// the cluster check's. Endpoint targets come from [`ProbeTarget::from_url`] (or
/// [`ProbeTarget::endpoint`] when the address is known): the URL gives the scheme, the `Host`
/// header, the SNI and the path, and the check gives the rest.
#[derive(Debug, Clone)]
pub struct ProbeTarget {
    /// The key the result is reported under (the server hands it out).
    pub key: String,
    /// Where to connect.
    pub addr: SocketAddr,
    /// How to probe.
    pub method: Method,
    /// Speak TLS before HTTP. Read for `hls` only: `https` always speaks TLS, `http` and
    /// `tcp` never do.
    pub tls: bool,
    /// Send a PROXY v1 header first (listeners flagged PROXY protocol).
    pub proxy_v1: bool,
    /// The check's attributes: path, host, raw request, expected status, `expect_close`,
    /// maximum segment age.
    pub check: Arc<Check>,
    /// The endpoint URL, for endpoint targets: its host and port are the `Host` header and
    /// its host the SNI, its path and query the request target, instead of the check's.
    pub url: Option<Url>,
    /// Timeout of each attempt when the target has its own (endpoint targets are timed by
    /// their check); `None`: the round's.
    pub timeout: Option<Duration>,
    /// Any HTTP answer is good, whatever its status, unless it is a block page (a mirror:
    /// reference 004's `ok` is "an HTTP response within the timeout"); false: only the
    /// check's expected status is.
    pub any_status: bool,
    /// Where attempts may connect. The constructors allow any address: the prober sets the
    /// policy its control plane sends with the work ([`ProbeTarget::with_fetch`]).
    pub fetch: Arc<FetchPolicy>,
    /// Hosts (`host` or `host:port`) other than the target's own that an `hls` chain may
    /// lead to; a playlist URI on any other origin is refused, not fetched.
    pub allowed_hosts: Vec<String>,
}

impl ProbeTarget {
    /// A target probed with `method` at `addr`, with the check's path and host.
    pub fn new(key: impl Into<String>, addr: SocketAddr, method: Method, check: Arc<Check>) -> Self {
        ProbeTarget {
            key: key.into(),
            addr,
            method,
            tls: method == Method::Https,
            proxy_v1: false,
            check,
            url: None,
            timeout: None,
            any_status: false,
            fetch: Arc::new(FetchPolicy::any_address()),
            allowed_hosts: Vec::new(),
        }
    }

    /// The target under the policy `fetch`.
    pub fn with_fetch(self, fetch: Arc<FetchPolicy>) -> Self {
        ProbeTarget { fetch, ..self }
    }

    /// A cluster target: `ip` × the listener's port. The listener's protocol decides the
    /// transport (TLS or not) and, unless the check names a method, the method; a PROXY
    /// listener gets its header.
    pub fn listener(key: impl Into<String>, ip: IpAddr, listener: &Listener, check: Arc<Check>) -> Self {
        let method = match (check.method(), listener.protocol) {
            (None, p) => p.method(),
            (Some(Method::Tcp), _) => Method::Tcp,
            (Some(Method::Hls), _) => Method::Hls,
            (Some(_), Protocol::Https) => Method::Https,
            (Some(_), Protocol::Http) => Method::Http,
            (Some(m), Protocol::Tcp) => m,
        };
        ProbeTarget {
            tls: listener.protocol == Protocol::Https || method == Method::Https,
            proxy_v1: listener.proxy_protocol,
            ..ProbeTarget::new(key, SocketAddr::new(ip, listener.port), method, check)
        }
    }

    /// An endpoint target at a known address. The scheme decides the transport; the check
    /// decides the method when it names `tcp` or `hls`, else the scheme does. The check's
    /// timeout times each attempt.
    pub fn endpoint(key: impl Into<String>, url: Url, addr: SocketAddr, check: Arc<Check>) -> Result<Self> {
        let bad = |reason: &str| Error::Url { url: url.to_string(), reason: reason.to_owned() };
        let tls = match url.scheme() {
            "http" => false,
            "https" => true,
            _ => return Err(bad("scheme must be http or https")),
        };
        if url.host().is_none() {
            return Err(bad("a host is required"));
        }
        let method = match check.method() {
            Some(Method::Tcp) => Method::Tcp,
            Some(Method::Hls) => Method::Hls,
            _ if tls => Method::Https,
            _ => Method::Http,
        };
        let target = ProbeTarget {
            key: key.into(),
            addr,
            method,
            tls,
            proxy_v1: false,
            timeout: Some(Duration::from_millis(u64::from(check.timeout_ms()))),
            check,
            url: Some(url),
            any_status: false,
            fetch: Arc::new(FetchPolicy::any_address()),
            allowed_hosts: Vec::new(),
        };
        target.validate()?;
        Ok(target)
    }

    /// An endpoint target from a URL such as `https://edge.example.net:8443/live.m3u8`,
    /// resolving its host name (the first address wins).
    pub async fn from_url(key: impl Into<String>, url: &str, check: Arc<Check>) -> Result<Self> {
        let parsed =
            Url::parse(url).map_err(|e| Error::Url { url: url.to_owned(), reason: e.to_string() })?;
        let port = parsed.port_or_known_default().ok_or_else(|| Error::Url {
            url: url.to_owned(),
            reason: "no port and no default port for the scheme".into(),
        })?;
        let addr = match parsed.host() {
            Some(Host::Ipv4(ip)) => SocketAddr::new(ip.into(), port),
            Some(Host::Ipv6(ip)) => SocketAddr::new(ip.into(), port),
            Some(Host::Domain(name)) => resolve(name, port).await?,
            None => {
                return Err(Error::Url { url: url.to_owned(), reason: "a host is required".into() });
            }
        };
        ProbeTarget::endpoint(key, parsed, addr, check)
    }

    /// True when attempts speak TLS.
    pub fn uses_tls(&self) -> bool {
        match self.method {
            Method::Https => true,
            Method::Hls => self.tls,
            Method::Http | Method::Tcp => false,
        }
    }

    /// The host name for SNI: the URL's host, else the check's host.
    pub fn host(&self) -> &str {
        self.url.as_ref().and_then(Url::host_str).unwrap_or_else(|| self.check.host())
    }

    /// The request an HTTP attempt sends. Raw request lines of the check are sent as they
    /// are (as Varnish's `.request` replaces `.url`); otherwise a `GET` of the check's path
    /// with its `Host`, or of the URL's path and query with the URL's host and port.
    pub fn request_spec(&self) -> RequestSpec {
        let mut spec = self.check.request_spec();
        if !self.check.request().is_empty() {
            return spec;
        }
        if let Some(url) = &self.url {
            spec.target = url[url::Position::BeforePath..url::Position::AfterQuery].to_owned();
            if let Some(authority) = authority(url) {
                for (name, value) in &mut spec.headers {
                    if name.eq_ignore_ascii_case("host") {
                        value.clone_from(&authority);
                    }
                }
            }
        }
        spec
    }

    /// Checks that the request can be sent (method, target and headers are valid HTTP).
    pub fn validate(&self) -> Result<()> {
        crate::attempt::build_request(&self.request_spec(), &[]).map(drop)
    }
}

/// `host[:port]` of a URL, the port only when it is not the scheme's default.
pub(crate) fn authority(url: &Url) -> Option<String> {
    let host = url.host_str()?;
    Some(match url.port() {
        Some(p) => format!("{host}:{p}"),
        None => host.to_owned(),
    })
}

/// The first address of a host name.
pub(crate) async fn resolve(host: &str, port: u16) -> Result<SocketAddr> {
    let mut addrs = tokio::net::lookup_host((host, port))
        .await
        .map_err(|source| Error::Resolve { host: host.to_owned(), source })?;
    addrs.next().ok_or_else(|| Error::Resolve {
        host: host.to_owned(),
        source: std::io::Error::new(std::io::ErrorKind::NotFound, "no address"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use vantage_core::check::CheckInput;

    fn check(input: CheckInput) -> Arc<Check> {
        Arc::new(Check::parse(input).unwrap())
    }

    #[test]
    fn listener_protocol_decides_method_and_transport() {
        let ip: IpAddr = "127.0.0.1".parse().unwrap();
        let l = |port, protocol, proxy_protocol| Listener { port, protocol, proxy_protocol };
        let t = ProbeTarget::listener("k", ip, &l(443, Protocol::Https, true), check(CheckInput::default()));
        assert_eq!((t.method, t.uses_tls(), t.proxy_v1), (Method::Https, true, true));
        assert_eq!(t.addr, "127.0.0.1:443".parse().unwrap());
        assert_eq!(t.host(), "health.vantage.invalid");
        let t = ProbeTarget::listener("k", ip, &l(22, Protocol::Tcp, false), check(CheckInput::default()));
        assert_eq!((t.method, t.uses_tls()), (Method::Tcp, false));
        let http_check = check(CheckInput { method: Some(Method::Http), ..Default::default() });
        let t = ProbeTarget::listener("k", ip, &l(443, Protocol::Https, false), http_check);
        assert_eq!(t.method, Method::Https, "the listener decides the transport");
        let hls = check(CheckInput { method: Some(Method::Hls), ..Default::default() });
        let t = ProbeTarget::listener("k", ip, &l(443, Protocol::Https, false), hls);
        assert_eq!((t.method, t.uses_tls()), (Method::Hls, true));
    }

    #[tokio::test]
    async fn url_gives_host_path_and_transport() {
        let hls =
            check(CheckInput { method: Some(Method::Hls), timeout_ms: Some(1500), ..Default::default() });
        let t = ProbeTarget::from_url("m", "https://127.0.0.1:8443/live.m3u8?x=1", hls).await.unwrap();
        assert_eq!((t.method, t.uses_tls()), (Method::Hls, true));
        assert_eq!(t.addr, "127.0.0.1:8443".parse().unwrap());
        assert_eq!(t.timeout, Some(Duration::from_millis(1500)));
        let spec = t.request_spec();
        assert_eq!(spec.target, "/live.m3u8?x=1");
        assert_eq!(spec.headers[0], ("Host".into(), "127.0.0.1:8443".into()));

        let t = ProbeTarget::from_url("m", "http://[::1]/h", check(CheckInput::default())).await.unwrap();
        assert_eq!((t.method, t.addr), (Method::Http, "[::1]:80".parse().unwrap()));
        assert_eq!(t.request_spec().headers[0].1, "[::1]", "default port omitted");
        assert_eq!(t.host(), "[::1]");

        let t =
            ProbeTarget::from_url("m", "http://localhost:8080/", check(CheckInput::default())).await.unwrap();
        assert!(t.addr.ip().is_loopback());
        assert_eq!(t.request_spec().headers[0].1, "localhost:8080");

        let e =
            ProbeTarget::from_url("m", "ftp://127.0.0.1/x", check(CheckInput::default())).await.unwrap_err();
        assert!(e.to_string().contains("scheme must be http or https"), "{e}");
        assert!(matches!(
            ProbeTarget::from_url("m", "not a url", check(CheckInput::default())).await,
            Err(Error::Url { .. })
        ));
    }

    #[test]
    fn raw_request_lines_win_over_the_url() {
        let raw = check(CheckInput {
            request: vec![
                "HEAD /raw HTTP/1.1".into(),
                "Host: raw.example".into(),
                "Connection: close".into(),
            ],
            ..Default::default()
        });
        let url = Url::parse("http://127.0.0.1:81/ignored").unwrap();
        let t = ProbeTarget::endpoint("k", url, "127.0.0.1:81".parse().unwrap(), raw).unwrap();
        let spec = t.request_spec();
        assert_eq!((spec.method.as_str(), spec.target.as_str()), ("HEAD", "/raw"));
        assert_eq!(spec.headers[0].1, "raw.example");
    }

    #[test]
    fn invalid_raw_request_is_refused_up_front() {
        let raw = check(CheckInput {
            request: vec!["G\"T /raw HTTP/1.1".into(), "Connection: close".into()],
            ..Default::default()
        });
        let url = Url::parse("http://127.0.0.1:81/").unwrap();
        let e = ProbeTarget::endpoint("k", url, "127.0.0.1:81".parse().unwrap(), raw).unwrap_err();
        assert!(matches!(e, Error::Request(_)), "{e}");
    }
}
