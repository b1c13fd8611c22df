//! How the API's types print as tables: each row type names its columns and gives its cells.

use std::time::SystemTime;

use serde::Serialize;
use serde_json::Value;
use vantage_control::alerts::Alert;
use vantage_control::availability::{Incident, NamedWindow, Report};
use vantage_control::monitors::VerdictRecord;
use vantage_control::observe::RoundSummary;
use vantage_core::Timestamp;
use vantage_core::evaluate::LineOutlook;
use vantage_core::geo::{describe, describe_clients};
use vantage_core::ids::LineId;
use vantage_core::mirror::RegionObservation;
use vantage_core::model::AllDown;
use vantage_core::monitor::MonitorRegion;
use vantage_core::reachability::Condition;
use vantage_server::views::{
    AddressView, AdminTokenView, AuditView, CheckView, ClientAnswerView, ClusterView, DnsLine,
    EnrollTokenView, GroupView, LineView, MaintenanceView, MirrorProberView, MirrorView, MonitorPoint,
    MonitorView, NodeUsage, NodeView, PreviewItem, ProberView, RegionVerdictView, RegionView, ResultView,
    RevisionView, RuleView, SilenceView, StatusPageView, TenantView, WebhookView,
};

/// A value in one cell: text as is, numbers and booleans printed, lists of plain values joined
/// with commas, nothing as `-`, the rest as compact JSON.
pub(super) fn cell<T: Serialize>(v: &T) -> String {
    fn text(v: &Value) -> String {
        match v {
            Value::Null => "-".into(),
            Value::String(s) => s.clone(),
            Value::Array(a) if a.iter().all(|x| !x.is_object()) => {
                a.iter().map(text).collect::<Vec<_>>().join(",")
            }
            other => other.to_string(),
        }
    }
    serde_json::to_value(v).map_or_else(|_| "-".into(), |v| text(&v))
}

/// A measurement with one decimal, `-` when there is none. Adding 0 turns −0 (an empty sum of
/// weights, say) into 0, which is what it means.
pub(super) fn decimal(v: Option<f64>) -> String {
    v.map_or_else(|| "-".to_owned(), |v| format!("{:.1}", v + 0.0))
}

/// How long ago `at` was by this machine's clock.
pub(super) fn age(at: Timestamp) -> String {
    duration(Timestamp::from_system(SystemTime::now()).millis_since(at).max(0) / 1000)
}

/// Seconds in the two largest units: `42s`, `3m05s`, `2h10m`, `4d03h`.
fn duration(s: i64) -> String {
    match s {
        0..60 => format!("{s}s"),
        60..3600 => format!("{}m{:02}s", s / 60, s % 60),
        3600..86_400 => format!("{}h{:02}m", s / 3600, s / 60 % 60),
        _ => format!("{}d{:02}h", s / 86_400, s / 3600 % 24),
    }
}

/// When `at` comes by this machine's clock: `in 12s` (whole seconds, rounded up), or `in a
/// moment` once it is due — the next evaluation decides, and `in 0s` would read as a fault.
fn until(at: Timestamp) -> String {
    let ms = at.millis_since(Timestamp::from_system(SystemTime::now()));
    if ms <= 0 { "in a moment".to_owned() } else { format!("in {}", duration((ms + 999) / 1000)) }
}

/// The `Host` a check's probes send: its own to cluster addresses, which have no name of
/// their own; a mirror's or a monitor endpoint's own host (from its URL) to those.
fn check_host(r: &CheckView) -> String {
    let named = r.mirrors + r.monitors > 0;
    match (r.clusters > 0, named) {
        (false, true) => "the target's".to_owned(),
        (true, true) => format!("{} (clusters), the target's", r.check.host()),
        _ => r.check.host().to_owned(),
    }
}

/// An address's condition as an operator reads it: `failing — unreachable in 12s`.
pub(super) fn condition(a: &AddressView) -> String {
    match (a.condition, a.changes_at) {
        (Some(Condition::Failing), Some(t)) => format!("failing — unreachable {}", until(t)),
        (Some(Condition::Recovering), Some(t)) => format!("recovering — reachable {}", until(t)),
        (c, _) => cell(&c),
    }
}

