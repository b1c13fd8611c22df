//! The pages: each reads the admin API (in process, as the visitor), shapes what it read into
//! rows of text for its template, and renders. Nothing here decides anything the API has not
//! already decided; the only judgement is how a node's state reads at a glance ([`health`]).

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use askama::Template;
use axum::Extension;
use axum::extract::{Path, Query};
use axum::http::StatusCode;
use axum::response::{Html, IntoResponse, Response};
use serde::Deserialize;
use serde_json::Value;
use vantage_core::Timestamp;

use super::chart::{self, Chart};
use super::client::{Client, PageError};
use super::format::{
    self, Markup, Tone, action, badge, comparison, esc, level, metric, ms, num, pct, time, time_or, word,
};
use super::views::{self, Items};
use super::{Ui, Visitor, render};
use crate::support::now;
use crate::views::{ProberKind, PublishState};
use vantage_control::config::TokenState;
use vantage_control::observe::ProberStatus;
use vantage_core::address::AddressSource;
use vantage_core::ids::{GroupId, LineId, RegionId};
use vantage_core::reachability::Reachability;
use vantage_core::rules::{Aggregate, MatchMode};

type PageResult = Result<Response, PageError>;

/// What every page's frame shows: the title, which tab is current, who is logged in, and how
/// often the page refreshes itself (0: never).
#[derive(Debug, Clone)]
pub(super) struct Frame {
    title: String,
    active: &'static str,
    user: String,
    refresh: u32,
}

impl Frame {
    fn new(v: &Visitor, title: impl Into<String>, active: &'static str, refresh: u32) -> Self {
        Frame { title: title.into(), active, user: v.user.name.clone(), refresh }
    }
}

fn client(ui: &Ui, v: &Visitor) -> Client {
    Client::new(ui.api.clone(), &v.session)
}

/// Percent-encodes a query value or path.
pub(super) fn urlencode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~' | b'/') {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

// ---------------------------------------------------------------- login and errors

#[derive(Template)]
#[template(path = "login.html")]
struct LoginPage<'a> {
    next: &'a str,
    error: Option<&'a str>,
}

/// The login form, with an error when the last try failed.
pub(super) fn login_page(next: &str, error: Option<&str>, status: StatusCode) -> Response {
    let mut r = render(&LoginPage { next, error });
    if r.status() == StatusCode::OK {
        *r.status_mut() = status;
    }
    r
}

#[derive(Template)]
#[template(path = "error.html")]
struct ErrorPage<'a> {
    status: u16,
    message: &'a str,
}

/// A page that says what went wrong.
pub(super) fn error_page(status: StatusCode, message: &str) -> Html<String> {
    Html(
        ErrorPage { status: status.as_u16(), message }
            .render()
            .unwrap_or_else(|_| format!("<!doctype html><title>Error</title><p>{}</p>", esc(message))),
    )
}

/// No such page.
pub(super) fn not_found() -> Response {
    (StatusCode::NOT_FOUND, error_page(StatusCode::NOT_FOUND, "There is no such page.")).into_response()
}

// ---------------------------------------------------------------- shared shapes

/// How a node reads at a glance.
#[derive(Debug, Clone)]
struct Health {
    tone: Tone,
    label: String,
    detail: String,
}

impl Health {
    fn badge(&self) -> Markup {
        badge(self.tone, &self.label)
    }
    fn healthy(&self) -> bool {
        self.tone == Tone::Good
    }
}

/// A node is healthy when it is in service on its primary addresses and none of its
/// addresses is unreachable; the API's fields say all of that.
fn health(n: &views::Node) -> Health {
    let h = |tone, label: &str, detail: String| Health { tone, label: label.to_owned(), detail };
    if !n.enabled {
        return h(Tone::Neutral, "Disabled", "Not probed and not answered".into());
    }
    if n.addresses.is_empty() {
        return h(Tone::Bad, "No address", "No scheduling address: configure one or start its agent".into());
    }
    let Some(serving) = n.serving else {
        return h(Tone::Neutral, "Not evaluated", "Waiting for the first evaluation".into());
    };
    if !serving {
        return h(
            Tone::Bad,
            "Not answered",
            "Left out of DNS: its agent or a required link is not fresh".into(),
        );
    }
    let down: Vec<String> = n
        .addresses
        .iter()
        .filter(|a| a.reachability == Some(Reachability::Unreachable))
        .map(|a| a.ip.to_string())
        .collect();
    match n.level.map(|l| word(&l)).as_deref() {
        None => h(Tone::Bad, "Unreachable", format!("Every address is unreachable: {}", down.join(", "))),
        Some(l) if l != "primary" => {
            let mut why = Vec::new();
            if let Some(r) = &n.held_by {
                why.push(format!("Held by rule {}", r.name.as_deref().unwrap_or("(deleted)")));
            }
            if !down.is_empty() {
                why.push(format!("Unreachable: {}", down.join(", ")));
            }
            h(Tone::Warn, &format!("On {}", level(l)), why.join(" · "))
        }
        Some(_) if !down.is_empty() => h(Tone::Warn, "Degraded", format!("Unreachable: {}", down.join(", "))),
        Some(_) => h(Tone::Good, "Healthy", String::new()),
    }
}

/// Region names by id: `Singapore (ap-sg)`.
fn region_names(regions: &[views::Region]) -> HashMap<RegionId, String> {
    regions.iter().map(|r| (RegionId(r.id), format!("{} ({})", r.name, r.code))).collect()
}

