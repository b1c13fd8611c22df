//! The fleet as numbers for `/metrics`: every address's reachability and failing probers, every
//! node's level, every line's record count and hold, every prober's liveness, the alerts
//! firing by kind, probe loss per cluster and prober region, and how long reports wait for the
//! pass that uses them — read from the snapshots and observations, so the figures are the ones
//! DNS and the API use.
//!
//! The figures of every address, node, drain and line are read from the published snapshots
//! when they are asked for (by a scrape, off the core's thread), not written out by the core
//! after each pass and every second: at 10,000 nodes, naming 30,000 addresses and dropping the
//! names again was a quarter of the core's CPU while nodes were created one by one.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Arc;

use vantage_core::Timestamp;
use vantage_core::address::Level;
use vantage_core::evaluate::NodeStatus;
use vantage_core::reachability::{Condition, Reachability};

use crate::config::Config;
use crate::control::Control;
use crate::identity::Caller;
use crate::observe::ProberStatus;
use crate::snapshot::{ClusterSnapshot, Snapshots};
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
#[derive(Debug, Clone, Default)]
pub struct Fleet {
    /// The configuration the figures were made of, and the snapshots' names are read from.
    pub config: Arc<Config>,
    /// The snapshots the figures of addresses, nodes, drains and lines are read from (none
    /// on a replica that does not decide).
    pub snapshots: Arc<Snapshots>,
    /// Every prober.
    pub probers: Vec<ProberFigure>,
    /// Alerts firing, by kind.
    pub alerts_firing: BTreeMap<crate::alerts::AlertKind, usize>,
    /// Attempts per second each `ip:port` receives from every prober together (shared by
    /// the figures of a second: see [`Control::fleet_rated`]).
    pub probe_rates: Arc<Vec<(SocketAddr, f64)>>,
    /// Probe loss (0–1) over the results each cluster's last pass counted, by [`ProbePlace`].
    pub probe_loss: BTreeMap<ProbePlace, f64>,
    /// (cluster, seconds the oldest report used by its last pass had waited for it, or the
    /// longer wait of a report no pass has used yet).
    pub evaluation_lag: Vec<(String, f64)>,
    /// Whether this replica decides for the fleet (holds the evaluator lease, or is alone).
    /// Only then are the other figures filled in (a follower's carry the configuration
    /// alone): the lease holder exports the fleet, its followers only themselves (so no
    /// dashboard doubles under replicas).
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

impl Fleet {
    /// Every evaluated address.
    pub fn addresses(&self) -> Vec<AddressFigure> {
        let mut out = Vec::new();
        self.each_node(|cluster, node, _, s| {
            out.extend(s.addresses.iter().map(|a| AddressFigure {
                cluster: cluster.to_owned(),
                node: node.to_owned(),
                address: a.ip.to_string(),
                level: a.level,
                reachable: a.reachability == Reachability::Reachable,
                failing: a.verdict.failing,
                counting: a.verdict.counting,
                damping: a.damping,
                suspect: a.condition.condition == Condition::Failing,
            }));
        });
        out
    }

    /// (cluster, node, level DNS uses: `None` when it has none) of every node.
    pub fn nodes(&self) -> Vec<(String, String, Option<Level>)> {
        let mut out = Vec::new();
        self.each_node(|cluster, node, _, s| out.push((cluster.to_owned(), node.to_owned(), s.level)));
        out
    }

    /// (cluster, node, clients have moved) of every drained node.
    pub fn drains(&self) -> Vec<(String, String, bool)> {
        let mut out = Vec::new();
        self.each_node(|cluster, node, snap, s| {
            if let Some(d) = snap.drains.get(&s.node) {
                out.push((cluster.to_owned(), node.to_owned(), d.drained));
            }
        });
        out
    }

    /// (cluster, line, records it answers, held by the protection) of every published line.
    pub fn lines(&self) -> Vec<(String, String, usize, bool)> {
        let mut out = Vec::new();
        for (cluster, snap) in self.clusters() {
            let Some(p) = &snap.published else { continue };
            for (lid, line, records) in p.lines() {
                out.push((cluster.to_owned(), line.name.clone(), records.len(), p.held.contains_key(&lid)));
            }
        }
        out
    }

    /// Each configured cluster's name and snapshot.
    fn clusters(&self) -> impl Iterator<Item = (&str, &ClusterSnapshot)> {
        let c = &self.config;
        self.snapshots
            .iter()
            .filter_map(|(id, snap)| Some((c.clusters.get(&id.0)?.value.name.as_str(), &**snap)))
    }

    /// Calls `f` with the cluster's name, the node's (its id where it is no longer
    /// configured), the cluster's snapshot and the node's status, for every node of every
    /// snapshot.
    fn each_node(&self, mut f: impl FnMut(&str, &str, &ClusterSnapshot, &NodeStatus)) {
        for (cluster, snap) in self.clusters() {
            for (nid, s) in &snap.nodes {
                match self.config.nodes.get(&nid.0) {
                    Some(n) => f(cluster, &n.value.node.name, snap, s),
                    None => f(cluster, &nid.to_string(), snap, s),
                }
            }
        }
    }
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
        self.fleet_rated(now, None)
    }

    /// [`fleet`](Self::fleet), with the probe rates `rates` when given: rates over a minute's
    /// window, made at most once a second (every target of the fleet, sorted: at 10,000 nodes
    /// a few milliseconds of every figures made after each pass and each change).
    pub(crate) fn fleet_rated(&self, now: Timestamp, rates: Option<Arc<Vec<(SocketAddr, f64)>>>) -> Fleet {
        let c = self.config();
        if self.role() != crate::Role::Leader {
            // The lease holder exports the fleet's figures; a follower sees the same fleet
            // through the database, and a dashboard summing the replicas would count it twice.
            // The configuration goes with it: figures are made again when it changes.
            return Fleet { config: c, ..Fleet::default() };
        }
        let mut f =
            Fleet { config: c.clone(), snapshots: self.snapshots(), evaluator: true, ..Fleet::default() };
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
        f.probe_rates = rates.unwrap_or_else(|| Arc::new(self.probe_rates(now)));
        f.probe_loss = probe_loss(&c, &f.snapshots);
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
fn probe_loss(c: &Config, snapshots: &Snapshots) -> BTreeMap<ProbePlace, f64> {
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
