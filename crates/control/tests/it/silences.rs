//! Silences (SPEC §10): the alerts they match fire and show, but their notifications wait —
//! told when the silence ends while the alert still fires, never told when it resolved first.

use vantage_control::Output;
use vantage_control::alerts::SilenceCreate;
use vantage_control::config::Object;
use vantage_control::events::EventKind;

use crate::lab::{Lab, alerts};

fn silence(lab: &Lab, matchers: &[&str], duration_s: u64) -> Object {
    let ask = SilenceCreate {
        matchers: matchers.iter().map(|m| (*m).to_owned()).collect(),
        duration_s: Some(duration_s),
        ends_at: None,
        comment: "prober fra moves racks".into(),
    };
    Object::Silence(ask.silence("ops", lab.now).unwrap())
}

fn summaries(outputs: &[Output], kind: EventKind) -> Vec<String> {
    outputs
        .iter()
        .filter_map(|o| match o {
            Output::Events(e) => {
                Some(e.iter().filter(|e| e.kind == kind).map(|e| e.summary.clone()).collect::<Vec<_>>())
            }
            _ => None,
        })
        .flatten()
        .collect()
}

#[test]
fn a_silenced_alert_fires_quietly_and_is_told_when_the_silence_ends() {
    let mut lab = Lab::new();
    let r = lab.region("eu");
    let p = lab.prober("fra", r);
    let other = lab.prober("ams", r);
    let s = silence(&lab, &["kind=prober_offline", "prober=fra"], 120);
    let id = lab.put(s);
    lab.take();
    // Both go silent: fra's alert is held, ams's is told.
    lab.advance(40);
    let out = lab.take();
    let told = alerts(&out);
    assert!(told.contains(&(format!("prober_offline/prober:{}", other.id()), true)), "{told:?}");
    assert!(!told.iter().any(|(k, _)| k == &format!("prober_offline/prober:{}", p.id())), "{told:?}");
    let fired = summaries(&out, EventKind::AlertFired);
    assert!(fired.iter().any(|f| f == &format!("alert firing: prober fra is offline (notification held by silence {id})")), "{fired:?}");
    assert!(
        lab.control.alerts().is_open(&format!("prober_offline/prober:{}", p.id())),
        "it fires all the same"
    );

    // The silence ends while fra is still silent: its firing is told then, once.
    lab.advance(90);
    let told = alerts(&lab.take());
    assert_eq!(
        told.iter().filter(|(k, _)| k == &format!("prober_offline/prober:{}", p.id())).count(),
        1,
        "{told:?}"
    );
    lab.advance(30);
    assert!(alerts(&lab.take()).is_empty(), "told once");
    // It resolves: told, as its firing was.
    lab.control.handle_work(p, lab.now);
    lab.advance(10);
    assert!(alerts(&lab.take()).contains(&(format!("prober_offline/prober:{}", p.id()), false)));
}

#[test]
fn an_alert_that_resolves_under_its_silence_is_never_told_and_a_deleted_silence_releases_at_once() {
    let mut lab = Lab::new();
    let r = lab.region("eu");
    let p = lab.prober("fra", r);
    let q = lab.prober("ams", r);
    lab.put(silence(&lab, &["kind=prober_offline", "prober=fra"], 3600));
    let ams = lab.put(silence(&lab, &["prober=ams"], 3600));
    lab.take();
    lab.advance(40);
    assert!(alerts(&lab.take()).is_empty(), "both held");
    lab.control.handle_work(p, lab.now);
    lab.advance(10);
    let out = lab.take();
    assert!(alerts(&out).is_empty(), "nobody heard it fire, nobody hears it resolve");
    let resolved = summaries(&out, EventKind::AlertResolved);
    assert!(
        resolved.iter().any(|r| r.ends_with("(never notified: a silence or a maintenance window held it)")),
        "{resolved:?}"
    );
    // ams's silence is deleted while ams is still silent: told at once.
    lab.delete(ams);
    let told = alerts(&lab.take());
    assert_eq!(told, [(format!("prober_offline/prober:{}", q.id()), true)]);
}
