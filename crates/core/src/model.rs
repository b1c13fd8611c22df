//! The configuration objects of §1 as validated values: regions, clusters, node groups,
//! lines and nodes. References between objects (a line's group exists in its cluster…) are
//! checked by the registry that holds them; shapes and ranges are checked here.

use serde::{Deserialize, Serialize};

use crate::check::{Check, Listener};
use crate::error::{Error, Result, in_range, name};
use crate::geo::{Continent, Country, Places};
use crate::ids::{GroupId, RegionId};
use crate::net::IpNet;

/// Longest name of a region, cluster, group, line, node or prober.
pub const MAX_NAME: usize = 64;

/// Validates a display name (of a prober, node…): trimmed, 1–64 characters, no control
/// characters.
pub fn display_name(field: &str, text: &str) -> Result<String> {
    name(field, text, MAX_NAME)
}

/// Validates a DNS name (`cdn.example.net`): labels of letters, digits and hyphens, 1–63
/// characters each, at most 253 in all, at least two labels. Returns it lower-cased without a
/// trailing dot.
pub fn dns_name(field: &str, text: &str) -> Result<String> {
    let t = text.trim().trim_end_matches('.').to_ascii_lowercase();
    let bad = |why: &str| Err(Error::invalid(field, format!("not a DNS name ({why}): {text:?}")));
    if t.is_empty() || t.len() > 253 {
        return bad("1 to 253 characters");
    }
    let labels: Vec<&str> = t.split('.').collect();
    if labels.len() < 2 {
        return bad("needs at least two labels");
    }
    for l in &labels {
        if l.is_empty() || l.len() > 63 {
            return bad("each label 1 to 63 characters");
        }
        if !l.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-') {
            return bad("letters, digits and hyphens only");
        }
        if l.starts_with('-') || l.ends_with('-') {
            return bad("a label may not start or end with a hyphen");
        }
    }
    Ok(t)
}

/// A region: a geographic label for probers and node groups.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(utoipa::ToSchema))]
#[serde(try_from = "RegionInput")]
#[non_exhaustive]
pub struct Region {
    /// Short code like `ap-sg`: lower-case letters, digits and hyphens, 2–32 characters.
    pub code: String,
    /// Name like "Singapore".
    pub name: String,
    /// Networks whose clients are in this region: a door keeps them away from mirrors that
    /// fail here. Empty: no client maps to the region by its address.
    pub client_networks: Vec<IpNet>,
    /// The places (by the geo database) whose clients are in this region, when no region's
    /// network holds them.
    #[serde(flatten)]
    pub places: Places,
}

/// A region as entered.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct RegionInput {
    pub code: String,
    pub name: String,
    /// Client networks (none by default; regions stored before they existed have none).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub client_networks: Vec<IpNet>,
    /// Countries (ISO 3166-1 alpha-2 codes) whose clients are in it, by the geo database.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub countries: Vec<Country>,
    /// Continents (`EU`, `AS`…) whose clients are in it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub continents: Vec<Continent>,
    /// Autonomous system numbers whose clients are in it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub asns: Vec<u32>,
}

impl From<Region> for RegionInput {
    fn from(r: Region) -> Self {
        RegionInput {
            code: r.code,
            name: r.name,
            client_networks: r.client_networks,
            countries: r.places.countries,
            continents: r.places.continents,
            asns: r.places.asns,
        }
    }
}

impl TryFrom<RegionInput> for Region {
    type Error = Error;
    fn try_from(i: RegionInput) -> Result<Self> {
        let code = i.code.trim().to_owned();
        let ok = (2..=32).contains(&code.len())
            && code.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
            && !code.starts_with('-')
            && !code.ends_with('-');
        if !ok {
            return Err(Error::invalid(
                "code",
                format!(
                    "must be 2 to 32 lower-case letters, digits and inner hyphens (like ap-sg), got {:?}",
                    i.code
                ),
            ));
        }
        let mut client_networks = i.client_networks;
        client_networks.sort();
        client_networks.dedup();
        let places = Places::new(i.countries, i.continents, i.asns)?;
        Ok(Region { code, name: name("name", &i.name, MAX_NAME)?, client_networks, places })
    }
}

/// How a cluster's DNS records are made.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum DnsMode {
    /// Records follow reachability, levels, backup groups and rules.
    #[default]
    Automatic,
    /// Primary addresses only; no reachability, no rules.
    Manual,
}

