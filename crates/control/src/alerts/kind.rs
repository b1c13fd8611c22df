//! What an alert is, typed: its kind, what it is about (which makes its key) and its details,
//! one variant per kind of [`Firing`]. The book stores alerts as the API shows them (the key a
//! string, the details JSON); everything that fires or resolves one goes through these types,
//! so a kind cannot be misspelt, nor fired about the wrong thing or with another kind's
//! details.

use std::borrow::Borrow;
use std::cmp::Ordering;
use std::fmt;
use std::hash::{Hash, Hasher};
use std::net::IpAddr;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use vantage_core::Timestamp;
use vantage_core::ids::{ClusterId, LineId, MonitorId, NodeId, ProberId, RuleId};
use vantage_core::model::AllDown;
use vantage_core::monitor::{GlobalVerdict, RegionHealth};
use vantage_core::rules::{Action, Comparison, Metric};

use crate::config::Config;
use crate::target::TargetKey;

/// The kinds of alert. Ordered, hashed and borrowed as their names, so a map keyed by kind is
/// also looked up by name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum AlertKind {
    /// A rule acts on a node.
    SchedulingAction,
    /// An address of a node is unreachable.
    AddressUnreachable,
    /// A line's records are held by the mass-removal protection.
    RevisionHeld,
    /// Every node of a line is down; it answers by its all-down policy.
    LineAllDown,
    /// An address's certificate expires within the warning window (or has expired).
    CertificateExpiring,
    /// An enabled prober has not called within its online window.
    ProberOffline,
    /// An enrolled node agent sends no heartbeat.
    NodeOffline,
    /// The probers (not an operator) block a mirror.
    MirrorBlocked,
    /// A mirror is further behind its reference than it may be.
    MirrorStale,
    /// A monitor is down for its audience.
    MonitorDown,
    /// A monitor is degraded.
    MonitorDegraded,
    /// A test notice an operator sent to a channel (`POST /v1/webhooks/{id}/test`); never in
    /// the alert book.
    Test,
    /// A kind this version does not know (a book saved by a newer one, read after a rollback;
    /// a newer server's list read by an older `ctl`): kept, rather than the whole book lost.
    #[serde(other)]
    Unknown,
}

impl AlertKind {
    /// Every kind an alert of the book can be (not `unknown`, not `test`).
    const FIRED: [AlertKind; 11] = [
        AlertKind::SchedulingAction,
        AlertKind::AddressUnreachable,
        AlertKind::RevisionHeld,
        AlertKind::LineAllDown,
        AlertKind::CertificateExpiring,
        AlertKind::ProberOffline,
        AlertKind::NodeOffline,
        AlertKind::MirrorBlocked,
        AlertKind::MirrorStale,
        AlertKind::MonitorDown,
        AlertKind::MonitorDegraded,
    ];

    /// The names of [`FIRED`](Self::FIRED), for matchers and the refusals that list them.
    pub fn names() -> impl Iterator<Item = &'static str> {
        Self::FIRED.into_iter().map(AlertKind::as_str)
    }

    /// The name, as the API, the metrics and the key write it.
    pub fn as_str(self) -> &'static str {
        match self {
            AlertKind::SchedulingAction => "scheduling_action",
            AlertKind::AddressUnreachable => "address_unreachable",
            AlertKind::RevisionHeld => "revision_held",
            AlertKind::LineAllDown => "line_all_down",
            AlertKind::CertificateExpiring => "certificate_expiring",
            AlertKind::ProberOffline => "prober_offline",
            AlertKind::NodeOffline => "node_offline",
            AlertKind::MirrorBlocked => "mirror_blocked",
            AlertKind::MirrorStale => "mirror_stale",
            AlertKind::MonitorDown => "monitor_down",
            AlertKind::MonitorDegraded => "monitor_degraded",
            AlertKind::Test => "test",
            AlertKind::Unknown => "unknown",
        }
    }

    /// The kind a line's hold alerts as under `policy`.
    pub fn of_hold(policy: AllDown) -> AlertKind {
        if policy == AllDown::Hold { AlertKind::RevisionHeld } else { AlertKind::LineAllDown }
    }
}

impl fmt::Display for AlertKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl PartialEq<&str> for AlertKind {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

impl PartialOrd for AlertKind {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for AlertKind {
    fn cmp(&self, other: &Self) -> Ordering {
        self.as_str().cmp(other.as_str())
    }
}

impl Hash for AlertKind {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.as_str().hash(state);
    }
}

impl Borrow<str> for AlertKind {
    fn borrow(&self) -> &str {
        self.as_str()
    }
}

/// What an alert is about: with its kind, this makes the alert's key (one open alert per key).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AlertAbout {
    /// A rule's action on a node.
    RuleOn {
        rule: RuleId,
        node: NodeId,
    },
    /// One address of a node.
    Address {
        node: NodeId,
        ip: IpAddr,
    },
    /// One line of a cluster.
    Line {
        cluster: ClusterId,
        line: LineId,
    },
    /// The certificate one address serves on one port.
    Certificate(TargetKey),
    Prober(ProberId),
    Node(NodeId),
    /// A mirror, by host.
    Mirror(String),
    Monitor(MonitorId),
}

