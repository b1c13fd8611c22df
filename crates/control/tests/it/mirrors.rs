//! Mirrors on the virtual clock: the registry's reloads, endpoint targets in the work, the
//! window register of each prober, region majorities, verdicts, check runs and doors.

use vantage_control::Output;
use vantage_control::config::{NamedCheck, Object};
use vantage_control::identity::Caller;
use vantage_control::mirrors::CheckRefused;
use vantage_control::mirrors::book::FreshnessReading;
use vantage_control::mirrors::doors::{NoMirror, Visit};
use vantage_core::check::{Check, CheckInput};
use vantage_core::mirror::{MirrorVerdict, RegionStatus};
use vantage_core::result::{Attempt, ErrorCode, ProbeResult, Stages};
use vantage_core::wire;

use crate::lab::{Lab, alerts, report_at};

fn files(list: &[(&str, &str)]) -> Vec<(String, String)> {
    list.iter().map(|(f, t)| ((*f).to_owned(), (*t).to_owned())).collect()
}

/// Four regions with one prober each (two in `ru1`), and mirrors m1 and m2 for tenant `t`.
fn fleet() -> (Lab, Vec<(&'static str, Caller)>) {
    let mut lab = Lab::new();
    let mut probers = Vec::new();
    for (code, names) in
        [("us1", &["us-a"][..]), ("de1", &["de-a"]), ("ru1", &["ru-a", "ru-b"]), ("cn1", &["cn-a"])]
    {
        let r = lab.region(code);
        for n in names {
            probers.push((code, lab.prober(n, r)));
        }
    }
    let check = Check::parse(CheckInput { interval_s: Some(5), ..CheckInput::default() }).unwrap();
    lab.put(Object::Check(NamedCheck { name: "default".into(), check }));
    lab.control
        .handle_registry(
            &files(&[
                ("tenants.yaml", "- name: t\n"),
                ("m1.example.net.yaml", "host: m1.example.net\ntenants: [t]\n"),
                ("m2.example.net.yaml", "host: m2.example.net\nweight: 3\naddress: 127.0.0.1:8080\n"),
            ]),
            lab.now,
        )
        .unwrap();
    lab.take();
    (lab, probers)
}

fn attempt(outcome: Option<ErrorCode>) -> Attempt {
    match outcome {
        None => Attempt { stages: Stages::ALL, rtt_us: 40_000, error: None },
        Some(e) => Attempt { stages: Stages::empty(), rtt_us: 0, error: Some(e) },
    }
}

/// `caller` fetches its work and reports one attempt for `host` (and a good one for the rest).
fn probe(lab: &mut Lab, caller: Caller, host: &str, outcome: Option<ErrorCode>) -> wire::Work {
    let work = lab.control.handle_work(caller, lab.now);
    let results = work
        .endpoints
        .iter()
        .map(|e| ProbeResult {
            target: e.key.clone(),
            attempts: vec![attempt(if e.key.ends_with(host) { outcome } else { None })],
            hls: None,
            cert_not_after: None,
            failed_at: None,
        })
        .collect();
    let report = report_at(lab.now, results);
    lab.control.handle_report(caller, &report, lab.now).unwrap();
    work
}

fn verdict(lab: &Lab, host: &str) -> MirrorVerdict {
    lab.control.mirrors().book().state(host).map(|s| s.verdict).unwrap_or_default()
}

fn status(lab: &Lab, host: &str, region: &str) -> Option<RegionStatus> {
    lab.control.mirrors().book().state(host)?.regions.get(region).map(|o| o.status)
}

#[test]
fn probers_get_every_mirror_as_an_endpoint_target_with_its_check() {
    let (mut lab, probers) = fleet();
    let work = lab.control.handle_work(probers[0].1, lab.now);
    let urls: Vec<(&str, Option<String>)> =
        work.endpoints.iter().map(|e| (e.url.as_str(), e.address.map(|a| a.to_string()))).collect();
    assert_eq!(
        urls,
        [
            ("https://m1.example.net/.vantage/health", None),
            ("https://m2.example.net/.vantage/health", Some("127.0.0.1:8080".into()))
        ]
    );
    assert_eq!(work.checks[work.endpoints[0].check as usize].interval_s(), 5);
    assert!(!work.check_now);
}

#[test]
fn the_window_register_decides_one_probers_opinion() {
    let (mut lab, probers) = fleet();
    let us = probers[0].1;
    // window 8 / threshold 3 / initial 2: healthy after the first good probe.
    probe(&mut lab, us, "m1.example.net", None);
    assert_eq!(status(&lab, "m1.example.net", "us1"), Some(RegionStatus::Ok));
    // The window's hysteresis: it stays healthy until six failures push the good attempts
    // (one seen, two assumed) below three of the last eight.
    for n in 1..=6 {
        lab.advance(5);
        probe(&mut lab, us, "m1.example.net", Some(ErrorCode::Timeout));
        let expect = if n < 6 { RegionStatus::Ok } else { RegionStatus::Timeout };
        assert_eq!(status(&lab, "m1.example.net", "us1"), Some(expect), "after {n} failures");
    }
}

#[test]
fn a_window_of_60_with_threshold_45_and_initial_43_is_healthy_after_two_good_probes() {
    let (mut lab, probers) = fleet();
    let check = Check::parse(CheckInput {
        window: Some(60),
        threshold: Some(45),
        initial: Some(43),
        ..CheckInput::default()
    })
    .unwrap();
    lab.put(Object::Check(NamedCheck { name: "slow".into(), check }));
    lab.control
        .handle_registry(
            &files(&[
                ("tenants.yaml", "- name: t\n"),
                ("m1.example.net.yaml", "host: m1.example.net\ncheck: slow\n"),
            ]),
            lab.now,
        )
        .unwrap();
    let us = probers[0].1;
    probe(&mut lab, us, "m1.example.net", None);
    assert_eq!(status(&lab, "m1.example.net", "us1"), Some(RegionStatus::Error), "44 of 45: not yet");
    lab.advance(5);
    probe(&mut lab, us, "m1.example.net", None);
    assert_eq!(status(&lab, "m1.example.net", "us1"), Some(RegionStatus::Ok));
}

/// Every region reports once: `outcomes` by region code (absent: good).
fn all_regions(lab: &mut Lab, probers: &[(&str, Caller)], host: &str, outcomes: &[(&str, ErrorCode)]) {
    for (region, caller) in probers {
        let outcome = outcomes.iter().find(|(r, _)| r == region).map(|(_, e)| *e);
        // Enough failures to empty a window of 8 with threshold 3 and initial 2.
        let times = if outcome.is_some() { 8 } else { 1 };
        for _ in 0..times {
            probe(lab, *caller, host, outcome);
        }
    }
}

#[test]
fn verdicts_from_four_regions() {
    let (mut lab, probers) = fleet();
    all_regions(&mut lab, &probers, "m1.example.net", &[]);
    assert_eq!(verdict(&lab, "m1.example.net"), MirrorVerdict::Live);
    all_regions(&mut lab, &probers, "m1.example.net", &[("cn1", ErrorCode::Timeout)]);
    assert_eq!(verdict(&lab, "m1.example.net"), MirrorVerdict::Degraded, "one timeout of four");
    all_regions(
        &mut lab,
        &probers,
        "m1.example.net",
        &[("cn1", ErrorCode::Timeout), ("ru1", ErrorCode::Reset)],
    );
    assert_eq!(status(&lab, "m1.example.net", "ru1"), Some(RegionStatus::Refused));
    assert_eq!(verdict(&lab, "m1.example.net"), MirrorVerdict::Blocked, "two of four");
    let out = lab.take();
    assert!(alerts(&out).contains(&("mirror_blocked/m1.example.net".into(), true)), "{:?}", alerts(&out));
    assert!(
        out.iter().any(|o| matches!(o, Output::Audit(a) if a.iter().any(|e| e.action == "mirror.verdict")))
    );
    let s = lab.control.mirrors().book().state("m1.example.net").unwrap();
    assert!(s.blocked_count > 0 && s.total_checked > s.blocked_count && s.last_check == Some(lab.now));
}

#[test]
fn only_errors_are_unknown_and_a_block_page_is_blocked_inferred() {
    let (mut lab, probers) = fleet();
    let all: Vec<(&str, ErrorCode)> =
        ["us1", "de1", "ru1", "cn1"].iter().map(|r| (*r, ErrorCode::Unreachable)).collect();
    all_regions(&mut lab, &probers, "m1.example.net", &all);
    assert_eq!(verdict(&lab, "m1.example.net"), MirrorVerdict::Unknown);
    all_regions(
        &mut lab,
        &probers,
        "m1.example.net",
        &[("ru1", ErrorCode::Blocked), ("cn1", ErrorCode::Blocked)],
    );
    assert_eq!(status(&lab, "m1.example.net", "cn1"), Some(RegionStatus::BlockedInferred));
    assert_eq!(verdict(&lab, "m1.example.net"), MirrorVerdict::Blocked);
}

#[test]
fn a_region_is_the_strict_majority_of_its_probers() {
    let (mut lab, probers) = fleet();
    let ru: Vec<Caller> = probers.iter().filter(|(r, _)| *r == "ru1").map(|(_, c)| *c).collect();
    probe(&mut lab, ru[0], "m1.example.net", None);
    for _ in 0..8 {
        probe(&mut lab, ru[1], "m1.example.net", Some(ErrorCode::Timeout));
    }
    assert_eq!(
        status(&lab, "m1.example.net", "ru1"),
        Some(RegionStatus::Error),
        "one against one: no majority"
    );
}

#[test]
fn silent_probers_leave_their_regions_inconclusive() {
    let (mut lab, probers) = fleet();
    all_regions(&mut lab, &probers, "m1.example.net", &[]);
    assert_eq!(verdict(&lab, "m1.example.net"), MirrorVerdict::Live);
    // Opinions count for three intervals (at least 30 s); the sweep runs every 10 s.
    lab.advance(25);
    assert_eq!(status(&lab, "m1.example.net", "us1"), Some(RegionStatus::Ok));
    lab.advance(15);
    assert_eq!(status(&lab, "m1.example.net", "us1"), Some(RegionStatus::Error));
    assert_eq!(verdict(&lab, "m1.example.net"), MirrorVerdict::Unknown);
}

#[test]
fn a_broken_file_keeps_the_previous_registry() {
    let (mut lab, _) = fleet();
    let e = lab
        .control
        .handle_registry(
            &files(&[
                ("tenants.yaml", "- name: t\n"),
                ("m1.example.net.yaml", "host: m1.example.net\ntenants: [t]\n"),
                ("m3.example.net.yaml", "host: m3.example.net\nweight: heavy\n"),
            ]),
            lab.now,
        )
        .unwrap_err();
    assert_eq!((e.file.as_str(), e.field.as_str()), ("m3.example.net.yaml", "weight"));
    let c = lab.control.config();
    assert_eq!(c.mirrors.mirrors.keys().collect::<Vec<_>>(), ["m1.example.net", "m2.example.net"]);
    let status = lab.control.mirrors().reload_status();
    assert_eq!(
        (status.failures, status.error.as_ref().map(|e| e.file.as_str())),
        (1, Some("m3.example.net.yaml"))
    );
}

#[test]
fn a_manual_block_is_blocked_whatever_the_probers_see() {
    let (mut lab, probers) = fleet();
    all_regions(&mut lab, &probers, "m1.example.net", &[]);
    lab.control
        .handle_registry(
            &files(&[
                ("tenants.yaml", "- name: t\n"),
                (
                    "m1.example.net.yaml",
                    "host: m1.example.net\ntenants: [t]\nmanual_block: true\nmanual_note: ticket 7\n",
                ),
            ]),
            lab.now,
        )
        .unwrap();
    assert_eq!(verdict(&lab, "m1.example.net"), MirrorVerdict::Blocked);
    let out = lab.take();
    assert!(
        !alerts(&out).iter().any(|(k, firing)| k.starts_with("mirror_blocked") && *firing),
        "an operator's block does not page"
    );
}

#[test]
fn one_check_run_per_minute_told_once_to_each_prober_asked() {
    let (mut lab, probers) = fleet();
    let e = lab.control.handle_check_run(Some(vec!["mars".into()]), lab.now).unwrap_err();
    assert!(matches!(e, CheckRefused::Invalid(ref e) if e.field() == "regions[0]"), "{e:?}");
    lab.control.handle_check_run(Some(vec!["us1".into()]), lab.now).unwrap();
    assert!(lab.control.handle_work(probers[0].1, lab.now).check_now);
    assert!(!lab.control.handle_work(probers[0].1, lab.now).check_now, "once per run");
    assert!(!lab.control.handle_work(probers[1].1, lab.now).check_now, "de1 was not asked");
    lab.advance(59);
    assert_eq!(
        lab.control.handle_check_run(None, lab.now).unwrap_err(),
        CheckRefused::TooSoon { retry_after_s: 1 }
    );
    lab.advance(1);
    lab.control.handle_check_run(None, lab.now).unwrap();
    assert!(lab.control.handle_work(probers[1].1, lab.now).check_now);
}

#[test]
fn reports_may_carry_only_the_mirrors_given_out() {
    let (mut lab, probers) = fleet();
    let caller = probers[0].1;
    let report = |target: &str| {
        report_at(
            lab.now,
            vec![ProbeResult {
                target: target.into(),
                attempts: vec![attempt(None)],
                hls: None,
                cert_not_after: None,
                failed_at: None,
            }],
        )
    };
    let e = lab.control.handle_report(caller, &report("m/m1.example.net"), lab.now).unwrap_err();
    assert_eq!(e.field(), "results[0].target", "work first");
    lab.control.handle_work(caller, lab.now);
    assert!(lab.control.handle_report(caller, &report("m/m1.example.net"), lab.now).is_ok());
    assert!(lab.control.handle_report(caller, &report("m/nope.example.net"), lab.now).is_err());
}

#[test]
fn doors_choose_by_weight_among_the_live() {
    let (mut lab, probers) = fleet();
    all_regions(&mut lab, &probers, "m1.example.net", &[]);
    let doors = lab.control.doors();
    let v = Visit { tenant: Some("t".into()), ..Visit::default() };
    // m2 serves every tenant but has no verdict yet (its probes were good only in the rounds
    // of m1's reports, which report every endpoint).
    let mut counts = std::collections::BTreeMap::new();
    for roll in 0..10_000u64 {
        let m = doors.choose(&v, roll.wrapping_mul(0x9e37_79b9_7f4a_7c15)).unwrap();
        *counts.entry(m.host.clone()).or_insert(0u32) += 1;
    }
    let m1 = f64::from(counts["m1.example.net"]) / 10_000.0;
    assert!((m1 - 0.25).abs() < 0.02, "weights 1 and 3: {counts:?}");
    assert_eq!(
        doors.choose(&Visit { tenant: Some("other".into()), ..Visit::default() }, 1),
        Err(NoMirror::UnknownTenant)
    );
}

#[test]
fn a_mirror_behind_its_reference_leaves_the_doors_until_a_fresh_check() {
    let (mut lab, probers) = fleet();
    let fresh = "host: m1.example.net\ntenants: [t]\naddress: 127.0.0.1:8081\nfreshness: {path: /trace, reference: 'http://ref.example.net/trace', max_lag_s: 600, interval_s: 30}\n";
    lab.control
        .handle_registry(&files(&[("tenants.yaml", "- name: t\n"), ("m1.example.net.yaml", fresh)]), lab.now)
        .unwrap();
    all_regions(&mut lab, &probers, "m1.example.net", &[]);
    lab.tick();
    let checks: Vec<_> = lab
        .take()
        .into_iter()
        .filter_map(|o| match o {
            Output::CheckFreshness(c) => Some(c),
            _ => None,
        })
        .flatten()
        .collect();
    assert_eq!(checks.len(), 1, "due at once");
    assert_eq!(
        (checks[0].url.as_str(), checks[0].reference.as_str()),
        ("https://m1.example.net:8081/trace", "http://ref.example.net/trace")
    );
    let v = Visit { tenant: Some("t".into()), ..Visit::default() };
    assert!(lab.control.doors().choose(&v, 0).is_ok(), "unknown freshness is not stale");
    let read = |now: vantage_core::Timestamp, mirror_age_s: i64| FreshnessReading {
        mirror: Ok(now.plus_millis(-mirror_age_s * 1000)),
        reference: Ok(now),
    };
    let week = read(lab.now, 7 * 86_400);
    lab.control.handle_freshness("m1.example.net", week, lab.now);
    assert_eq!(lab.control.doors().choose(&v, 0), Err(NoMirror::NoneEligible), "stale leaves rotation");
    assert!(alerts(&lab.take()).contains(&("mirror_stale/m1.example.net".into(), true)));
    // A failed read changes nothing; the next due check finds it fresh again.
    let failed = FreshnessReading { mirror: Err("timed out".into()), reference: Ok(lab.now) };
    lab.control.handle_freshness("m1.example.net", failed, lab.now);
    assert!(lab.control.doors().choose(&v, 0).is_err());
    lab.advance(30);
    assert!(
        lab.take().iter().any(|o| matches!(o, Output::CheckFreshness(c) if c.len() == 1)),
        "every interval"
    );
    let synced = read(lab.now, 60);
    lab.control.handle_freshness("m1.example.net", synced, lab.now);
    assert!(lab.control.doors().choose(&v, 0).is_ok());
    let f = lab.control.mirrors().book().state("m1.example.net").unwrap().freshness.clone().unwrap();
    assert_eq!((f.lag_s, f.stale, f.error), (Some(60), false, None));
}

/// The start of a server over what `lab` saved: the store's configuration (without the
/// registry, which lives in files), the files, and the mirrors' saved state.
fn restart(lab: &Lab, files: Vec<(String, String)>) -> Lab {
    let mut config = vantage_control::config::Config::clone(&lab.control.config());
    config.mirrors = Default::default();
    Lab::with_start(vantage_control::Start {
        config,
        mirror_files: files,
        mirror_states: Some(lab.control.mirrors().book().save()),
        ..Default::default()
    })
}

fn registry_files() -> Vec<(String, String)> {
    files(&[
        ("tenants.yaml", "- name: t\n"),
        ("m1.example.net.yaml", "host: m1.example.net\ntenants: [t]\n"),
        ("m2.example.net.yaml", "host: m2.example.net\nweight: 3\naddress: 127.0.0.1:8080\n"),
    ])
}

#[test]
fn a_restart_keeps_the_saved_verdicts_until_the_probers_report() {
    let (mut lab, probers) = fleet();
    all_regions(&mut lab, &probers, "m1.example.net", &[]);
    let mut after = restart(&lab, registry_files());
    after.tick();
    assert_eq!(verdict(&after, "m1.example.net"), MirrorVerdict::Live, "saved regions serve at once");
    let v = Visit { tenant: Some("t".into()), ..Visit::default() };
    assert!(after.control.doors().choose(&v, 0).is_ok(), "the doors are not emptied by a restart");
    after.advance(45);
    assert_eq!(verdict(&after, "m1.example.net"), MirrorVerdict::Unknown, "until the news is old");
}

#[test]
fn a_registry_broken_at_start_keeps_the_saved_states_for_when_it_loads() {
    let (mut lab, probers) = fleet();
    all_regions(&mut lab, &probers, "m1.example.net", &[]);
    let broken = files(&[
        ("tenants.yaml", "- name: t\n"),
        ("m1.example.net.yaml", "host: m1.example.net\nweight: x\n"),
    ]);
    let mut after = restart(&lab, broken);
    assert!(after.control.mirrors().reload_status().error.is_some());
    assert!(after.control.config().mirrors.mirrors.is_empty());
    after.region("new-region");
    after.tick();
    assert!(after.control.mirrors().book().state("m1.example.net").is_some(), "a change does not drop them");
    after.control.handle_registry(&registry_files(), after.now).unwrap();
    assert_eq!(verdict(&after, "m1.example.net"), MirrorVerdict::Live);
}

#[test]
fn a_check_a_mirror_names_keeps_its_name() {
    use vantage_control::invariants::Invariants;
    let (mut lab, _) = fleet();
    let check = Check::parse(CheckInput::default()).unwrap();
    let id = lab.put(Object::Check(NamedCheck { name: "slow".into(), check: check.clone() }));
    lab.control
        .handle_registry(
            &files(&[
                ("tenants.yaml", "- name: t\n"),
                ("m1.example.net.yaml", "host: m1.example.net\ncheck: slow\n"),
            ]),
            lab.now,
        )
        .unwrap();
    let c = lab.control.config();
    let renamed = NamedCheck { name: "fast".into(), check: check.clone() };
    assert!(renamed.check(id, &c).is_err(), "the mirror would lose its check");
    assert!(NamedCheck { name: "SLOW".into(), check }.check(id, &c).is_ok(), "names compare without case");
}

#[test]
fn a_mirror_without_a_check_is_probed_at_its_root_over_the_doors_scheme_and_any_answer_counts() {
    let mut lab = Lab::new();
    let r = lab.region("us1");
    let us = lab.prober("us-a", r);
    lab.control
        .handle_registry(&files(&[("m1.example.net.yaml", "host: m1.example.net\n")]), lab.now)
        .unwrap();
    let work = lab.control.handle_work(us, lab.now);
    let e = &work.endpoints[0];
    assert_eq!((e.url.as_str(), e.any_status), ("https://m1.example.net/", true));
    let plain = vantage_core::mirror::MirrorSettingsInput {
        scheme: vantage_core::mirror::Scheme::Http,
        ..Default::default()
    };
    lab.put(Object::MirrorSettings(vantage_core::mirror::MirrorSettings::parse(plain).unwrap()));
    let work = lab.control.handle_work(us, lab.now);
    assert_eq!(work.endpoints[0].url, "http://m1.example.net/", "visitors are sent over http");
    // A check named `default` applies to the mirrors that name none, its path and method too.
    let check = Check::parse(CheckInput {
        method: Some(vantage_core::check::Method::Https),
        path: Some("/health".into()),
        ..CheckInput::default()
    })
    .unwrap();
    lab.put(Object::Check(NamedCheck { name: "default".into(), check }));
    let work = lab.control.handle_work(us, lab.now);
    assert_eq!(work.endpoints[0].url, "https://m1.example.net/health");
}

#[test]
fn doors_fall_back_to_degraded_mirrors_only_for_a_tenant_that_opted_in() {
    let (mut lab, probers) = fleet();
    // m2 is live, for tenant u only.
    let registry = |tenants: &str| {
        files(&[
            ("tenants.yaml", tenants),
            ("m1.example.net.yaml", "host: m1.example.net\ntenants: [t]\n"),
            ("m2.example.net.yaml", "host: m2.example.net\ntenants: [u]\n"),
        ])
    };
    lab.control.handle_registry(&registry("- name: t\n- name: u\n"), lab.now).unwrap();
    all_regions(&mut lab, &probers, "m1.example.net", &[("cn1", ErrorCode::Timeout)]);
    assert_eq!(verdict(&lab, "m1.example.net"), MirrorVerdict::Degraded);
    assert_eq!(verdict(&lab, "m2.example.net"), MirrorVerdict::Live);
    let v = Visit { tenant: Some("t".into()), ..Visit::default() };
    assert_eq!(lab.control.doors().choose(&v, 0), Err(NoMirror::NoneEligible), "live mirrors only");
    let opted = registry("- name: t\n  fallback_to_degraded: true\n- name: u\n");
    lab.control.handle_registry(&opted, lab.now).unwrap();
    assert_eq!(lab.control.doors().choose(&v, 0).map(|m| m.host.as_str()), Ok("m1.example.net"));
    let from_cn = Visit { exclude_regions: vec!["cn1".into()], ..v.clone() };
    assert_eq!(lab.control.doors().choose(&from_cn, 0), Err(NoMirror::NoneEligible), "never where it fails");
    let any = Visit::default();
    assert_eq!(
        lab.control.doors().choose(&any, 0).map(|m| m.host.as_str()),
        Ok("m2.example.net"),
        "no tenant, no opt-in: the live one"
    );
}

#[test]
fn regions_failing_counts_every_region_whose_status_is_not_ok() {
    let (mut lab, probers) = fleet();
    all_regions(&mut lab, &probers, "m1.example.net", &[("cn1", ErrorCode::Unreachable)]);
    let s = lab.control.mirrors().book().state("m1.example.net").unwrap();
    assert_eq!(status(&lab, "m1.example.net", "cn1"), Some(RegionStatus::Error));
    assert_eq!((s.verdict, s.regions_failing()), (MirrorVerdict::Live, 1), "error is not ok");
    all_regions(
        &mut lab,
        &probers,
        "m1.example.net",
        &[("cn1", ErrorCode::Unreachable), ("de1", ErrorCode::Timeout)],
    );
    let s = lab.control.mirrors().book().state("m1.example.net").unwrap();
    assert_eq!((s.verdict, s.regions_failing()), (MirrorVerdict::Degraded, 2));
}

/// A maintenance window takes its mirror out of the doors' rotation while it is open (the
/// host named in any case), and puts it back when it closes.
#[test]
fn a_mirror_in_maintenance_leaves_the_doors_while_its_window_is_open() {
    let (mut lab, probers) = fleet();
    all_regions(&mut lab, &probers, "m1.example.net", &[]);
    let v = Visit { tenant: Some("t".into()), ..Visit::default() };
    // Whether any of 100 visits goes to m1.
    let m1 = |lab: &Lab| {
        let doors = lab.control.doors();
        (0..100u64).any(|r| {
            doors.choose(&v, r.wrapping_mul(0x9e37_79b9_7f4a_7c15)).is_ok_and(|m| m.host == "m1.example.net")
        })
    };
    assert!(m1(&lab));
    let ask = vantage_control::maintenance::MaintenanceCreate {
        name: "disk swap".into(),
        starts_at: Some(lab.now.plus_secs(10)),
        duration_s: Some(60),
        ends_at: None,
        nodes: Vec::new(),
        groups: Vec::new(),
        mirrors: vec!["M1.Example.NET".into()],
        monitors: Vec::new(),
        comment: String::new(),
    };
    lab.put(Object::Maintenance(ask.maintenance("ops", lab.now).unwrap()));
    assert!(m1(&lab), "not open yet");
    lab.advance(10);
    assert!(!m1(&lab), "out of rotation while open");
    assert!(lab.control.doors().choose(&v, 0).is_ok(), "the other mirror still serves");
    lab.advance(60);
    // The probers kept probing it all along.
    all_regions(&mut lab, &probers, "m1.example.net", &[]);
    assert!(m1(&lab), "back when it closes");
}
