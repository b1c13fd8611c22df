//! A control core with a small configuration, fed events on a virtual clock.

use std::collections::BTreeMap;
use std::net::IpAddr;

use vantage_control::config::{GroupRecord, NodeRecord, Object, ProberRecord, RuleRecord};
use vantage_control::identity::Caller;
use vantage_control::snapshot::Published;
use vantage_control::state_save::StateSave;
use vantage_control::{Control, Output, Start, StoredRevision, Timing};
use vantage_core::Timestamp;
use vantage_core::address::{AddressInput, AddressList, AddressPolicy, Level};
use vantage_core::evaluate::{ClusterState, FastSet};
use vantage_core::ids::{ClusterId, GroupId, NodeId, ProberId, RegionId};
use vantage_core::model::{Cluster, Node, NodeGroup, Region};
use vantage_core::reachability::AddressHealth;
use vantage_core::result::{Attempt, ErrorCode, ProbeResult, Stages};
use vantage_core::wire;

pub(crate) const T0: Timestamp = Timestamp::from_secs(1_800_000_000);

pub(crate) fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

/// `p` as the store gives it back.
pub(crate) fn stored_revision(p: &Published) -> StoredRevision {
    StoredRevision {
        cluster: p.cluster,
        number: p.number,
        at: p.at,
        reason: p.reason.clone(),
        records: p.records.clone(),
        held: p.held.clone(),
    }
}

/// A control core and its clock.
pub(crate) struct Lab {
    pub control: Control,
    pub now: Timestamp,
    next_id: i64,
    /// Everything the core asked for since the last [`Lab::take`].
    pub outputs: Vec<Output>,
    /// Every cluster's saves, folded together as the store holds them.
    saved: BTreeMap<ClusterId, StateSave>,
    /// Every cluster's latest revision, as the store holds it.
    revisions: BTreeMap<ClusterId, StoredRevision>,
}

impl Lab {
    /// An empty configuration, started at `T0`.
    pub(crate) fn new() -> Lab {
        Lab::with_start(Start::default())
    }

    pub(crate) fn with_start(start: Start) -> Lab {
        Lab::with_policy(start, AddressPolicy::default())
    }

    /// A core started at `at` (a restart, later than the first).
    pub(crate) fn with_start_at(start: Start, at: Timestamp) -> Lab {
        Lab::started(Start { timing: Timing::default(), ..start }, at, 1_000_000)
    }

    /// A core whose addresses follow `policy` (lab mode: loopback allowed).
    pub(crate) fn with_policy(start: Start, policy: AddressPolicy) -> Lab {
        Lab::started(Start { policy, timing: Timing::default(), ..start }, T0, 1000)
    }

    /// A core started from `start` at `at`, whose store holds what `start` was read from.
    fn started(start: Start, at: Timestamp, next_id: i64) -> Lab {
        let revisions = start.revisions.iter().map(|r| (r.cluster, r.clone())).collect();
        let saved = (start.states.iter())
            .map(|(c, state)| (*c, StateSave::of(*c, &mut state.clone(), &mut FastSet::default(), true)))
            .collect();
        let control = Control::new(start, at);
        Lab { control, now: at, next_id, outputs: Vec::new(), saved, revisions }
    }

    /// What the store holds of `cluster`'s state: every save of it so far, each folded into
    /// the ones before, read back through JSON as the server writes them.
    pub(crate) fn saved_state(&mut self, cluster: ClusterId) -> Option<ClusterState> {
        self.collect();
        let through_json =
            |h: &AddressHealth| serde_json::from_str(&serde_json::to_string(h).unwrap()).unwrap();
        let folded = self.saved.get(&cluster)?;
        assert!(folded.whole, "the first save of a core is whole");
        let rest = serde_json::from_str(&serde_json::to_string(&folded.rest).unwrap()).unwrap();
        let addresses = folded.addresses.iter().filter_map(|(k, h)| Some((*k, through_json(h.as_ref()?))));
        Some(StateSave::restore(rest, addresses))
    }

