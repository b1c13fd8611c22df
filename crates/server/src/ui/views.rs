//! The admin API's JSON as the pages read it: only the fields they show. The UI reads the same
//! routes as any client, so these mirror the API's views and decide nothing themselves.

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::Value;
use vantage_core::Timestamp;
use vantage_core::evaluate::NodeMetrics;

/// `{"items": [...]}`.
#[derive(Debug, Deserialize)]
pub(super) struct Items<T> {
    pub items: Vec<T>,
}

#[derive(Debug, Clone, Deserialize)]
pub(super) struct Region {
    pub id: i64,
    pub code: String,
    pub name: String,
    #[serde(default)]
    pub probers: usize,
}

#[derive(Debug, Clone, Deserialize)]
pub(super) struct Round {
    pub loss_pct: f64,
    pub mean_rtt_ms: Option<f64>,
    pub unreachable: u32,
}

#[derive(Debug, Clone, Deserialize)]
pub(super) struct Prober {
    pub id: i64,
    pub name: String,
    pub region: i64,
    pub enabled: bool,
    pub status: String,
    pub last_seen: Option<Timestamp>,
    pub version: Option<String>,
    pub hostname: Option<String>,
    #[serde(default)]
    pub targets: u32,
    pub last_round: Option<Round>,
}

#[derive(Debug, Clone, Deserialize)]
pub(super) struct Listener {
    pub port: u16,
    pub protocol: String,
    #[serde(default)]
    pub proxy_protocol: bool,
}

#[derive(Debug, Clone, Deserialize)]
pub(super) struct Cluster {
    pub id: i64,
    pub name: String,
    pub domain: String,
    #[serde(default)]
    pub aliases: Vec<String>,
    pub dns_mode: String,
    pub ttl: u32,
    #[serde(default)]
    pub listeners: Vec<Listener>,
    #[serde(default)]
    pub agent_required: bool,
    #[serde(default)]
    pub mass_removal_pct: u32,
}

#[derive(Debug, Clone, Deserialize)]
pub(super) struct Group {
    pub id: i64,
    pub name: String,
    pub region: Option<i64>,
}

#[derive(Debug, Clone, Deserialize)]
pub(super) struct Line {
    pub id: i64,
    pub name: String,
    pub group: i64,
    #[serde(default)]
    pub backup_groups: Vec<i64>,
    pub min_healthy: u32,
    #[serde(default)]
    pub client_networks: Vec<String>,
}

#[derive(Debug, Clone, Deserialize)]
pub(super) struct Verdict {
    pub counting: u32,
    pub failing: u32,
}

#[derive(Debug, Clone, Deserialize)]
pub(super) struct Address {
    pub ip: String,
    pub level: String,
    pub source: String,
    pub reachability: Option<String>,
    #[serde(default)]
    pub in_use: bool,
    pub probers: Option<Verdict>,
}

#[derive(Debug, Clone, Deserialize)]
pub(super) struct Node {
    pub id: i64,
    pub name: String,
    pub cluster: i64,
    pub group: i64,
    pub enabled: bool,
    #[serde(default)]
    pub also_probes: bool,
    #[serde(default)]
    pub enrolled: bool,
    #[serde(default)]
    pub online: bool,
    pub last_heartbeat: Option<Timestamp>,
    pub version: Option<String>,
    pub hostname: Option<String>,
    pub connects_from: Option<String>,
    #[serde(default)]
    pub addresses: Vec<Address>,
    pub level: Option<String>,
    pub serving: Option<bool>,
    pub metrics: Option<NodeMetrics>,
    #[serde(default)]
    pub held_by: Option<HeldBy>,
}

/// The rule that holds a node on a backup level.
#[derive(Debug, Clone, Deserialize)]
pub(super) struct HeldBy {
    pub name: Option<String>,
}

#[derive(Debug, Clone, Deserialize)]
pub(super) struct Window {
    pub good: u32,
    pub threshold: u32,
    pub window: u32,
    pub text: String,
}

#[derive(Debug, Clone, Deserialize)]
pub(super) struct ResultRow {
    pub node: Option<i64>,
    pub node_name: Option<String>,
    pub address: Option<String>,
    pub port: Option<u16>,
    pub method: Option<String>,
    pub target: String,
    pub prober: i64,
    pub prober_name: String,
    pub prober_kind: String,
    pub region: Option<i64>,
    pub sent: u32,
    pub lost: u32,
    pub loss_pct: f64,
    pub rtt_ms: Option<f64>,
    pub error: Option<String>,
    pub checked: Timestamp,
    pub window: Window,
}

