//! Mirrors and doors (§6): mirror records, the verdict from regional statuses, and the door
//! filter stack with a weighted choice.

use std::collections::BTreeMap;
use std::fmt;
use std::net::{IpAddr, SocketAddr};

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result, in_range, name};
use crate::model::dns_name;
use crate::net::IpNet;
use crate::result::ErrorCode;
use crate::time::Timestamp;

/// The latest status of a mirror seen from one region.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(utoipa::ToSchema))]
pub enum RegionStatus {
    /// An HTTP response arrived within the timeout.
    #[serde(rename = "ok")]
    Ok,
    /// No response within the timeout.
    #[serde(rename = "timeout")]
    Timeout,
    /// The connection was refused.
    #[serde(rename = "refused")]
    Refused,
    /// A local error made the measurement inconclusive; counts neither way.
    #[serde(rename = "error")]
    Error,
    /// The response matched a block-page pattern.
    #[serde(rename = "blocked-inferred")]
    BlockedInferred,
}

impl RegionStatus {
    /// Counts toward F: a sign the mirror is blocked or down there.
    pub fn is_failing(self) -> bool {
        matches!(self, RegionStatus::Timeout | RegionStatus::Refused | RegionStatus::BlockedInferred)
    }

    /// The API word.
    pub fn as_str(self) -> &'static str {
        match self {
            RegionStatus::Ok => "ok",
            RegionStatus::Timeout => "timeout",
            RegionStatus::Refused => "refused",
            RegionStatus::Error => "error",
            RegionStatus::BlockedInferred => "blocked-inferred",
        }
    }

    /// One prober's opinion of a mirror: `ok` while its window register is healthy (the
    /// window's hysteresis absorbs a single lost probe), else what its last failure says.
    ///
    /// `ok` is reference 004's "an HTTP response within the timeout": mirror probes take any
    /// status as an answer, so a mirror answering 404 is reached and `ok`. Only a block page
    /// (the check's pattern, or one of its block statuses) is `blocked-inferred`. A refused or
    /// reset connection is `refused` (middleboxes that block a host commonly inject a reset),
    /// and so is a connection that carried no HTTP answer at all: a failed TLS handshake, or
    /// bytes that are not HTTP (`status`, which a mirror probe reports for nothing else). An
    /// answer an `hls` check finds wrong in content (manifest, segment, age) is still an HTTP
    /// response, so `ok`: whether a mirror's files are current is its freshness check's
    /// question. An unreachable network is the prober's own trouble, and a destination the
    /// fetch policy refuses was never tried: both `error`, which counts neither way.
    pub fn opinion(healthy: bool, last_error: Option<ErrorCode>) -> RegionStatus {
        if healthy {
            return RegionStatus::Ok;
        }
        match last_error {
            Some(ErrorCode::Timeout) => RegionStatus::Timeout,
            Some(ErrorCode::Blocked) => RegionStatus::BlockedInferred,
            Some(ErrorCode::Unreachable | ErrorCode::Policy) | None => RegionStatus::Error,
            Some(ErrorCode::Refused | ErrorCode::Reset | ErrorCode::Tls | ErrorCode::Status) => {
                RegionStatus::Refused
            }
            Some(ErrorCode::Manifest | ErrorCode::Segment | ErrorCode::Stale) => RegionStatus::Ok,
        }
    }
}

impl fmt::Display for RegionStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A region's status from its probers' opinions: the status a strict majority of the
/// conclusive ones (not `error`) holds, else `error` (no majority, or nothing conclusive).
/// The latency is the median of the probers' latencies (ms; 0 when none has one).
pub fn region_status(opinions: &[(RegionStatus, Option<u32>)]) -> (RegionStatus, u32) {
    let conclusive: Vec<RegionStatus> =
        opinions.iter().map(|(s, _)| *s).filter(|s| *s != RegionStatus::Error).collect();
    let mut status = RegionStatus::Error;
    for candidate in &conclusive {
        if conclusive.iter().filter(|s| *s == candidate).count() * 2 > conclusive.len() {
            status = *candidate;
            break;
        }
    }
    let mut latencies: Vec<u32> = opinions.iter().filter_map(|(_, l)| *l).collect();
    latencies.sort_unstable();
    let latency = match latencies.len() {
        0 => 0,
        n if n % 2 == 1 => latencies[n / 2],
        n => (latencies[n / 2 - 1] + latencies[n / 2]) / 2,
    };
    (status, latency)
}

