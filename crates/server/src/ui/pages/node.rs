//! One node: its addresses, agent, metrics, results and history charts.

use super::*;
use vantage_core::reachability::Tally;

#[derive(Debug)]
struct AddressRow {
    ip: String,
    level: String,
    source: String,
    reachability: Markup,
    /// The streak under way and since when: `Failing · unreachable in 12 s`.
    condition: Markup,
    in_use: bool,
    /// How each region's counting probers see it, by region code in the page's column order.
    cells: Vec<(String, Markup)>,
    /// How every counting prober sees it.
    all: Markup,
    /// Flap damping multiplier (1: not damped).
    damping: u32,
}

/// What counting probers make of an address, as a matrix cell: `ok`, `failing 2/3` (red for
/// a strict majority of them, amber for fewer), or `no data` when none counts; the title
/// says it in words.
fn seen_from(v: &Tally, from: &str) -> Markup {
    let (tone, text) = match (v.failing, v.counting) {
        (_, 0) => (Tone::Neutral, "no data".to_owned()),
        (0, _) => (Tone::Good, "ok".to_owned()),
        (f, c) => (if v.is_failing() { Tone::Bad } else { Tone::Warn }, format!("failing {f}/{c}")),
    };
    let title = if v.counting == 0 {
        format!("No result from {from} counts now")
    } else {
        format!("{} of {} counting probers {from} see it failing", v.failing, v.counting)
    };
    Markup(format!("<span title=\"{}\">{}</span>", esc(&title), badge(tone, &text)))
}

/// The matrix's region columns, `(code, name)` by code: every region some address is seen
/// from (the same prober regions for each address of a node).
fn region_columns(addresses: &[views::AddressView]) -> Vec<(String, String)> {
    let columns: BTreeMap<&str, &str> =
        addresses.iter().flat_map(|a| &a.regions).map(|r| (r.code.as_str(), r.name.as_str())).collect();
    columns.into_iter().map(|(c, n)| (c.to_owned(), n.to_owned())).collect()
}

fn address_row(a: &views::AddressView, columns: &[(String, String)], at: Timestamp) -> AddressRow {
    let cells = columns
        .iter()
        .map(|(code, name)| {
            let cell = a.regions.iter().find(|r| &r.code == code).map_or_else(
                || Markup("<span class=\"muted\">—</span>".into()),
                |r| seen_from(&r.probers, &format!("in {name}")),
            );
            (code.clone(), cell)
        })
        .collect();
    AddressRow {
        ip: a.ip.to_string(),
        level: match a.line {
            // A line's target address has no level: it stands in for the node on that line.
            Some(l) => format!("Target of line {l}"),
            None => level(&word(&a.level)),
        },
        source: if a.source == AddressSource::Configured { "Configured".into() } else { "Reported".into() },
        reachability: format::reachability(a.reachability.map(|r| word(&r)).as_deref()),
        condition: condition(a, at),
        in_use: a.in_use,
        damping: a.damping,
        cells,
        all: a
            .probers
            .as_ref()
            .map_or_else(|| badge(Tone::Neutral, "not evaluated"), |v| seen_from(v, "in every region")),
    }
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
        // A new address: out of DNS until a strict majority of the probers sees it answer, or
        // serving unverified when no prober checks the cluster.
        (Some(AddressCondition::Unverified), _, _) if a.in_use => Markup(format!(
            "{} <span class=\"muted small\">serves: no prober checks it yet</span>",
            badge(Tone::Warn, "Unverified")
        )),
        // A typo or a closed port: say that the probers see it failing.
        (Some(AddressCondition::Unverified), _, _) if a.probers.is_some_and(|v| v.is_failing()) => {
            let v = a.probers.unwrap_or_default();
            Markup(format!(
                "{} <span class=\"muted small\">out of DNS: {} of {} probers see it failing</span>",
                badge(Tone::Bad, "Unverified"),
                v.failing,
                v.counting
            ))
        }
        (Some(AddressCondition::Unverified), _, _) => Markup(format!(
            "{} <span class=\"muted small\">out of DNS until the probers see it answer</span>",
            badge(Tone::Warn, "Unverified")
        )),
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
    level_since: Markup,
    addresses: Vec<AddressRow>,
    /// The matrix's region columns: `(code, name)`.
    regions: Vec<(String, String)>,
    results: Vec<ResultView>,
    results_by_prober: bool,
    ranges: Vec<(&'static str, &'static str, bool)>,
    charts: Vec<(String, ChartView)>,
    history_error: String,
    events: Vec<timeline::EventRow>,
    /// The configured addresses as the editor shows them, one a line.
    address_text: String,
    /// The cluster's lines by name, as JSON, for the editor's `@LINE`.
    lines_json: String,
    /// Its availability bars (90 days), each window's figure, and its incidents.
    availability: Markup,
    windows: Vec<(String, String)>,
    incidents: Vec<(Markup, Markup, String)>,
    /// The groups it may move to: (id, name).
    group_choices: Vec<(i64, String)>,
}

