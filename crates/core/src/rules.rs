//! Scheduling rules (§5.4): definitions with every range, the per-(rule, node) state machine
//! (idle → pending → active → recovering → idle) and the preview.

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result, in_range, name};
use crate::ids::{LineId, RegionId};
use crate::time::Timestamp;

/// A metric a condition compares.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum Metric {
    /// Whole-host CPU usage, %.
    Cpu,
    /// 1-minute load average.
    Load1,
    /// Memory used / total, %.
    Memory,
    /// Egress rate of the non-loopback interfaces, Mbit/s.
    EgressMbps,
    /// Active connections.
    Connections,
    /// Each prober's share of lost attempts over the node's lowest-level addresses, %.
    ProbeLoss,
    /// Each prober's mean of its median RTTs over those addresses, ms.
    ProbeLatencyMs,
}

impl Metric {
    /// True for the metrics measured by probers (which take an aggregate and a region).
    pub fn is_probe(self) -> bool {
        matches!(self, Metric::ProbeLoss | Metric::ProbeLatencyMs)
    }

    /// The API name.
    pub fn as_str(self) -> &'static str {
        match self {
            Metric::Cpu => "cpu",
            Metric::Load1 => "load1",
            Metric::Memory => "memory",
            Metric::EgressMbps => "egress_mbps",
            Metric::Connections => "connections",
            Metric::ProbeLoss => "probe_loss",
            Metric::ProbeLatencyMs => "probe_latency_ms",
        }
    }
}

/// How a value is compared with the threshold.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(utoipa::ToSchema))]
pub enum Comparison {
    /// `>`
    #[serde(rename = ">")]
    Gt,
    /// `>=`
    #[serde(rename = ">=")]
    Ge,
    /// `<`
    #[serde(rename = "<")]
    Lt,
    /// `<=`
    #[serde(rename = "<=")]
    Le,
}

impl Comparison {
    /// Whether `value` compares true against `threshold`.
    pub fn holds(self, value: f64, threshold: f64) -> bool {
        match self {
            Comparison::Gt => value > threshold,
            Comparison::Ge => value >= threshold,
            Comparison::Lt => value < threshold,
            Comparison::Le => value <= threshold,
        }
    }

    /// The operator symbol.
    pub fn as_str(self) -> &'static str {
        match self {
            Comparison::Gt => ">",
            Comparison::Ge => ">=",
            Comparison::Lt => "<",
            Comparison::Le => "<=",
        }
    }
}

/// How the probers' values of a probe metric combine.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum Aggregate {
    /// Mean.
    #[default]
    Avg,
    /// Maximum.
    Max,
    /// Minimum.
    Min,
}

impl Aggregate {
    /// Combines `values`; `None` when there are none.
    pub fn combine(self, values: impl Iterator<Item = f64>) -> Option<f64> {
        let mut n = 0usize;
        let mut acc = match self {
            Aggregate::Avg => 0.0,
            Aggregate::Max => f64::NEG_INFINITY,
            Aggregate::Min => f64::INFINITY,
        };
        for v in values {
            n += 1;
            acc = match self {
                Aggregate::Avg => acc + v,
                Aggregate::Max => acc.max(v),
                Aggregate::Min => acc.min(v),
            };
        }
        match (n, self) {
            (0, _) => None,
            (n, Aggregate::Avg) => Some(acc / n as f64),
            _ => Some(acc),
        }
    }
}

/// What an active rule does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum Action {
    /// The node leaves the records of the rule's line (every line for all lines).
    #[default]
    RemoveNode,
    /// The line answers with its first backup group that has the minimum of healthy addresses.
    BackupGroups,
    /// The node uses at least its backup1 addresses.
    BackupIp,
}

impl Action {
    /// Words used in revision reasons.
    pub fn describe(self) -> &'static str {
        match self {
            Action::RemoveNode => "remove the node",
            Action::BackupGroups => "switch to backup groups",
            Action::BackupIp => "switch to backup IP",
        }
    }
}

