//! The pass against one made from scratch (issue 32, item 7). The core keeps what a pass reads
//! in step with what arrives — each address's observations updated in place by its reports,
//! the prober table followed through configuration changes (new callers appended, gone ones
//! left as holes) — instead of gathering it at every pass. Random reports, heartbeats,
//! configuration changes and timers drive a core here while the test keeps what the store
//! would hold: the latest results the core hands over to be stored, deleted when it says so.
//! Before every pass, what the pass would decide from inputs made afresh from that — the
//! table built from the configuration and the observations from the stored results, as a
//! start makes them — is worked out on a copy of the evaluator's state, and the pass must
//! publish the same revisions, give every node the same status, leave the same state and be
//! due again at the same time.

use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;

use vantage_core::Timestamp;
use vantage_core::evaluate::{ClusterState, Evaluation, NodeStatus, evaluate};
use vantage_core::ids::{ClusterId, GroupId, NodeId};
use vantage_core::model::Line;
use vantage_core::result::{Attempt, ErrorCode, Stages};
use vantage_core::rules::Rule;
use vantage_core::wire;

use super::{Control, Output, Upkeep, Zone};
use crate::addresses::Addresses;
use crate::config::{LineRecord, Object, RuleRecord};
use crate::dice::Dice;
use crate::fixtures::{good_round, large_fleet};
use crate::identity::Caller;
use crate::observe::Latest;
use crate::state_save::StateSave;
use crate::target::{Subject, TargetKey};
use crate::{Start, Timing};

impl Control {
    /// What a pass of cluster `id` at `now` would decide with the prober table built from the
    /// configuration and each address's observations made from `stored`, as a start makes
    /// them (the agents, who is online and the evaluator's state are the core's own; the state
    /// a copy), and the state it would leave (`None`: no pass of `id` would run).
    fn pass_afresh(
        &self,
        id: ClusterId,
        stored: &Stored,
        now: Timestamp,
    ) -> Option<(Evaluation, ClusterState)> {
        let c = &self.config;
        let cluster = &c.clusters.get(&id.0)?.value;
        Zone::of(c, id)?;
        let slot = self.slots.get(&id)?;
        let mut fresh = Addresses::default();
        for ((key, caller), latest) in stored {
            fresh.restore(*key, *caller, latest.clone());
        }
        fresh.start(c);
        let parts = self.parts(id, &fresh, now, Vec::new());
        let mut state = slot.state.clone();
        let out = evaluate(&parts.view(c, cluster, (slot.reason.as_deref(), None)), &mut state, now);
        Some((out, state))
    }
}

/// What the passes compared so far amounted to, so that the test cannot pass on passes that
/// decided nothing.
#[derive(Debug, Default)]
struct Decided {
    passes: u32,
    revisions: u32,
    /// Passes after which some rule's action was in effect.
    acting: u32,
    /// Passes after which some address was not reachable.
    unreachable: u32,
    /// Saves of a cluster's state, each checked to come back as the state saved.
    saves: u32,
}

/// The latest results the store would hold, by target and caller.
type Stored = BTreeMap<(TargetKey, Caller), Latest>;

/// Carries out what the store does of the core's outputs: results forgotten and expired.
fn store(stored: &mut Stored, outputs: &[Output]) {
    for o in outputs {
        match o {
            Output::ForgetResults(caller) => stored.retain(|(_, c), _| c != caller),
            Output::Upkeep(Upkeep::ExpireResults { before }) => stored.retain(|_, l| l.at >= *before),
            _ => {}
        }
    }
}

