//! Monitors (§7): endpoints per region with an audience weight, a failure quorum per region
//! and a weighted global verdict with down and stale budgets.

use std::collections::{BTreeSet, VecDeque};
use std::fmt;

use serde::{Deserialize, Serialize};

use crate::check::{Check, Method};
use crate::error::{Error, Result, in_range, name};
use crate::result::HlsDetail;
use crate::time::Timestamp;

/// Validates an endpoint URL: `http://` or `https://`, a host, an optional port and path.
pub fn endpoint_url(field: &str, text: &str) -> Result<String> {
    crate::limits::url(field, text)?;
    let t = text.trim();
    let bad = || Error::invalid(field, format!("must be an http:// or https:// URL, got {text:?}"));
    let rest = t.strip_prefix("http://").or_else(|| t.strip_prefix("https://")).ok_or_else(bad)?;
    let authority = rest.split('/').next().unwrap_or_default();
    if authority.is_empty() || t.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(bad());
    }
    // Credentials in a URL end up in logs, errors and the UI: they are never accepted.
    if authority.contains('@') {
        return Err(Error::invalid(field, "must not carry a user name or password (user:pass@)"));
    }
    Ok(t.to_owned())
}

/// Validates a host a playlist may send the probers to: a host name or IP address,
/// optionally with a port (`segments.cdn.example:443`), nothing else.
fn allowed_host(field: &str, text: &str) -> Result<String> {
    let t = text.trim().to_ascii_lowercase();
    let ok = !t.is_empty()
        && t.len() <= 255
        && t.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b':' | b'[' | b']'));
    if ok {
        Ok(t)
    } else {
        Err(Error::invalid(
            field,
            format!("must be a host name or address, with an optional port, got {text:?}"),
        ))
    }
}

/// One region of a monitor.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct MonitorRegion {
    /// Region code (probers of that region probe its endpoints).
    pub region: String,
    /// Audience weight (≥ 0); budgets are shares of the total weight.
    pub weight: f64,
    /// Endpoint URLs (1–16): HLS manifests, or pages for `http` checks.
    pub endpoints: Vec<String>,
    /// Content-steering pathway these endpoints serve (a CDN's name, like `cdn-a`; regions may
    /// share one). The region code when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pathway: Option<String>,
    /// This region's own maximum segment age, s (the monitor's when absent): a region whose
    /// edges cache longer may allow more.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_segment_age_s: Option<u32>,
}

impl MonitorRegion {
    /// The pathway name players see.
    pub fn pathway(&self) -> &str {
        self.pathway.as_deref().unwrap_or(&self.region)
    }

    /// The maximum segment age that applies here, s.
    pub fn max_age_s(&self, m: &Monitor) -> u32 {
        self.max_segment_age_s.unwrap_or(m.max_segment_age_s)
    }
}

/// A pathway ID as HLS content steering allows: `[A-Za-z0-9._-]`, 1–64 characters.
fn pathway_id(field: &str, text: &str) -> Result<String> {
    let ok = !text.is_empty()
        && text.len() <= 64
        && text.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'));
    if ok {
        Ok(text.to_owned())
    } else {
        Err(Error::invalid(
            field,
            format!("must be 1 to 64 letters, digits, dots, underscores or hyphens, got {text:?}"),
        ))
    }
}

/// The check of a monitor that has none and names none when no check is named `default`:
/// `hls` with the other defaults.
pub fn builtin_check() -> Check {
    Check::parse(crate::check::CheckInput { method: Some(Method::Hls), ..Default::default() })
        .unwrap_or_else(|_| unreachable!("an hls check with defaults is valid"))
}

