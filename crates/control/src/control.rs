//! The control core: every decision of `vantage serve` outside a single cluster pass, as a
//! state machine in the manner of quinn-proto's `Connection`. Drivers feed it events with the
//! time (`handle_*`), ask when to wake it (`poll_timeout`), and carry out what it decided
//! (`poll_output`); it never reads a clock, touches a socket or a file, or waits.

use std::collections::{BTreeMap, VecDeque};
use std::net::IpAddr;
use std::sync::Arc;

use serde_json::{Value, json};
use vantage_core::Timestamp;
use vantage_core::address::AddressPolicy;
use vantage_core::answer::{LatencySpec, LineSpec};
use vantage_core::beside::Beside;
use vantage_core::evaluate::{
    AddressView, ClusterState, ClusterView, FastSet, LineOutlook, NodeMetrics, NodeStatus, NodeView,
    PreviewRow, Records, Tallied, evaluate_again, line_outlooks, preview,
};
use vantage_core::fetch::FetchPolicy;
use vantage_core::ids::{ClusterId, NodeId, RuleId};
use vantage_core::model::Line;
use vantage_core::reachability::AddressHealth;
use vantage_core::rules::Rule;
use vantage_core::wire;

use crate::addresses::Addresses;
use crate::alerts::{Alert, AlertBook};
use crate::book::{Asking, Finding, GivenAs, Records as _, Reported, SubjectBook, Took, Work};
use crate::config::{Config, Object};
use crate::confirm::Confirmations;
use crate::drain::DrainCause;
use crate::effects::Effects;
use crate::events::{EventKind, EventLog, FleetEvent, pass_events};
use crate::identity::Caller;
use crate::mirrors::registry::Changes;
use crate::mirrors::{CheckRefused, CheckRun, LoadError, Mirrors};
use crate::monitors::{Monitors, SteeringTable};
use crate::observe::{Latest, Observations, agent_online, reportable};
use crate::seen::ProberTable;
use crate::snapshot::{ClusterSnapshot, Published, Snapshots, Zone};
use crate::spread::Spread;
use crate::state_save::StateSave;
use crate::target::{Subject, TargetKey};
use crate::work::{TcpFallback, addresses_in_use};

#[cfg(test)]
mod afresh;
mod alerting;
mod dry_run;
mod replica;
mod windows;
pub use dry_run::{ClusterAfter, LineAfter};
pub use replica::{Relayed, Role};

/// A report triggers its clusters at most this often (SPEC §5.5).
const REPORT_SPACING_MS: i64 = 2_000;
/// Silence alerts are checked, and the subject books swept, this often.
const SILENCE_EVERY_S: u64 = 10;
/// History roll-up runs this often.
const ROLL_UP_EVERY_S: u64 = 3_600;
/// Daily roll-ups are kept this long past the history's retention.
const DAILY_KEPT_DAYS: i64 = 366;

const DAY_MS: i64 = 86_400_000;
/// An evaluator state that did not change is still saved this often.
const STATE_SAVED_EVERY_MS: i64 = 60_000;
/// A cluster's state is saved whole this often besides (it is saved by difference): a
/// difference lost to storage past a stop, or written late by a replica that had lost the
/// evaluator lease, is made good by the next whole save.
const STATE_WHOLE_EVERY_MS: i64 = 600_000;
/// A report's results are recorded in runs of this many, each run's first reads made
/// together before any is recorded (`Addresses::touch`), and a pass's view takes the
/// observations of as many addresses at a time likewise (`Addresses::touch_address`): enough
/// misses to wait for at once, few enough that what they read is still cached when used.
const READ_AHEAD: usize = 16;
/// Heartbeat fields are bounded: a hostile agent cannot grow the server's memory.
const MAX_REPORTED: usize = 32;

/// Timers of the control plane that operators set.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timing {
    /// Every cluster is evaluated at least this often, seconds (SPEC §5.5: 10).
    pub evaluation_interval_s: u64,
    /// History older than this is rolled up per day and deleted.
    pub history_retention_days: u64,
    /// An edge certificate expiring within this many days alerts.
    pub certificate_warning_days: u64,
}

impl Default for Timing {
    fn default() -> Self {
        Timing { evaluation_interval_s: 10, history_retention_days: 14, certificate_warning_days: 14 }
    }
}

/// A revision the store had, as loaded at start.
#[derive(Debug, Clone, PartialEq)]
pub struct StoredRevision {
    pub cluster: ClusterId,
    pub number: u32,
    /// When it was cut.
    pub at: Timestamp,
    /// Why it was cut.
    pub reason: String,
    /// Its records.
    pub records: Records,
    /// Lines that answer by their all-down policy in it.
    pub held: BTreeMap<vantage_core::ids::LineId, vantage_core::answer::LineHold>,
}

impl StoredRevision {
    /// What DNS serves from it under `zone`.
    pub(crate) fn published(self, zone: Zone) -> Published {
        Published {
            cluster: self.cluster,
            number: self.number,
            at: self.at,
            reason: self.reason,
            records: self.records,
            held: self.held,
            zone,
        }
    }
}

/// What the control core starts from: the stored configuration, observations and decisions.
#[derive(Debug, Default)]
pub struct Start {
    /// The configuration.
    pub config: Config,
    /// Which scheduling addresses are accepted.
    pub policy: AddressPolicy,
    /// Where probers may connect: handed to them with their work.
    pub fetch: FetchPolicy,
    /// Timers.
    pub timing: Timing,
    /// Latest results: (prober or probing node id, target, result).
    pub latest: Vec<(i64, TargetKey, Latest)>,
    /// Each cluster's saved evaluator state.
    pub states: Vec<(ClusterId, ClusterState)>,
    /// Each cluster's newest revision.
    pub revisions: Vec<StoredRevision>,
    /// The saved alert book.
    pub alerts: Option<AlertBook>,
    /// The mirror registry's files: (file name, text).
    pub mirror_files: Vec<(String, String)>,
    /// The files (or the directory) that could not be read at start, with why; empty when
    /// every file could be.
    pub mirror_files_skipped: Vec<LoadError>,
    /// The saved derived state of the mirrors (JSON).
    pub mirror_states: Option<String>,
    /// The saved state of the monitors (JSON).
    pub monitor_states: Option<String>,
    /// The saved availability ledger.
    pub availability: crate::availability::Ledger,
    /// The newest stored event's id: numbering continues after it, or after the start's own
    /// base if that is greater ([`events::PER_MS`](crate::events::PER_MS)).
    pub last_event: u64,
    /// Whose decisions this core's are at start: a replica on a shared database starts as a
    /// follower until it takes the evaluator lease.
    pub role: Role,
}

/// A revision to store, then to push to the cluster's external DNS servers.
#[derive(Debug, Clone, PartialEq)]
pub struct Revision {
    /// The records and zone it publishes, why it was cut, and the lines it holds.
    pub published: Arc<Published>,
}

impl Revision {
    /// Why it was cut, as a word for counting: `health`, `scheduling` or `configuration`.
    pub fn cause(&self) -> &'static str {
        if self.published.reason.starts_with("Scheduling:") {
            "scheduling"
        } else if self.published.reason.starts_with("Node health changed") {
            "health"
        } else {
            "configuration"
        }
    }
}

/// An audit entry the control core makes (actor `system`).
#[derive(Debug, Clone, PartialEq)]
pub struct AuditEntry {
    /// When it was decided (written with this time, however late storage takes it).
    pub at: Timestamp,
    /// Action (`scheduling.activate`).
    pub action: String,
    /// Object (`node:7`).
    pub object: String,
    /// Details.
    pub metadata: Value,
}