/// Runs the timers due at `now`, each due pass checked against its counterpart made afresh.
fn timeout_checked(
    control: &mut Control,
    (stored, saved): (&mut Stored, &mut BTreeMap<ClusterId, StateSave>),
    now: Timestamp,
    decided: &mut Decided,
    at: &str,
) {
    let due: Vec<ClusterId> = control.slots.iter().filter(|(_, s)| s.due <= now).map(|(id, _)| *id).collect();
    let afresh: Vec<(ClusterId, Evaluation, ClusterState)> = (due.into_iter())
        .filter_map(|id| control.pass_afresh(id, stored, now).map(|(e, s)| (id, e, s)))
        .collect();
    control.handle_timeout(now);
    let outputs: Vec<Output> = std::iter::from_fn(|| control.poll_output()).collect();
    store(stored, &outputs);
    // Every save, folded into the ones before as the store holds them, comes back as the state
    // the core keeps, with the published records of its latest revision (as a start reads it).
    for o in &outputs {
        let Output::SaveState(save) = o else { continue };
        let id = save.cluster;
        StateSave::fold_into(saved, StateSave::clone(save));
        let held = &saved[&id];
        assert!(held.whole, "{at}: the first save of cluster {id} is whole");
        let addresses = held.addresses.iter().filter_map(|(k, h)| Some((*k, (*h)?)));
        let mut back = StateSave::restore(held.rest.clone(), addresses);
        assert!(back.published.is_none(), "{at}: the published records are the revision's, not saved");
        back.published = control.snapshots[&id].published.as_ref().map(|p| p.records.clone());
        assert!(back == control.slots[&id].state, "{at}: the state of cluster {id} as saved");
        decided.saves += 1;
    }
    for (id, out, state) in afresh {
        let published: Vec<_> = (outputs.iter())
            .filter_map(|o| match o {
                Output::Revision(r) if r.published.cluster == id => Some(&r.published),
                _ => None,
            })
            .map(|p| (p.reason.as_str(), &p.records, &p.held))
            .collect();
        let drafted: Vec<_> =
            out.revisions.iter().map(|d| (d.reason.as_str(), &d.records, &d.held)).collect();
        assert_eq!(published, drafted, "{at}: the revisions of cluster {id}");
        let mut afresh_nodes: Vec<&NodeStatus> = out.nodes.iter().map(|s| &**s).collect();
        afresh_nodes.sort_by_key(|s| s.node);
        let snapshot = &control.snapshots[&id];
        let nodes: Vec<_> = snapshot.nodes.values().map(|s| &**s).collect();
        let ids = |n: &[&NodeStatus]| n.iter().map(|s| s.node).collect::<Vec<_>>();
        assert_eq!(ids(&nodes), ids(&afresh_nodes), "{at}: the nodes of cluster {id}");
        if let Some((kept, made)) = nodes.iter().zip(&afresh_nodes).find(|(a, b)| a != b) {
            panic!("{at}: the status of node {}:\n{kept:?}\nafresh:\n{made:?}", kept.node);
        }
        assert_eq!(snapshot.rules, out.rules, "{at}: the rules' states of cluster {id}");
        assert_eq!(snapshot.probe_loss, out.probe_loss, "{at}: the probe loss of cluster {id}");
        // The next pass is due when its interval ends, or sooner when a timer of this one runs
        // out first.
        let interval = now.plus_secs(control.timing.evaluation_interval_s.max(1));
        let due = out.next_deadline.map_or(interval, |d| interval.min(d.max(now)));
        assert_eq!(control.slots[&id].due, due, "{at}: when cluster {id}'s next pass is due");
        let kept = &control.slots[&id].state;
        let differing = kept.addresses.iter().find(|(k, h)| state.addresses.get(k) != Some(h));
        assert_eq!(differing, None, "{at}: an address's hysteresis in cluster {id}");
        assert!(*kept == state, "{at}: the evaluator's state of cluster {id}:\n{kept:?}\nafresh:\n{state:?}");
        decided.passes += 1;
        decided.revisions += u32::try_from(published.len()).unwrap_or(u32::MAX);
        decided.acting += u32::from(state.rules.values().any(|r| r.status.in_effect()));
        let unreachable = (out.nodes.iter().flat_map(|n| &n.addresses))
            .any(|a| a.reachability != vantage_core::reachability::Reachability::Reachable);
        decided.unreachable += u32::from(unreachable);
    }
}

/// The fleet of the test: 8 nodes of 3 addresses in group 3, the last 3 moved to group 4 (the
/// backup group of line `local`, which steers by latency, and the group of line `other`), 5
/// probers and 2 nodes that probe, and four rules: two on CPU (remove the node from `local`,
/// and at a lower threshold from `other`), on probe loss (backup IP), on load (backup groups,
/// line `local`).
fn fleet() -> (Vec<(i64, Object)>, Vec<Caller>) {
    let fleet = large_fleet(8, 5);
    let mut puts = fleet.puts;
    let backup: vantage_core::model::NodeGroup =
        serde_json::from_value(serde_json::json!({"name": "backup", "region": 1})).unwrap();
    puts.push((4, Object::Group(crate::config::GroupRecord { cluster: ClusterId(2), group: backup })));
    let mut callers = fleet.probers;
    for (id, o) in &mut puts {
        if let Object::Node(n) = o {
            if *id >= 111 {
                n.node.group = GroupId(4);
            }
            if *id <= 107 {
                n.node.also_probes = true;
                callers.push(Caller::Node(NodeId(*id)));
            }
        }
    }
    puts.push((5, line(3)));
    let other: Line = serde_json::from_value(serde_json::json!({
        "name": "other", "group": 4, "client_networks": ["198.51.100.0/24"],
    }))
    .unwrap();
    puts.push((9, Object::Line(LineRecord { cluster: ClusterId(2), line: other })));
    for (id, rule) in rules() {
        puts.push((id, rule));
    }
    (puts, callers)
}