    /// What a start reads of the store: the configuration, every cluster's saved state and
    /// latest revision.
    pub(crate) fn stored(&mut self) -> Start {
        self.collect();
        let clusters: Vec<ClusterId> = self.saved.keys().copied().collect();
        Start {
            config: (*self.control.config()).clone(),
            states: clusters.into_iter().filter_map(|c| Some((c, self.saved_state(c)?))).collect(),
            revisions: self.revisions.values().cloned().collect(),
            ..Start::default()
        }
    }

    /// Saves a new object (as a committed change) and returns its id.
    pub(crate) fn put(&mut self, o: Object) -> i64 {
        self.next_id += 1;
        let id = self.next_id;
        self.replace(id, o);
        id
    }

    /// Replaces object `id`.
    pub(crate) fn replace(&mut self, id: i64, o: Object) {
        self.control.handle_change(vec![(id, o)], Vec::new(), self.now);
        self.collect();
    }

    pub(crate) fn delete(&mut self, id: i64) {
        self.control.handle_change(Vec::new(), vec![id], self.now);
        self.collect();
    }

    pub(crate) fn region(&mut self, code: &str) -> RegionId {
        let r: Region = serde_json::from_value(serde_json::json!({"code": code, "name": code})).unwrap();
        RegionId(self.put(Object::Region(r)))
    }

    pub(crate) fn prober(&mut self, name: &str, region: RegionId) -> Caller {
        let rec = ProberRecord {
            name: name.into(),
            region,
            enabled: true,
            cert_sha256: Some(format!("fp-{name}")),
            cert_issued_at: Some(self.now),
        };
        Caller::Prober(ProberId(self.put(Object::Prober(rec))))
    }

    pub(crate) fn cluster(&mut self, json: &str) -> ClusterId {
        let c: Cluster = serde_json::from_str(json).unwrap();
        ClusterId(self.put(Object::Cluster(c)))
    }

    pub(crate) fn group(&mut self, cluster: ClusterId, name: &str, region: Option<RegionId>) -> GroupId {
        let group: NodeGroup =
            serde_json::from_value(serde_json::json!({"name": name, "region": region})).unwrap();
        GroupId(self.put(Object::Group(GroupRecord { cluster, group })))
    }

    pub(crate) fn node(
        &mut self,
        cluster: ClusterId,
        group: GroupId,
        name: &str,
        addresses: &[(&str, Level)],
    ) -> NodeId {
        let rows: Vec<AddressInput> = addresses
            .iter()
            .map(|(ip, level)| AddressInput { ip: (*ip).into(), level: *level, trusted: false, line: None })
            .collect();
        let rec = NodeRecord {
            cluster,
            node: serde_json::from_value::<Node>(serde_json::json!({"group": group, "name": name})).unwrap(),
            addresses: AddressList::parse(&rows, AddressPolicy::default()).unwrap(),
            cert_sha256: None,
            cert_issued_at: None,
            enrolled_from: None,
        };
        NodeId(self.put(Object::Node(rec)))
    }

    pub(crate) fn rule(&mut self, cluster: ClusterId, json: &str) -> i64 {
        self.put(Object::Rule(RuleRecord { cluster, rule: serde_json::from_str(json).unwrap() }))
    }

    /// The smallest fleet: region `eu`, prober `fra`, the cluster [`CLUSTER`] with group
    /// `fra-1` in that region, and node `edge-1` on 203.0.113.10.
    pub(crate) fn one_node(&mut self) -> (Caller, ClusterId, GroupId, NodeId) {
        let r = self.region("eu");
        let p = self.prober("fra", r);
        let c = self.cluster(CLUSTER);
        let g = self.group(c, "fra-1", Some(r));
        let n = self.node(c, g, "edge-1", &[("203.0.113.10", Level::Primary)]);
        (p, c, g, n)
    }

    /// Two nodes of one group: edge-1 with a primary (203.0.113.10) and a backup
    /// (198.51.100.10), edge-2 with a primary (203.0.113.11).
    pub(crate) fn one_with_a_backup(&mut self) -> (Caller, ClusterId, NodeId, NodeId) {
        let r = self.region("eu");
        let p = self.prober("fra", r);
        let c = self.cluster(CLUSTER);
        let g = self.group(c, "fra-1", Some(r));
        let a =
            self.node(c, g, "edge-1", &[("203.0.113.10", Level::Primary), ("198.51.100.10", Level::Backup1)]);
        let b = self.node(c, g, "edge-2", &[("203.0.113.11", Level::Primary)]);
        (p, c, a, b)
    }

