//! The admin API's bodies as Rust types: what every `/v1` handler answers and accepts, with
//! the OpenAPI schema each derives. The handlers build these and nothing else; the document at
//! `/v1/openapi.json` is made from the same types, so it cannot drift from what is served.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::ToSchema;
use vantage_control::alerts::{Alert, Hold, Silence, Webhook};
use vantage_control::config::{CheckSource, Probed, TokenState};
use vantage_control::drain::Drain;
use vantage_control::maintenance::{Maintenance, MaintenanceState};
use vantage_control::observe::{ProberStatus, RoundSummary};
use vantage_control::status_page::StatusPage;
use vantage_core::Timestamp;
use vantage_core::address::{AddressSource, Level, SchedulingAddress};
use vantage_core::answer::LineHold;
use vantage_core::check::{Check, Listener};
use vantage_core::evaluate::{LinkState, NodeMetrics, PreviewRow, Records};
use vantage_core::geo::Places;
use vantage_core::ids::{ClusterId, GroupId, LineId, NodeId, RegionId, RuleId};
use vantage_core::model::{AllDown, DnsMode, PublisherInput};
use vantage_core::net::IpNet;
use vantage_core::reachability::{Condition, Reachability, Tally};
use vantage_core::result::ErrorCode;
use vantage_core::rules::Rule;

mod clients;
mod fleet;
mod mirrors;
mod monitors;
pub use clients::*;
pub use fleet::*;
pub use mirrors::*;
pub use monitors::*;

/// A list: `{"items": [...]}`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Items<T> {
    /// The items, in the route's order.
    pub items: Vec<T>,
}

/// An empty list (what a page shows of a stored list while the store is away).
impl<T> Default for Items<T> {
    fn default() -> Self {
        Items { items: Vec::new() }
    }
}

impl<T> From<Vec<T>> for Items<T> {
    fn from(items: Vec<T>) -> Self {
        Items { items }
    }
}

/// The `gap` event of `GET /v1/events/stream` (its SSE `id` is `resume`): events between
/// `after` and `resume` may be missing — past the retention, never stored, not stored yet
/// nor still held, or `after` is newer than any event this server made (another database, a
/// clock set back). The stream goes on after `resume`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct EventGap {
    /// The event the stream had reached.
    pub after: u64,
    /// The stream goes on with the events after this id.
    pub resume: u64,
    /// Why events may be missing.
    pub reason: String,
}

/// An error: `{"error": {"status", "field", "reason"}}`.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct ErrorBody {
    /// What went wrong.
    pub error: ErrorDetail,
}

/// What went wrong, in plain words, naming the field at fault when there is one.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct ErrorDetail {
    /// The HTTP status.
    pub status: u16,
    /// The field at fault (`results[3].target`), when one is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub field: Option<String>,
    /// Why, in plain words.
    pub reason: String,
}

/// A region, with how many probers it has.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct RegionView {
    /// Server-assigned id.
    pub id: i64,
    pub created_at: Timestamp,
    /// Last changed.
    pub updated_at: Timestamp,
    /// Code (`ap-sg`), unique.
    pub code: String,
    /// Name (`Singapore`), unique.
    pub name: String,
    /// Networks whose clients are in this region (doors keep them from mirrors failing here).
    pub client_networks: Vec<IpNet>,
    /// The places (by the geo database) whose clients are in this region.
    #[serde(flatten)]
    pub places: Places,
    /// Probers in it.
    pub probers: usize,
    /// Requests from its clients Vantage saw over the last day — door redirects, steering
    /// polls and DNS address answers: what learned audience weights are shares of.
    #[serde(default)]
    pub requests_day: u64,
}