/// A node in one word or two: off, not evaluated, or the worst of its addresses.
fn node_state(n: &NodeView) -> String {
    let worst = [Condition::Unreachable, Condition::Failing, Condition::Recovering]
        .into_iter()
        .find(|c| n.addresses.iter().any(|a| a.condition == Some(*c)));
    match (n.enabled, n.serving, worst) {
        (false, _, _) => "disabled".into(),
        _ if n.drain.is_some_and(|d| d.drained) => "drained".into(),
        _ if n.drain.is_some() => "draining".into(),
        _ if n.no_public_address => "no public address".into(),
        (_, None, _) => "not evaluated".into(),
        (_, Some(false), _) => "not serving".into(),
        (_, Some(true), Some(c)) => format!("{} address", cell(&c)),
        (_, Some(true), None) => "healthy".into(),
    }
}

/// A node's scheduling addresses in one cell, or `No public address` without any.
fn node_addresses(n: &NodeView) -> String {
    if n.no_public_address {
        return "No public address".into();
    }
    cell(&n.addresses.iter().map(|a| a.ip).collect::<Vec<_>>())
}

/// The Metrics column: `cpu 42.5% mem 25.0%`, `-` while missing or stale.
fn usage(u: Option<&NodeUsage>) -> String {
    u.map_or_else(
        || "-".to_owned(),
        |u| {
            format!(
                "cpu {:.1}% mem {}",
                u.cpu_pct,
                u.memory_pct.map_or_else(|| "-".to_owned(), |m| format!("{m:.1}%"))
            )
        },
    )
}

/// Printed under a table of window strips: an empty slot is not a failed attempt.
pub(super) const STRIP_LEGEND: &str =
    "strip: oldest to newest; H good attempt, - failed attempt, . no attempt yet";

/// One line of a table.
pub(super) trait Row {
    /// The column names, in order.
    const COLUMNS: &'static [&'static str];
    /// The cells, one per column.
    fn cells(&self) -> Vec<String>;
}

/// Prints rows as an aligned table with a header.
pub(super) fn table<R: Row>(rows: &[R]) {
    let cells: Vec<Vec<String>> = rows.iter().map(Row::cells).collect();
    let widths: Vec<usize> = R::COLUMNS
        .iter()
        .enumerate()
        .map(|(n, c)| cells.iter().map(|r| r[n].chars().count()).chain([c.len()]).max().unwrap_or(0))
        .collect();
    let line = |cells: Vec<String>| {
        let padded: Vec<String> = cells.iter().zip(&widths).map(|(c, w)| format!("{c:<w$}")).collect();
        println!("{}", padded.join("  ").trim_end());
    };
    line(R::COLUMNS.iter().map(|c| c.to_uppercase()).collect());
    for r in cells {
        line(r);
    }
}

/// Prints one object as FIELD  VALUE lines.
pub(super) fn record<T: Serialize>(v: &T) {
    match serde_json::to_value(v) {
        Ok(Value::Object(m)) => {
            let w = m.keys().map(String::len).max().unwrap_or(0);
            for (k, x) in &m {
                println!("{k:<w$}  {}", cell(x));
            }
        }
        _ => println!("{}", cell(v)),
    }
}

/// Rows whose cells are their fields as they are.
macro_rules! rows {
    ($($ty:ty: [$($col:literal => |$r:ident| $cell:expr),* $(,)?]);* $(;)?) => {$(
        impl Row for $ty {
            const COLUMNS: &'static [&'static str] = &[$($col),*];
            fn cells(&self) -> Vec<String> {
                vec![$({ let $r = self; cell(&$cell) }),*]
            }
        }
    )*};
}

/// A window's availability as a cell: `99.95%`, `-` when nothing was counted.
fn pct(w: Option<&NamedWindow>) -> String {
    w.and_then(|w| w.times.availability_pct).map_or_else(|| "-".to_owned(), |p| format!("{p:.3}%"))
}