    fn collect(&mut self) {
        while let Some(o) = self.control.poll_output() {
            if let Output::SaveState(save) = &o {
                StateSave::fold_into(&mut self.saved, StateSave::clone(save));
            }
            if let Output::Revision(r) = &o {
                self.revisions.insert(r.published.cluster, stored_revision(&r.published));
            }
            self.outputs.push(o);
        }
    }

    /// Takes the outputs collected so far.
    pub(crate) fn take(&mut self) -> Vec<Output> {
        self.collect();
        std::mem::take(&mut self.outputs)
    }

    /// Runs every timer that is due now.
    pub(crate) fn tick(&mut self) {
        self.control.handle_timeout(self.now);
        self.collect();
    }

    /// Moves the clock forward by `ms`, waking the core at each timer on the way, as the driver
    /// does.
    pub(crate) fn advance_ms(&mut self, ms: i64) {
        let until = self.now.plus_millis(ms);
        while let Some(t) = self.control.poll_timeout().filter(|t| *t <= until) {
            self.now = t.max(self.now);
            self.tick();
        }
        self.now = until;
        self.tick();
    }

    pub(crate) fn advance(&mut self, s: i64) {
        self.advance_ms(s * 1000);
    }

    /// `caller` fetches its work and reports every target: good on the addresses not in
    /// `failing`, refused on those in it.
    pub(crate) fn round(&mut self, caller: Caller, failing: &[&str]) -> wire::Work {
        let (work, report) = self.round_report(caller, failing);
        self.control.handle_report(caller, &report, self.now).unwrap();
        self.collect();
        work
    }

    /// `caller` fetches its work, and the report of a [`Lab::round`] on it, not yet handed in.
    pub(crate) fn round_report(&mut self, caller: Caller, failing: &[&str]) -> (wire::Work, wire::Report) {
        let work = self.control.handle_work(caller, self.now);
        let failing: Vec<IpAddr> = failing.iter().map(|s| ip(s)).collect();
        let results = work
            .targets
            .iter()
            .map(|t| ProbeResult {
                target: t.key.clone(),
                attempts: (0..3).map(|_| attempt(!failing.contains(&t.ip))).collect(),
                hls: None,
                cert_not_after: None,
                failed_at: (failing.contains(&t.ip)).then_some(self.now),
            })
            .collect();
        (work, report_at(self.now, results))
    }
}

/// A report of `results` whose round started and finished at `at`.
pub(crate) fn report_at(at: Timestamp, results: Vec<ProbeResult>) -> wire::Report {
    wire::Report { started_at: at, finished_at: at, version: "test".into(), results, confirmation: false }
}

pub(crate) fn attempt(good: bool) -> Attempt {
    if good {
        Attempt { stages: Stages::ALL, rtt_us: 12_000, error: None }
    } else {
        Attempt { stages: Stages::empty(), rtt_us: 0, error: Some(ErrorCode::Refused) }
    }
}

/// The revisions among `outputs`: (number, reason).
pub(crate) fn revisions(outputs: &[Output]) -> Vec<(u32, String)> {
    outputs
        .iter()
        .filter_map(|o| match o {
            Output::Revision(r) => Some((r.published.number, r.published.reason.clone())),
            _ => None,
        })
        .collect()
}

/// The alerts among `outputs`: (key, firing).
pub(crate) fn alerts(outputs: &[Output]) -> Vec<(String, bool)> {
    outputs
        .iter()
        .filter_map(|o| match o {
            Output::Alert(a) => Some((a.key.clone(), a.state == vantage_control::alerts::AlertState::Firing)),
            _ => None,
        })
        .collect()
}

pub(crate) const CLUSTER: &str =
    r#"{"name":"video","domain":"cdn.example.net","listeners":[{"port":80,"protocol":"http"}]}"#;