/// A cluster. TSIG secrets are written, never read back: they show as `(hidden)`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct ClusterView {
    /// Server-assigned id.
    pub id: i64,
    pub created_at: Timestamp,
    /// Last changed.
    pub updated_at: Timestamp,
    /// Name, unique.
    pub name: String,
    /// The DNS domain it serves.
    pub domain: String,
    /// Further domains with the same answers.
    pub aliases: Vec<String>,
    /// `automatic` (reachability and rules) or `manual` (primaries only).
    pub dns_mode: DnsMode,
    /// TTL of its answers, s.
    pub ttl: u32,
    /// TTL of a line's answers while one of its addresses is failing but not yet unreachable,
    /// s (absent: the TTL).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub suspect_ttl: Option<u32>,
    /// Listeners every node is probed on.
    pub listeners: Vec<Listener>,
    /// Its own check of its listeners, as entered (absent: `check_name`, else `default`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub check: Option<Check>,
    /// The named check its listeners are probed with, as entered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub check_name: Option<String>,
    /// The check its listeners are probed with now, and where it comes from.
    pub probed_with: ProbedCheck,
    /// Why its listeners are probed by TCP connect instead of that check now (an active node's
    /// agent lacks `probe-health-v1`); absent while the check applies.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tcp_fallback: Option<String>,
    /// The most of a line's records one revision may remove, %.
    pub mass_removal_pct: u32,
    /// Only nodes whose agent is connected are answered.
    pub agent_required: bool,
    /// Links that must be fresh for a node to be answered.
    pub required_links: Vec<String>,
    /// External DNS servers it is pushed to (RFC 2136).
    pub publishers: Vec<PublisherInput>,
}

/// The check a cluster or monitor is probed with now, and where it comes from: its own check,
/// the check it names, the check named `default`, or the built-in check of its kind.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct ProbedCheck {
    pub source: CheckSource,
    /// The named check's name (sources `named` and `default`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Its attributes, defaults filled in.
    pub check: Check,
}

impl ProbedCheck {
    /// Where the check comes from, as `ctl` and the UI say it: `own check`, `check light`,
    /// `check default (names none)`, `built-in (no check named default)`.
    pub fn source_phrase(&self) -> String {
        let name = self.name.as_deref().unwrap_or_default();
        match self.source {
            CheckSource::Own => "own check".into(),
            CheckSource::Named => format!("check {name}"),
            CheckSource::Default => format!("check {name} (names none)"),
            CheckSource::Builtin => "built-in (no check named default)".into(),
        }
    }
}

impl From<Probed> for ProbedCheck {
    fn from(p: Probed) -> Self {
        ProbedCheck { source: p.source, name: p.name, check: p.check }
    }
}

/// A node group of a cluster.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct GroupView {
    /// Server-assigned id.
    pub id: i64,
    pub created_at: Timestamp,
    /// Last changed.
    pub updated_at: Timestamp,
    /// Its cluster.
    pub cluster: ClusterId,
    /// Name, unique in the cluster.
    pub name: String,
    /// The region it is in (needed for its nodes to probe).
    pub region: Option<RegionId>,
    /// Drained by an operator: its nodes are out of the answers, still probed.
    #[serde(default)]
    pub drained: bool,
}

/// A line of a cluster.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct LineView {
    /// Server-assigned id.
    pub id: i64,
    pub created_at: Timestamp,
    /// Last changed.
    pub updated_at: Timestamp,
    /// Its cluster.
    pub cluster: ClusterId,
    /// Name, unique in the cluster.
    pub name: String,
    /// The node group it answers with.
    pub group: GroupId,
    /// Groups to fall back to, in order, below the minimum.
    pub backup_groups: Vec<GroupId>,
    /// The fewest healthy addresses before a backup group is used.
    pub min_healthy: u32,
    /// Client networks it answers (with no place either: the default line).
    pub client_networks: Vec<IpNet>,
    /// The places (by the geo database) whose clients it answers.
    #[serde(flatten)]
    pub places: Places,
    /// What it answers when health leaves it with nothing healthy.
    pub all_down: AllDown,
    /// Latency steering: the region whose probers' RTT orders its groups (absent: the
    /// configured order).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency_region: Option<RegionId>,
}

/// A scheduling rule, with the nodes it acts on now.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct RuleView {
    /// Server-assigned id.
    pub id: i64,
    pub created_at: Timestamp,
    /// Last changed.
    pub updated_at: Timestamp,
    /// Its cluster.
    pub cluster: ClusterId,
    /// Its fields.
    #[serde(flatten)]
    pub rule: Rule,
    /// Names of the nodes it acts on now (active or recovering).
    pub acting_on: Vec<String>,
}

