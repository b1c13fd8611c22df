//! Several replicas (SPEC §8): a follower's core evaluates the fleet it is fed like the lease
//! holder's but decides nothing for it, publishes the holder's revisions, and when it takes the
//! lease continues from where its own timers stand — a failover the old holder began completes
//! on time, under the next revision number.

use vantage_control::identity::Caller;
use vantage_control::{Output, Relayed, Role, Start, StoredRevision};
use vantage_core::address::Level::Primary;
use vantage_core::ids::ClusterId;

use crate::lab::{Lab, ip, revisions};

/// Two nodes in one group, `edge-1` on .10 and `edge-2` on .11, on a core in `role`. Every
/// twin gets the same ids, so one fleet's events can be fed to several.
fn twin(role: Role) -> (Lab, Caller, ClusterId) {
    let mut lab = Lab::with_start(Start { role, ..Start::default() });
    let (p, c, g, _) = lab.one_node();
    lab.node(c, g, "edge-2", &[("203.0.113.11", Primary)]);
    (lab, p, c)
}

/// What the lease holder stored, as a follower reads it back.
fn stored(lab: &Lab, c: ClusterId) -> StoredRevision {
    let p = lab.control.snapshots()[&c].published.clone().expect("a published revision");
    crate::lab::stored_revision(&p)
}

/// A round with every address answering, and its outputs taken.
fn healthy(lab: &mut Lab, p: Caller) {
    lab.round(p, &[]);
    lab.advance(3);
    lab.take();
}

fn leaders_only(o: &Output) -> bool {
    matches!(
        o,
        Output::Revision(_)
            | Output::Alert(_)
            | Output::SaveAlerts(_)
            | Output::Audit(_)
            | Output::SaveState(_)
            | Output::DropState(_)
            | Output::SaveMirrors(_)
            | Output::SaveMonitors(_)
            | Output::Events(_)
            | Output::Upkeep(_)
            | Output::CheckFreshness(_)
            | Output::Publish(_)
    )
}

#[test]
fn a_follower_cuts_nothing_and_publishes_the_lease_holders_revisions() {
    let (mut leader, p, c) = twin(Role::Leader);
    let (mut follower, _, _) = twin(Role::Follower);
    for lab in [&mut leader, &mut follower] {
        lab.round(p, &[]);
        lab.advance(3);
        lab.round(p, &["203.0.113.10"]);
        lab.advance(60);
    }
    let cut = revisions(&leader.take());
    assert!(cut.len() >= 2, "the holder published, then failed over: {cut:?}");
    let out = follower.take();
    assert!(!out.iter().any(leaders_only), "a follower stores and sends nothing: {out:?}");
    assert!(out.iter().any(|o| matches!(o, Output::LiveEvents(_))), "its own streams see its events");
    assert!(follower.control.snapshots().get(&c).and_then(|s| s.published.clone()).is_none());
    // The follower's view of the address is the holder's.
    let status = |lab: &Lab| lab.control.snapshots()[&c].nodes.values().map(|n| n.level).collect::<Vec<_>>();
    assert_eq!(status(&follower), status(&leader));

    follower.control.handle_revision(stored(&leader, c), follower.now);
    assert!(
        follower.take().iter().any(|o| matches!(o, Output::Answers(_))),
        "DNS answers the stored revision"
    );
    let published = follower.control.snapshots()[&c].published.clone().unwrap();
    assert_eq!(u32::try_from(cut.len()).ok(), Some(published.number));
    assert_eq!(
        published.records.lines,
        leader.control.snapshots()[&c].published.clone().unwrap().records.lines
    );
    assert!(!published.records.all.contains(&ip("203.0.113.10")));
    follower.control.handle_revision(stored(&leader, c), follower.now);
    assert!(follower.take().is_empty(), "the same revision again changes nothing");
    let older = StoredRevision { number: published.number - 1, ..stored(&leader, c) };
    follower.control.handle_revision(older, follower.now);
    assert!(follower.take().is_empty(), "an older read that arrives late changes nothing");
    // Its passes go on cutting nothing, the stored records standing.
    follower.advance(30);
    assert_eq!(follower.control.snapshots()[&c].published.clone().unwrap().number, published.number);
    assert!(!follower.take().iter().any(leaders_only));
}