/// One region's latest measurement.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(utoipa::ToSchema))]
pub struct RegionObservation {
    pub status: RegionStatus,
    /// Latency, ms (0 when none).
    pub latency: u32,
    /// When measured.
    pub at: Timestamp,
}

/// A mirror's verdict.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum MirrorVerdict {
    /// No usable measurement.
    #[default]
    Unknown,
    /// Blocked (or manually blocked).
    Blocked,
    /// Failing in some regions, below the threshold.
    Degraded,
    /// Failing nowhere.
    Live,
}

impl MirrorVerdict {
    /// Gauge value, on the convention every verdict gauge follows (higher is healthier, the
    /// worst known state 0, not yet known -1): 2 live, 1 degraded, 0 blocked, -1 unknown.
    pub fn gauge(self) -> i64 {
        match self {
            MirrorVerdict::Live => 2,
            MirrorVerdict::Degraded => 1,
            MirrorVerdict::Blocked => 0,
            MirrorVerdict::Unknown => -1,
        }
    }
}

impl fmt::Display for MirrorVerdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            MirrorVerdict::Live => "live",
            MirrorVerdict::Degraded => "degraded",
            MirrorVerdict::Blocked => "blocked",
            MirrorVerdict::Unknown => "unknown",
        })
    }
}

/// Default share of failing regions that blocks a mirror, %.
pub const DEFAULT_THRESHOLD_PCT: u32 = 50;

/// The verdict: manual block → blocked; with F the failing regions and T the regions with a
/// status other than `error`: T = 0 → unknown; F/T ≥ threshold → blocked; F = 0 → live;
/// otherwise degraded.
pub fn verdict(
    manual_block: bool,
    regions: &BTreeMap<String, RegionObservation>,
    threshold_pct: u32,
) -> MirrorVerdict {
    if manual_block {
        return MirrorVerdict::Blocked;
    }
    let t = regions.values().filter(|r| r.status != RegionStatus::Error).count() as u64;
    let f = regions.values().filter(|r| r.status.is_failing()).count() as u64;
    if t == 0 {
        MirrorVerdict::Unknown
    } else if f * 100 >= u64::from(threshold_pct) * t {
        MirrorVerdict::Blocked
    } else if f == 0 {
        MirrorVerdict::Live
    } else {
        MirrorVerdict::Degraded
    }
}

/// A mirror record: the operator's fields, validated.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "MirrorInput")]
#[non_exhaustive]
pub struct Mirror {
    /// Public host name (a DNS name), unique.
    pub host: String,
    /// Tenants it may serve; empty = all.
    pub tenants: Vec<String>,
    /// Selection weight; 0 disables it without removing it.
    pub weight: u32,
    /// Operator's hard block.
    pub manual_block: bool,
    /// Note with a manual block (< 256 bytes).
    pub manual_note: String,
    /// The named check that probes it (`None`: the check named `default`).
    pub check: Option<String>,
    /// Where probers connect instead of resolving the host (a pinned address, as with
    /// `curl --resolve`).
    pub address: Option<SocketAddr>,
    /// How far behind its reference the mirror may be before it leaves door rotation.
    pub freshness: Option<Freshness>,
    /// Where its files are: scheme, host, port and path prefix, ending in `/`
    /// (`https://mirror.example.net:8443/debian/`). `None`: the doors' scheme and the host.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base_url: Option<String>,
}

impl Mirror {
    /// The base doors join a visitor's path to, ending in `/`.
    pub fn base(&self, doors: Scheme) -> String {
        self.base_url.clone().unwrap_or_else(|| format!("{}://{}/", doors.as_str(), self.host))
    }

    /// The base's path prefix (`/debian/`; `/` without a base URL).
    pub fn base_path(&self) -> &str {
        let Some(b) = &self.base_url else { return "/" };
        let rest = b.split_once("://").map_or(b.as_str(), |(_, r)| r);
        rest.find('/').map_or("/", |i| &rest[i..])
    }

    /// The base's scheme, when the mirror has a base URL.
    pub fn base_scheme(&self) -> Option<&str> {
        self.base_url.as_deref().and_then(|b| b.split_once("://")).map(|(s, _)| s)
    }
}

