//! The monitors (SPEC §7): every monitor with its global verdict and weights, and one monitor
//! with the weights against its budgets, each region's health tuple, the steering order, the
//! verdict changes and per-region history charts of segment age and failures.

use super::*;
use vantage_core::monitor::MonitorInput;
use vantage_core::monitor::Weighting;

/// How the weights stand against the budgets. The colours are the verdict's own reasons
/// (down budget spent, stale budget spent), so the badge that turns red or amber is the one
/// that explains the verdict.
#[derive(Debug)]
struct Weights {
    down: Markup,
    stale: Markup,
}

fn weights(v: &views::MonitorVerdict, m: &vantage_core::monitor::Monitor) -> Weights {
    let down = v.down_weight * 100.0;
    let stale = v.stale_weight * 100.0;
    Weights {
        down: format::against_budget(down, m.down_weight_budget_pct, v.reasons.down_budget_spent, Tone::Bad),
        stale: format::against_budget(
            stale,
            m.stale_weight_budget_pct,
            v.reasons.stale_budget_spent,
            Tone::Warn,
        ),
    }
}

/// A monitor's row on the list.
#[derive(Debug)]
struct MonitorRow {
    id: i64,
    name: String,
    verdict: Markup,
    since: Markup,
    regions: usize,
    weights: Weights,
    /// Its availability bars.
    availability: Markup,
    /// Its fields as the API takes them, for the form that edits it.
    values: String,
}

#[derive(Template)]
#[template(path = "monitors.html")]
struct MonitorsPage {
    frame: Frame,
    monitors: Vec<MonitorRow>,
    /// The named checks a monitor may name.
    checks: Vec<String>,
}

pub(in crate::ui) async fn monitors(
    Extension(ui): Extension<Arc<Ui>>,
    Extension(v): Extension<Visitor>,
) -> PageResult {
    let api = client(&ui, &v);
    let at = now();
    let list: Items<views::Monitor> = api.get("/v1/monitors").await?;
    let checks: Items<views::Check> = api.get("/v1/checks").await?;
    let availability: Items<views::Availability> = api.get("/v1/availability?kind=monitor").await?;
    let bars: HashMap<String, Markup> =
        availability.items.iter().map(|r| (r.subject.clone(), format::bars(r))).collect();
    let mut rows = Vec::with_capacity(list.items.len());
    for m in &list.items {
        // The list carries the verdict but not the weights behind it; a monitor deleted
        // between the two reads is left out.
        let Some(verdict) =
            api.get_optional::<views::MonitorVerdict>(&format!("/v1/monitors/{}/verdict", m.id)).await?
        else {
            continue;
        };
        rows.push(MonitorRow {
            id: m.id,
            name: m.monitor.name.clone(),
            verdict: format::monitor_verdict(verdict.global.map(|g| g.to_string()).as_deref()),
            since: time_or(verdict.since, at, "no probe yet"),
            regions: m.monitor.regions.len(),
            weights: weights(&verdict, &m.monitor),
            availability: bars.get(&format!("monitor:{}", m.id)).cloned().unwrap_or_default(),
            values: serde_json::to_string(&MonitorInput::from(m.monitor.clone())).unwrap_or_default(),
        });
    }
    let page = MonitorsPage {
        frame: Frame::new(&v, "Monitors", "monitors", 10),
        monitors: rows,
        checks: checks.items.into_iter().map(|c| c.name).collect(),
    };
    Ok(render(&page))
}

/// One region of a monitor: its weight, health and the tuple of its newest probe.
#[derive(Debug)]
struct RegionRow {
    code: String,
    /// `Singapore (ap-sg)`, or the code of a region deleted since.
    name: String,
    pathway: String,
    /// Share of the audience.
    weight: String,
    /// Its share learned from demand, and what the verdict weighs it by.
    learned: String,
    health: Markup,
    /// `1 of 5`: failing probes among the window's.
    failures: String,
    reachable: Markup,
    manifest: Markup,
    segment: Markup,
    /// The newest probe's segment age, and the window's worst when it is older (staleness
    /// goes by the worst).
    age: String,
    ttfb: String,
    probed: Markup,
}

