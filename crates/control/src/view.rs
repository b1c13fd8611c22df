//! What readers see of the control core: one immutable reading, made by [`Control::view`]
//! after each batch of inputs or pass and handed by the core's owner to every reader (API, UI,
//! DNS, doors, steering, `/metrics`), so that no reader waits for a pass or holds up the next.
//! Every part is shared, not copied: the core changes a part by copying it once when a
//! reading still holds it (`Arc::make_mut`), so publishing costs pointers, not the fleet.

use std::collections::{BTreeMap, HashMap};
use std::net::IpAddr;
use std::sync::Arc;

use vantage_core::Timestamp;
use vantage_core::address::{AddressList, AddressPolicy};
use vantage_core::evaluate::NodeStatus;
use vantage_core::ids::{ClusterId, NodeId};

use crate::alerts::{AlertBook, Hold};
use crate::config::Config;
use crate::control::{Control, Role};
use crate::drain::Drain;
use crate::fleet::Fleet;
use crate::identity::Caller;
use crate::mirrors::Mirrors;
use crate::mirrors::doors::Doors;
use crate::monitors::{Monitors, SteeringTable};
use crate::observe::{Agents, ProberRuntime, ProberStatus, reportable};
use crate::snapshot::Snapshots;
use crate::target::TargetKey;
use crate::work::{TcpFallback, addresses_in_use};

/// The fleet's figures of `/metrics` (probe loss from the passes, probe rates, prober ages,
/// alerts, evaluation lag, certificate expiries, and the snapshots a scrape reads every
/// address, node and line from): made again after every pass or change and once they are a
/// second old, not per reading.
const FIGURES_EVERY_MS: i64 = 1_000;

/// The fleet's figures of one moment.
#[derive(Debug, Clone, Default)]
pub struct Figures {
    /// When they were made.
    pub at: Timestamp,
    /// The passes run by then.
    pub passes: u64,
    /// The fleet as numbers, with the configuration they were made of.
    pub fleet: Fleet,
    /// When each HTTPS target's certificate expires, as the probers saw it.
    pub expiries: Arc<BTreeMap<TargetKey, Timestamp>>,
    /// When the fleet's probe rates were made: figures made again within a second of that
    /// (after a pass or a change) share them.
    pub rates_at: Timestamp,
}

impl Figures {
    /// Whether figures made of `config` after `passes` passes at `now` would say more.
    fn stale(&self, config: &Arc<Config>, passes: u64, now: Timestamp) -> bool {
        self.passes != passes
            || !Arc::ptr_eq(&self.fleet.config, config)
            || now.millis_since(self.at) >= FIGURES_EVERY_MS
    }
}

/// One immutable reading of the control core.
#[derive(Debug, Clone)]
pub struct View {
    /// The configuration.
    pub config: Arc<Config>,
    /// Every cluster's snapshot after its last pass.
    pub snapshots: Arc<Snapshots>,
    /// What doors choose from.
    pub doors: Arc<Doors>,
    /// What `/steer/{monitor}` answers.
    pub steering: Arc<SteeringTable>,
    /// What each prober and probing node said of itself (and was given: shared, not copied).
    pub probers: Arc<HashMap<Caller, ProberRuntime>>,
    /// What each node agent last said.
    pub agents: Arc<Agents>,
    /// The alert book.
    pub alerts: Arc<AlertBook>,
    /// Mirrors: what probers saw, the reloads, the check run.
    pub mirrors: Arc<Mirrors>,
    /// Monitors: windows, verdicts and their history.
    pub monitors: Arc<Monitors>,
    /// Every subject's changes of health, for availability reports.
    pub availability: Arc<crate::availability::Ledger>,
    /// The fleet's figures for `/metrics`.
    pub figures: Arc<Figures>,
    /// Which scheduling addresses are accepted.
    pub policy: AddressPolicy,
    /// This replica's part.
    pub role: Role,
    /// Cluster passes run so far.
    pub passes: u64,
    /// The event id this process's numbering continues after.
    pub event_base: u64,
}

impl View {
    /// The status of a node from its cluster's last pass.
    pub fn node_status(&self, node: NodeId) -> Option<&NodeStatus> {
        node_status(&self.config, &self.snapshots, node)
    }