/// Validates a mirror's base URL: an `http://` or `https://` URL without query or fragment,
/// given a trailing `/` so that a path joins it with one slash.
pub fn base_url(field: &str, text: &str) -> Result<String> {
    let mut url = crate::monitor::endpoint_url(field, text)?;
    if url.contains(['?', '#']) {
        return Err(Error::invalid(
            field,
            "must not carry a query or a fragment: it is a base to join paths to",
        ));
    }
    if !url.split_once("://").is_some_and(|(_, rest)| rest.contains('/')) || !url.ends_with('/') {
        url.push('/');
    }
    Ok(url)
}

/// A mirror's freshness check: a trace file whose body (or `Last-Modified`) is the time of
/// the mirror's last sync, compared with the same file on a reference host. A 200 with last
/// week's files is not a live mirror.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct Freshness {
    /// Path of the trace file on the mirror (`/debian/project/trace/master`).
    pub path: String,
    /// The same file on the reference host, a full `http://` or `https://` URL.
    pub reference: String,
    /// Largest lag behind the reference, seconds (1 to 30 days).
    pub max_lag_s: u32,
    /// Seconds between checks (5 to 86400, 300).
    #[serde(default = "default_freshness_interval")]
    pub interval_s: u32,
}

fn default_freshness_interval() -> u32 {
    300
}

impl Freshness {
    /// Validates the check's fields (names relative to `freshness`).
    fn parse(self) -> Result<Freshness> {
        let f = |e: Error| e.within("freshness");
        crate::limits::url("path", &self.path).map_err(f)?;
        if !self.path.starts_with('/') || self.path.chars().any(|c| c.is_whitespace() || c.is_control()) {
            return Err(f(Error::invalid(
                "path",
                format!("must start with / and contain no spaces, got {:?}", self.path),
            )));
        }
        crate::limits::url("reference", &self.reference).map_err(f)?;
        let scheme_ok = self.reference.starts_with("http://") || self.reference.starts_with("https://");
        if !scheme_ok || self.reference.chars().any(|c| c.is_whitespace() || c.is_control()) {
            return Err(f(Error::invalid(
                "reference",
                format!("must be an http:// or https:// URL, got {:?}", self.reference),
            )));
        }
        let max_lag_s = in_range("max_lag_s", self.max_lag_s, 1, 30 * 86_400).map_err(f)?;
        let interval_s = in_range("interval_s", self.interval_s, 5, 86_400).map_err(f)?;
        Ok(Freshness { max_lag_s, interval_s, ..self })
    }
}

/// A mirror as entered: the operator's fields only (the derived ones are refused).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(utoipa::ToSchema))]
#[serde(default, deny_unknown_fields)]
pub struct MirrorInput {
    /// Public host name (a DNS name of at least two labels), unique.
    pub host: String,
    /// Tenants it may serve (each must exist); empty = all.
    pub tenants: Vec<String>,
    /// Selection weight, a whole number ≥ 0 (1); 0 keeps it out of doors.
    pub weight: i64,
    /// The operator's hard block: the verdict is `blocked` whatever the probers see.
    pub manual_block: bool,
    /// Why it is blocked (under 256 bytes).
    pub manual_note: String,
    /// Named check that probes it (`default` when absent).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub check: Option<String>,
    /// `ip:port` to connect to instead of resolving the host.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schema(value_type = Option<String>))]
    pub address: Option<SocketAddr>,
    /// An optional freshness check against a reference host.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub freshness: Option<Freshness>,
    /// Where its files are (`https://mirror.example.net/debian/`): doors join visitors' paths
    /// to it and probers check it. Absent: the doors' scheme and the host, at `/`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub base_url: Option<String>,
}

impl Default for MirrorInput {
    fn default() -> Self {
        MirrorInput {
            host: String::new(),
            tenants: Vec::new(),
            weight: 1,
            manual_block: false,
            manual_note: String::new(),
            check: None,
            address: None,
            freshness: None,
            base_url: None,
        }
    }
}

impl From<Mirror> for MirrorInput {
    fn from(m: Mirror) -> Self {
        MirrorInput {
            host: m.host,
            tenants: m.tenants,
            weight: i64::from(m.weight),
            manual_block: m.manual_block,
            manual_note: m.manual_note,
            check: m.check,
            address: m.address,
            freshness: m.freshness,
            base_url: m.base_url,
        }
    }
}