/// What the driver must carry out, in order.
#[derive(Debug, Clone, PartialEq)]
pub enum Output {
    /// Store this revision; once tried, push it to the cluster's publishers.
    Revision(Revision),
    /// The published revisions changed (one was cut, a cluster went): rebuild the DNS answer
    /// table from these snapshots (every cluster's, as they are now).
    Answers(Arc<Snapshots>),
    /// An alert fired or resolved: deliver it to the webhooks.
    Alert(Alert),
    /// The alert book changed: save it (JSON).
    SaveAlerts(String),
    /// Audit entries to write.
    Audit(Vec<AuditEntry>),
    /// A cluster's evaluator state to save, by difference: turned into JSON by whoever writes
    /// it (the JSON costs far more than the copy), and folded into an older one unwritten.
    SaveState(Box<StateSave>),
    /// A cluster left the configuration (or was gone at a start): its saved state goes.
    DropState(ClusterId),
    /// Events to store and stream, in order.
    Events(Vec<FleetEvent>),
    /// A follower's events: to its own streams only (the lease holder stores the fleet's).
    LiveEvents(Vec<FleetEvent>),
    /// This replica lost the evaluator lease: revisions it could not store yet are no longer
    /// its to store (the next lease holder numbers its own).
    DropUnsaved,
    /// Push this stored revision to its cluster's publishers again: this replica took the
    /// evaluator lease, and a push its predecessor was making may not have finished (an
    /// update that is already there changes nothing).
    Publish(Arc<Published>),
    /// The mirrors' derived state changed: save it (JSON).
    SaveMirrors(String),
    /// The monitors' windows or verdicts changed: save them (JSON).
    SaveMonitors(String),
    /// The availability ledger changed: save it ([`Ledger::to_json`](crate::availability::Ledger::to_json)).
    SaveAvailability(Arc<crate::availability::Ledger>),
    /// Confirmations wait for some probers: wake their recheck requests, which collect them
    /// with [`Control::take_rechecks`].
    Recheck,
    /// Fetch these mirrors' trace files and their references', and feed back what they read
    /// ([`Control::handle_freshness`]).
    CheckFreshness(Vec<crate::mirrors::FreshnessCheck>),
    /// The store's upkeep, carried out beside the rest (a day's roll-up may take a while).
    Upkeep(Upkeep),
    /// Delete the stored latest results of this prober or probing node once every result the
    /// core recorded before is stored: results are stored in the core's order, behind the
    /// acknowledgement, and a deletion that overtook them would leave the last reports' rows
    /// (reloaded at a restart as if the prober still counted).
    ForgetResults(Caller),
}

/// Store work that keeps it in shape: nothing waits for it, and it waits for nothing.
#[derive(Debug, Clone, PartialEq)]
pub enum Upkeep {
    /// Delete stored latest results not updated since `before`.
    ExpireResults {
        /// Cut-off.
        before: Timestamp,
    },
    /// Delete stored events older than `before`.
    ExpireEvents {
        /// Cut-off.
        before: Timestamp,
    },
    /// Roll history up per day before `before`, and delete daily roll-ups before `daily_before`.
    RollUpHistory {
        /// History cut-off.
        before: Timestamp,
        /// Daily roll-up cut-off.
        daily_before: Timestamp,
    },
}

/// Why a report is refused.
pub type ReportError = vantage_core::Error;

/// A report the core took.
#[derive(Debug, Clone, PartialEq)]
pub struct Accepted {
    /// What each result is about, in the report's order.
    pub subjects: Vec<Subject>,
    /// The results to store: a cluster target's under every key it counts for (its aliases).
    pub rows: Vec<(Subject, Latest)>,
}

/// One cluster's evaluation bookkeeping.
#[derive(Debug, Default)]
struct Slot {
    state: ClusterState,
    revision: u32,
    due: Timestamp,
    last: Option<Timestamp>,
    reason: Option<String>,
    /// When this core last saved the state (`None`: not yet).
    saved_at: Option<Timestamp>,
    /// When it last saved it whole (`None`: not yet, or not since it took the lease).
    whole_at: Option<Timestamp>,
    /// The addresses whose hysteresis moved since the last save.
    unsaved: FastSet<(NodeId, IpAddr)>,
    /// When the oldest report not yet used by a pass arrived (at whichever replica took it:
    /// the lag counts the relay's too).
    waiting_since: Option<Timestamp>,
    /// How long the oldest report the last pass used had waited for it, ms.
    lag_ms: Option<i64>,
    /// The newest revision number a follower took from storage: an older one read later (two
    /// reads crossing) is not taken.
    adopted: u32,
    /// What the passes tallied of each address, read back while its observations stay.
    tallied: Tallied,
    /// The last pass's views of the nodes, without the observations they borrowed: the next
    /// pass writes its views over them, so that their names and lists are not allocated and
    /// freed again at every pass (issue 32).
    room: Vec<NodeView<'static>>,
}

/// The control core.
#[derive(Debug)]
pub struct Control {
    config: Arc<Config>,
    pub(crate) policy: AddressPolicy,
    fetch: FetchPolicy,
    timing: Timing,
    started: Timestamp,
    obs: Observations,
    /// The subject books: cluster addresses, mirrors, monitor endpoints ([`SubjectBook`]).
    addresses: Addresses,
    slots: BTreeMap<ClusterId, Slot>,
    snapshots: Arc<Snapshots>,
    // Shared with the published views (`crate::view`): changed through `Arc::make_mut`.
    pub(crate) alerts: Arc<AlertBook>,
    alerts_dirty: bool,
    events: EventLog,
    pub(crate) mirrors: Arc<Mirrors>,
    pub(crate) monitors: Arc<Monitors>,
    /// Every subject's changes of health, for availability reports.
    pub(crate) availability: Arc<crate::availability::Ledger>,
    /// What the ledger last followed of each node.
    followed: crate::availability::Followed,
    /// The fleet's figures last made for a view.
    pub(crate) figures: Arc<crate::view::Figures>,
    steering: Arc<SteeringTable>,
    confirmations: Confirmations,
    outputs: VecDeque<Output>,
    next_silence: Timestamp,
    next_roll_up: Timestamp,
    /// The maintenance windows open at the last look, with their names, so each opening and
    /// closing is told once.
    open_windows: BTreeMap<i64, String>,
    /// Up to when window edges have been looked at.
    maintenance_looked: Timestamp,
    /// Cluster passes run since the start, so a driver can tell a wake-up that evaluated.
    passes: u64,
    role: Role,
}

impl Control {
    /// The control core over what was stored, started at `now`. Every cluster is due at once;
    /// the published revisions are in the snapshots before the first pass, so DNS answers from
    /// its first query (an [`Output::Answers`] is waiting).
    pub fn new(start: Start, now: Timestamp) -> Control {
        let config = Arc::new(start.config);
        let mut addresses = Addresses::new(start.timing.certificate_warning_days);
        for (id, key, latest) in start.latest {
            if let Some(caller) = config.caller(id) {
                addresses.restore(key, caller, latest);
            }
        }
        addresses.start(&config);
        let mut slots: BTreeMap<ClusterId, Slot> = BTreeMap::new();
        for (id, state) in start.states {
            slots.insert(id, Slot { state, due: now, ..Slot::default() });
        }
        let mut snapshots = Snapshots::new();
        for r in start.revisions {
            let Some(zone) = Zone::of(&config, r.cluster) else { continue };
            let slot = slots.entry(r.cluster).or_insert_with(|| Slot { due: now, ..Slot::default() });
            slot.revision = r.number;
            // The published records and holds are the latest revision's: a save leaves the
            // records out, and a state whose save was lost at a stop after the revision was
            // stored is older. Records an older version saved with it, if they differ, were
            // replaced when the revision was cut: the removal window still measures against them.
            slot.state.publish(Some(r.records.clone()), r.at);
            slot.state.held = r.held.clone();
            let line_since = r.records.lines.keys().map(|l| (*l, r.at)).collect();
            let published = r.published(zone);
            snapshots.insert(
                published.cluster,
                Arc::new(ClusterSnapshot {
                    published: Some(Arc::new(published)),
                    line_since,
                    ..ClusterSnapshot::default()
                }),
            );
        }
        let mut c = Control {
            config,
            policy: start.policy,
            fetch: start.fetch,
            timing: start.timing,
            started: now,
            obs: Observations::default(),
            addresses,
            slots,
            snapshots: Arc::new(snapshots),
            alerts: Arc::new(start.alerts.unwrap_or_default()),
            alerts_dirty: false,
            passes: 0,
            events: EventLog::starting(start.last_event, now),
            mirrors: Arc::new(Mirrors::new(start.mirror_states.as_deref())),
            monitors: Arc::new(Monitors::restore(start.monitor_states.as_deref())),
            availability: Arc::new(start.availability),
            followed: Default::default(),
            figures: Arc::default(),
            steering: Arc::default(),
            confirmations: Confirmations::default(),
            outputs: VecDeque::new(),
            next_silence: now,
            next_roll_up: now,
            open_windows: BTreeMap::new(),
            maintenance_looked: now,
            role: start.role,
        };
        // Windows already open at a start were told when they opened (one that opened while
        // the server was down is not told); their mirrors leave the doors from the start.
        c.open_windows = windows::open_windows(&c.config, now);
        c.outputs.push_back(Output::Answers(c.snapshots.clone()));
        c.sync_slots(now);
        c.flush_steering(now);
        // A registry that fails at start leaves it empty, with the failure in the reload
        // status; the saved states stay until a reload passes.
        if start.mirror_files_skipped.is_empty() {
            let _ = c.handle_registry(&start.mirror_files, now);
        } else {
            c.handle_unreadable_registry(start.mirror_files_skipped, now);
        }
        c.follow_window_mirrors(now);
        c
    }