rows! {
    Report: [
        "subject" => |r| r.subject, "name" => |r| r.name, "health" => |r| r.health,
        "24h" => |r| pct(r.windows.first()), "7d" => |r| pct(r.windows.get(1)), "30d" => |r| pct(r.windows.get(2)),
        "budget_left" => |r| r.windows.get(2).and_then(|w| w.times.budget_left_pct).map(|b| format!("{b:.1}%")),
    ];
    Incident: ["start" => |r| r.start, "end" => |r| r.end, "cause" => |r| r.cause];
    RegionView: [
        "id" => |r| r.id, "code" => |r| r.code, "name" => |r| r.name,
        "clients" => |r| Some(describe_clients(&r.client_networks, &r.places)).filter(|c| !c.is_empty()),
        "probers" => |r| r.probers, "requests_day" => |r| r.requests_day,
    ];
    ClusterView: [
        "id" => |r| r.id, "name" => |r| r.name, "domain" => |r| r.domain, "dns_mode" => |r| r.dns_mode,
        "ttl" => |r| r.ttl, "aliases" => |r| r.aliases, "check" => |r| r.probed_with.source_phrase(),
    ];
    GroupView: ["id" => |r| r.id, "name" => |r| r.name, "region" => |r| r.region, "drained" => |r| r.drained];
    LineView: [
        "id" => |r| r.id, "name" => |r| r.name, "group" => |r| r.group, "backup_groups" => |r| r.backup_groups,
        "min_healthy" => |r| r.min_healthy, "client_networks" => |r| r.client_networks,
        "places" => |r| describe(&r.places), "all_down" => |r| r.all_down,
        "latency_region" => |r| r.latency_region,
    ];
    RuleView: [
        "id" => |r| r.id, "name" => |r| r.rule.name, "line" => |r| r.rule.line, "action" => |r| r.rule.action,
        "match" => |r| r.rule.match_mode, "enabled" => |r| r.rule.enabled, "hold_s" => |r| r.rule.hold_s,
        "recover_s" => |r| r.rule.recover_s,
    ];
    NodeView: [
        "id" => |r| r.id, "cluster" => |r| r.cluster_name, "group" => |r| r.group_name, "name" => |r| r.name,
        "enabled" => |r| r.enabled, "also_probes" => |r| r.also_probes, "enrolled" => |r| r.enrolled,
        "addresses" => |r| node_addresses(r),
        "level" => |r| if r.no_public_address { "-".to_owned() } else { r.level.map_or_else(|| "none".to_owned(), |l| cell(&l)) },
        "state" => |r| node_state(r), "connects_from" => |r| r.connects_from.or(r.enrolled_from),
        "metrics" => |r| usage(r.usage.as_ref()),
    ];
    WebhookView: [
        "id" => |r| r.id, "name" => |r| r.webhook.name, "url" => |r| r.webhook.url,
        "format" => |r| r.webhook.format, "enabled" => |r| r.webhook.enabled,
    ];
    SilenceView: [
        "id" => |r| r.id, "state" => |r| r.state, "matchers" => |r| r.silence.matchers,
        "ends_at" => |r| r.silence.ends_at, "holds" => |r| r.holds.len(), "by" => |r| r.silence.created_by,
        "comment" => |r| r.silence.comment,
    ];
    MaintenanceView: [
        "id" => |r| r.id, "name" => |r| r.maintenance.name, "state" => |r| r.state,
        "starts_at" => |r| r.maintenance.starts_at, "ends_at" => |r| r.maintenance.ends_at,
        "targets" => |r| r.targets, "holds" => |r| r.holds.len(), "by" => |r| r.maintenance.created_by,
    ];
    StatusPageView: [
        "id" => |r| r.id, "slug" => |r| r.page.slug, "title" => |r| r.page.title, "path" => |r| r.path,
        "details" => |r| r.page.details,
    ];
    AdminTokenView: ["id" => |r| r.id, "name" => |r| r.name, "prefix" => |r| r.prefix, "created_at" => |r| r.created_at];
    AuditView: ["at" => |r| r.at, "actor" => |r| r.actor, "action" => |r| r.action, "object" => |r| r.object];
    EnrollTokenView: [
        "id" => |r| r.id, "prefix" => |r| r.prefix, "name" => |r| r.name, "region" => |r| r.region,
        "node" => |r| r.node, "state" => |r| r.state, "expires_at" => |r| r.expires_at, "used_at" => |r| r.used_at,
    ];
    AddressView: [
        "ip" => |r| r.ip, "level" => |r| r.level, "source" => |r| r.source,
        "line" => |r| r.line.map_or_else(|| "every".to_owned(), |l| format!("{l} (target)")),
        "condition" => |r| condition(r),
        "since" => |r| r.since.map_or_else(|| "-".to_owned(), |t| format!("{} ago", age(t))),
        "in_use" => |r| r.in_use,
        "probers_failing" => |r| r.probers.map_or_else(|| "-".to_owned(), |v| format!("{} of {}", v.failing, v.counting)),
        "damping" => |r| format!("{}x", r.damping),
    ];
    ResultView: [
        "prober_name" => |r| r.prober_name, "node_name" => |r| r.node_name, "address" => |r| r.address,
        "port" => |r| r.port, "method" => |r| r.method, "loss_pct" => |r| r.loss_pct, "rtt_ms" => |r| r.rtt_ms,
        "error" => |r| r.error, "checked" => |r| r.checked, "good" => |r| r.window.good_strip,
    ];
    LineOutlook: [
        "line" => |r| r.line_name, "all_down" => |r| r.all_down,
        "now" => |r| r.applies_now.as_ref().map_or_else(|| "by health".to_owned(), |h| h.describe(&r.line_name)),
        "records" => |r| r.records, "if_all_down" => |r| r.if_all_down_text,
        "group_order" => |r| r.latency_text.clone().unwrap_or_else(|| "as configured".to_owned()),
    ];
    DnsLine: [
        "name" => |r| r.name, "client_networks" => |r| r.client_networks,
        "places" => |r| describe(&r.places), "records" => |r| r.records,
        "since" => |r| r.since, "all_down" => |r| r.held.as_ref().map(|h| format!("{}: {}", h.policy.as_str(), h.reason)),
    ];
    ClientAnswerView: [
        "cluster" => |r| r.cluster, "line" => |r| r.line, "records" => |r| r.records, "scope" => |r| format!("/{}", r.scope),
    ];
    TenantView: [
        "name" => |r| r.name, "note" => |r| r.note, "mirrors" => |r| r.mirrors,
        "fallback_to_degraded" => |r| r.fallback_to_degraded,
    ];
    CheckView: [
        "id" => |r| r.id, "name" => |r| r.name, "method" => |r| r.check.method(), "path" => |r| r.check.path(),
        "host" => |r| check_host(r), "interval_s" => |r| r.check.interval_s(),
        "timeout_ms" => |r| r.check.timeout_ms(), "window" => |r| r.check.window(),
        "threshold" => |r| r.check.threshold(), "mirrors" => |r| r.mirrors, "clusters" => |r| r.clusters,
        "monitors" => |r| r.monitors,
    ];
    Alert: [
        "id" => |r| r.id, "state" => |r| r.state, "kind" => |r| r.kind, "summary" => |r| r.summary,
        "fired_at" => |r| r.fired_at, "resolved_at" => |r| r.resolved_at,
        "lasted" => |r| r.resolved_at.map_or_else(|| format!("{} so far", age(r.fired_at)), |t| duration(t.millis_since(r.fired_at).max(0) / 1000)),
    ];
}

