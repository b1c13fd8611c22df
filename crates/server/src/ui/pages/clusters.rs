//! The cluster list and one cluster: DNS answers, groups, lines, nodes, revisions, rules and their preview.

use super::*;
use vantage_core::geo::describe_clients;
use vantage_core::model::AllDown;
use vantage_core::rules::Outcome;

#[derive(Template)]
#[template(path = "clusters.html")]
struct ClustersPage {
    frame: Frame,
    clusters: Vec<ClusterRow>,
}

pub(in crate::ui) async fn clusters(
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
    id: i64,
    name: String,
    region: String,
    nodes: usize,
    drained: bool,
    /// Its fields as the API takes them, for the form that edits it.
    values: String,
}

#[derive(Debug)]
struct LineRow {
    id: i64,
    name: String,
    group: String,
    backups: String,
    /// How its groups are ordered: as configured, or by RTT from a region.
    order: String,
    min_healthy: u32,
    networks: String,
    all_down: &'static str,
    /// Its availability bars.
    availability: Markup,
    /// Its fields as the API takes them, for the form that edits it.
    values: String,
}

#[derive(Debug)]
struct DnsRow {
    line: String,
    networks: String,
    records: Vec<String>,
    since: Markup,
    /// Which all-down policy it answers by, and why, while it does.
    held: Option<(&'static str, String)>,
}

#[derive(Debug)]
struct NodeRow {
    id: i64,
    name: String,
    group: String,
    health: Markup,
    detail: String,
    addresses: Vec<(String, String, Markup, bool)>,
    no_public_address: bool,
    agent: Markup,
    /// The source address of its latest heartbeat, else of its enrollment.
    connects_from: String,
    /// CPU and memory while fresh, else empty.
    metrics: String,
    /// Its availability: a bar per day, and the 30 days' figure.
    availability: Markup,
}

#[derive(Debug)]
struct RevisionView {
    number: u32,
    at: Markup,
    reason: String,
    lines: Vec<(String, String)>,
    /// Lines that answered by their all-down policy: name, the policy's word, why.
    held: Vec<(String, &'static str, String)>,
    publish: Vec<(String, Markup)>,
}

#[derive(Debug)]
struct RuleRow {
    id: i64,
    name: String,
    line: String,
    action: String,
    conditions: Vec<String>,
    timing: String,
    enabled: bool,
    acting_on: String,
    /// Its fields as the API holds them, for the form that edits it.
    values: String,
}

#[derive(Debug)]
struct PreviewRowView {
    rule: String,
    node: String,
    node_id: i64,
    status: Markup,
    conditions: Vec<String>,
    outcome: Markup,
}

/// One line in the preview: its all-down policy, what applies now, and what it would answer
/// if every address failed.
#[derive(Debug)]
struct LineOutlookRow {
    line: String,
    /// Its group order with the figures, and why.
    order: String,
    all_down: &'static str,
    now: String,
    if_all_down: String,
}

/// The preview section: not offered by this server, or the rules' rows and the lines', or why
/// it could not be read.
#[derive(Debug)]
enum PreviewView {
    Missing,
    Rows(Vec<PreviewRowView>, Vec<LineOutlookRow>),
    Unreadable(String),
}

#[derive(Template)]
#[template(path = "cluster.html")]
struct ClusterPage {
    frame: Frame,
    c: views::Cluster,
    dns_mode: String,
    listeners: String,
    /// The edit form's values: listeners as `443/https`, aliases and links comma-separated,
    /// the suspect TTL (empty: none), publishers a line each (never their secrets).
    listeners_form: String,
    aliases: String,
    required_links: String,
    suspect_ttl: String,
    publishers: String,
    /// The named checks the cluster may name, and whether it names each (names match without
    /// case; one it names that is gone is offered too, so that saving keeps it).
    checks: Vec<(String, bool)>,
    /// `GET /health` (by each listener's protocol), `tcp`: what the check asks.
    check_path: String,
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
    /// The all-down policies a line can take, with what each does.
    /// Regions a new group may be in: (id, name).
    region_choices: Vec<(i64, String)>,
    /// Region ids by code, for the rule form's conditions (JSON).
    region_codes: String,
    all_down_choices: [(&'static str, &'static str); 3],
    events: Vec<timeline::EventRow>,
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
    let held = r.held.iter().map(|(id, h)| (name(*id), policy_word(h.policy), h.reason.clone())).collect();
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

/// The all-down policies, as entered, with what each answers when nothing is healthy.
fn all_down_choices() -> [(&'static str, &'static str); 3] {
    [
        (AllDown::Hold.as_str(), "hold: keep the last records"),
        (AllDown::Online.as_str(), "online: every online node"),
        (AllDown::Nodata.as_str(), "nodata: answer no records"),
    ]
}

/// The badge of a line that answers by its all-down policy.
fn policy_word(p: AllDown) -> &'static str {
    if p == AllDown::Hold { "held" } else { p.as_str() }
}

/// The named checks a cluster may name, marking the one it names (without case), which is
/// added when no check has that name any more.
fn check_choices(mut names: Vec<String>, named: Option<&str>) -> Vec<(String, bool)> {
    if let Some(n) = named.filter(|n| !names.iter().any(|k| k.eq_ignore_ascii_case(n))) {
        names.push(n.to_owned());
    }
    names.into_iter().map(|k| (k.clone(), named.is_some_and(|n| n.eq_ignore_ascii_case(&k)))).collect()
}

/// A publisher as the edit form writes it, without its secret.
fn publisher_line(p: &vantage_core::model::PublisherInput) -> String {
    let zone = p.zone.as_ref().map(|z| format!(" zone={z}")).unwrap_or_default();
    format!("{} {} {} {}{zone}", p.name, p.server, p.key_name, word(&p.key_algorithm))
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

/// What the next evaluation does, as the API says it, with a time to come read as `in 12 s`
/// (its absolute time on hover) rather than as a raw timestamp.
fn outcome(o: &Outcome, text: String, now: Timestamp) -> Markup {
    match o {
        Outcome::InEffectRecoversAt { at } => {
            Markup(format!("In effect, recovers {} at the earliest", time(*at, now)))
        }
        _ => Markup(esc(&text)),
    }
}

fn preview_view(v: Value, at: Timestamp) -> PreviewView {
    let preview: views::Preview = match serde_json::from_value(v) {
        Ok(r) => r,
        Err(e) => return PreviewView::Unreadable(e.to_string()),
    };
    let lines = preview
        .lines
        .into_iter()
        .map(|l| LineOutlookRow {
            order: l.latency_text.unwrap_or_else(|| "as configured".to_owned()),
            now: l.applies_now.map_or_else(|| "By health".to_owned(), |h| h.describe(&l.line_name)),
            all_down: l.all_down.as_str(),
            if_all_down: l.if_all_down_text,
            line: l.line_name,
        })
        .collect();
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
                    outcome: outcome(&r.preview.outcome, item.outcome_text, at),
                }
            })
            .collect(),
        lines,
    )
}