    // ------------------------------------------------------------------ reading

    /// The configuration snapshot.
    pub fn config(&self) -> Arc<Config> {
        self.config.clone()
    }

    /// Every cluster's snapshot after its last pass.
    pub fn snapshots(&self) -> Arc<Snapshots> {
        self.snapshots.clone()
    }

    /// What has been observed of the probers and the node agents.
    pub fn observations(&self) -> &Observations {
        &self.obs
    }

    /// The cluster addresses' book: every latest result.
    pub fn addresses(&self) -> &Addresses {
        &self.addresses
    }

    /// The alert book.
    pub fn alerts(&self) -> &AlertBook {
        &self.alerts
    }

    /// Mirrors: what probers saw, the reloads, the check run.
    pub fn mirrors(&self) -> &Mirrors {
        &self.mirrors
    }

    /// What doors choose from.
    pub fn doors(&self) -> Arc<crate::mirrors::doors::Doors> {
        self.mirrors.doors()
    }

    /// Monitors: windows, verdicts and their history.
    pub fn monitors(&self) -> &Monitors {
        &self.monitors
    }

    /// What `/steer/{monitor}` answers.
    pub fn steering(&self) -> Arc<SteeringTable> {
        self.steering.clone()
    }

    /// The status of a node from its cluster's last pass.
    pub fn node_status(&self, node: NodeId) -> Option<&NodeStatus> {
        crate::view::node_status(&self.config, &self.snapshots, node)
    }

    /// Of `ips`, the addresses of `node` that serve before any prober has seen them answer:
    /// not verified yet, and no prober online to probe them (the same rule a pass applies,
    /// [`vantage_core::reachability::AddressHealth::unchecked`], for an address without
    /// results).
    pub fn unchecked_addresses(&self, node: NodeId, ips: &[IpAddr], now: Timestamp) -> Vec<IpAddr> {
        let Some(cluster) = self.config.nodes.get(&node.0).map(|n| n.value.cluster) else {
            return Vec::new();
        };
        let expected = self.online_spread(now).per_address_of(Caller::Node(node));
        let expected = u32::try_from(expected).unwrap_or(u32::MAX);
        let verified = |ip: &IpAddr| {
            self.slots
                .get(&cluster)
                .and_then(|s| s.state.addresses.get(&(node, *ip)))
                .is_some_and(|h| h.verified)
        };
        // What the last pass tallied for it (an address the agent reported may have results);
        // a new one has none.
        let verdict = |ip: &IpAddr| {
            self.node_status(node)
                .and_then(|s| s.addresses.iter().find(|a| a.ip == *ip))
                .map(|a| a.verdict)
                .unwrap_or_default()
        };
        ips.iter()
            .filter(|ip| !verified(ip) && AddressHealth::unchecked(&verdict(ip), expected))
            .copied()
            .collect()
    }

    /// The places of the probers online now: a new address waits for a strict majority of
    /// those that probe it.
    fn online_spread(&self, now: Timestamp) -> Spread {
        Spread::of(&self.config, |p| self.prober_status(p, now) == crate::observe::ProberStatus::Online)
    }

    /// A node's scheduling addresses in use now (configured, else reported).
    pub fn addresses_of(&self, node: NodeId) -> Option<vantage_core::address::AddressList> {
        crate::view::addresses_of(&self.config, &self.obs.nodes, self.policy, node)
    }

    /// The source address a node's agent connects from: that of its latest heartbeat, else
    /// that of its enrollment.
    pub fn source_address(&self, node: NodeId) -> Option<IpAddr> {
        crate::view::source_address(&self.config, &self.obs.nodes, node)
    }

    /// The source address an operator may add to a node's configured addresses: public (as
    /// a heartbeat's addresses must be) and not configured already. It is never used on its
    /// own.
    pub fn addable_source(&self, node: NodeId) -> Option<IpAddr> {
        crate::view::addable_source(&self.config, &self.obs.nodes, self.policy, node)
    }

    /// A prober's status now (SPEC §3.5).
    pub fn prober_status(&self, caller: Caller, now: Timestamp) -> crate::observe::ProberStatus {
        self.config.prober_status(caller, self.obs.probers.get(&caller).and_then(|r| r.last_seen), now)
    }

    /// The preview (SPEC §5.4) of a cluster at `now`, from its current states: every rule
    /// against every node it looks at, and each line — its all-down policy, what it answers,
    /// and what it would answer if every address failed in the next pass. Writes nothing; the
    /// cluster's view is gathered once for both.
    pub fn preview(&self, cluster: ClusterId, now: Timestamp) -> Option<(Vec<PreviewRow>, Vec<LineOutlook>)> {
        let empty = ClusterState::default();
        let (parts, spec, state) = self.preview_parts(cluster, &empty, now)?;
        let view = parts.view(&self.config, spec, (None, None));
        Some((preview(&view, state, now), line_outlooks(&view, state, now)))
    }

