//! One node: its addresses, agent, metrics, results and history charts.

use super::*;

#[derive(Debug)]
struct AddressRow {
    ip: String,
    level: String,
    source: String,
    reachability: Markup,
    /// The streak under way and since when: `Failing · unreachable in 12 s`.
    condition: Markup,
    in_use: bool,
    probers: String,
    /// Flap damping multiplier (1: not damped).
    damping: u32,
}

/// What an address's reachability is about to do, and since when it has been so: failing (a
/// majority sees it, not yet unreachable) or recovering with the time it changes, else since
/// when it has been reachable or unreachable.
fn condition(a: &views::AddressView, now: Timestamp) -> Markup {
    let streak = |tone, label: &str, then: &str, at: Timestamp| {
        Markup(format!("{} {then} {}", badge(tone, label), time(at, now)))
    };
    match (a.condition, a.changes_at, a.since) {
        (Some(AddressCondition::Failing), Some(at), _) => streak(Tone::Warn, "Failing", "· unreachable", at),
        (Some(AddressCondition::Recovering), Some(at), _) => {
            streak(Tone::Warn, "Recovering", "· reachable", at)
        }
        (_, _, Some(since)) => {
            Markup(format!("<span class=\"muted small\">since {}</span>", time(since, now)))
        }
        _ => Markup::default(),
    }
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

fn chart_view(
    title: &str,
    unit: &str,
    h: &views::History,
    max: Option<f64>,
    lines: Vec<chart::Line>,
) -> ChartView {
    let chart =
        Chart { title, unit, since: h.since, until: h.until, bucket_s: h.bucket_s, max, lines: &lines };
    ChartView::new(&chart, |v| if unit == "ms" { ms(Some(v)) } else { pct(v) })
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

pub(in crate::ui) async fn node(
    Extension(ui): Extension<Arc<Ui>>,
    Extension(v): Extension<Visitor>,
    Path(id): Path<i64>,
    Query(q): Query<RangeQuery>,
) -> PageResult {
    let api = client(&ui, &v);
    let at = now();
    let range = q.range();
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
                condition: condition(a, at),
                in_use: a.in_use,
                damping: a.damping,
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
