//! The fleet's figures for `/metrics` are the ones DNS and the API use.

use std::collections::BTreeMap;
use std::sync::Arc;

use vantage_control::fleet::ProbePlace;
use vantage_core::address::Level;

use crate::lab::Lab;

#[test]
fn figures_follow_the_last_pass() {
    let mut lab = Lab::new();
    let (p, _, _, _) = lab.one_node();
    lab.round(p, &["203.0.113.10"]);
    lab.tick();
    let f = lab.control.fleet(lab.now);
    assert_eq!(f.addresses().len(), 1);
    let a = &f.addresses()[0];
    assert_eq!((a.node.as_str(), a.address.as_str(), a.level), ("edge-1", "203.0.113.10", Level::Primary));
    assert_eq!((a.failing, a.counting), (1, 1), "failing now");
    assert!(a.reachable, "not yet unreachable: failing-before-unreachable has not run out");
    assert_eq!(f.lines(), vec![("video".to_owned(), "default".to_owned(), 1, false)]);
    assert_eq!(f.probers.len(), 1);
    assert!(f.probers[0].online);
    assert_eq!(f.probers[0].last_seen_age_s, Some(0.0));
    lab.advance(60);
    lab.round(p, &["203.0.113.10"]);
    lab.tick();
    let f = lab.control.fleet(lab.now);
    assert!(!f.addresses()[0].reachable);
    assert_eq!(f.nodes()[0].2, None, "no address left: the node has no level");
    assert_eq!(f.alerts_firing.get("address_unreachable"), Some(&1));
}

#[test]
fn loss_counts_by_cluster_and_region_and_the_lag_is_how_long_reports_wait_for_their_pass() {
    let mut lab = Lab::new();
    let (p, _, _, _) = lab.one_node();
    let place = ProbePlace { cluster: "video".into(), region: "eu".into() };
    // The first report is evaluated at once.
    lab.round(p, &[]);
    lab.tick();
    let f = lab.control.fleet(lab.now);
    assert_eq!(f.probe_loss, BTreeMap::from([(place.clone(), 0.0)]));
    assert_eq!(f.evaluation_lag, [("video".to_owned(), 0.0)]);
    // The next one waits for the report spacing (2 s after the last pass); while it waits the
    // lag grows, and the pass that uses it says how long it waited.
    lab.advance_ms(500);
    lab.round(p, &["203.0.113.10"]);
    let passes = lab.control.passes();
    lab.advance_ms(1000);
    assert_eq!(lab.control.passes(), passes, "not due yet");
    assert_eq!(lab.control.fleet(lab.now).evaluation_lag, [("video".to_owned(), 1.0)]);
    lab.advance_ms(1000);
    assert_eq!(lab.control.passes(), passes + 1);
    let f = lab.control.fleet(lab.now);
    assert_eq!(f.evaluation_lag, [("video".to_owned(), 1.5)]);
    assert_eq!(f.probe_loss, BTreeMap::from([(place, 1.0)]), "every attempt refused");
    // Results that no longer count leave the loss; the lag stays that of the last report.
    lab.advance(60);
    let f = lab.control.fleet(lab.now);
    assert!(f.probe_loss.is_empty(), "{:?}", f.probe_loss);
    assert_eq!(f.evaluation_lag, [("video".to_owned(), 1.5)]);
}

/// Figures made again within a second of the probe rates — after a change and its pass —
/// share them (a walk of every target of the fleet, sorted); a second on they are made again.
#[test]
fn probe_rates_are_made_at_most_once_a_second() {
    let mut lab = Lab::new();
    let (p, c, g, _) = lab.one_node();
    lab.round(p, &[]);
    lab.tick();
    let first = lab.control.view(lab.now).figures;
    assert_eq!(first.fleet.probe_rates.len(), 1, "one address:port probed");
    lab.advance_ms(300);
    lab.node(c, g, "edge-2", &[("203.0.113.11", Level::Primary)]);
    lab.tick();
    let changed = lab.control.view(lab.now).figures;
    assert!(changed.passes > first.passes, "figures made again after the change's pass");
    assert!(Arc::ptr_eq(&first.fleet.probe_rates, &changed.fleet.probe_rates), "the same rates");
    lab.advance_ms(1000);
    let later = lab.control.view(lab.now).figures;
    assert!(!Arc::ptr_eq(&first.fleet.probe_rates, &later.fleet.probe_rates), "a second on");
    assert_eq!(*later.fleet.probe_rates, lab.control.probe_rates(lab.now));
}