/// One line's records in one revision; the revision's number, time and reason are on its
/// first line only, so a revision reads as one block.
#[derive(Debug)]
pub(super) struct RevisionLine {
    number: String,
    at: String,
    line: String,
    records: String,
    reason: String,
}

impl Row for RevisionLine {
    const COLUMNS: &'static [&'static str] = &["number", "at", "line", "records", "reason"];
    fn cells(&self) -> Vec<String> {
        [&self.number, &self.at, &self.line, &self.records, &self.reason].map(String::clone).to_vec()
    }
}

/// The rows of `r`: one per line (named by `line_name`), its records, and `(held)` where the
/// protection kept the line's previous records (`(online)`, `(nodata)`: where its all-down
/// policy answered instead).
pub(super) fn revision_lines(r: &RevisionView, line_name: impl Fn(LineId) -> String) -> Vec<RevisionLine> {
    let mut lines: Vec<(String, String)> = r
        .records
        .lines
        .iter()
        .map(|(id, ips)| {
            let mut records = if ips.is_empty() { "-".to_owned() } else { cell(ips).replace(',', " ") };
            if let Some(h) = r.held.get(id) {
                let word = if h.policy == AllDown::Hold { "held" } else { h.policy.as_str() };
                records.push_str(&format!(" ({word})"));
            }
            (line_name(*id), records)
        })
        .collect();
    if lines.is_empty() {
        lines.push(("-".into(), "-".into()));
    }
    lines
        .into_iter()
        .enumerate()
        .map(|(i, (line, records))| {
            let first = |s: String| if i == 0 { s } else { String::new() };
            RevisionLine {
                number: first(r.number.to_string()),
                at: first(cell(&r.at)),
                line,
                records,
                reason: first(r.reason.clone()),
            }
        })
        .collect()
}

