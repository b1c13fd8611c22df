//! The event stream: a failover and its recovery read as events in order, each naming what it
//! is about, numbered after the last stored one.

use vantage_control::Output;
use vantage_control::events::{EventKind, FleetEvent, PER_MS};
use vantage_control::{Control, Start, Timing};

use crate::lab::{Lab, T0};

fn events(outputs: &[Output]) -> Vec<FleetEvent> {
    outputs
        .iter()
        .filter_map(|o| match o {
            Output::Events(e) => Some(e.clone()),
            _ => None,
        })
        .flatten()
        .collect()
}

/// `n` rounds of `caller`, 5 s apart, with `failing` refused.
fn rounds(lab: &mut Lab, caller: vantage_control::identity::Caller, failing: &[&str], n: usize) {
    for _ in 0..n {
        lab.advance(5);
        lab.round(caller, failing);
    }
    lab.advance(1);
}

#[test]
fn a_failover_and_its_recovery_read_as_events_in_order() {
    let stored = T0.millis() as u64 * PER_MS + 41;
    let mut lab =
        Lab::with_start(Start { last_event: stored, timing: Timing::default(), ..Start::default() });
    let (p, c, g, n) = lab.one_node();
    lab.node(c, g, "edge-2", &[("203.0.113.20", vantage_core::address::Level::Primary)]);
    rounds(&mut lab, p, &[], 2);
    let start = events(&lab.take());
    assert_eq!(start.first().map(|e| e.id), Some(stored + 1), "numbering continues after the stored events");
    assert!(start.windows(2).all(|w| w[1].id == w[0].id + 1), "one after the other: {start:#?}");
    let online: Vec<&FleetEvent> = start.iter().filter(|e| e.kind == EventKind::ProberOnline).collect();
    assert_eq!(online.len(), 1, "one prober, online once: {start:#?}");
    assert_eq!(online[0].summary, "prober fra (eu) reports: 2 targets");
    assert!(
        !start.iter().any(|e| e.kind == EventKind::AddressFailing || e.kind == EventKind::LevelChanged),
        "the first passes only learn the addresses: {start:#?}"
    );

    rounds(&mut lab, p, &["203.0.113.10"], 12);
    let outage = events(&lab.take());
    let kinds: Vec<EventKind> = outage.iter().map(|e| e.kind).collect();
    let at =
        |k: EventKind| kinds.iter().position(|x| *x == k).unwrap_or_else(|| panic!("no {k:?}: {outage:#?}"));
    assert!(at(EventKind::AddressFailing) < at(EventKind::AddressUnreachable), "{outage:#?}");
    let last = |k: EventKind| kinds.iter().rposition(|x| *x == k).unwrap();
    assert!(at(EventKind::AddressUnreachable) < last(EventKind::Revision), "{outage:#?}");
    let failing = &outage[at(EventKind::AddressFailing)];
    assert_eq!((failing.cluster, failing.node), (Some(c), Some(n)));
    assert!(
        failing.summary.starts_with(
            "203.0.113.10 of edge-1 is failing: 1 of 1 probers see it failing (fra); unreachable in "
        ),
        "{}",
        failing.summary
    );
    assert_eq!(failing.details["probers_failing"], serde_json::json!(["fra"]));
    // The first revision shortens the TTL while the address fails; the last one leaves it out.
    let revision = &outage[last(EventKind::Revision)];
    assert!(revision.summary.contains("203.0.113.10 of edge-1 unreachable"), "{}", revision.summary);
    assert!(revision.summary.ends_with("default: 203.0.113.20 (−203.0.113.10)"), "{}", revision.summary);
    let level = &outage[at(EventKind::LevelChanged)];
    assert_eq!(level.summary, "edge-1 has no address to answer with (was primary)");
    let fired = &outage[at(EventKind::AlertFired)];
    assert_eq!(fired.summary, "alert firing: 203.0.113.10 of edge-1 is unreachable");
    assert_eq!((fired.cluster, fired.node), (Some(c), Some(n)), "the alert's key names the node");

    rounds(&mut lab, p, &[], 16);
    let back = events(&lab.take());
    let kinds: Vec<EventKind> = back.iter().map(|e| e.kind).collect();
    let at =
        |k: EventKind| kinds.iter().position(|x| *x == k).unwrap_or_else(|| panic!("no {k:?}: {back:#?}"));
    assert!(at(EventKind::AddressRecovering) < at(EventKind::AddressReachable), "{back:#?}");
    assert_eq!(back[at(EventKind::AddressReachable)].summary, "203.0.113.10 of edge-1 is reachable again");
    assert!(
        back.iter().any(|e| e.kind == EventKind::Revision
            && e.summary.ends_with("default: 203.0.113.10 203.0.113.20 (+203.0.113.10)")),
        "{back:#?}"
    );
    let resolved = &back[at(EventKind::AlertResolved)];
    assert!(resolved.summary.starts_with("alert resolved after "), "{}", resolved.summary);
    assert!(outage.last().unwrap().id < back[0].id);
}

