//! Monitors (SPEC §7) inside the control core: which endpoints each prober probes for them,
//! each region's window of probes (all its probers' results merged in arrival order), the
//! regions' health, the audience-weighted global verdict with its history, and the content
//! steering order. Saved whole, so a restart keeps the windows and the verdict history.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};
use vantage_core::Timestamp;
use vantage_core::check::Check;
use vantage_core::demand::{Demand, Weights, weights};
use vantage_core::ids::MonitorId;
use vantage_core::monitor::{
    GlobalVerdict, Monitor, MonitorProbe, MonitorRegion, MonitorVerdict, RegionHealth, RegionWindow,
    Weighting, global_verdict, global_verdict_by,
};
use vantage_core::result::{Attempt, ErrorCode, ProbeResult, Stages};
use vantage_core::steering::{HOLD_TTLS, PathwayFigure, SteeringOrder, figures};
use vantage_core::wire::EndpointTarget;

use crate::config::Config;

mod findings;

/// Verdict changes kept per monitor.
const HISTORY: usize = 500;
/// Windows are saved at most this often while no verdict changes.
const SAVED_EVERY_MS: i64 = 10_000;

/// The key of one monitor endpoint: monitor, region code, endpoint index (`v{id}/{region}/{k}`),
/// and for a monitor steered by the client's region, the other region whose probers measure
/// it (`v{id}/{region}/{k}@{from}`).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct EndpointKey {
    pub monitor: MonitorId,
    /// Region code.
    pub region: String,
    /// Index into the region's endpoints.
    pub index: usize,
    /// The region whose probers measure it for their own players' order, when not `region`'s.
    pub from: Option<String>,
}

impl fmt::Display for EndpointKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "v{}/{}/{}", self.monitor, self.region, self.index)?;
        match &self.from {
            Some(from) => write!(f, "@{from}"),
            None => Ok(()),
        }
    }
}

impl FromStr for EndpointKey {
    type Err = ();
    fn from_str(s: &str) -> Result<Self, ()> {
        let rest = s.strip_prefix('v').ok_or(())?;
        let (rest, from) = match rest.split_once('@') {
            Some((rest, from)) if !from.is_empty() => (rest, Some(from.to_owned())),
            Some(_) => return Err(()),
            None => (rest, None),
        };
        let (id, rest) = rest.split_once('/').ok_or(())?;
        let (region, index) = rest.rsplit_once('/').ok_or(())?;
        Ok(EndpointKey {
            monitor: MonitorId(id.parse().map_err(|_| ())?),
            region: region.to_owned(),
            index: index.parse().map_err(|_| ())?,
            from,
        })
    }
}

/// One global verdict change.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(utoipa::ToSchema))]
pub struct VerdictRecord {
    /// When it changed.
    pub at: Timestamp,
    /// The verdict from then on, with its weights.
    pub verdict: MonitorVerdict,
}

/// One monitor's derived state.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct MonitorState {
    /// Region code → its last M probes.
    pub windows: BTreeMap<String, RegionWindow>,
    /// The global verdict and since when.
    pub verdict: Option<VerdictRecord>,
    /// Every change of the global verdict, oldest first (the last [`HISTORY`]).
    pub history: VecDeque<VerdictRecord>,
    /// The content-steering order with its challenges (absent from older saves).
    #[serde(default)]
    pub steering: SteeringOrder,
    /// Steered by the client's region: the newest probe each region's probers made of each
    /// other region's endpoints (measuring region → measured region).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub seen_from: BTreeMap<String, BTreeMap<String, SeenFrom>>,
    /// Steered by the client's region: each region's players' order.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub by_region: BTreeMap<String, SteeringOrder>,
}

/// One region's newest probe of another region's endpoints.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct SeenFrom {
    pub at: Timestamp,
    /// It failed: the measuring region's players are taken not to reach that pathway.
    #[serde(default)]
    pub failed: bool,
    /// Its time to first byte, ms.
    pub ttfb_ms: Option<f64>,
}

impl MonitorState {
    /// Each region's health at `now`, in the monitor's order; `interval_s` is that of the check
    /// the monitor is probed with ([`Config::monitor_check`]).
    pub fn health(&self, m: &Monitor, interval_s: u32, now: Timestamp) -> Vec<RegionHealth> {
        m.regions
            .iter()
            .map(|r| {
                self.windows.get(&r.region).map_or(RegionHealth::Unknown, |w| w.health(m, r, interval_s, now))
            })
            .collect()
    }