impl fmt::Display for Action {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.describe())
    }
}

/// AND or OR between conditions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum MatchMode {
    /// Every condition.
    #[default]
    All,
    /// Any condition.
    Any,
}

impl MatchMode {
    /// Combines per-condition truths.
    pub fn combine(self, mut it: impl Iterator<Item = bool>) -> bool {
        match self {
            MatchMode::All => it.all(|b| b),
            MatchMode::Any => it.any(|b| b),
        }
    }
}

/// One validated condition.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "ConditionInput", into = "ConditionInput")]
#[non_exhaustive]
pub struct Condition {
    pub metric: Metric,
    pub comparison: Comparison,
    /// Threshold in the metric's unit (0–10¹²).
    pub threshold: f64,
    /// How long the comparison must hold before the condition counts, s (0–3600).
    pub for_s: u32,
    /// Probe metrics: how probers combine.
    pub aggregate: Aggregate,
    /// Probe metrics: only probers of this region (`None`: all regions).
    pub region: Option<RegionId>,
}

/// A condition as entered; absent fields take the defaults of a new condition
/// (cpu > 90 for 60 s, average over all regions).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(utoipa::ToSchema))]
#[serde(default, deny_unknown_fields)]
pub struct ConditionInput {
    pub metric: Metric,
    pub comparison: Comparison,
    pub threshold: f64,
    /// For, s.
    pub for_s: u32,
    /// Aggregate (probe metrics).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub aggregate: Option<Aggregate>,
    /// Region (probe metrics).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub region: Option<RegionId>,
}

impl Default for ConditionInput {
    fn default() -> Self {
        ConditionInput {
            metric: Metric::Cpu,
            comparison: Comparison::Gt,
            threshold: 90.0,
            for_s: 60,
            aggregate: None,
            region: None,
        }
    }
}

impl From<Condition> for ConditionInput {
    fn from(c: Condition) -> Self {
        let probe = c.metric.is_probe();
        ConditionInput {
            metric: c.metric,
            comparison: c.comparison,
            threshold: c.threshold,
            for_s: c.for_s,
            aggregate: probe.then_some(c.aggregate),
            region: if probe { c.region } else { None },
        }
    }
}

impl TryFrom<ConditionInput> for Condition {
    type Error = Error;
    fn try_from(i: ConditionInput) -> Result<Self> {
        if !i.threshold.is_finite() || !(0.0..=1e12).contains(&i.threshold) {
            return Err(Error::invalid(
                "threshold",
                format!("must be between 0 and 1000000000000, got {}", i.threshold),
            ));
        }
        let for_s = in_range("for_s", i.for_s, 0, 3600)?;
        if !i.metric.is_probe() {
            if i.aggregate.is_some() {
                return Err(Error::invalid(
                    "aggregate",
                    format!("applies to probe metrics only, not {}", i.metric.as_str()),
                ));
            }
            if i.region.is_some() {
                return Err(Error::invalid(
                    "region",
                    format!("applies to probe metrics only, not {}", i.metric.as_str()),
                ));
            }
        }
        Ok(Condition {
            metric: i.metric,
            comparison: i.comparison,
            threshold: i.threshold,
            for_s,
            aggregate: i.aggregate.unwrap_or_default(),
            region: i.region,
        })
    }
}

/// A validated scheduling rule.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(utoipa::ToSchema))]
#[serde(try_from = "RuleInput")]
#[non_exhaustive]
pub struct Rule {
    /// Name (1–100 characters).
    pub name: String,
    /// The line it applies to; `None` = all lines.
    pub line: Option<LineId>,
    pub action: Action,
    /// AND / OR.
    #[serde(rename = "match")]
    pub match_mode: MatchMode,
    /// Shortest time an action stays in effect, s (0–86400, 300).
    pub hold_s: u32,
    /// How long the conditions stay clear before recovery, s (0–86400, 300).
    pub recover_s: u32,
    /// Disabled rules are not evaluated.
    pub enabled: bool,
    /// 1–8 conditions.
    pub conditions: Vec<Condition>,
}