/// The lease holder dies half-way through a failover (the address fails, its hysteresis has
/// not run out): the follower that takes the lease publishes the failover when a replica that
/// never died would have — not sooner (no flip), not later (no timer restarted) — under the
/// number that replica would have given it.
#[test]
fn a_new_lease_holder_completes_the_failover_the_old_one_began_on_time() {
    let dead = ip("203.0.113.10");
    let failed_over = |lab: &Lab, c: ClusterId| {
        lab.control.snapshots()[&c]
            .published
            .clone()
            .filter(|p| !p.records.all.contains(&dead))
            .map(|p| p.number)
    };
    // A replica that never dies: when does it fail over, counted from the first failed round?
    let (mut alone, p, c) = twin(Role::Leader);
    healthy(&mut alone, p);
    let (failover_after, number) = (1..=120)
        .find_map(|s| {
            alone.round(p, &["203.0.113.10"]);
            alone.advance(1);
            failed_over(&alone, c).map(|n| (s, n))
        })
        .expect("a failover within two minutes");
    assert!(failover_after >= 4, "hysteresis takes a few rounds: {failover_after} s");

    let (mut leader, _, _) = twin(Role::Leader);
    let (mut follower, _, _) = twin(Role::Follower);
    healthy(&mut leader, p);
    healthy(&mut follower, p);
    let died = failover_after / 2;
    let mut cut = None;
    for s in 1..=120 {
        if s < died {
            leader.round(p, &["203.0.113.10"]);
            leader.advance(1);
            assert_eq!(failed_over(&leader, c), None, "the holder dies before its failover");
            follower.control.handle_revision(stored(&leader, c), follower.now);
        }
        if s == died {
            follower.control.handle_lease(Role::Leader, 0, follower.now);
        }
        follower.round(p, &["203.0.113.10"]);
        follower.advance(1);
        let out = follower.take();
        if s == died {
            let taken = out.iter().find_map(|o| match o {
                Output::Events(e) => e.iter().find(|e| e.kind.as_str() == "lease_taken").cloned(),
                _ => None,
            });
            let taken = taken.expect("a lease_taken event");
            let pushed: Vec<u32> = out
                .iter()
                .filter_map(|o| match o {
                    Output::Publish(p) => Some(p.number),
                    _ => None,
                })
                .collect();
            assert_eq!(pushed, [stored(&leader, c).number], "the stored revision is pushed again");
            let at = u64::try_from(follower.now.millis()).unwrap() - 1_000;
            assert!(taken.id > at * vantage_control::events::PER_MS, "its event ids follow the old holder's");
        }
        if let Some(n) = failed_over(&follower, c) {
            cut = Some((s, n));
            break;
        }
    }
    assert_eq!(
        cut,
        Some((failover_after, number)),
        "the new holder fails over on time, under the same number"
    );
    assert_eq!(
        follower.control.snapshots()[&c].published.clone().unwrap().records,
        alone.control.snapshots()[&c].published.clone().unwrap().records
    );
}