    /// What a preview of `cluster` reads: its view's parts, its spec and its state (`empty`
    /// before its first pass).
    fn preview_parts<'a>(
        &'a self,
        cluster: ClusterId,
        empty: &'a ClusterState,
        now: Timestamp,
    ) -> Option<(Parts<'a>, &'a vantage_core::model::Cluster, &'a ClusterState)> {
        let c = &self.config;
        let spec = &c.clusters.get(&cluster.0)?.value;
        let state = self.slots.get(&cluster).map_or(empty, |s| &s.state);
        Some((self.parts(cluster, &self.addresses, now, Vec::new()), spec, state))
    }

    /// The preview of one rule as drafted (`id`: the rule it would replace, or a new rule's
    /// id), against every node it would look at, as if it were on — what a form shows beside
    /// it before anything is saved. A draft with the behaviour of the rule it replaces keeps
    /// that rule's states, as a save would; any other starts fresh. Writes nothing.
    pub fn preview_draft(
        &self,
        cluster: ClusterId,
        (id, mut rule): (RuleId, Rule),
        now: Timestamp,
    ) -> Option<Vec<PreviewRow>> {
        let empty = ClusterState::default();
        let (mut parts, spec, state) = self.preview_parts(cluster, &empty, now)?;
        rule.enabled = true;
        parts.rules = vec![(id, rule)];
        Some(preview(&parts.view(&self.config, spec, (None, None)), state, now))
    }

    // ------------------------------------------------------------------ events

    /// A configuration change was committed to the store: it is swapped in, the results of
    /// probers that stopped counting go, and the clusters it touches are evaluated at once.
    pub fn handle_change(&mut self, puts: Vec<(i64, Object)>, deletes: Vec<i64>, now: Timestamp) {
        let effects = Effects::of(&self.config, &puts, &deletes, now);
        self.swap_config(changed(&self.config, puts, &deletes, now));
        for caller in effects.forget {
            for book in self.books() {
                book.forget(caller);
            }
            Arc::make_mut(&mut self.obs.probers).remove(&caller);
            self.confirmations.forget(caller);
            if effects.counted.contains(&caller) {
                self.outputs.push_back(Output::ForgetResults(caller));
            }
        }
        self.sync_slots(now);
        let c = self.config.clone();
        let findings: Vec<Finding> = self.books().into_iter().flat_map(|b| b.follow(&c, now)).collect();
        self.apply(findings, now);
        // A silence that went lets what it held go at once; a window is followed at once.
        self.release_silenced(now);
        self.follow_windows(now);
        if effects.all {
            self.trigger_all(now);
        }
        for (cluster, reason) in effects.clusters {
            self.trigger(cluster, reason, now, true);
        }
    }

    fn swap_config(&mut self, next: Config) {
        self.addresses.follow_config(&next);
        self.config = Arc::new(next);
    }

    /// A prober or probing node was enrolled (the change itself came through
    /// [`handle_change`](Self::handle_change)).
    pub fn handle_enrolled(&mut self, caller: Caller, hostname: String, version: String, now: Timestamp) {
        let r = Arc::make_mut(&mut self.obs.probers).entry(caller).or_default();
        r.hostname = Some(hostname);
        r.version = Some(version);
        r.last_seen = r.last_seen.max(Some(now));
        self.trigger_all(now);
    }

    /// Whether `cluster`'s listeners are probed by TCP connect at `now`, and why.
    pub fn tcp_fallback(&self, cluster: ClusterId, now: Timestamp) -> Option<TcpFallback> {
        TcpFallback::of(&self.config, cluster, &self.obs.nodes, now)
    }

    /// A prober asks for its work: its targets, the settings, and when to renew. What it is
    /// given is what its next reports may carry.
    pub fn handle_work(&mut self, caller: Caller, now: Timestamp) -> wire::Work {
        let c = self.config.clone();
        // The prober asking is online by asking.
        let spread = Spread::of(&c, |p| {
            p == caller || self.prober_status(p, now) == crate::observe::ProberStatus::Online
        });
        let agents = self.obs.nodes.clone();
        let asking =
            Asking { config: &c, caller, spread: &spread, agents: &agents, policy: self.policy, now };
        let mut work = Work::default();
        for book in self.books() {
            book.issue(&asking, &mut work);
        }
        let r = Arc::make_mut(&mut self.obs.probers).entry(caller).or_default();
        r.last_seen = r.last_seen.max(Some(now));
        r.targets = u32::try_from(work.targets.len() + work.endpoints.len()).unwrap_or(u32::MAX);
        r.round_targets = u32::try_from(work.targets.len()).unwrap_or(u32::MAX);
        r.given = Arc::new(work.given);
        wire::Work {
            id: caller.id(),
            settings: c.settings,
            checks: work.checks,
            targets: work.targets,
            endpoints: work.endpoints,
            check_now: work.check_now,
            renew_in_s: c.renew_in_s(caller, now),
            phase_ms: spread.phase_ms(caller, c.settings.interval_s()),
            fetch: self.fetch.clone(),
        }
    }

    /// The targets `caller` is asked to probe at once (collected once), as its work's keys.
    pub fn take_rechecks(&mut self, caller: Caller) -> wire::Recheck {
        let given = self.obs.probers.get(&caller).map(|r| &r.given.issued);
        let targets = self
            .confirmations
            .take(caller)
            .into_iter()
            .filter(|k| given.is_some_and(|g| g.contains(k)))
            .map(|k| k.to_string())
            .collect();
        wire::Recheck { targets }
    }

    /// Attempts per second each `ip:port` received over the last minute, from every prober.
    pub fn probe_rates(&self, now: Timestamp) -> Vec<(std::net::SocketAddr, f64)> {
        self.addresses.probe_rates(now)
    }

    /// A report arrived. It is checked whole (every target was given to this caller; 1 to 10
    /// attempts), then every result advances its window register and becomes the latest, and
    /// the clusters it concerns are evaluated soon. Returns what each result is about and the
    /// results to store.
    pub fn handle_report(
        &mut self,
        caller: Caller,
        report: &wire::Report,
        now: Timestamp,
    ) -> Result<Accepted, ReportError> {
        let checked = check_report(self.obs.probers.get(&caller).map(|r| &r.given), report)?;
        self.handle_checked(caller, report, checked, now)
    }

    /// A report checked against a published view (see [`check_report`]): when the caller
    /// still holds the work it was checked against its targets are taken as checked,
    /// otherwise (new work came between) it is checked again, and may then be refused.
    pub fn handle_checked(
        &mut self,
        caller: Caller,
        report: &wire::Report,
        checked: Checked,
        now: Timestamp,
    ) -> Result<Accepted, ReportError> {
        let given = self.obs.probers.get(&caller).map(|r| r.given.clone());
        let subjects = match &given {
            Some(g) if Arc::ptr_eq(g, &checked.given) => checked.subjects,
            _ => check_report(given.as_ref(), report)?.subjects,
        };
        let given = given.unwrap_or_default();
        let c = self.config.clone();
        let mut took = Took::default();
        took.rows.reserve(report.results.len());
        for (subjects, results) in subjects.chunks(READ_AHEAD).zip(report.results.chunks(READ_AHEAD)) {
            let read = subjects.iter().fold(0, |read, s| match s {
                Subject::Address(key) => read ^ self.addresses.touch(key, caller),
                Subject::Mirror(_) | Subject::Endpoint(_) => read,
            });
            std::hint::black_box(read);
            for (subject, result) in subjects.iter().zip(results) {
                let r = Reported { caller, given: &given, report, result, now };
                self.record(&c, subject, r, &mut took);
            }
        }
        // The prober's figures keep cluster results apart from endpoint ones.
        let (mut cluster, mut endpoints) = (Vec::new(), Vec::new());
        for (subject, r) in subjects.iter().zip(&report.results) {
            if matches!(subject, Subject::Address(_)) { cluster.push(r) } else { endpoints.push(r) }
        }
        let p = Arc::make_mut(&mut self.obs.probers).entry(caller).or_default();
        let was_reporting =
            p.last_report.is_some_and(|t| t.within_secs_of(now, c.settings.prober_online_s()));
        p.last_seen = p.last_seen.max(Some(now));
        p.last_report = p.last_report.max(Some(now));
        p.version = Some(report.version.chars().take(64).collect());
        p.book(report.started_at, report.confirmation, &cluster, &endpoints);
        if !was_reporting {
            self.prober_online(&c, caller, now);
        }
        let mut findings = took.findings;
        findings.extend(took.evaluate.into_iter().map(Finding::Evaluate));
        self.apply(findings, now);
        Ok(Accepted { subjects, rows: took.rows })
    }

    /// The registry's directory could not be read whole (`skipped`: every file left out, with
    /// why, never empty): the reload is refused and the registry stays as it was.
    pub fn handle_unreadable_registry(&mut self, skipped: Vec<LoadError>, now: Timestamp) {
        Arc::make_mut(&mut self.mirrors).unreadable(skipped, now);
    }

    /// The registry's files changed (or the server starts): every file is validated as one
    /// set, and only a set that passes is swapped in; otherwise the registry stays as it was
    /// and the reload status says why.
    pub fn handle_registry(
        &mut self,
        files: &[(String, String)],
        now: Timestamp,
    ) -> Result<Changes, LoadError> {
        let (registry, changes) = Arc::make_mut(&mut self.mirrors).reload(&self.config, files, now)?;
        if changes.is_empty() {
            return Ok(changes);
        }
        let mut next = Config::clone(&self.config);
        next.mirrors = Arc::new(registry);
        self.swap_config(next);
        let c = self.config.clone();
        let findings = SubjectBook::follow(&mut self.mirrors, &c, now);
        self.apply(findings, now);
        Ok(changes)
    }

    /// Requests Vantage's own traffic saw from each region's clients since the last call
    /// (region code, how many): the monitors that learn their weights weigh by them from their
    /// next verdict. A region deleted meanwhile (the doors that placed a client may be older
    /// than the configuration) counts nowhere.
    pub fn handle_demand(&mut self, counts: &[(String, u64)], now: Timestamp) {
        let known: Vec<(String, u64)> =
            (counts.iter()).filter(|(r, _)| self.config.has_region(r)).cloned().collect();
        Arc::make_mut(&mut self.monitors).add_demand(&known, now);
    }

    /// A freshness check of `host` read its trace times. A mirror further behind its
    /// reference than its `max_lag_s` leaves door rotation (with an alert) until a check finds
    /// it fresh; a check that read no time changes nothing but its error.
    pub fn handle_freshness(
        &mut self,
        host: &str,
        reading: crate::mirrors::book::FreshnessReading,
        now: Timestamp,
    ) {
        let c = self.config.clone();
        let stale = Arc::make_mut(&mut self.mirrors).record_freshness(&c, host, reading, now);
        let findings =
            stale.map(|stale| self.mirrors.freshness_findings(host, stale, now)).unwrap_or_default();
        self.apply(findings, now);
    }

    /// An operator asks for a check run now (SPEC §6: one per minute across all callers).
    pub fn handle_check_run(
        &mut self,
        regions: Option<Vec<String>>,
        now: Timestamp,
    ) -> Result<CheckRun, CheckRefused> {
        let c = self.config.clone();
        Arc::make_mut(&mut self.mirrors).start_check(&c, regions, now).cloned()
    }

    /// A node agent's heartbeat from `from`. A change of the reported addresses of a node
    /// without configured ones, or an agent coming back, is evaluated at once with that reason.
    pub fn handle_heartbeat(
        &mut self,
        node: NodeId,
        hb: wire::Heartbeat,
        from: IpAddr,
        now: Timestamp,
    ) -> wire::HeartbeatReply {
        let policy = self.policy;
        let addresses: Vec<IpAddr> =
            hb.addresses.iter().copied().filter(|ip| reportable(*ip, policy)).take(MAX_REPORTED).collect();
        let metrics = hb.metrics.map(|m| NodeMetrics {
            at: now,
            cpu_pct: m.cpu_pct,
            load1: m.load1,
            load5: m.load5,
            load15: m.load15,
            memory_used_bytes: m.memory_used_bytes,
            memory_total_bytes: m.memory_total_bytes,
            egress_mbps: m.egress_mbps,
            connections: m.connections,
        });
        let n = Arc::make_mut(Arc::make_mut(&mut self.obs.nodes).entry(node).or_default());
        let was_online = agent_online(n.last_heartbeat, now);
        let addresses_changed = n.addresses != addresses;
        n.last_heartbeat = n.last_heartbeat.max(Some(now));
        n.version = Some(hb.version.chars().take(64).collect());
        n.hostname = Some(hb.hostname.chars().take(253).collect());
        n.metrics = metrics;
        n.addresses = addresses;
        n.capabilities =
            hb.capabilities.into_iter().take(MAX_REPORTED).map(|c| c.chars().take(64).collect()).collect();
        n.links = hb.links.into_iter().take(MAX_REPORTED).collect();
        n.connects_from = Some(from);
        let c = self.config.clone();
        if let Some(rec) = c.nodes.get(&node.0) {
            if !was_online {
                let name = &rec.value.node.name;
                let summary = format!("the node agent of {name} is online (from {from})");
                let hostname = self.obs.nodes.get(&node).and_then(|n| n.hostname.clone());
                let details = json!({"node": name, "from": from.to_string(), "hostname": hostname});
                self.events.push(
                    now,
                    EventKind::AgentOnline,
                    (Some(rec.value.cluster), Some(node)),
                    summary,
                    details,
                );
            }
            let name = &rec.value.node.name;
            let reason = if addresses_changed && rec.value.addresses.is_empty() {
                Some(format!("Addresses {name} reports changed"))
            } else if !was_online {
                Some(format!("Node agent of {name} connected"))
            } else {
                None
            };
            let immediate = reason.is_some();
            self.trigger(rec.value.cluster, reason, now, immediate);
        }
        wire::HeartbeatReply {
            also_probes: c.node_probes(node),
            renew_in_s: c.renew_in_s(Caller::Node(node), now),
        }
    }

    /// A push of revision `number` of `cluster` to the external DNS server `target` ended,
    /// after its retries: published, or failed with `failure`.
    pub fn handle_publication(
        &mut self,
        cluster: ClusterId,
        number: u32,
        target: &str,
        failure: Option<&str>,
        now: Timestamp,
    ) {
        let Some(name) = self.config.clusters.get(&cluster.0).map(|c| c.value.name.clone()) else { return };
        let (kind, summary) = match failure {
            None => (EventKind::Published, format!("revision {number} of {name} published to {target}")),
            Some(why) => (
                EventKind::PublicationFailed,
                format!("revision {number} of {name} not published to {target}: {why}"),
            ),
        };
        let details = json!({"cluster": name, "number": number, "target": target, "reason": failure});
        self.events.push(now, kind, (Some(cluster), None), summary, details);
    }

    /// Time passed: every cluster that is due is evaluated, silence alerts are checked, old
    /// results expire and history is rolled up, each on its own period.
    pub fn handle_timeout(&mut self, now: Timestamp) {
        if self.config.next_maintenance_edge(self.maintenance_looked).is_some_and(|t| t <= now) {
            self.follow_windows(now);
        }
        self.maintenance_looked = now;
        let due: Vec<ClusterId> =
            self.slots.iter().filter(|(_, s)| s.due <= now).map(|(id, _)| *id).collect();
        for id in due {
            self.pass(id, now);
        }
        if now >= self.next_silence {
            self.silence(now);
            self.release_silenced(now);
            let c = self.config.clone();
            self.confirmations.expire(c.settings.interval_s(), now);
            let findings: Vec<Finding> = self.books().into_iter().flat_map(|b| b.sweep(&c, now)).collect();
            self.apply(findings, now);
            let books = (&*self.mirrors, &*self.monitors);
            let ledger = (&mut self.availability, &mut self.followed);
            crate::availability::Ledger::follow(ledger, &c, &self.snapshots, books, now);
            self.next_silence = now.plus_secs(SILENCE_EVERY_S);
        }
        let c = self.config.clone();
        // Copied (a view holds it) only when a check is due.
        if self.mirrors.next_freshness().is_some_and(|t| t <= now) {
            let checks = Arc::make_mut(&mut self.mirrors).due_freshness(&c, now);
            if !checks.is_empty() {
                self.outputs.push_back(Output::CheckFreshness(checks));
            }
        }
        self.save_books(now);
        if now >= self.next_roll_up {
            let days = i64::try_from(self.timing.history_retention_days).unwrap_or(14);
            // Whole UTC days: a day is rolled up once all of it is past the retention, so that a
            // store partitioned by day (PostgreSQL) drops the day's partition instead of
            // deleting its rows an hour at a time.
            let before =
                Timestamp::from_millis(now.plus_millis(-days * DAY_MS).millis().div_euclid(DAY_MS) * DAY_MS);
            let daily_before = before.plus_millis(-DAILY_KEPT_DAYS * DAY_MS);
            self.outputs.push_back(Output::Upkeep(Upkeep::RollUpHistory { before, daily_before }));
            self.outputs.push_back(Output::Upkeep(Upkeep::ExpireEvents { before }));
            self.next_roll_up = now.plus_secs(ROLL_UP_EVERY_S);
        }
        self.flush_alerts();
    }

    /// The newest event id numbered so far (before the first event: the id numbering
    /// continues after). An id a client resumes after that is greater is stale.
    pub fn last_event_id(&self) -> u64 {
        self.events.last_id()
    }

    /// The id this process's numbering continues after: ids above it are this process's own
    /// (events of the start itself, such as a refused mirror registry, included).
    pub fn event_base(&self) -> u64 {
        self.events.base()
    }

    /// Cluster passes run so far: a driver that times [`handle_timeout`](Self::handle_timeout)
    /// compares it before and after to time only the calls that evaluated.
    pub fn passes(&self) -> u64 {
        self.passes
    }

    /// How long reports wait for the pass that uses them in `cluster`, ms: as long as the
    /// oldest report of its last pass waited, or longer while a report still waits at `now`
    /// (`None`: no report has been used or waits).
    pub fn evaluation_lag_ms(&self, cluster: ClusterId, now: Timestamp) -> Option<i64> {
        let s = self.slots.get(&cluster)?;
        let waiting = s.waiting_since.map(|t| now.millis_since(t));
        s.lag_ms.max(waiting)
    }

    /// When [`handle_timeout`](Self::handle_timeout) next has something to do.
    pub fn poll_timeout(&self) -> Option<Timestamp> {
        let clusters = self.slots.values().map(|s| s.due);
        (clusters.chain([self.next_silence, self.next_roll_up]))
            .chain(self.mirrors.next_freshness())
            .chain(self.config.next_maintenance_edge(self.maintenance_looked))
            .min()
    }

    /// The next thing to carry out.
    pub fn poll_output(&mut self) -> Option<Output> {
        self.flush_alerts();
        let events = self.events.take();
        if !events.is_empty() {
            self.outputs.push_back(Output::Events(events));
        }
        while let Some(o) = self.outputs.pop_front() {
            if let Some(o) = self.for_role(o) {
                return Some(o);
            }
        }
        None
    }

    // ------------------------------------------------------------------ inside

    /// The subject books, for what every kind does alike. A new kind of subject is added here
    /// (and in [`record`](Self::record) and `issued`).
    fn books(&mut self) -> [&mut dyn SubjectBook; 3] {
        [&mut self.addresses, &mut self.mirrors, &mut self.monitors]
    }

    /// One result, to the book of its subject.
    fn record(&mut self, c: &Config, subject: &Subject, r: Reported, took: &mut Took) {
        match subject {
            Subject::Address(key) => self.addresses.record(c, key, r, took),
            Subject::Mirror(host) => self.mirrors.record(c, host, r, took),
            Subject::Endpoint(key) => self.monitors.record(c, key, r, took),
        }
    }

    /// Carries out what the books found, in order; the audit entries go as one, and the books
    /// save what is due after.
    fn apply(&mut self, findings: Vec<Finding>, now: Timestamp) {
        let mut audit = Vec::new();
        let mut steer = false;
        for f in findings {
            match f {
                Finding::Fire(firing, summary) => self.fire(firing, summary, now),
                Finding::Resolve(key) => self.resolve(&key, now),
                Finding::OnlyOpen { kind, keep, about } => self.only_open(kind, &keep, about, now),
                Finding::Audit(entry) => audit.push(entry),
                Finding::Evaluate(cluster) => {
                    if let Some(s) = self.slots.get_mut(&cluster) {
                        s.waiting_since = Some(s.waiting_since.map_or(now, |w| w.min(now)));
                    }
                    self.trigger(cluster, None, now, false);
                }
                Finding::Confirm { key, from } => self.confirm(key, from, now),
                Finding::Steer => steer = true,
                Finding::Upkeep(u) => self.outputs.push_back(Output::Upkeep(u)),
            }
        }
        // The order first: a verdict change saves the monitors at once, steering with them.
        if steer {
            self.flush_steering(now);
        }
        if !audit.is_empty() {
            self.outputs.push_back(Output::Audit(audit));
        }
        self.save_books(now);
    }

    /// Every book's save that is due.
    fn save_books(&mut self, now: Timestamp) {
        let saves: Vec<Output> = self.books().into_iter().filter_map(|b| b.take_save(now)).collect();
        self.outputs.extend(saves);
        if let Some(ledger) = crate::availability::Ledger::take_save(&mut self.availability, now) {
            self.outputs.push_back(Output::SaveAvailability(ledger));
        }
    }

    /// What a cluster pass reads: the agents and the latest results.
    fn seen(&self) -> (&Observations, &Addresses) {
        (&self.obs, &self.addresses)
    }

    /// What a pass of cluster `id` at `now` reads, with the observations `addresses` keeps
    /// (the core's own, or a test's made afresh).
    /// The views of its nodes are written over those in `room` (see [`Slot::room`]).
    fn parts<'a>(
        &self,
        id: ClusterId,
        addresses: &'a Addresses,
        now: Timestamp,
        room: Vec<NodeView<'static>>,
    ) -> Parts<'a> {
        let spread = self.online_spread(now);
        let c = &self.config;
        let seen = (&self.obs, addresses);
        Parts::gather(c, seen, self.policy, (id, now), &spread, (addresses.table().clone(), room))
    }

    /// `from` saw `key` change: every other counting prober that probes it is asked to probe
    /// it at once (see [`Confirmations`]).
    fn confirm(&mut self, key: TargetKey, from: Caller, now: Timestamp) {
        let c = &self.config;
        if !c.detection.confirm() {
            return;
        }
        let counting = |caller: &Caller| match caller {
            Caller::Prober(p) => c.probers.get(&p.0).is_some_and(|p| p.value.enabled),
            Caller::Node(n) => c.node_probes(*n),
        };
        let others = self
            .obs
            .probers
            .iter()
            .filter(|(caller, _)| **caller != from && counting(caller))
            .filter_map(|(caller, r)| r.given_as(key).map(|g| (*caller, g)));
        if self.confirmations.ask(key, others, c.settings.interval_s(), now) {
            self.outputs.push_back(Output::Recheck);
        }
    }

    /// Slots follow the clusters of the configuration; a cluster that went leaves DNS.
    fn sync_slots(&mut self, now: Timestamp) {
        let c = &self.config;
        let gone: Vec<ClusterId> =
            self.slots.keys().filter(|id| !c.clusters.contains_key(&id.0)).copied().collect();
        for id in &gone {
            self.slots.remove(id);
            self.outputs.push_back(Output::DropState(*id));
        }
        for id in c.clusters.keys() {
            self.slots.entry(ClusterId(*id)).or_insert_with(|| Slot { due: now, ..Slot::default() });
        }
        if self.snapshots.keys().any(|id| !c.clusters.contains_key(&id.0)) {
            let mut s = Snapshots::clone(&self.snapshots);
            s.retain(|id, _| c.clusters.contains_key(&id.0));
            self.snapshots = Arc::new(s);
            self.outputs.push_back(Output::Answers(self.snapshots.clone()));
        }
    }

    /// Asks for a pass of `cluster`: at once, or for a report no sooner than 2 s after its
    /// last pass. The first reason given before the pass is the one its revision carries.
    fn trigger(&mut self, cluster: ClusterId, reason: Option<String>, now: Timestamp, immediate: bool) {
        let Some(s) = self.slots.get_mut(&cluster) else { return };
        let at =
            if immediate { now } else { s.last.map_or(now, |l| l.plus_millis(REPORT_SPACING_MS).max(now)) };
        s.due = s.due.min(at);
        if s.reason.is_none() {
            s.reason = reason;
        }
    }

    fn trigger_all(&mut self, now: Timestamp) {
        let ids: Vec<ClusterId> = self.slots.keys().copied().collect();
        for id in ids {
            self.trigger(id, None, now, true);
        }
    }

    /// One pass of one cluster.
    fn pass(&mut self, id: ClusterId, now: Timestamp) {
        let c = self.config.clone();
        let interval = self.timing.evaluation_interval_s.max(1);
        let Some(cluster) = c.clusters.get(&id.0).map(|s| &s.value) else { return };
        let Some(zone) = Zone::of(&c, id) else { return };
        let room = self.slots.get_mut(&id).map(|s| std::mem::take(&mut s.room)).unwrap_or_default();
        let parts = self.parts(id, &self.addresses, now, room);
        let Some(slot) = self.slots.get_mut(&id) else { return };
        let reason = slot.reason.take();
        if let Some(t) = slot.waiting_since.take() {
            slot.lag_ms = Some(now.millis_since(t));
        }
        self.passes += 1;
        let follower = self.role == Role::Follower;
        let window = follower.then(|| slot.state.superseded.clone());
        let view = parts.view(&c, cluster, (reason.as_deref(), self.snapshots.get(&id).map(|s| &s.nodes)));
        let mut out = evaluate_again(&view, &mut slot.state, &mut slot.tallied, now);
        // The room keeps each node's allocations, not the observations it borrowed.
        let Parts { rules, nodes, drained, .. } = parts;
        slot.room = nodes.into_iter().map(NodeView::emptied).collect();
        if follower {
            // A follower's records are the lease holder's: what it would cut, the holder cuts
            // (or it does itself once it holds the lease). So is its removal window, which
            // follows the holder's revisions (`handle_revision`); only a configuration change,
            // which empties it, applies on every replica alike.
            out.revisions.clear();
            if let Some(w) = window
                && !slot.state.superseded.is_empty()
            {
                slot.state.superseded = w;
            }
            slot.state.published =
                self.snapshots.get(&id).and_then(|s| s.published.as_ref()).map(|p| p.records.clone());
        }
        slot.last = Some(now);
        slot.due = now.plus_secs(interval);
        if let Some(d) = out.next_deadline {
            slot.due = slot.due.min(d.max(now));
        }
        let base = slot.revision;
        let before = self.snapshots.get(&id).cloned().unwrap_or_default();
        let mut published = before.published.clone();
        let revisions_at = self.outputs.len();
        // What DNS answers after this pass: an unverified address in it is served anyway.
        let served =
            out.revisions.last().map(|d| &d.records).or(before.published.as_ref().map(|p| &p.records));
        let served = served.map_or(&[][..], |r| r.all.as_slice());
        pass_events(
            &mut self.events,
            &c,
            self.addresses.results(),
            id,
            &zone,
            &before,
            (&out.nodes, served),
            now,
        );
        let cut = !out.revisions.is_empty();
        // Each draft's records move into its revision (200 rules acting at once are 200 of
        // them, each the size of the cluster's answer).
        for draft in std::mem::take(&mut out.revisions) {
            slot.revision += 1;
            let p = Arc::new(Published {
                cluster: id,
                number: slot.revision,
                at: now,
                reason: draft.reason,
                records: draft.records,
                held: draft.held,
                zone: zone.clone(),
            });
            self.events.revision(&p, published.as_ref().map(|p| &p.records), now);
            self.outputs.push_back(Output::Revision(Revision { published: p.clone() }));
            published = Some(p);
        }
        let changed = cut || !out.events.is_empty();
        // A follower's saves go nowhere (the lease holder saves): its state is not copied, and
        // once it holds the lease its first save is whole (what the last holder saved may differ).
        let due = changed || slot.saved_at.is_none_or(|t| now.millis_since(t) > STATE_SAVED_EVERY_MS);
        if !follower {
            slot.unsaved.extend(std::mem::take(&mut out.moved));
        }
        if due && !follower {
            let whole = slot.whole_at.is_none_or(|t| now.millis_since(t) >= STATE_WHOLE_EVERY_MS);
            if whole {
                slot.whole_at = Some(now);
            }
            let save = StateSave::of(id, &mut slot.state, &mut slot.unsaved, whole);
            self.outputs.push_back(Output::SaveState(Box::new(save)));
            slot.saved_at = Some(now);
        }
        let line_since = since_lines(&before, published.as_deref(), now);
        let answered = published.as_ref().map_or(&[][..], |p| p.records.all.as_slice());
        let answered_since = published.as_ref().map_or(now, |p| p.at);
        let drains = crate::drain::follow(
            &c,
            (id, cluster.ttl),
            (&before.drains, before.evaluated_at.is_some()),
            (&out.nodes, &drained),
            (answered, answered_since),
            &mut self.events,
            now,
        );
        // A draining node reads drained at its moment, not at the next interval's pass.
        if let Some(t) = crate::drain::next_moved(&drains) {
            slot.due = slot.due.min(t.max(now));
        }
        let (nodes, level_since) = kept_statuses(&before, out.nodes, now);
        let snapshot = ClusterSnapshot {
            evaluated_at: Some(now),
            published,
            nodes,
            rules: out.rules,
            line_since,
            level_since,
            drains,
            probe_loss: out.probe_loss,
        };
        let mut all = Snapshots::clone(&self.snapshots);
        all.insert(id, Arc::new(snapshot));
        self.snapshots = Arc::new(all);
        // The built-in DNS answers a new revision before it is stored and pushed: storage is
        // slow or even down at times, and what DNS answers must not wait for it (nor lag what
        // the API says DNS answers, which is this snapshot).
        if cut {
            self.outputs.insert(revisions_at, Output::Answers(self.snapshots.clone()));
        }
        let audit: Vec<AuditEntry> = out
            .events
            .iter()
            .filter_map(|e| self.alert_of(&c, id, cluster, &zone, base, &rules, e, now))
            .collect();
        if !audit.is_empty() {
            self.outputs.push_back(Output::Audit(audit));
        }
    }

    /// Rebuilds the steering table (a new one only when it changed: readers compare pointers).
    fn flush_steering(&mut self, now: Timestamp) {
        // Without monitors there is nothing to steer, and nothing to copy.
        let table = if self.config.monitors.is_empty() {
            SteeringTable::default()
        } else {
            Arc::make_mut(&mut self.monitors).steer(&self.config, now)
        };
        if *self.steering != table {
            self.steering = Arc::new(table);
        }
    }

    /// A prober's first report, or its first after being silent.
    fn prober_online(&mut self, c: &Config, caller: Caller, now: Timestamp) {
        let (name, region, cluster, node) = match caller {
            Caller::Prober(p) => {
                let Some(rec) = c.probers.get(&p.0) else { return };
                (
                    rec.value.name.clone(),
                    c.region_code(rec.value.region).unwrap_or("?").to_owned(),
                    None,
                    None,
                )
            }
            Caller::Node(n) => {
                let Some(rec) = c.nodes.get(&n.0) else { return };
                (rec.value.node.name.clone(), "its node".to_owned(), Some(rec.value.cluster), Some(n))
            }
        };
        let targets = self.obs.probers.get(&caller).map_or(0, |p| p.targets);
        let summary = format!("prober {name} ({region}) reports: {targets} targets");
        let details = json!({"prober": name, "region": region, "targets": targets});
        self.events.push(now, EventKind::ProberOnline, (cluster, node), summary, details);
    }
}

