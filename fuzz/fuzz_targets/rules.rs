//! A scheduling rule with its conditions, as the admin API reads it (`RuleInput` through
//! `vantage_core::from_value`, then `Rule::try_from`) and as the store reads it back
//! (`serde_json` into `Rule`), then driven through its state machine (`RuleState::step`,
//! `preview`, `deadline`) with values and times from the input.
//!
//! The input is the rule's JSON; after a NUL byte come the steps (each: seconds to wait, then
//! a value or none per condition). Checked: no input panics; a rule the API accepts is stored
//! and read back equal; a preview changes nothing and foretells exactly the transition the
//! step then makes; an action in effect has a start; and a state's deadline, when it has one,
//! lies after the evaluation that set it (else the evaluator would be woken in a loop).
#![no_main]

use arbitrary::Unstructured;
use libfuzzer_sys::fuzz_target;
use vantage_core::Timestamp;
use vantage_core::rules::{Outcome, Rule, RuleInput, RuleState, Transition};

fuzz_target!(|data: &[u8]| {
    let (json, steps) = match data.iter().position(|b| *b == 0) {
        Some(at) => (&data[..at], &data[at + 1..]),
        None => (data, &[][..]),
    };
    let Ok(value) = serde_json::from_slice::<serde_json::Value>(json) else { return };
    if !value.is_object() {
        return;
    }
    let Ok(rule) = vantage_core::from_value::<RuleInput>(value).and_then(Rule::try_from) else { return };
    let stored = serde_json::to_string(&rule).expect("a rule encodes");
    let back: Rule = serde_json::from_str(&stored).expect("a stored rule reads back");
    assert_eq!(back, rule, "stored as {stored}");

    let mut u = Unstructured::new(steps);
    let mut state = RuleState::default();
    let mut now = Timestamp::from_secs(1_800_000_000);
    while !u.is_empty() {
        let Ok(wait) = u.arbitrary::<u16>() else { return };
        now = now.plus_secs(u64::from(wait));
        let values: Vec<Option<f64>> =
            rule.conditions.iter().map(|_| u.arbitrary::<Option<f64>>().unwrap_or(None)).collect();
        let before = state.clone();
        let preview = state.preview(&rule, &values, now);
        assert_eq!(state, before, "a preview changed the state");
        let transition = state.step(&rule, &values, now);
        let foretold = match preview.outcome {
            Outcome::ActsAtNextEvaluation => Some(Transition::Activated),
            Outcome::RecoversAtNextEvaluation => Some(Transition::Recovered),
            _ => None,
        };
        assert_eq!(transition, foretold, "preview {preview:?}");
        assert_eq!(state.status.in_effect(), state.activated_at.is_some(), "{state:?}");
        if let Some(deadline) = state.deadline(&rule) {
            assert!(deadline > now, "deadline {deadline} at {now}: {state:?}");
        }
    }
});