/// A validated monitor.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "MonitorInput")]
#[non_exhaustive]
pub struct Monitor {
    pub name: String,
    /// The monitor's own check of its endpoints (`hls` or `http`/`https`); absent: the named
    /// check [`check_name`](Self::check_name), else the check named `default`, else
    /// [`builtin_check`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub check: Option<Check>,
    /// The named check its endpoints are probed with (never together with `check`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub check_name: Option<String>,
    pub regions: Vec<MonitorRegion>,
    /// Hosts other than an endpoint's own that its playlists may send the probers to (a CDN
    /// that serves segments from another host): `host` or `host:port`. A playlist's URI on
    /// any other origin is refused, not fetched.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub allowed_hosts: Vec<String>,
    /// N: failing probes among the last M that make a region down.
    pub failure_quorum: u32,
    /// M: probes per region considered.
    pub quorum_window: u32,
    /// A region whose worst known segment age exceeds this is stale (degraded), s.
    pub max_segment_age_s: u32,
    /// Weighted share of down regions (%) at or above which the monitor is down.
    pub down_weight_budget_pct: f64,
    /// Weighted share of stale regions (%) above which the monitor is degraded.
    pub stale_weight_budget_pct: f64,
    /// How often players reload the steering manifest, s.
    pub steering_ttl_s: u32,
    /// What the verdict weighs regions by: the configured weights, those learned from demand,
    /// or their mean.
    #[serde(default, skip_serializing_if = "Weighting::is_fixed")]
    pub weighting: Weighting,
    /// The least share a learned weight gives a region, %.
    pub learned_floor_pct: f64,
    /// Each region's players get the pathways in the order that region's probers measure
    /// them (every region's probers then probe every region's endpoints); off: one order for
    /// all, by each pathway's own regions' probes.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub steer_by_client_region: bool,
}

/// What a monitor's verdict weighs its regions by.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum Weighting {
    /// The weights as configured.
    #[default]
    Fixed,
    /// Each region's share of the demand Vantage saw from its clients over the last day, with
    /// the floor (configured until any demand is seen).
    Learned,
    /// The mean of the configured and the learned shares.
    Blend,
}

impl Weighting {
    fn is_fixed(&self) -> bool {
        *self == Weighting::Fixed
    }

    /// As entered.
    pub fn as_str(self) -> &'static str {
        match self {
            Weighting::Fixed => "fixed",
            Weighting::Learned => "learned",
            Weighting::Blend => "blend",
        }
    }
}

/// The default floor of a learned weight, %.
const DEFAULT_FLOOR_PCT: f64 = 5.0;

/// A monitor as entered.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(utoipa::ToSchema))]
#[serde(default, deny_unknown_fields)]
pub struct MonitorInput {
    pub name: String,
    /// The monitor's own check (absent: `check_name`, else the check named `default`, else
    /// `hls`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub check: Option<Check>,
    /// A named check to probe the endpoints with, instead of an own `check`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub check_name: Option<String>,
    pub regions: Vec<MonitorRegion>,
    /// Other hosts its playlists may send the probers to (none).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub allowed_hosts: Vec<String>,
    /// N (3).
    pub failure_quorum: u32,
    /// M (5).
    pub quorum_window: u32,
    /// Max segment age, s (30).
    pub max_segment_age_s: u32,
    /// Down budget, % (15).
    pub down_weight_budget_pct: f64,
    /// Stale budget, % (10).
    pub stale_weight_budget_pct: f64,
    /// Steering manifest TTL, s (1–3600, 30).
    pub steering_ttl_s: u32,
    /// Weights: `fixed` (as configured), `learned` (from demand) or `blend` (`fixed`).
    pub weighting: Weighting,
    /// The least share a learned weight gives a region, % (0–50, 5).
    pub learned_floor_pct: f64,
    /// Order the pathways for each region's players by what that region's probers measure
    /// of every pathway (false; needs two pathways or more).
    pub steer_by_client_region: bool,
}