#[cfg(test)]
impl Control {
    /// The availability ledger's follow at `now` from what it followed last notes what one
    /// from scratch would.
    pub(crate) fn assert_followed_as_from_scratch(&self, now: Timestamp) {
        let books = (&*self.mirrors, &*self.monitors);
        self.availability.assert_follows_as_from_scratch(
            &self.followed,
            &self.config,
            &self.snapshots,
            books,
            now,
        );
    }
}

/// Each node's status after a pass, and since when its level has held, walked beside the
/// snapshot before (both in node order, instead of a look-up of each node in it). A status
/// that did not change is the one before, shared (the pass shares most itself; one a rule's
/// effect changed back to what it was is shared here): a reader that kept a status (a node
/// list, the availability ledger) knows by its pointer that it is the same and compares
/// nothing. A level that did not change keeps its time, one that did starts at `now`, and a
/// new node's has none yet.
fn kept_statuses(
    before: &ClusterSnapshot,
    mut statuses: Vec<Arc<NodeStatus>>,
    now: Timestamp,
) -> (BTreeMap<NodeId, Arc<NodeStatus>>, BTreeMap<NodeId, Timestamp>) {
    if !statuses.is_sorted_by_key(|s| s.node) {
        statuses.sort_by_key(|s| s.node);
    }
    let (mut old, mut old_since) = (Beside::new(&before.nodes), Beside::new(&before.level_since));
    let (mut nodes, mut since) = (Vec::with_capacity(statuses.len()), Vec::with_capacity(statuses.len()));
    for s in statuses {
        let was = old.get(s.node);
        let was_since = old_since.get(s.node).copied();
        match was {
            Some(w) if w.level == s.level => since.extend(was_since.map(|t| (s.node, t))),
            Some(_) => since.push((s.node, now)),
            None => {}
        }
        nodes.push(match was {
            Some(w) if Arc::ptr_eq(w, &s) || **w == *s => (s.node, w.clone()),
            _ => (s.node, s),
        });
    }
    (nodes.into_iter().collect(), since.into_iter().collect())
}