/// One probe result with its window strip, for the node and prober pages.
#[derive(Debug)]
struct ResultView {
    /// The other side: the prober on a node page, the node on a prober page.
    who: String,
    who_href: String,
    who_note: String,
    region: String,
    address: String,
    loss: Markup,
    rtt: String,
    error: String,
    checked: Markup,
    window: Markup,
    strip: String,
}

fn error_label(code: &str) -> &str {
    match code {
        "timeout" => "Timed out",
        "refused" => "Connection refused",
        "reset" => "Connection reset",
        "tls" => "TLS handshake failed",
        "status" => "Unexpected status",
        "unreachable" => "Network unreachable",
        "manifest" => "Bad manifest",
        "segment" => "Segment failed",
        "stale" => "Stale segment",
        other => other,
    }
}

fn result_view(
    r: &views::ResultRow,
    by_prober: bool,
    regions: &HashMap<RegionId, String>,
    at: Timestamp,
) -> ResultView {
    let (who, who_href, who_note) = if by_prober {
        let note = if r.prober_kind == ProberKind::Node { "node that probes" } else { "" };
        let href = if r.prober_kind == ProberKind::Node {
            format!("/ui/nodes/{}", r.prober)
        } else {
            format!("/ui/probers/{}", r.prober)
        };
        (r.prober_name.clone(), href, note.to_owned())
    } else {
        let name = r.node_name.clone().unwrap_or_else(|| r.target.clone());
        (name, format!("/ui/nodes/{}", r.node), String::new())
    };
    let address = if r.address.is_ipv6() {
        format!("[{}]:{}", r.address, r.port)
    } else {
        format!("{}:{}", r.address, r.port)
    };
    let address = match &r.method {
        Some(m) => format!("{address} {m}"),
        None => address,
    };
    let w = &r.window;
    let ok = w.good >= w.threshold;
    ResultView {
        who,
        who_href,
        who_note,
        region: r.region.and_then(|id| regions.get(&id).cloned()).unwrap_or_else(|| "—".into()),
        address,
        loss: badge(
            if r.lost == 0 {
                Tone::Good
            } else if r.lost >= r.sent {
                Tone::Bad
            } else {
                Tone::Warn
            },
            &format!("{} ({}/{})", pct(r.loss_pct), r.lost, r.sent),
        ),
        rtt: ms(r.rtt_ms),
        error: r.error.map(|e| format!("{} ({})", error_label(e.as_str()), e.as_str())).unwrap_or_default(),
        checked: time(r.checked, at),
        window: badge(
            if ok { Tone::Good } else { Tone::Bad },
            &format!("good {} of {} (threshold {})", w.good, w.window, w.threshold),
        ),
        strip: w.text.trim_end().to_owned(),
    }
}

// ---------------------------------------------------------------- overview

#[derive(Debug)]
struct ClusterRow {
    id: i64,
    name: String,
    domain: String,
    mode: String,
    listeners: String,
    nodes: usize,
    healthy: usize,
    revision: String,
    revision_at: Markup,
}

impl ClusterRow {
    /// A cluster with the health of its nodes and its newest revision (number, time).
    fn new<'a>(
        c: &views::Cluster,
        healths: impl Iterator<Item = &'a Health>,
        revision: String,
        revision_at: Markup,
    ) -> Self {
        let (mut nodes, mut healthy) = (0, 0);
        for h in healths {
            nodes += 1;
            healthy += usize::from(h.healthy());
        }
        ClusterRow {
            id: c.id,
            name: c.name.clone(),
            domain: c.domain.clone(),
            mode: word(&c.dns_mode),
            listeners: listeners_text(c),
            nodes,
            healthy,
            revision,
            revision_at,
        }
    }
}

#[derive(Debug)]
struct RevisionRow {
    cluster: String,
    cluster_id: i64,
    number: u32,
    at: Markup,
    reason: String,
}

#[derive(Debug)]
struct ProblemRow {
    id: i64,
    name: String,
    cluster: String,
    health: Markup,
    detail: String,
}

#[derive(Debug)]
struct AlertRow {
    kind: String,
    summary: String,
    fired: Markup,
    resolved: Markup,
}

fn alert_row(a: &views::Alert, at: Timestamp) -> AlertRow {
    AlertRow {
        kind: a.kind.replace('_', " "),
        summary: a.summary.clone(),
        fired: time(a.fired_at, at),
        resolved: time_or(a.resolved_at, at, "open"),
    }
}

#[derive(Template)]
#[template(path = "overview.html")]
struct OverviewPage {
    frame: Frame,
    clusters: Vec<ClusterRow>,
    nodes_total: usize,
    nodes_healthy: usize,
    nodes_unhealthy: usize,
    nodes_disabled: usize,
    probers_total: usize,
    probers_online: usize,
    probers_offline: usize,
    probers_disabled: usize,
    alerts: Vec<AlertRow>,
    revisions: Vec<RevisionRow>,
    problems: Vec<ProblemRow>,
}

fn listeners_text(c: &views::Cluster) -> String {
    c.listeners
        .iter()
        .map(|l| {
            format!("{} {}{}", l.port, word(&l.protocol), if l.proxy_protocol { " (PROXY)" } else { "" })
        })
        .collect::<Vec<_>>()
        .join(", ")
}