/// The configured addresses as the editor takes them: `IP LEVEL`, or `IP @LINE` for a line's
/// target address, `trusted` after either when set; one a line.
fn address_text(configured: &[vantage_core::address::SchedulingAddress], lines: &[views::Line]) -> String {
    configured
        .iter()
        .map(|a| {
            let mut row = match a.line {
                Some(l) => {
                    let name = lines
                        .iter()
                        .find(|x| x.id == l.0)
                        .map_or_else(|| l.0.to_string(), |x| x.name.clone());
                    format!("{} @{name}", a.ip)
                }
                None => format!("{} {}", a.ip, a.level.as_str()),
            };
            if a.trusted {
                row.push_str(" trusted");
            }
            row
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// One series as a chart line, with what its legend says now: the latest round (every
/// prober's newest result that still counts), not the newest bucket, which on a wide range
/// still averages an outage in after the recovery.
fn series_line(
    label: String,
    points: &[views::SeriesPoint],
    latest: Option<&views::SeriesPoint>,
    rtt: bool,
) -> (chart::Line, String) {
    let value = |p: &views::SeriesPoint| if rtt { p.rtt_ms } else { Some(p.loss_pct) };
    let note = match latest {
        Some(p) => match value(p) {
            Some(v) => format!("now {}", if rtt { ms(Some(v)) } else { pct(v) }),
            None => "no answer now".to_owned(),
        },
        None => "no result now".to_owned(),
    };
    (chart::Line { label, points: points.iter().map(|p| (p.at, value(p))).collect() }, note)
}

fn chart_view(
    title: &str,
    unit: &str,
    (h, marks): (&views::History, &[chart::Mark]),
    lines: Vec<(chart::Line, String)>,
) -> ChartView {
    let (lines, notes): (Vec<chart::Line>, Vec<String>) = lines.into_iter().unzip();
    let max = (unit == "%").then_some(100.0);
    let chart = Chart {
        title,
        unit,
        since: h.since,
        until: h.until,
        bucket_s: h.bucket_s,
        max,
        lines: &lines,
        marks,
    };
    ChartView::with_notes(&chart, notes)
}

/// Loss and RTT by address, then each address by prober region: an address's own regions,
/// so that a primary down everywhere reads 100 % beside a backup that answers, rather than
/// the two averaged into 50 %.
fn node_charts(h: &views::History, range: Range, marks: &[chart::Mark]) -> Vec<(String, ChartView)> {
    let span = format!("last {}", range.label());
    let name = |a: &views::AddressSeries| format!("{} ({})", a.ip, level(&word(&a.level)));
    let by_address =
        |rtt| h.addresses.iter().map(|a| series_line(name(a), &a.points, a.latest.as_ref(), rtt)).collect();
    let by_region = |a: &views::AddressSeries, rtt| {
        a.regions
            .iter()
            .map(|r| {
                let label = match (&r.name, &r.code) {
                    (Some(n), Some(c)) => format!("{n} ({c})"),
                    _ => "no region".into(),
                };
                series_line(label, &r.points, r.latest.as_ref(), rtt)
            })
            .collect()
    };
    let mut charts = vec![
        (
            format!("Loss by address, {span}"),
            chart_view("Loss by address", "%", (h, marks), by_address(false)),
        ),
        (format!("RTT by address, {span}"), chart_view("RTT by address", "ms", (h, marks), by_address(true))),
    ];
    for a in &h.addresses {
        for (what, unit, rtt) in [("Loss", "%", false), ("RTT", "ms", true)] {
            let title = format!("{what} of {} by prober region", name(a));
            charts
                .push((format!("{title}, {span}"), chart_view(&title, unit, (h, marks), by_region(a, rtt))));
        }
    }
    charts
}

pub(in crate::ui) async fn node(
    Extension(ui): Extension<Arc<Ui>>,
    Extension(v): Extension<Visitor>,
    Path(id): Path<i64>,
    Query(q): Query<RangeQuery>,
) -> PageResult {
    let api = client(&ui, &v);
    let at = now();
    let n: views::Node = api.get(&format!("/v1/nodes/{id}")).await?;
    let range = q.range(n.created_at, at);
    let c: views::Cluster = api.get(&format!("/v1/clusters/{}", n.cluster)).await?;
    let groups: Items<views::Group> = api.get(&format!("/v1/clusters/{}/groups", n.cluster)).await?;
    let regions: Items<views::Region> = api.get("/v1/regions").await?;
    let configured: views::Addresses = api.get(&format!("/v1/nodes/{id}/addresses")).await?;
    let lines: Items<views::Line> = api.get(&format!("/v1/clusters/{}/lines", n.cluster)).await?;
    let results: Items<views::ResultRow> = api.get(&format!("/v1/nodes/{id}/results")).await?;
    let report: views::Availability = api.get(&format!("/v1/availability/node:{id}")).await?;
    let history: Result<views::History, PageError> =
        api.get(&format!("/v1/nodes/{id}/history?range={}", range.name())).await;
    let names = region_names(&regions.items);
    let events = timeline::recent(&api, &format!("node={id}"), at).await?;
    let h = health(&n);
    let (charts, history_error) = match history {
        Ok(hist) => {
            let marks = timeline::marks(&api, (n.cluster.0, id), (hist.since, hist.until)).await?;
            (node_charts(&hist, range, &marks), String::new())
        }
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
    let columns = region_columns(&n.addresses);
    let page = NodePage {
        frame: Frame::new(&v, format!("Node {}", n.name), "clusters", 10).reading(&api),
        cluster: c.name,
        group: groups.items.iter().find(|g| g.id == n.group.0).map(|g| g.name.clone()).unwrap_or_default(),
        group_choices: groups.items.iter().map(|g| (g.id, g.name.clone())).collect(),
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
        level_since: n.level_since.map_or_else(Markup::default, |t| Markup(format!("since {}", time(t, at)))),
        events,
        addresses: n.addresses.iter().map(|a| address_row(a, &columns, at)).collect(),
        regions: columns,
        results: results.items.iter().map(|r| result_view(r, true, &names, at)).collect(),
        results_by_prober: true,
        ranges: range_tabs(range),
        charts,
        history_error,
        address_text: address_text(&configured.configured, &lines.items),
        lines_json: serde_json::to_string(
            &lines.items.iter().map(|l| (l.name.clone(), l.id)).collect::<BTreeMap<String, i64>>(),
        )
        .unwrap_or_default(),
        availability: format::bars(&report),
        windows: (report.windows.iter())
            .map(|w| {
                let pct =
                    w.times.availability_pct.map_or_else(|| "no data".to_owned(), |p| format!("{p:.3}%"));
                (w.window.clone(), pct)
            })
            .collect(),
        incidents: (report.incidents.iter())
            .map(|i| (time(i.start, at), time_or(i.end, at, "ongoing"), i.cause.clone()))
            .collect(),
        n,
    };
    Ok(render(&page))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cell_says_ok_failing_or_no_data() {
        let v = |failing, counting| Tally { counting, failing, ..Tally::default() };
        let text = |m: Markup| {
            let inner = m.0.split_once("\">").map_or(String::new(), |(_, r)| r.to_owned());
            let inner = inner.split_once("\">").map_or(String::new(), |(_, r)| r.to_owned());
            inner.trim_end_matches("</span></span>").to_owned()
        };
        assert_eq!(text(seen_from(&v(0, 2), "in Singapore")), "ok");
        assert_eq!(text(seen_from(&v(2, 3), "in Singapore")), "failing 2/3");
        assert_eq!(text(seen_from(&v(0, 0), "in Singapore")), "no data");
        assert!(seen_from(&v(2, 3), "in X").0.contains("badge bad"), "a majority of them");
        assert!(seen_from(&v(1, 3), "in X").0.contains("badge warn"), "a minority");
        assert!(
            seen_from(&v(1, 3), "in <X>")
                .0
                .contains("title=\"1 of 3 counting probers in &lt;X&gt; see it failing\"")
        );
    }
}