/// What a line answers when health leaves it with nothing healthy, or would take more than the
/// mass-removal limit of its records at once.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum AllDown {
    /// Keep the previous records (the revision is held, and says why).
    #[default]
    Hold,
    /// Every online node of the cluster (primary addresses): the agents' heartbeats vouch
    /// for them when the probers cannot.
    Online,
    /// Fail closed: no records (NOERROR, no data).
    Nodata,
}

impl AllDown {
    /// Its name, as entered.
    pub fn as_str(self) -> &'static str {
        match self {
            AllDown::Hold => "hold",
            AllDown::Online => "online",
            AllDown::Nodata => "nodata",
        }
    }
}

/// A cluster: nodes serving one DNS domain on a set of listeners.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(utoipa::ToSchema))]
#[serde(try_from = "ClusterInput")]
#[non_exhaustive]
pub struct Cluster {
    /// Name, unique.
    pub name: String,
    /// The DNS domain (`cdn.example.net`), unique across clusters.
    pub domain: String,
    /// Further names answered like the domain.
    pub aliases: Vec<String>,
    /// DNS mode.
    pub dns_mode: DnsMode,
    /// TTL of the records, s (1–86400, 30).
    pub ttl: u32,
    /// TTL of a line's records while one of them is failing but not yet unreachable, s
    /// (1–`ttl`; absent: half the TTL, at least 5 s), so resolvers ask again about when the
    /// revision that drops it lands.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub suspect_ttl: Option<u32>,
    /// The listeners every node serves (1–16, distinct ports).
    pub listeners: Vec<Listener>,
    /// The cluster's own check of its listeners (path, host, request, expected status…);
    /// absent: the named check [`check_name`](Self::check_name), else the check named
    /// `default`, else the built-in cluster check.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub check: Option<Check>,
    /// The named check its listeners are probed with (never together with `check`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub check_name: Option<String>,
    /// A change may remove at most this % of a line's records at once (1–100, 50).
    pub mass_removal_pct: u32,
    /// Only nodes whose agent is connected (heartbeat within 45 s) are answered.
    pub agent_required: bool,
    /// Links (by name) that must have had a handshake within 180 s for a node to be answered.
    pub required_links: Vec<String>,
    /// External DNS servers each revision is pushed to.
    pub publishers: Vec<PublisherSpec>,
}

/// TSIG algorithms a publisher may sign with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(utoipa::ToSchema))]
pub enum TsigAlgorithm {
    #[serde(rename = "hmac-sha256")]
    HmacSha256,
    #[serde(rename = "hmac-sha384")]
    HmacSha384,
    #[serde(rename = "hmac-sha512")]
    HmacSha512,
}

/// Where and how a cluster's revisions are pushed: an RFC 2136 UPDATE signed with TSIG.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(try_from = "PublisherInput", into = "PublisherInput")]
#[non_exhaustive]
pub struct PublisherSpec {
    /// Name, unique within the cluster.
    pub name: String,
    /// The primary server accepting updates (`192.0.2.53:53`).
    pub server: std::net::SocketAddr,
    /// The zone to update; `None`: the cluster's domain.
    pub zone: Option<String>,
    /// TSIG key name.
    pub key_name: String,
    /// TSIG algorithm.
    pub key_algorithm: TsigAlgorithm,
    /// TSIG secret, base64.
    pub key_secret: String,
}

/// A publisher as entered.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct PublisherInput {
    pub name: String,
    /// Server address.
    #[cfg_attr(feature = "schema", schema(value_type = String, example = "192.0.2.53:53"))]
    pub server: std::net::SocketAddr,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub zone: Option<String>,
    /// TSIG key name.
    pub key_name: String,
    /// TSIG algorithm (`hmac-sha256` by default).
    #[serde(default = "sha256")]
    pub key_algorithm: TsigAlgorithm,
    /// TSIG secret, base64.
    pub key_secret: String,
}

fn sha256() -> TsigAlgorithm {
    TsigAlgorithm::HmacSha256
}

impl From<PublisherSpec> for PublisherInput {
    fn from(p: PublisherSpec) -> Self {
        PublisherInput {
            name: p.name,
            server: p.server,
            zone: p.zone,
            key_name: p.key_name,
            key_algorithm: p.key_algorithm,
            key_secret: p.key_secret,
        }
    }
}