pub(super) async fn overview(
    Extension(ui): Extension<Arc<Ui>>,
    Extension(v): Extension<Visitor>,
) -> PageResult {
    let api = client(&ui, &v);
    let at = now();
    let clusters: Items<views::Cluster> = api.get("/v1/clusters").await?;
    let nodes: Items<views::Node> = api.get("/v1/nodes").await?;
    let probers: Items<views::Prober> = api.get("/v1/probers").await?;
    let alerts: views::Alerts = api.get("/v1/alerts").await?;
    let healths: Vec<(views::Node, Health)> = nodes
        .items
        .into_iter()
        .map(|n| {
            let h = health(&n);
            (n, h)
        })
        .collect();
    let cluster_names: HashMap<i64, String> = clusters.items.iter().map(|c| (c.id, c.name.clone())).collect();
    let mut rows = Vec::new();
    let mut revisions = Vec::new();
    for c in &clusters.items {
        let revs: views::Revisions = api.get(&format!("/v1/clusters/{}/revisions?limit=5", c.id)).await?;
        let latest = revs.items.first();
        rows.push(ClusterRow::new(
            c,
            healths.iter().filter(|(n, _)| n.cluster.0 == c.id).map(|(_, h)| h),
            latest.map(|r| format!("#{} {}", r.number, r.reason)).unwrap_or_else(|| "none yet".into()),
            time_or(latest.map(|r| r.at), at, ""),
        ));
        revisions.extend(revs.items.into_iter().map(|r| (r.at, c.id, r)));
    }
    revisions.sort_by_key(|r| std::cmp::Reverse(r.0));
    let revisions = revisions
        .into_iter()
        .take(10)
        .map(|(_, cid, r)| RevisionRow {
            cluster: cluster_names.get(&cid).cloned().unwrap_or_default(),
            cluster_id: cid,
            number: r.number,
            at: time(r.at, at),
            reason: r.reason,
        })
        .collect();
    let problems = healths
        .iter()
        .filter(|(n, h)| n.enabled && !h.healthy())
        .map(|(n, h)| ProblemRow {
            id: n.id,
            name: n.name.clone(),
            cluster: cluster_names.get(&n.cluster.0).cloned().unwrap_or_default(),
            health: h.badge(),
            detail: h.detail.clone(),
        })
        .collect();
    let count = |s: ProberStatus| probers.items.iter().filter(|p| p.status == s).count();
    let page = OverviewPage {
        frame: Frame::new(&v, "Overview", "overview", 10),
        nodes_total: healths.len(),
        nodes_healthy: healths.iter().filter(|(_, h)| h.healthy()).count(),
        nodes_disabled: healths.iter().filter(|(n, _)| !n.enabled).count(),
        nodes_unhealthy: healths.iter().filter(|(n, h)| n.enabled && !h.healthy()).count(),
        probers_total: probers.items.len(),
        probers_online: count(ProberStatus::Online),
        probers_offline: count(ProberStatus::Offline),
        probers_disabled: count(ProberStatus::Disabled),
        alerts: alerts.open.iter().map(|a| alert_row(a, at)).collect(),
        clusters: rows,
        revisions,
        problems,
    };
    Ok(render(&page))
}

// ---------------------------------------------------------------- regions

#[derive(Debug)]
struct RegionRow {
    id: i64,
    code: String,
    name: String,
    probers: usize,
}

#[derive(Template)]
#[template(path = "regions.html")]
struct RegionsPage {
    frame: Frame,
    regions: Vec<RegionRow>,
}

pub(super) async fn regions(
    Extension(ui): Extension<Arc<Ui>>,
    Extension(v): Extension<Visitor>,
) -> PageResult {
    let regions: Items<views::Region> = client(&ui, &v).get("/v1/regions").await?;
    let page = RegionsPage {
        frame: Frame::new(&v, "Regions", "regions", 0),
        regions: regions
            .items
            .into_iter()
            .map(|r| RegionRow { id: r.id, code: r.code, name: r.name, probers: r.probers })
            .collect(),
    };
    Ok(render(&page))
}

// ---------------------------------------------------------------- probers

#[derive(Debug)]
struct ProberRow {
    id: i64,
    name: String,
    hostname: String,
    region: String,
    status: Markup,
    last_seen: Markup,
    version: String,
    last_round: Option<RoundView>,
    targets: u32,
    enabled: bool,
}

/// A prober's last round: loss, mean RTT, and how many targets lost every attempt.
#[derive(Debug)]
struct RoundView {
    loss: String,
    rtt: String,
    unreachable: Markup,
}

fn round_view(r: &views::Round) -> RoundView {
    let unreachable = match r.unreachable {
        0 => badge(Tone::Good, "every target answered"),
        1 => badge(Tone::Bad, "1 target unreachable"),
        n => badge(Tone::Bad, &format!("{n} targets unreachable")),
    };
    RoundView { loss: pct(r.loss_pct), rtt: ms(r.mean_rtt_ms), unreachable }
}

#[derive(Debug)]
struct TokenRow {
    name: String,
    prefix: String,
    region: String,
    expires: Markup,
}

#[derive(Template)]
#[template(path = "probers.html")]
struct ProbersPage {
    frame: Frame,
    probers: Vec<ProberRow>,
    regions: Vec<(i64, String)>,
    tokens: Vec<TokenRow>,
}