impl TryFrom<MirrorInput> for Mirror {
    type Error = Error;
    fn try_from(i: MirrorInput) -> Result<Self> {
        let host = dns_name("host", &i.host)?;
        let weight = u32::try_from(i.weight).map_err(|_| {
            Error::invalid("weight", format!("must be a whole number of at least 0, got {}", i.weight))
        })?;
        if i.manual_note.len() >= 256 {
            return Err(Error::invalid(
                "manual_note",
                format!("must be under 256 bytes, got {}", i.manual_note.len()),
            ));
        }
        let mut tenants = Vec::with_capacity(i.tenants.len());
        for (n, t) in i.tenants.iter().enumerate() {
            tenants.push(name(&format!("tenants[{n}]"), t, 253)?);
        }
        tenants.sort();
        tenants.dedup();
        let check = i.check.map(|c| name("check", &c, 64)).transpose()?;
        Ok(Mirror {
            host,
            tenants,
            weight,
            manual_block: i.manual_block,
            manual_note: i.manual_note,
            check,
            address: i.address,
            freshness: i.freshness.map(Freshness::parse).transpose()?,
            base_url: i.base_url.map(|b| base_url("base_url", &b)).transpose()?,
        })
    }
}

/// How redirects name the chosen mirror.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum Scheme {
    /// `https://host/path` (the default: mirrors are public HTTPS hosts).
    #[default]
    Https,
    /// `http://host/path`.
    Http,
}

impl Scheme {
    /// The URL scheme.
    pub fn as_str(self) -> &'static str {
        match self {
            Scheme::Https => "https",
            Scheme::Http => "http",
        }
    }
}

/// Settings of mirrors and doors (`/v1/settings/mirrors`). Build with
/// [`MirrorSettings::parse`] or deserialise (which validates).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "MirrorSettingsInput", into = "MirrorSettingsInput")]
pub struct MirrorSettings {
    threshold_pct: u32,
    scheme: Scheme,
    exclude_client_region: bool,
    trusted_proxies: Vec<IpNet>,
}

/// Mirror settings as entered; absent fields take their defaults.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(utoipa::ToSchema))]
#[serde(default, deny_unknown_fields)]
pub struct MirrorSettingsInput {
    /// Share of conclusive regions failing that blocks a mirror, % (1–100, 50).
    pub threshold_pct: u32,
    /// Scheme of door redirects (`https`).
    pub scheme: Scheme,
    /// Doors keep a visitor away from mirrors failing in the visitor's own region (true).
    pub exclude_client_region: bool,
    /// Peers whose `X-Forwarded-For` is believed when mapping a visitor to a region (none).
    pub trusted_proxies: Vec<IpNet>,
}

impl Default for MirrorSettingsInput {
    fn default() -> Self {
        MirrorSettingsInput {
            threshold_pct: DEFAULT_THRESHOLD_PCT,
            scheme: Scheme::Https,
            exclude_client_region: true,
            trusted_proxies: Vec::new(),
        }
    }
}

impl Default for MirrorSettings {
    fn default() -> Self {
        // The empty input takes every default, and the defaults are valid.
        MirrorSettings::parse(MirrorSettingsInput::default())
            .unwrap_or_else(|_| unreachable!("defaults are valid"))
    }
}

impl TryFrom<MirrorSettingsInput> for MirrorSettings {
    type Error = Error;
    fn try_from(i: MirrorSettingsInput) -> Result<Self> {
        MirrorSettings::parse(i)
    }
}

impl From<MirrorSettings> for MirrorSettingsInput {
    fn from(s: MirrorSettings) -> Self {
        MirrorSettingsInput {
            threshold_pct: s.threshold_pct,
            scheme: s.scheme,
            exclude_client_region: s.exclude_client_region,
            trusted_proxies: s.trusted_proxies,
        }
    }
}