/// A notification channel for alerts (its `secret` shown as `(hidden)`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct WebhookView {
    /// Server-assigned id.
    pub id: i64,
    pub created_at: Timestamp,
    /// Last changed.
    pub updated_at: Timestamp,
    /// Its fields.
    #[serde(flatten)]
    pub webhook: Webhook,
}

/// A test notice's request (the body may be left out).
#[derive(Debug, Clone, Default, Serialize, Deserialize, ToSchema)]
#[serde(default, deny_unknown_fields)]
pub struct WebhookTestRequest {
    /// Said in the notice (why it is sent), at most 200 characters.
    pub note: Option<String>,
}

/// How a channel's test notice went.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct WebhookTest {
    /// The channel took it (a 2xx answer; the SMTP server accepted the message).
    pub delivered: bool,
    /// Why not, in words (never the channel's secret).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// A prober with the prober list's columns (SPEC §3.5).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct ProberView {
    /// Server-assigned id.
    pub id: i64,
    pub created_at: Timestamp,
    /// Last changed.
    pub updated_at: Timestamp,
    /// Name, unique (compared without case).
    pub name: String,
    /// Its region.
    pub region: RegionId,
    /// The region's code.
    pub region_code: Option<String>,
    /// Disabled probers are refused and their results do not count.
    pub enabled: bool,
    /// Online, offline or disabled.
    pub status: ProberStatus,
    /// Last request of any kind.
    pub last_seen: Option<Timestamp>,
    /// Its version.
    pub version: Option<String>,
    /// Host name given at enrollment.
    pub hostname: Option<String>,
    /// Targets in its last work.
    pub targets: u32,
    /// Its last complete cluster round (every target of its work).
    pub last_round: Option<RoundSummary>,
    /// Its last endpoint checks (mirrors, monitors): the endpoints that came due together.
    pub last_endpoint_checks: Option<RoundSummary>,
    /// Its last confirmation: the targets another prober's report asked it to probe at once.
    pub last_confirmation: Option<RoundSummary>,
}

/// The rule that holds a node on a backup level.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct HeldBy {
    pub rule: RuleId,
    /// Its name (`None` once deleted).
    pub name: Option<String>,
}

/// One scheduling address of a node, as the last pass saw it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct AddressView {
    /// The address.
    #[schema(value_type = String)]
    pub ip: std::net::IpAddr,
    /// Its level.
    pub level: Level,
    /// The line it is a target address of (`None`: a scheduling address, for every line).
    #[schema(value_type = Option<i64>)]
    pub line: Option<LineId>,
    /// Configured by the operator, or reported by the agent.
    pub source: AddressSource,
    /// Reachable or unreachable (`None`: not evaluated yet).
    pub reachability: Option<Reachability>,
    /// DNS answers it now.
    pub in_use: bool,
    /// How the counting probers see it.
    pub probers: Option<Tally>,
    /// Flap damping: how many times the usual *answering before reachable* it must answer to
    /// come back (1: not damped).
    #[serde(default = "one")]
    pub damping: u32,
    /// Reachable, failing (before the verdict), unreachable or recovering (`None`: not
    /// evaluated yet).
    pub condition: Option<Condition>,
    /// When that condition began (`None`: reachable since it was first seen).
    pub since: Option<Timestamp>,
    /// While failing or recovering: when its reachability changes if the streak goes on.
    pub changes_at: Option<Timestamp>,
    /// How the counting probers of each region see it now, every region with an active
    /// prober (by code): where a failure is seen from. The verdict above sums them up.
    #[serde(default)]
    pub regions: Vec<AddressRegionView>,
}

/// How one region's counting probers see an address now.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct AddressRegionView {
    pub region: RegionId,
    /// Its code.
    pub code: String,
    /// Its name.
    pub name: String,
    /// Its probers whose results count, and of those the ones that see it failing.
    pub probers: Tally,
}

fn one() -> u32 {
    1
}