impl fmt::Display for AlertAbout {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AlertAbout::RuleOn { rule, node } => write!(f, "rule:{rule}/node:{node}"),
            AlertAbout::Address { node, ip } => write!(f, "node:{node}/{ip}"),
            AlertAbout::Line { cluster, line } => write!(f, "cluster:{cluster}/line:{line}"),
            AlertAbout::Certificate(target) => write!(f, "{target}"),
            AlertAbout::Prober(id) => write!(f, "prober:{id}"),
            AlertAbout::Node(id) => write!(f, "node:{id}"),
            AlertAbout::Mirror(host) => f.write_str(host),
            AlertAbout::Monitor(id) => write!(f, "monitor:{id}"),
        }
    }
}

/// An alert's key, typed: `{kind}/{about}` (`scheduling_action/rule:3/node:7`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AlertKey {
    pub kind: AlertKind,
    pub about: AlertAbout,
}

impl AlertKey {
    pub fn new(kind: AlertKind, about: AlertAbout) -> AlertKey {
        AlertKey { kind, about }
    }

    /// The cluster and node the alert's events are about (a node's cluster when it names a
    /// node only).
    pub fn place(&self, c: &Config) -> (Option<ClusterId>, Option<NodeId>) {
        if let AlertAbout::Line { cluster, .. } = &self.about {
            return (Some(*cluster), None);
        }
        let node = self.about.node();
        (node.and_then(|n| c.nodes.get(&n.0)).map(|n| n.value.cluster), node)
    }
}

impl fmt::Display for AlertKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.kind, self.about)
    }
}

/// A key the alert book holds read back (an error: a kind or a shape this version does not
/// know), so a held alert's subject is known again without keeping it twice.
impl std::str::FromStr for AlertKey {
    type Err = ();
    fn from_str(s: &str) -> Result<Self, ()> {
        let (kind, about) = s.split_once('/').ok_or(())?;
        let kind = AlertKind::FIRED.into_iter().find(|k| k.as_str() == kind).ok_or(())?;
        Ok(AlertKey { kind, about: about.parse()? })
    }
}

impl std::str::FromStr for AlertAbout {
    type Err = ();
    fn from_str(s: &str) -> Result<Self, ()> {
        fn id<T: std::str::FromStr>(s: &str) -> Result<T, ()> {
            s.parse().map_err(|_| ())
        }
        let pair = |prefix: &str| s.strip_prefix(prefix).and_then(|rest| rest.split_once('/'));
        if let Some((rule, node)) = pair("rule:") {
            return Ok(AlertAbout::RuleOn {
                rule: id(rule)?,
                node: id(node.strip_prefix("node:").ok_or(())?)?,
            });
        }
        if let Some((cluster, line)) = pair("cluster:") {
            let line = id(line.strip_prefix("line:").ok_or(())?)?;
            return Ok(AlertAbout::Line { cluster: id(cluster)?, line });
        }
        if let Some((node, ip)) = pair("node:") {
            return Ok(AlertAbout::Address { node: id(node)?, ip: id(ip)? });
        }
        if let Some(node) = s.strip_prefix("node:") {
            return Ok(AlertAbout::Node(id(node)?));
        }
        if let Some(prober) = s.strip_prefix("prober:") {
            return Ok(AlertAbout::Prober(id(prober)?));
        }
        if let Some(monitor) = s.strip_prefix("monitor:") {
            return Ok(AlertAbout::Monitor(id(monitor)?));
        }
        if let Ok(target) = s.parse::<TargetKey>() {
            return Ok(AlertAbout::Certificate(target));
        }
        // A mirror's host is a DNS name: no `/`, no `:`.
        if s.is_empty() || s.contains(['/', ':']) {
            return Err(());
        }
        Ok(AlertAbout::Mirror(s.to_owned()))
    }
}

impl AlertAbout {
    /// The node it is about, when it is about one (a rule's action on it, one of its
    /// addresses or certificates, its agent).
    pub fn node(&self) -> Option<NodeId> {
        match self {
            AlertAbout::RuleOn { node, .. } | AlertAbout::Address { node, .. } | AlertAbout::Node(node) => {
                Some(*node)
            }
            AlertAbout::Certificate(target) => Some(target.node),
            AlertAbout::Line { .. }
            | AlertAbout::Prober(_)
            | AlertAbout::Mirror(_)
            | AlertAbout::Monitor(_) => None,
        }
    }
}

