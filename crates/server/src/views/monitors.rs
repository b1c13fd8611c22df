//! Bodies of the monitor and steering routes.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use vantage_control::monitors::VerdictRecord;
use vantage_core::Timestamp;
use vantage_core::monitor::{GlobalVerdict, Monitor, RegionHealth};

/// A monitor: its definition and its verdict now.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct MonitorView {
    /// Server-assigned id.
    pub id: i64,
    pub created_at: Timestamp,
    /// Last changed.
    pub updated_at: Timestamp,
    /// The definition, defaults filled in.
    pub monitor: Monitor,
    /// The check its endpoints are probed with now, and where it comes from.
    pub probed_with: super::ProbedCheck,
    /// The global verdict (absent before the first probe).
    pub verdict: Option<GlobalVerdict>,
    /// Since when.
    pub since: Option<Timestamp>,
}

/// One region of a monitor's verdict, with the health tuple of its newest probe.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct RegionVerdictView {
    /// Region code.
    pub region: String,
    /// Audience weight.
    pub weight: f64,
    /// Content-steering pathway.
    pub pathway: String,
    pub health: RegionHealth,
    /// Failing probes among the last `window`.
    pub failures: u32,
    /// Probes in the window.
    pub probes: usize,
    /// The window's worst known segment age, s.
    pub worst_age_s: Option<f64>,
    /// The newest probe: the edge answered.
    pub reachable: Option<bool>,
    /// The newest probe: the manifest was a valid playlist.
    pub manifest_valid: Option<bool>,
    /// The newest probe: the newest segment answered 200 or 206.
    pub segment_fetchable: Option<bool>,
    /// The newest probe: the newest segment's age, s.
    pub segment_age_s: Option<f64>,
    /// The newest probe: time to the manifest's first byte, ms.
    pub ttfb_ms: Option<f64>,
    /// When the newest probe arrived.
    pub at: Option<Timestamp>,
}

/// A monitor's verdict: global, the weights behind it, each region.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct MonitorVerdictView {
    pub id: i64,
    /// Name.
    pub name: String,
    /// `healthy`, `degraded` or `down` (absent before the first probe).
    pub global: Option<GlobalVerdict>,
    /// Since when.
    pub since: Option<Timestamp>,
    /// Share of the audience in down regions, 0–1.
    pub down_weight: f64,
    /// Share of the audience in stale regions, 0–1.
    pub stale_weight: f64,
    /// Which of §7's rules hold now (the budgets each weight is measured against).
    pub reasons: vantage_core::monitor::VerdictReasons,
    /// What the verdict weighs regions by: `fixed`, `learned` or `blend`.
    pub weighting: vantage_core::monitor::Weighting,
    /// Each region's share of the audience, %, in the order of `regions`: as configured, as
    /// learned from the demand of the last day (absent before any), and what the verdict
    /// weighs by.
    pub weights: vantage_core::demand::Weights,
    /// Requests from each of its regions' clients over the last day (door redirects, steering
    /// polls and DNS answers), in the order of `regions`: what the learned weights are shares
    /// of.
    pub demand: Vec<u64>,
    pub regions: Vec<RegionVerdictView>,
    /// The steering order now: what players no region of the monitor claims get (every
    /// player, unless it steers by the client's region).
    pub pathway_priority: Vec<String>,
    /// Steered by the client's region: each region's players' order, by what that region's
    /// probers measure (empty otherwise).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub pathway_priority_by_region: BTreeMap<String, Vec<String>>,
}

/// One bucket of a region's history.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct MonitorPoint {
    /// Start of the bucket.
    pub at: Timestamp,
    /// Probes in it (every prober of the region).
    pub probes: u32,
    /// Failing probes.
    pub failures: u32,
    /// Worst known segment age, s.
    pub max_age_s: Option<f64>,
    /// Mean time to first byte of the good probes, ms.
    pub ttfb_ms: Option<f64>,
}

/// One region's series.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct RegionHistory {
    /// Region code.
    pub region: String,
    pub points: Vec<MonitorPoint>,
}

/// A monitor's history: per-region series from the time series, and the verdict changes.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct MonitorHistory {
    /// `15m`, `1h`, `24h` or `14d`.
    pub range: String,
    /// Bucket width, s.
    pub bucket_s: i64,
    pub regions: Vec<RegionHistory>,
    /// Global verdict changes, oldest first.
    pub verdicts: Vec<VerdictRecord>,
}

/// A content-steering manifest: HLS (`GET /steer/{monitor}`) or DASH-IF
/// (`GET /steer/{monitor}/dash`), the same answer under the priority keys each player reads.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct SteeringManifest {
    /// Always 1.
    #[serde(rename = "VERSION")]
    pub version: u32,
    /// Seconds before the player reloads.
    #[serde(rename = "TTL")]
    pub ttl: u32,
    /// Where the player reloads from.
    #[serde(rename = "RELOAD-URI")]
    pub reload_uri: String,
    /// The pathways, preferred first: HLS pathway ids (`PATHWAY-ID` of the variants), or DASH
    /// service locations (`BaseURL@serviceLocation`), which dash.js reads under this key too.
    #[serde(rename = "PATHWAY-PRIORITY")]
    pub pathway_priority: Vec<String>,
    /// DASH only: the same order under the key of DASH-IF's community-review draft, for
    /// players built on the draft.
    #[serde(rename = "SERVICE-LOCATION-PRIORITY", default, skip_serializing_if = "Option::is_none")]
    pub service_location_priority: Option<Vec<String>>,
}
