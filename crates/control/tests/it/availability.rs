//! Availability (SPEC §10): each subject's changes of health, from what the passes published,
//! make its reports — the share of time it served (maintenance left out), its incidents — and
//! survive a restart through the saved ledger.

use vantage_control::Output;
use vantage_control::availability::{Health, Tracked};
use vantage_control::config::Object;

use crate::lab::Lab;
use crate::maintenance::two_nodes;

fn saved(outputs: &[Output]) -> Option<String> {
    outputs.iter().rev().find_map(|o| match o {
        Output::SaveAvailability(ledger) => Some(ledger.to_json().expect("a ledger is JSON")),
        _ => None,
    })
}

#[test]
fn a_node_down_for_a_while_makes_its_report_and_a_drain_is_not_counted() {
    let mut lab = Lab::new();
    let (p, c, a, b) = two_nodes(&mut lab);
    // Known from the pass that published it (the ledger follows at its next sweep, with the
    // time the pass says the state began).
    let up_since = lab.now;
    lab.advance(10);
    let view = lab.control.view(lab.now);
    let l = &view.availability;
    assert_eq!(l.changes(&Tracked::Node(b)).last().map(|c| c.health), Some(Health::Up));
    assert_eq!(
        l.changes(&Tracked::Line(c, vantage_core::evaluate::DEFAULT_LINE)).last().map(|c| c.health),
        Some(Health::Up)
    );

    // edge-2 stops answering: unreachable once failing lasts, back once it answers again.
    let mut outputs = Vec::new();
    for _ in 0..6 {
        lab.round(p, &["203.0.113.11"]);
        lab.advance(10);
        outputs.extend(lab.take());
    }
    for _ in 0..6 {
        lab.round(p, &[]);
        lab.advance(10);
        outputs.extend(lab.take());
    }
    // edge-1 is drained for a minute: not counted.
    let mut rec = (*lab.control.config().nodes[&a.0].value).clone();
    rec.node.drained = true;
    lab.replace(a.0, Object::Node(rec.clone()));
    lab.round(p, &[]);
    lab.advance(60);
    rec.node.drained = false;
    lab.replace(a.0, Object::Node(rec));
    lab.round(p, &[]);
    lab.advance(10);
    outputs.extend(lab.take());

    let view = lab.control.view(lab.now);
    let report = view.availability.report(&view.config, &Tracked::Node(b), (Some(99.0), 3, true), lab.now);
    let day = &report.windows[0];
    assert_eq!(day.window, "24h");
    let w = day.times;
    // Unreachable once failing lasted, reachable once answering lasted: within the two minutes.
    assert!(w.down_s >= 10.0 && w.down_s <= 120.0, "{w:?}");
    let counted = w.up_s + w.degraded_s + w.down_s;
    assert!((counted - lab.now.millis_since(up_since) as f64 / 1000.0).abs() < 1.0, "{w:?}");
    assert!(w.availability_pct.unwrap() < 100.0 && w.budget_left_pct.unwrap() < 0.0, "{w:?}");
    assert_eq!(report.incidents.len(), 1, "{report:?}");
    assert!(
        report.incidents[0].end.is_some() && report.incidents[0].cause.contains("unreachable"),
        "{report:?}"
    );
    assert_eq!(report.days.len(), 3);
    let drained = view.availability.report(&view.config, &Tracked::Node(a), (None, 1, true), lab.now);
    let w = drained.windows[0].times;
    assert!(w.maintenance_s >= 60.0 && w.down_s == 0.0, "{w:?}");
    assert_eq!(w.availability_pct, Some(100.0), "the drain is not counted against it");

    // Saved, and read back by a restart: the same report.
    let json = saved(&outputs).expect("the ledger was saved");
    let mut again = Lab::with_start_at(
        vantage_control::Start {
            availability: vantage_control::availability::Ledger::restore(&json).0,
            config: (*lab.control.config()).clone(),
            ..Default::default()
        },
        lab.now,
    );
    let at = again.now;
    let back = again.control.view(at).availability;
    assert_eq!(back.changes(&Tracked::Node(b)), view.availability.changes(&Tracked::Node(b)));
}