pub(in crate::ui) async fn cluster(
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
    let availability: Items<views::Availability> = api.get(&format!("/v1/availability?cluster={id}")).await?;
    let availability: HashMap<String, Markup> =
        availability.items.iter().map(|r| (r.subject.clone(), format::bars(r))).collect();
    let dns: views::Dns = api.get(&format!("/v1/clusters/{id}/dns")).await?;
    let revisions: views::Revisions =
        api.get_stored(&format!("/v1/clusters/{id}/revisions?limit=20")).await?;
    let events = timeline::recent(&api, &format!("cluster={id}"), at).await?;
    let rules: Items<views::Rule> = api.get(&format!("/v1/clusters/{id}/rules")).await?;
    let preview: Option<Value> = api.get_optional(&format!("/v1/clusters/{id}/preview")).await?;
    let regions: Items<views::Region> = api.get("/v1/regions").await?;
    let checks: Items<views::Check> = api.get("/v1/checks").await?;
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
                no_public_address: n.no_public_address,
                connects_from: n
                    .connects_from
                    .or(n.enrolled_from)
                    .map(|ip| ip.to_string())
                    .unwrap_or_default(),
                metrics: n.usage.as_ref().map(format::usage).unwrap_or_default(),
                availability: availability.get(&format!("node:{}", n.id)).cloned().unwrap_or_default(),
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
        frame: Frame::new(&v, format!("Cluster {}", c.name), "clusters", 10).reading(&api),
        listeners: listeners_text(&c),
        listeners_form: c
            .listeners
            .iter()
            .map(|l| {
                format!("{}/{}{}", l.port, word(&l.protocol), if l.proxy_protocol { "/proxy" } else { "" })
            })
            .collect::<Vec<_>>()
            .join(" "),
        aliases: c.aliases.join(", "),
        required_links: c.required_links.join(", "),
        suspect_ttl: c.suspect_ttl.map(|t| t.to_string()).unwrap_or_default(),
        publishers: c.publishers.iter().map(publisher_line).collect::<Vec<_>>().join("\n"),
        checks: check_choices(checks.items.into_iter().map(|k| k.name).collect(), c.check_name.as_deref()),
        check_path: check_text(&c.probed_with.check),
        dns_revision: dns.revision.map(|n| format!("#{n}")).unwrap_or_else(|| "none yet".into()),
        dns_at: time_or(dns.at, at, ""),
        dns: dns
            .lines
            .iter()
            .map(|l| {
                let clients = describe_clients(&l.client_networks, &l.places);
                DnsRow {
                    line: l.name.clone(),
                    networks: if clients.is_empty() { "every other client".into() } else { clients },
                    records: strings(&l.records),
                    since: l.since.map_or_else(Markup::default, |t| time(t, at)),
                    held: l.held.as_ref().map(|h| (policy_word(h.policy), h.reason.clone())),
                }
            })
            .collect(),
        all: strings(&dns.all),
        groups: groups
            .items
            .iter()
            .map(|g| GroupRow {
                id: g.id,
                name: g.name.clone(),
                region: g.region.and_then(|r| region_names.get(&r).cloned()).unwrap_or_else(|| "—".into()),
                nodes: nodes.iter().filter(|n| n.group.0 == g.id).count(),
                drained: g.drained,
                values: serde_json::json!({"name": g.name, "region": g.region}).to_string(),
            })
            .collect(),
        all_down_choices: all_down_choices(),
        region_choices: regions.items.iter().map(|r| (r.id, format!("{} ({})", r.name, r.code))).collect(),
        region_codes: Value::Object(
            regions.items.iter().map(|r| (r.code.clone(), Value::from(r.id))).collect(),
        )
        .to_string(),
        lines: lines
            .items
            .iter()
            .map(|l| LineRow {
                values: serde_json::json!({
                    "name": l.name,
                    "group": l.group,
                    "backup_groups": l.backup_groups,
                    "min_healthy": l.min_healthy,
                    "client_networks": l.client_networks,
                    "countries": l.places.countries,
                    "continents": l.places.continents,
                    "asns": l.places.asns,
                    "all_down": l.all_down,
                    "latency_region": l.latency_region,
                })
                .to_string(),
                availability: availability.get(&format!("line:{id}/{}", l.id)).cloned().unwrap_or_default(),
                id: l.id,
                name: l.name.clone(),
                group: group_names.get(&l.group).cloned().unwrap_or_default(),
                backups: l
                    .backup_groups
                    .iter()
                    .map(|g| group_names.get(g).cloned().unwrap_or_else(|| format!("group {g}")))
                    .collect::<Vec<_>>()
                    .join(" → "),
                order: l.latency_region.map_or_else(
                    || "as configured".to_owned(),
                    |r| {
                        format!(
                            "by RTT from {}",
                            region_names.get(&r).cloned().unwrap_or_else(|| format!("region {r}"))
                        )
                    },
                ),
                min_healthy: l.min_healthy,
                networks: match describe_clients(&l.client_networks, &l.places) {
                    c if c.is_empty() => "default line".into(),
                    c => c,
                },
                all_down: l.all_down.as_str(),
            })
            .collect(),
        nodes: node_rows,
        events,
        revisions: revisions.items.into_iter().map(|r| revision_view(r, &revisions.lines, at)).collect(),
        rules: rules
            .items
            .iter()
            .map(|view| (view, &view.rule))
            .map(|(view, r)| RuleRow {
                id: view.id,
                values: serde_json::to_string(r).unwrap_or_default(),
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
        preview: preview.map_or(PreviewView::Missing, |p| preview_view(p, at)),
        dns_mode: word(&c.dns_mode),
        c,
    };
    Ok(render(&page))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A recovery to come reads as a countdown with the full time on hover, not as a raw
    /// timestamp; the other outcomes read as the API says them.
    #[test]
    fn a_recovery_to_come_reads_in_seconds() {
        let now = Timestamp::from_secs(1_800_000_000);
        let at = Timestamp::from_secs(1_800_000_012);
        let o = outcome(&Outcome::InEffectRecoversAt { at }, format!("In effect, recovers {at}"), now);
        assert_eq!(o.0, format!("In effect, recovers {} at the earliest", time(at, now)));
        assert!(o.0.contains(">in 12 s</time>") && !o.0.contains(">2027"), "{o}");
        assert_eq!(outcome(&Outcome::NoChange, "No <change>".into(), now).0, "No &lt;change&gt;");
    }
}
