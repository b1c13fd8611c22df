//! The fleet as numbers for `/metrics`: every address's reachability and failing probers, every
//! node's level, every line's record count and hold, every prober's liveness, the alerts
//! firing by kind, probe loss per cluster and prober region, and how long reports wait for the
//! pass that uses them — read from the snapshots and observations, so the figures are the ones
//! DNS and the API use.

use std::collections::BTreeMap;

use vantage_core::Timestamp;
use vantage_core::address::Level;
use vantage_core::reachability::{Condition, Reachability};

use crate::config::Config;
use crate::control::Control;
use crate::identity::Caller;
use crate::observe::ProberStatus;
use vantage_core::ids::{ClusterId, RegionId};

/// One scheduling address as the last pass saw it.
#[derive(Debug, Clone, PartialEq)]
pub struct AddressFigure {
    /// Cluster name.
    pub cluster: String,
    /// Node name.
    pub node: String,
    /// The address.
    pub address: String,
    /// Its level.
    pub level: Level,
    /// Reachable (as the hysteresis decided).
    pub reachable: bool,
    /// Probers whose latest round failed it.
    pub failing: u32,
    /// Probers whose results count for it.
    pub counting: u32,
    /// Flap damping multiplier of its *answering before reachable*.
    pub damping: u32,
    /// Still reachable, but a strict majority sees it failing (the state before the verdict).
    pub suspect: bool,
}

/// A prober's liveness.
#[derive(Debug, Clone, PartialEq)]
pub struct ProberFigure {
    /// Name.
    pub name: String,
    /// Region code.
    pub region: String,
    /// Online now.
    pub online: bool,
    /// Seconds since it last asked or reported (`None`: never).
    pub last_seen_age_s: Option<f64>,
}

/// Everything `/metrics` says about the fleet.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Fleet {
    /// Every evaluated address.
    pub addresses: Vec<AddressFigure>,
    /// (cluster, node, level DNS uses: `None` when it has none).
    pub nodes: Vec<(String, String, Option<Level>)>,
    /// (cluster, node, clients have moved) of every drained node.
    pub drains: Vec<(String, String, bool)>,
    /// (cluster, line, records it answers, held by the protection).
    pub lines: Vec<(String, String, usize, bool)>,
    /// Every prober.
    pub probers: Vec<ProberFigure>,
    /// Alerts firing, by kind.
    pub alerts_firing: BTreeMap<crate::alerts::AlertKind, usize>,
    /// Attempts per second each `ip:port` receives from every prober together.
    pub probe_rates: Vec<(std::net::SocketAddr, f64)>,
    /// Probe loss (0–1) over the results each cluster's last pass counted, by [`ProbePlace`].
    pub probe_loss: BTreeMap<ProbePlace, f64>,
    /// (cluster, seconds the oldest report used by its last pass had waited for it, or the
    /// longer wait of a report no pass has used yet).
    pub evaluation_lag: Vec<(String, f64)>,
    /// Whether this replica decides for the fleet (holds the evaluator lease, or is alone).
    /// Only then are the other figures filled in: the lease holder exports the fleet, its
    /// followers only themselves (so no dashboard doubles under replicas).
    pub evaluator: bool,
}

/// Where a probe's figures are counted: the cluster of its target and the region its prober
/// probes from — both names from the configuration, so label sets stay bounded.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ProbePlace {
    /// Cluster name.
    pub cluster: String,
    /// Region code of the prober (of the node's group for a node that probes).
    pub region: String,
}

impl ProbePlace {
    /// The place of `caller`'s probes of `cluster`'s targets; `None` when either is no longer
    /// configured.
    pub fn of(c: &Config, caller: Caller, cluster: ClusterId) -> Option<ProbePlace> {
        ProbePlace::at(c, cluster, c.region_of(caller)?)
    }