/// A node with what its agent and the last pass know.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct NodeView {
    /// Server-assigned id.
    pub id: i64,
    pub created_at: Timestamp,
    /// Last changed.
    pub updated_at: Timestamp,
    /// Its cluster.
    pub cluster: ClusterId,
    /// Its cluster's name, so that lists read without a second lookup (empty from a server
    /// older than the field, whose bodies still read).
    #[serde(default)]
    pub cluster_name: String,
    /// Its group.
    pub group: GroupId,
    /// Its group's name (empty from an older server).
    #[serde(default)]
    pub group_name: String,
    /// Name, unique in the cluster.
    pub name: String,
    /// Probed and answered.
    pub enabled: bool,
    /// Drained by an operator (its own flag; see `drain` for a group's or a window's).
    #[serde(default)]
    pub drained: bool,
    /// Out of the answers by a drain (its own, its group's, a maintenance window's): why,
    /// since when, and whether clients have moved (`drained`) or not yet (`draining`).
    #[serde(default)]
    pub drain: Option<Drain>,
    /// Why it is drained, in words (`drained by an operator`, `maintenance 4 (kernel upgrade)`).
    #[serde(default)]
    pub drain_cause: Option<String>,
    /// Its agent probes too.
    pub also_probes: bool,
    /// Its agent has enrolled.
    pub enrolled: bool,
    /// Its agent is connected (a heartbeat within 45 s).
    pub online: bool,
    /// Last heartbeat.
    pub last_heartbeat: Option<Timestamp>,
    /// Agent version.
    pub version: Option<String>,
    /// Host name.
    pub hostname: Option<String>,
    /// Connects from: the source address of its latest heartbeat connection (a NAT's or a
    /// proxy's public address when it connects through one).
    #[schema(value_type = Option<String>)]
    pub connects_from: Option<std::net::IpAddr>,
    /// Connects from: the source address of its enrollment connection.
    #[serde(default)]
    #[schema(value_type = Option<String>)]
    pub enrolled_from: Option<std::net::IpAddr>,
    /// The source address *Add source address* would add (`POST /v1/nodes/{id}/addresses/source`):
    /// the latest heartbeat's (else the enrollment's) while it is public and not configured.
    #[serde(default)]
    #[schema(value_type = Option<String>)]
    pub addable_source: Option<std::net::IpAddr>,
    /// Capabilities of its agent.
    pub capabilities: Vec<String>,
    /// Host metrics of its last heartbeat.
    pub metrics: Option<NodeMetrics>,
    /// The node list's Metrics column: CPU and memory of its last heartbeat while fresh
    /// (`None`: no metrics, or older than 60 s, which scheduling rules treat as missing).
    #[serde(default)]
    pub usage: Option<NodeUsage>,
    /// Links its agent reported.
    pub links: Vec<LinkState>,
    /// Addresses its agent reported.
    #[schema(value_type = Vec<String>)]
    pub reported_addresses: Vec<std::net::IpAddr>,
    /// Scheduling addresses in use, with reachability.
    pub addresses: Vec<AddressView>,
    /// No public address: it has no scheduling address (none configured, and its agent
    /// reports only private addresses, or none, or has not reported since the server
    /// started), so DNS has nothing to answer with for it.
    #[serde(default)]
    pub no_public_address: bool,
    /// The level DNS uses (`None`: no address, or not evaluated yet).
    pub level: Option<Level>,
    /// Since when it has used that level (unknown before its first change after a start).
    pub level_since: Option<Timestamp>,
    /// Answered by DNS (`None`: not evaluated yet).
    pub serving: Option<bool>,
    /// The rule holding it on a backup level, while one does.
    pub held_by: Option<HeldBy>,
}

/// CPU and memory of a node's last heartbeat, while fresh.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct NodeUsage {
    /// Whole-host CPU usage, %.
    pub cpu_pct: f64,
    /// Memory used, % of the total (`None`: the heartbeat gave no total).
    pub memory_pct: Option<f64>,
    /// When the server received them.
    pub at: Timestamp,
}

