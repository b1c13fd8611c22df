//! Bodies of the mirror, tenant, check and door routes.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use vantage_control::mirrors::ReloadStatus;
use vantage_control::mirrors::book::FreshnessState;
use vantage_core::Timestamp;
use vantage_core::check::{Check, CheckInput};
use vantage_core::mirror::{Freshness, MirrorVerdict, RegionObservation, RegionStatus};
use vantage_core::result::ErrorCode;

use super::WindowView;

/// One prober's opinion of a mirror: its window register and what it makes of it.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct MirrorProberView {
    /// Prober id.
    pub prober: i64,
    /// Its name.
    pub name: String,
    /// Its region's code.
    pub region: String,
    /// What this prober's window says.
    pub status: RegionStatus,
    /// The last attempt's error.
    pub error: Option<ErrorCode>,
    /// The last attempt's RTT, ms.
    pub rtt_ms: Option<f64>,
    /// When it reported.
    pub checked: Timestamp,
    /// The window register.
    pub window: WindowView,
}

/// A mirror: the operator's fields and what Vantage derived.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct MirrorView {
    /// Public host name.
    pub host: String,
    /// Tenants it may serve (empty: all).
    pub tenants: Vec<String>,
    /// Selection weight (0: out of doors).
    pub weight: u32,
    /// The operator's hard block.
    pub manual_block: bool,
    /// Why it is blocked.
    pub manual_note: String,
    /// The named check that probes it (`default` when absent).
    pub check: Option<String>,
    /// Pinned `ip:port` probers connect to.
    pub address: Option<String>,
    /// Where its files are (doors join visitors' paths to it; absent: the doors' scheme and
    /// the host).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base_url: Option<String>,
    /// Derived: `live`, `degraded`, `blocked` or `unknown`.
    pub verdict: MirrorVerdict,
    /// Derived: since when the verdict holds.
    pub verdict_since: Option<Timestamp>,
    /// Derived: the last region update.
    pub last_check: Option<Timestamp>,
    /// Derived: region updates that were failing.
    pub blocked_count: u64,
    /// Derived: region updates.
    pub total_checked: u64,
    /// The freshness check, when it has one.
    pub freshness: Option<Freshness>,
    /// Derived: the last freshness check (a stale mirror is out of door rotation).
    pub freshness_state: Option<FreshnessState>,
    /// An open maintenance window names it: out of door rotation until it closes.
    #[serde(default)]
    pub in_maintenance: bool,
    /// Derived: region code → status, latency (ms) and when.
    pub regions: BTreeMap<String, RegionObservation>,
    /// Each prober's opinion, by region then name.
    pub probers: Vec<MirrorProberView>,
}

/// Every mirror, with how the registry's last reload went.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct MirrorList {
    pub mirrors: Vec<MirrorView>,
    /// How many.
    pub count: usize,
    /// The registry's reloads: when, and why the last one failed.
    pub reload: ReloadStatus,
}

/// A request for a check run.
#[derive(Debug, Clone, Default, Serialize, Deserialize, ToSchema)]
#[serde(default, deny_unknown_fields)]
pub struct CheckRunRequest {
    /// Region codes whose probers check now (absent: every region).
    pub regions: Option<Vec<String>>,
}

/// A check run that started.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct CheckRunView {
    /// When it was asked for.
    pub started_at: Timestamp,
    /// The regions asked (absent: all).
    pub regions: Option<Vec<String>>,
    /// Enabled probers in those regions, each told at its next work request.
    pub probers: usize,
    /// Mirrors they check.
    pub mirrors: usize,
}

/// A manual block.
#[derive(Debug, Clone, Default, Serialize, Deserialize, ToSchema)]
#[serde(default, deny_unknown_fields)]
pub struct BlockRequest {
    /// Why (under 256 bytes), e.g. a ticket.
    pub note: String,
}

/// The mirror a door chose, and nothing else of the registry.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct DoorChoice {
    /// The mirror's host.
    pub host: String,
    /// Where a redirect would send the visitor.
    pub url: String,
}

/// A tenant, with the mirrors that name it.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct TenantView {
    pub name: String,
    /// What it is.
    pub note: String,
    /// Mirrors that name it (mirrors serving every tenant are not counted).
    pub mirrors: usize,
    /// When none of its mirrors is live, doors send its visitors to degraded ones (false:
    /// to none).
    #[serde(default)]
    pub fallback_to_degraded: bool,
    /// Where doors send its visitors when no mirror may serve them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fallback_url: Option<String>,
    /// Doors send its visitors to the eligible mirror their region measures fastest.
    #[serde(default)]
    pub order_by_latency: bool,
    /// While it orders by latency: each region's mirrors as doors prefer them now (the doors'
    /// own table), fastest first.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub latency_order: BTreeMap<String, Vec<String>>,
}

/// A named check as created: its name and its attributes.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct CheckCreate {
    /// Name, unique (`default` applies to mirrors, clusters and monitors that have no check
    /// and name none).
    pub name: String,
    #[serde(flatten)]
    pub check: CheckInput,
}

/// A named check.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct CheckView {
    /// Server-assigned id.
    pub id: i64,
    pub created_at: Timestamp,
    /// Last changed.
    pub updated_at: Timestamp,
    /// Name.
    pub name: String,
    /// Its attributes, defaults filled in.
    pub check: Check,
    /// Mirrors it probes.
    pub mirrors: usize,
    /// Clusters whose listeners it probes (by name, or as `default`).
    #[serde(default)]
    pub clusters: usize,
    /// Monitors whose endpoints it probes (by name, or as `default`).
    #[serde(default)]
    pub monitors: usize,
}