/// A rule as entered.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(utoipa::ToSchema))]
#[serde(default, deny_unknown_fields)]
pub struct RuleInput {
    pub name: String,
    /// Line (`None`: all lines).
    pub line: Option<LineId>,
    pub action: Action,
    #[serde(rename = "match")]
    pub match_mode: MatchMode,
    /// Hold at least, s.
    pub hold_s: u32,
    /// Recover after, s.
    pub recover_s: u32,
    pub enabled: bool,
    pub conditions: Vec<ConditionInput>,
}

impl Default for RuleInput {
    fn default() -> Self {
        RuleInput {
            name: String::new(),
            line: None,
            action: Action::RemoveNode,
            match_mode: MatchMode::All,
            hold_s: 300,
            recover_s: 300,
            enabled: true,
            conditions: Vec::new(),
        }
    }
}

/// The message for an action that needs a line the cluster does not have.
pub const NEEDS_LINE: &str = "The rule needs a line of the cluster's DNS binding";

impl TryFrom<RuleInput> for Rule {
    type Error = Error;
    fn try_from(i: RuleInput) -> Result<Self> {
        let name = name("name", &i.name, 100)?;
        if i.action == Action::BackupGroups && i.line.is_none() {
            return Err(Error::invalid("line", NEEDS_LINE));
        }
        let hold_s = in_range("hold_s", i.hold_s, 0, 86_400)?;
        let recover_s = in_range("recover_s", i.recover_s, 0, 86_400)?;
        if i.conditions.is_empty() || i.conditions.len() > 8 {
            return Err(Error::invalid(
                "conditions",
                format!("1 to 8 conditions, got {}", i.conditions.len()),
            ));
        }
        let conditions = i
            .conditions
            .into_iter()
            .enumerate()
            .map(|(n, c)| Condition::try_from(c).map_err(|e| e.within(&format!("conditions[{n}]"))))
            .collect::<Result<Vec<_>>>()?;
        Ok(Rule {
            name,
            line: i.line,
            action: i.action,
            match_mode: i.match_mode,
            hold_s,
            recover_s,
            enabled: i.enabled,
            conditions,
        })
    }
}

impl Rule {
    /// Checks the rule against its cluster: its line must be one of `lines`.
    pub fn check_line(&self, lines: &[LineId]) -> Result<()> {
        match self.line {
            Some(l) if !lines.contains(&l) => Err(Error::invalid("line", NEEDS_LINE)),
            _ => Ok(()),
        }
    }

    /// The part of the rule whose change ends its actions at once: line, match, action and
    /// conditions (not the name, hold or recover time).
    pub fn behaviour(&self) -> Behaviour {
        Behaviour {
            line: self.line,
            action: self.action,
            match_mode: self.match_mode,
            conditions: self.conditions.clone(),
        }
    }
}

/// What makes a rule act. Two rules with equal behaviour act alike.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Behaviour {
    line: Option<LineId>,
    action: Action,
    match_mode: MatchMode,
    conditions: Vec<Condition>,
}

/// State of one rule for one node.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum Status {
    /// The comparisons do not hold.
    #[default]
    Idle,
    /// The comparisons hold, but not yet for their for-time.
    Pending,
    /// The action is in effect.
    Active,
    /// The comparisons no longer hold; waiting to recover.
    Recovering,
}

impl Status {
    /// True while the action is in effect.
    pub fn in_effect(self) -> bool {
        matches!(self, Status::Active | Status::Recovering)
    }
}

/// What one step did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transition {
    /// The action started.
    Activated,
    /// The action ended.
    Recovered,
}