impl From<Monitor> for MonitorInput {
    fn from(m: Monitor) -> Self {
        MonitorInput {
            name: m.name,
            check: m.check,
            check_name: m.check_name,
            regions: m.regions,
            allowed_hosts: m.allowed_hosts,
            failure_quorum: m.failure_quorum,
            quorum_window: m.quorum_window,
            max_segment_age_s: m.max_segment_age_s,
            down_weight_budget_pct: m.down_weight_budget_pct,
            stale_weight_budget_pct: m.stale_weight_budget_pct,
            steering_ttl_s: m.steering_ttl_s,
            weighting: m.weighting,
            learned_floor_pct: m.learned_floor_pct,
            steer_by_client_region: m.steer_by_client_region,
        }
    }
}

impl Default for MonitorInput {
    fn default() -> Self {
        MonitorInput {
            name: String::new(),
            check: None,
            check_name: None,
            regions: Vec::new(),
            allowed_hosts: Vec::new(),
            failure_quorum: 3,
            quorum_window: 5,
            max_segment_age_s: 30,
            down_weight_budget_pct: 15.0,
            stale_weight_budget_pct: 10.0,
            steering_ttl_s: 30,
            weighting: Weighting::Fixed,
            learned_floor_pct: DEFAULT_FLOOR_PCT,
            steer_by_client_region: false,
        }
    }
}

/// A floor of a learned weight: 0–50 % (above half, one region's floor would outweigh the
/// rest), and one that each of the `regions` can have (their floors together at most 100 %).
fn floor(field: &str, v: f64, regions: usize) -> Result<f64> {
    if !(v.is_finite() && (0.0..=50.0).contains(&v)) {
        return Err(Error::invalid(field, format!("must be between 0 and 50, got {v}")));
    }
    if v * regions as f64 > 100.0 {
        return Err(Error::invalid(
            field,
            format!("{v} % for each of {regions} regions is more than 100 %: at most {}", 100 / regions),
        ));
    }
    Ok(v)
}

fn pct(field: &str, v: f64) -> Result<f64> {
    if v.is_finite() && (0.0..=100.0).contains(&v) {
        Ok(v)
    } else {
        Err(Error::invalid(field, format!("must be between 0 and 100, got {v}")))
    }
}