pub(super) async fn probers(
    Extension(ui): Extension<Arc<Ui>>,
    Extension(v): Extension<Visitor>,
) -> PageResult {
    let api = client(&ui, &v);
    let at = now();
    let probers: Items<views::Prober> = api.get("/v1/probers").await?;
    let regions: Items<views::Region> = api.get("/v1/regions").await?;
    let tokens: Items<views::EnrollToken> = api.get("/v1/probers/tokens").await?;
    let names = region_names(&regions.items);
    let rows = probers
        .items
        .iter()
        .map(|p| ProberRow {
            id: p.id,
            name: p.name.clone(),
            hostname: p.hostname.clone().filter(|h| *h != p.name).unwrap_or_default(),
            region: names.get(&p.region).cloned().unwrap_or_else(|| format!("region {}", p.region)),
            status: format::prober_status(&word(&p.status)),
            last_seen: time_or(p.last_seen, at, "never"),
            version: p.version.clone().unwrap_or_else(|| "—".into()),
            last_round: p.last_round.as_ref().map(round_view),
            targets: p.targets,
            enabled: p.enabled,
        })
        .collect();
    let tokens = tokens
        .items
        .into_iter()
        .filter(|t| t.state == TokenState::Valid)
        .map(|t| TokenRow {
            name: t.name,
            prefix: t.prefix,
            region: t.region.and_then(|r| names.get(&r).cloned()).unwrap_or_default(),
            expires: time(t.expires_at, at),
        })
        .collect();
    let page = ProbersPage {
        frame: Frame::new(&v, "Probers", "probers", 10),
        probers: rows,
        regions: regions.items.iter().map(|r| (r.id, format!("{} ({})", r.name, r.code))).collect(),
        tokens,
    };
    Ok(render(&page))
}

#[derive(Template)]
#[template(path = "prober.html")]
struct ProberPage {
    frame: Frame,
    row: ProberRow,
    results: Vec<ResultView>,
    results_by_prober: bool,
}

pub(super) async fn prober(
    Extension(ui): Extension<Arc<Ui>>,
    Extension(v): Extension<Visitor>,
    Path(id): Path<i64>,
) -> PageResult {
    let api = client(&ui, &v);
    let at = now();
    let p: views::Prober = api.get(&format!("/v1/probers/{id}")).await?;
    let regions: Items<views::Region> = api.get("/v1/regions").await?;
    let results: Items<views::ResultRow> = api.get(&format!("/v1/probers/{id}/results")).await?;
    let names = region_names(&regions.items);
    let row = ProberRow {
        id: p.id,
        name: p.name.clone(),
        hostname: p.hostname.clone().unwrap_or_default(),
        region: names.get(&p.region).cloned().unwrap_or_default(),
        status: format::prober_status(&word(&p.status)),
        last_seen: time_or(p.last_seen, at, "never"),
        version: p.version.clone().unwrap_or_else(|| "—".into()),
        last_round: p.last_round.as_ref().map(round_view),
        targets: p.targets,
        enabled: p.enabled,
    };
    let page = ProberPage {
        frame: Frame::new(&v, format!("Prober {}", p.name), "probers", 10),
        row,
        results: results.items.iter().map(|r| result_view(r, false, &names, at)).collect(),
        results_by_prober: false,
    };
    Ok(render(&page))
}

// ---------------------------------------------------------------- clusters

#[derive(Template)]
#[template(path = "clusters.html")]
struct ClustersPage {
    frame: Frame,
    clusters: Vec<ClusterRow>,
}

pub(super) async fn clusters(
    Extension(ui): Extension<Arc<Ui>>,
    Extension(v): Extension<Visitor>,
) -> PageResult {
    let api = client(&ui, &v);
    let at = now();
    let clusters: Items<views::Cluster> = api.get("/v1/clusters").await?;
    let nodes: Items<views::Node> = api.get("/v1/nodes").await?;
    let mut rows = Vec::new();
    for c in &clusters.items {
        let dns: views::Dns = api.get(&format!("/v1/clusters/{}/dns", c.id)).await?;
        let mine: Vec<Health> = nodes.items.iter().filter(|n| n.cluster.0 == c.id).map(health).collect();
        rows.push(ClusterRow::new(
            c,
            mine.iter(),
            dns.revision.map(|n| format!("#{n}")).unwrap_or_else(|| "none yet".into()),
            time_or(dns.at, at, ""),
        ));
    }
    let page = ClustersPage { frame: Frame::new(&v, "Clusters", "clusters", 10), clusters: rows };
    Ok(render(&page))
}

#[derive(Debug)]
struct GroupRow {
    name: String,
    region: String,
    nodes: usize,
}

#[derive(Debug)]
struct LineRow {
    name: String,
    group: String,
    backups: String,
    min_healthy: u32,
    networks: String,
}

#[derive(Debug)]
struct DnsRow {
    line: String,
    networks: String,
    records: Vec<String>,
}

#[derive(Debug)]
struct NodeRow {
    id: i64,
    name: String,
    group: String,
    health: Markup,
    detail: String,
    addresses: Vec<(String, String, Markup, bool)>,
    agent: Markup,
}

#[derive(Debug)]
struct RevisionView {
    number: u32,
    at: Markup,
    reason: String,
    lines: Vec<(String, String)>,
    held: Vec<(String, String)>,
    publish: Vec<(String, Markup)>,
}

#[derive(Debug)]
struct RuleRow {
    name: String,
    line: String,
    action: String,
    conditions: Vec<String>,
    timing: String,
    enabled: bool,
    acting_on: String,
}

#[derive(Debug)]
struct PreviewRowView {
    rule: String,
    node: String,
    node_id: i64,
    status: Markup,
    conditions: Vec<String>,
    outcome: String,
}

/// The preview section: not offered by this server, or rows, or why it could not be read.
#[derive(Debug)]
enum PreviewView {
    Missing,
    Rows(Vec<PreviewRowView>),
    Unreadable(String),
}