impl TryFrom<PublisherInput> for PublisherSpec {
    type Error = Error;
    fn try_from(i: PublisherInput) -> Result<Self> {
        let zone = i.zone.as_deref().map(|z| dns_name("zone", z)).transpose()?;
        let key_name = i.key_name.trim().trim_end_matches('.').to_ascii_lowercase();
        let label_ok = |l: &str| {
            !l.is_empty()
                && l.len() <= 63
                && l.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        };
        if key_name.is_empty() || key_name.len() > 253 || !key_name.split('.').all(label_ok) {
            return Err(Error::invalid("key_name", format!("not a TSIG key name: {:?}", i.key_name)));
        }
        let secret = i.key_secret.trim();
        let b64 = |c: char| c.is_ascii_alphanumeric() || matches!(c, '+' | '/' | '=');
        if secret.len() < 16 || !secret.len().is_multiple_of(4) || !secret.chars().all(b64) {
            return Err(Error::invalid(
                "key_secret",
                "must be the key's base64 secret (at least 16 characters)",
            ));
        }
        Ok(PublisherSpec {
            name: name("name", &i.name, MAX_NAME)?,
            server: i.server,
            zone,
            key_name,
            key_algorithm: i.key_algorithm,
            key_secret: secret.to_owned(),
        })
    }
}

/// A cluster as entered.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(utoipa::ToSchema))]
#[serde(default, deny_unknown_fields)]
pub struct ClusterInput {
    pub name: String,
    pub domain: String,
    pub aliases: Vec<String>,
    /// DNS mode.
    pub dns_mode: DnsMode,
    /// TTL, s.
    pub ttl: u32,
    /// TTL while an address of the line is suspect, s.
    pub suspect_ttl: Option<u32>,
    pub listeners: Vec<Listener>,
    /// The cluster's own check (absent: `check_name`, else the check named `default`, else the
    /// built-in cluster check).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub check: Option<Check>,
    /// A named check to probe the listeners with, instead of an own `check`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub check_name: Option<String>,
    /// Mass-removal limit, %.
    pub mass_removal_pct: u32,
    /// Agents required.
    pub agent_required: bool,
    /// Links required fresh.
    pub required_links: Vec<String>,
    pub publishers: Vec<PublisherSpec>,
}

impl Default for ClusterInput {
    fn default() -> Self {
        ClusterInput {
            name: String::new(),
            domain: String::new(),
            aliases: Vec::new(),
            dns_mode: DnsMode::Automatic,
            ttl: 30,
            suspect_ttl: None,
            listeners: vec![Listener {
                port: 80,
                protocol: crate::check::Protocol::Http,
                proxy_protocol: false,
            }],
            check: None,
            check_name: None,
            mass_removal_pct: 50,
            agent_required: false,
            required_links: Vec::new(),
            publishers: Vec::new(),
        }
    }
}

impl From<Cluster> for ClusterInput {
    fn from(c: Cluster) -> Self {
        ClusterInput {
            name: c.name,
            domain: c.domain,
            aliases: c.aliases,
            dns_mode: c.dns_mode,
            ttl: c.ttl,
            suspect_ttl: c.suspect_ttl,
            listeners: c.listeners,
            check: c.check,
            check_name: c.check_name,
            mass_removal_pct: c.mass_removal_pct,
            agent_required: c.agent_required,
            required_links: c.required_links,
            publishers: c.publishers,
        }
    }
}