impl MirrorSettings {
    /// Validates settings.
    pub fn parse(i: MirrorSettingsInput) -> Result<Self> {
        let mut trusted_proxies = i.trusted_proxies;
        trusted_proxies.sort();
        trusted_proxies.dedup();
        Ok(MirrorSettings {
            threshold_pct: in_range("threshold_pct", i.threshold_pct, 1, 100)?,
            scheme: i.scheme,
            exclude_client_region: i.exclude_client_region,
            trusted_proxies,
        })
    }
    /// Share of failing regions that blocks, %.
    pub fn threshold_pct(&self) -> u32 {
        self.threshold_pct
    }
    /// Scheme of redirects.
    pub fn scheme(&self) -> Scheme {
        self.scheme
    }
    /// Whether doors exclude mirrors failing in the visitor's region by default.
    pub fn exclude_client_region(&self) -> bool {
        self.exclude_client_region
    }

    /// The visitor behind a request from `peer`: the peer itself, unless it is a trusted
    /// proxy, in which case the nearest `X-Forwarded-For` hop that is not one (read from the
    /// right, since only trusted proxies' appends can be believed).
    pub fn client(&self, peer: IpAddr, forwarded_for: Option<&str>) -> IpAddr {
        let trusted = |ip: IpAddr| self.trusted_proxies.iter().any(|n| n.contains(ip));
        if !trusted(peer) {
            return peer;
        }
        let Some(list) = forwarded_for else { return peer };
        let mut client = peer;
        for hop in list.rsplit(',') {
            let Ok(ip) = hop.trim().parse::<IpAddr>() else { break };
            client = ip;
            if !trusted(ip) {
                break;
            }
        }
        client
    }
}

impl Mirror {
    /// True when the mirror may serve `tenant`.
    pub fn serves(&self, tenant: &str) -> bool {
        self.tenants.is_empty() || self.tenants.iter().any(|t| t == tenant)
    }

    /// Whether a door may send `tenant`'s visitors to it: it serves the tenant and has a
    /// weight (its health aside).
    pub fn may_serve(&self, tenant: &str) -> bool {
        self.serves(tenant) && self.weight > 0
    }
}

/// What a door asks for.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DoorQuery {
    /// The tenant the visitor wants (`None`: any).
    pub tenant: Option<String>,
    /// Regions in which a candidate must not be failing.
    pub exclude_regions: Vec<String>,
    /// The tenant opted in to degraded mirrors when no live one is left.
    pub fallback_to_degraded: bool,
}

/// A mirror with its current verdict and regions, as the door sees it.
#[derive(Debug, Clone, Copy)]
pub struct Candidate<'a> {
    /// Record.
    pub mirror: &'a Mirror,
    pub verdict: MirrorVerdict,
    /// Region statuses.
    pub regions: &'a BTreeMap<String, RegionObservation>,
}