#[derive(Template)]
#[template(path = "cluster.html")]
struct ClusterPage {
    frame: Frame,
    c: views::Cluster,
    dns_mode: String,
    listeners: String,
    dns_revision: String,
    dns_at: Markup,
    dns: Vec<DnsRow>,
    all: Vec<String>,
    groups: Vec<GroupRow>,
    lines: Vec<LineRow>,
    nodes: Vec<NodeRow>,
    revisions: Vec<RevisionView>,
    rules: Vec<RuleRow>,
    preview: PreviewView,
}

/// Each value as text.
fn strings<T: ToString>(v: &[T]) -> Vec<String> {
    v.iter().map(ToString::to_string).collect()
}

fn revision_view(
    r: views::Revision,
    line_names: &BTreeMap<String, views::LineName>,
    at: Timestamp,
) -> RevisionView {
    let name =
        |id: LineId| line_names.get(&id.to_string()).map_or_else(|| format!("line {id}"), |l| l.name.clone());
    let lines = r.records.lines.iter().map(|(id, recs)| (name(*id), strings(recs).join(" "))).collect();
    let held = r.held.iter().map(|(id, why)| (name(*id), why.clone())).collect();
    let publish = r
        .publish
        .iter()
        .map(|p| {
            let tone = if p.status == PublishState::Published { Tone::Good } else { Tone::Bad };
            let reason = p.reason.as_ref().map(|r| format!(": {r}")).unwrap_or_default();
            (p.target.clone(), badge(tone, &format!("{}{reason}", word(&p.status))))
        })
        .collect();
    RevisionView { number: r.number, at: time(r.at, at), reason: r.reason, lines, held, publish }
}

fn condition_text(c: &views::Condition, regions: &HashMap<RegionId, String>) -> String {
    let name = word(&c.metric);
    let (label, unit) = metric(&name);
    let mut scope = Vec::new();
    if c.metric.is_probe() {
        scope.push(
            match c.aggregate {
                Aggregate::Max => "maximum",
                Aggregate::Min => "minimum",
                Aggregate::Avg => "average",
            }
            .to_owned(),
        );
        scope.push(c.region.and_then(|r| regions.get(&r).cloned()).unwrap_or_else(|| "all regions".into()));
    }
    let scope = if scope.is_empty() { String::new() } else { format!(" ({})", scope.join(" · ")) };
    format!(
        "{label}{scope} {} {}{unit} for {} s",
        comparison(&word(&c.comparison)),
        num(c.threshold),
        c.for_s
    )
}

fn preview_view(v: Value) -> PreviewView {
    let preview: views::Preview = match serde_json::from_value(v) {
        Ok(r) => r,
        Err(e) => return PreviewView::Unreadable(e.to_string()),
    };
    PreviewView::Rows(
        preview
            .items
            .into_iter()
            .map(|item| {
                let r = item.row;
                PreviewRowView {
                    rule: r.rule_name,
                    node: r.node_name,
                    node_id: r.node.0,
                    status: format::rule_status(&word(&r.preview.status)),
                    conditions: r
                        .preview
                        .conditions
                        .iter()
                        .map(|c| {
                            let name = word(&c.metric);
                            let (label, unit) = metric(&name);
                            let value =
                                c.value.map_or_else(|| "No data".to_owned(), |v| format!("{}{unit}", num(v)));
                            let held = format!("; held {} of {} s", c.held_s, c.required_s);
                            format!(
                                "{label}: {value} (needs {} {}{unit}{held})",
                                comparison(&word(&c.comparison)),
                                num(c.threshold)
                            )
                        })
                        .collect(),
                    outcome: item.outcome_text,
                }
            })
            .collect(),
    )
}