/// The state of one rule for one node.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct RuleState {
    /// Current status.
    pub status: Status,
    /// Per condition: since when its comparison has held without a break.
    pub held_since: Vec<Option<Timestamp>>,
    /// When the action started.
    pub activated_at: Option<Timestamp>,
    /// While recovering: since when the comparisons have been clear.
    pub clear_since: Option<Timestamp>,
}

impl RuleState {
    /// Feeds one evaluation with each condition's current value (`None`: no data, which does
    /// not hold). Returns the transition, if any.
    pub fn step(&mut self, rule: &Rule, values: &[Option<f64>], now: Timestamp) -> Option<Transition> {
        self.held_since.resize(rule.conditions.len(), None);
        let mut holds_now = Vec::with_capacity(rule.conditions.len());
        for ((c, v), since) in rule.conditions.iter().zip(values).zip(self.held_since.iter_mut()) {
            let holds = v.is_some_and(|v| c.comparison.holds(v, c.threshold));
            *since = if holds { Some(since.unwrap_or(now)) } else { None };
            holds_now.push(holds);
        }
        // Activation counts the for-times; holding does not.
        let matched_for = rule.match_mode.combine(
            rule.conditions
                .iter()
                .zip(&self.held_since)
                .map(|(c, s)| s.is_some_and(|s| now.at_least_secs_after(s, u64::from(c.for_s)))),
        );
        let holding = rule.match_mode.combine(holds_now.iter().copied());
        match self.status {
            Status::Idle | Status::Pending => {
                if matched_for {
                    self.status = Status::Active;
                    self.activated_at = Some(now);
                    self.clear_since = None;
                    return Some(Transition::Activated);
                }
                self.status = if holding { Status::Pending } else { Status::Idle };
                None
            }
            Status::Active | Status::Recovering => {
                if holding {
                    self.status = Status::Active;
                    self.clear_since = None;
                    return None;
                }
                self.status = Status::Recovering;
                let clear = *self.clear_since.get_or_insert(now);
                if now >= self.earliest_recovery(rule, clear) {
                    *self = RuleState { held_since: self.held_since.clone(), ..RuleState::default() };
                    return Some(Transition::Recovered);
                }
                None
            }
        }
    }

    /// Earliest end of an action whose comparisons have been clear since `clear`: recover-after
    /// must pass, and hold-at-least since activation.
    fn earliest_recovery(&self, rule: &Rule, clear: Timestamp) -> Timestamp {
        let after_clear = clear.plus_secs(u64::from(rule.recover_s));
        let after_hold = self.activated_at.unwrap_or(clear).plus_secs(u64::from(rule.hold_s));
        after_clear.max(after_hold)
    }

    /// When this state would change if the values stayed as they are.
    pub fn deadline(&self, rule: &Rule) -> Option<Timestamp> {
        match self.status {
            Status::Idle => None,
            Status::Pending => {
                // `all` activates when the last pending for-time runs out, `any` at the first.
                let ends = rule
                    .conditions
                    .iter()
                    .zip(&self.held_since)
                    .filter_map(|(c, s)| s.map(|s| s.plus_secs(u64::from(c.for_s))));
                match rule.match_mode {
                    MatchMode::All => ends.max(),
                    MatchMode::Any => ends.min(),
                }
            }
            Status::Active => None,
            Status::Recovering => self.clear_since.map(|c| self.earliest_recovery(rule, c)),
        }
    }
}

/// One condition in a preview.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(utoipa::ToSchema))]
pub struct ConditionPreview {
    pub metric: Metric,
    /// Current value; `None` shows as No data.
    pub value: Option<f64>,
    pub comparison: Comparison,
    pub threshold: f64,
    /// Seconds the comparison has held.
    pub held_s: u64,
    /// Seconds it must hold.
    pub required_s: u32,
}