/// Reports reach a follower through the shared database a moment after the holder took them.
/// Taken at the time the holder took them, they start its failing streak when the holder's
/// started: a follower that takes the lease the moment the holder failed an address over has
/// failed it over too, and never answers the failed address again.
#[test]
fn a_lease_taken_the_moment_after_a_failover_keeps_it_though_the_reports_came_late() {
    const LATE_MS: i64 = 700;
    let dead = ip("203.0.113.10");
    let answers_dead = |lab: &Lab, c: ClusterId| {
        lab.control.snapshots()[&c].published.as_ref().is_some_and(|p| p.records.all.contains(&dead))
    };
    let (mut leader, p, c) = twin(Role::Leader);
    let (mut follower, _, _) = twin(Role::Follower);
    healthy(&mut leader, p);
    healthy(&mut follower, p);
    assert_eq!(leader.now, follower.now, "one clock");
    for _ in 0..120 {
        // The holder takes a round; the follower reads it, relayed, LATE_MS later.
        let (sent, (_, report)) = (leader.now, leader.round_report(p, &["203.0.113.10"]));
        leader.control.handle_report(p, &report, sent).unwrap();
        for step in 1..=10 {
            leader.advance_ms(100);
            follower.advance_ms(100);
            if step * 100 == LATE_MS {
                follower.control.handle_relayed(Relayed::Work { caller: p }, sent, follower.now);
                let report = Relayed::Report { caller: p, report: report.clone() };
                follower.control.handle_relayed(report, sent, follower.now);
                follower.tick();
            }
            if answers_dead(&leader, c) {
                continue;
            }
            // The holder failed the address over within the last 100 ms, and dies.
            follower.control.handle_revision(stored(&leader, c), follower.now);
            assert!(!answers_dead(&follower, c), "the follower publishes the failover");
            follower.control.handle_lease(Role::Leader, 0, follower.now);
            for _ in 0..30 {
                follower.advance_ms(100);
                assert!(!answers_dead(&follower, c), "the new holder answers the failed address again");
            }
            return;
        }
    }
    panic!("the holder never failed over");
}

#[test]
fn a_replica_that_loses_the_lease_drops_what_only_the_holder_does() {
    let (mut lab, p, c) = twin(Role::Leader);
    lab.round(p, &[]);
    lab.advance(3);
    lab.take();
    // A change whose revision is decided but not yet carried out when the lease goes.
    let mut cluster = (*lab.control.config().clusters[&c.0].value).clone();
    cluster.ttl = 60;
    lab.control.handle_change(
        vec![(c.0, vantage_control::config::Object::Cluster(cluster))],
        Vec::new(),
        lab.now,
    );
    lab.control.handle_timeout(lab.now);
    lab.control.handle_lease(Role::Follower, 0, lab.now);
    let out = lab.take();
    assert!(out.contains(&Output::DropUnsaved), "{out:?}");
    assert!(!out.iter().any(leaders_only), "{out:?}");
    assert_eq!(lab.control.role(), Role::Follower);
}

#[test]
fn a_new_lease_holder_holds_a_cut_whose_start_the_old_one_published() {
    let (mut leader, p, c) = twin(Role::Leader);
    let (mut follower, _, _) = twin(Role::Follower);
    healthy(&mut leader, p);
    healthy(&mut follower, p);
    let (a, b) = ("203.0.113.10", "203.0.113.11");
    let records = |lab: &Lab| lab.control.snapshots()[&c].published.clone().map(|p| p.records.all.clone());
    // The prober's way to both edges goes; it notices for .11 one interval after .10. The
    // holder removes .10 (one of two: at the limit, so it goes) and dies.
    for s in 0..120 {
        let failing: &[&str] = if s < 10 { &[a] } else { &[a, b] };
        for lab in [&mut leader, &mut follower] {
            lab.round(p, failing);
            lab.advance(1);
        }
        follower.control.handle_revision(stored(&leader, c), follower.now);
        if records(&leader) == Some(vec![ip(b)]) {
            break;
        }
    }
    assert_eq!(records(&leader), Some(vec![ip(b)]));
    assert_eq!(records(&follower), Some(vec![ip(b)]), "the follower publishes what the holder stored");
    follower.control.handle_lease(Role::Leader, 0, follower.now);
    // .11 goes too, within two intervals of .10: the new holder holds both, as the old one would.
    for _ in 0..20 {
        follower.round(p, &[a, b]);
        follower.advance(1);
    }
    assert_eq!(records(&follower), Some(vec![ip(a), ip(b)]), "held with the records from before the cut");
    let out = follower.take();
    assert!(
        revisions(&out).iter().any(|(_, reason)| reason.contains("held: no healthy address")),
        "{:?}",
        revisions(&out)
    );
}