impl TryFrom<MonitorInput> for Monitor {
    type Error = Error;
    fn try_from(i: MonitorInput) -> Result<Self> {
        let name = name("name", &i.name, 64)?;
        if i.check.as_ref().is_some_and(|c| c.method() == Some(Method::Tcp)) {
            return Err(Error::invalid("check.method", "monitors probe endpoints with hls, http or https"));
        }
        let check_name = i.check_name.map(|n| crate::error::name("check_name", &n, 64)).transpose()?;
        if check_name.is_some() && i.check.is_some() {
            return Err(Error::invalid(
                "check_name",
                "give either the monitor's own check or the name of a check, not both",
            ));
        }
        if i.regions.is_empty() || i.regions.len() > 64 {
            return Err(Error::invalid("regions", format!("1 to 64 regions, got {}", i.regions.len())));
        }
        let mut regions = Vec::with_capacity(i.regions.len());
        for (n, r) in i.regions.into_iter().enumerate() {
            let f = format!("regions[{n}]");
            if regions.iter().any(|x: &MonitorRegion| x.region == r.region) {
                return Err(Error::invalid(format!("{f}.region"), format!("{} is listed twice", r.region)));
            }
            if !r.weight.is_finite() || r.weight < 0.0 {
                return Err(Error::invalid(
                    format!("{f}.weight"),
                    format!("must be at least 0, got {}", r.weight),
                ));
            }
            if r.endpoints.is_empty() || r.endpoints.len() > 16 {
                return Err(Error::invalid(
                    format!("{f}.endpoints"),
                    format!("1 to 16 endpoints, got {}", r.endpoints.len()),
                ));
            }
            let endpoints = r
                .endpoints
                .iter()
                .enumerate()
                .map(|(k, e)| endpoint_url(&format!("{f}.endpoints[{k}]"), e))
                .collect::<Result<Vec<_>>>()?;
            let pathway = r.pathway.map(|p| pathway_id(&format!("{f}.pathway"), &p)).transpose()?;
            let max_segment_age_s = r
                .max_segment_age_s
                .map(|a| in_range(&format!("{f}.max_segment_age_s"), a, 1, 86_400))
                .transpose()?;
            regions.push(MonitorRegion {
                region: r.region,
                weight: r.weight,
                endpoints,
                pathway,
                max_segment_age_s,
            });
        }
        if regions.iter().map(|r| r.weight).sum::<f64>() <= 0.0 {
            return Err(Error::invalid("regions", "the weights must not all be 0"));
        }
        if i.allowed_hosts.len() > 16 {
            return Err(Error::invalid(
                "allowed_hosts",
                format!("at most 16 hosts, got {}", i.allowed_hosts.len()),
            ));
        }
        let allowed_hosts = i
            .allowed_hosts
            .iter()
            .enumerate()
            .map(|(k, h)| allowed_host(&format!("allowed_hosts[{k}]"), h))
            .collect::<Result<Vec<_>>>()?;
        let regions_n = regions.len();
        let pathways: BTreeSet<&str> = regions.iter().map(MonitorRegion::pathway).collect();
        if i.steer_by_client_region && pathways.len() < 2 {
            return Err(Error::invalid(
                "steer_by_client_region",
                "steering by the client's region orders pathways: give the regions two pathways or more",
            ));
        }
        let quorum_window = in_range("quorum_window", i.quorum_window, 1, 64)?;
        let failure_quorum = in_range("failure_quorum", i.failure_quorum, 1, quorum_window)?;
        let max_segment_age_s = in_range("max_segment_age_s", i.max_segment_age_s, 1, 86_400)?;
        Ok(Monitor {
            name,
            check: i.check,
            check_name,
            regions,
            allowed_hosts,
            failure_quorum,
            quorum_window,
            max_segment_age_s,
            down_weight_budget_pct: pct("down_weight_budget_pct", i.down_weight_budget_pct)?,
            stale_weight_budget_pct: pct("stale_weight_budget_pct", i.stale_weight_budget_pct)?,
            steering_ttl_s: in_range("steering_ttl_s", i.steering_ttl_s, 1, 3600)?,
            weighting: i.weighting,
            learned_floor_pct: floor("learned_floor_pct", i.learned_floor_pct, regions_n)?,
            steer_by_client_region: i.steer_by_client_region,
        })
    }
}

/// One probe of one endpoint of a region.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct MonitorProbe {
    /// When.
    pub at: Timestamp,
    /// Failed: unreachable, invalid manifest or segment not fetchable (staleness is not a
    /// failure; it degrades).
    pub failed: bool,
    /// The health tuple.
    pub detail: HlsDetail,
}

/// The last M probes of one region.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct RegionWindow {
    probes: VecDeque<MonitorProbe>,
}

/// A region's health.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum RegionHealth {
    /// No probe yet.
    Unknown,
    /// Below the failure quorum and fresh (or freshness unknown).
    Healthy,
    /// Worst known segment age above the maximum.
    Stale,
    /// At least N of the last M probes failed.
    Down,
}

impl RegionWindow {
    /// Adds a probe, keeping the last `m`.
    pub fn push(&mut self, p: MonitorProbe, m: u32) {
        self.probes.push_back(p);
        while self.probes.len() > m as usize {
            self.probes.pop_front();
        }
    }

    /// The newest probe.
    pub fn latest(&self) -> Option<&MonitorProbe> {
        self.probes.back()
    }

    /// Probes in the window.
    pub fn len(&self) -> usize {
        self.probes.len()
    }

    /// No probe yet.
    pub fn is_empty(&self) -> bool {
        self.probes.is_empty()
    }

    /// Failing probes in the window.
    pub fn failures(&self) -> u32 {
        u32::try_from(self.probes.iter().filter(|p| p.failed).count()).unwrap_or(u32::MAX)
    }

