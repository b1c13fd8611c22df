//! Each line's outlook for the preview: its all-down policy, what it answers now, and what it
//! would answer if health took every address away at once. The second is the answer itself,
//! run on a copy of the cluster's state with every address failed, so the preview can never
//! say one thing while a pass would do another.

use std::collections::BTreeMap;
use std::net::IpAddr;

use serde::{Deserialize, Serialize};

use super::latency::{self, LineLatency};
use super::stage::Stage;
use super::{ClusterState, ClusterView, FastSet, Found, effective_lines, operator_kept, reachability};
use crate::answer::{GroupIndex, LineHold, Source};
use crate::ids::LineId;
use crate::model::{AllDown, DnsMode};
use crate::time::Timestamp;

/// One line in the preview.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(utoipa::ToSchema))]
pub struct LineOutlook {
    /// The line (0: the implicit default line of a cluster without lines).
    pub line: LineId,
    /// Its name.
    pub line_name: String,
    /// What it answers when health leaves it with nothing healthy.
    pub all_down: AllDown,
    /// The policy it answers by now, and why; absent: it answers by health.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub applies_now: Option<LineHold>,
    /// Its published records.
    #[cfg_attr(feature = "schema", schema(value_type = Vec<String>))]
    pub records: Vec<IpAddr>,
    /// What it would answer if every address of the cluster failed in the next pass.
    #[cfg_attr(feature = "schema", schema(value_type = Vec<String>))]
    pub if_all_down: Vec<IpAddr>,
    /// That answer in words.
    pub if_all_down_text: String,
    /// Latency steering: its groups in the order it uses them, with the figures (absent: it
    /// does not steer by latency, or has had no pass yet).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency: Option<LineLatency>,
    /// That order in words, and why.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency_text: Option<String>,
}

/// The outlook of every line of `view` at `now`, from `state` (which it does not change).
pub fn line_outlooks(view: &ClusterView<'_>, state: &ClusterState, now: Timestamp) -> Vec<LineOutlook> {
    let mut lines = effective_lines(view.lines);
    latency::in_order(view, &mut lines, state);
    // Facts as the next pass would build them, then every address failed: nothing in use,
    // no target address usable, nothing waiting for verification.
    let mut scratch = state.clone();
    let Found { mut facts, .. } =
        reachability(view, &mut scratch, (now, false), &mut super::Tallied::none(), &mut Vec::new());
    for f in &mut facts {
        f.in_use.ips.clear();
        f.in_use.level = None;
        f.in_use_backup.ips.clear();
        f.in_use_backup.level = None;
        for target in &mut f.targets {
            target.2 = false;
        }
    }
    let groups = GroupIndex::new(&facts);
    let suspect = FastSet::default();
    let reordered = FastSet::default();
    let stage = Stage::new(view, &lines, (&facts, &groups), (&suspect, &[]), &reordered);
    let protected = operator_kept(view, state.published.iter());
    let previous: Vec<&super::Records> = protected.iter().map(|r| &**r).collect();
    let in_effect = stage.in_effect(state.rules_in_effect());
    let mut failed = stage.records(&in_effect, &previous, &BTreeMap::new());
    lines
        .iter()
        .map(|line| {
            let answer = failed.answers.get(&line.id);
            let if_all_down = failed.records.lines.remove(&line.id).unwrap_or_default();
            // Figures of the region the line now names only (a pass takes another's away).
            let steered = (line.latency.as_ref())
                .zip(state.latency.get(&line.id))
                .filter(|(spec, l)| l.region == spec.region && view.cluster.dns_mode != DnsMode::Manual);
            LineOutlook {
                line: line.id,
                line_name: line.name.clone(),
                all_down: line.all_down,
                applies_now: state.held.get(&line.id).cloned(),
                records: state
                    .published
                    .as_ref()
                    .and_then(|p| p.lines.get(&line.id))
                    .cloned()
                    .unwrap_or_default(),
                if_all_down_text: answer
                    .map_or_else(String::new, |a| describe(&line.name, &if_all_down, &a.source)),
                if_all_down,
                latency: steered.map(|(_, l)| l.clone()),
                latency_text: steered.map(|(spec, l)| l.describe(&line.name, spec, latency::hold_ms(view))),
            }
        })
        .collect()
}

/// An answer given when every address failed, in words.
fn describe(name: &str, records: &[IpAddr], source: &Source) -> String {
    let n = records.len();
    let addresses = if n == 1 { "1 address".to_owned() } else { format!("{n} addresses") };
    match source {
        Source::Held { .. } => format!("line {name} holds its current records ({addresses})"),
        Source::AllDown { policy: AllDown::Online, .. } => {
            format!("line {name} answers every online node ({addresses})")
        }
        Source::AllDown { .. } => format!("line {name} answers no records (NOERROR, no data)"),
        Source::Fallback { tier } if records.is_empty() => format!("line {name} answers no records: {tier}"),
        Source::Fallback { tier } => format!("line {name} falls back to the {tier} ({addresses})"),
        Source::Group | Source::BackupGroup { .. } => format!("line {name} answers {addresses}"),
    }
}
