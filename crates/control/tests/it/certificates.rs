//! Certificates the probers saw: the earliest expiry per target, and an alert while it is
//! within the warning window (14 days by default).

use vantage_core::Timestamp;
use vantage_core::result::ProbeResult;

use crate::lab::{Lab, alerts, attempt, report_at};

fn report(lab: &mut Lab, caller: vantage_control::identity::Caller, not_after: Timestamp) {
    let work = lab.control.handle_work(caller, lab.now);
    let results = work
        .targets
        .iter()
        .map(|t| ProbeResult {
            target: t.key.clone(),
            attempts: vec![attempt(true)],
            hls: None,
            cert_not_after: Some(not_after),
            failed_at: None,
        })
        .collect();
    let r = report_at(lab.now, results);
    lab.control.handle_report(caller, &r, lab.now).unwrap();
}

#[test]
fn a_certificate_expiring_within_the_window_alerts_until_it_is_renewed() {
    let mut lab = Lab::new();
    let (p, _, _, n) = lab.one_node();
    let key = format!("certificate_expiring/n{n}/203.0.113.10/80");
    let soon = lab.now.plus_secs(5 * 86_400);
    report(&mut lab, p, soon);
    assert_eq!(
        lab.control.addresses().certificate_expiries().values().copied().collect::<Vec<_>>(),
        vec![soon]
    );
    lab.take();
    lab.advance(60);
    let fired = alerts(&lab.take());
    assert!(fired.contains(&(key.clone(), true)), "{fired:?}");
    let (open, _) = lab.control.alerts().list();
    let a = open.iter().find(|a| a.key == key).unwrap();
    assert!(a.summary.contains("expires in 5 days"), "{}", a.summary);
    // Renewed: 90 days left.
    let renewed = lab.now.plus_secs(90 * 86_400);
    report(&mut lab, p, renewed);
    lab.advance(60);
    assert!(alerts(&lab.take()).contains(&(key, false)));
}
