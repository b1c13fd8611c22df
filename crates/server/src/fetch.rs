//! The control plane's own fetches — mirror freshness reads, webhook deliveries — under the
//! fetch policy probers follow too ([`FetchPolicy`]).
//!
//! A URL's host is resolved here and the client is pinned to the addresses the policy
//! allows, so the addresses judged are the ones connected to (a name that resolves to the
//! metadata service, or changes its answer between a check and the connect, gets nowhere).
//! Redirects are never followed: a server could otherwise send the control plane anywhere.

use std::net::{IpAddr, SocketAddr};

use reqwest::Url;
use vantage_core::fetch::FetchPolicy;

/// Why nothing may be fetched, in words.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum FetchError {
    /// The URL or the policy refuses it: trying again changes nothing.
    Refused(String),
    /// Its host did not resolve (to any address): it may later.
    Unresolved(String),
}

impl std::fmt::Display for FetchError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FetchError::Refused(why) | FetchError::Unresolved(why) => f.write_str(why),
        }
    }
}

impl From<FetchError> for String {
    fn from(e: FetchError) -> String {
        e.to_string()
    }
}

/// A client for one fetch of `url` (`http` or `https`, no credentials), its host pinned to
/// `pinned` when given, else to the addresses it resolves to that `policy` allows.
pub(crate) async fn client_for(
    policy: &FetchPolicy,
    url: &str,
    pinned: Option<SocketAddr>,
    builder: reqwest::ClientBuilder,
) -> Result<(reqwest::Client, Url), FetchError> {
    let refused = |why: String| FetchError::Refused(why);
    let url = Url::parse(url).map_err(|e| refused(format!("not a URL: {e}")))?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(refused(format!(
            "the fetch policy refuses the scheme {:?}: only http and https",
            url.scheme()
        )));
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err(refused("the fetch policy refuses URLs with a user name or password".into()));
    }
    let port = url.port_or_known_default().unwrap_or(80);
    let host = url.host_str().ok_or_else(|| refused("the URL has no host".into()))?.to_owned();
    let literal = literal_address(&url);
    let candidates: Vec<SocketAddr> = match (pinned, literal) {
        (Some(addr), _) => vec![addr],
        (None, Some(ip)) => vec![SocketAddr::new(ip, port)],
        (None, None) => resolve(&host, port).await?,
    };
    let allowed = judge(policy, &host, candidates)?;
    let builder = builder.redirect(reqwest::redirect::Policy::none());
    // A literal address is connected to as it is; a name only at the addresses judged above.
    let builder = if literal.is_some() { builder } else { builder.resolve_to_addrs(&host, &allowed) };
    let client = builder.build().map_err(|e| FetchError::Refused(e.to_string()))?;
    Ok((client, url))
}

/// What `host:port` resolves to, within 10 s.
pub(crate) async fn resolve(host: &str, port: u16) -> Result<Vec<SocketAddr>, FetchError> {
    let lookup = tokio::net::lookup_host((host, port));
    match tokio::time::timeout(std::time::Duration::from_secs(10), lookup).await {
        Ok(Ok(found)) => Ok(found.collect()),
        Ok(Err(e)) => Err(FetchError::Unresolved(format!("cannot resolve {host}: {e}"))),
        Err(_) => Err(FetchError::Unresolved(format!("cannot resolve {host}: no answer in time"))),
    }
}

/// Of `candidates` (what `host` resolved to), those `policy` allows; none: why, the policy's
/// first refusal or that the name resolved to nothing.
pub(crate) fn judge(
    policy: &FetchPolicy,
    host: &str,
    candidates: Vec<SocketAddr>,
) -> Result<Vec<SocketAddr>, FetchError> {
    let mut refused = None;
    let allowed: Vec<SocketAddr> = candidates
        .into_iter()
        .filter(|a| match policy.check(*a) {
            Ok(()) => true,
            Err(r) => {
                refused.get_or_insert(r);
                false
            }
        })
        .collect();
    if allowed.is_empty() {
        return Err(refused.map_or_else(
            || FetchError::Unresolved(format!("{host} resolves to no address")),
            |r| FetchError::Refused(r.to_string()),
        ));
    }
    Ok(allowed)
}