/// The fleet's figures come from the lease holder alone: a follower that sees the same fleet
/// exports none of it, so a dashboard that sums the replicas counts every address once.
#[test]
fn only_the_lease_holder_exports_the_fleet() {
    let (mut leader, p, _) = twin(Role::Leader);
    let (mut follower, q, _) = twin(Role::Follower);
    healthy(&mut leader, p);
    healthy(&mut follower, q);
    let (lead, follow) = (leader.control.fleet(leader.now), follower.control.fleet(follower.now));
    assert!(
        lead.evaluator && lead.addresses().len() == 2 && !lead.probers.is_empty(),
        "{:?}",
        lead.addresses()
    );
    assert!(!follow.evaluator);
    assert!(
        follow.addresses().is_empty() && follow.nodes().is_empty() && follow.probers.is_empty(),
        "{:?} {:?}",
        follow.addresses(),
        follow.probers
    );
}

/// A line steered by latency answers on a follower in the order the lease holder published
/// with its records (the follower's preview says so), not in one of its own.
#[test]
fn a_follower_takes_the_lease_holders_latency_order_with_its_records() {
    use vantage_control::config::{LineRecord, Object};
    let mut follower = Lab::with_start(Start { role: Role::Follower, ..Start::default() });
    let (p, c, g1, _) = follower.one_node();
    let g2 = follower.group(c, "fra-2", None);
    follower.node(c, g2, "edge-2", &[("203.0.113.11", Primary)]);
    let region = follower.control.config().regions.keys().next().copied().unwrap();
    let line =
        serde_json::json!({"name": "all", "group": g1, "backup_groups": [g2], "latency_region": region});
    let line = LineRecord { cluster: c, line: serde_json::from_value(line).unwrap() };
    let id = vantage_core::ids::LineId(follower.put(Object::Line(line)));
    healthy(&mut follower, p);
    let order = |lab: &Lab| -> Vec<i64> {
        let (_, lines) = lab.control.preview(c, lab.now).unwrap();
        lines[0].latency.as_ref().map(|l| l.groups.iter().map(|g| g.group.0).collect()).unwrap_or_default()
    };
    assert_eq!(order(&follower), [g1.0, g2.0], "its own start: the configured order");
    let mut records = vantage_core::evaluate::Records::default();
    records.lines.insert(id, vec![ip("203.0.113.11")]);
    records.all = vec![ip("203.0.113.11")];
    records.orders.insert(id, vec![g2, g1]);
    let at = follower.now;
    let r = StoredRevision {
        cluster: c,
        number: 5,
        at,
        reason: "stored".into(),
        records,
        held: Default::default(),
    };
    follower.control.handle_revision(r, follower.now);
    assert_eq!(order(&follower), [g2.0, g1.0], "the holder's order, with its records");
}

/// Demand another replica served reaches this core as it travels (JSON through the shared
/// database) and adds to this replica's own: the lease holder, which saves the day and alerts,
/// weighs the audience of every replica.
#[test]
fn demand_another_replica_served_adds_to_this_ones() {
    let (mut holder, _, _) = twin(Role::Leader);
    holder.region("us");
    let relayed = Relayed::Demand { counts: vec![("eu".into(), 7), ("us".into(), 3)] };
    let wire = serde_json::to_string(&relayed).unwrap();
    holder.control.handle_demand(&[("eu".to_owned(), 1)], holder.now);
    holder.control.handle_relayed(serde_json::from_str(&wire).unwrap(), holder.now, holder.now);
    let day = holder.control.monitors().demand(holder.now);
    assert_eq!(day, [("eu".to_owned(), 8), ("us".to_owned(), 3)].into());
}