/// Line `local`: group 3, answering with group 4 when group 3 has fewer than `min_healthy`
/// healthy addresses.
fn line(min_healthy: u32) -> Object {
    let line: Line = serde_json::from_value(serde_json::json!({
        "name": "local", "group": 3, "backup_groups": [4], "min_healthy": min_healthy,
        "client_networks": ["192.0.2.0/24"], "latency_region": 1,
    }))
    .unwrap();
    Object::Line(LineRecord { cluster: ClusterId(2), line })
}

/// The four rules, under their ids.
fn rules() -> Vec<(i64, Object)> {
    let rule = |v: serde_json::Value| {
        let rule: Rule = serde_json::from_value(v).unwrap();
        Object::Rule(RuleRecord { cluster: ClusterId(2), rule })
    };
    vec![
        (
            6,
            rule(serde_json::json!({"name": "cpu", "line": 5, "hold_s": 0, "recover_s": 20,
                "conditions": [{"metric": "cpu", "comparison": ">", "threshold": 80, "for_s": 0}]})),
        ),
        (
            10,
            rule(serde_json::json!({"name": "cpu elsewhere", "line": 9, "hold_s": 0, "recover_s": 20,
                "conditions": [{"metric": "cpu", "comparison": ">", "threshold": 60, "for_s": 0}]})),
        ),
        (
            7,
            rule(serde_json::json!({"name": "loss", "action": "backup_ip", "hold_s": 10, "recover_s": 20,
                "conditions": [{"metric": "probe_loss", "comparison": ">", "threshold": 30, "for_s": 0,
                                "aggregate": "max"}]})),
        ),
        (
            8,
            rule(serde_json::json!({"name": "load", "action": "backup_groups", "line": 5, "hold_s": 0,
                "recover_s": 10, "conditions": [{"metric": "load1", "comparison": ">", "threshold": 4, "for_s": 5}]})),
        ),
    ]
}

/// A node agent's heartbeat with CPU `cpu` % and load `load`.
fn heartbeat(cpu: f64, load: f64) -> wire::Heartbeat {
    wire::Heartbeat {
        version: "test".into(),
        hostname: "edge".into(),
        metrics: Some(wire::HostMetrics {
            cpu_pct: cpu,
            load1: load,
            load5: load,
            load15: load,
            memory_used_bytes: 1 << 30,
            memory_total_bytes: 4 << 30,
            egress_mbps: 10.0,
            connections: 100,
        }),
        addresses: Vec::new(),
        capabilities: Vec::new(),
        links: Vec::new(),
    }
}

/// Random reports (partial, failing more often on a few sick addresses, with RTTs that move),
/// heartbeats (CPU and load crossing the rules' thresholds), probers disabled, deleted and
/// added again, nodes deleted and added again, rules deleted and added again, the line's
/// minimum changed, and time passing from one timer to the next: every pass publishes, and
/// leaves, what the pass made afresh does.
#[test]
fn every_pass_decides_what_one_made_afresh_decides() {
    for seed in [0x9e37_79b9_7f4a_7c15, 0x2545_f491_4f6c_dd1d, 0x0fed_cba9_8765_4321] {
        let decided = steps_from(seed);
        assert!(
            decided.passes > 150
                && decided.revisions > 20
                && decided.acting > 10
                && decided.unreachable > 10
                && decided.saves > 20,
            "seed {seed:#x}: the passes compared decided things: {decided:?}"
        );
    }
}