pub(super) async fn cluster(
    Extension(ui): Extension<Arc<Ui>>,
    Extension(v): Extension<Visitor>,
    Path(id): Path<i64>,
) -> PageResult {
    let api = client(&ui, &v);
    let at = now();
    let c: views::Cluster = api.get(&format!("/v1/clusters/{id}")).await?;
    let groups: Items<views::Group> = api.get(&format!("/v1/clusters/{id}/groups")).await?;
    let lines: Items<views::Line> = api.get(&format!("/v1/clusters/{id}/lines")).await?;
    let nodes: Items<views::Node> = api.get("/v1/nodes").await?;
    let dns: views::Dns = api.get(&format!("/v1/clusters/{id}/dns")).await?;
    let revisions: views::Revisions = api.get(&format!("/v1/clusters/{id}/revisions?limit=20")).await?;
    let rules: Items<views::Rule> = api.get(&format!("/v1/clusters/{id}/rules")).await?;
    let preview: Option<Value> = api.get_optional(&format!("/v1/clusters/{id}/preview")).await?;
    let regions: Items<views::Region> = api.get("/v1/regions").await?;
    let region_names = region_names(&regions.items);
    let group_names: HashMap<GroupId, String> =
        groups.items.iter().map(|g| (GroupId(g.id), g.name.clone())).collect();
    let line_names: HashMap<LineId, String> =
        lines.items.iter().map(|l| (LineId(l.id), l.name.clone())).collect();
    let nodes: Vec<&views::Node> = nodes.items.iter().filter(|n| n.cluster.0 == id).collect();
    let node_rows = nodes
        .iter()
        .map(|n| {
            let h = health(n);
            NodeRow {
                id: n.id,
                name: n.name.clone(),
                group: group_names.get(&n.group).cloned().unwrap_or_default(),
                health: h.badge(),
                detail: h.detail,
                addresses: n
                    .addresses
                    .iter()
                    .map(|a| {
                        (
                            a.ip.to_string(),
                            level(&word(&a.level)),
                            format::reachability(a.reachability.map(|r| word(&r)).as_deref()),
                            a.in_use,
                        )
                    })
                    .collect(),
                agent: if n.online {
                    badge(Tone::Good, "Agent online")
                } else if n.enrolled {
                    badge(Tone::Bad, "Agent offline")
                } else {
                    badge(Tone::Neutral, "No agent")
                },
            }
        })
        .collect();
    let page = ClusterPage {
        frame: Frame::new(&v, format!("Cluster {}", c.name), "clusters", 10),
        listeners: listeners_text(&c),
        dns_revision: dns.revision.map(|n| format!("#{n}")).unwrap_or_else(|| "none yet".into()),
        dns_at: time_or(dns.at, at, ""),
        dns: dns
            .lines
            .iter()
            .map(|l| {
                let nets = strings(&l.client_networks);
                DnsRow {
                    line: l.name.clone(),
                    networks: if nets.is_empty() { "every other client".into() } else { nets.join(", ") },
                    records: strings(&l.records),
                }
            })
            .collect(),
        all: strings(&dns.all),
        groups: groups
            .items
            .iter()
            .map(|g| GroupRow {
                name: g.name.clone(),
                region: g.region.and_then(|r| region_names.get(&r).cloned()).unwrap_or_else(|| "—".into()),
                nodes: nodes.iter().filter(|n| n.group.0 == g.id).count(),
            })
            .collect(),
        lines: lines
            .items
            .iter()
            .map(|l| LineRow {
                name: l.name.clone(),
                group: group_names.get(&l.group).cloned().unwrap_or_default(),
                backups: l
                    .backup_groups
                    .iter()
                    .map(|g| group_names.get(g).cloned().unwrap_or_else(|| format!("group {g}")))
                    .collect::<Vec<_>>()
                    .join(" → "),
                min_healthy: l.min_healthy,
                networks: if l.client_networks.is_empty() {
                    "default line".into()
                } else {
                    strings(&l.client_networks).join(", ")
                },
            })
            .collect(),
        nodes: node_rows,
        revisions: revisions.items.into_iter().map(|r| revision_view(r, &revisions.lines, at)).collect(),
        rules: rules
            .items
            .iter()
            .map(|view| (view, &view.rule))
            .map(|(view, r)| RuleRow {
                name: r.name.clone(),
                line: r
                    .line
                    .map(|l| line_names.get(&l).cloned().unwrap_or_else(|| format!("line {l}")))
                    .unwrap_or_else(|| "All lines".into()),
                action: action(&word(&r.action)),
                conditions: r.conditions.iter().map(|c| condition_text(c, &region_names)).collect(),
                timing: format!(
                    "{} · hold ≥ {} s · recover after {} s",
                    if r.match_mode == MatchMode::Any { "any condition" } else { "all conditions" },
                    r.hold_s,
                    r.recover_s
                ),
                enabled: r.enabled,
                acting_on: view.acting_on.join(", "),
            })
            .collect(),
        preview: preview.map_or(PreviewView::Missing, preview_view),
        dns_mode: word(&c.dns_mode),
        c,
    };
    Ok(render(&page))
}

// ---------------------------------------------------------------- node

#[derive(Debug)]
struct AddressRow {
    ip: String,
    level: String,
    source: String,
    reachability: Markup,
    in_use: bool,
    probers: String,
}

#[derive(Debug)]
struct ChartView {
    svg: Markup,
    legend: Vec<(usize, String, String)>,
}

#[derive(Template)]
#[template(path = "node.html")]
struct NodePage {
    frame: Frame,
    n: views::Node,
    cluster: String,
    group: String,
    health: Markup,
    health_detail: String,
    agent: Markup,
    heartbeat: Markup,
    metrics: Vec<(String, String)>,
    metrics_at: Markup,
    level: String,
    addresses: Vec<AddressRow>,
    results: Vec<ResultView>,
    results_by_prober: bool,
    range: String,
    charts: Vec<(String, ChartView)>,
    history_error: String,
}

#[derive(Debug, Deserialize)]
pub(super) struct RangeQuery {
    range: Option<String>,
}

fn chart_view(
    title: &str,
    unit: &str,
    h: &views::History,
    max: Option<f64>,
    lines: Vec<chart::Line>,
) -> ChartView {
    let legend = lines
        .iter()
        .enumerate()
        .map(|(i, l)| {
            let last = l.points.iter().rev().find_map(|(_, v)| *v);
            let last = match (last, unit) {
                (Some(v), "ms") => format!("last {}", ms(Some(v))),
                (Some(v), _) => format!("last {}", pct(v)),
                (None, _) => "no data".into(),
            };
            (i % chart::COLOURS, l.label.clone(), last)
        })
        .collect();
    let svg = Chart { title, unit, since: h.since, until: h.until, bucket_s: h.bucket_s, max, lines: &lines }
        .render();
    ChartView { svg, legend }
}