    /// What the last pass of `cluster` says of its `node`, read in one look-up of the
    /// cluster: a list of 10,000 nodes asks it of each.
    pub fn passed(&self, node: NodeId, cluster: ClusterId) -> Passed<'_> {
        let snapshot = self.snapshots.get(&cluster);
        Passed {
            status: snapshot.and_then(|s| s.nodes.get(&node)),
            level_since: snapshot.and_then(|s| s.level_since.get(&node)).copied(),
            drain: snapshot.and_then(|s| s.drains.get(&node)).copied(),
        }
    }

    /// A node's scheduling addresses in use now (configured, else reported).
    pub fn addresses_of(&self, node: NodeId) -> Option<AddressList> {
        addresses_of(&self.config, &self.agents, self.policy, node)
    }

    /// The source address a node's agent connects from.
    pub fn source_address(&self, node: NodeId) -> Option<IpAddr> {
        source_address(&self.config, &self.agents, node)
    }

    /// The source address an operator may add to a node's configured addresses.
    pub fn addable_source(&self, node: NodeId) -> Option<IpAddr> {
        addable_source(&self.config, &self.agents, self.policy, node)
    }

    /// A prober's status at `now` (SPEC §3.5).
    pub fn prober_status(&self, caller: Caller, now: Timestamp) -> ProberStatus {
        self.config.prober_status(caller, self.probers.get(&caller).and_then(|r| r.last_seen), now)
    }

    /// Whether `cluster`'s listeners are probed by TCP connect at `now`, and why.
    pub fn tcp_fallback(&self, cluster: ClusterId, now: Timestamp) -> Option<TcpFallback> {
        TcpFallback::of(&self.config, cluster, &self.agents, now)
    }

    /// The open alerts whose firing a silence or a maintenance window held back and still
    /// holds at `now`, each with what holds it (one that just ended lets its alerts go within
    /// 10 s; an alert notified before its silence was made is not held).
    pub fn held_alerts(&self, now: Timestamp) -> BTreeMap<String, Hold> {
        (self.alerts.held())
            .filter_map(|key| Some((key.clone(), self.config.hold_of(self.alerts.open(key)?, now)?)))
            .collect()
    }
}

/// What a cluster's last pass says of one of its nodes.
#[derive(Debug, Clone, Copy)]
pub struct Passed<'a> {
    /// Its status (`None`: not evaluated yet), shared with the pass before where it did not
    /// change.
    pub status: Option<&'a Arc<NodeStatus>>,
    /// Since when it has been at its level.
    pub level_since: Option<Timestamp>,
    /// Its drain's progress, while drained.
    pub drain: Option<Drain>,
}

/// The status of `node` from its cluster's last pass.
pub(crate) fn node_status<'a>(c: &Config, snapshots: &'a Snapshots, node: NodeId) -> Option<&'a NodeStatus> {
    let cluster = c.nodes.get(&node.0)?.value.cluster;
    snapshots.get(&cluster)?.nodes.get(&node).map(|s| &**s)
}

/// A node's scheduling addresses in use now: configured, else those its agent reported.
pub(crate) fn addresses_of(
    c: &Config,
    agents: &Agents,
    policy: AddressPolicy,
    node: NodeId,
) -> Option<AddressList> {
    let rec = &c.nodes.get(&node.0)?.value;
    let reported = agents.get(&node).map(|n| n.addresses.as_slice());
    Some(addresses_in_use(&rec.addresses, reported, policy))
}

/// The source address a node's agent connects from: that of its latest heartbeat, else that of
/// its enrollment.
pub(crate) fn source_address(c: &Config, agents: &Agents, node: NodeId) -> Option<IpAddr> {
    let heartbeat = agents.get(&node).and_then(|n| n.connects_from);
    heartbeat.or_else(|| c.nodes.get(&node.0)?.value.enrolled_from)
}

/// The source address an operator may add to a node's configured addresses: public (as a
/// heartbeat's addresses must be) and not configured already. It is never used on its own.
pub(crate) fn addable_source(
    c: &Config,
    agents: &Agents,
    policy: AddressPolicy,
    node: NodeId,
) -> Option<IpAddr> {
    let rec = &c.nodes.get(&node.0)?.value;
    source_address(c, agents, node)
        .filter(|ip| reportable(*ip, policy) && !rec.addresses.as_slice().iter().any(|a| a.ip == *ip))
}

impl Control {
    /// When the last view's figures turn a second old: its owner publishes again by then, so
    /// that ages and liveness on `/metrics` move while nothing else happens.
    pub fn view_expires(&self) -> Timestamp {
        self.figures.at.plus_millis(FIGURES_EVERY_MS)
    }

    /// The reading to publish at `now`: the core's parts as they are, and the fleet's figures
    /// (made again when a pass ran, the configuration changed, or a second went by).
    pub fn view(&mut self, now: Timestamp) -> View {
        let config = self.config();
        if self.figures.stale(&config, self.passes(), now) {
            let before = &self.figures;
            let rated =
                before.fleet.evaluator && (0..FIGURES_EVERY_MS).contains(&now.millis_since(before.rates_at));
            let rates = rated.then(|| before.fleet.probe_rates.clone());
            let rates_at = if rated { before.rates_at } else { now };
            self.figures = Arc::new(Figures {
                at: now,
                passes: self.passes(),
                rates_at,
                fleet: self.fleet_rated(now, rates),
                // The lease holder exports them (`Fleet::evaluator`); a follower scans nothing.
                expiries: if self.role() == Role::Leader {
                    self.addresses().certificate_expiries().clone()
                } else {
                    Arc::default()
                },
            });
        }
        View {
            snapshots: self.snapshots(),
            doors: self.doors(),
            steering: self.steering(),
            probers: self.observations().probers.clone(),
            agents: self.observations().nodes.clone(),
            alerts: self.alerts.clone(),
            mirrors: self.mirrors.clone(),
            monitors: self.monitors.clone(),
            availability: self.availability.clone(),
            figures: self.figures.clone(),
            policy: self.policy,
            role: self.role(),
            passes: self.passes(),
            event_base: self.event_base(),
            config,
        }
    }
}
