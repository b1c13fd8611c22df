//! Fleet as code: the file format that holds the whole configuration by name (what
//! `vantage ctl export` writes and `plan`/`apply` read), and what a plan answers. The file's
//! JSON Schema is generated from these types (`/v1/fleet.schema.json`).

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use utoipa::ToSchema;
use vantage_control::ClusterAfter;
use vantage_control::alerts::Webhook;
use vantage_control::mirrors::Tenant;
use vantage_core::address::Level;
use vantage_core::detection::DetectionSettingsInput;
use vantage_core::mirror::{MirrorInput, MirrorSettings};
use vantage_core::model::{AllDown, ClusterInput, RegionInput};
use vantage_core::monitor::MonitorInput;
use vantage_core::rules::{Action, Aggregate, Comparison, MatchMode, Metric};
use vantage_core::settings::ProbeSettingsInput;

use super::CheckCreate;

/// The whole configuration, every object by name. Lists absent from a file are left as they
/// are; objects absent from a list are left too, unless `--prune` deletes them. Secrets are
/// never inline: `env:NAME` or `file:PATH` (read by `vantage ctl`), or `stored` (keep the
/// secret the server has).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct FleetFile {
    /// The settings there is one of each.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub settings: Option<SettingsFile>,
    /// Regions, by code.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Vec<RegionInput>>)]
    pub regions: Option<Vec<Map<String, Value>>>,
    /// Named checks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Vec<CheckCreate>>)]
    pub checks: Option<Vec<Map<String, Value>>>,
    /// Webhook sinks for alerts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Vec<Webhook>>)]
    pub webhooks: Option<Vec<Map<String, Value>>>,
    /// Video monitors.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Vec<MonitorInput>>)]
    pub monitors: Option<Vec<Map<String, Value>>>,
    /// Clusters with their node groups, lines, nodes and rules.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clusters: Option<Vec<ClusterFile>>,
    /// Tenants that mirrors serve and doors ask for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Vec<Tenant>>)]
    pub tenants: Option<Vec<Map<String, Value>>>,
    /// Mirrors, by host (applying writes their registry files).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Vec<MirrorInput>>)]
    pub mirrors: Option<Vec<Map<String, Value>>>,
}

/// The probe, detection and mirror settings; one absent is left as it is.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SettingsFile {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<ProbeSettingsInput>)]
    pub probes: Option<Map<String, Value>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<DetectionSettingsInput>)]
    pub detection: Option<Map<String, Value>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<MirrorSettings>)]
    pub mirrors: Option<Map<String, Value>>,
}

/// A cluster's fields (as the API takes them; a publisher's `key_secret` by reference) and its
/// children by name.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, ToSchema)]
#[schema(as = ClusterFile)]
pub struct ClusterFile {
    #[serde(flatten)]
    #[schema(inline, value_type = ClusterInput)]
    pub cluster: Map<String, Value>,
    /// Node groups.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub groups: Option<Vec<GroupFile>>,
    /// Lines.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lines: Option<Vec<LineFile>>,
    /// Nodes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nodes: Option<Vec<NodeFile>>,
    /// Scheduling rules.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rules: Option<Vec<RuleFile>>,
}

/// A node group.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct GroupFile {
    pub name: String,
    /// The region's code (needed for nodes that also probe).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub region: Option<String>,
    /// Drained: its nodes out of the answers, still probed (false).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub drained: bool,
}

/// A line.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct LineFile {
    pub name: String,
    /// The node group that answers, by name.
    pub group: String,
    /// Backup groups in order, by name.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub backup_groups: Vec<String>,
    /// Minimum healthy addresses (1–64, 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_healthy: Option<u32>,
    /// Client networks (CIDR); none, and no place: the default line.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub client_networks: Vec<String>,
    /// Countries (ISO 3166-1 alpha-2 codes) whose clients it answers, by the geo database.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub countries: Vec<String>,
    /// Continents (`EU`, `AS`…) whose clients it answers.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub continents: Vec<String>,
    /// Autonomous system numbers whose clients it answers.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub asns: Vec<u32>,
    /// What it answers when nothing is healthy (`hold`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub all_down: Option<AllDown>,
    /// Latency steering: the region (by code) whose probers' RTT orders its groups; none:
    /// the configured order.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency_region: Option<String>,
}