impl TryFrom<ClusterInput> for Cluster {
    type Error = Error;
    fn try_from(i: ClusterInput) -> Result<Self> {
        let name = name("name", &i.name, MAX_NAME)?;
        let domain = dns_name("domain", &i.domain)?;
        let mut aliases: Vec<String> = Vec::with_capacity(i.aliases.len());
        for (n, a) in i.aliases.iter().enumerate() {
            let a = dns_name(&format!("aliases[{n}]"), a)?;
            if a == domain || aliases.contains(&a) {
                return Err(Error::invalid(format!("aliases[{n}]"), format!("{a} is listed twice")));
            }
            aliases.push(a);
        }
        let ttl = in_range("ttl", i.ttl, 1, 86_400)?;
        if let Some(short) = i.suspect_ttl {
            in_range("suspect_ttl", short, 1, ttl).map_err(|_| {
                Error::invalid("suspect_ttl", format!("must be between 1 and the ttl ({ttl}), got {short}"))
            })?;
        }
        if i.listeners.is_empty() || i.listeners.len() > 16 {
            return Err(Error::invalid("listeners", format!("1 to 16 listeners, got {}", i.listeners.len())));
        }
        for (n, l) in i.listeners.iter().enumerate() {
            if l.port == 0 {
                return Err(Error::invalid(
                    format!("listeners[{n}].port"),
                    "must be between 1 and 65535, got 0",
                ));
            }
            if i.listeners[..n].iter().any(|o| o.port == l.port) {
                return Err(Error::invalid(
                    format!("listeners[{n}].port"),
                    format!("port {} is listed twice", l.port),
                ));
            }
        }
        let check_name = i.check_name.map(|n| crate::error::name("check_name", &n, MAX_NAME)).transpose()?;
        if check_name.is_some() && i.check.is_some() {
            return Err(Error::invalid(
                "check_name",
                "give either the cluster's own check or the name of a check, not both",
            ));
        }
        let mass_removal_pct = in_range("mass_removal_pct", i.mass_removal_pct, 1, 100)?;
        for (n, l) in i.required_links.iter().enumerate() {
            crate::error::name(&format!("required_links[{n}]"), l, MAX_NAME)?;
        }
        for (n, p) in i.publishers.iter().enumerate() {
            if i.publishers[..n].iter().any(|o| o.name == p.name) {
                return Err(Error::invalid(
                    format!("publishers[{n}].name"),
                    format!("{:?} is listed twice", p.name),
                ));
            }
        }
        Ok(Cluster {
            name,
            domain,
            aliases,
            dns_mode: i.dns_mode,
            ttl,
            suspect_ttl: i.suspect_ttl,
            listeners: i.listeners,
            check: i.check,
            check_name,
            mass_removal_pct,
            agent_required: i.agent_required,
            required_links: i.required_links,
            publishers: i.publishers,
        })
    }
}

impl Cluster {
    /// The TTL of a line's records while one of them is suspect: the configured one, else half
    /// the TTL but at least 5 s, never longer than the TTL.
    pub fn suspect_ttl_s(&self) -> u32 {
        self.suspect_ttl.unwrap_or((self.ttl / 2).max(5)).min(self.ttl)
    }

    /// Every name the cluster answers: the domain, then the aliases.
    pub fn zones(&self) -> impl Iterator<Item = &str> {
        std::iter::once(self.domain.as_str()).chain(self.aliases.iter().map(String::as_str))
    }
}

/// A node group: nodes of one cluster in one place.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(utoipa::ToSchema))]
#[serde(try_from = "GroupInput")]
#[non_exhaustive]
pub struct NodeGroup {
    /// Name, unique within the cluster.
    pub name: String,
    /// Region, when the group has one (needed for nodes that also probe).
    pub region: Option<RegionId>,
    /// Drained by an operator: every node of the group leaves the answers and stays probed.
    /// Written only when set: a server older than the field refuses a stored group that has
    /// it (and so refuses to start, or skips the change on a replica) while it is set.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub drained: bool,
}

/// A node group as entered.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(utoipa::ToSchema))]
#[serde(default, deny_unknown_fields)]
pub struct GroupInput {
    pub name: String,
    pub region: Option<RegionId>,
    pub drained: bool,
}

impl TryFrom<GroupInput> for NodeGroup {
    type Error = Error;
    fn try_from(i: GroupInput) -> Result<Self> {
        Ok(NodeGroup { name: name("name", &i.name, MAX_NAME)?, region: i.region, drained: i.drained })
    }
}

/// A line: one DNS answer set of a cluster.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(utoipa::ToSchema))]
#[serde(try_from = "LineInput")]
#[non_exhaustive]
pub struct Line {
    /// Name, unique within the cluster.
    pub name: String,
    /// The node group that answers.
    pub group: GroupId,
    /// Groups tried in order when the group has fewer than `min_healthy` healthy addresses.
    pub backup_groups: Vec<GroupId>,
    /// Minimum healthy addresses (1–64, 1).
    pub min_healthy: u32,
    /// Client networks this line answers; with no network and no place: the default line.
    pub client_networks: Vec<IpNet>,
    /// The places (by the geo database) whose clients it answers, when no line's network
    /// holds them.
    #[serde(flatten)]
    pub places: Places,
    /// What it answers when health leaves it with nothing healthy (`hold`).
    pub all_down: AllDown,
    /// Latency steering: its groups (its group and backup groups) ordered by the RTT its
    /// probers in this region measure, with hysteresis; `None`: in the order configured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency_region: Option<RegionId>,
}