impl NodeUsage {
    /// The usage in `m` if it is fresh at `now`, read as scheduling rules read it.
    pub fn of(m: &NodeMetrics, now: Timestamp) -> Option<NodeUsage> {
        use vantage_core::rules::Metric;
        m.fresh(now).then(|| NodeUsage { cpu_pct: m.cpu_pct, memory_pct: m.value(Metric::Memory), at: m.at })
    }
}

/// *Add source address*: the level at which the node's source address joins its configured
/// addresses.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SourceAddressBody {
    /// `primary` (default), `backup1` or `backup2`.
    #[serde(default)]
    pub level: Option<Level>,
}

/// A node as created: its cluster and its fields.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct NodeCreate {
    /// Its cluster.
    pub cluster: ClusterId,
    /// Its group in that cluster.
    pub group: GroupId,
    /// Name, unique in the cluster.
    pub name: String,
    /// Probed and answered (default true).
    #[serde(default)]
    pub enabled: Option<bool>,
    /// Its agent probes too (its group needs a region).
    #[serde(default)]
    pub also_probes: Option<bool>,
}

/// The fields of a prober an operator may change.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ProberBody {
    /// Name, unique (compared without case).
    pub name: String,
    pub region: RegionId,
    /// Disabled probers are refused and their results do not count.
    pub enabled: bool,
}

/// A node's configured scheduling addresses.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct Addresses {
    /// `configured` while any are set, else `reported` (the agent's, all primary).
    pub source: AddressSource,
    /// The configured addresses.
    pub configured: Vec<SchedulingAddress>,
    /// What the save should know: new addresses that serve before any prober has seen them
    /// answer, because no prober checks the cluster yet.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
}

/// An enrollment token as listed (the token itself is shown once, at creation).
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct EnrollTokenView {
    pub id: i64,
    /// Its first characters.
    pub prefix: String,
    /// Prober to create, or node to enroll.
    pub name: String,
    /// Region of the prober to create.
    pub region: Option<RegionId>,
    /// Node it enrolls.
    pub node: Option<NodeId>,
    /// Not valid after.
    pub expires_at: Timestamp,
    /// When it was used.
    pub used_at: Option<Timestamp>,
    /// Valid, used or expired.
    pub state: TokenState,
    pub created_at: Timestamp,
}

/// A prober enrollment token to create.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ProberTokenBody {
    /// Name of the prober it creates.
    pub name: String,
    /// Its region.
    pub region: Option<RegionId>,
    /// Seconds it is valid: 300 to 604800 (default 3600).
    pub valid_for_s: Option<i64>,
}

/// A node enrollment token to create.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NodeTokenBody {
    /// The node it enrolls.
    pub node: NodeId,
    /// Seconds it is valid: 300 to 604800 (default 3600).
    pub valid_for_s: Option<i64>,
}

/// A new enrollment token: shown once, with the command that uses it.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct NewEnrollToken {
    pub id: i64,
    /// The token (`vtp_…` or `vtn_…`).
    pub token: String,
    /// Not valid after.
    pub expires_at: Timestamp,
    /// The agent channel's URL.
    pub server: String,
    /// SHA-256 of the channel's CA certificate, to pin.
    pub ca_sha256: String,
    /// The command to run on the host.
    pub command: String,
}

/// The window register of one (prober, target) as strips (SPEC §3.4).
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct WindowView {
    /// Good attempts among the last `window`.
    pub good: u32,
    /// Good attempts needed.
    pub threshold: u32,
    /// Attempts looked at.
    pub window: u32,
    /// Mean RTT of good attempts, ms (0 before the first).
    pub avg_rtt_ms: f32,
    /// Connected strip.
    pub connected: String,
    /// Request-sent strip.
    pub sent: String,
    /// Response-received strip.
    pub received: String,
    /// Good strip.
    pub good_strip: String,
    /// As `varnishadm backend.list -p` prints it.
    pub text: String,
}