#[derive(Debug, Clone, Deserialize)]
pub(super) struct DnsLine {
    pub name: Option<String>,
    #[serde(default)]
    pub client_networks: Option<Vec<String>>,
    #[serde(default)]
    pub records: Vec<String>,
}

#[derive(Debug, Clone, Deserialize)]
pub(super) struct Dns {
    pub revision: Option<u32>,
    pub at: Option<Timestamp>,
    #[serde(default)]
    pub lines: Vec<DnsLine>,
    #[serde(default)]
    pub all: Vec<String>,
}

#[derive(Debug, Clone, Deserialize)]
pub(super) struct LineName {
    pub name: String,
}

#[derive(Debug, Clone, Deserialize)]
pub(super) struct Revision {
    pub number: u32,
    pub at: Timestamp,
    pub reason: String,
    #[serde(default)]
    pub records: Value,
    #[serde(default)]
    pub held: Value,
    #[serde(default)]
    pub publish: Value,
}

#[derive(Debug, Deserialize)]
pub(super) struct Revisions {
    pub items: Vec<Revision>,
    #[serde(default)]
    pub lines: BTreeMap<String, LineName>,
}

#[derive(Debug, Clone, Deserialize)]
pub(super) struct Condition {
    pub metric: String,
    pub comparison: String,
    pub threshold: f64,
    #[serde(default)]
    pub for_s: u64,
    pub aggregate: Option<String>,
    pub region: Option<i64>,
}

#[derive(Debug, Clone, Deserialize)]
pub(super) struct Rule {
    pub name: String,
    pub line: Option<i64>,
    pub action: String,
    #[serde(rename = "match")]
    pub match_mode: String,
    pub hold_s: u64,
    pub recover_s: u64,
    pub enabled: bool,
    #[serde(default)]
    pub conditions: Vec<Condition>,
    #[serde(default)]
    pub acting_on: Vec<String>,
}

#[derive(Debug, Clone, Deserialize)]
pub(super) struct PreviewCondition {
    pub metric: String,
    pub value: Option<f64>,
    pub comparison: String,
    pub threshold: f64,
    pub held_s: Option<f64>,
    pub required_s: Option<f64>,
}

#[derive(Debug, Clone, Deserialize)]
pub(super) struct PreviewRow {
    pub rule_name: String,
    pub node: i64,
    pub node_name: String,
    pub status: Value,
    #[serde(default)]
    pub conditions: Vec<PreviewCondition>,
    #[serde(default)]
    pub outcome: Value,
    pub outcome_text: Option<String>,
}

#[derive(Debug, Clone, Deserialize)]
pub(super) struct Alert {
    pub kind: String,
    pub summary: String,
    pub fired_at: Timestamp,
    pub resolved_at: Option<Timestamp>,
}

#[derive(Debug, Deserialize)]
pub(super) struct Alerts {
    pub open: Vec<Alert>,
    pub recent: Vec<Alert>,
}

#[derive(Debug, Clone, Deserialize)]
pub(super) struct AuditEntry {
    pub at: Timestamp,
    pub actor: String,
    pub action: String,
    pub object: String,
    #[serde(default)]
    pub metadata: Value,
}

#[derive(Debug, Clone, Deserialize)]
pub(super) struct HistoryPoint {
    pub at: Timestamp,
    pub loss_pct: f64,
    pub rtt_ms: Option<f64>,
}

#[derive(Debug, Clone, Deserialize)]
pub(super) struct AddressSeries {
    pub ip: String,
    pub points: Vec<HistoryPoint>,
}

#[derive(Debug, Clone, Deserialize)]
pub(super) struct RegionSeries {
    pub code: Option<String>,
    pub name: Option<String>,
    pub points: Vec<HistoryPoint>,
}

#[derive(Debug, Deserialize)]
pub(super) struct History {
    pub since: Timestamp,
    pub until: Timestamp,
    pub bucket_s: i64,
    pub addresses: Vec<AddressSeries>,
    pub regions: Vec<RegionSeries>,
}