/// Region `i`'s learned share and the share the verdict weighs it by, when the monitor learns
/// (`—` when it weighs by the configured weights alone, or has seen no demand yet).
fn learned(v: &views::MonitorVerdict, i: usize) -> String {
    let (Some(l), Some(e)) = (v.weights.learned.as_ref().and_then(|l| l.get(i)), v.weights.effective.get(i))
    else {
        return "—".to_owned();
    };
    let requests = v.demand.get(i).copied().unwrap_or(0);
    match v.weighting {
        Weighting::Fixed => format!("{} of {requests} requests (not used)", pct(*l)),
        _ => format!("{} of {requests} requests · weighs {}", pct(*l), pct(*e)),
    }
}

fn region_row(
    r: &views::RegionVerdict,
    total_weight: f64,
    names: &HashMap<String, String>,
    at: Timestamp,
) -> RegionRow {
    let mut age = format::seconds(r.segment_age_s);
    if let Some(worst) = r.worst_age_s
        && r.segment_age_s.is_none_or(|a| worst > a)
    {
        age.push_str(&format!(" (worst {})", format::seconds(Some(worst))));
    }
    let share = if total_weight > 0.0 { r.weight * 100.0 / total_weight } else { 0.0 };
    RegionRow {
        code: r.region.clone(),
        name: names.get(&r.region).cloned().unwrap_or_else(|| r.region.clone()),
        pathway: r.pathway.clone(),
        weight: format!("{} ({})", num(r.weight), pct(share)),
        learned: "—".to_owned(),
        health: format::region_health(&word(&r.health)),
        failures: format!("{} of {}", r.failures, r.probes),
        reachable: format::yes_no(r.reachable),
        manifest: format::yes_no(r.manifest_valid),
        segment: format::yes_no(r.segment_fetchable),
        age,
        ttfb: ms(r.ttfb_ms),
        probed: time_or(r.at, at, "no probe yet"),
    }
}

/// One change of the global verdict.
#[derive(Debug)]
struct ChangeRow {
    at: Markup,
    verdict: Markup,
    down: String,
    stale: String,
}

#[derive(Template)]
#[template(path = "monitor.html")]
struct MonitorPage {
    frame: Frame,
    name: String,
    /// The name as a URL path segment.
    path: String,
    verdict: Markup,
    since: Markup,
    weights: Weights,
    check: String,
    /// `3 of the last 5 probes`.
    quorum: String,
    max_age: String,
    steering_ttl_s: u32,
    /// What the verdict weighs regions by, in words.
    weighting: String,
    regions: Vec<RegionRow>,
    steering: Vec<String>,
    /// Steered by the client's region: each region and its players' order, in words.
    steering_by_region: Vec<(String, String)>,
    ranges: Vec<(&'static str, &'static str, bool)>,
    /// Newest first.
    changes: Vec<ChangeRow>,
    charts: Vec<(String, ChartView)>,
    history_error: String,
}

/// The time axis of a history, as the API buckets it: whole buckets, the last one holding
/// now, over the range's length.
fn axis(range: &str, at: Timestamp) -> (Timestamp, Timestamp) {
    Range::parse(range).unwrap_or(Range::Hour).window(at)
}

/// Top of the failures axis: a multiple of five, so that its five grid steps are whole
/// probes.
fn failures_top(h: &views::MonitorHistory) -> f64 {
    let most = h.regions.iter().flat_map(|r| r.points.iter().map(|p| p.failures)).max().unwrap_or(0);
    f64::from(most.max(1).div_ceil(5) * 5)
}