/// What the next evaluation will do for one rule and node.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(utoipa::ToSchema))]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Outcome {
    /// The conditions match; the next evaluation starts the action.
    ActsAtNextEvaluation,
    /// Recovery is due; the next evaluation ends the action.
    RecoversAtNextEvaluation,
    /// In effect; earliest end if the conditions stay clear.
    InEffectRecoversAt {
        /// The earliest end.
        at: Timestamp,
    },
    /// In effect and the conditions still hold.
    InEffect,
    /// Nothing will change.
    NoChange,
}

impl fmt::Display for Outcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Outcome::ActsAtNextEvaluation => f.write_str("Acts at the next evaluation"),
            Outcome::RecoversAtNextEvaluation => f.write_str("Recovers at the next evaluation"),
            Outcome::InEffectRecoversAt { at } => {
                write!(f, "In effect, recovers {at} at the earliest")
            }
            Outcome::InEffect => f.write_str("In effect"),
            Outcome::NoChange => f.write_str("No change"),
        }
    }
}

/// A preview row: the state now and what the next evaluation would do. Writes nothing.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(utoipa::ToSchema))]
pub struct Preview {
    /// Stored status.
    pub status: Status,
    /// Each condition now.
    pub conditions: Vec<ConditionPreview>,
    /// What happens next.
    pub outcome: Outcome,
}