/// The filter stack: verdict live; tenant allowed; weight > 0; not failing in an excluded
/// region. Returns the indices of the survivors.
///
/// Reference 004's doors keep only `live` mirrors. A tenant may opt in to more
/// ([`DoorQuery::fallback_to_degraded`]): when no live mirror survives, degraded ones are
/// admitted through the same filters, since a mirror failing in some regions still serves
/// the others, and a visitor from a region where it works may be better sent there than
/// refused. That is where excluding regions (and the visitor's own) matters: a live mirror
/// fails nowhere.
pub fn door_filter(candidates: &[Candidate<'_>], q: &DoorQuery) -> Vec<usize> {
    let live = door_pass(candidates, q, MirrorVerdict::Live);
    if live.is_empty() && q.fallback_to_degraded {
        door_pass(candidates, q, MirrorVerdict::Degraded)
    } else {
        live
    }
}

fn door_pass(candidates: &[Candidate<'_>], q: &DoorQuery, verdict: MirrorVerdict) -> Vec<usize> {
    candidates
        .iter()
        .enumerate()
        .filter(|(_, c)| c.verdict == verdict)
        .filter(|(_, c)| c.mirror.weight > 0 && q.tenant.as_deref().is_none_or(|t| c.mirror.may_serve(t)))
        .filter(|(_, c)| {
            !q.exclude_regions.iter().any(|r| c.regions.get(r).is_some_and(|o| o.status.is_failing()))
        })
        .map(|(i, _)| i)
        .collect()
}

/// Picks one of `weights` in proportion to its weight, with `roll` a uniform random number
/// (any u64; the caller supplies randomness so the choice stays pure).
pub fn choose_weighted(weights: &[u32], roll: u64) -> Option<usize> {
    let total: u64 = weights.iter().map(|w| u64::from(*w)).sum();
    if total == 0 {
        return None;
    }
    let mut point = roll % total;
    for (i, w) in weights.iter().enumerate() {
        let w = u64::from(*w);
        if point < w {
            return Some(i);
        }
        point -= w;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn regions(list: &[(&str, RegionStatus)]) -> BTreeMap<String, RegionObservation> {
        list.iter()
            .map(|(r, s)| {
                ((*r).to_owned(), RegionObservation { status: *s, latency: 100, at: Timestamp::EPOCH })
            })
            .collect()
    }

    use RegionStatus::*;

    #[test]
    fn a_mirror_blocked_in_two_of_four_regions_is_blocked() {
        let r = regions(&[("us1", Ok), ("de1", Ok), ("ru1", Refused), ("cn1", Timeout)]);
        assert_eq!(verdict(false, &r, DEFAULT_THRESHOLD_PCT), MirrorVerdict::Blocked);
    }

    #[test]
    fn mirror_verdict_rules() {
        assert_eq!(verdict(false, &regions(&[]), 50), MirrorVerdict::Unknown);
        assert_eq!(verdict(false, &regions(&[("a", Error), ("b", Error)]), 50), MirrorVerdict::Unknown);
        assert_eq!(verdict(false, &regions(&[("a", Ok), ("b", Ok)]), 50), MirrorVerdict::Live);
        assert_eq!(
            verdict(false, &regions(&[("a", Ok), ("b", Ok), ("c", Timeout)]), 50),
            MirrorVerdict::Degraded
        );
        assert_eq!(
            verdict(false, &regions(&[("a", Ok), ("b", BlockedInferred)]), 50),
            MirrorVerdict::Blocked
        );
        // `error` counts toward neither F nor T.
        assert_eq!(
            verdict(false, &regions(&[("a", Ok), ("b", Error), ("c", Error)]), 50),
            MirrorVerdict::Live
        );
        assert_eq!(
            verdict(false, &regions(&[("a", Ok), ("b", Ok), ("c", Refused)]), 30),
            MirrorVerdict::Blocked
        );
    }

    #[test]
    fn manual_block_forces_blocked() {
        assert_eq!(verdict(true, &regions(&[("a", Ok)]), 50), MirrorVerdict::Blocked);
    }

    #[test]
    fn mirror_record_validation() {
        let m: Mirror = serde_json::from_str(r#"{"host":"Mirror-3.Example.net"}"#).unwrap();
        assert_eq!((m.host.as_str(), m.weight), ("mirror-3.example.net", 1));
        let e =
            Mirror::try_from(MirrorInput { host: "m.example.net".into(), weight: -1, ..Default::default() })
                .unwrap_err();
        assert_eq!(e.to_string(), "weight: must be a whole number of at least 0, got -1");
        let e = Mirror::try_from(MirrorInput {
            host: "m.example.net".into(),
            manual_note: "x".repeat(256),
            ..Default::default()
        })
        .unwrap_err();
        assert_eq!(e.to_string(), "manual_note: must be under 256 bytes, got 256");
        assert!(
            Mirror::try_from(MirrorInput {
                host: "m.example.net".into(),
                manual_note: "x".repeat(255),
                ..Default::default()
            })
            .is_ok()
        );
        assert_eq!(
            Mirror::try_from(MirrorInput { host: "not a host".into(), ..Default::default() })
                .unwrap_err()
                .field(),
            "host"
        );
    }

    #[test]
    fn a_base_url_gets_one_trailing_slash_and_no_query() {
        let m = |b: &str| {
            Mirror::try_from(MirrorInput {
                host: "m.example.net".into(),
                base_url: Some(b.into()),
                ..Default::default()
            })
        };
        let with = m("https://m.example.net:8443/debian").unwrap();
        assert_eq!(with.base(Scheme::Http), "https://m.example.net:8443/debian/");
        assert_eq!((with.base_path(), with.base_scheme()), ("/debian/", Some("https")));
        assert_eq!(m("http://m.example.net").unwrap().base(Scheme::Https), "http://m.example.net/");
        assert_eq!(m("http://m.example.net").unwrap().base_path(), "/");
        assert_eq!(m("https://m.example.net/debian?x=1").unwrap_err().field(), "base_url");
        assert_eq!(m("ftp://m.example.net/").unwrap_err().field(), "base_url");
        let plain =
            Mirror::try_from(MirrorInput { host: "m.example.net".into(), ..Default::default() }).unwrap();
        assert_eq!((plain.base(Scheme::Https).as_str(), plain.base_path()), ("https://m.example.net/", "/"));
    }

    #[test]
    fn door_filter_stack() {
        let mk = |host: &str, tenants: &[&str], weight: u32| Mirror {
            host: host.into(),
            tenants: tenants.iter().map(|t| (*t).into()).collect(),
            weight,
            manual_block: false,
            manual_note: String::new(),
            check: None,
            address: None,
            freshness: None,
            base_url: None,
        };
        let ms = [
            mk("a.example.net", &[], 1),
            mk("b.example.net", &["t1"], 1),
            mk("c.example.net", &[], 0),
            mk("d.example.net", &[], 2),
            mk("e.example.net", &[], 1),
        ];
        let ok = regions(&[("us1", Ok), ("ru1", Ok)]);
        let ru_refused = regions(&[("us1", Ok), ("de1", Ok), ("ru1", Refused)]);
        let cands = [
            Candidate { mirror: &ms[0], verdict: MirrorVerdict::Live, regions: &ok },
            Candidate { mirror: &ms[1], verdict: MirrorVerdict::Live, regions: &ok },
            Candidate { mirror: &ms[2], verdict: MirrorVerdict::Live, regions: &ok },
            Candidate { mirror: &ms[3], verdict: MirrorVerdict::Live, regions: &ru_refused },
            Candidate { mirror: &ms[4], verdict: MirrorVerdict::Degraded, regions: &ok },
        ];
        assert_eq!(door_filter(&cands, &DoorQuery::default()), vec![0, 1, 3]);
        assert_eq!(
            door_filter(&cands, &DoorQuery { tenant: Some("t2".into()), ..DoorQuery::default() }),
            vec![0, 3]
        );
        assert_eq!(
            door_filter(
                &cands,
                &DoorQuery {
                    tenant: Some("t1".into()),
                    exclude_regions: vec!["ru1".into()],
                    ..DoorQuery::default()
                }
            ),
            vec![0, 1]
        );
        let with_fallback = DoorQuery { fallback_to_degraded: true, ..DoorQuery::default() };
        assert_eq!(door_filter(&cands, &with_fallback), vec![0, 1, 3], "a live one left: only live ones");
    }

    #[test]
    fn without_a_live_mirror_only_a_tenant_that_opted_in_gets_degraded_ones() {
        let ms: Vec<Mirror> = ["a.example.net", "d.example.net", "e.example.net"]
            .iter()
            .map(|h| Mirror::try_from(MirrorInput { host: (*h).into(), ..Default::default() }).unwrap())
            .collect();
        let ok = regions(&[("us1", Ok), ("ru1", Ok)]);
        let ru_timeout = regions(&[("us1", Ok), ("ru1", Timeout)]);
        let degraded = [
            Candidate { mirror: &ms[0], verdict: MirrorVerdict::Degraded, regions: &ok },
            Candidate { mirror: &ms[1], verdict: MirrorVerdict::Degraded, regions: &ru_timeout },
            Candidate { mirror: &ms[2], verdict: MirrorVerdict::Blocked, regions: &ok },
        ];
        assert_eq!(door_filter(&degraded, &DoorQuery::default()), Vec::<usize>::new(), "004: live only");
        let opted = DoorQuery { fallback_to_degraded: true, ..DoorQuery::default() };
        assert_eq!(door_filter(&degraded, &opted), vec![0, 1]);
        let from_ru = DoorQuery { exclude_regions: vec!["ru1".into()], ..opted };
        assert_eq!(door_filter(&degraded, &from_ru), vec![0], "failing where the visitor is");
    }

    #[test]
    fn weighted_choice_is_proportional() {
        let w = [1, 0, 3];
        let mut counts = [0; 3];
        for roll in 0..400u64 {
            counts[choose_weighted(&w, roll).unwrap()] += 1;
        }
        assert_eq!(counts, [100, 0, 300]);
        assert_eq!(choose_weighted(&[0, 0], 5), None);
        assert_eq!(choose_weighted(&[], 5), None);
    }

    #[test]
    fn freshness_fields_are_checked() {
        let mk = |f: serde_json::Value| {
            serde_json::from_value::<Mirror>(serde_json::json!({"host": "m.example.net", "freshness": f}))
        };
        let ok = mk(
            serde_json::json!({"path": "/trace", "reference": "https://ref.example.net/trace", "max_lag_s": 3600}),
        );
        assert_eq!(ok.unwrap().freshness.unwrap().interval_s, 300);
        let e =
            mk(serde_json::json!({"path": "trace", "reference": "https://r/t", "max_lag_s": 1})).unwrap_err();
        assert!(e.to_string().contains("freshness.path"), "{e}");
        let e = mk(serde_json::json!({"path": "/t", "reference": "ftp://r/t", "max_lag_s": 1})).unwrap_err();
        assert!(e.to_string().contains("freshness.reference"), "{e}");
        let e = mk(serde_json::json!({"path": "/t", "reference": "http://r/t", "max_lag_s": 0})).unwrap_err();
        assert!(e.to_string().contains("freshness.max_lag_s"), "{e}");
    }

    #[test]
    fn one_probers_opinion() {
        assert_eq!(RegionStatus::opinion(true, Some(ErrorCode::Timeout)), Ok, "the window decides");
        assert_eq!(RegionStatus::opinion(false, Some(ErrorCode::Timeout)), Timeout);
        assert_eq!(RegionStatus::opinion(false, Some(ErrorCode::Reset)), Refused);
        assert_eq!(RegionStatus::opinion(false, Some(ErrorCode::Refused)), Refused);
        assert_eq!(RegionStatus::opinion(false, Some(ErrorCode::Tls)), Refused, "no HTTP answer");
        assert_eq!(RegionStatus::opinion(false, Some(ErrorCode::Blocked)), BlockedInferred);
        assert_eq!(RegionStatus::opinion(false, Some(ErrorCode::Unreachable)), Error);
        assert_eq!(RegionStatus::opinion(false, None), Error);
    }

    #[test]
    fn an_http_answer_wrong_in_content_is_still_ok() {
        for code in [ErrorCode::Manifest, ErrorCode::Segment, ErrorCode::Stale] {
            assert_eq!(RegionStatus::opinion(false, Some(code)), Ok, "{code}: an HTTP response arrived");
        }
    }

    #[test]
    fn a_region_is_its_probers_strict_majority() {
        assert_eq!(region_status(&[(Ok, Some(10)), (Ok, Some(30)), (Timeout, None)]), (Ok, 20));
        assert_eq!(region_status(&[(Ok, Some(10)), (Timeout, None)]).0, Error, "a tie is no majority");
        assert_eq!(region_status(&[(Refused, None), (Error, None)]).0, Refused, "error does not vote");
        assert_eq!(region_status(&[(Error, Some(5)), (Error, None)]), (Error, 5));
        assert_eq!(region_status(&[]), (Error, 0));
        assert_eq!(region_status(&[(Ok, Some(1)), (Ok, Some(2)), (Ok, Some(9))]), (Ok, 2));
    }

    #[test]
    fn the_visitor_behind_trusted_proxies() {
        let s = MirrorSettings::parse(MirrorSettingsInput {
            trusted_proxies: vec!["10.0.0.0/8".parse().unwrap()],
            ..Default::default()
        })
        .unwrap();
        let ip = |t: &str| t.parse::<IpAddr>().unwrap();
        assert_eq!(s.client(ip("198.51.100.7"), Some("203.0.113.1")), ip("198.51.100.7"), "untrusted peer");
        assert_eq!(s.client(ip("10.1.1.1"), Some("203.0.113.1, 10.2.2.2")), ip("203.0.113.1"));
        assert_eq!(s.client(ip("10.1.1.1"), Some("6.6.6.6, 203.0.113.1")), ip("203.0.113.1"), "spoofed hop");
        assert_eq!(s.client(ip("10.1.1.1"), None), ip("10.1.1.1"));
        assert_eq!(s.client(ip("10.1.1.1"), Some("junk")), ip("10.1.1.1"));
        let e = MirrorSettings::parse(MirrorSettingsInput { threshold_pct: 0, ..Default::default() });
        assert_eq!(e.unwrap_err().field(), "threshold_pct");
    }
}
