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
        Output::SaveAvailability(json) => Some(json.clone()),
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
    let mut rec = lab.control.config().nodes[&a.0].value.clone();
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
            availability: Some(json),
            config: (*lab.control.config()).clone(),
            ..Default::default()
        },
        lab.now,
    );
    let at = again.now;
    let back = again.control.view(at).availability;
    assert_eq!(back.changes(&Tracked::Node(b)), view.availability.changes(&Tracked::Node(b)));
}