/// The address a URL's host is, when it is one (the parser writes it in its one canonical
/// form, whatever spelling it was given).
fn literal_address(url: &Url) -> Option<IpAddr> {
    url.host_str()?.trim_start_matches('[').trim_end_matches(']').parse().ok()
}

/// Refuses, naming `field`, a URL whose host is an address the policy refuses, however it is
/// spelled (`0x7f.1`, `2852039166`): whoever enters it learns at once that it would never be
/// fetched. A host name is judged when it is fetched, on what it then resolves to.
pub(crate) fn refuse_address(
    policy: &FetchPolicy,
    field: &str,
    url: &str,
) -> Result<(), crate::error::ApiError> {
    let Ok(url) = Url::parse(url) else { return Ok(()) };
    let Some(ip) = literal_address(&url) else { return Ok(()) };
    let addr = SocketAddr::new(ip, url.port_or_known_default().unwrap_or(80));
    policy.check(addr).map_err(|r| crate::error::ApiError::invalid(field, r.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn refusal(policy: &FetchPolicy, url: &str, pinned: Option<&str>) -> String {
        let pinned = pinned.map(|p| p.parse().unwrap());
        client_for(policy, url, pinned, reqwest::Client::builder()).await.unwrap_err().to_string()
    }

    #[tokio::test]
    async fn metadata_loopback_and_credentials_are_refused_whatever_the_spelling() {
        let strict = FetchPolicy::default();
        for url in [
            "http://169.254.169.254/latest/meta-data/",
            "http://[fd00:ec2::254]/",
            "http://0x7f.1:8080/",
            "http://2852039166/",
            "http://localhost:9/",
            "http://[::ffff:127.0.0.1]/",
        ] {
            let e = refusal(&strict, url, None).await;
            assert!(e.starts_with("the fetch policy refuses"), "{url}: {e}");
        }
        let e = refusal(&FetchPolicy::any_address(), "http://user:pass@192.0.2.1/", None).await;
        assert_eq!(e, "the fetch policy refuses URLs with a user name or password");
        assert!(!e.contains("pass@"));
        let e = refusal(&FetchPolicy::any_address(), "file:///etc/passwd", None).await;
        assert!(e.contains("scheme \"file\""), "{e}");
        // A pinned address is judged as a resolved one.
        let e = refusal(&strict, "http://mirror.example/", Some("169.254.169.254:80")).await;
        assert!(e.contains("169.254.169.254:80"), "{e}");
    }

    #[test]
    fn entered_addresses_are_judged_however_they_are_spelled() {
        let strict = FetchPolicy::default();
        for url in ["http://0x7f.1:8080/a", "http://2852039166/", "https://[fd00:ec2::254]/x"] {
            let e = refuse_address(&strict, "url", url).unwrap_err().to_string();
            assert!(e.starts_with("url: the fetch policy refuses"), "{url}: {e}");
        }
        assert!(
            refuse_address(&strict, "url", "https://metadata.google.internal/").is_ok(),
            "judged when fetched"
        );
        assert!(refuse_address(&strict, "url", "https://192.0.2.1/").is_ok());
    }

    #[tokio::test]
    async fn allowed_destinations_get_a_client() {
        let lab = FetchPolicy { allow_loopback: true, ..FetchPolicy::default() };
        let (_, url) =
            client_for(&lab, "http://localhost:9/trace", None, reqwest::Client::builder()).await.unwrap();
        assert_eq!(url.path(), "/trace");
        let own = FetchPolicy { own_listeners: vec!["127.0.0.1:9".parse().unwrap()], ..lab };
        let e = refusal(&own, "http://127.0.0.1:9/", None).await;
        assert!(e.contains("control plane itself"), "{e}");
    }
}