/// A prober's figures of one kind as one phrase: `loss 0.0 %, 12.3 ms, 0 of 4 unreachable`.
fn round_phrase(r: Option<&RoundSummary>) -> String {
    r.map_or_else(
        || "-".to_owned(),
        |r| {
            let rtt = r.mean_rtt_ms.map_or_else(|| "-".to_owned(), |v| format!("{v:.1} ms"));
            format!("loss {:.1} %, {rtt}, {} of {} unreachable", r.loss_pct, r.unreachable, r.targets)
        },
    )
}

impl Row for ProberView {
    const COLUMNS: &'static [&'static str] = &[
        "id",
        "name",
        "region_code",
        "enabled",
        "status",
        "last_seen",
        "version",
        "targets",
        "last_round",
        "last_endpoint_checks",
        "last_confirmation",
    ];
    fn cells(&self) -> Vec<String> {
        vec![
            cell(&self.id),
            cell(&self.name),
            cell(&self.region_code),
            cell(&self.enabled),
            cell(&self.status),
            cell(&self.last_seen),
            cell(&self.version),
            cell(&self.targets),
            round_phrase(self.last_round.as_ref()),
            round_phrase(self.last_endpoint_checks.as_ref()),
            round_phrase(self.last_confirmation.as_ref()),
        ]
    }
}

impl Row for PreviewItem {
    const COLUMNS: &'static [&'static str] = &["rule", "node", "status", "conditions", "outcome"];
    fn cells(&self) -> Vec<String> {
        // The conditions in one cell: `cpu 95.2 > 90 (held 30/60 s)`, `cpu No data`.
        let conditions = self
            .row
            .preview
            .conditions
            .iter()
            .map(|c| {
                let metric = cell(&c.metric);
                match c.value {
                    None => format!("{metric} No data"),
                    Some(v) => format!(
                        "{metric} {v:.1} {} {} (held {}/{} s)",
                        cell(&c.comparison),
                        cell(&c.threshold),
                        c.held_s,
                        c.required_s
                    ),
                }
            })
            .collect::<Vec<_>>()
            .join("; ");
        vec![
            self.row.rule_name.clone(),
            self.row.node_name.clone(),
            cell(&self.row.preview.status),
            conditions,
            self.outcome_text.clone(),
        ]
    }
}

impl Row for MirrorView {
    const COLUMNS: &'static [&'static str] =
        &["host", "verdict", "since", "failing", "weight", "tenants", "manual_block"];
    fn cells(&self) -> Vec<String> {
        // Regions failing out of the regions that reported, as the verdict weighs them.
        let failing = self.regions.values().filter(|r| r.status.is_failing()).count();
        let tenants = if self.tenants.is_empty() { "(all)".to_owned() } else { cell(&self.tenants) };
        let block = match (self.manual_block, self.manual_note.as_str()) {
            (false, _) => "no".to_owned(),
            (true, "") => "yes".to_owned(),
            (true, note) => format!("yes: {note}"),
        };
        vec![
            cell(&self.host),
            cell(&self.verdict),
            cell(&self.verdict_since),
            format!("{failing}/{}", self.regions.len()),
            cell(&self.weight),
            tenants,
            block,
        ]
    }
}