    /// Each region's time to first byte of its newest probe, ms, in the monitor's order.
    pub fn ttfb(&self, m: &Monitor) -> Vec<Option<f64>> {
        m.regions.iter().map(|r| self.own_ttfb(&r.region)).collect()
    }

    fn own_ttfb(&self, region: &str) -> Option<f64> {
        self.windows.get(region).and_then(|w| w.latest()).and_then(|p| p.detail.ttfb_ms)
    }

    /// Each region's health and time to first byte (ms) as `from`'s players would find them,
    /// in the monitor's order: everyone's `health`, down where `from`'s probers fail to reach
    /// it; `from`'s own TTFB by its window, the others' by its probes of them no older than
    /// `fresh_ms` at `now`. `None` when `from` has no such probe of any other region: its
    /// players then get everyone's order.
    pub fn seen_by(
        &self,
        m: &Monitor,
        from: &str,
        health: &[RegionHealth],
        fresh_ms: i64,
        now: Timestamp,
    ) -> Option<(Vec<RegionHealth>, Vec<Option<f64>>)> {
        let seen = self.seen_from.get(from)?;
        let fresh = |r: &str| seen.get(r).filter(|p| now.millis_since(p.at) <= fresh_ms);
        if !m.regions.iter().any(|r| r.region != from && fresh(&r.region).is_some()) {
            return None;
        }
        let mut h = health.to_vec();
        let mut ttfb = Vec::with_capacity(m.regions.len());
        for (i, r) in m.regions.iter().enumerate() {
            if r.region == from {
                ttfb.push(self.own_ttfb(from));
                continue;
            }
            let p = fresh(&r.region);
            if p.is_some_and(|p| p.failed)
                && let Some(x) = h.get_mut(i)
            {
                *x = RegionHealth::Down;
            }
            ttfb.push(p.and_then(|p| p.ttfb_ms));
        }
        Some((h, ttfb))
    }
}

/// A global verdict that changed.
#[derive(Debug, Clone, PartialEq)]
pub struct MonitorChange {
    pub monitor: MonitorId,
    /// Monitor name.
    pub name: String,
    /// Before (`None`: the first verdict).
    pub from: Option<GlobalVerdict>,
    /// After.
    pub to: MonitorVerdict,
    /// Regions down or stale now.
    pub regions: Vec<(String, RegionHealth)>,
}

/// Every monitor's state.
#[derive(Debug, Default, Clone)]
pub struct Monitors {
    states: BTreeMap<MonitorId, MonitorState>,
    /// Requests per region over the last day, which learned weights are shares of.
    demand: Demand,
    save: crate::book::Saving,
}

/// What is saved: the states and the demand (older saves hold the states alone).
#[derive(Serialize, Deserialize)]
struct Saved {
    states: BTreeMap<MonitorId, MonitorState>,
    demand: Demand,
}

impl Monitors {
    /// From the saved JSON (unreadable: empty).
    pub fn restore(saved: Option<&str>) -> Monitors {
        let read = |s: &str| {
            serde_json::from_str::<Saved>(s).ok().or_else(|| {
                let states = serde_json::from_str(s).ok()?;
                Some(Saved { states, demand: Demand::default() })
            })
        };
        let saved = saved.and_then(read);
        let (states, demand) = saved.map(|s| (s.states, s.demand)).unwrap_or_default();
        Monitors { states, demand, ..Monitors::default() }
    }

    /// Counts requests from each region's clients (region code, how many) at `now`: the next
    /// sweep weighs the monitors that learn by them.
    pub fn add_demand(&mut self, counts: &[(String, u64)], now: Timestamp) {
        for (region, n) in counts {
            self.demand.add(region, *n, now);
        }
        self.save.dirty |= !counts.is_empty();
    }

    /// Requests per region over the day up to `now`.
    pub fn demand(&self, now: Timestamp) -> BTreeMap<String, u64> {
        self.demand.totals(now)
    }

    /// `m`'s weights at `now`: configured, learned from the demand, and what its verdict
    /// weighs by.
    pub fn weights(&self, m: &Monitor, now: Timestamp) -> Weights {
        weights(m, &self.demand.totals(now))
    }

    /// One monitor's state.
    pub fn state(&self, id: MonitorId) -> Option<&MonitorState> {
        self.states.get(&id)
    }

    /// Every monitor's state.
    pub fn states(&self) -> impl Iterator<Item = (&MonitorId, &MonitorState)> {
        self.states.iter()
    }