/// A cluster evaluated before it had nodes: its first node's addresses are news, not the
/// silence of the first pass after a start.
#[test]
fn a_clusters_first_node_is_news() {
    let mut lab = Lab::new();
    let r = lab.region("eu");
    let p = lab.prober("fra", r);
    let c = lab.cluster(crate::lab::CLUSTER);
    let g = lab.group(c, "fra-1", Some(r));
    rounds(&mut lab, p, &[], 1);
    lab.take();
    lab.node(c, g, "edge-1", &[("203.0.113.10", vantage_core::address::Level::Primary)]);
    rounds(&mut lab, p, &[], 2);
    let kinds: Vec<(EventKind, String)> =
        events(&lab.take()).into_iter().map(|e| (e.kind, e.summary)).collect();
    assert!(
        kinds.iter().any(
            |(k, s)| *k == EventKind::AddressUnverified && s.starts_with("203.0.113.10 of edge-1 is new")
        ),
        "{kinds:#?}"
    );
    assert!(kinds.iter().any(|(k, _)| *k == EventKind::AddressVerified), "{kinds:#?}");
}

/// A restart numbers after every id the previous process made, even those it never stored
/// (stopped before the saves task wrote them, or all deleted by retention): nothing stored
/// still starts past them, from the start's own time.
#[test]
fn ids_never_repeat_across_a_restart_even_with_nothing_stored() {
    let mut first = Lab::with_start(Start { timing: Timing::default(), ..Start::default() });
    let (p, _, _, _) = first.one_node();
    rounds(&mut first, p, &[], 2);
    rounds(&mut first, p, &["203.0.113.10"], 12);
    let made = events(&first.take());
    let newest = made.last().map(|e| e.id).unwrap();
    assert!(made.len() > 3 && made[0].id == T0.millis() as u64 * PER_MS + 1, "{made:#?}");
    assert_eq!(first.control.last_event_id(), newest);

    // Restarted a second later with none of them stored.
    let restart = Start { timing: Timing::default(), ..Start::default() };
    let again = Control::new(restart, first.now.plus_millis(1_000));
    assert!(again.last_event_id() > newest, "{} after {newest}", again.last_event_id());

    // A stored id past the start's base (a clock set back) is still continued after.
    let ahead = first.now.millis() as u64 * PER_MS + 5_000_000;
    let restart = Start { last_event: ahead, timing: Timing::default(), ..Start::default() };
    assert_eq!(Control::new(restart, first.now).last_event_id(), ahead);
}

/// A node whose addresses are all out of their levels but still in DNS (a prober now counts
/// and has not checked them yet; the line has nothing better) says so: "no address to answer
/// with" would contradict the answer DNS gives.
#[test]
fn a_node_out_of_its_levels_but_still_answered_says_so() {
    let mut lab = Lab::new();
    let (p, _, _, _) = lab.one_node();
    lab.advance(11);
    let _ = lab.take();
    let _ = lab.control.handle_work(p, lab.now);
    lab.control.handle_report(p, &crate::lab::report_at(lab.now, vec![]), lab.now).unwrap();
    lab.advance(11);
    let level =
        events(&lab.take()).into_iter().find(|e| e.kind == EventKind::LevelChanged).expect("a level change");
    assert_eq!(
        level.summary,
        "edge-1 has no address it may answer with, but DNS still answers 203.0.113.10 (was primary)"
    );
}