fn node_charts(h: &views::History, range: &str) -> Vec<(String, ChartView)> {
    let by_address = |rtt: bool| -> Vec<chart::Line> {
        h.addresses
            .iter()
            .map(|a| chart::Line {
                label: a.ip.to_string(),
                points: a
                    .points
                    .iter()
                    .map(|p| (p.at, if rtt { p.rtt_ms } else { Some(p.loss_pct) }))
                    .collect(),
            })
            .collect()
    };
    let by_region = |rtt: bool| -> Vec<chart::Line> {
        h.regions
            .iter()
            .map(|r| chart::Line {
                label: match (&r.name, &r.code) {
                    (Some(n), Some(c)) => format!("{n} ({c})"),
                    _ => "no region".into(),
                },
                points: r
                    .points
                    .iter()
                    .map(|p| (p.at, if rtt { p.rtt_ms } else { Some(p.loss_pct) }))
                    .collect(),
            })
            .collect()
    };
    let span = format!("last {range}");
    vec![
        (
            format!("Loss by address, {span}"),
            chart_view("Loss by address", "%", h, Some(100.0), by_address(false)),
        ),
        (format!("RTT by address, {span}"), chart_view("RTT by address", "ms", h, None, by_address(true))),
        (
            format!("Loss by prober region, {span}"),
            chart_view("Loss by region", "%", h, Some(100.0), by_region(false)),
        ),
        (
            format!("RTT by prober region, {span}"),
            chart_view("RTT by region", "ms", h, None, by_region(true)),
        ),
    ]
}

pub(super) async fn node(
    Extension(ui): Extension<Arc<Ui>>,
    Extension(v): Extension<Visitor>,
    Path(id): Path<i64>,
    Query(q): Query<RangeQuery>,
) -> PageResult {
    let api = client(&ui, &v);
    let at = now();
    let range = match q.range.as_deref() {
        Some(r @ ("1h" | "24h" | "14d")) => r.to_owned(),
        _ => "1h".to_owned(),
    };
    let n: views::Node = api.get(&format!("/v1/nodes/{id}")).await?;
    let c: views::Cluster = api.get(&format!("/v1/clusters/{}", n.cluster)).await?;
    let groups: Items<views::Group> = api.get(&format!("/v1/clusters/{}/groups", n.cluster)).await?;
    let regions: Items<views::Region> = api.get("/v1/regions").await?;
    let results: Items<views::ResultRow> = api.get(&format!("/v1/nodes/{id}/results")).await?;
    let history: Result<views::History, PageError> =
        api.get(&format!("/v1/nodes/{id}/history?range={range}")).await;
    let names = region_names(&regions.items);
    let h = health(&n);
    let (charts, history_error) = match history {
        Ok(hist) => (node_charts(&hist, &range), String::new()),
        Err(PageError::LoggedOut) => return Err(PageError::LoggedOut),
        Err(PageError::NotFound(m) | PageError::Failed(_, m)) => (Vec::new(), m),
    };
    let metrics = n
        .metrics
        .as_ref()
        .map(|m| {
            let mem = if m.memory_total_bytes > 0 {
                format!(
                    "{} ({:.1} of {:.1} GiB)",
                    pct(m.memory_used_bytes as f64 * 100.0 / m.memory_total_bytes as f64),
                    m.memory_used_bytes as f64 / 1_073_741_824.0,
                    m.memory_total_bytes as f64 / 1_073_741_824.0
                )
            } else {
                "—".into()
            };
            vec![
                ("CPU".to_owned(), pct(m.cpu_pct)),
                ("Load".to_owned(), format!("{:.2} / {:.2} / {:.2}", m.load1, m.load5, m.load15)),
                ("Memory".to_owned(), mem),
                ("Egress".to_owned(), format!("{:.1} Mbps", m.egress_mbps)),
                ("Connections".to_owned(), m.connections.to_string()),
            ]
        })
        .unwrap_or_default();
    let page = NodePage {
        frame: Frame::new(&v, format!("Node {}", n.name), "clusters", 10),
        cluster: c.name,
        group: groups.items.iter().find(|g| g.id == n.group.0).map(|g| g.name.clone()).unwrap_or_default(),
        health: h.badge(),
        health_detail: h.detail,
        agent: if n.online {
            badge(Tone::Good, "Online")
        } else if n.enrolled {
            badge(Tone::Bad, "Offline")
        } else {
            badge(Tone::Neutral, "Not enrolled")
        },
        heartbeat: time_or(n.last_heartbeat, at, "no heartbeat"),
        metrics_at: time_or(n.metrics.as_ref().map(|m| m.at), at, "No metrics"),
        metrics,
        level: n.level.map_or_else(|| "none".into(), |l| level(&word(&l))),
        addresses: n
            .addresses
            .iter()
            .map(|a| AddressRow {
                ip: a.ip.to_string(),
                level: level(&word(&a.level)),
                source: if a.source == AddressSource::Configured {
                    "Configured".into()
                } else {
                    "Reported".into()
                },
                reachability: format::reachability(a.reachability.map(|r| word(&r)).as_deref()),
                in_use: a.in_use,
                probers: a
                    .probers
                    .as_ref()
                    .map(|p| format!("{} of {} failing", p.failing, p.counting))
                    .unwrap_or_else(|| "—".into()),
            })
            .collect(),
        results: results.items.iter().map(|r| result_view(r, true, &names, at)).collect(),
        results_by_prober: true,
        range,
        charts,
        history_error,
        n,
    };
    Ok(render(&page))
}

// ---------------------------------------------------------------- audit

#[derive(Debug, Deserialize, Default)]
pub(super) struct AuditQuery {
    #[serde(default)]
    action: String,
    #[serde(default)]
    actor: String,
    #[serde(default)]
    object: String,
    #[serde(default)]
    since: String,
    #[serde(default)]
    until: String,
    #[serde(default)]
    limit: String,
}