    /// Whether [`take_save`](Self::take_save) has something to save at `now`: windows change
    /// with every report and are saved every [`SAVED_EVERY_MS`], a verdict change at once.
    pub fn save_due(&self, now: Timestamp) -> bool {
        self.save.due(now, SAVED_EVERY_MS)
    }

    /// The saved form, when it is due ([`save_due`](Self::save_due)).
    pub fn take_save(&mut self, now: Timestamp) -> Option<String> {
        if !self.save_due(now) {
            return None;
        }
        self.save.taken(now);
        let saved = Saved { states: self.states.clone(), demand: self.demand.clone() };
        Some(serde_json::to_string(&saved).unwrap_or_default())
    }

    /// States follow the configuration: monitors that went go, regions that left a monitor go,
    /// and what steering by the client's region keeps goes when it is turned off; the demand of
    /// regions that were deleted goes.
    pub fn follow(&mut self, c: &Config) {
        let before = self.states.len();
        self.states.retain(|id, _| c.monitors.contains_key(&id.0));
        self.save.dirty |= before != self.states.len();
        self.save.dirty |= self.demand.retain(|r| c.has_region(r));
        for (id, s) in &mut self.states {
            if let Some(m) = c.monitors.get(&id.0) {
                let m = &m.value;
                let listed = |r: &String| m.regions.iter().any(|x| &x.region == r);
                let kept = (s.windows.len(), s.seen_from.len(), s.by_region.len());
                s.windows.retain(|r, _| listed(r));
                s.seen_from.retain(|r, _| m.steer_by_client_region && listed(r));
                for seen in s.seen_from.values_mut() {
                    seen.retain(|r, _| listed(r));
                }
                s.by_region.retain(|r, _| m.steer_by_client_region && listed(r));
                self.save.dirty |= kept != (s.windows.len(), s.seen_from.len(), s.by_region.len());
            }
        }
    }

    /// A result for a monitor endpoint: the probe joins its region's window, the regions and
    /// the global verdict are recomputed. Staleness is not a failure (it degrades).
    pub fn record(
        &mut self,
        c: &Config,
        key: &EndpointKey,
        r: &ProbeResult,
        now: Timestamp,
    ) -> Option<MonitorChange> {
        let m = &c.monitors.get(&key.monitor.0)?.value;
        let state = self.states.entry(key.monitor).or_default();
        if let Some(from) = &key.from {
            // Another region's endpoint, measured for this region's players' order only: it
            // says nothing of the endpoint's own region's health.
            let listed = |r: &String| m.regions.iter().any(|x| &x.region == r);
            if m.steer_by_client_region && listed(from) && listed(&key.region) {
                let a = r.attempts.last()?;
                let failed = failed(a);
                let seen = SeenFrom { at: now, failed, ttfb_ms: ttfb_of(r, a).filter(|_| !failed) };
                state.seen_from.entry(from.clone()).or_default().insert(key.region.clone(), seen);
                self.save.dirty = true;
            }
            return None;
        }
        let window = state.windows.entry(key.region.clone()).or_default();
        // One probe per result: a prober that sends many attempts does not fill the window
        // (and cannot take its region down) alone.
        if let Some(a) = r.attempts.last() {
            let failed = failed(a);
            let mut detail = r.hls.unwrap_or_default();
            if r.hls.is_none() {
                // `http` checks: the tuple from the stages.
                detail.reachable = a.stages.contains(Stages::RECEIVED);
                detail.manifest_valid = a.good();
                detail.segment_fetchable = a.good();
                detail.ttfb_ms = ttfb_of(r, a);
            }
            window.push(MonitorProbe { at: now, failed, detail }, m.quorum_window);
        }
        self.save.dirty = true;
        let w = weights(m, &self.demand.totals(now));
        let change = decide(key.monitor, (m, &w), c.monitor_check(m).check.interval_s(), state, now);
        self.save.urgent |= change.is_some();
        change
    }

    /// Regions whose probers went quiet become unknown: every monitor's verdict is recomputed
    /// at `now`. Returns the changes.
    pub fn sweep(&mut self, c: &Config, now: Timestamp) -> Vec<MonitorChange> {
        let mut out = Vec::new();
        let totals = self.demand.totals(now);
        for (id, state) in &mut self.states {
            let Some(m) = c.monitors.get(&id.0) else { continue };
            let w = weights(&m.value, &totals);
            if state.verdict.is_some()
                && let Some(ch) =
                    decide(*id, (&m.value, &w), c.monitor_check(&m.value).check.interval_s(), state, now)
            {
                self.save.dirty = true;
                self.save.urgent = true;
                out.push(ch);
            }
        }
        out
    }