/// Since when each line of `published` has answered its records: as before where they did not
/// change, else from `now`.
fn since_lines(
    before: &ClusterSnapshot,
    published: Option<&Published>,
    now: Timestamp,
) -> BTreeMap<vantage_core::ids::LineId, Timestamp> {
    let Some(p) = published else { return BTreeMap::new() };
    let was = before.published.as_deref().map(|b| &b.records.lines);
    p.records
        .lines
        .iter()
        .map(|(line, records)| {
            let same = was.and_then(|w| w.get(line)) == Some(records);
            let since = if same { before.line_since.get(line).copied().unwrap_or(now) } else { now };
            (*line, since)
        })
        .collect()
}

/// A report whose every result was checked against the work its caller held: what each
/// result is about, in the report's order. Made only by [`check_report`].
#[derive(Debug, Clone)]
pub struct Checked {
    /// The work it was checked against.
    given: Arc<crate::observe::Given>,
    subjects: Vec<Subject>,
}

/// Checks a report whole against what its caller was `given` (nothing: every target is
/// refused): every target was given, none twice, each result with 1 to 10 attempts, a good
/// attempt without an error and a failed one with one. Pure, so that a handler refuses a
/// report from the published view without waiting for the core.
pub fn check_report(
    given: Option<&Arc<crate::observe::Given>>,
    report: &wire::Report,
) -> Result<Checked, ReportError> {
    // Each target parsed, then each looked up in the work in a walk of its own: the look-ups
    // miss the cache at a fleet's scale, and a walk that does nothing else waits for several
    // at once (issue 32).
    let parsed: Vec<Option<Subject>> = report.results.iter().map(|r| r.target.parse().ok()).collect();
    let issued: Vec<Option<GivenAs>> =
        parsed.iter().map(|s| s.as_ref().and_then(|s| given.and_then(|g| issued(g, s)))).collect();
    let mut subjects = Vec::with_capacity(report.results.len());
    // Targets seen so far: an address's by its place among the keys given (a bit each), the
    // others (a few mirrors and monitors) by what they name.
    let mut places = given.map(|g| g.issued.none());
    let mut seen = FastSet::default();
    for (i, ((r, subject), issued)) in report.results.iter().zip(parsed).zip(issued).enumerate() {
        let (Some(subject), Some(issued)) = (subject, issued) else {
            return Err(vantage_core::Error::invalid(
                format!("results[{i}].target"),
                format!("target {:?} was not given to this prober (fetch the work first)", r.target),
            ));
        };
        // By what it names, not how: two spellings of one target are one target twice.
        let first = match issued {
            GivenAs::At(p) => places.as_mut().is_some_and(|seen| seen.give(p)),
            GivenAs::Named => seen.insert(subject.clone()),
        };
        if !first {
            return Err(vantage_core::Error::invalid(
                format!("results[{i}].target"),
                format!("target {:?} appears twice in the report", r.target),
            ));
        }
        if r.attempts.is_empty() || r.attempts.len() > 10 {
            return Err(vantage_core::Error::invalid(format!("results[{i}].attempts"), "1 to 10 attempts"));
        }
        // A good attempt has no error, a failed one says why.
        if let Some(j) = r.attempts.iter().position(|a| a.good() == a.error.is_some()) {
            return Err(vantage_core::Error::invalid(
                format!("results[{i}].attempts[{j}].error"),
                "a good attempt carries no error code, and a failed one carries one",
            ));
        }
        subjects.push(subject);
    }
    let given = given.cloned().unwrap_or_default();
    Ok(Checked { given, subjects })
}

