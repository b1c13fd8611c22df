//! Invariants, checked with generated inputs.

use proptest::prelude::*;
use vantage_core::Timestamp;
use vantage_core::address::Level;
use vantage_core::ids::RegionId;
use vantage_core::reachability::{
    AddressHealth, Observation, Observations, ProberView, Reachability, verdict,
};
use vantage_core::rules::{Rule, RuleState, Transition};
use vantage_core::settings::{ProbeSettings, ProbeSettingsInput};

use crate::fleet::{Fleet, T0};

fn settings() -> impl Strategy<Value = ProbeSettings> {
    (5u32..=60, 5u32..=120, 5u32..=120, 1u32..=100).prop_map(|(interval, fbu, abr, loss)| {
        ProbeSettings::parse(ProbeSettingsInput {
            interval_s: interval,
            timeout_ms: 1000,
            failing_before_unreachable_s: fbu,
            answering_before_reachable_s: abr,
            loss_pct: loss,
            ..Default::default()
        })
        .unwrap()
    })
}

proptest! {
    /// A minority of probers can never make an address failing, whatever their loss and
    /// however many ports they report.
    #[test]
    fn a_minority_of_probers_can_never_make_an_address_failing(
        n in 1usize..40,
        ports in 1u32..4,
        seed in any::<u64>(),
        s in settings(),
    ) {
        let probers: Vec<ProberView> = (0..n).map(|i| ProberView { region: RegionId(i as i64), active: true }).collect();
        let minority = (n - 1) / 2; // at most floor((n-1)/2) < n/2
        let mut obs = Vec::new();
        for p in 0..n {
            for port in 0..ports {
                let failing = p < minority;
                let sent = 3;
                // The majority lose less than the loss setting; the minority lose everything.
                let lost = if failing { sent } else { ((seed >> (p % 60)) as u32 + port) % 3 * u32::from(s.loss_pct() == 100) };
                obs.push(Observation { prober: p as u32, sent: sent as u16, lost: lost.min(sent) as u16, rtt_us: None, reported_at: T0, failed_at: None });
            }
        }
        // Ensure the majority really sees it answering: loss below the setting.
        for o in obs.iter_mut().filter(|o| o.prober as usize >= minority) {
            while o.lost > 0 && u32::from(o.lost) * 100 >= s.loss_pct() * u32::from(o.sent) {
                o.lost -= 1;
            }
        }
        let v = verdict(&Observations::new(obs), &probers, &s, T0);
        prop_assert!(!v.is_failing(), "{v:?}");
    }

    /// An address never changes state sooner than its timers allow: unreachable only after
    /// failing without a break for *failing before unreachable*, reachable again only after
    /// answering without a break for *answering before reachable* — counted from the evidence,
    /// and never from before the previous evaluation, which saw otherwise.
    #[test]
    fn an_address_never_changes_state_sooner_than_its_timers_allow(
        s in settings(),
        steps in proptest::collection::vec((1u64..40, any::<bool>(), 0u64..40), 1..200),
    ) {
        // Damping lengthens the wait on purpose; this property is about the base timers.
        let undamped = vantage_core::detection::DetectionSettings::parse(
            vantage_core::detection::DetectionSettingsInput { damping_max_multiplier: 1, ..Default::default() },
        )
        .unwrap();
        let undamped = *undamped.damping();
        let mut h = AddressHealth::default();
        let mut now = T0;
        let mut prev: Option<Timestamp> = None;
        let mut streak: Option<Timestamp> = None;
        for (dt, failing, back) in steps {
            now = now.plus_secs(dt);
            let evidence = now.plus_secs(0).plus_millis(-(back.min(dt) as i64) * 1000);
            let before = h.state;
            let toward = (before == Reachability::Reachable) == failing;
            if toward {
                if streak.is_none() {
                    streak = Some(evidence.max(prev.unwrap_or(Timestamp::EPOCH)));
                }
            } else {
                streak = None;
            }
            if let Some(t) = h.step(failing, evidence, prev, now, &s, &undamped) {
                prop_assert!(toward);
                let wait = match t {
                    Reachability::Unreachable => s.failing_before_unreachable_s(),
                    Reachability::Reachable => s.answering_before_reachable_s(),
                };
                prop_assert!(now.at_least_secs_after(streak.unwrap(), u64::from(wait)), "{t:?} at {now} streak {streak:?}");
                streak = None;
            }
            prev = Some(now);
        }
    }

    /// A rule never recovers before hold-at-least has passed since activation, nor before its
    /// conditions stayed clear for recover-after.
    #[test]
    fn a_rule_never_recovers_before_hold_at_least_has_passed(
        hold in 0u32..600,
        recover in 0u32..600,
        for_s in 0u32..120,
        steps in proptest::collection::vec((1u64..60, proptest::option::of(0.0f64..100.0)), 1..200),
    ) {
        let rule: Rule = serde_json::from_str(&format!(
            r#"{{"name":"r","hold_s":{hold},"recover_s":{recover},"conditions":[{{"metric":"cpu","comparison":">","threshold":50,"for_s":{for_s}}}]}}"#
        )).unwrap();
        let mut st = RuleState::default();
        let mut now = T0;
        let mut activated: Option<Timestamp> = None;
        let mut clear_since: Option<Timestamp> = None;
        for (dt, v) in steps {
            now = now.plus_secs(dt);
            let holds = v.is_some_and(|v| v > 50.0);
            if holds { clear_since = None } else if clear_since.is_none() { clear_since = Some(now) }
            match st.step(&rule, &[v], now) {
                Some(Transition::Activated) => activated = Some(now),
                Some(Transition::Recovered) => {
                    let a = activated.take().unwrap();
                    prop_assert!(now.at_least_secs_after(a, u64::from(hold)));
                    prop_assert!(now.at_least_secs_after(clear_since.unwrap(), u64::from(recover)));
                }
                None => {}
            }
        }
    }

    /// A line's answer is never empty while its cluster has enabled nodes with addresses,
    /// whatever the probers see, whatever rules remove, from the first pass on (with the
    /// all-down policy `hold`, the default); with none enabled it is, for the operator took
    /// every one out.
    #[test]
    fn a_line_answer_is_never_empty_while_the_cluster_has_nodes(
        nodes in proptest::collection::vec((1i64..4, 0usize..3, any::<bool>(), any::<bool>()), 1..8),
        rounds in proptest::collection::vec(proptest::collection::vec((any::<u8>(), 0.0f64..100.0), 8), 1..12),
        mass in 1u32..=100,
    ) {
        let mut f = Fleet::new(3).fast()
            .cluster_json(&format!(r#"{{"name":"c","domain":"cdn.example.net","mass_removal_pct":{mass}}}"#))
            .line(1, 1, &[2], 2)
            .line(2, 2, &[3], 1)
            .line(3, 3, &[], 1)
            .rule(1, r#"{"name":"hot","hold_s":0,"recover_s":0,"conditions":[{"metric":"cpu","comparison":">","threshold":50,"for_s":0}]}"#)
            .rule(2, r#"{"name":"sw","line":1,"action":"backup_groups","hold_s":0,"recover_s":0,"conditions":[{"metric":"cpu","comparison":">","threshold":80,"for_s":0}]}"#);
        for (i, (group, extra, enabled, _)) in nodes.iter().enumerate() {
            let id = i as i64 + 1;
            let mut addrs = vec![(format!("203.0.113.{id}"), Level::Primary)];
            if *extra > 0 { addrs.push((format!("198.51.100.{id}"), Level::Backup1)); }
            if *extra > 1 { addrs.push((format!("192.0.2.{id}"), Level::Backup2)); }
            let refs: Vec<(&str, Level)> = addrs.iter().map(|(a, l)| (a.as_str(), *l)).collect();
            f = f.node(id, *group, &refs);
            f.node_mut(id).enabled = *enabled;
        }
        for round in rounds {
            let addrs: Vec<String> = f.nodes.iter().flat_map(|n| n.addresses.iter().map(|a| a.address.ip.to_string())).collect();
            for (k, a) in addrs.iter().enumerate() {
                let mask = round[k % 8].0;
                let failing: Vec<usize> = (0..3).filter(|p| mask >> p & 1 == 1).collect();
                f.report(a, &failing);
            }
            for (k, id) in (1..=nodes.len() as i64).enumerate() {
                f.metrics(id, round[k % 8].1);
            }
            let e = f.eval();
            let any_enabled = nodes.iter().any(|n| n.2);
            for r in &e.revisions {
                for (line, records) in &r.records.lines {
                    prop_assert_eq!(records.is_empty(), !any_enabled, "line {} after {:?}", line, r.reason);
                }
            }
            f.advance(5);
        }
    }
}