/// A region's status for one mirror: its code and latest measurement.
impl Row for (String, RegionObservation) {
    const COLUMNS: &'static [&'static str] = &["region", "status", "latency_ms", "age"];
    fn cells(&self) -> Vec<String> {
        let (code, o) = self;
        let latency = if o.latency == 0 { "-".to_owned() } else { o.latency.to_string() };
        vec![code.clone(), cell(&o.status), latency, age(o.at)]
    }
}

impl Row for MirrorProberView {
    const COLUMNS: &'static [&'static str] =
        &["prober", "region", "status", "error", "rtt_ms", "age", "good", "strip"];
    fn cells(&self) -> Vec<String> {
        let w = &self.window;
        vec![
            cell(&self.name),
            cell(&self.region),
            cell(&self.status),
            cell(&self.error),
            self.rtt_ms.map_or_else(|| "-".to_owned(), |v| format!("{v:.1}")),
            age(self.checked),
            format!("{}/{}/{}", w.good, w.threshold, w.window),
            w.good_strip.clone(),
        ]
    }
}

impl Row for MonitorView {
    const COLUMNS: &'static [&'static str] = &["id", "name", "verdict", "since", "regions"];
    fn cells(&self) -> Vec<String> {
        // No verdict before the first probe: unknown, as for mirrors.
        let verdict = self.verdict.map_or_else(|| "unknown".to_owned(), |v| v.to_string());
        let regions: Vec<&str> = self.monitor.regions.iter().map(|r| r.region.as_str()).collect();
        vec![cell(&self.id), cell(&self.monitor.name), verdict, cell(&self.since), regions.join(",")]
    }
}

rows! {
    MonitorRegion: [
        "region" => |r| r.region, "weight" => |r| r.weight, "pathway" => |r| r.pathway(),
        "endpoints" => |r| r.endpoints,
    ];
}

impl Row for RegionVerdictView {
    const COLUMNS: &'static [&'static str] = &[
        "region",
        "weight",
        "pathway",
        "health",
        "failures",
        "reachable",
        "manifest_valid",
        "segment_fetchable",
        "segment_age_s",
        "ttfb_ms",
        "worst_age_s",
        "age",
    ];
    fn cells(&self) -> Vec<String> {
        vec![
            cell(&self.region),
            cell(&self.weight),
            cell(&self.pathway),
            cell(&self.health),
            // Out of the probes the quorum looks at.
            format!("{}/{}", self.failures, self.probes),
            cell(&self.reachable),
            cell(&self.manifest_valid),
            cell(&self.segment_fetchable),
            decimal(self.segment_age_s),
            decimal(self.ttfb_ms),
            decimal(self.worst_age_s),
            self.at.map_or_else(|| "-".to_owned(), age),
        ]
    }
}

impl Row for MonitorPoint {
    const COLUMNS: &'static [&'static str] = &["at", "probes", "failures", "max_age_s", "ttfb_ms"];
    fn cells(&self) -> Vec<String> {
        vec![
            cell(&self.at),
            cell(&self.probes),
            cell(&self.failures),
            decimal(self.max_age_s),
            decimal(self.ttfb_ms),
        ]
    }
}