/// An alert to fire: what it is about with the details of its kind.
#[derive(Debug, Clone, PartialEq)]
pub enum Firing {
    SchedulingAction { rule: RuleId, node: NodeId, details: RuleAction },
    AddressUnreachable { node: NodeId, ip: IpAddr, details: AddressDown },
    RevisionHeld { cluster: ClusterId, line: LineId, details: LineHeld },
    LineAllDown { cluster: ClusterId, line: LineId, details: LineHeld },
    CertificateExpiring { target: TargetKey, details: CertificateExpiry },
    ProberOffline { prober: ProberId, details: ProberSilent },
    NodeOffline { node: NodeId, details: NodeSilent },
    MirrorBlocked(MirrorBlocked),
    MirrorStale(MirrorStale),
    MonitorDown { monitor: MonitorId, details: MonitorAlert },
    MonitorDegraded { monitor: MonitorId, details: MonitorAlert },
}

impl Firing {
    pub fn key(&self) -> AlertKey {
        use Firing as F;
        let (kind, about) = match self {
            F::SchedulingAction { rule, node, .. } => {
                (AlertKind::SchedulingAction, AlertAbout::RuleOn { rule: *rule, node: *node })
            }
            F::AddressUnreachable { node, ip, .. } => {
                (AlertKind::AddressUnreachable, AlertAbout::Address { node: *node, ip: *ip })
            }
            F::RevisionHeld { cluster, line, .. } => {
                (AlertKind::RevisionHeld, AlertAbout::Line { cluster: *cluster, line: *line })
            }
            F::LineAllDown { cluster, line, .. } => {
                (AlertKind::LineAllDown, AlertAbout::Line { cluster: *cluster, line: *line })
            }
            F::CertificateExpiring { target, .. } => {
                (AlertKind::CertificateExpiring, AlertAbout::Certificate(*target))
            }
            F::ProberOffline { prober, .. } => (AlertKind::ProberOffline, AlertAbout::Prober(*prober)),
            F::NodeOffline { node, .. } => (AlertKind::NodeOffline, AlertAbout::Node(*node)),
            F::MirrorBlocked(d) => (AlertKind::MirrorBlocked, AlertAbout::Mirror(d.host.clone())),
            F::MirrorStale(d) => (AlertKind::MirrorStale, AlertAbout::Mirror(d.host.clone())),
            F::MonitorDown { monitor, .. } => (AlertKind::MonitorDown, AlertAbout::Monitor(*monitor)),
            F::MonitorDegraded { monitor, .. } => (AlertKind::MonitorDegraded, AlertAbout::Monitor(*monitor)),
        };
        AlertKey { kind, about }
    }

    /// The details as the book keeps and the API shows them.
    pub fn details(&self) -> Value {
        use Firing as F;
        let json = match self {
            F::SchedulingAction { details, .. } => serde_json::to_value(details),
            F::AddressUnreachable { details, .. } => serde_json::to_value(details),
            F::RevisionHeld { details, .. } | F::LineAllDown { details, .. } => serde_json::to_value(details),
            F::CertificateExpiring { details, .. } => serde_json::to_value(details),
            F::ProberOffline { details, .. } => serde_json::to_value(details),
            F::NodeOffline { details, .. } => serde_json::to_value(details),
            F::MirrorBlocked(details) => serde_json::to_value(details),
            F::MirrorStale(details) => serde_json::to_value(details),
            F::MonitorDown { details, .. } | F::MonitorDegraded { details, .. } => {
                serde_json::to_value(details)
            }
        };
        // Plain structs of strings, numbers and enums: they always serialize.
        json.unwrap_or(Value::Null)
    }
}

/// A rule acting on a node, or no longer: the alert's details, and the event's and the audit
/// entry's.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RuleAction {
    /// Cluster name.
    pub cluster: String,
    /// Rule name.
    pub rule: String,
    /// Node name.
    pub node: String,
    pub action: Action,
    /// Line name (`None`: every line).
    pub line: Option<String>,
    /// Each condition with its value at the time.
    pub values: Vec<ConditionValue>,
    /// The revision it made.
    pub revision: u32,
    /// Why the action changed nothing, when it did not.
    pub no_effect: Option<String>,
}

/// One condition of a rule with the value it had.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ConditionValue {
    pub metric: Metric,
    /// `None`: no value (no data).
    pub value: Option<f64>,
    pub comparison: Comparison,
    pub threshold: f64,
}