/// 500 random steps from `seed`, every pass checked; what the passes amounted to.
fn steps_from(seed: u64) -> Decided {
    let start = Timestamp::from_secs(1_800_000_000);
    let mut now = start;
    let timing = Timing { evaluation_interval_s: 5, ..Timing::default() };
    let mut control = Control::new(Start { timing, ..Start::default() }, now);
    let (puts, callers) = fleet();
    control.handle_change(puts.clone(), Vec::new(), now);
    let nodes: Vec<(i64, Object)> =
        puts.iter().filter(|(_, o)| matches!(o, Object::Node(_))).cloned().collect();
    let ips: Vec<IpAddr> = (puts.iter())
        .filter_map(|(_, o)| match o {
            Object::Node(n) => Some(n.addresses.as_slice().iter().map(|a| a.ip).collect::<Vec<_>>()),
            _ => None,
        })
        .flatten()
        .collect();
    let mut dice = Dice(seed);
    let mut sick: BTreeSet<IpAddr> = BTreeSet::new();
    let mut decided = Decided::default();
    let mut stored = Stored::new();
    let mut saved = BTreeMap::new();
    let mut done: Vec<String> = Vec::new();
    for step in 0..500 {
        let roll = dice.roll(16);
        done.push(format!("{step}: {roll}"));
        match roll {
            0..=5 => {
                let caller = callers[dice.roll(callers.len() as u64) as usize];
                let work = control.handle_work(caller, now);
                let ip_of: BTreeMap<_, _> = work.targets.iter().map(|t| (t.key.clone(), t.ip)).collect();
                for mut report in good_round(&work, now) {
                    report.results.retain(|_| dice.roll(5) > 0);
                    for r in &mut report.results {
                        let failing = dice.roll(10) < if sick.contains(&ip_of[&r.target]) { 8 } else { 1 };
                        let n = 1 + dice.roll(3) as usize;
                        r.attempts = (0..n)
                            .map(|_| match failing && dice.roll(4) > 0 {
                                true => Attempt {
                                    stages: Stages::empty(),
                                    rtt_us: 0,
                                    error: Some(ErrorCode::Timeout),
                                },
                                false => Attempt {
                                    stages: Stages::ALL,
                                    rtt_us: 1_000 * (1 + dice.roll(80) as u32),
                                    error: None,
                                },
                            })
                            .collect();
                        r.failed_at = failing.then_some(now);
                    }
                    let accepted = control.handle_report(caller, &report, now).unwrap();
                    for (subject, latest) in accepted.rows {
                        if let Subject::Address(key) = subject {
                            stored.insert((key, caller), latest);
                        }
                    }
                }
            }
            6 => {
                let ip = ips[dice.roll(ips.len() as u64) as usize];
                if !sick.remove(&ip) {
                    sick.insert(ip);
                }
            }
            7 | 8 => {
                let (id, _) = &nodes[dice.roll(nodes.len() as u64) as usize];
                let hb = heartbeat(dice.roll(100) as f64, dice.roll(8) as f64);
                if control.config().nodes.contains_key(id) {
                    control.handle_heartbeat(NodeId(*id), hb, "192.0.2.200".parse().unwrap(), now);
                }
            }
            9 => {
                let (id, puts, deletes) = dice.prober_change(5);
                done.push(format!("prober {id}"));
                control.handle_change(puts, deletes, now);
            }
            10 => {
                let (id, node) = nodes[dice.roll(nodes.len() as u64) as usize].clone();
                done.push(format!("node {id}"));
                match control.config().nodes.contains_key(&id) {
                    true => control.handle_change(Vec::new(), vec![id], now),
                    false => control.handle_change(vec![(id, node)], Vec::new(), now),
                }
            }
            11 => {
                let (id, rule) = rules().swap_remove(dice.roll(4) as usize);
                done.push(format!("rule {id}"));
                match control.config().rules.contains_key(&id) {
                    true => control.handle_change(Vec::new(), vec![id], now),
                    false => control.handle_change(vec![(id, rule)], Vec::new(), now),
                }
            }
            12 => control.handle_change(vec![(5, line(1 + dice.roll(4) as u32))], Vec::new(), now),
            _ => {
                let at = format!(
                    "step {step} from seed {seed:#x} after {:?}",
                    &done[done.len().saturating_sub(12)..]
                );
                let most = if dice.roll(8) == 0 { 200 } else { 20 };
                let until = now.plus_secs(1 + dice.roll(most));
                while let Some(t) = control.poll_timeout().filter(|t| *t <= until) {
                    now = t.max(now);
                    timeout_checked(&mut control, (&mut stored, &mut saved), now, &mut decided, &at);
                }
                now = until;
                timeout_checked(&mut control, (&mut stored, &mut saved), now, &mut decided, &at);
            }
        }
        let outputs: Vec<Output> = std::iter::from_fn(|| control.poll_output()).collect();
        store(&mut stored, &outputs);
    }
    // No result grows old enough to expire (the store and the core expire on their own
    // schedules, a minute apart): expiry is `crate::seen`'s test.
    assert!(
        now.millis_since(start) < 3_600_000,
        "seed {seed:#x}: {} s passed",
        now.millis_since(start) / 1000
    );
    decided
}