    /// Brings every monitor's steering order to `now` (health at once, latency after the
    /// hold: [`SteeringOrder::update`]) and returns the table `/steer` answers from.
    pub fn steer(&mut self, c: &Config, now: Timestamp) -> SteeringTable {
        let mut by_name = BTreeMap::new();
        for (id, m) in &c.monitors {
            let id = MonitorId(*id);
            let m = &m.value;
            let state = self.states.entry(id).or_default();
            let interval_s = c.monitor_check(m).check.interval_s();
            let health = state.health(m, interval_s, now);
            let all = figures(m, &health, &state.ttfb(m));
            let hold_ms = HOLD_TTLS * i64::from(m.steering_ttl_s) * 1000;
            self.save.dirty |= state.steering.update(&all, hold_ms, now);
            let mut by_region = BTreeMap::new();
            if m.steer_by_client_region {
                // A region's probes of the others count while its own window would (three
                // intervals); each region starts from everyone's order, and goes back to it
                // while it has no such probe.
                let fresh_ms = 3 * i64::from(interval_s) * 1000;
                for r in &m.regions {
                    let Some((health, ttfb)) = state.seen_by(m, &r.region, &health, fresh_ms, now) else {
                        self.save.dirty |= state.by_region.remove(&r.region).is_some();
                        continue;
                    };
                    let figures = figures(m, &health, &ttfb);
                    let global = &state.steering;
                    let order = state.by_region.entry(r.region.clone()).or_insert_with(|| SteeringOrder {
                        order: global.order.clone(),
                        ..SteeringOrder::default()
                    });
                    self.save.dirty |= order.update(&figures, hold_ms, now);
                    by_region.insert(r.region.clone(), Ordered { order: order.order.clone(), figures });
                }
            }
            let s = Steering {
                id,
                ttl_s: m.steering_ttl_s,
                everyone: Ordered { order: state.steering.order.clone(), figures: all },
                by_region,
            };
            by_name.insert(m.name.clone(), s);
        }
        SteeringTable { by_name }
    }
}

/// Whether attempt `a` failed: unreachable, no valid manifest or no segment (a stale segment
/// is not a failure; it degrades).
fn failed(a: &Attempt) -> bool {
    !a.good() && a.error != Some(ErrorCode::Stale)
}

/// The time to first byte of attempt `a` of `r`, ms: an `hls` check's own reading; for an
/// `http` check, the time to its answer when it got one.
fn ttfb_of(r: &ProbeResult, a: &Attempt) -> Option<f64> {
    match r.hls {
        Some(h) => h.ttfb_ms,
        None => a.good().then(|| f64::from(a.rtt_us) / 1000.0),
    }
}

/// What `/steer/{monitor}` answers for one monitor.
#[derive(Debug, Clone, PartialEq)]
pub struct Steering {
    pub id: MonitorId,
    /// Seconds before players reload.
    pub ttl_s: u32,
    /// The order for every player (each pathway judged by its own regions' probes).
    pub everyone: Ordered,
    /// Steered by the client's region: each region's players' order, by that region's probes.
    pub by_region: BTreeMap<String, Ordered>,
}

/// Pathways in order, with what the order was judged on.
#[derive(Debug, Clone, PartialEq)]
pub struct Ordered {
    /// Pathways, preferred first.
    pub order: Vec<String>,
    /// What the order was judged on, for the players that say which pathway they are on.
    pub figures: Vec<PathwayFigure>,
}

impl Steering {
    /// The order for a player in `region` (its region's order where the monitor keeps one,
    /// else everyone's) on `current` ([`vantage_core::steering::for_player`]).
    pub fn for_player(&self, region: Option<&str>, current: Option<&str>) -> Vec<String> {
        let o = region.and_then(|r| self.by_region.get(r)).unwrap_or(&self.everyone);
        vantage_core::steering::for_player(&o.order, &o.figures, current)
    }
}

/// Every monitor's steering answer by name, rebuilt by the control core whenever an order may
/// have changed, so the public route answers players without its lock.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SteeringTable {
    /// By monitor name.
    pub by_name: BTreeMap<String, Steering>,
}

impl SteeringTable {
    /// The monitor a player names, by name or id.
    pub fn find(&self, name_or_id: &str) -> Option<&Steering> {
        self.by_name
            .get(name_or_id)
            .or_else(|| self.by_name.values().find(|s| s.id.to_string() == name_or_id))
    }
}