/// A node and its configured scheduling addresses.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NodeFile {
    pub name: String,
    /// Its node group, by name.
    pub group: String,
    /// Disabled nodes are neither probed nor answered (true).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enabled: Option<bool>,
    /// Its agent probes too (false).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub also_probes: Option<bool>,
    /// Drained: out of the answers, still probed (false).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub drained: bool,
    /// Configured addresses; none: the addresses its agent reports.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub addresses: Vec<AddressFile>,
}

/// A configured address.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct AddressFile {
    pub ip: String,
    /// Its level (primary).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub level: Option<Level>,
    /// Served at once, before a prober sees it answer.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub trusted: bool,
    /// The line it is a target address of, by name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub line: Option<String>,
}

/// A scheduling rule.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RuleFile {
    pub name: String,
    /// The line it applies to, by name; absent: every line.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub line: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub action: Option<Action>,
    #[serde(default, rename = "match", skip_serializing_if = "Option::is_none")]
    pub match_mode: Option<MatchMode>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hold_s: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recover_s: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enabled: Option<bool>,
    pub conditions: Vec<ConditionFile>,
}

/// A rule's condition.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ConditionFile {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metric: Option<Metric>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub comparison: Option<Comparison>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub threshold: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub for_s: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub aggregate: Option<Aggregate>,
    /// Only probers of this region, by code (probe metrics).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub region: Option<String>,
}

/// `POST /v1/fleet/plan`: what applying `fleet` would change.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PlanRequest {
    pub fleet: FleetFile,
    /// Objects absent from the file are deleted.
    #[serde(default)]
    pub prune: bool,
    /// Plan deletes that change what DNS answers beyond the object as `apply --force` would.
    #[serde(default)]
    pub force: bool,
}

/// `POST /v1/fleet/apply`: apply `fleet` in one change, if the configuration is still the one
/// planned against.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ApplyRequest {
    pub fleet: FleetFile,
    /// The `revision` of the plan: refused (409) when the configuration moved since.
    pub expected_revision: String,
    /// Objects absent from the file are deleted.
    #[serde(default)]
    pub prune: bool,
    /// Delete even where it changes what DNS answers beyond the object (the last enabled node
    /// of a group a line answers with).
    #[serde(default)]
    pub force: bool,
}

/// What a plan would do to one object.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum PlanOp {
    Create,
    Update,
    Delete,
}

/// One field that changes; a secret reads `(secret)` on both sides.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct FieldChange {
    /// The field's path within the object.
    pub field: String,
    /// Its value now (absent: unset).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub before: Option<Value>,
    /// Its value after (absent: unset).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub after: Option<Value>,
}

/// A configuration object, by kind and name (`www/edge-1`: a cluster's child).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, ToSchema)]
pub struct ObjectName {
    /// `settings`, `region`, `check`, `webhook`, `monitor`, `cluster`, `group`, `line`,
    /// `node`, `rule`, `tenant` or `mirror`.
    pub kind: String,
    /// Its name, after its cluster's for a cluster's child.
    pub name: String,
}

/// One object that changes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct ObjectChange {
    pub op: PlanOp,
    #[serde(flatten)]
    pub object: ObjectName,
    /// The fields that change (for a creation, every field set).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub fields: Vec<FieldChange>,
}

/// What applying a fleet file does (or did).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct FleetPlan {
    /// The configuration the plan was made against (after an apply: the one it made); apply
    /// with it as `expected_revision`.
    pub revision: String,
    /// Every object that changes, in the order they are applied.
    pub changes: Vec<ObjectChange>,
    /// Objects absent from the files that stay (`--prune` deletes them).
    pub left: Vec<ObjectName>,
    /// What DNS would answer per line of every cluster the change touches, from the current
    /// observations, with the holds and rule actions it would lead to.
    pub dns: Vec<ClusterAfter>,
}

/// A JSON Schema (2020-12) document, as `GET /v1/fleet.schema.json` answers it.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[schema(value_type = Object)]
pub struct JsonSchema(pub Value);