    /// Worst known segment age in the window (unknown ages ignored).
    pub fn worst_age(&self) -> Option<f64> {
        self.probes.iter().filter_map(|p| p.detail.segment_age_s).reduce(f64::max)
    }

    /// The region's health under the monitor's quorum and the region's maximum age, at `now`:
    /// unknown before the first probe and once the newest is older than three intervals of the
    /// check the monitor is probed with (`interval_s`; at least 30 s) — a region whose probers
    /// went quiet is not known to be well.
    pub fn health(&self, m: &Monitor, r: &MonitorRegion, interval_s: u32, now: Timestamp) -> RegionHealth {
        let fresh_ms = (i64::from(interval_s) * 3).max(30) * 1000;
        let quiet = self.latest().is_none_or(|p| now.millis_since(p.at) > fresh_ms);
        if quiet {
            RegionHealth::Unknown
        } else if self.failures() >= m.failure_quorum {
            RegionHealth::Down
        } else if self.worst_age().is_some_and(|a| a > f64::from(r.max_age_s(m))) {
            RegionHealth::Stale
        } else {
            RegionHealth::Healthy
        }
    }
}

/// The global verdict of a monitor.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum GlobalVerdict {
    /// Nothing to report.
    Healthy,
    /// A region is down, or too much weight is stale.
    Degraded,
    /// Down weight reached the budget.
    Down,
}

impl fmt::Display for GlobalVerdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            GlobalVerdict::Healthy => "healthy",
            GlobalVerdict::Degraded => "degraded",
            GlobalVerdict::Down => "down",
        })
    }
}

/// A monitor's verdict with the weights behind it.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(utoipa::ToSchema))]
pub struct MonitorVerdict {
    /// Global verdict.
    pub global: GlobalVerdict,
    /// Share of the audience weight in down regions, %.
    pub down_weight_pct: f64,
    /// Share in stale regions, %.
    pub stale_weight_pct: f64,
    /// Which of §7's rules hold, so that readers show them rather than test the budgets again.
    #[serde(default)]
    pub reasons: VerdictReasons,
}

/// The §7 rules behind a verdict: `down` needs a region down and the down budget spent;
/// `degraded` a region down or the stale budget spent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(utoipa::ToSchema))]
pub struct VerdictReasons {
    /// Some region is down.
    pub region_down: bool,
    /// A region is down and the down weight reached the down budget.
    pub down_budget_spent: bool,
    /// The stale weight is above the stale budget.
    pub stale_budget_spent: bool,
    /// The monitor weighs by learned weights, and by its configured ones the verdict would be
    /// another: the audience Vantage saw decided it.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub by_learned_weights: bool,
}

/// Global by the configured weights ([`global_verdict_by`]).
pub fn global_verdict(m: &Monitor, health: &[RegionHealth]) -> MonitorVerdict {
    let weights: Vec<f64> = m.regions.iter().map(|r| r.weight).collect();
    global_verdict_by(m, health, &weights)
}

/// Global: `down` when the weighted down share reaches the down budget; else `degraded` when
/// any region is down or the stale share exceeds the stale budget; else `healthy`. `weights`:
/// each region's weight in the monitor's order (the effective ones of
/// [`crate::demand::weights`]).
pub fn global_verdict_by(m: &Monitor, health: &[RegionHealth], weights: &[f64]) -> MonitorVerdict {
    let total: f64 = weights.iter().sum();
    let share = |which: RegionHealth| -> f64 {
        // A fold from +0.0: an empty sum of floats is -0.0, which the API would show.
        let w = weights.iter().zip(health).filter(|(_, h)| **h == which).fold(0.0, |a, (w, _)| a + w);
        if total > 0.0 { w * 100.0 / total } else { 0.0 }
    };
    let down = share(RegionHealth::Down);
    let stale = share(RegionHealth::Stale);
    let region_down = health.contains(&RegionHealth::Down);
    let reasons = VerdictReasons {
        region_down,
        down_budget_spent: region_down && down >= m.down_weight_budget_pct,
        stale_budget_spent: stale > m.stale_weight_budget_pct,
        by_learned_weights: false,
    };
    let global = if reasons.down_budget_spent {
        GlobalVerdict::Down
    } else if region_down || reasons.stale_budget_spent {
        GlobalVerdict::Degraded
    } else {
        GlobalVerdict::Healthy
    };
    MonitorVerdict { global, down_weight_pct: down, stale_weight_pct: stale, reasons }
}