impl Line {
    /// The default line: the one for clients no other line claims (no network, no place).
    pub fn is_default(&self) -> bool {
        self.client_networks.is_empty() && self.places.is_empty()
    }
}

/// A line as entered.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(utoipa::ToSchema))]
#[serde(default, deny_unknown_fields)]
pub struct LineInput {
    pub name: String,
    pub group: GroupId,
    /// Backup groups in order.
    pub backup_groups: Vec<GroupId>,
    /// Minimum healthy addresses.
    pub min_healthy: u32,
    /// Client networks.
    pub client_networks: Vec<IpNet>,
    /// Countries (ISO 3166-1 alpha-2 codes) whose clients it answers, by the geo database.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub countries: Vec<Country>,
    /// Continents (`EU`, `AS`…) whose clients it answers.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub continents: Vec<Continent>,
    /// Autonomous system numbers whose clients it answers.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub asns: Vec<u32>,
    /// All-down policy (`hold`; lines stored before it existed hold).
    pub all_down: AllDown,
    /// The region whose probers' RTT orders its groups (none: the configured order).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub latency_region: Option<RegionId>,
}

impl Default for LineInput {
    fn default() -> Self {
        LineInput {
            name: String::new(),
            group: GroupId(0),
            backup_groups: Vec::new(),
            min_healthy: 1,
            client_networks: Vec::new(),
            countries: Vec::new(),
            continents: Vec::new(),
            asns: Vec::new(),
            all_down: AllDown::Hold,
            latency_region: None,
        }
    }
}

impl TryFrom<LineInput> for Line {
    type Error = Error;
    fn try_from(i: LineInput) -> Result<Self> {
        let name = name("name", &i.name, MAX_NAME)?;
        for (n, g) in i.backup_groups.iter().enumerate() {
            if *g == i.group || i.backup_groups[..n].contains(g) {
                return Err(Error::invalid(
                    format!("backup_groups[{n}]"),
                    "a group may appear once, and not as its own backup",
                ));
            }
        }
        let min_healthy = in_range("min_healthy", i.min_healthy, 1, 64)?;
        if i.latency_region.is_some() && i.backup_groups.is_empty() {
            return Err(Error::invalid(
                "latency_region",
                "latency steering orders the line's group and its backup groups: give it a backup group",
            ));
        }
        let mut nets = i.client_networks;
        nets.sort();
        nets.dedup();
        let places = Places::new(i.countries, i.continents, i.asns)?;
        Ok(Line {
            name,
            group: i.group,
            backup_groups: i.backup_groups,
            min_healthy,
            client_networks: nets,
            places,
            all_down: i.all_down,
            latency_region: i.latency_region,
        })
    }
}

/// A node: an edge server of a cluster.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(utoipa::ToSchema))]
#[serde(try_from = "NodeInput")]
#[non_exhaustive]
pub struct Node {
    /// Its group.
    pub group: GroupId,
    /// Name, unique within the cluster.
    pub name: String,
    /// Disabled nodes are neither probed nor answered.
    pub enabled: bool,
    /// Drained by an operator: out of the answers (at once, whatever its health), still
    /// probed, so it can be put back knowing how it fares. Written only when set: a server
    /// older than the field refuses a stored node that has it while it is set.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub drained: bool,
    /// The node's agent runs the prober loop too.
    pub also_probes: bool,
}

/// A node as entered.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(utoipa::ToSchema))]
#[serde(default, deny_unknown_fields)]
pub struct NodeInput {
    pub group: GroupId,
    pub name: String,
    pub enabled: bool,
    /// Drained.
    pub drained: bool,
    /// Also probes.
    pub also_probes: bool,
}

impl Default for NodeInput {
    fn default() -> Self {
        NodeInput {
            group: GroupId(0),
            name: String::new(),
            enabled: true,
            drained: false,
            also_probes: false,
        }
    }
}