/// Two charts, one line per region: the worst segment age of each bucket (against the
/// monitor's maximum), and the failing probes in it.
fn monitor_charts(
    h: &views::MonitorHistory,
    max_age_s: u32,
    names: &HashMap<String, String>,
    at: Timestamp,
) -> Vec<(String, ChartView)> {
    let (since, until) = axis(&h.range, at);
    let lines = |f: &dyn Fn(&crate::views::MonitorPoint) -> Option<f64>| -> Vec<chart::Line> {
        h.regions
            .iter()
            .map(|r| chart::Line {
                label: names.get(&r.region).cloned().unwrap_or_else(|| r.region.clone()),
                points: r.points.iter().map(|p| (p.at, f(p))).collect(),
            })
            .collect()
    };
    let ages = lines(&|p| p.max_age_s);
    let failures = lines(&|p| Some(f64::from(p.failures)));
    let chart = |title, unit, max, lines| Chart {
        title,
        unit,
        since,
        until,
        bucket_s: h.bucket_s,
        max,
        lines,
        marks: &[],
    };
    let span =
        format!("last {}", Range::parse(&h.range).map_or_else(|_| h.range.clone(), |r| r.label().to_owned()));
    let limit = format::seconds(Some(f64::from(max_age_s)));
    vec![
        (
            format!("Segment age (worst per bucket) by region, {span}; stale above {limit}"),
            ChartView::new(&chart("Segment age by region", "s", None, &ages), |v| format::seconds(Some(v))),
        ),
        (
            format!("Failing probes per bucket by region, {span}"),
            ChartView::new(&chart("Failing probes by region", "", Some(failures_top(h)), &failures), num),
        ),
    ]
}