impl RegionHealth {
    /// Steering preference: healthy first, then not yet known, then stale, then down.
    pub(crate) fn rank(self) -> u8 {
        match self {
            RegionHealth::Healthy => 0,
            RegionHealth::Unknown => 1,
            RegionHealth::Stale => 2,
            RegionHealth::Down => 3,
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A monitor of six regions of falling weight, each its own pathway.
    pub(crate) fn monitor() -> Monitor {
        let regions = [("jp", 0.30), ("kr", 0.20), ("sg", 0.20), ("id", 0.15), ("ph", 0.10), ("br", 0.05)]
            .iter()
            .map(|(r, w)| MonitorRegion {
                region: (*r).into(),
                weight: *w,
                endpoints: vec![format!("https://edge-{r}.example.net/live.m3u8")],
                pathway: None,
                max_segment_age_s: None,
            })
            .collect();
        Monitor::try_from(MonitorInput { name: "live".into(), regions, ..Default::default() }).unwrap()
    }

    fn probe(failed: bool, age: Option<f64>) -> MonitorProbe {
        MonitorProbe {
            at: Timestamp::EPOCH,
            failed,
            detail: HlsDetail { segment_age_s: age, ..Default::default() },
        }
    }

    fn window(probes: &[MonitorProbe]) -> RegionWindow {
        let mut w = RegionWindow::default();
        for p in probes {
            w.push(*p, 5);
        }
        w
    }

    #[test]
    fn weighting_and_its_floor_are_read_and_checked() {
        let base = MonitorInput::from(monitor());
        let m = Monitor::try_from(MonitorInput {
            weighting: Weighting::Blend,
            learned_floor_pct: 2.5,
            ..base.clone()
        })
        .unwrap();
        assert_eq!((m.weighting, m.learned_floor_pct), (Weighting::Blend, 2.5));
        let json = serde_json::to_value(&m).unwrap();
        assert_eq!(
            (&json["weighting"], &json["learned_floor_pct"]),
            (&serde_json::json!("blend"), &serde_json::json!(2.5))
        );
        assert_eq!(serde_json::from_value::<Monitor>(json).unwrap(), m, "read back as written");
        let e = Monitor::try_from(MonitorInput { learned_floor_pct: 60.0, ..base.clone() }).unwrap_err();
        assert_eq!(e.to_string(), "learned_floor_pct: must be between 0 and 50, got 60");
        let e = Monitor::try_from(MonitorInput { learned_floor_pct: 20.0, ..base.clone() }).unwrap_err();
        assert_eq!(
            e.to_string(),
            "learned_floor_pct: 20 % for each of 6 regions is more than 100 %: at most 16"
        );
        let e =
            serde_json::from_str::<Monitor>(r#"{"name":"x","weighting":"guess","regions":[]}"#).unwrap_err();
        assert!(e.to_string().contains("unknown variant `guess`"), "{e}");
    }

    #[test]
    fn region_down_needs_the_failure_quorum() {
        let m = monitor(); // 3 of the last 5
        assert_eq!(window(&[]).health(&m, &m.regions[0], 5, Timestamp::EPOCH), RegionHealth::Unknown);
        assert_eq!(
            window(&[probe(true, None), probe(true, None), probe(false, None)]).health(
                &m,
                &m.regions[0],
                5,
                Timestamp::EPOCH
            ),
            RegionHealth::Healthy
        );
        assert_eq!(
            window(&[probe(true, None), probe(false, None), probe(true, None), probe(true, None)]).health(
                &m,
                &m.regions[0],
                5,
                Timestamp::EPOCH
            ),
            RegionHealth::Down
        );
        // Old failures leave the window.
        let w = window(&[
            probe(true, None),
            probe(true, None),
            probe(true, None),
            probe(false, None),
            probe(false, None),
            probe(false, None),
        ]);
        assert_eq!(w.failures(), 2);
        assert_eq!(w.health(&m, &m.regions[0], 5, Timestamp::EPOCH), RegionHealth::Healthy);
    }

    #[test]
    fn a_quiet_region_is_unknown_and_a_region_may_allow_older_segments() {
        let mut m = monitor(); // hls check every 5 s: quiet after 30 s
        let w = window(&[probe(true, None), probe(true, None), probe(true, None)]);
        assert_eq!(w.health(&m, &m.regions[0], 5, Timestamp::from_secs(30)), RegionHealth::Down);
        assert_eq!(w.health(&m, &m.regions[0], 5, Timestamp::from_secs(31)), RegionHealth::Unknown);
        let aged = window(&[probe(false, Some(41.0))]);
        assert_eq!(aged.health(&m, &m.regions[0], 5, Timestamp::EPOCH), RegionHealth::Stale);
        m.regions[0].max_segment_age_s = Some(60);
        assert_eq!(aged.health(&m, &m.regions[0], 5, Timestamp::EPOCH), RegionHealth::Healthy);
    }

    #[test]
    fn unknown_freshness_is_not_stale() {
        let m = monitor(); // 30 s
        assert_eq!(
            window(&[probe(false, None)]).health(&m, &m.regions[0], 5, Timestamp::EPOCH),
            RegionHealth::Healthy
        );
        assert_eq!(
            window(&[probe(false, Some(41.0)), probe(false, None)]).health(
                &m,
                &m.regions[0],
                5,
                Timestamp::EPOCH
            ),
            RegionHealth::Stale
        );
        assert_eq!(
            window(&[probe(false, Some(12.0))]).health(&m, &m.regions[0], 5, Timestamp::EPOCH),
            RegionHealth::Healthy
        );
    }

    #[test]
    fn down_weight_budget_of_15_percent() {
        use RegionHealth::*;
        let m = monitor();
        // A small-audience region down (5 %): degraded, nobody paged.
        let v = global_verdict(&m, &[Healthy, Healthy, Healthy, Healthy, Healthy, Down]);
        assert_eq!(v.global, GlobalVerdict::Degraded);
        let reasons = VerdictReasons { region_down: true, ..VerdictReasons::default() };
        assert_eq!(v.reasons, reasons, "a region down, the budget not spent");
        // 15 % of the audience down reaches the budget: down.
        let v = global_verdict(&m, &[Healthy, Healthy, Healthy, Down, Healthy, Healthy]);
        assert_eq!(v.global, GlobalVerdict::Down);
        assert_eq!(v.reasons, VerdictReasons { down_budget_spent: true, ..reasons });
        assert!((v.down_weight_pct - 15.0).abs() < 1e-9);
        // 10 % + 5 % down: also 15 %.
        assert_eq!(
            global_verdict(&m, &[Healthy, Healthy, Healthy, Healthy, Down, Down]).global,
            GlobalVerdict::Down
        );
        let healthy = global_verdict(&m, &[Healthy; 6]);
        assert_eq!(healthy.global, GlobalVerdict::Healthy);
        assert!(healthy.down_weight_pct.is_sign_positive(), "no -0.0 in answers");
    }

    #[test]
    fn stale_weight_budget_of_10_percent() {
        use RegionHealth::*;
        let m = monitor();
        assert_eq!(
            global_verdict(&m, &[Healthy, Healthy, Healthy, Healthy, Stale, Healthy]).global,
            GlobalVerdict::Healthy,
            "10 % is not above the budget"
        );
        let v = global_verdict(&m, &[Healthy, Healthy, Healthy, Stale, Healthy, Healthy]);
        assert_eq!(v.global, GlobalVerdict::Degraded);
        assert_eq!(v.reasons, VerdictReasons { stale_budget_spent: true, ..VerdictReasons::default() });
    }

    #[test]
    fn steering_by_the_client_region_needs_pathways_to_order() {
        let region = |code: &str, pathway: Option<&str>| MonitorRegion {
            region: code.into(),
            weight: 1.0,
            endpoints: vec!["http://e.example.net/a.m3u8".into()],
            pathway: pathway.map(Into::into),
            max_segment_age_s: None,
        };
        let input = |regions| MonitorInput {
            name: "m".into(),
            regions,
            steer_by_client_region: true,
            ..Default::default()
        };
        let e =
            Monitor::try_from(input(vec![region("eu", Some("cdn")), region("us", Some("cdn"))])).unwrap_err();
        assert_eq!(e.field(), "steer_by_client_region");
        assert!(e.to_string().contains("two pathways or more"), "{e}");
        let m = Monitor::try_from(input(vec![region("eu", None), region("us", None)])).unwrap();
        assert!(m.steer_by_client_region, "each region its own pathway");
        let json = serde_json::to_value(&m).unwrap();
        assert_eq!(json["steer_by_client_region"], true);
        assert_eq!(serde_json::from_value::<Monitor>(json).unwrap(), m, "read back as written");
    }

    #[test]
    fn monitor_validation() {
        let e = Monitor::try_from(MonitorInput { name: "m".into(), ..Default::default() }).unwrap_err();
        assert_eq!(e.to_string(), "regions: 1 to 64 regions, got 0");
        let r = MonitorRegion {
            region: "jp".into(),
            weight: 1.0,
            endpoints: vec!["ftp://x".into()],
            pathway: None,
            max_segment_age_s: None,
        };
        let e = Monitor::try_from(MonitorInput { name: "m".into(), regions: vec![r], ..Default::default() })
            .unwrap_err();
        assert_eq!(e.field(), "regions[0].endpoints[0]");
        let r = MonitorRegion {
            region: "jp".into(),
            weight: 1.0,
            endpoints: vec!["http://e.example.net/a.m3u8".into()],
            pathway: Some("cdn a".into()),
            max_segment_age_s: None,
        };
        let e = Monitor::try_from(MonitorInput {
            name: "m".into(),
            regions: vec![r.clone()],
            ..Default::default()
        })
        .unwrap_err();
        assert_eq!(e.field(), "regions[0].pathway");
        let r = MonitorRegion { pathway: None, ..r };
        let e = Monitor::try_from(MonitorInput {
            name: "m".into(),
            regions: vec![r.clone()],
            failure_quorum: 6,
            ..Default::default()
        })
        .unwrap_err();
        assert_eq!(e.to_string(), "failure_quorum: must be between 1 and 5, got 6");
        let with = |endpoint: &str, allowed_hosts: Vec<String>| {
            let r = MonitorRegion { endpoints: vec![endpoint.into()], ..r.clone() };
            Monitor::try_from(MonitorInput {
                name: "m".into(),
                regions: vec![r],
                allowed_hosts,
                ..Default::default()
            })
        };
        let e = with("http://user:pass@e.example.net/a.m3u8", vec![]).unwrap_err();
        assert_eq!(
            e.to_string(),
            "regions[0].endpoints[0]: must not carry a user name or password (user:pass@)"
        );
        let m = with("http://e.example.net/a.m3u8", vec!["Seg.CDN.example:8443".into()]).unwrap();
        assert_eq!(m.allowed_hosts, ["seg.cdn.example:8443"]);
        let e = with("http://e.example.net/a.m3u8", vec!["http://seg.cdn.example/".into()]).unwrap_err();
        assert_eq!(e.field(), "allowed_hosts[0]");
    }
}