/// An unreachable address.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AddressDown {
    /// Cluster name.
    pub cluster: String,
    /// Node name.
    pub node: String,
    pub address: String,
    /// The flap damping multiplier of its way back (1: not damped).
    pub damping: u32,
}

/// A line answering by its all-down policy.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LineHeld {
    /// Cluster name.
    pub cluster: String,
    /// Line name.
    pub line: String,
    pub policy: AllDown,
    pub reason: String,
}

/// A certificate near or past its end.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CertificateExpiry {
    /// Node name.
    pub node: String,
    pub address: String,
    pub port: u16,
    pub not_after: Timestamp,
}

/// A silent prober.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ProberSilent {
    /// Prober name.
    pub prober: String,
    pub last_seen: Option<Timestamp>,
}

/// A silent node agent.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct NodeSilent {
    /// Node name.
    pub node: String,
    pub last_heartbeat: Option<Timestamp>,
}

/// A mirror the probers block.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MirrorBlocked {
    pub host: String,
    /// Codes of the regions failing it.
    pub regions: Option<Vec<String>>,
}

/// A mirror behind its reference.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MirrorStale {
    pub host: String,
    pub lag_s: Option<i64>,
}

/// A monitor down or degraded.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MonitorAlert {
    /// Monitor name.
    pub monitor: String,
    pub severity: Severity,
    pub verdict: GlobalVerdict,
    pub down_weight_pct: f64,
    pub stale_weight_pct: f64,
    /// Regions down or stale.
    pub regions: Vec<RegionState>,
}

/// How urgent, for receivers that page on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Severity {
    Critical,
    Warning,
}

/// A region's health in a monitor's alert.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RegionState {
    /// Region code.
    pub region: String,
    pub health: RegionHealth,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_read_as_before_and_kinds_order_by_name() {
        let key = AlertKey::new(
            AlertKind::SchedulingAction,
            AlertAbout::RuleOn { rule: RuleId(3), node: NodeId(7) },
        );
        assert_eq!(key.to_string(), "scheduling_action/rule:3/node:7");
        let target = TargetKey { node: NodeId(12), ip: "192.0.2.1".parse().unwrap(), port: 443 };
        assert_eq!(
            AlertKey::new(AlertKind::CertificateExpiring, AlertAbout::Certificate(target)).to_string(),
            format!("certificate_expiring/{target}")
        );
        assert_eq!(serde_json::to_value(AlertKind::LineAllDown).unwrap(), "line_all_down");
        let mut kinds = [AlertKind::NodeOffline, AlertKind::AddressUnreachable, AlertKind::MirrorBlocked];
        kinds.sort();
        assert_eq!(
            kinds.iter().map(|k| k.as_str()).collect::<Vec<_>>(),
            ["address_unreachable", "mirror_blocked", "node_offline"]
        );
        let later: AlertKind =
            serde_json::from_value(serde_json::json!("a_kind_of_a_later_version")).unwrap();
        assert_eq!(later, AlertKind::Unknown, "a book from a newer version still loads");
        let counts: std::collections::BTreeMap<AlertKind, usize> = [(AlertKind::NodeOffline, 2)].into();
        assert_eq!(counts.get("node_offline"), Some(&2));
    }

    /// Every subject's key reads back as itself, so a held alert's subject is known from the
    /// book alone; a key of another shape reads as nothing.
    #[test]
    fn keys_read_back() {
        let ip: IpAddr = "2001:db8::1".parse().unwrap();
        let target = TargetKey { node: NodeId(12), ip, port: 443 };
        let keys = [
            (AlertKind::SchedulingAction, AlertAbout::RuleOn { rule: RuleId(3), node: NodeId(7) }),
            (AlertKind::AddressUnreachable, AlertAbout::Address { node: NodeId(7), ip }),
            (AlertKind::RevisionHeld, AlertAbout::Line { cluster: ClusterId(1), line: LineId(4) }),
            (AlertKind::CertificateExpiring, AlertAbout::Certificate(target)),
            (AlertKind::ProberOffline, AlertAbout::Prober(ProberId(2))),
            (AlertKind::NodeOffline, AlertAbout::Node(NodeId(9))),
            (AlertKind::MirrorBlocked, AlertAbout::Mirror("mirror.example.net".into())),
            (AlertKind::MonitorDown, AlertAbout::Monitor(MonitorId(5))),
        ];
        for (kind, about) in keys {
            let key = AlertKey::new(kind, about);
            assert_eq!(key.to_string().parse::<AlertKey>(), Ok(key.clone()), "{key}");
        }
        for bad in ["", "node_offline", "nonsense/node:1", "node_offline/node:x", "mirror_blocked/a:b"] {
            assert_eq!(bad.parse::<AlertKey>(), Err(()), "{bad}");
        }
    }
}