/// A change is dated by its publisher only when that is the time of this very state: a drain
/// long after the node's level last changed begins when it is noted. A ledger saved ahead of
/// the clock (another replica's, a clock set back) never dates a change before its last one,
/// nor panics.
#[test]
fn changes_are_dated_by_this_state_never_backwards() {
    let mut lab = Lab::new();
    let (p, _, a, _) = two_nodes(&mut lab);
    lab.advance(10);
    let began = lab.now;
    for _ in 0..30 {
        lab.round(p, &[]);
        lab.advance(10);
    }
    let mut rec = (*lab.control.config().nodes[&a.0].value).clone();
    rec.node.drained = true;
    lab.replace(a.0, Object::Node(rec));
    lab.round(p, &[]);
    lab.advance(10);
    let view = lab.control.view(lab.now);
    let changes = view.availability.changes(&Tracked::Node(a));
    let last = changes.last().unwrap();
    assert_eq!(last.health, Health::Maintenance);
    assert!(
        last.at.millis_since(began) >= 300_000,
        "dated when it was drained, not the level's time: {changes:?}"
    );

    // A ledger whose last change is an hour ahead of this core's clock.
    let ahead = format!(
        r#"{{"subjects":{{"node:{}":[{{"at":"{}","health":"up"}}],"node:1":[{{"at":"{}","health":"sideways"}}]}}}}"#,
        a.0,
        lab.now.plus_secs(3600),
        lab.now
    );
    let (ledger, skipped) = vantage_control::availability::Ledger::restore(&ahead);
    assert!(skipped.is_empty(), "an unknown state reads as unknown: {skipped:?}");
    assert_eq!(ledger.changes(&Tracked::Node(vantage_core::ids::NodeId(1)))[0].health, Health::Unknown);
    let start = vantage_control::Start {
        availability: ledger,
        config: (*lab.control.config()).clone(),
        ..Default::default()
    };
    let mut again = Lab::with_start_at(start, lab.now);
    again.advance(20);
    let at = again.now;
    let view = again.control.view(at);
    let changes = view.availability.changes(&Tracked::Node(a));
    assert!(changes.windows(2).all(|w| w[0].at <= w[1].at), "{changes:?}");
}

/// An address that goes down while its node keeps its level is noted at the next follow: the
/// ledger looks again at a node whose status changed, not only at one whose level moved, and
/// passes over the nodes that stayed as they were.
#[test]
fn a_backup_address_down_is_noted_while_its_node_stays_up() {
    let mut lab = Lab::new();
    let (p, _, a, b) = lab.one_with_a_backup();
    let backup = Tracked::Address(a, "198.51.100.10".parse().unwrap());
    let last = |lab: &mut Lab, t: &Tracked| {
        let now = lab.now;
        lab.control.view(now).availability.changes(t).last().map(|c| c.health)
    };
    for _ in 0..3 {
        lab.round(p, &[]);
        lab.advance(10);
    }
    assert_eq!(last(&mut lab, &backup), Some(Health::Up));
    for _ in 0..8 {
        lab.round(p, &["198.51.100.10"]);
        lab.advance(10);
    }
    assert_eq!(last(&mut lab, &backup), Some(Health::Down), "the backup address is down");
    assert_eq!(last(&mut lab, &Tracked::Node(a)), Some(Health::Up), "its node still serves its primary");
    assert_eq!(last(&mut lab, &Tracked::Node(b)), Some(Health::Up));
    for _ in 0..8 {
        lab.round(p, &[]);
        lab.advance(10);
    }
    assert_eq!(last(&mut lab, &backup), Some(Health::Up), "and up again");
}