impl WindowView {
    /// The strips of `r` under a check's window and threshold; `ipv6` picks the digit of the
    /// connected strip.
    pub(crate) fn of(
        r: &vantage_core::window::WindowRegister,
        window: u8,
        threshold: u8,
        ipv6: bool,
    ) -> Self {
        use vantage_core::window::strip;
        WindowView {
            good: r.good_in(window),
            threshold: u32::from(threshold),
            window: u32::from(window),
            avg_rtt_ms: r.avg_rtt_ms,
            connected: strip(r.connected, if ipv6 { '6' } else { '4' }, r.filled()),
            sent: strip(r.sent, 'X', r.filled()),
            received: strip(r.received, 'R', r.filled()),
            good_strip: strip(r.good, 'H', r.filled()),
            text: r.render(window, threshold, ipv6),
        }
    }
}

/// Whose result: a prober, or a node that probes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum ProberKind {
    /// A `vantage probe` process.
    Prober,
    /// A node agent that also probes.
    Node,
}

/// One prober's latest result for one target, with its window strip.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct ResultView {
    /// The target key (`n{node}/{ip}/{port}`).
    pub target: String,
    pub node: NodeId,
    /// Node name.
    pub node_name: Option<String>,
    #[schema(value_type = String)]
    pub address: std::net::IpAddr,
    pub port: u16,
    /// Check method of that port (`http`…).
    pub method: Option<String>,
    /// Prober (or probing node) id.
    pub prober: i64,
    /// Its name.
    pub prober_name: String,
    /// Prober or node.
    pub prober_kind: ProberKind,
    /// Its region (probers only).
    pub region: Option<RegionId>,
    /// Attempts sent.
    pub sent: u32,
    /// Attempts lost.
    pub lost: u32,
    /// Loss, %.
    pub loss_pct: f64,
    /// Median RTT of good attempts, ms.
    pub rtt_ms: Option<f64>,
    /// Last error code.
    pub error: Option<ErrorCode>,
    /// When it was reported.
    pub checked: Timestamp,
    /// The window register.
    pub window: WindowView,
}

/// One line's records as DNS answers them now.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct DnsLine {
    /// Line id (0: the implicit default line).
    pub id: LineId,
    /// Line name.
    pub name: String,
    /// Client networks it answers (with no place either: the default line).
    pub client_networks: Vec<IpNet>,
    /// The places (by the geo database) whose clients it answers.
    #[serde(flatten)]
    pub places: Places,
    /// Its records.
    #[schema(value_type = Vec<String>)]
    pub records: Vec<std::net::IpAddr>,
    /// Since when it has answered them (after a restart, at the latest the stored revision's
    /// time).
    pub since: Option<Timestamp>,
    /// When it answers by its all-down policy (its records held, every online node, or none),
    /// which and why; `None` while it answers by health.
    pub held: Option<LineHold>,
}

/// What DNS answers for a cluster now: the published revision.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct DnsView {
    /// Domain, as of the revision.
    pub domain: String,
    /// Aliases, as of the revision.
    pub aliases: Vec<String>,
    /// TTL, as of the revision.
    pub ttl: u32,
    /// The revision (SOA serial); `None` before the first.
    pub revision: Option<u32>,
    /// When it was cut.
    pub at: Option<Timestamp>,
    /// Why it was cut (read from memory, as DNS answers: it is there while the store is not).
    pub reason: Option<String>,
    /// Records per line.
    pub lines: Vec<DnsLine>,
    /// `all.<domain>`: the union of every line.
    #[schema(value_type = Vec<String>)]
    pub all: Vec<std::net::IpAddr>,
}

/// One revision of a cluster's records.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct RevisionView {
    pub cluster: ClusterId,
    /// Number (the SOA serial).
    pub number: u32,
    /// When it was cut.
    pub at: Timestamp,
    /// Why.
    pub reason: String,
    /// Its records.
    pub records: Records,
    /// Lines that answered by their all-down policy (by line id, a string key in JSON), which
    /// and why.
    #[schema(value_type = BTreeMap<String, LineHold>)]
    pub held: BTreeMap<LineId, LineHold>,
    /// Each publisher's outcome, once it tried.
    pub publish: Vec<PublishView>,
}

/// Whether a publisher's push went through.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum PublishState {
    /// The external server took the update.
    Published,
    /// It did not, after every retry.
    Failed,
}