    /// The place of probes from `region` of `cluster`'s targets; `None` when either is no
    /// longer configured.
    pub fn at(c: &Config, cluster: ClusterId, region: RegionId) -> Option<ProbePlace> {
        let cluster = c.clusters.get(&cluster.0)?.value.name.clone();
        Some(ProbePlace { cluster, region: c.region_code(region)?.to_owned() })
    }
}

impl Control {
    /// The fleet's figures at `now`.
    pub fn fleet(&self, now: Timestamp) -> Fleet {
        let c = self.config();
        if self.role() != crate::Role::Leader {
            // The lease holder exports the fleet's figures; a follower sees the same fleet
            // through the database, and a dashboard summing the replicas would count it twice.
            return Fleet::default();
        }
        let mut f = Fleet { evaluator: true, ..Fleet::default() };
        for (cid, snap) in self.snapshots().iter() {
            let Some(cluster) = c.clusters.get(&cid.0) else { continue };
            let cname = &cluster.value.name;
            for (nid, s) in &snap.nodes {
                let node = c.nodes.get(&nid.0).map_or_else(|| nid.to_string(), |n| n.value.node.name.clone());
                for a in &s.addresses {
                    f.addresses.push(AddressFigure {
                        cluster: cname.clone(),
                        node: node.clone(),
                        address: a.ip.to_string(),
                        level: a.level,
                        reachable: a.reachability == Reachability::Reachable,
                        failing: a.verdict.failing,
                        counting: a.verdict.counting,
                        damping: a.damping,
                        suspect: a.condition.condition == Condition::Failing,
                    });
                }
                if let Some(d) = snap.drains.get(nid) {
                    f.drains.push((cname.clone(), node.clone(), d.drained));
                }
                f.nodes.push((cname.clone(), node, s.level));
            }
            if let Some(p) = &snap.published {
                for (lid, line, records) in p.lines() {
                    let held = p.held.contains_key(&lid);
                    f.lines.push((cname.clone(), line.name.clone(), records.len(), held));
                }
            }
        }
        for (id, p) in &c.probers {
            let caller = Caller::Prober(vantage_core::ids::ProberId(*id));
            let seen = self.observations().probers.get(&caller).and_then(|r| r.last_seen);
            f.probers.push(ProberFigure {
                name: p.value.name.clone(),
                region: c.regions.get(&p.value.region.0).map_or_else(String::new, |r| r.value.code.clone()),
                online: self.prober_status(caller, now) == ProberStatus::Online,
                last_seen_age_s: seen.map(|t| now.millis_since(t) as f64 / 1000.0),
            });
        }
        for a in self.alerts().list().0 {
            *f.alerts_firing.entry(a.kind).or_default() += 1;
        }
        f.probe_rates = self.probe_rates(now);
        f.probe_loss = probe_loss(&c, &self.snapshots());
        f.evaluation_lag = c
            .clusters
            .iter()
            .filter_map(|(id, cl)| {
                let ms = self.evaluation_lag_ms(ClusterId(*id), now)?;
                Some((cl.value.name.clone(), ms as f64 / 1000.0))
            })
            .collect();
        f
    }
}

/// Lost attempts over sent attempts of the results each cluster's last pass counted (its
/// probers active, reported within the freshness window), per place: the pass tallies them as
/// it takes the verdicts, so no walk of every latest result is made for the figure (it was
/// the dearest part of a view at 10,000 nodes, remade every second).
fn probe_loss(c: &Config, snapshots: &crate::snapshot::Snapshots) -> BTreeMap<ProbePlace, f64> {
    let mut tally: BTreeMap<ProbePlace, (u64, u64)> = BTreeMap::new();
    for (cid, snap) in snapshots {
        for (region, sent, lost) in &snap.probe_loss {
            let Some(place) = ProbePlace::at(c, *cid, *region) else { continue };
            let t = tally.entry(place).or_default();
            t.0 += sent;
            t.1 += lost;
        }
    }
    tally.into_iter().map(|(place, (sent, lost))| (place, lost as f64 / sent as f64)).collect()
}