pub(in crate::ui) async fn monitor(
    Extension(ui): Extension<Arc<Ui>>,
    Extension(v): Extension<Visitor>,
    Path(id): Path<i64>,
    Query(q): Query<RangeQuery>,
) -> PageResult {
    let api = client(&ui, &v);
    let at = now();
    let m: views::Monitor = api.get(&format!("/v1/monitors/{id}")).await?;
    let range = q.range(m.created_at, at);
    let verdict: views::MonitorVerdict = api.get(&format!("/v1/monitors/{id}/verdict")).await?;
    let regions: Items<views::Region> = api.get("/v1/regions").await?;
    // The history is the store's: while it is away the page says changes are paused and shows
    // the rest, from memory.
    let history: Result<Option<views::MonitorHistory>, PageError> =
        api.get_stored(&format!("/v1/monitors/{id}/history?range={}", range.name())).await;
    let names: HashMap<String, String> =
        regions.items.iter().map(|r| (r.code.clone(), format!("{} ({})", r.name, r.code))).collect();
    let (charts, changes, history_error) = match history {
        Ok(None) => (Vec::new(), Vec::new(), String::new()),
        Ok(Some(h)) => {
            let changes = h
                .verdicts
                .iter()
                .rev()
                .map(|c| ChangeRow {
                    at: time(c.at, at),
                    verdict: format::monitor_verdict(Some(&c.verdict.global.to_string())),
                    down: pct(c.verdict.down_weight_pct),
                    stale: pct(c.verdict.stale_weight_pct),
                })
                .collect();
            (monitor_charts(&h, m.monitor.max_segment_age_s, &names, at), changes, String::new())
        }
        Err(PageError::LoggedOut) => return Err(PageError::LoggedOut),
        Err(PageError::NotFound(e) | PageError::Failed(_, e)) => (Vec::new(), Vec::new(), e),
    };
    let def = &m.monitor;
    let total: f64 = def.regions.iter().map(|r| r.weight).sum();
    let probed = &m.probed_with;
    let check = match probed.check.method() {
        Some(method) => format!("{} every {} s", word(&method), probed.check.interval_s()),
        None => format!("every {} s", probed.check.interval_s()),
    };
    let check = format!("{check} · {}", probed.source_phrase());
    let page = MonitorPage {
        frame: Frame::new(&v, format!("Monitor {}", def.name), "monitors", 10).reading(&api),
        name: def.name.clone(),
        path: urlencode(&def.name),
        verdict: format::monitor_verdict(verdict.global.map(|g| g.to_string()).as_deref()),
        since: time_or(verdict.since, at, "no probe yet"),
        weights: weights(&verdict, def),
        check,
        weighting: match def.weighting {
            Weighting::Fixed => "as configured".to_owned(),
            w => format!(
                "{} from the demand of the last day, at least {} a region{}",
                if w == Weighting::Learned {
                    "learned"
                } else {
                    "the mean of the configured and those learned"
                },
                pct(def.learned_floor_pct),
                if verdict.weights.learned.is_none() { " (no demand seen yet: as configured)" } else { "" }
            ),
        },
        quorum: format!("{} of the last {} probes", def.failure_quorum, def.quorum_window),
        max_age: format::seconds(Some(f64::from(def.max_segment_age_s))),
        steering_ttl_s: def.steering_ttl_s,
        regions: (verdict.regions.iter().enumerate())
            .map(|(i, r)| RegionRow { learned: learned(&verdict, i), ..region_row(r, total, &names, at) })
            .collect(),
        steering: verdict.pathway_priority,
        steering_by_region: (verdict.pathway_priority_by_region.into_iter())
            .map(|(region, order)| (region, order.join(" → ")))
            .collect(),
        ranges: range_tabs(range),
        changes,
        charts,
        history_error,
    };
    Ok(render(&page))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn region_verdict(v: Value) -> views::RegionVerdict {
        let mut base = serde_json::json!({
            "region": "ap-sg", "weight": 3.0, "pathway": "cdn-a", "health": "unknown", "failures": 0,
            "probes": 0, "worst_age_s": null, "reachable": null, "manifest_valid": null,
            "segment_fetchable": null, "segment_age_s": null, "ttfb_ms": null, "at": null,
        });
        if let (Some(b), Value::Object(o)) = (base.as_object_mut(), v) {
            b.extend(o);
        }
        serde_json::from_value(base).unwrap()
    }

    /// Before any probe a region reads unknown with dashes; after one, its tuple, and the
    /// window's worst age beside the newest when it is older.
    #[test]
    fn a_region_row_reads_its_tuple() {
        let at = Timestamp::from_secs(1_800_000_000);
        let names = HashMap::from([("ap-sg".to_owned(), "Singapore (ap-sg)".to_owned())]);
        let r = region_row(&region_verdict(serde_json::json!({})), 4.0, &names, at);
        assert_eq!(
            (r.name.as_str(), r.weight.as_str(), r.failures.as_str()),
            ("Singapore (ap-sg)", "3 (75 %)", "0 of 0")
        );
        assert_eq!(r.health.0, "<span class=\"badge neutral\">unknown</span>");
        assert_eq!((r.age.as_str(), r.ttfb.as_str()), ("—", "—"));
        assert!(r.probed.0.contains("no probe yet"));
        let r = region_row(
            &region_verdict(serde_json::json!({
                "region": "eu-gone", "health": "stale", "failures": 1, "probes": 5, "worst_age_s": 600.0,
                "reachable": true, "manifest_valid": true, "segment_fetchable": false, "segment_age_s": 2.0,
                "ttfb_ms": 12.34, "at": "2027-01-15T07:59:48Z",
            })),
            3.0,
            &names,
            at,
        );
        assert_eq!(r.name, "eu-gone", "a deleted region keeps its code");
        assert_eq!(
            (r.age.as_str(), r.ttfb.as_str(), r.failures.as_str()),
            ("2.0 s (worst 10 min)", "12.3 ms", "1 of 5")
        );
        assert_eq!(r.segment.0, "<span class=\"badge bad\">no</span>");
        assert_eq!(r.health.0, "<span class=\"badge warn\">stale</span>");
    }

    /// The failures axis tops at a multiple of five, at least five.
    #[test]
    fn the_failures_axis_steps_by_whole_probes() {
        let h = |failures: &[u32]| -> views::MonitorHistory {
            let points: Vec<Value> = failures
                .iter()
                .map(|f| serde_json::json!({"at": "2027-01-15T07:59:40Z", "probes": 9, "failures": f, "max_age_s": null, "ttfb_ms": null}))
                .collect();
            serde_json::from_value(serde_json::json!({
                "range": "1h", "bucket_s": 20, "regions": [{"region": "ap-sg", "points": points}], "verdicts": [],
            }))
            .unwrap()
        };
        assert_eq!(failures_top(&h(&[])), 5.0);
        assert_eq!(failures_top(&h(&[0, 2])), 5.0);
        assert_eq!(failures_top(&h(&[7, 1])), 10.0);
    }

    /// The axis ends at the end of the bucket holding now and spans the range.
    #[test]
    fn the_time_axis_is_whole_buckets() {
        let at = Timestamp::from_millis(1_800_000_010_500);
        let (since, until) = axis("1h", at);
        assert_eq!(until.millis(), 1_800_000_020_000);
        assert_eq!(until.millis_since(since), 3_600_000);
        let (since, until) = axis("14d", at);
        assert_eq!(until.millis_since(since), 14 * 86_400_000);
    }
}