/// How `subject` was given, if it was.
fn issued(given: &crate::observe::Given, subject: &Subject) -> Option<GivenAs> {
    match subject {
        Subject::Address(key) => <Addresses as crate::book::Records>::given(given, key),
        Subject::Mirror(host) => <Arc<Mirrors> as crate::book::Records>::given(given, host),
        Subject::Endpoint(key) => <Arc<Monitors> as crate::book::Records>::given(given, key),
    }
}

/// `c` with `puts` saved and `deletes` removed at `now`, as a committed change leaves it.
fn changed(
    c: &Config,
    puts: impl IntoIterator<Item = (i64, Object)>,
    deletes: &[i64],
    now: Timestamp,
) -> Config {
    let mut next = Config::clone(c);
    for (id, o) in puts {
        next.put(id, o, now, now);
    }
    for id in deletes {
        next.remove(*id);
    }
    next
}

/// What a cluster's view is built from: its lines, rules, nodes with their latest results,
/// and the prober table its observations are indexed by (the addresses book's, or one following it).
struct Parts<'a> {
    lines: Vec<LineSpec>,
    rules: Vec<(RuleId, Rule)>,
    nodes: Vec<NodeView<'a>>,
    /// The nodes drained at the pass's moment, and why, in node order.
    drained: Vec<(NodeId, DrainCause)>,
    table: Arc<ProberTable>,
}