/// One publisher's outcome for a revision.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct PublishView {
    /// The external server (`rfc2136 192.0.2.53:53 zone cdn.example.net`).
    pub target: String,
    /// Published or failed.
    pub status: PublishState,
    /// Why it failed.
    #[serde(default)]
    pub reason: Option<String>,
    /// Attempts made.
    pub attempts: u32,
    /// When it finished.
    pub finished_at: Timestamp,
}

/// A line's name, for reading revisions.
#[derive(Debug, Clone, Default, Serialize, Deserialize, ToSchema)]
pub struct LineName {
    pub name: String,
    /// Client networks.
    pub client_networks: Vec<IpNet>,
    /// The places (by the geo database) whose clients it answers.
    #[serde(flatten)]
    pub places: Places,
}

/// A cluster's revisions, newest first, and the names of the lines they mention.
#[derive(Debug, Clone, Default, Serialize, Deserialize, ToSchema)]
pub struct Revisions {
    /// Revisions, newest first.
    pub items: Vec<RevisionView>,
    /// Lines by id (as a string key).
    pub lines: BTreeMap<String, LineName>,
}

/// What changed from revision `from` to the later `to` of a cluster.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct RevisionDiff {
    pub cluster: ClusterId,
    pub from: u32,
    pub to: u32,
    /// When `from` was cut.
    pub from_at: Timestamp,
    /// When `to` was cut.
    pub to_at: Timestamp,
    /// Distinct records (every line) of `from`.
    pub records_before: usize,
    /// Distinct records (every line) of `to`.
    pub records_after: usize,
    /// Each line of `to` (and each line with records only `from` had): its records in `to`,
    /// and what it gained and lost.
    pub lines: Vec<vantage_control::events::LineChange>,
    /// The revisions after `from` up to `to`, oldest first (at most 1,000, the newest).
    pub revisions: Vec<RevisionView>,
}

/// One row of the rule preview, with the outcome in words.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct PreviewItem {
    /// The rule against the node.
    #[serde(flatten)]
    pub row: PreviewRow,
    /// What the next evaluation does, in words.
    pub outcome_text: String,
}

/// The preview of every rule against every node it looks at, and of every line's all-down
/// policy (writes nothing). Named
/// `RulePreviews` in the document: `Preview` is the core's row type.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[schema(as = RulePreviews)]
pub struct Preview {
    /// When it was computed.
    pub at: Timestamp,
    /// One row per rule and node.
    pub items: Vec<PreviewItem>,
    /// Each line: its all-down policy, what it answers, and what it would answer if every
    /// address failed in the next pass.
    pub lines: Vec<vantage_core::evaluate::LineOutlook>,
}

/// The preview of one rule as drafted, against every node it would look at, as if it were
/// on (writes nothing).
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct DraftPreview {
    /// When it was computed.
    pub at: Timestamp,
    /// One row per node the rule would look at.
    pub items: Vec<PreviewItem>,
}

/// Open and recently resolved alerts.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct Alerts {
    /// Open, oldest first.
    pub open: Vec<Alert>,
    /// Resolved, newest first.
    pub recent: Vec<Alert>,
    /// The open alerts whose firing a silence or a maintenance window held back and still
    /// holds: alert key → what holds it (an alert notified before its silence was made is
    /// not held).
    #[serde(default)]
    pub held: BTreeMap<String, Hold>,
}

/// A silence with what it does now.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct SilenceView {
    /// Server-assigned id.
    pub id: i64,
    pub created_at: Timestamp,
    /// Last changed.
    pub updated_at: Timestamp,
    /// Its fields.
    #[serde(flatten)]
    pub silence: Silence,
    /// `pending` (not started), `active` or `expired`.
    pub state: SilenceState,
    /// The open alerts whose notifications it holds now, by key.
    pub holds: Vec<String>,
}

/// A maintenance window with what it does now.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct MaintenanceView {
    /// Server-assigned id.
    pub id: i64,
    pub created_at: Timestamp,
    /// Last changed.
    pub updated_at: Timestamp,
    /// Its fields.
    #[serde(flatten)]
    pub maintenance: Maintenance,
    /// `planned` (opens later), `open` or `closed`.
    pub state: MaintenanceState,
    /// Its targets in words (`node edge-1`, `group eu`, `mirror m.example.net`).
    pub targets: Vec<String>,
    /// The open alerts whose notifications it holds now, by key.
    pub holds: Vec<String>,
}