#[derive(Debug)]
struct AuditRow {
    at: Markup,
    actor: String,
    action: String,
    object: String,
    object_href: String,
    metadata: String,
    metadata_full: String,
}

#[derive(Template)]
#[template(path = "audit.html")]
struct AuditPage {
    frame: Frame,
    q: AuditQuery,
    rows: Vec<AuditRow>,
    error: String,
}

fn object_href(object: &str) -> String {
    match object.split_once(':') {
        Some(("node", id)) => format!("/ui/nodes/{id}"),
        Some(("cluster", id)) => format!("/ui/clusters/{id}"),
        Some(("prober", id)) => format!("/ui/probers/{id}"),
        Some(("region", _)) => "/ui/regions".into(),
        _ => String::new(),
    }
}

pub(super) async fn audit(
    Extension(ui): Extension<Arc<Ui>>,
    Extension(v): Extension<Visitor>,
    Query(q): Query<AuditQuery>,
) -> PageResult {
    let at = now();
    let filters: Vec<String> = [
        ("action", &q.action),
        ("actor", &q.actor),
        ("object", &q.object),
        ("since", &q.since),
        ("until", &q.until),
        ("limit", &q.limit),
    ]
    .iter()
    .filter(|(_, v)| !v.trim().is_empty())
    .map(|(k, v)| format!("{k}={}", urlencode(v.trim())))
    .collect();
    let path =
        if filters.is_empty() { "/v1/audit".to_owned() } else { format!("/v1/audit?{}", filters.join("&")) };
    let (rows, error) = match client(&ui, &v).get::<Items<views::AuditEntry>>(&path).await {
        Ok(items) => (items.items, String::new()),
        Err(PageError::Failed(StatusCode::BAD_REQUEST, m)) => (Vec::new(), m),
        Err(e) => return Err(e),
    };
    let rows = rows
        .into_iter()
        .map(|e| {
            let full =
                if e.metadata.as_object().is_some_and(serde_json::Map::is_empty) || e.metadata.is_null() {
                    String::new()
                } else {
                    e.metadata.to_string()
                };
            let short = if full.chars().count() > 160 {
                format!("{}…", full.chars().take(160).collect::<String>())
            } else {
                full.clone()
            };
            AuditRow {
                at: time(e.at, at),
                actor: e.actor,
                action: e.action,
                object_href: object_href(&e.object),
                object: e.object,
                metadata: short,
                metadata_full: full,
            }
        })
        .collect();
    let page = AuditPage { frame: Frame::new(&v, "Audit", "audit", 0), q, rows, error };
    Ok(render(&page))
}

// ---------------------------------------------------------------- alerts

#[derive(Template)]
#[template(path = "alerts.html")]
struct AlertsPage {
    frame: Frame,
    open: Vec<AlertRow>,
    recent: Vec<AlertRow>,
}

pub(super) async fn alerts(
    Extension(ui): Extension<Arc<Ui>>,
    Extension(v): Extension<Visitor>,
) -> PageResult {
    let at = now();
    let a: views::Alerts = client(&ui, &v).get("/v1/alerts").await?;
    let mut recent = a.recent;
    recent.sort_by_key(|a| std::cmp::Reverse(a.resolved_at));
    let page = AlertsPage {
        frame: Frame::new(&v, "Alerts", "alerts", 10),
        open: a.open.iter().map(|x| alert_row(x, at)).collect(),
        recent: recent.iter().map(|x| alert_row(x, at)).collect(),
    };
    Ok(render(&page))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(json: Value) -> views::Node {
        let mut base = serde_json::json!({
            "id": 7, "created_at": "2026-12-01T09:00:00Z", "updated_at": "2026-12-01T09:00:00Z",
            "name": "sin-1a", "cluster": 1, "group": 2, "enabled": true, "also_probes": false,
            "enrolled": false, "online": false, "last_heartbeat": null, "version": null, "hostname": null,
            "connects_from": null, "capabilities": [], "metrics": null, "links": [], "reported_addresses": [],
            "serving": true, "held_by": null,
        });
        if let (Some(b), Some(extra)) = (base.as_object_mut(), json.as_object()) {
            b.extend(extra.clone());
        }
        serde_json::from_value(base).unwrap()
    }

    /// A node that a backup-IP rule holds on backup 1 after its primary recovered: the page
    /// says which rule holds it, not "Unreachable:" with nothing after it.
    #[test]
    fn a_node_held_on_backup_by_a_rule_names_the_rule() {
        let n = node(serde_json::json!({
            "level": "backup1",
            "held_by": {"rule": 3, "name": "egress"},
            "addresses": [
                {"ip": "203.0.113.10", "level": "primary", "source": "configured", "reachability": "reachable", "in_use": false},
                {"ip": "198.51.100.10", "level": "backup1", "source": "configured", "reachability": "reachable", "in_use": true},
            ],
        }));
        let h = health(&n);
        assert_eq!(h.label, "On Backup 1");
        assert_eq!(h.detail, "Held by rule egress");
        let down = node(serde_json::json!({
            "level": "backup1",
            "addresses": [
                {"ip": "203.0.113.10", "level": "primary", "source": "configured", "reachability": "unreachable", "in_use": false},
                {"ip": "198.51.100.10", "level": "backup1", "source": "configured", "reachability": "reachable", "in_use": true},
            ],
        }));
        assert_eq!(health(&down).detail, "Unreachable: 203.0.113.10");
    }
}