impl RuleState {
    /// Previews this state under `values` at `now` without changing it.
    pub fn preview(&self, rule: &Rule, values: &[Option<f64>], now: Timestamp) -> Preview {
        let mut next = self.clone();
        let transition = next.step(rule, values, now);
        let conditions = rule
            .conditions
            .iter()
            .zip(values)
            .zip(&next.held_since)
            .map(|((c, v), since)| ConditionPreview {
                metric: c.metric,
                value: *v,
                comparison: c.comparison,
                threshold: c.threshold,
                held_s: since.map_or(0, |s| u64::try_from(now.millis_since(s) / 1000).unwrap_or(0)),
                required_s: c.for_s,
            })
            .collect();
        let outcome = match (transition, next.status) {
            (Some(Transition::Activated), _) => Outcome::ActsAtNextEvaluation,
            (Some(Transition::Recovered), _) => Outcome::RecoversAtNextEvaluation,
            (None, Status::Recovering) => Outcome::InEffectRecoversAt {
                at: next.clear_since.map_or(now, |c| next.earliest_recovery(rule, c)),
            },
            (None, Status::Active) => Outcome::InEffect,
            (None, _) => Outcome::NoChange,
        };
        Preview { status: self.status, conditions, outcome }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const T0: Timestamp = Timestamp::from_secs(1_800_000_000);

    fn rule(json: &str) -> Rule {
        serde_json::from_str(json).unwrap()
    }

    fn cpu_rule(hold: u32, recover: u32) -> Rule {
        rule(&format!(
            r#"{{"name":"cpu-high","hold_s":{hold},"recover_s":{recover},"conditions":[{{"metric":"cpu","comparison":">","threshold":90,"for_s":60}}]}}"#
        ))
    }

    fn at(s: u64) -> Timestamp {
        T0.plus_secs(s)
    }

    #[test]
    fn rules_round_trip_through_json() {
        let r = rule(
            r#"{"name":"r","line":3,"match":"any","conditions":[{"metric":"cpu"},{"metric":"probe_loss","aggregate":"max","region":2}]}"#,
        );
        let back: Rule = serde_json::from_str(&serde_json::to_string(&r).unwrap()).unwrap();
        assert_eq!(back, r);
    }

    /// A threshold stored in its shortest form reads back as the same double (found by the
    /// `rules` fuzz target: serde_json's fast approximate reading took the stored
    /// `250.33333333333334` one unit off, and the rule changed at a restart).
    #[test]
    fn a_long_threshold_reads_back_the_same_after_storing() {
        let r = rule(
            r#"{"name":"r","conditions":[{"metric":"probe_latency_ms","threshold":250.33333333333333333333333333333333333335}]}"#,
        );
        let stored = serde_json::to_string(&r).unwrap();
        let back: Rule = serde_json::from_str(&stored).unwrap();
        assert_eq!(back, r, "stored as {stored}");
    }

    /// With `match: any` the first condition whose for-time runs out activates the rule, so the
    /// deadline is the earliest of the pending ones (the latest made activation wait for the
    /// periodic pass).
    #[test]
    fn match_any_deadline_is_the_earliest_pending_for_time() {
        let r = rule(
            r#"{"name":"r","match":"any","conditions":[{"metric":"cpu","comparison":">","threshold":90,"for_s":60},{"metric":"load1","comparison":">","threshold":4,"for_s":10}]}"#,
        );
        let mut st = RuleState::default();
        assert_eq!(st.step(&r, &[Some(95.0), Some(5.0)], at(0)), None);
        assert_eq!(st.status, Status::Pending);
        assert_eq!(st.deadline(&r), Some(at(10)));
        assert_eq!(st.step(&r, &[Some(95.0), Some(5.0)], at(10)), Some(Transition::Activated));
        let all = Rule { match_mode: MatchMode::All, ..r.clone() };
        let mut st = RuleState::default();
        st.step(&all, &[Some(95.0), Some(5.0)], at(0));
        assert_eq!(st.deadline(&all), Some(at(60)));
    }

    #[test]
    fn rule_defaults() {
        let r = rule(r#"{"name":"r","conditions":[{}]}"#);
        assert_eq!(
            (r.line, r.action, r.match_mode, r.hold_s, r.recover_s, r.enabled),
            (None, Action::RemoveNode, MatchMode::All, 300, 300, true)
        );
        let c = r.conditions[0];
        assert_eq!(
            (c.metric, c.comparison, c.threshold, c.for_s, c.aggregate, c.region),
            (Metric::Cpu, Comparison::Gt, 90.0, 60, Aggregate::Avg, None)
        );
    }

    #[test]
    fn rule_ranges() {
        let cases = [
            (r#"{"name":"","conditions":[{}]}"#, "name: must not be empty"),
            (
                &*format!(r#"{{"name":"{}","conditions":[{{}}]}}"#, "x".repeat(101)),
                "name: must be at most 100 characters, got 101",
            ),
            (r#"{"name":"r","conditions":[]}"#, "conditions: 1 to 8 conditions, got 0"),
            (
                r#"{"name":"r","conditions":[{},{},{},{},{},{},{},{},{}]}"#,
                "conditions: 1 to 8 conditions, got 9",
            ),
            (
                r#"{"name":"r","hold_s":86401,"conditions":[{}]}"#,
                "hold_s: must be between 0 and 86400, got 86401",
            ),
            (
                r#"{"name":"r","recover_s":86401,"conditions":[{}]}"#,
                "recover_s: must be between 0 and 86400, got 86401",
            ),
            (
                r#"{"name":"r","conditions":[{"threshold":-1}]}"#,
                "conditions[0].threshold: must be between 0 and 1000000000000, got -1",
            ),
            (
                r#"{"name":"r","conditions":[{"threshold":1e13}]}"#,
                "conditions[0].threshold: must be between 0 and 1000000000000, got 10000000000000",
            ),
            (
                r#"{"name":"r","conditions":[{"for_s":3601}]}"#,
                "conditions[0].for_s: must be between 0 and 3600, got 3601",
            ),
            (
                r#"{"name":"r","conditions":[{"metric":"cpu","aggregate":"max"}]}"#,
                "conditions[0].aggregate: applies to probe metrics only, not cpu",
            ),
            (
                r#"{"name":"r","conditions":[{"metric":"load1","region":3}]}"#,
                "conditions[0].region: applies to probe metrics only, not load1",
            ),
            (
                r#"{"name":"r","action":"backup_groups","conditions":[{}]}"#,
                "line: The rule needs a line of the cluster's DNS binding",
            ),
        ];
        for (json, want) in cases {
            let input: RuleInput = serde_json::from_str(json).unwrap();
            assert_eq!(Rule::try_from(input).unwrap_err().to_string(), want, "{json}");
        }
        let r = rule(
            r#"{"name":"r","line":7,"conditions":[{"metric":"probe_loss","aggregate":"max","region":2}]}"#,
        );
        assert_eq!(r.check_line(&[LineId(1)]).unwrap_err().to_string(), format!("line: {NEEDS_LINE}"));
        assert!(r.check_line(&[LineId(7)]).is_ok());
    }

    #[test]
    fn rule_pending_until_for_time_then_active() {
        let r = cpu_rule(300, 300);
        let mut s = RuleState::default();
        assert_eq!(s.step(&r, &[Some(95.0)], at(0)), None);
        assert_eq!(s.status, Status::Pending);
        assert_eq!(s.deadline(&r), Some(at(60)));
        assert_eq!(s.step(&r, &[Some(95.0)], at(59)), None);
        assert_eq!(s.step(&r, &[Some(95.0)], at(60)), Some(Transition::Activated));
        assert_eq!(s.status, Status::Active);
    }

    #[test]
    fn rule_pending_resets_when_comparison_stops_holding() {
        let r = cpu_rule(300, 300);
        let mut s = RuleState::default();
        s.step(&r, &[Some(95.0)], at(0));
        s.step(&r, &[Some(50.0)], at(30));
        assert_eq!(s.status, Status::Idle);
        s.step(&r, &[Some(95.0)], at(40));
        assert_eq!(s.step(&r, &[Some(95.0)], at(60)), None, "the for-time restarted at 40 s");
        assert_eq!(s.step(&r, &[Some(95.0)], at(100)), Some(Transition::Activated));
    }

    #[test]
    fn rule_without_data_does_not_hold() {
        let r = cpu_rule(0, 0);
        let mut s = RuleState::default();
        for t in 0..200 {
            assert_eq!(s.step(&r, &[None], at(t)), None);
        }
        assert_eq!(s.status, Status::Idle);
    }

    #[test]
    fn rule_holds_while_comparisons_hold_without_for_times() {
        // Any-match with two conditions: once active, one condition holding keeps it active
        // even though its for-time has not passed again.
        let r = rule(
            r#"{"name":"r","match":"any","hold_s":0,"recover_s":10,"conditions":[
            {"metric":"cpu","comparison":">","threshold":90,"for_s":60},
            {"metric":"memory","comparison":">","threshold":90,"for_s":600}]}"#,
        );
        let mut s = RuleState::default();
        s.step(&r, &[Some(95.0), None], at(0));
        assert_eq!(s.step(&r, &[Some(95.0), None], at(60)), Some(Transition::Activated));
        assert_eq!(s.step(&r, &[None, Some(95.0)], at(70)), None);
        assert_eq!(s.status, Status::Active);
    }

    #[test]
    fn rule_recovers_after_recover_after_and_hold_at_least() {
        let r = cpu_rule(300, 120);
        let mut s = RuleState::default();
        s.step(&r, &[Some(95.0)], at(0));
        s.step(&r, &[Some(95.0)], at(60)); // activated at 60
        s.step(&r, &[Some(50.0)], at(70)); // clear since 70
        assert_eq!(s.status, Status::Recovering);
        // recover-after passes at 190, hold-at-least at 360.
        assert_eq!(s.deadline(&r), Some(at(360)));
        assert_eq!(s.step(&r, &[Some(50.0)], at(200)), None);
        assert_eq!(s.step(&r, &[Some(50.0)], at(359)), None);
        assert_eq!(s.step(&r, &[Some(50.0)], at(360)), Some(Transition::Recovered));
        assert_eq!(s.status, Status::Idle);
    }

    #[test]
    fn rule_reactivates_while_recovering_and_recovery_wait_restarts() {
        let r = cpu_rule(0, 100);
        let mut s = RuleState::default();
        s.step(&r, &[Some(95.0)], at(0));
        s.step(&r, &[Some(95.0)], at(60));
        s.step(&r, &[Some(50.0)], at(70));
        assert_eq!(s.status, Status::Recovering);
        assert_eq!(s.step(&r, &[Some(95.0)], at(150)), None, "holding again is not a new activation");
        assert_eq!(s.status, Status::Active);
        s.step(&r, &[Some(50.0)], at(160));
        assert_eq!(s.step(&r, &[Some(50.0)], at(259)), None, "the wait restarted at 160");
        assert_eq!(s.step(&r, &[Some(50.0)], at(260)), Some(Transition::Recovered));
    }

    #[test]
    fn rule_with_zero_hold_and_recover_recovers_at_once() {
        let r = cpu_rule(0, 0);
        let mut s = RuleState::default();
        s.step(&r, &[Some(95.0)], at(0));
        s.step(&r, &[Some(95.0)], at(60));
        assert_eq!(s.step(&r, &[Some(50.0)], at(61)), Some(Transition::Recovered));
    }

    #[test]
    fn rule_change_of_behaviour_is_detected_but_renaming_is_not() {
        let a = cpu_rule(300, 300);
        let mut renamed = a.clone();
        renamed.name = "other".into();
        renamed.hold_s = 10;
        renamed.recover_s = 10;
        assert_eq!(a.behaviour(), renamed.behaviour());
        let mut changed = a.clone();
        changed.conditions[0].threshold = 80.0;
        assert_ne!(a.behaviour(), changed.behaviour());
        let mut other_action = a.clone();
        other_action.action = Action::BackupIp;
        assert_ne!(a.behaviour(), other_action.behaviour());
        let mut other_match = a.clone();
        other_match.match_mode = MatchMode::Any;
        assert_ne!(a.behaviour(), other_match.behaviour());
        let mut other_line = a;
        other_line.line = Some(LineId(3));
        assert_ne!(renamed.behaviour(), other_line.behaviour());
    }

    #[test]
    fn preview_outcomes() {
        let r = cpu_rule(300, 120);
        let mut s = RuleState::default();
        assert_eq!(s.preview(&r, &[Some(50.0)], at(0)).outcome, Outcome::NoChange);
        s.step(&r, &[Some(95.0)], at(0));
        let p = s.preview(&r, &[Some(95.0)], at(30));
        assert_eq!(p.outcome, Outcome::NoChange);
        assert_eq!((p.conditions[0].held_s, p.conditions[0].required_s), (30, 60));
        assert_eq!(s.preview(&r, &[Some(95.0)], at(60)).outcome, Outcome::ActsAtNextEvaluation);
        assert_eq!(s.status, Status::Pending, "preview writes nothing");
        s.step(&r, &[Some(95.0)], at(60));
        assert_eq!(s.preview(&r, &[Some(95.0)], at(70)).outcome, Outcome::InEffect);
        let p = s.preview(&r, &[Some(50.0)], at(70));
        assert_eq!(p.outcome, Outcome::InEffectRecoversAt { at: at(360) });
        assert_eq!(p.outcome.to_string(), format!("In effect, recovers {} at the earliest", at(360)));
        s.step(&r, &[Some(50.0)], at(70));
        assert_eq!(s.preview(&r, &[Some(50.0)], at(360)).outcome, Outcome::RecoversAtNextEvaluation);
        assert_eq!(s.preview(&r, &[None], at(100)).conditions[0].value, None);
    }

    #[test]
    fn aggregates() {
        let v = [10.0, 30.0, 20.0];
        assert_eq!(Aggregate::Avg.combine(v.into_iter()), Some(20.0));
        assert_eq!(Aggregate::Max.combine(v.into_iter()), Some(30.0));
        assert_eq!(Aggregate::Min.combine(v.into_iter()), Some(10.0));
        assert_eq!(Aggregate::Avg.combine(std::iter::empty()), None);
    }
}