/// A public status page with where it is served.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct StatusPageView {
    /// Server-assigned id.
    pub id: i64,
    pub created_at: Timestamp,
    /// Last changed.
    pub updated_at: Timestamp,
    /// Its fields.
    #[serde(flatten)]
    pub page: StatusPage,
    /// Where it is served, on the public listener (the admin one without it): `/status/{slug}`.
    pub path: String,
}

/// What draining a node or a group is asked with.
#[derive(Debug, Clone, Default, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct DrainBody {
    /// Drain even when a line would fall below its minimum of healthy addresses (the
    /// pre-flight refuses otherwise, naming the lines).
    #[serde(default)]
    pub confirm: bool,
}

/// Putting a drained node or group back takes no options: an empty body, or `{}`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct UndrainBody {}

/// Where a silence is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum SilenceState {
    /// Starts later.
    Pending,
    /// Holding notifications back.
    Active,
    /// Over (kept until deleted, as a record).
    Expired,
}

/// One audit entry.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct AuditView {
    /// Sequence number.
    pub id: i64,
    /// When.
    pub at: Timestamp,
    /// Who (`admin:<token name>`, `system`, `prober:<id>`).
    pub actor: String,
    /// What (`cluster.create`).
    pub action: String,
    /// On what (`cluster:3`).
    pub object: String,
    /// Details (never a secret).
    pub metadata: Value,
}

/// An admin token as listed.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct AdminTokenView {
    pub id: i64,
    /// Name, unique.
    pub name: String,
    /// Its first characters.
    pub prefix: String,
    /// May read, not change.
    pub read_only: bool,
    pub created_at: Timestamp,
}

/// An admin token to create.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct AdminTokenBody {
    /// Name, unique.
    pub name: String,
    /// A token that may read everything and change nothing (false).
    #[serde(default)]
    pub read_only: bool,
}

/// A new admin token: shown once.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct NewAdminToken {
    pub id: i64,
    pub name: String,
    /// The token (`vta_…`).
    pub token: String,
}

/// One bucket of a history series.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct SeriesPoint {
    /// Start of the bucket (of a latest round: its newest result).
    pub at: Timestamp,
    /// Loss, %.
    pub loss_pct: f64,
    /// Mean RTT of good attempts, ms.
    pub rtt_ms: Option<f64>,
    /// Attempts in the bucket.
    pub attempts: f64,
}

/// One address's series.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct AddressSeries {
    /// The address.
    #[schema(value_type = String)]
    pub ip: std::net::IpAddr,
    /// Its level.
    pub level: Level,
    /// Buckets with attempts.
    pub points: Vec<SeriesPoint>,
    /// The latest round: every prober's newest result that still counts (`None`: none does).
    #[serde(default)]
    pub latest: Option<SeriesPoint>,
    /// Per prober region, this address alone.
    #[serde(default)]
    pub regions: Vec<RegionSeries>,
}

/// One region's series: of one address, or of every address of the node.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct RegionSeries {
    /// Region (`None`: probing nodes without a region).
    pub region: Option<RegionId>,
    /// Its code.
    pub code: Option<String>,
    /// Its name.
    pub name: Option<String>,
    /// Buckets with attempts.
    pub points: Vec<SeriesPoint>,
    /// The latest round: its probers' newest results that still count (`None`: none does).
    #[serde(default)]
    pub latest: Option<SeriesPoint>,
}

/// A node's probe history: loss and RTT per address and per region.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct History {
    pub node: NodeId,
    /// `15m`, `1h`, `24h` or `14d`.
    pub range: String,
    /// From.
    pub since: Timestamp,
    /// To.
    pub until: Timestamp,
    /// Bucket width, s.
    pub bucket_s: i64,
    /// Per address.
    pub addresses: Vec<AddressSeries>,
    /// Per region, over every address (primary and backups alike: for a failure seen from
    /// one place, read the address's own `regions`).
    pub regions: Vec<RegionSeries>,
}