/// `m`'s global verdict for `health` by the effective weights of `w`, saying when the learned
/// weights decided it (the configured ones would give another).
pub fn weighed(m: &Monitor, health: &[RegionHealth], w: &Weights) -> MonitorVerdict {
    let mut verdict = global_verdict_by(m, health, &w.effective);
    verdict.reasons.by_learned_weights =
        m.weighting != Weighting::Fixed && global_verdict(m, health).global != verdict.global;
    verdict
}

/// Recomputes a monitor's global verdict at `now` by its weights (`w`); a change joins the
/// history.
fn decide(
    id: MonitorId,
    (m, w): (&Monitor, &Weights),
    interval_s: u32,
    state: &mut MonitorState,
    now: Timestamp,
) -> Option<MonitorChange> {
    let health = state.health(m, interval_s, now);
    if health.iter().all(|h| *h == RegionHealth::Unknown) {
        // Nothing is known (every prober quiet): the last verdict stands rather than reading
        // `healthy` and resolving what may still be an outage.
        return None;
    }
    let verdict = weighed(m, &health, w);
    let from = state.verdict.map(|v| v.verdict.global);
    if from == Some(verdict.global) {
        if let Some(v) = &mut state.verdict {
            v.verdict = verdict;
        }
        return None;
    }
    let rec = VerdictRecord { at: now, verdict };
    state.verdict = Some(rec);
    state.history.push_back(rec);
    while state.history.len() > HISTORY {
        state.history.pop_front();
    }
    let regions = m
        .regions
        .iter()
        .zip(&health)
        .filter(|(_, h)| matches!(h, RegionHealth::Down | RegionHealth::Stale))
        .map(|(r, h)| (r.region.clone(), *h))
        .collect();
    Some(MonitorChange { monitor: id, name: m.name.clone(), from, to: verdict, regions })
}

/// The monitor endpoints a prober in `region` probes, with their checks appended to `checks`,
/// and their keys.
pub fn endpoint_targets(
    c: &Config,
    region: &str,
    checks: &mut Vec<Check>,
) -> (Vec<EndpointTarget>, BTreeSet<EndpointKey>) {
    let mut out = Vec::new();
    let mut keys = BTreeSet::new();
    for (id, m) in &c.monitors {
        let Some(r) = m.value.regions.iter().find(|r| r.region == region) else { continue };
        let probed = c.monitor_check(&m.value).check;
        let check = match checks.iter().position(|x| *x == probed) {
            Some(i) => i,
            None => {
                checks.push(probed);
                checks.len() - 1
            }
        };
        // Steered by the client's region: the other regions' endpoints too, for this region's
        // players' order.
        let others = m.value.regions.iter().filter(|o| m.value.steer_by_client_region && o.region != region);
        let from = |o: &MonitorRegion| (o.region != region).then(|| region.to_owned());
        let endpoints = std::iter::once(r)
            .chain(others)
            .flat_map(|o| o.endpoints.iter().enumerate().map(move |(index, url)| (o, index, url)));
        for (o, index, url) in endpoints {
            let key = EndpointKey { monitor: MonitorId(*id), region: o.region.clone(), index, from: from(o) };
            out.push(EndpointTarget {
                key: key.to_string(),
                url: url.clone(),
                address: None,
                check: u32::try_from(check).unwrap_or(u32::MAX),
                // A monitor's endpoint must answer its check's status: an edge answering 404
                // serves no video.
                any_status: false,
                allowed_hosts: m.value.allowed_hosts.clone(),
            });
            keys.insert(key);
        }
    }
    (out, keys)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoint_keys_round_trip() {
        let k = EndpointKey { monitor: MonitorId(7), region: "ap-sg".into(), index: 2, from: None };
        assert_eq!(k.to_string(), "v7/ap-sg/2");
        assert_eq!(k.to_string().parse::<EndpointKey>(), Ok(k.clone()));
        let k = EndpointKey { from: Some("eu-de".into()), ..k };
        assert_eq!(k.to_string(), "v7/ap-sg/2@eu-de");
        assert_eq!(k.to_string().parse::<EndpointKey>(), Ok(k));
        assert!("v7/ap-sg/2@".parse::<EndpointKey>().is_err());
        assert!("m/x.example.net".parse::<EndpointKey>().is_err());
        assert!("v7/ap-sg".parse::<EndpointKey>().is_err());
    }
}