impl<'a> Parts<'a> {
    /// What a pass of cluster `id` reads, each address with the probers that probe it (every
    /// counting prober online, within the probe budget, but the node itself: `spread`), whom
    /// it is to be seen answering by while it waits to be verified.
    fn gather(
        c: &Config,
        (obs, addresses): (&Observations, &'a Addresses),
        policy: AddressPolicy,
        (id, now): (ClusterId, Timestamp),
        spread: &Spread,
        (table, room): (Arc<ProberTable>, Vec<NodeView<'static>>),
    ) -> Parts<'a> {
        let lines = c
            .lines_of(id)
            .map(|(lid, l)| LineSpec {
                id: lid,
                name: l.value.line.name.clone(),
                group: Some(l.value.line.group),
                backup_groups: l.value.line.backup_groups.clone(),
                min_healthy: l.value.line.min_healthy,
                all_down: l.value.line.all_down,
                latency: latency_spec(c, &l.value.line),
            })
            .collect();
        let rules = c.rules_of(id).map(|(rid, r)| (rid, r.value.rule.clone())).collect();
        let ports: Vec<u16> = c
            .clusters
            .get(&id.0)
            .map(|cl| cl.value.listeners.iter().map(|l| l.port).collect())
            .unwrap_or_default();
        // Every node's addresses in use in one list, each with its node's place and how many
        // probers probe it: their observations are put in below, read ahead.
        let mut in_use = Vec::new();
        // Each node's view is written over the one in `room` at its place, if any: its name,
        // links and list of addresses keep their allocations.
        let mut nodes: Vec<NodeView<'a>> = room;
        let mut count = 0;
        let mut drained = Vec::new();
        for (i, (nid, n)) in c.nodes_of(id).enumerate() {
            let agent = obs.nodes.get(&nid);
            let expected = u32::try_from(spread.per_address_of(Caller::Node(nid))).unwrap_or(u32::MAX);
            let mine = addresses_in_use(&n.value.addresses, agent.map(|a| a.addresses.as_slice()), policy);
            in_use.extend(mine.as_slice().iter().map(|a| (i, expected, *a)));
            if nodes.len() == i {
                nodes.push(NodeView {
                    id: nid,
                    name: String::new(),
                    group: n.value.node.group,
                    enabled: false,
                    last_heartbeat: None,
                    links: Vec::new(),
                    metrics: None,
                    addresses: Vec::new(),
                });
            }
            let v = &mut nodes[i];
            v.id = nid;
            v.name.clone_from(&n.value.node.name);
            v.group = n.value.node.group;
            // A drained node is answered as a disabled one is (never), and probed.
            let drain = c.drain_of_node(nid, &n.value.node, now);
            v.enabled = n.value.node.enabled && drain.is_none();
            drained.extend(drain.map(|cause| (nid, cause)));
            v.last_heartbeat = agent.and_then(|a| a.last_heartbeat);
            match agent {
                Some(a) => v.links.clone_from(&a.links),
                None => v.links.clear(),
            }
            v.metrics = agent.and_then(|a| a.metrics);
            v.addresses.clear();
            v.addresses.reserve(mine.as_slice().len());
            count = i + 1;
        }
        nodes.truncate(count);
        // Each address's entry is a cache miss at a fleet's scale: a run's are read first,
        // together, then taken (issue 32).
        for run in in_use.chunks(READ_AHEAD) {
            let read =
                (run.iter()).fold(0, |read, (i, _, a)| read ^ addresses.touch_address(nodes[*i].id, a.ip));
            std::hint::black_box(read);
            for (i, expected_probers, a) in run {
                let n = &mut nodes[*i];
                let observations = addresses.observations(n.id, a.ip, &ports);
                n.addresses.push(AddressView {
                    address: *a,
                    observations,
                    expected_probers: *expected_probers,
                });
            }
        }
        Parts { lines, rules, nodes, drained, table }
    }

    /// The view of a pass over these parts; `statuses`: the ones it may share again (see
    /// [`ClusterView::statuses`]).
    fn view<'v>(
        &'v self,
        c: &'v Config,
        cluster: &'v vantage_core::model::Cluster,
        (reason, statuses): (Option<&'v str>, Option<&'v BTreeMap<NodeId, Arc<NodeStatus>>>),
    ) -> ClusterView<'v> {
        ClusterView {
            settings: &c.settings,
            detection: &c.detection,
            cluster,
            lines: &self.lines,
            nodes: &self.nodes,
            probers: &self.table.views,
            rules: &self.rules,
            reason,
            statuses,
        }
    }
}

/// What latency steering of `line` needs, when it steers by latency: its region, and the
/// names its reasons give the region and the line's groups.
fn latency_spec(c: &Config, line: &Line) -> Option<LatencySpec> {
    let region = line.latency_region?;
    let groups = std::iter::once(line.group).chain(line.backup_groups.iter().copied());
    Some(LatencySpec {
        region,
        region_name: c.regions.get(&region.0).map_or_else(|| region.to_string(), |r| r.value.code.clone()),
        group_names: groups
            .map(|g| (g, c.groups.get(&g.0).map_or_else(|| g.to_string(), |x| x.value.group.name.clone())))
            .collect(),
    })
}