impl TryFrom<NodeInput> for Node {
    type Error = Error;
    fn try_from(i: NodeInput) -> Result<Self> {
        Ok(Node {
            group: i.group,
            name: name("name", &i.name, MAX_NAME)?,
            enabled: i.enabled,
            drained: i.drained,
            also_probes: i.also_probes,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dns_names() {
        assert_eq!(dns_name("domain", "CDN.Example.NET.").unwrap(), "cdn.example.net");
        for bad in
            ["", "localhost", "a..b", "-a.b", "a-.b", "a_b.c", "a b.c", &format!("{}.com", "a".repeat(64))]
        {
            assert_eq!(dns_name("domain", bad).unwrap_err().field(), "domain", "{bad}");
        }
    }

    #[test]
    fn region_code_and_name() {
        let r: Region = serde_json::from_str(r#"{"code":"ap-sg","name":"Singapore"}"#).unwrap();
        assert_eq!(r.code, "ap-sg");
        let e =
            Region::try_from(RegionInput { code: "AP SG".into(), name: "x".into(), ..Default::default() })
                .unwrap_err();
        assert_eq!(e.field(), "code");
        let e =
            Region::try_from(RegionInput { code: "eu".into(), name: "x".repeat(65), ..Default::default() })
                .unwrap_err();
        assert_eq!(e.to_string(), "name: must be at most 64 characters, got 65");
    }

    #[test]
    fn cluster_defaults_and_validation() {
        let c: Cluster = serde_json::from_str(r#"{"name":"video","domain":"cdn.example.net"}"#).unwrap();
        assert_eq!((c.ttl, c.mass_removal_pct, c.dns_mode), (30, 50, DnsMode::Automatic));
        assert_eq!(c.listeners.len(), 1);
        let e = serde_json::from_str::<Cluster>(r#"{"name":"v","domain":"cdn.example.net","ttl":0}"#)
            .unwrap_err();
        assert!(e.to_string().contains("ttl: must be between 1 and 86400, got 0"), "{e}");
        let e = serde_json::from_str::<Cluster>(
            r#"{"name":"v","domain":"cdn.example.net","listeners":[{"port":80,"protocol":"http"},{"port":80,"protocol":"https"}]}"#,
        )
        .unwrap_err();
        assert!(e.to_string().contains("listeners[1].port: port 80 is listed twice"), "{e}");
        let e = serde_json::from_str::<Cluster>(r#"{"name":"v","domain":"cdn.example.net","colour":"red"}"#)
            .unwrap_err();
        assert!(e.to_string().contains("colour"), "{e}");
    }

    #[test]
    fn suspect_ttl_defaults_to_half_the_ttl_but_at_least_5_s_and_never_more_than_the_ttl() {
        let c = |extra: &str| {
            serde_json::from_str::<Cluster>(&format!(r#"{{"name":"v","domain":"cdn.example.net"{extra}}}"#))
        };
        assert_eq!(c("").unwrap().suspect_ttl_s(), 15);
        assert_eq!(c(r#","ttl":8"#).unwrap().suspect_ttl_s(), 5);
        assert_eq!(c(r#","ttl":3"#).unwrap().suspect_ttl_s(), 3);
        assert_eq!(c(r#","ttl":300,"suspect_ttl":20"#).unwrap().suspect_ttl_s(), 20);
        let e = c(r#","ttl":30,"suspect_ttl":60"#).unwrap_err().to_string();
        assert!(e.contains("suspect_ttl: must be between 1 and the ttl (30), got 60"), "{e}");
    }

    #[test]
    fn line_backup_groups_are_distinct_and_not_the_group() {
        let e = Line::try_from(LineInput {
            name: "l".into(),
            group: GroupId(1),
            backup_groups: vec![GroupId(1)],
            ..Default::default()
        })
        .unwrap_err();
        assert_eq!(e.field(), "backup_groups[0]");
        let e = Line::try_from(LineInput {
            name: "l".into(),
            group: GroupId(1),
            min_healthy: 0,
            ..Default::default()
        })
        .unwrap_err();
        assert_eq!(e.to_string(), "min_healthy: must be between 1 and 64, got 0");
    }

    #[test]
    fn latency_steering_needs_a_group_to_order() {
        let line = |backups: Vec<GroupId>| {
            Line::try_from(LineInput {
                name: "l".into(),
                group: GroupId(1),
                backup_groups: backups,
                latency_region: Some(RegionId(3)),
                ..Default::default()
            })
        };
        let e = line(Vec::new()).unwrap_err();
        assert_eq!(e.field(), "latency_region");
        assert!(e.to_string().contains("give it a backup group"), "{e}");
        let l = line(vec![GroupId(2)]).unwrap();
        assert_eq!(l.latency_region, Some(RegionId(3)));
        let json = serde_json::to_value(&l).unwrap();
        assert_eq!(json["latency_region"], 3);
        assert_eq!(serde_json::from_value::<Line>(json).unwrap(), l, "read back as written");
    }
}