impl Row for VerdictRecord {
    const COLUMNS: &'static [&'static str] = &["at", "global", "down_weight_pct", "stale_weight_pct"];
    fn cells(&self) -> Vec<String> {
        let v = &self.verdict;
        vec![
            cell(&self.at),
            cell(&v.global),
            decimal(Some(v.down_weight_pct)),
            decimal(Some(v.stale_weight_pct)),
        ]
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use vantage_core::mirror::RegionStatus;
    use vantage_server::views::WindowView;

    use super::*;

    /// A deadline reads in whole seconds rounded up, and once due as a moment away: the
    /// next evaluation decides, and `in 0s` reads as a fault.
    #[test]
    fn deadlines_never_read_zero() {
        let now = Timestamp::from_system(SystemTime::now());
        assert_eq!(until(now.plus_millis(-4_000)), "in a moment");
        assert_eq!(until(now.plus_millis(10_500)), "in 11s");
        assert_eq!(until(now.plus_millis(90_500)), "in 1m31s");
    }

    #[test]
    fn durations_keep_two_units() {
        assert_eq!(duration(42), "42s");
        assert_eq!(duration(185), "3m05s");
        assert_eq!(duration(7800), "2h10m");
        assert_eq!(duration(4 * 86_400 + 3 * 3600 + 59), "4d03h");
    }

    #[test]
    fn a_region_verdict_row_shows_the_tuple_of_its_newest_probe() {
        // From the API's body, as ctl reads it.
        let r: RegionVerdictView = serde_json::from_value(serde_json::json!({
            "region": "eu-de", "weight": 60.0, "pathway": "cdn-a", "health": "stale", "failures": 1,
            "probes": 5, "worst_age_s": 41.26, "reachable": true, "manifest_valid": true,
            "segment_fetchable": true, "segment_age_s": 38.0, "ttfb_ms": null, "at": null,
        }))
        .unwrap();
        assert_eq!(
            r.cells(),
            ["eu-de", "60.0", "cdn-a", "stale", "1/5", "true", "true", "true", "38.0", "-", "41.3", "-"]
        );
        assert_eq!(decimal(Some(-0.0)), "0.0");
    }

    fn observation(status: RegionStatus, latency: u32) -> RegionObservation {
        RegionObservation { status, latency, at: Timestamp::from_secs(0) }
    }

    #[test]
    fn a_mirror_row_counts_failing_regions_and_says_who_blocked_it() {
        let regions = BTreeMap::from([
            ("ap-sg".to_owned(), observation(RegionStatus::Timeout, 0)),
            ("eu-de".to_owned(), observation(RegionStatus::Ok, 40)),
            ("us-va".to_owned(), observation(RegionStatus::BlockedInferred, 35)),
        ]);
        // From the API's body, as ctl reads it.
        let m: MirrorView = serde_json::from_value(serde_json::json!({
            "host": "m1.example.net", "tenants": [], "weight": 2, "manual_block": true,
            "manual_note": "TICKET-7", "check": null, "address": null, "verdict": "blocked",
            "verdict_since": "1970-01-01T00:00:00Z", "last_check": null, "blocked_count": 2,
            "total_checked": 3, "regions": regions, "probers": [],
        }))
        .unwrap();
        assert_eq!(
            m.cells(),
            ["m1.example.net", "blocked", "1970-01-01T00:00:00.000Z", "2/3", "2", "(all)", "yes: TICKET-7"]
        );
        let row = ("us-va".to_owned(), observation(RegionStatus::BlockedInferred, 35)).cells();
        assert_eq!(row[..3], ["us-va", "blocked-inferred", "35"]);
        assert_eq!(("ap-sg".to_owned(), observation(RegionStatus::Timeout, 0)).cells()[2], "-");
    }

    #[test]
    fn a_prober_row_shows_its_window() {
        let p = MirrorProberView {
            prober: 4,
            name: "probe-sg-1".into(),
            region: "ap-sg".into(),
            status: RegionStatus::Ok,
            error: None,
            rtt_ms: Some(12.345),
            checked: Timestamp::from_secs(0),
            window: WindowView {
                good: 5,
                threshold: 3,
                window: 8,
                avg_rtt_ms: 12.0,
                connected: "44444".into(),
                sent: "xxxxx".into(),
                received: "RRRRR".into(),
                good_strip: "HHHHH".into(),
                text: String::new(),
            },
        };
        let row = p.cells();
        assert_eq!(row[..5], ["probe-sg-1", "ap-sg", "ok", "-", "12.3"]);
        assert_eq!(row[6..], ["5/3/8", "HHHHH"]);
    }
}
